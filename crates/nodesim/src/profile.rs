//! The fault profile: rules that pick pods (by image, namespace, labels, node, or an annotation
//! naming the rule) and the fault each injects. The format is documented in `PROFILE.md`.

use crate::{distribution::Distribution, probe::ProbeKind};
use api::selector::LabelSelector;
use rand::{Rng, RngCore};
use serde::{Deserialize, Deserializer};
use std::{collections::BTreeMap, time::Duration};

/// The annotation that asks for a fault on one pod: a rule's `name`, or a fault kind
/// (`imagePullFailure`, `crashLoop`, `neverReady`, `slowStart`, `failAfter`,
/// `readinessFailure`, `livenessFailure`, `startupFailure`) with its defaults.
pub const FAULT_ANNOTATION: &str = "rollwright.io/fault";

/// The annotation that fixes the exit code of every run of a `restartPolicy: Never|OnFailure`
/// pod's containers (`"3"`), whatever the profile's `failureProbability` says: a test makes a
/// Job fail deterministically with it.
pub const EXIT_CODE_ANNOTATION: &str = "rollwright.io/exit-code";

/// How long a run-to-completion container runs when the profile says nothing (`runFor`).
pub const DEFAULT_RUN_FOR: Duration = Duration::from_secs(3);

/// Why a profile could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// Not valid YAML, or not the profile's shape.
    #[error("reading the fault profile: {0}")]
    Yaml(String),
    /// A rule's label selector does not parse.
    #[error("rule {rule}: label selector {selector:?}: {error}")]
    Selector {
        /// The rule's name or position.
        rule: String,
        /// The selector as written.
        selector: String,
        /// What is wrong with it.
        error: String,
    },
    /// A probability outside [0, 1].
    #[error("rule {0}: probability must be between 0 and 1")]
    Probability(String),
}

/// A fault profile: a seed, optional default delays, and rules tried in order.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Profile {
    /// Seeds every pod's RNG (with the pod's identity), so runs repeat.
    #[serde(default)]
    pub seed: u64,
    /// Overrides the configured container start delay.
    #[serde(default)]
    pub start_delay: Option<Distribution>,
    /// Overrides the configured readiness delay.
    #[serde(default)]
    pub readiness_delay: Option<Distribution>,
    /// Overrides the configured grace scale (what a deletion's grace period is multiplied by):
    /// 0 ends graceful deletions at once, as upstream's lightweight simulators do.
    #[serde(default)]
    pub grace_scale: Option<f64>,
    /// How long each run of a container of a `restartPolicy: Never|OnFailure` pod lasts before
    /// it exits, whatever its command says; when absent, what the command says
    /// ([`crate::command`]), else [`DEFAULT_RUN_FOR`]. `Always` pods run until deleted.
    #[serde(default)]
    pub run_for: Option<Distribution>,
    /// The chance (0..=1) that such a run exits with [`Profile::failure_exit_code`] rather
    /// than with the code its command states (or 0); 0 when absent.
    #[serde(default)]
    pub failure_probability: Option<f64>,
    /// The exit code of a failed run (1 when absent).
    #[serde(default)]
    pub failure_exit_code: Option<i32>,
    /// The rules; the first that selects a pod (and wins its probability roll) applies.
    #[serde(default)]
    pub rules: Vec<Rule>,
}

/// One rule: which pods, which fault, how often.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rule {
    /// Lets a pod ask for this rule by annotation.
    #[serde(default)]
    pub name: Option<String>,
    /// Which pods; every field given must match. An empty match selects every pod.
    #[serde(default, rename = "match")]
    pub selector: Match,
    /// What goes wrong.
    pub fault: Fault,
    /// The chance (0..=1) that a selected pod gets the fault; 1 when absent.
    #[serde(default)]
    pub probability: Option<f64>,
}

/// Pod selection; globs use `*` (any run of characters) and `?` (one character).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Match {
    /// A glob over container images as written in the pod (`*broken*`); only containers whose
    /// image matches get a container fault.
    #[serde(default)]
    pub image: Option<String>,
    /// The pod's namespace, exactly.
    #[serde(default)]
    pub namespace: Option<String>,
    /// A label selector in `kubectl`'s string form (`app=web,tier in (a,b)`).
    #[serde(default)]
    pub labels: Option<String>,
    /// A glob over the node's name.
    #[serde(default)]
    pub node: Option<String>,
    #[serde(skip)]
    compiled: Option<LabelSelector>,
}

