//! How long a rehearsed pod takes to start and become Ready, from what the snapshot measured.
//!
//! The node simulator's profile says it: one `slowStart` rule per workload, matching its pods by
//! namespace and selector labels, whose delay spreads evenly over the times its pods took in the
//! real cluster. A workload whose containers have a readiness (or startup) probe gets the time
//! to its containers' start only, because the simulator runs the probes themselves; one without
//! gets the time to Ready. The simulator's own delays are set to zero, so the rule is the whole
//! time; workloads the snapshot has no figure for get the simulator's usual 1-3 s.
//!
//! The user's profile comes first: its rules (a broken image, a crash loop) win over the timing
//! rules, and its `startDelay` / `readinessDelay`, if set, are kept.

use crate::cli::snapshot::Snapshot;
use serde_json::{Map, Value, json};

/// The delay of pods the snapshot has no figure for: the simulator's default start and
/// readiness delays (0.5-1.5 s each) together.
const UNMEASURED: [&str; 2] = ["1s", "3s"];

/// One workload's timing rule, as derived.
#[derive(Debug, PartialEq)]
pub struct Derived {
    /// `deployment/ns/name`.
    pub workload: String,
    /// How many pods it was measured on.
    pub pods: usize,
    /// The fastest and slowest, in seconds.
    pub range: (f64, f64),
    /// Whether the figure is to container start (probes decide Ready).
    pub to_start: bool,
}

fn millis(seconds: f64) -> String {
    format!("{}ms", (seconds * 1000.0).round() as u64)
}

/// The delay distribution of measured `seconds`: their mean and standard deviation. Each figure
/// is a difference of two timestamps kept to the second, so any one is off by up to a second,
/// but their mean is not (the truncations cancel out on average); a range from the fastest to
/// the slowest would be skewed by the outliers.
///
/// The truncations add a spread of their own, which is not the pods'. Pods that all took 1.5 s
/// are recorded as 1 s or 2 s, half each, depending only on where in its second each started:
/// whole seconds on two neighbouring values are what any one duration between them leaves, so
/// they show no spread at all, and the mean alone is rehearsed. (Taken as a spread, it made each
/// wave of a rollout wait for its slowest pod, 0.3-0.6 s more a wave than any pod took: a
/// 100-node DaemonSet rehearsed 10% slow in issue 39.) Wider figures spread for real; the
/// truncations' share, a variance of 1/12 s² each, two per figure, is taken off (Sheppard's
/// correction, twice).
fn spread(seconds: &[f64]) -> Value {
    const TRUNCATION_VARIANCE: f64 = 2.0 / 12.0;
    let n = seconds.len() as f64;
    let mean = seconds.iter().sum::<f64>() / n;
    let (lo, hi) = seconds
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), s| {
            (lo.min(*s), hi.max(*s))
        });
    let whole = seconds.iter().all(|s| s.fract() == 0.0);
    if whole && hi - lo <= 1.0 {
        return json!(millis(mean));
    }
    let variance = seconds.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / n;
    let stddev = (variance - TRUNCATION_VARIANCE).max(0.0).sqrt();
    if stddev < 0.001 {
        json!(millis(mean))
    } else {
        json!({"normal": {"mean": millis(mean), "stddev": millis(stddev)}})
    }
}

/// `key=value,...` of a selector's `matchLabels`: what a profile rule matches labels by. None
/// when it has none (a selector of expressions alone is not matched, and gets no rule).
fn labels(selector: &Value) -> Option<String> {
    let m = selector.get("matchLabels")?.as_object()?;
    if m.is_empty() {
        return None;
    }
    Some(
        m.iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect::<Vec<_>>()
            .join(","),
    )
}

fn probed(template: &Value) -> bool {
    template
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.get("readinessProbe").is_some() || c.get("startupProbe").is_some())
        })
}

