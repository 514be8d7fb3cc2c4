//! The pace a rehearsal's control plane runs at (`--control-plane`): the client rate limits of
//! its controllers, its scheduler and its simulated kubelets, so that a rollout of hundreds of
//! pods takes as long as the copied cluster's control plane makes it take, not as long as
//! rollwright's unlimited in-process clients would.
//!
//! - `measured` (the default when the snapshot has measurements): what `rollwright snapshot`
//!   measured ([`crate::cli::snapshot::pace`]), upstream's defaults where it saw nothing.
//! - `kube-defaults`: upstream's defaults: kube-controller-manager's `--kube-api-qps 20
//!   --kube-api-burst 30` (each controller's client), kube-scheduler's `clientConnection` 50/100,
//!   the kubelet's `kubeAPIQPS` 50 / `kubeAPIBurst` 100 (v1.27 and later; 5/10 before).
//! - `unlimited`: no client limit at all (as `rollwright up` runs).
//! - `controllers=qps=20,burst=30;scheduler=unlimited;kubelet=qps=5,burst=10`: each component
//!   named its own, the others as `measured`.
//!
//! Each client gets a bucket of its own, as upstream gives each controller, the scheduler and
//! each kubelet a clientset of its own; the buckets run on the rehearsal's clock, so a paced
//! rollout rehearses in simulated seconds, not real ones.

use crate::cli::snapshot::pace::{Basis, Pace, Rate};
use restclient::Limit;
use serde::Serialize;
use std::{collections::HashMap, fmt, str::FromStr, sync::Mutex, time::Duration};

/// A part of the control plane with a client limit of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Component {
    /// The workload controllers (one bucket each) and their shared caches.
    Controllers,
    /// The scheduler.
    Scheduler,
    /// Each simulated kubelet.
    Kubelet,
}

impl Component {
    const ALL: [Component; 3] = [
        Component::Controllers,
        Component::Scheduler,
        Component::Kubelet,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Component::Controllers => "controllers",
            Component::Scheduler => "scheduler",
            Component::Kubelet => "kubelet",
        }
    }

    /// Upstream's default client limit.
    pub fn default_limit(self) -> Limit {
        match self {
            Component::Controllers => Limit::CONTROLLER_MANAGER,
            Component::Scheduler => Limit::SCHEDULER,
            Component::Kubelet => Limit::KUBELET,
        }
    }

    /// Whose default it is, for sentences.
    fn upstream(self) -> &'static str {
        match self {
            Component::Controllers => "kube-controller-manager's default",
            Component::Scheduler => "kube-scheduler's default",
            Component::Kubelet => "the kubelet's default",
        }
    }

    /// What its limit paces, for sentences: "pods created at most 20/s".
    fn paces(self) -> &'static str {
        match self {
            Component::Controllers => "pods created",
            Component::Scheduler => "pods bound",
            Component::Kubelet => "each kubelet's requests",
        }
    }
}

/// `--control-plane`: how the rehearsal's clients are limited.
#[derive(Clone, Debug, PartialEq)]
pub enum Choice {
    /// As the snapshot measured (upstream's defaults where it saw nothing).
    Measured,
    /// Upstream's defaults.
    KubeDefaults,
    /// No limit.
    Unlimited,
    /// Per component (`None`: unlimited); the components not named as [`Choice::Measured`].
    Explicit(Vec<(Component, Option<Limit>)>),
}

/// The example every parse error ends with.
const EXAMPLE: &str = "measured, kube-defaults, unlimited, or per component, e.g. \
                       controllers=qps=20,burst=30;scheduler=qps=50,burst=100;kubelet=unlimited";

