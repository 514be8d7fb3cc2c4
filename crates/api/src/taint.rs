//! Taints and tolerations: whether a toleration tolerates a taint, as upstream's
//! `Toleration.ToleratesTaint`. The one implementation: the scheduler filters with it, the node
//! lifecycle controller evicts with it, and the DaemonSet controller decides placement with it.

use k8s_openapi::api::core::v1::{Taint, Toleration};

/// Whether `toleration` tolerates `taint`: the effect matches (an empty effect matches all), the
/// key matches (an empty key matches all, with `Exists`), and with `Equal` (or no operator) the
/// value matches.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or("");
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or("");
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => {
            toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        _ => false,
    }
}

/// Whether any of `tolerations` tolerates `taint`.
pub fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| tolerates(t, taint))
}

/// The effect that keeps new pods off a node.
pub const NO_SCHEDULE: &str = "NoSchedule";
/// The effect that also evicts running pods.
pub const NO_EXECUTE: &str = "NoExecute";
/// The effects that filter: `PreferNoSchedule` only steers scoring and never filters.
pub const FILTERING_EFFECTS: &[&str] = &[NO_SCHEDULE, NO_EXECUTE];
/// The taint a cordoned node is treated as carrying (upstream's `NodeUnschedulable` filter lets
/// pods that tolerate it through).
pub const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";

/// The first taint with one of `effects` that no toleration tolerates.
pub fn first_untolerated<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    effects: &[&str],
) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| effects.contains(&t.effect.as_str()))
        .find(|t| !tolerated(tolerations, t))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: (!value.is_empty()).then(|| value.into()),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn tol(key: &str, op: &str, value: &str, effect: &str) -> Toleration {
        let s = |v: &str| (!v.is_empty()).then(|| v.to_string());
        Toleration {
            key: s(key),
            operator: s(op),
            value: s(value),
            effect: s(effect),
            toleration_seconds: None,
        }
    }

    #[test]
    fn toleration_matching() {
        let t = taint("dedicated", "gpu", "NoSchedule");
        let cases = [
            (tol("dedicated", "Equal", "gpu", "NoSchedule"), true),
            (tol("dedicated", "", "gpu", "NoSchedule"), true),
            (tol("dedicated", "Equal", "cpu", "NoSchedule"), false),
            (tol("dedicated", "Exists", "", "NoSchedule"), true),
            (tol("dedicated", "Exists", "", ""), true),
            (tol("dedicated", "Exists", "", "NoExecute"), false),
            (tol("", "Exists", "", ""), true),
            (tol("other", "Exists", "", ""), false),
            (tol("dedicated", "Bogus", "gpu", "NoSchedule"), false),
        ];
        for (toleration, want) in cases {
            assert_eq!(tolerates(&toleration, &t), want, "{toleration:?}");
        }
        assert!(tolerated(
            &[
                tol("x", "Exists", "", ""),
                tol("dedicated", "Exists", "", "")
            ],
            &t
        ));
        assert!(!tolerated(&[], &t));
    }

    #[test]
    fn only_the_given_effects_count() {
        let taints = [
            taint("soft", "", "PreferNoSchedule"),
            taint("node.kubernetes.io/unreachable", "", "NoExecute"),
            taint("dedicated", "gpu", "NoSchedule"),
        ];
        type Case = (
            &'static str,
            Vec<Toleration>,
            &'static [&'static str],
            Option<&'static str>,
        );
        let cases: Vec<Case> = vec![
            (
                "nothing tolerated: the first filtering taint",
                vec![],
                FILTERING_EFFECTS,
                Some("node.kubernetes.io/unreachable"),
            ),
            (
                "unreachable tolerated",
                vec![tol(
                    "node.kubernetes.io/unreachable",
                    "Exists",
                    "",
                    "NoExecute",
                )],
                FILTERING_EFFECTS,
                Some("dedicated"),
            ),
            (
                "NoExecute only",
                vec![tol(
                    "node.kubernetes.io/unreachable",
                    "Exists",
                    "",
                    "NoExecute",
                )],
                &[NO_EXECUTE],
                None,
            ),
            (
                "both tolerated; PreferNoSchedule does not matter",
                vec![
                    tol("node.kubernetes.io/unreachable", "Exists", "", ""),
                    tol("dedicated", "Equal", "gpu", ""),
                ],
                FILTERING_EFFECTS,
                None,
            ),
        ];
        for (name, tolerations, effects, want) in cases {
            assert_eq!(
                first_untolerated(&taints, &tolerations, effects).map(|t| t.key.as_str()),
                want,
                "{name}"
            );
        }
    }
}
