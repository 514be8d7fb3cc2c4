//! Meters the benchmarks share: CPU of named threads and of other processes (`--pid NAME=PID`,
//! read from `/proc` as `ps` does, since a benchmark against another cluster does not own its
//! processes), the API server's request counters, and the controllers on a runtime of their own
//! (so their CPU can be told apart from the server's).

use crate::components::Components;
use std::{collections::BTreeMap, str::FromStr};

/// USER_HZ, the unit of `utime` and `stime` in `/proc/PID/stat` (`getconf CLK_TCK`): Linux
/// fixes it at 100 for user space on every architecture, whatever the kernel's own HZ.
pub const CLOCK_TICKS_PER_SECOND: f64 = 100.0;

/// The thread-name prefix of the controllers' runtime.
pub const CONTROLLER_THREADS: &str = "rw-controllers";

/// User + system CPU seconds of this process's threads whose name starts with `prefix` (Linux
/// cuts names to 15 bytes), from `/proc/self/task/*/stat` in USER_HZ (100 on Linux).
pub fn threads_cpu_seconds(prefix: &str) -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    let mut total = 0.0;
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if !stat[open + 1..close].starts_with(prefix) {
            continue;
        }
        total += stat_cpu_seconds(&stat).unwrap_or(0.0);
    }
    total
}

/// User + system CPU seconds of another process (an etcd member a benchmark started), from
/// `/proc/PID/stat` in USER_HZ; 0 when it is gone.
pub fn process_cpu_seconds(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat_cpu_seconds(&stat))
        .unwrap_or(0.0)
}

/// User + system seconds from a `/proc/PID/stat` line: `utime` and `stime`, fields 14 and 15,
/// counted after the command's last `)` because the command itself may hold spaces and `)`.
pub fn stat_cpu_seconds(stat: &str) -> Option<f64> {
    let fields = &stat[stat.rfind(')')? + 1..];
    let mut ticks = fields.split_whitespace().skip(11);
    let utime: u64 = ticks.next()?.parse().ok()?;
    let stime: u64 = ticks.next()?.parse().ok()?;
    Some((utime + stime) as f64 / CLOCK_TICKS_PER_SECOND)
}

/// Peak resident set size of another process, in bytes (`VmHWM`).
pub fn process_peak_rss(pid: u32) -> Option<u64> {
    vm_hwm_bytes(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
}

/// `VmHWM` (the peak resident set size) from a `/proc/PID/status` text, in bytes.
pub fn vm_hwm_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Three decimals, enough for seconds, milliseconds and MiB, so that the benches' JSON lines
/// stay short.
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// What the watched processes used, as the benches' JSON lines carry it (`tools/perf-table.py`
/// and `tools/api-perf-table.py` read them); `peak_key` names the flag that says a peak is the
/// measurement's own (`peak_of_phase`, `peak_of_run`).
pub fn processes_json(processes: &[(String, ProcessUse)], peak_key: &str) -> serde_json::Value {
    processes
        .iter()
        .map(|(name, u)| {
            serde_json::json!({
                "name": name,
                "cpu_s": round3(u.cpu),
                "peak_rss_mib": round3(u.peak_rss_mib),
                peak_key: u.peak_of_window,
            })
        })
        .collect()
}

/// A process a benchmark measures without having started it (`--pid NAME=PID`): a component of
/// another control plane, `rollwright up`, simulated nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Watched {
    /// What the tables call it (`etcd`, `kube-apiserver`, `rollwright-up`).
    pub name: String,
    /// Its process id.
    pub pid: u32,
}

impl FromStr for Watched {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, pid) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?} is not NAME=PID"))?;
        if name.is_empty() {
            return Err(format!("{s:?} has no name before '='"));
        }
        let pid = pid
            .parse()
            .map_err(|e| format!("{s:?}: the process id {pid:?}: {e}"))?;
        Ok(Self {
            name: name.to_string(),
            pid,
        })
    }
}

/// A watched process at the start of a measurement.
#[derive(Clone, Copy, Debug)]
pub struct ProcessStart {
    /// Its CPU seconds then.
    cpu: f64,
    /// Whether its peak RSS was reset then (otherwise the peak read at the end is its peak since
    /// it started).
    peak_reset: bool,
}

