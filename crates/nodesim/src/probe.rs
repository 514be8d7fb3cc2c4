//! Container probes as the kubelet's prober runs them (`pkg/kubelet/prober/worker.go`): a
//! probe is skipped for `initialDelaySeconds` after the container starts, then runs every
//! `periodSeconds`; its reported result flips only after `successThreshold` consecutive passes
//! or `failureThreshold` consecutive failures (readiness starts as a failure, liveness as a
//! success, startup as unknown); readiness and liveness wait for the startup probe to pass.
//!
//! A simulated probe passes unless a fault's window makes it fail, so most ticks change nothing.
//! Instead of a timer per period, a [`Prober`] computes the next tick at which something can
//! happen (a pass that flips a failing result, or the first tick inside a failure window) and
//! only that one is scheduled: a probe that passes and keeps passing costs no timer at all.

use k8s_openapi::{
    api::core::v1::{Container, Probe},
    apimachinery::pkg::util::intstr::IntOrString,
};
use std::{net::Ipv4Addr, time::Duration};
use tokio::time::Instant;

/// Which probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeKind {
    /// `startupProbe`: the container is `started` once it passes.
    Startup,
    /// `readinessProbe`: the container is `ready` while it passes.
    Readiness,
    /// `livenessProbe`: the container is killed and restarted when it fails.
    Liveness,
}

impl ProbeKind {
    /// As upstream's events name it (`Liveness probe failed: ...`).
    pub fn label(self) -> &'static str {
        match self {
            ProbeKind::Startup => "Startup",
            ProbeKind::Readiness => "Readiness",
            ProbeKind::Liveness => "Liveness",
        }
    }

    /// As the kill message names it (`Container app failed liveness probe`).
    pub fn lower(self) -> &'static str {
        match self {
            ProbeKind::Startup => "startup",
            ProbeKind::Readiness => "readiness",
            ProbeKind::Liveness => "liveness",
        }
    }
}

/// How the probe checks the container: it decides what a failure says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Handler {
    /// `httpGet`.
    Http,
    /// `tcpSocket`, with its port as written.
    Tcp(String),
    /// `exec`.
    Exec,
    /// `grpc`.
    Grpc,
}

/// A probe as the spec states it, with upstream's defaults filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeSpec {
    /// `initialDelaySeconds` (0).
    pub initial_delay_seconds: u32,
    /// `periodSeconds` (10).
    pub period_seconds: u32,
    /// `successThreshold` (1).
    pub success_threshold: u32,
    /// `failureThreshold` (3).
    pub failure_threshold: u32,
    /// Its handler.
    pub handler: Handler,
}

fn positive(v: Option<i32>, default: u32) -> u32 {
    v.and_then(|v| u32::try_from(v).ok())
        .filter(|v| *v > 0)
        .unwrap_or(default)
}

impl ProbeSpec {
    /// Reads a probe, defaulting as upstream's API does.
    pub fn from(p: &Probe) -> ProbeSpec {
        let port = |p: &IntOrString| match p {
            IntOrString::Int(i) => i.to_string(),
            IntOrString::String(s) => s.clone(),
        };
        let handler = if p.http_get.is_some() {
            Handler::Http
        } else if let Some(t) = &p.tcp_socket {
            Handler::Tcp(port(&t.port))
        } else if p.grpc.is_some() {
            Handler::Grpc
        } else {
            Handler::Exec
        };
        ProbeSpec {
            initial_delay_seconds: p
                .initial_delay_seconds
                .and_then(|v| u32::try_from(v).ok())
                .unwrap_or(0),
            period_seconds: positive(p.period_seconds, 10),
            success_threshold: positive(p.success_threshold, 1),
            failure_threshold: positive(p.failure_threshold, 3),
            handler,
        }
    }

    /// What a failed run of this probe reports, as upstream's probers word it for an
    /// application that answers badly (`HTTP probe failed with statuscode: 503`); an `exec`
    /// probe reports its command's output, which a simulated command does not have.
    pub fn failure_message(&self, ip: Option<Ipv4Addr>) -> String {
        match &self.handler {
            Handler::Http => "HTTP probe failed with statuscode: 503".into(),
            Handler::Tcp(port) => {
                let ip = ip.map_or_else(String::new, |ip| ip.to_string());
                format!("dial tcp {ip}:{port}: connect: connection refused")
            }
            Handler::Grpc => "service unhealthy (responded with \"NOT_SERVING\")".into(),
            Handler::Exec => String::new(),
        }
    }