impl FromStr for Choice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "measured" => return Ok(Choice::Measured),
            "kube-defaults" => return Ok(Choice::KubeDefaults),
            "unlimited" => return Ok(Choice::Unlimited),
            "" => return Err(format!("empty: give {EXAMPLE}")),
            _ => {}
        }
        let mut named: Vec<(Component, Option<Limit>)> = Vec::new();
        for part in s.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((who, limit)) = part.split_once('=') else {
                return Err(format!(
                    "{part:?} is no mode and names no component: give {EXAMPLE}"
                ));
            };
            let Some(component) = Component::ALL.into_iter().find(|c| c.name() == who.trim())
            else {
                return Err(format!(
                    "unknown component {:?}: name controllers, scheduler or kubelet, e.g. \
                     controllers=qps=20,burst=30",
                    who.trim()
                ));
            };
            if named.iter().any(|(c, _)| *c == component) {
                return Err(format!(
                    "{} is named twice: give each component once, e.g. \
                     controllers=qps=20,burst=30;scheduler=qps=50,burst=100",
                    component.name()
                ));
            }
            let limit = match limit.trim() {
                "unlimited" => None,
                text => Some(text.parse::<Limit>().map_err(|e| {
                    format!(
                        "{}={text}: {e}: give qps=N,burst=N (qps above 0, burst 1 or more) or \
                         unlimited, e.g. {}={}",
                        component.name(),
                        component.name(),
                        component.default_limit()
                    )
                })?),
            };
            named.push((component, limit));
        }
        if named.is_empty() {
            return Err(format!("{s:?} names nothing: give {EXAMPLE}"));
        }
        Ok(Choice::Explicit(named))
    }
}

/// One component's limit in a rehearsal, and why.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Assumed {
    /// `controllers`, `scheduler` or `kubelet`.
    pub component: &'static str,
    /// Requests a second; none: unlimited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qps: Option<f32>,
    /// The bucket's size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
    /// The sentence the verdict prints: "pods created at most 20/s (burst 30), measured from
    /// deployment/shop/web's last rollout: ...".
    pub summary: String,
    /// How much longer each of its requests takes than on the rehearsal's own control plane,
    /// in milliseconds: a slower cluster, found by [`super::calibrate`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    /// Read from the snapshot (measured, or upstream's default where it showed nothing), not
    /// given: what [`super::calibrate`] may correct.
    #[serde(skip)]
    pub from_snapshot: bool,
}

impl Assumed {
    /// What `limit` paces, for sentences: "pods created at most 20/s (burst 30)".
    fn paced(component: Component, limit: Option<Limit>) -> String {
        match limit {
            Some(l) => format!(
                "{} at most {}/s (burst {})",
                component.paces(),
                l.qps,
                l.burst
            ),
            None => format!("{} unpaced: no client limit", component.paces()),
        }
    }

    fn of(component: Component, limit: Option<Limit>, why: String) -> Self {
        let summary = format!("{}, {why}", Assumed::paced(component, limit));
        Assumed {
            component: component.name(),
            qps: limit.map(|l| l.qps),
            burst: limit.map(|l| l.burst),
            summary,
            latency_ms: None,
            from_snapshot: false,
        }
    }

    /// As [`Assumed::of`], for a limit read from the snapshot.
    fn read(component: Component, limit: Option<Limit>, why: String) -> Self {
        Assumed {
            from_snapshot: true,
            ..Assumed::of(component, limit, why)
        }
    }

    /// The limit it stands for.
    pub fn limit(&self) -> Option<Limit> {
        match (self.qps, self.burst) {
            (Some(qps), Some(burst)) => Limit::new(qps, burst).ok().flatten(),
            _ => None,
        }
    }
}

/// The limits of a rehearsal, per component, with what they were assumed from.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Rates {
    /// The mode as chosen (or defaulted): `measured`, `kube-defaults`, `unlimited`, or the
    /// per-component text.
    pub mode: String,
    /// Controllers, scheduler, kubelet, in that order.
    pub components: Vec<Assumed>,
}