/// A fault to inject.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// The image never pulls: `ErrImagePull`, then `ImagePullBackOff` with back-off.
    ImagePullFailure {
        /// The pull error, as the runtime would report it; a `not found` error when absent.
        message: Option<String>,
    },
    /// The container exits after `after` with `exit_code`, and is restarted with back-off.
    CrashLoop {
        /// How long each run lasts.
        after: Distribution,
        /// The exit code of each run.
        exit_code: i32,
    },
    /// The container runs but its readiness probe never passes.
    NeverReady {
        /// The probe's failure, as in `Readiness probe failed: <message>`.
        message: String,
    },
    /// Containers start this much later than usual.
    SlowStart {
        /// The extra start delay.
        delay: Distribution,
    },
    /// The pod fails (phase `Failed`) this long after its containers start.
    FailAfter {
        /// When, from start.
        after: Distribution,
        /// `status.reason`.
        reason: String,
        /// `status.message`.
        message: String,
        /// The exit code its containers end with.
        exit_code: i32,
    },
    /// A probe of the container fails from `after` its start for `duration` (for ever when
    /// `None`), each run of the container again. Only containers that have that probe are
    /// touched: a failing readiness probe makes the container unready; a failing liveness or
    /// startup probe kills it (`exit_code`) to be restarted.
    ProbeFailure {
        /// Which probe.
        probe: ProbeKind,
        /// When, from each start of the container.
        after: Distribution,
        /// For how long; for ever when `None`.
        duration: Option<Distribution>,
        /// What a failed run says (`Liveness probe failed: <message>`); the probe handler's
        /// usual failure when `None`.
        message: Option<String>,
        /// The exit code of a container the failure kills.
        exit_code: i32,
    },
}

impl Fault {
    /// A fault kind by name with its default parameters, for the annotation shortcut.
    pub fn named(name: &str) -> Option<Fault> {
        Some(match name {
            "imagePullFailure" => Fault::ImagePullFailure { message: None },
            "crashLoop" => Fault::CrashLoop {
                after: Distribution::Fixed(Duration::from_secs(1)),
                exit_code: 1,
            },
            "neverReady" => Fault::NeverReady {
                message: default_probe_message(),
            },
            "slowStart" => Fault::SlowStart {
                delay: Distribution::Fixed(Duration::from_secs(30)),
            },
            "failAfter" => Fault::FailAfter {
                after: Distribution::Fixed(Duration::from_secs(30)),
                reason: default_fail_reason(),
                message: default_fail_message(),
                exit_code: 1,
            },
            "readinessFailure" => Fault::ProbeFailure {
                probe: ProbeKind::Readiness,
                after: Distribution::Fixed(Duration::ZERO),
                duration: Some(default_unready_for()),
                message: None,
                exit_code: KILLED_EXIT_CODE,
            },
            "livenessFailure" | "startupFailure" => Fault::ProbeFailure {
                probe: if name == "livenessFailure" {
                    ProbeKind::Liveness
                } else {
                    ProbeKind::Startup
                },
                after: Distribution::Fixed(Duration::ZERO),
                duration: None,
                message: None,
                exit_code: KILLED_EXIT_CODE,
            },
            _ => return None,
        })
    }

    /// Whether this fault acts on containers (and so honours the rule's image glob).
    pub fn is_container_fault(&self) -> bool {
        matches!(
            self,
            Fault::ImagePullFailure { .. }
                | Fault::CrashLoop { .. }
                | Fault::NeverReady { .. }
                | Fault::ProbeFailure { .. }
        )
    }
}

/// How a container killed by its kubelet ends (SIGKILL), unless a fault says otherwise.
pub const KILLED_EXIT_CODE: i32 = 137;

fn default_unready_for() -> Distribution {
    Distribution::Fixed(Duration::from_secs(30))
}
fn default_probe_after() -> Distribution {
    Distribution::Fixed(Duration::ZERO)
}
fn killed() -> i32 {
    KILLED_EXIT_CODE
}