    fn scaled(seconds: u32, scale: f64) -> Duration {
        Duration::from_secs(u64::from(seconds)).mul_f64(scale.max(0.0))
    }

    /// The initial delay on the simulation's clock.
    pub fn initial_delay(&self, scale: f64) -> Duration {
        Self::scaled(self.initial_delay_seconds, scale)
    }

    /// The period on the simulation's clock (at least a millisecond, so ticks move on).
    pub fn period(&self, scale: f64) -> Duration {
        Self::scaled(self.period_seconds, scale).max(Duration::from_millis(1))
    }
}

/// A container's probes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Probes {
    /// `startupProbe`.
    pub startup: Option<ProbeSpec>,
    /// `readinessProbe`.
    pub readiness: Option<ProbeSpec>,
    /// `livenessProbe`.
    pub liveness: Option<ProbeSpec>,
}

impl Probes {
    /// The probes of `c`; `None` when it has none (most containers: they pay nothing).
    pub fn of(c: &Container) -> Option<Probes> {
        let p = Probes {
            startup: c.startup_probe.as_ref().map(ProbeSpec::from),
            readiness: c.readiness_probe.as_ref().map(ProbeSpec::from),
            liveness: c.liveness_probe.as_ref().map(ProbeSpec::from),
        };
        (p != Probes::default()).then_some(p)
    }

    /// The probe of a kind.
    pub fn get(&self, kind: ProbeKind) -> Option<&ProbeSpec> {
        match kind {
            ProbeKind::Startup => self.startup.as_ref(),
            ProbeKind::Readiness => self.readiness.as_ref(),
            ProbeKind::Liveness => self.liveness.as_ref(),
        }
    }
}

/// When a fault makes a probe fail: from `from` until `until` (for ever when `None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// The first instant a probe fails.
    pub from: Instant,
    /// The first instant probes pass again.
    pub until: Option<Instant>,
}

impl Window {
    fn contains(&self, t: Instant) -> bool {
        t >= self.from && self.until.is_none_or(|u| t < u)
    }
}

/// What one run of a probe did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probed {
    /// The probe passed this time.
    pub passed: bool,
    /// The reported result flipped (to [`Prober::ok`]).
    pub changed: bool,
}

/// One probe of one run of a container: its ticks, its reported result and the failure window
/// a fault gives it.
#[derive(Clone, Debug)]
pub struct Prober {
    period: Duration,
    success_threshold: u32,
    failure_threshold: u32,
    /// The first tick; the others follow every period.
    base: Instant,
    failing: Option<Window>,
    ok: bool,
    /// Consecutive runs that disagree with `ok`.
    streak: u32,
    next: Option<Instant>,
}

impl Prober {
    /// A probe whose first run is at `base`, reporting `ok` until its runs say otherwise.
    pub fn new(
        spec: &ProbeSpec,
        scale: f64,
        base: Instant,
        ok: bool,
        failing: Option<Window>,
    ) -> Prober {
        let mut p = Prober {
            period: spec.period(scale),
            success_threshold: spec.success_threshold,
            failure_threshold: spec.failure_threshold,
            base,
            failing,
            ok,
            streak: 0,
            next: None,
        };
        p.next = p.plan(None);
        p
    }

    /// The reported result.
    pub fn ok(&self) -> bool {
        self.ok
    }

    /// When the probe next needs to run; `None` when no run can change anything.
    pub fn next(&self) -> Option<Instant> {
        self.next
    }

    /// Runs no more (a startup probe once it passed).
    pub fn stop(&mut self) {
        self.next = None;
    }

    /// The first tick at or after `t`.
    fn tick_at_or_after(&self, t: Instant) -> Instant {
        if t <= self.base {
            return self.base;
        }
        let period = self.period.as_nanos().max(1);
        let k = (t - self.base).as_nanos().div_ceil(period);
        let offset = u64::try_from(k.saturating_mul(period)).unwrap_or(u64::MAX);
        self.base + Duration::from_nanos(offset)
    }

    /// The next tick worth running after `after` (from the first tick when `None`).
    fn plan(&self, after: Option<Instant>) -> Option<Instant> {
        let from = after.map_or(self.base, |t| t + Duration::from_nanos(1));
        if !self.ok || self.streak > 0 {
            // The result is failing, or failures are being counted: every tick matters.
            return Some(self.tick_at_or_after(from));
        }
        // Passing and nothing counted: only a failure can change anything.
        let w = self.failing?;
        let t = self.tick_at_or_after(from.max(w.from));
        w.until.is_none_or(|u| t < u).then_some(t)
    }