/// What `measured` gives `component`.
fn measured(component: Component, pace: Option<&Pace>) -> Assumed {
    let Some(pace) = pace else {
        return Assumed::read(
            component,
            Some(component.default_limit()),
            format!(
                "{}, assumed: the snapshot has no measurements (take it again with this \
                 rollwright to measure them)",
                component.upstream()
            ),
        );
    };
    let rate: &Rate = match component {
        Component::Controllers => &pace.controllers,
        Component::Scheduler => &pace.scheduler,
        Component::Kubelet => &pace.kubelet,
    };
    let from = rate.from.as_deref().unwrap_or("a workload");
    let (limit, why) = match rate.basis {
        Basis::Measured => (
            rate.limit(),
            format!("measured from {from}'s last rollout ({})", rate.why),
        ),
        // Only a floor is known: pacing the rehearsal at it would make a fast cluster (raised
        // limits, or none, as rollwright's own `up`) look as slow as the floor. Such clusters
        // mostly run limits far above what a rollout needs, so the rehearsal runs unpaced.
        Basis::AtLeast => (
            None,
            format!(
                "faster than {}: {from}'s last rollout showed at least {} ({}); give \
                 --control-plane {}=qps=N,burst=N if you know the limit",
                component.upstream(),
                rate.limit()
                    .map_or_else(|| "that".into(), |l| format!("{}/s", l.qps)),
                rate.why,
                component.name(),
            ),
        ),
        Basis::Assumed => (
            rate.limit(),
            format!("{}, assumed: {}", component.upstream(), rate.why),
        ),
    };
    Assumed::read(component, limit, why)
}

impl Rates {
    /// The limits `choice` (none given: `measured` if the snapshot has measurements,
    /// `kube-defaults` if not) makes of the snapshot's `pace`.
    pub fn resolve(choice: Option<&Choice>, pace: Option<&Pace>) -> Rates {
        let choice = match (choice, pace) {
            (Some(c), _) => c.clone(),
            (None, Some(_)) => Choice::Measured,
            (None, None) => Choice::KubeDefaults,
        };
        let components = Component::ALL
            .into_iter()
            .map(|c| match &choice {
                Choice::Measured => measured(c, pace),
                Choice::KubeDefaults => Assumed::of(
                    c,
                    Some(c.default_limit()),
                    format!("{} (--control-plane kube-defaults)", c.upstream()),
                ),
                Choice::Unlimited => {
                    Assumed::of(c, None, "as --control-plane unlimited says".into())
                }
                Choice::Explicit(named) => match named.iter().find(|(n, _)| *n == c) {
                    Some((_, limit)) => Assumed::of(c, *limit, "as --control-plane says".into()),
                    None => measured(c, pace),
                },
            })
            .collect();
        Rates {
            mode: choice.to_string(),
            components,
        }
    }

    /// The limit of `component`.
    pub fn limit(&self, component: Component) -> Option<Limit> {
        self.components
            .iter()
            .find(|a| a.component == component.name())
            .and_then(Assumed::limit)
    }

    /// Whether `component`'s limit was read from the snapshot rather than given.
    pub fn read_from_snapshot(&self, component: Component) -> bool {
        self.components
            .iter()
            .any(|a| a.component == component.name() && a.from_snapshot)
    }

    /// These limits with `component`'s set to `limit`: a candidate to try.
    pub fn with(&self, component: Component, limit: Option<Limit>) -> Rates {
        self.calibrated(component, limit, "a candidate".into())
    }

    /// These limits with `component`'s set to `limit`, found by calibration for the reason
    /// `why`.
    pub fn calibrated(&self, component: Component, limit: Option<Limit>, why: String) -> Rates {
        let mut rates = self.clone();
        for a in rates.components.iter_mut() {
            if a.component == component.name() {
                *a = Assumed::of(component, limit, format!("calibrated: {why}"));
            }
        }
        rates
    }

    /// How much longer each of `component`'s requests takes than on the rehearsal's own control
    /// plane.
    pub fn latency(&self, component: Component) -> Option<Duration> {
        self.components
            .iter()
            .find(|a| a.component == component.name())
            .and_then(|a| a.latency_ms)
            .map(Duration::from_millis)
    }

    /// These limits with each of `component`'s requests `latency` slower, found by calibration
    /// for the reason `why` (`None`: a candidate to try).
    pub fn slowed(&self, component: Component, latency: Duration, why: Option<&str>) -> Rates {
        let mut rates = self.clone();
        let ms = latency.as_millis() as u64;
        for a in rates.components.iter_mut() {
            if a.component == component.name() {
                let limit = Assumed::paced(component, a.limit());
                a.latency_ms = Some(ms);
                a.summary = format!(
                    "{limit}, each request {ms} ms slower than the rehearsal's own, calibrated: {}",
                    why.unwrap_or("a candidate")
                );
            }
        }
        rates
    }