fn default_probe_message() -> String {
    "HTTP probe failed with statuscode: 503".into()
}
fn default_fail_reason() -> String {
    "Error".into()
}
fn default_fail_message() -> String {
    "Pod failed (injected by the rollwright fault profile)".into()
}
fn default_crash_after() -> Distribution {
    Distribution::Fixed(Duration::from_secs(1))
}
fn default_fail_after() -> Distribution {
    Distribution::Fixed(Duration::from_secs(30))
}
fn default_slow() -> Distribution {
    Distribution::Fixed(Duration::from_secs(30))
}
fn one() -> i32 {
    1
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
enum FaultSpec {
    ImagePullFailure {
        #[serde(default)]
        message: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    CrashLoop {
        #[serde(default = "default_crash_after")]
        after: Distribution,
        #[serde(default = "one")]
        exit_code: i32,
    },
    NeverReady {
        #[serde(default = "default_probe_message")]
        message: String,
    },
    SlowStart {
        #[serde(default = "default_slow")]
        delay: Distribution,
    },
    #[serde(rename_all = "camelCase")]
    FailAfter {
        #[serde(default = "default_fail_after")]
        after: Distribution,
        #[serde(default = "default_fail_reason")]
        reason: String,
        #[serde(default = "default_fail_message")]
        message: String,
        #[serde(default = "one")]
        exit_code: i32,
    },
    ReadinessFailure(ProbeFailureSpec),
    LivenessFailure(ProbeFailureSpec),
    StartupFailure(ProbeFailureSpec),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ProbeFailureSpec {
    #[serde(default = "default_probe_after")]
    after: Distribution,
    #[serde(default, rename = "for")]
    duration: Option<Distribution>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default = "killed")]
    exit_code: i32,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum FaultRepr {
    Name(String),
    Spec(FaultSpec),
}

impl<'de> Deserialize<'de> for Fault {
    /// A bare kind (`neverReady`) takes the defaults; a map (`{crashLoop: {after: 2s}}`) sets them.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match FaultRepr::deserialize(d)? {
            FaultRepr::Name(n) => Fault::named(&n).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "unknown fault {n:?}: expected imagePullFailure, crashLoop, neverReady, slowStart, failAfter, readinessFailure, livenessFailure or startupFailure"
                ))
            }),
            FaultRepr::Spec(s) => Ok(match s {
                FaultSpec::ImagePullFailure { message } => Fault::ImagePullFailure { message },
                FaultSpec::CrashLoop { after, exit_code } => Fault::CrashLoop { after, exit_code },
                FaultSpec::NeverReady { message } => Fault::NeverReady { message },
                FaultSpec::SlowStart { delay } => Fault::SlowStart { delay },
                FaultSpec::FailAfter { after, reason, message, exit_code } => {
                    Fault::FailAfter { after, reason, message, exit_code }
                }
                FaultSpec::ReadinessFailure(p) => p.into_fault(ProbeKind::Readiness, true),
                FaultSpec::LivenessFailure(p) => p.into_fault(ProbeKind::Liveness, false),
                FaultSpec::StartupFailure(p) => p.into_fault(ProbeKind::Startup, false),
            }),
        }
    }
}

impl ProbeFailureSpec {
    /// A readiness failure left without `for` lasts the default 30s (the annotation shortcut's
    /// too); `neverReady` is the one that lasts for ever.
    fn into_fault(self, probe: ProbeKind, bounded: bool) -> Fault {
        Fault::ProbeFailure {
            probe,
            after: self.after,
            duration: self.duration.or_else(|| bounded.then(default_unready_for)),
            message: self.message,
            exit_code: self.exit_code,
        }
    }
}

/// What a rule needs to know about a pod.
#[derive(Clone, Copy, Debug)]
pub struct PodFacts<'a> {
    /// The pod's namespace.
    pub namespace: &'a str,
    /// Its labels.
    pub labels: Option<&'a BTreeMap<String, String>>,
    /// The value of [`FAULT_ANNOTATION`], if any.
    pub fault_annotation: Option<&'a str>,
    /// The node it is bound to.
    pub node: &'a str,
    /// The images of its containers (init and regular).
    pub images: &'a [&'a str],
}

/// The fault a pod gets, and which of its containers it touches.
#[derive(Clone, Debug, PartialEq)]
pub struct Chosen {
    /// The fault.
    pub fault: Fault,
    /// Only containers whose image matches this glob; all containers when `None`.
    pub image_glob: Option<String>,
}

impl Chosen {
    /// Whether a container running `image` gets this (container) fault.
    pub fn affects(&self, image: &str) -> bool {
        self.image_glob.as_deref().is_none_or(|g| glob(g, image))
    }
}

