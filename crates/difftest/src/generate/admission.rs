//! Sequences about admission: the same pods and workloads written by create and by server-side
//! apply (as a create and as an update) into namespaces whose Pod Security level and LimitRanges
//! differ, so that a write path that skips a plugin (issue 37: server-side apply once skipped
//! admission) shows as a difference from upstream.
//!
//! They are their own family, at seeds from [`FIRST_SEED`] on, so that the general sequences'
//! random draws (and the corpus recorded from them) stay as they were.

use crate::sequence::{Request, Sequence};
use rand::{Rng, SeedableRng, rngs::StdRng, seq::IndexedRandom};
use serde_json::{Value, json};

/// The first seed of the family; every seed below it is a general sequence.
pub const FIRST_SEED: u64 = 1_000_000;

/// Pod Security levels a namespace enforces (none: the label is left out).
const LEVELS: [Option<&str>; 3] = [Some("restricted"), Some("baseline"), None];

/// Pods as a user writes them, by how much Pod Security each one would allow.
#[derive(Clone, Copy, Debug)]
enum Pod {
    /// Meets `restricted`.
    Restricted,
    /// Meets `baseline`, not `restricted` (no securityContext at all).
    Baseline,
    /// A privileged container: `privileged` only.
    Privileged,
    /// The host's network: `privileged` only.
    HostNetwork,
}

const PODS: [Pod; 4] = [
    Pod::Restricted,
    Pod::Baseline,
    Pod::Privileged,
    Pod::HostNetwork,
];

/// Names pods are written under: few, so that applies meet earlier creates.
const NAMES: [&str; 3] = ["alpha", "beta", "gamma"];

/// The sequence for `seed` (at least [`FIRST_SEED`]): the namespace with its level, `default`
/// ServiceAccount and maybe a LimitRange, then 4 to 10 writes, then the namespace's deletion.
pub fn sequence(seed: u64) -> Sequence {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut steps = Vec::new();
    let mut push = |label: String, request: Request| {
        steps.push(crate::sequence::Step { label, request });
    };
    let level = *LEVELS.choose(&mut rng).unwrap_or(&None);
    let mut labels = serde_json::Map::new();
    if let Some(level) = level {
        labels.insert("pod-security.kubernetes.io/enforce".into(), json!(level));
    }
    if rng.random_bool(0.5) {
        labels.insert(
            "pod-security.kubernetes.io/warn".into(),
            json!("restricted"),
        );
    }
    push(
        format!("create/namespaces/enforce-{}", level.unwrap_or("none")),
        Request::new("POST", "/api/v1/namespaces").json(&json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "{{ns}}", "labels": labels}
        })),
    );
    push(
        "create/serviceaccounts/default".into(),
        Request::new("POST", "/api/v1/namespaces/{{ns}}/serviceaccounts")
            .json(&json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}))
            .tracking("serviceaccounts/default"),
    );
    if rng.random_bool(0.5) {
        push(
            "create/limitranges/defaults".into(),
            Request::new("POST", "/api/v1/namespaces/{{ns}}/limitranges").json(&json!({
                "apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults"},
                "spec": {"limits": [{"type": "Container",
                    "default": {"cpu": "200m", "memory": "128Mi"},
                    "defaultRequest": {"cpu": "100m", "memory": "64Mi"}}]}
            })),
        );
    }
    let writes = rng.random_range(4..=10usize);
    for _ in 0..writes {
        let pod = *PODS.choose(&mut rng).unwrap_or(&Pod::Restricted);
        let name = *NAMES.choose(&mut rng).unwrap_or(&"alpha");
        let tier = *["fe", "be"].choose(&mut rng).unwrap_or(&"fe");
        let (label, request) = match rng.random_range(0..10u32) {
            0..3 => (
                format!("create/pods/{}", pod.name()),
                Request::new("POST", "/api/v1/namespaces/{{ns}}/pods")
                    .json(&pod.object(name, tier))
                    .tracking(format!("pods/{name}")),
            ),
            3..8 => (
                format!("apply/pods/{}", pod.name()),
                Request::new(
                    "PATCH",
                    format!("/api/v1/namespaces/{{{{ns}}}}/pods/{name}"),
                )
                .body_as(
                    "application/apply-patch+yaml",
                    pod.object(name, tier).to_string(),
                )
                .q("fieldManager", "difftest")
                .tracking(format!("pods/{name}")),
            ),
            _ => {
                let mut deployment = json!({
                    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                    "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                             "template": pod.object(name, tier)}
                });
                let template = &mut deployment["spec"]["template"];
                template["metadata"] = json!({"labels": {"app": name, "tier": tier}});
                if let Some(t) = template.as_object_mut() {
                    t.remove("apiVersion");
                    t.remove("kind");
                }
                (
                    format!("apply/deployments/{}", pod.name()),
                    Request::new(
                        "PATCH",
                        format!("/apis/apps/v1/namespaces/{{{{ns}}}}/deployments/{name}"),
                    )
                    .body_as("application/apply-patch+yaml", deployment.to_string())
                    .q("fieldManager", "difftest")
                    .tracking(format!("deployments/{name}")),
                )
            }
        };
        let (label, request) = if rng.random_bool(0.15) {
            (format!("{label}+dryrun"), request.q("dryRun", "All"))
        } else {
            (label, request)
        };
        push(label, request);
    }
    push(
        "delete/namespaces/end".into(),
        Request::new("DELETE", "/api/v1/namespaces/{{ns}}"),
    );
    Sequence {
        seed,
        namespace: format!("dt-{seed}"),
        steps,
    }
}

impl Pod {
    fn name(self) -> &'static str {
        match self {
            Pod::Restricted => "restricted",
            Pod::Baseline => "baseline",
            Pod::Privileged => "privileged",
            Pod::HostNetwork => "host-network",
        }
    }

    /// The pod `name`, labelled `tier`: an apply of another tier to the same name is an update
    /// that changes only a label.
    fn object(self, name: &str, tier: &str) -> Value {
        let mut container = json!({"name": "c", "image": "nginx:1.27"});
        let mut spec = json!({"containers": []});
        match self {
            Pod::Restricted => {
                spec["securityContext"] =
                    json!({"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}});
                container["securityContext"] =
                    json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}});
            }
            Pod::Baseline => {}
            Pod::Privileged => container["securityContext"] = json!({"privileged": true}),
            Pod::HostNetwork => spec["hostNetwork"] = json!(true),
        }
        spec["containers"] = json!([container]);
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": name, "tier": tier}},
            "spec": spec
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_family_applies_every_kind_of_pod_into_every_level() {
        let labels: Vec<String> = (FIRST_SEED..FIRST_SEED + 60)
            .flat_map(|seed| sequence(seed).steps.into_iter().map(|s| s.label))
            .collect();
        for want in [
            "create/namespaces/enforce-restricted",
            "create/namespaces/enforce-baseline",
            "create/namespaces/enforce-none",
            "apply/pods/privileged",
            "apply/pods/host-network",
            "apply/pods/restricted",
            "apply/pods/baseline",
            "create/pods/privileged",
            "apply/deployments/privileged",
            "create/limitranges/defaults",
        ] {
            assert!(labels.iter().any(|l| l == want), "no {want} in 60 seeds");
        }
    }
}