    /// These limits with `component`'s summary saying what confirmed it: "...; replaying X's
    /// last update ... took ...".
    pub fn confirmed(&self, component: Component, replayed: &str) -> Rates {
        let mut rates = self.clone();
        for a in rates.components.iter_mut() {
            if a.component == component.name() {
                a.summary = format!("{}; confirmed: {replayed}", a.summary);
            }
        }
        rates
    }

    /// No limit anywhere.
    #[cfg(test)]
    pub fn unlimited() -> Rates {
        Rates::resolve(Some(&Choice::Unlimited), None)
    }
}

impl fmt::Display for Choice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Choice::Measured => f.write_str("measured"),
            Choice::KubeDefaults => f.write_str("kube-defaults"),
            Choice::Unlimited => f.write_str("unlimited"),
            Choice::Explicit(named) => {
                let parts: Vec<String> = named
                    .iter()
                    .map(|(c, l)| match l {
                        Some(l) => format!("{}={l}", c.name()),
                        None => format!("{}=unlimited", c.name()),
                    })
                    .collect();
                f.write_str(&parts.join(";"))
            }
        }
    }
}

/// Which component a rehearsal's user is: the scheduler (`system:kube-scheduler`), a kubelet
/// (`system:node:NAME`, and the simulator's reader), or a controller (the controller manager
/// and `kube-system`'s controller ServiceAccounts); `None` for anyone else.
fn component_of(username: &str) -> Option<Component> {
    if username == "system:kube-scheduler" {
        Some(Component::Scheduler)
    } else if username.starts_with("system:node:")
        || username == nodesim::identity::reader_user().username
    {
        Some(Component::Kubelet)
    } else if username == "system:kube-controller-manager"
        || username.starts_with("system:serviceaccount:kube-system:")
    {
        Some(Component::Controllers)
    } else {
        None
    }
}