/// What a watched process used between [`Watched::start`] and [`Watched::finish`].
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessUse {
    /// User + system CPU seconds.
    pub cpu: f64,
    /// Peak resident set size, MiB.
    pub peak_rss_mib: f64,
    /// Whether that peak is the measurement's own (false: the process's since it started,
    /// because the kernel refused to reset it).
    pub peak_of_window: bool,
}

impl Watched {
    /// Starts a measurement: resets the process's peak RSS (writing 5 to `clear_refs` sets
    /// `VmHWM` back to the current RSS; it needs the process's owner or root) and reads its CPU.
    pub fn start(&self) -> anyhow::Result<ProcessStart> {
        let peak_reset = std::fs::write(format!("/proc/{}/clear_refs", self.pid), "5").is_ok();
        Ok(ProcessStart {
            cpu: self.cpu_seconds()?,
            peak_reset,
        })
    }

    /// Ends a measurement begun with [`Watched::start`].
    pub fn finish(&self, start: ProcessStart) -> anyhow::Result<ProcessUse> {
        let cpu = self.cpu_seconds()?;
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .map_err(|e| self.gone(e))?;
        let peak = vm_hwm_bytes(&status)
            .ok_or_else(|| anyhow::anyhow!("{self}: no VmHWM in /proc/{}/status", self.pid))?;
        Ok(ProcessUse {
            cpu: cpu - start.cpu,
            peak_rss_mib: peak as f64 / 1_048_576.0,
            peak_of_window: start.peak_reset,
        })
    }

    /// Starts one measurement of every process in `procs` (see [`Watched::start`]).
    pub fn start_all<'a>(
        procs: impl IntoIterator<Item = &'a Watched>,
    ) -> anyhow::Result<Vec<ProcessStart>> {
        procs.into_iter().map(Watched::start).collect()
    }

    /// Ends a measurement begun with [`Watched::start_all`] over the same `procs`: what each used,
    /// by name.
    pub fn finish_all<'a>(
        procs: impl IntoIterator<Item = &'a Watched>,
        starts: Vec<ProcessStart>,
    ) -> anyhow::Result<Vec<(String, ProcessUse)>> {
        procs
            .into_iter()
            .zip(starts)
            .map(|(p, start)| Ok((p.name.clone(), p.finish(start)?)))
            .collect()
    }

    /// Whether the process runs `rollwright up` (the whole control plane the memory budget is
    /// for), read from its command line.
    pub fn runs_up(&self) -> bool {
        std::fs::read(format!("/proc/{}/cmdline", self.pid))
            .is_ok_and(|cmdline| is_rollwright_up(&cmdline))
    }

    fn cpu_seconds(&self) -> anyhow::Result<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid))
            .map_err(|e| self.gone(e))?;
        stat_cpu_seconds(&stat)
            .ok_or_else(|| anyhow::anyhow!("{self}: cannot read /proc/{}/stat", self.pid))
    }

    fn gone(&self, e: std::io::Error) -> anyhow::Error {
        anyhow::anyhow!("{self}: {e} (has the process exited?)")
    }
}

impl std::fmt::Display for Watched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (pid {})", self.name, self.pid)
    }
}

/// Whether a `/proc/PID/cmdline` (arguments separated by NUL) is a rollwright binary's `up`.
fn is_rollwright_up(cmdline: &[u8]) -> bool {
    let mut args = cmdline.split(|b| *b == 0);
    let program = args.next().unwrap_or_default();
    let name = program.rsplit(|b| *b == b'/').next().unwrap_or_default();
    name.starts_with(b"rollwright") && args.next() == Some(b"up".as_slice())
}

/// A one-member etcd on loopback for a benchmark with `--store etcd` and no `--etcd-servers`
/// (the member is stopped when this is dropped), with what it costs.
pub struct BenchEtcd {
    member: store::etcd::member::LocalCluster,
}

impl BenchEtcd {
    /// Starts the member.
    pub async fn start() -> anyhow::Result<Self> {
        let member = store::etcd::member::LocalCluster::start(1)
            .await
            .map_err(|e| anyhow::anyhow!("starting etcd for the benchmark: {e}"))?;
        Ok(Self { member })
    }