fn matches(selector: &Map<String, Value>, pod: &Value) -> bool {
    let labels = pod.pointer("/metadata/labels").and_then(Value::as_object);
    selector
        .iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// The timing rules for `snapshot`'s workloads, and what each was derived from.
pub fn rules(snapshot: &Snapshot) -> (Vec<Value>, Vec<Derived>) {
    let pods: Vec<&Value> = snapshot
        .objects
        .get("pods")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let mut rules = Vec::new();
    let mut derived = Vec::new();
    for (key, kind) in [
        ("deployments", "deployment"),
        ("daemonSets", "daemonset"),
        ("statefulSets", "statefulset"),
    ] {
        let workloads = snapshot.objects.get(key).and_then(Value::as_array);
        for w in workloads.into_iter().flatten() {
            let ns = w
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let name = w
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let selector = w.pointer("/spec/selector").cloned().unwrap_or_default();
            let (Some(label_text), Some(match_labels)) = (
                labels(&selector),
                selector.get("matchLabels").and_then(Value::as_object),
            ) else {
                continue;
            };
            let to_start = w.pointer("/spec/template").is_some_and(probed);
            let field = if to_start {
                "startedAfterSeconds"
            } else {
                "readyAfterSeconds"
            };
            let mut seconds: Vec<f64> = pods
                .iter()
                .filter(|p| {
                    p.pointer("/metadata/namespace").and_then(Value::as_str) == Some(ns)
                        && matches(match_labels, p)
                })
                .filter_map(|p| {
                    let pod_name = p.pointer("/metadata/name").and_then(Value::as_str)?;
                    snapshot
                        .timings
                        .get(&format!("{ns}/{pod_name}"))?
                        .get(field)?
                        .as_f64()
                })
                .collect();
            if seconds.is_empty() {
                continue;
            }
            seconds.sort_by(f64::total_cmp);
            let (lo, hi) = (seconds[0], seconds[seconds.len() - 1]);
            let workload = format!("{kind}/{ns}/{name}");
            let delay = spread(&seconds);
            rules.push(json!({
                "name": format!("whatif-timing {workload}"),
                "match": {"namespace": ns, "labels": label_text},
                "fault": {"slowStart": {"delay": delay}},
            }));
            derived.push(Derived {
                workload,
                pods: seconds.len(),
                range: (lo, hi),
                to_start,
            });
        }
    }
    (rules, derived)
}

/// The profile a rehearsal run uses: `user`'s (a parsed profile document, or none), then the
/// timing rules, then the default for the rest, seeded with `seed`.
pub fn profile(user: Option<&Value>, timing: &[Value], seed: u64) -> Value {
    let mut out = user.and_then(Value::as_object).cloned().unwrap_or_default();
    out.insert("seed".into(), json!(seed));
    out.entry("startDelay").or_insert(json!("0"));
    out.entry("readinessDelay").or_insert(json!("0"));
    let mut rules = out
        .remove("rules")
        .and_then(|r| match r {
            Value::Array(a) => Some(a),
            _ => None,
        })
        .unwrap_or_default();
    rules.extend(timing.iter().cloned());
    rules.push(json!({
        "name": "whatif-timing unmeasured",
        "fault": {"slowStart": {"delay": {"uniform": UNMEASURED}}},
    }));
    out.insert("rules".into(), Value::Array(rules));
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::snapshot::{API_VERSION, KIND};

    fn snapshot(objects: Value, timings: Value) -> Snapshot {
        Snapshot {
            api_version: API_VERSION.into(),
            kind: KIND.into(),
            taken_at: jiff::Timestamp::UNIX_EPOCH,
            server: "https://x".into(),
            namespaces: vec![],
            objects: objects.as_object().cloned().unwrap_or_default(),
            timings: timings.as_object().cloned().unwrap_or_default(),
            unreadable: vec![],
            control_plane: None,
        }
    }

    fn pod(name: &str, app: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "shop", "labels": {"app": app}}})
    }

    #[test]
    fn the_spread_the_seconds_cut_off_is_not_the_pods() {
        // Six pods that all took 4.5 s, as second-truncated timestamps record them: no spread.
        assert_eq!(spread(&[4.0, 5.0, 4.0, 5.0, 5.0, 4.0]), json!("4500ms"));
        assert_eq!(spread(&[4.0, 4.0, 4.0, 4.0, 4.0, 5.0]), json!("4167ms"));
        // Three seconds apart: a spread, less what the truncations add (a variance of 2/3 s²
        // less 1/6).
        assert_eq!(
            spread(&[3.0, 4.0, 5.0]),
            json!({"normal":
            {"mean": "4000ms", "stddev": "707ms"}})
        );
        // Figures finer than a second are no truncation's: a variance of 1/5 s² less 1/6.
        assert_eq!(
            spread(&[4.0, 5.0, 4.0, 5.0, 4.5]),
            json!({"normal": {"mean": "4500ms", "stddev": "183ms"}})
        );
        // A real spread stays (a variance of 4 s² less 1/6).
        assert_eq!(
            spread(&[2.0, 6.0]),
            json!({"normal":
            {"mean": "4000ms", "stddev": "1958ms"}})
        );
    }

    #[test]
    fn each_workload_gets_the_spread_its_pods_took() {
        let web = json!({"metadata": {"name": "web", "namespace": "shop"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [{"name": "c"}]}}}});
        let db = json!({"metadata": {"name": "db", "namespace": "shop"},
            "spec": {"selector": {"matchLabels": {"app": "db"}},
                "template": {"spec": {"containers": [{"name": "c", "readinessProbe": {}}]}}}});
        let snap = snapshot(
            json!({"deployments": [web], "statefulSets": [db],
                "pods": [pod("web-a", "web"), pod("web-b", "web"), pod("db-0", "db"),
                    pod("other", "other")]}),
            json!({"shop/web-a": {"startedAfterSeconds": 1.0, "readyAfterSeconds": 2.5},
                "shop/web-b": {"startedAfterSeconds": 1.5, "readyAfterSeconds": 4.0},
                "shop/db-0": {"startedAfterSeconds": 3.0, "readyAfterSeconds": 13.0},
                "shop/other": {"readyAfterSeconds": 99.0}}),
        );
        let (rules, derived) = rules(&snap);
        assert_eq!(
            rules,
            vec![
                json!({"name": "whatif-timing deployment/shop/web",
                    "match": {"namespace": "shop", "labels": "app=web"},
                    "fault": {"slowStart": {"delay":
                        {"normal": {"mean": "3250ms", "stddev": "629ms"}}}}}),
                // Probed: the start only; the simulated probe decides when it is Ready.
                json!({"name": "whatif-timing statefulset/shop/db",
                    "match": {"namespace": "shop", "labels": "app=db"},
                    "fault": {"slowStart": {"delay": "3000ms"}}}),
            ]
        );
        assert_eq!(derived[0].pods, 2);
        assert_eq!(derived[0].range, (2.5, 4.0));
        assert!(derived[1].to_start);
    }

    #[test]
    fn a_workload_without_figures_gets_no_rule() {
        let web = json!({"metadata": {"name": "web", "namespace": "shop"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {}}});
        let snap = snapshot(
            json!({"deployments": [web], "pods": [pod("web-a", "web")]}),
            json!({}),
        );
        assert_eq!(rules(&snap).0, Vec::<Value>::new());
    }

    #[test]
    fn the_users_rules_come_first_and_their_delays_are_kept() {
        let user = json!({"readinessDelay": "2s",
            "rules": [{"match": {"image": "*broken*"}, "fault": "imagePullFailure"}]});
        let timing =
            vec![json!({"name": "whatif-timing x", "fault": {"slowStart": {"delay": "2s"}}})];
        let p = profile(Some(&user), &timing, 7);
        assert_eq!(p["seed"], 7);
        assert_eq!(p["readinessDelay"], "2s");
        assert_eq!(p["startDelay"], "0");
        let names: Vec<&str> = p["rules"]
            .as_array()
            .expect("rules")
            .iter()
            .map(|r| r.get("name").and_then(Value::as_str).unwrap_or("user"))
            .collect();
        assert_eq!(
            names,
            vec!["user", "whatif-timing x", "whatif-timing unmeasured"]
        );
        // What nodesim reads: the document parses as a profile.
        nodesim::Profile::from_yaml(&p.to_string()).expect("a valid profile");
    }
}