/// Clients of the rehearsal's server as each user, each user's with a bucket of its own of its
/// component's limit (made once per user: a client is a bucket, and a bucket made per request
/// would limit nothing).
pub fn clients_as(
    server: &apiserver::ApiServer,
    rates: &Rates,
) -> rollwright::components::ClientAs {
    let users = embedded::Users::new(server);
    let limits: HashMap<Component, Option<Limit>> = Component::ALL
        .into_iter()
        .map(|c| (c, rates.limit(c)))
        .collect();
    let latencies: HashMap<Component, Option<Duration>> = Component::ALL
        .into_iter()
        .map(|c| (c, rates.latency(c)))
        .collect();
    let made: Mutex<HashMap<String, kube::Client>> = Mutex::new(HashMap::new());
    std::sync::Arc::new(move |user: authz::UserInfo| {
        let mut made = made.lock().unwrap_or_else(|e| e.into_inner());
        made.entry(user.username.clone())
            .or_insert_with(|| {
                let component = component_of(&user.username);
                let limit = component.and_then(|c| limits[&c]);
                let base = users.client(user);
                let base = match component.and_then(|c| latencies[&c]) {
                    Some(latency) => restclient::delayed(&base, latency),
                    None => base,
                };
                restclient::limited(&base, limit, "whatif")
            })
            .clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::snapshot::pace::measure;

    #[test]
    fn modes_and_per_component_limits_parse() {
        assert_eq!("measured".parse(), Ok(Choice::Measured));
        assert_eq!("kube-defaults".parse(), Ok(Choice::KubeDefaults));
        assert_eq!(" unlimited ".parse(), Ok(Choice::Unlimited));
        let c: Choice = "controllers=qps=20,burst=30;scheduler=unlimited;"
            .parse()
            .expect("parses");
        assert_eq!(
            c,
            Choice::Explicit(vec![
                (Component::Controllers, Some(Limit::CONTROLLER_MANAGER)),
                (Component::Scheduler, None),
            ])
        );
        assert_eq!(
            c.to_string(),
            "controllers=qps=20,burst=30;scheduler=unlimited"
        );
    }

    #[test]
    fn bad_choices_say_what_to_write_in_one_line() {
        let cases = [
            (
                "",
                "empty: give measured, kube-defaults, unlimited, or per component, e.g. controllers=qps=20,burst=30;scheduler=qps=50,burst=100;kubelet=unlimited",
            ),
            (
                "fast",
                "\"fast\" is no mode and names no component: give measured, kube-defaults, unlimited, or per component, e.g. controllers=qps=20,burst=30;scheduler=qps=50,burst=100;kubelet=unlimited",
            ),
            (
                "ctrl=qps=1,burst=2",
                "unknown component \"ctrl\": name controllers, scheduler or kubelet, e.g. controllers=qps=20,burst=30",
            ),
            (
                "controllers=qps=20",
                "controllers=qps=20: \"qps=20\": expected qps=N,burst=N: give qps=N,burst=N (qps above 0, burst 1 or more) or unlimited, e.g. controllers=qps=20,burst=30",
            ),
            (
                "scheduler=qps=50,burst=0",
                "scheduler=qps=50,burst=0: burst must be at least 1, got 0: give qps=N,burst=N (qps above 0, burst 1 or more) or unlimited, e.g. scheduler=qps=50,burst=100",
            ),
            (
                "kubelet=unlimited;kubelet=qps=1,burst=1",
                "kubelet is named twice: give each component once, e.g. controllers=qps=20,burst=30;scheduler=qps=50,burst=100",
            ),
            (
                ";",
                "\";\" names nothing: give measured, kube-defaults, unlimited, or per component, e.g. controllers=qps=20,burst=30;scheduler=qps=50,burst=100;kubelet=unlimited",
            ),
        ];
        for (text, want) in cases {
            let err = text.parse::<Choice>().expect_err(text);
            assert_eq!(err, want, "{text}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
    }

    #[test]
    fn the_flag_parses_through_clap_with_its_error() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: super::super::WhatifArgs,
        }
        use clap::Parser;
        let base = ["whatif", "--snapshot", "s.json", "--change", "drain n"];
        let parsed = Cli::try_parse_from(base).expect("no flag");
        assert_eq!(parsed.args.control_plane, None);
        let parsed = Cli::try_parse_from(base.into_iter().chain(["--control-plane", "unlimited"]))
            .expect("unlimited");
        assert_eq!(parsed.args.control_plane, Some(Choice::Unlimited));
        let err = Cli::try_parse_from(base.into_iter().chain(["--control-plane", "fast"]))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("\"fast\" is no mode and names no component: give measured"),
            "{err}"
        );
    }

    fn measured_pace() -> Pace {
        let mut pace = measure(&Default::default());
        pace.controllers = Rate {
            qps: 20.0,
            burst: 30,
            basis: Basis::Measured,
            from: Some("deployment/shop/web".into()),
            why: "pods created 20 a second over 24 s (480 pods)".into(),
        };
        pace
    }

    #[test]
    fn measured_is_the_default_with_measurements_and_says_where_they_came_from() {
        let pace = measured_pace();
        let rates = Rates::resolve(None, Some(&pace));
        assert_eq!(rates.mode, "measured");
        assert_eq!(
            rates.components[0].summary,
            "pods created at most 20/s (burst 30), measured from deployment/shop/web's last \
             rollout (pods created 20 a second over 24 s (480 pods))"
        );
        assert_eq!(
            rates.limit(Component::Controllers),
            Some(Limit::CONTROLLER_MANAGER)
        );
        // Nothing seen: the default, and why.
        assert!(
            rates.components[1].summary.starts_with(
                "pods bound at most 50/s (burst 100), kube-scheduler's default, assumed: "
            ),
            "{}",
            rates.components[1].summary
        );
        assert_eq!(rates.limit(Component::Kubelet), Some(Limit::KUBELET));
    }

    #[test]
    fn a_cluster_seen_faster_than_the_defaults_is_rehearsed_unpaced() {
        let mut pace = measured_pace();
        pace.controllers = Rate {
            qps: 33.0,
            burst: 30,
            basis: Basis::AtLeast,
            from: Some("deployment/shop/web".into()),
            why: "63 pods created in one second".into(),
        };
        let rates = Rates::resolve(None, Some(&pace));
        assert_eq!(rates.limit(Component::Controllers), None);
        assert_eq!(
            rates.components[0].summary,
            "pods created unpaced: no client limit, faster than kube-controller-manager's \
             default: deployment/shop/web's last rollout showed at least 33/s (63 pods created \
             in one second); give --control-plane controllers=qps=N,burst=N if you know the limit"
        );
    }

    #[test]
    fn an_old_snapshot_rehearses_under_kube_defaults_and_explicit_limits_win() {
        let rates = Rates::resolve(None, None);
        assert_eq!(rates.mode, "kube-defaults");
        assert_eq!(rates.limit(Component::Scheduler), Some(Limit::SCHEDULER));
        let rates = Rates::resolve(Some(&Choice::Measured), None);
        assert!(
            rates.components[0]
                .summary
                .contains("the snapshot has no measurements"),
            "{:?}",
            rates.components[0]
        );
        let rates = Rates::unlimited();
        assert!(Component::ALL.iter().all(|c| rates.limit(*c).is_none()));
        assert_eq!(
            rates.components[0].summary,
            "pods created unpaced: no client limit, as --control-plane unlimited says"
        );
        let explicit: Choice = "scheduler=qps=5,burst=10".parse().expect("parses");
        let pace = measured_pace();
        let rates = Rates::resolve(Some(&explicit), Some(&pace));
        assert_eq!(
            rates.limit(Component::Scheduler),
            Some(Limit {
                qps: 5.0,
                burst: 10
            })
        );
        // The others as measured.
        assert_eq!(
            rates.limit(Component::Controllers),
            Some(Limit::CONTROLLER_MANAGER)
        );
        assert!(rates.components[0].summary.contains("measured from"));
    }

    #[test]
    fn only_limits_read_from_the_snapshot_are_calibrated_and_the_summary_says_how() {
        let pace = measured_pace();
        let rates = Rates::resolve(None, Some(&pace));
        assert!(rates.read_from_snapshot(Component::Controllers));
        let given: Choice = "controllers=qps=5,burst=10".parse().expect("parses");
        let rates_given = Rates::resolve(Some(&given), Some(&pace));
        assert!(!rates_given.read_from_snapshot(Component::Controllers));
        assert!(rates_given.read_from_snapshot(Component::Scheduler));
        assert!(
            !Rates::resolve(Some(&Choice::KubeDefaults), Some(&pace))
                .read_from_snapshot(Component::Controllers)
        );

        let calibrated = rates.calibrated(Component::Controllers, None, "replaying X".into());
        assert_eq!(calibrated.limit(Component::Controllers), None);
        assert_eq!(
            calibrated.components[0].summary,
            "pods created unpaced: no client limit, calibrated: replaying X"
        );
        // The others as they were.
        assert_eq!(calibrated.components[1], rates.components[1]);
        let confirmed = rates.confirmed(Component::Controllers, "replaying X");
        assert_eq!(
            confirmed.limit(Component::Controllers),
            Some(Limit::CONTROLLER_MANAGER)
        );
        assert!(
            confirmed.components[0]
                .summary
                .ends_with("(480 pods)); confirmed: replaying X"),
            "{}",
            confirmed.components[0].summary
        );
    }

    #[test]
    fn users_are_their_components() {
        assert_eq!(
            component_of("system:kube-scheduler"),
            Some(Component::Scheduler)
        );
        assert_eq!(component_of("system:node:n1"), Some(Component::Kubelet));
        assert_eq!(
            component_of(&nodesim::identity::reader_user().username),
            Some(Component::Kubelet)
        );
        assert_eq!(
            component_of("system:serviceaccount:kube-system:replicaset-controller"),
            Some(Component::Controllers)
        );
        assert_eq!(
            component_of("system:kube-controller-manager"),
            Some(Component::Controllers)
        );
        assert_eq!(component_of("admin"), None);
    }
}