    /// The member's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.member.pid(0)
    }

    /// The member's client URLs.
    pub fn urls(&self) -> Vec<String> {
        self.member.client_urls()
    }

    /// `etcd <version>: CPU s, peak RSS MiB` for the report.
    pub fn report(&self) -> String {
        let pid = self.member.pid(0).unwrap_or(0);
        let version = std::process::Command::new("etcd")
            .arg("--version")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|v| v.lines().next().map(str::to_string))
            .unwrap_or_else(|| "etcd (version unknown)".into());
        format!(
            "{version}: CPU {:.2} s, peak RSS {:.0} MiB, data directory {:.1} MB (a process of its own, beside this one)",
            process_cpu_seconds(pid),
            process_peak_rss(pid).unwrap_or(0) as f64 / 1048576.0,
            dir_bytes(self.member.dir()) as f64 / 1e6
        )
    }
}

/// The bytes of the files under `dir`.
fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .fold(0, |sum, e| match e.metadata() {
            Ok(m) if m.is_dir() => sum + dir_bytes(&e.path()),
            Ok(m) => sum + m.len(),
            Err(_) => sum,
        })
}

/// Request counts by `(verb, resource)`, summed over codes and the other labels.
pub type Requests = BTreeMap<(String, String), u64>;

/// Parses `apiserver_request_total` samples out of a Prometheus text exposition, rollwright's or
/// kube-apiserver's. Upstream labels a request with the installer's verb (`POST`, `PUT`,
/// `WATCH`) and its subresource apart; rollwright with the authorization verb (`create`,
/// `update`) and `resource/subresource` in one label. Counts are keyed rollwright's way, so that
/// two servers' requests read alike.
pub fn parse_request_counts(text: &str) -> Requests {
    let mut counts = Requests::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
    {
        let (Some(labels_end), Some(value)) = (line.rfind('}'), line.rsplit(' ').next()) else {
            continue;
        };
        let label = |name: &str| {
            let key = format!("{name}=\"");
            let labels = &line[..labels_end];
            let at = labels
                .find(&format!(",{key}"))
                .map(|i| i + 1)
                .or_else(|| labels.find(&format!("{{{key}")).map(|i| i + 1))?
                + key.len();
            let len = labels[at..].find('"')?;
            Some(labels[at..at + len].to_string())
        };
        let (Some(verb), Some(mut resource), Ok(n)) =
            (label("verb"), label("resource"), value.parse::<f64>())
        else {
            continue;
        };
        if let Some(sub) = label("subresource").filter(|s| !s.is_empty()) {
            resource = format!("{resource}/{sub}");
        }
        *counts
            .entry((authorization_verb(&verb), resource))
            .or_insert(0) += n as u64;
    }
    counts
}

/// The authorization verb of upstream's metric verb (its `CleanVerb`): a create is `POST`, an
/// update `PUT`, a server-side apply `APPLY`, a watch of a collection `WATCH` or `WATCHLIST`.
fn authorization_verb(verb: &str) -> String {
    match verb {
        "POST" => "create".into(),
        "PUT" => "update".into(),
        "APPLY" => "patch".into(),
        "WATCHLIST" => "watch".into(),
        v => v.to_ascii_lowercase(),
    }
}

/// The server's request counters now.
pub async fn request_counts(client: &kube::Client) -> anyhow::Result<Requests> {
    let text = client
        .request_text(http::Request::get("/metrics").body(Vec::new())?)
        .await?;
    Ok(parse_request_counts(&text))
}

/// Requests made between two readings, largest first.
pub fn delta(before: &Requests, after: &Requests) -> Vec<(u64, String, String)> {
    let mut v: Vec<(u64, String, String)> = after
        .iter()
        .map(|(k, n)| {
            let was = before.get(k).copied().unwrap_or(0);
            (n.saturating_sub(was), k.0.clone(), k.1.clone())
        })
        .filter(|(n, ..)| *n > 0)
        .collect();
    v.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| (&a.1, &a.2).cmp(&(&b.1, &b.2))));
    v
}

