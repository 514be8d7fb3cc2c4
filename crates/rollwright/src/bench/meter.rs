//! Meters the benchmarks share: CPU of named threads, the API server's request counters, and
//! the controllers on a runtime of their own (so their CPU can be told apart from the server's).

use crate::components::Components;
use std::collections::BTreeMap;

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
        total += stat_cpu_seconds(&stat[close + 1..]);
    }
    total
}

/// User + system CPU seconds of another process (an etcd member a benchmark started), from
/// `/proc/PID/stat` in USER_HZ; 0 when it is gone.
pub fn process_cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    stat.rfind(')')
        .map_or(0.0, |close| stat_cpu_seconds(&stat[close + 1..]))
}

/// User + system seconds from the fields of a `stat` line after the command's `)` (`utime` and
/// `stime`, in USER_HZ, 100 on Linux).
fn stat_cpu_seconds(fields: &str) -> f64 {
    let fields: Vec<f64> = fields
        .split_whitespace()
        .map(|s| s.parse().unwrap_or(0.0))
        .collect();
    (fields.get(11).unwrap_or(&0.0) + fields.get(12).unwrap_or(&0.0)) / 100.0
}

/// Peak resident set size of another process, in bytes (`VmHWM`).
pub fn process_peak_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
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

/// Parses `apiserver_request_total` samples out of a Prometheus text exposition.
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
        let (Some(verb), Some(resource), Ok(n)) =
            (label("verb"), label("resource"), value.parse::<f64>())
        else {
            continue;
        };
        *counts.entry((verb, resource)).or_insert(0) += n as u64;
    }
    counts
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