    /// Runs the probe due at `at` and plans the next run.
    pub fn probe(&mut self, at: Instant) -> Probed {
        let passed = !self.failing.is_some_and(|w| w.contains(at));
        let mut changed = false;
        if passed == self.ok {
            self.streak = 0;
        } else {
            self.streak += 1;
            let needed = if passed {
                self.success_threshold
            } else {
                self.failure_threshold
            };
            if self.streak >= needed {
                self.ok = passed;
                self.streak = 0;
                changed = true;
            }
        }
        self.next = self.plan(Some(at));
        Probed { passed, changed }
    }
}

/// The probes of one run of a container, as its kubelet's workers hold them.
#[derive(Clone, Debug)]
pub struct Running {
    /// The run's start.
    started_at: Instant,
    /// The startup probe, until it passes.
    pub startup: Option<Prober>,
    /// The readiness probe, once the container has started.
    pub readiness: Option<Prober>,
    /// The liveness probe, once the container has started.
    pub liveness: Option<Prober>,
    /// The window a fault makes one of them fail in.
    failing: Option<(ProbeKind, Window)>,
}

impl Running {
    /// A run starting at `started_at`: the startup probe if there is one, else readiness and
    /// liveness at once (readiness after `ready_delay` more, the simulator's reporting delay).
    pub fn start(
        spec: &Probes,
        started_at: Instant,
        ready_delay: Duration,
        scale: f64,
        failing: Option<(ProbeKind, Window)>,
    ) -> Running {
        let window = |kind| failing.filter(|(k, _)| *k == kind).map(|(_, w)| w);
        let mut run = Running {
            started_at,
            startup: spec.startup.as_ref().map(|s| {
                let base = started_at + s.initial_delay(scale);
                Prober::new(s, scale, base, false, window(ProbeKind::Startup))
            }),
            readiness: None,
            liveness: None,
            failing,
        };
        if run.startup.is_none() {
            run.started(spec, started_at, ready_delay, scale);
        }
        run
    }

    /// The container has started (at `at`): readiness and liveness begin, each no earlier than
    /// its initial delay after the run's start.
    pub fn started(&mut self, spec: &Probes, at: Instant, ready_delay: Duration, scale: f64) {
        let failing = self.failing;
        let window = |kind| failing.filter(|(k, _)| k == &kind).map(|(_, w)| w);
        let from = |s: &ProbeSpec| (self.started_at + s.initial_delay(scale)).max(at);
        if let Some(startup) = self.startup.as_mut() {
            startup.stop();
        }
        self.readiness = spec.readiness.as_ref().map(|s| {
            Prober::new(
                s,
                scale,
                from(s) + ready_delay,
                false,
                window(ProbeKind::Readiness),
            )
        });
        self.liveness = spec
            .liveness
            .as_ref()
            .map(|s| Prober::new(s, scale, from(s), true, window(ProbeKind::Liveness)));
    }

    /// The prober of a kind.
    pub fn get_mut(&mut self, kind: ProbeKind) -> Option<&mut Prober> {
        match kind {
            ProbeKind::Startup => self.startup.as_mut(),
            ProbeKind::Readiness => self.readiness.as_mut(),
            ProbeKind::Liveness => self.liveness.as_mut(),
        }
    }

    /// Every probe's next run.
    pub fn due(&self) -> impl Iterator<Item = (Instant, ProbeKind)> + '_ {
        [
            (ProbeKind::Startup, &self.startup),
            (ProbeKind::Readiness, &self.readiness),
            (ProbeKind::Liveness, &self.liveness),
        ]
        .into_iter()
        .filter_map(|(k, p)| p.as_ref().and_then(Prober::next).map(|t| (t, k)))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn spec(initial: u32, period: u32, success: u32, failure: u32) -> ProbeSpec {
        ProbeSpec {
            initial_delay_seconds: initial,
            period_seconds: period,
            success_threshold: success,
            failure_threshold: failure,
            handler: Handler::Http,
        }
    }

    fn secs(t0: Instant, s: u64) -> Instant {
        t0 + Duration::from_secs(s)
    }

    #[test]
    fn upstreams_defaults_fill_what_the_spec_leaves_out() {
        let p: Probe =
            serde_json::from_value(serde_json::json!({"tcpSocket": {"port": 8080}})).unwrap();
        let s = ProbeSpec::from(&p);
        assert_eq!(
            s,
            ProbeSpec {
                initial_delay_seconds: 0,
                period_seconds: 10,
                success_threshold: 1,
                failure_threshold: 3,
                handler: Handler::Tcp("8080".into()),
            }
        );
        assert_eq!(
            s.failure_message(Some(Ipv4Addr::new(10, 64, 0, 2))),
            "dial tcp 10.64.0.2:8080: connect: connection refused"
        );
        let c: Container = serde_json::from_value(serde_json::json!({"name": "a"})).unwrap();
        assert_eq!(Probes::of(&c), None);
    }