/// Runs the controllers on their own runtime (threads named [`CONTROLLER_THREADS`]) over HTTPS
/// until `stop` fires.
pub fn spawn_controllers(
    kubeconfig: std::path::PathBuf,
    stop: tokio::sync::oneshot::Receiver<()>,
) -> anyhow::Result<std::thread::JoinHandle<anyhow::Result<()>>> {
    Ok(std::thread::Builder::new()
        .name(CONTROLLER_THREADS.into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name(CONTROLLER_THREADS)
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let kc = kube::config::Kubeconfig::read_from(&kubeconfig)?;
                let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
                let client = kube::Client::try_from(cfg)?;
                let running = crate::components::start(
                    client,
                    &Components {
                        controllers: Some(Default::default()),
                        ..Default::default()
                    },
                )?;
                let _ = stop.await;
                running.stop().await;
                anyhow::Ok(())
            })
        })?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_counts_sum_over_codes_and_read_only_the_request_family() {
        let text = r#"# TYPE apiserver_request_total counter
apiserver_request_total{verb="create",resource="pods",code="201"} 10
apiserver_request_total{verb="create",resource="pods",code="409"} 2
apiserver_request_total{code="200",resource="daemonsets",verb="patch"} 3
apiserver_request_duration_seconds_count{verb="create",resource="pods"} 99
"#;
        let got = parse_request_counts(text);
        let want: Requests = [
            (("create".to_string(), "pods".to_string()), 12),
            (("patch".to_string(), "daemonsets".to_string()), 3),
        ]
        .into();
        assert_eq!(got, want);
    }

    #[test]
    fn upstreams_counters_read_as_rollwrights() {
        let text = r#"apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 500
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 500
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="apps",resource="daemonsets",scope="resource",subresource="status",verb="PUT",version="v1"} 15
apiserver_request_total{code="0",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 4
"#;
        let got = parse_request_counts(text);
        let want: Requests = [
            (("create".to_string(), "pods".to_string()), 500),
            (("create".to_string(), "pods/binding".to_string()), 500),
            (("patch".to_string(), "pods/status".to_string()), 7),
            (("update".to_string(), "daemonsets/status".to_string()), 15),
            (("watch".to_string(), "pods".to_string()), 4),
        ]
        .into();
        assert_eq!(got, want);
    }

    #[test]
    fn stat_lines_give_utime_plus_stime_whatever_the_command_holds() {
        // Fields 14 and 15 (utime 250, stime 50 ticks); the command has a space and a ')'.
        let stat = "4242 (kube-apiserver) x) S 1 4242 4242 0 -1 4194560 9000 0 0 0 250 50 0 0 20 0 12 0 100 1000000 5000 18446744073709551615";
        assert_eq!(stat_cpu_seconds(stat), Some(3.0));
        assert_eq!(stat_cpu_seconds("4242 (etcd) S 1 2"), None);
        assert_eq!(stat_cpu_seconds("no command here"), None);
    }

    #[test]
    fn vm_hwm_is_read_in_bytes() {
        let status =
            "Name:\tetcd\nVmPeak:\t  900000 kB\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n";
        assert_eq!(vm_hwm_bytes(status), Some(204_800 * 1024));
        assert_eq!(vm_hwm_bytes("Name:\tkthreadd\n"), None);
    }

    #[test]
    fn watched_processes_are_name_equals_pid() {
        assert_eq!(
            "kube-apiserver=4242".parse(),
            Ok(Watched {
                name: "kube-apiserver".into(),
                pid: 4242
            })
        );
        assert!("kube-apiserver".parse::<Watched>().is_err());
        assert!("=4242".parse::<Watched>().is_err());
        assert!("etcd=x".parse::<Watched>().is_err());
    }

    #[test]
    fn rollwright_up_is_told_by_its_command_line() {
        assert!(is_rollwright_up(
            b"/work/rollwright-perf\0up\0--nodes\x00500\0"
        ));
        assert!(is_rollwright_up(b"rollwright\0up\0"));
        assert!(!is_rollwright_up(
            b"/work/rollwright-perf\0nodes\0--count\x00500\0"
        ));
        assert!(!is_rollwright_up(b"/usr/bin/etcd\0up\0"));
        assert!(!is_rollwright_up(b""));
    }

    #[test]
    fn this_process_can_be_watched() {
        let me = Watched {
            name: "test".into(),
            pid: std::process::id(),
        };
        let start = me.start().unwrap();
        let used = me.finish(start).unwrap();
        assert!(used.cpu >= 0.0 && used.peak_rss_mib > 0.0, "{used:?}");
        assert!(!me.runs_up());
    }

    #[test]
    fn deltas_skip_unchanged_counters_largest_first() {
        let before: Requests = [(("create".to_string(), "pods".to_string()), 5)].into();
        let after: Requests = [
            (("create".to_string(), "pods".to_string()), 15),
            (("delete".to_string(), "pods".to_string()), 20),
        ]
        .into();
        assert_eq!(
            delta(&before, &after),
            vec![
                (20, "delete".to_string(), "pods".to_string()),
                (10, "create".to_string(), "pods".to_string()),
            ]
        );
        assert!(delta(&after, &after).is_empty());
    }
}