impl Profile {
    /// Reads and checks a profile.
    pub fn from_yaml(text: &str) -> Result<Profile, ProfileError> {
        let mut p: Profile =
            serde_saphyr::from_str(text).map_err(|e| ProfileError::Yaml(e.to_string()))?;
        if p.failure_probability
            .is_some_and(|p| !(0.0..=1.0).contains(&p))
        {
            return Err(ProfileError::Probability("failureProbability".into()));
        }
        for (i, rule) in p.rules.iter_mut().enumerate() {
            let label = rule.name.clone().unwrap_or_else(|| format!("#{i}"));
            if rule.probability.is_some_and(|p| !(0.0..=1.0).contains(&p)) {
                return Err(ProfileError::Probability(label));
            }
            if let Some(s) = &rule.selector.labels {
                let sel = LabelSelector::parse(s).map_err(|e| ProfileError::Selector {
                    rule: label.clone(),
                    selector: s.clone(),
                    error: e.to_string(),
                })?;
                rule.selector.compiled = Some(sel);
            }
        }
        Ok(p)
    }

    /// How long the next run of a run-to-completion container lasts when its command says
    /// nothing the simulator reads: the profile's `runFor`, else [`DEFAULT_RUN_FOR`].
    pub fn run_for(&self, rng: &mut impl RngCore) -> Duration {
        self.run_for_override(rng).unwrap_or(DEFAULT_RUN_FOR)
    }

    /// The profile's own `runFor` for the next run, if it sets one: it overrides what a
    /// container's command says about its length.
    pub fn run_for_override(&self, rng: &mut impl RngCore) -> Option<Duration> {
        self.run_for.as_ref().map(|d| d.sample(rng))
    }

    /// The exit code of the next run: the pod's [`EXIT_CODE_ANNOTATION`] if it has one, else
    /// `failureExitCode` if the profile's failure roll fails the run, else the code the
    /// container's command states (`stated`), else 0. The roll is only drawn when the profile
    /// sets a probability, so a pod's random sequence does not depend on commands.
    pub fn run_exit_code(
        &self,
        annotated: Option<i32>,
        stated: Option<i32>,
        rng: &mut impl RngCore,
    ) -> i32 {
        if let Some(code) = annotated {
            return code;
        }
        if let Some(p) = self.failure_probability
            && p > 0.0
        {
            let roll: f64 = rng.random();
            if roll < p {
                return self.failure_exit_code.unwrap_or(1);
            }
        }
        stated.unwrap_or(0)
    }

    /// The fault for a pod: the annotation wins (a rule's name, else a fault kind); otherwise
    /// the first rule that matches and wins its probability roll (drawn from the pod's RNG).
    pub fn choose(&self, pod: &PodFacts<'_>, rng: &mut impl RngCore) -> Option<Chosen> {
        if let Some(want) = pod
            .fault_annotation
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            if let Some(rule) = self.rules.iter().find(|r| r.name.as_deref() == Some(want)) {
                return Some(Chosen {
                    fault: rule.fault.clone(),
                    image_glob: rule.selector.image.clone(),
                });
            }
            if let Some(fault) = Fault::named(want) {
                return Some(Chosen {
                    fault,
                    image_glob: None,
                });
            }
            tracing::warn!(
                fault = want,
                namespace = pod.namespace,
                "unknown fault named by annotation"
            );
        }
        for rule in &self.rules {
            if !rule.selector.matches(pod) {
                continue;
            }
            let p = rule.probability.unwrap_or(1.0);
            // Always draw, so one rule's probability does not shift the draws of the next pods.
            let roll: f64 = rng.random();
            if roll < p {
                return Some(Chosen {
                    fault: rule.fault.clone(),
                    image_glob: rule.selector.image.clone(),
                });
            }
        }
        None
    }
}

impl Match {
    fn matches(&self, pod: &PodFacts<'_>) -> bool {
        if self
            .namespace
            .as_deref()
            .is_some_and(|ns| ns != pod.namespace)
        {
            return false;
        }
        if self.node.as_deref().is_some_and(|g| !glob(g, pod.node)) {
            return false;
        }
        if self
            .image
            .as_deref()
            .is_some_and(|g| !pod.images.iter().any(|i| glob(g, i)))
        {
            return false;
        }
        match (&self.compiled, &self.labels) {
            (Some(sel), _) => sel.matches_labels(pod.labels),
            // Not compiled (built in code, not read): parse now; a bad selector matches nothing.
            (None, Some(s)) => {
                LabelSelector::parse(s).is_ok_and(|sel| sel.matches_labels(pod.labels))
            }
            (None, None) => true,
        }
    }
}

