//! Taints and tolerations, as upstream's `TaintToleration` filter and `v1helper` match them.

use k8s_openapi::api::core::v1::{Taint, Toleration};

/// The taint a cordoned node is treated as carrying (upstream's `NodeUnschedulable` filter lets
/// pods that tolerate it through).
pub const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";

pub use api::taint::{tolerated, tolerates};

/// The first `NoSchedule` or `NoExecute` taint the pod does not tolerate; `PreferNoSchedule`
/// only steers scoring upstream and never filters.
pub fn first_untolerated<'a>(taints: &'a [Taint], tolerations: &[Toleration]) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
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
            (
                "equal key, value and effect",
                tol("dedicated", "Equal", "gpu", "NoSchedule"),
                true,
            ),
            (
                "no operator means Equal",
                tol("dedicated", "", "gpu", "NoSchedule"),
                true,
            ),
            (
                "other value",
                tol("dedicated", "Equal", "db", "NoSchedule"),
                false,
            ),
            (
                "exists ignores the value",
                tol("dedicated", "Exists", "", "NoSchedule"),
                true,
            ),
            (
                "empty effect matches all effects",
                tol("dedicated", "Exists", "", ""),
                true,
            ),
            (
                "other effect",
                tol("dedicated", "Exists", "", "NoExecute"),
                false,
            ),
            ("other key", tol("team", "Exists", "", ""), false),
            (
                "empty key with Exists tolerates everything",
                tol("", "Exists", "", ""),
                true,
            ),
            (
                "unknown operator",
                tol("dedicated", "Like", "gpu", ""),
                false,
            ),
        ];
        for (name, toleration, want) in cases {
            assert_eq!(tolerates(&toleration, &t), want, "{name}");
        }
    }

    #[test]
    fn only_no_schedule_and_no_execute_filter() {
        let taints = [
            taint("soft", "", "PreferNoSchedule"),
            taint("node.kubernetes.io/unreachable", "", "NoExecute"),
            taint("dedicated", "gpu", "NoSchedule"),
        ];
        let cases: Vec<(&str, Vec<Toleration>, Option<&str>)> = vec![
            (
                "nothing tolerated: the first filtering taint",
                vec![],
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
                Some("dedicated"),
            ),
            (
                "both tolerated; PreferNoSchedule does not matter",
                vec![
                    tol("node.kubernetes.io/unreachable", "Exists", "", ""),
                    tol("dedicated", "Equal", "gpu", ""),
                ],
                None,
            ),
            ("tolerate everything", vec![tol("", "Exists", "", "")], None),
        ];
        for (name, tolerations, want) in cases {
            assert_eq!(
                first_untolerated(&taints, &tolerations).map(|t| t.key.as_str()),
                want,
                "{name}"
            );
        }
    }
}