    #[test]
    fn a_passing_readiness_probe_flips_at_its_success_threshold_then_sleeps() {
        let t0 = Instant::now();
        let mut p = Prober::new(&spec(20, 10, 2, 3), 1.0, secs(t0, 20), false, None);
        assert_eq!(p.next(), Some(secs(t0, 20)));
        assert_eq!(
            p.probe(secs(t0, 20)),
            Probed {
                passed: true,
                changed: false
            }
        );
        assert_eq!(p.next(), Some(secs(t0, 30)));
        assert!(p.probe(secs(t0, 30)).changed);
        assert!(p.ok());
        assert_eq!(p.next(), None, "nothing can change: no timer");
    }

    #[test]
    fn a_failure_window_costs_one_timer_per_failing_tick_and_one_to_recover() {
        let t0 = Instant::now();
        let window = Window {
            from: secs(t0, 25),
            until: Some(secs(t0, 61)),
        };
        let mut p = Prober::new(&spec(0, 10, 1, 3), 1.0, t0, true, Some(window));
        // Passing, so the first run that matters is the first tick in the window.
        assert_eq!(p.next(), Some(secs(t0, 30)));
        let mut runs = vec![];
        while let Some(t) = p.next() {
            let r = p.probe(t);
            runs.push(((t - t0).as_secs(), r.passed, r.changed, p.ok()));
        }
        assert_eq!(
            runs,
            [
                (30, false, false, true),
                (40, false, false, true),
                (50, false, true, false),
                (60, false, false, false),
                (70, true, true, true),
            ]
        );
    }

    #[test]
    fn a_window_between_ticks_is_never_seen() {
        let t0 = Instant::now();
        let window = Window {
            from: secs(t0, 11),
            until: Some(secs(t0, 19)),
        };
        let p = Prober::new(&spec(0, 10, 1, 1), 1.0, t0, true, Some(window));
        assert_eq!(p.next(), None);
    }

    #[test]
    fn probe_times_scale_with_the_simulation() {
        let t0 = Instant::now();
        let s = spec(20, 10, 1, 3);
        assert_eq!(s.initial_delay(0.01), Duration::from_millis(200));
        assert_eq!(s.period(0.0), Duration::from_millis(1));
        let window = Window {
            from: t0,
            until: None,
        };
        let mut p = Prober::new(&s, 0.01, t0, true, Some(window));
        // Three failures 100ms apart (10s x 0.01) flip it.
        let mut runs = vec![];
        while let Some(t) = p.next() {
            runs.push((t - t0).as_millis());
            if p.probe(t).changed {
                break;
            }
        }
        assert_eq!(runs, [0, 100, 200]);
    }

    #[test]
    fn readiness_and_liveness_wait_for_the_startup_probe() {
        let t0 = Instant::now();
        let probes = Probes {
            startup: Some(spec(0, 5, 1, 30)),
            readiness: Some(spec(3, 10, 1, 3)),
            liveness: Some(spec(0, 10, 1, 3)),
        };
        let failing = Some((
            ProbeKind::Startup,
            Window {
                from: t0,
                until: Some(secs(t0, 12)),
            },
        ));
        let mut run = Running::start(&probes, t0, Duration::ZERO, 1.0, failing);
        assert!(run.readiness.is_none() && run.liveness.is_none());
        let due: Vec<_> = run.due().collect();
        assert_eq!(due, [(t0, ProbeKind::Startup)]);
        // Fails at 0, 5, 10 (below its threshold of 30), passes at 15.
        let mut t = t0;
        loop {
            let r = run.startup.as_mut().unwrap().probe(t);
            if r.changed {
                break;
            }
            t = run.startup.as_ref().unwrap().next().unwrap();
        }
        assert_eq!(t, secs(t0, 15));
        run.started(&probes, t, Duration::from_secs(1), 1.0);
        let mut due: Vec<_> = run.due().collect();
        due.sort_by_key(|(t, _)| *t);
        // Readiness runs first at 15s + the reporting delay; liveness passes and sleeps.
        assert_eq!(due, [(secs(t0, 16), ProbeKind::Readiness)]);
    }
}