/// Shell-style glob: `*` matches any run of characters, `?` exactly one.
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distribution::pod_rng;

    #[test]
    fn globs() {
        let cases = [
            ("*broken*", "nginx:broken", true),
            ("*broken*", "registry.example/broken-app:1", true),
            ("*broken*", "nginx:1.27", false),
            ("node-1*", "node-1", true),
            ("node-1*", "node-12", true),
            ("node-1*", "node-2", false),
            ("node-?", "node-7", true),
            ("node-?", "node-17", false),
            ("*", "", true),
            ("", "x", false),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "aXXbYY", false),
        ];
        for (p, t, want) in cases {
            assert_eq!(glob(p, t), want, "{p} vs {t}");
        }
    }

    const EXAMPLE: &str = include_str!("../examples/faults.yaml");

    #[test]
    fn the_example_profile_loads() {
        let p = Profile::from_yaml(EXAMPLE).unwrap();
        assert_eq!(p.seed, 42);
        assert!(p.rules.len() >= 5);
        let kinds: Vec<_> = p
            .rules
            .iter()
            .map(|r| std::mem::discriminant(&r.fault))
            .collect();
        for f in [
            "imagePullFailure",
            "crashLoop",
            "neverReady",
            "slowStart",
            "failAfter",
            "readinessFailure",
        ] {
            let d = std::mem::discriminant(&Fault::named(f).unwrap());
            assert!(kinds.contains(&d), "the example shows {f}");
        }
    }

    #[test]
    fn the_grace_scale_is_optional() {
        assert_eq!(Profile::from_yaml("seed: 1").unwrap().grace_scale, None);
        let p = Profile::from_yaml("graceScale: 0\nstartDelay: 0s").unwrap();
        assert_eq!(p.grace_scale, Some(0.0));
    }

    #[test]
    fn faults_read_in_both_forms() {
        let cases = [
            (
                "fault: neverReady",
                Fault::NeverReady {
                    message: default_probe_message(),
                },
            ),
            (
                "fault: {imagePullFailure: {}}",
                Fault::ImagePullFailure { message: None },
            ),
            (
                "fault: {crashLoop: {after: 2s, exitCode: 3}}",
                Fault::CrashLoop {
                    after: Distribution::Fixed(Duration::from_secs(2)),
                    exit_code: 3,
                },
            ),
            (
                "fault: {failAfter: {after: {uniform: [1s, 2s]}, reason: Evicted}}",
                Fault::FailAfter {
                    after: Distribution::Uniform(Duration::from_secs(1), Duration::from_secs(2)),
                    reason: "Evicted".into(),
                    message: default_fail_message(),
                    exit_code: 1,
                },
            ),
        ];
        for (yaml, want) in cases {
            let p = Profile::from_yaml(&format!("rules:\n- {yaml}\n")).unwrap();
            assert_eq!(p.rules[0].fault, want, "{yaml}");
        }
        let probe_cases = [
            (
                "fault: readinessFailure",
                ProbeKind::Readiness,
                Some(Distribution::Fixed(Duration::from_secs(30))),
            ),
            ("fault: livenessFailure", ProbeKind::Liveness, None),
            ("fault: startupFailure", ProbeKind::Startup, None),
            (
                "fault: {readinessFailure: {after: 10s, for: 5s, message: down}}",
                ProbeKind::Readiness,
                Some(Distribution::Fixed(Duration::from_secs(5))),
            ),
        ];
        for (yaml, kind, lasts) in probe_cases {
            let p = Profile::from_yaml(&format!("rules:\n- {yaml}\n")).unwrap();
            let Fault::ProbeFailure {
                probe,
                duration,
                exit_code,
                ..
            } = &p.rules[0].fault
            else {
                panic!("{yaml}: {:?}", p.rules[0].fault);
            };
            assert_eq!(
                (*probe, duration, *exit_code),
                (kind, &lasts, 137),
                "{yaml}"
            );
        }
        let p = Profile::from_yaml(
            "rules:\n- fault: {livenessFailure: {after: 1m, message: slow, exitCode: 2}}\n",
        )
        .unwrap();
        assert_eq!(
            p.rules[0].fault,
            Fault::ProbeFailure {
                probe: ProbeKind::Liveness,
                after: Distribution::Fixed(Duration::from_secs(60)),
                duration: None,
                message: Some("slow".into()),
                exit_code: 2,
            }
        );
        let bad = [
            "rules:\n- fault: {livenessFailure: {until: 2s}}\n",
            "rules:\n- fault: meteorStrike\n",
            "rules:\n- fault: neverReady\n  probability: 2\n",
            "rules:\n- fault: neverReady\n  match: {labels: 'app in ('}\n",
            "rules:\n- fault: neverReady\n  match: {colour: red}\n",
        ];
        for yaml in bad {
            assert!(Profile::from_yaml(yaml).is_err(), "{yaml}");
        }
    }

    #[test]
    fn rules_select_pods() {
        let p = Profile::from_yaml(
            "rules:\n\
             - name: pull\n  match: {image: '*broken*'}\n  fault: imagePullFailure\n\
             - name: crash\n  match: {namespace: crashy, labels: 'app=web'}\n  fault: crashLoop\n\
             - name: slow\n  match: {node: 'node-9*'}\n  fault: slowStart\n\
             - name: never\n  match: {namespace: never}\n  fault: neverReady\n  probability: 0\n",
        )
        .unwrap();
        let web: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
        let facts = |ns, labels, ann, node, images| PodFacts {
            namespace: ns,
            labels,
            fault_annotation: ann,
            node,
            images,
        };
        let cases: Vec<(PodFacts<'_>, Option<&str>)> = vec![
            (
                facts("default", None, None, "node-0", &["nginx:broken"]),
                Some("pull"),
            ),
            (
                facts("default", None, None, "node-0", &["nginx:1.27"]),
                None,
            ),
            (
                facts("crashy", Some(&web), None, "node-0", &["nginx:1.27"]),
                Some("crash"),
            ),
            (facts("crashy", None, None, "node-0", &["nginx:1.27"]), None),
            (
                facts("default", None, None, "node-93", &["nginx:1.27"]),
                Some("slow"),
            ),
            (facts("never", None, None, "node-0", &["nginx:1.27"]), None),
            (
                facts("default", None, Some("never"), "node-0", &["nginx:1.27"]),
                Some("never"),
            ),
            (
                facts(
                    "default",
                    None,
                    Some("failAfter"),
                    "node-0",
                    &["nginx:1.27"],
                ),
                Some("failAfter"),
            ),
            (
                facts("default", None, Some("bogus"), "node-0", &["nginx:1.27"]),
                None,
            ),
        ];
        for (pod, want) in cases {
            let mut rng = pod_rng(1, pod.namespace, "p", "u");
            let got = p.choose(&pod, &mut rng);
            let name = got.as_ref().map(|c| match &c.fault {
                Fault::ImagePullFailure { .. } => "pull",
                Fault::CrashLoop { .. } => "crash",
                Fault::SlowStart { .. } => "slow",
                Fault::NeverReady { .. } => "never",
                Fault::FailAfter { .. } => "failAfter",
                Fault::ProbeFailure { .. } => "probe",
            });
            assert_eq!(name, want, "{pod:?}");
        }
    }

    #[test]
    fn image_globs_pick_the_containers() {
        let c = Chosen {
            fault: Fault::ImagePullFailure { message: None },
            image_glob: Some("*broken*".into()),
        };
        assert!(c.affects("nginx:broken"));
        assert!(!c.affects("busybox"));
        let all = Chosen {
            fault: Fault::ImagePullFailure { message: None },
            image_glob: None,
        };
        assert!(all.affects("busybox"));
    }

    #[test]
    fn probability_is_reproducible_and_roughly_right() {
        let p = Profile::from_yaml("seed: 3\nrules:\n- fault: neverReady\n  probability: 0.3\n")
            .unwrap();
        let hits = |seed: u64| {
            (0..1000)
                .filter(|i| {
                    let name = format!("p{i}");
                    let mut rng = pod_rng(seed, "default", &name, "");
                    let facts = PodFacts {
                        namespace: "default",
                        labels: None,
                        fault_annotation: None,
                        node: "n",
                        images: &[],
                    };
                    p.choose(&facts, &mut rng).is_some()
                })
                .count()
        };
        let n = hits(3);
        assert_eq!(n, hits(3));
        assert!((200..400).contains(&n), "{n} of 1000 at p=0.3");
    }
}
