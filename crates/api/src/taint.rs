//! Taints and tolerations: whether a toleration tolerates a taint, as upstream's
//! `Toleration.ToleratesTaint`. The scheduler filters with it, the node lifecycle controller
//! evicts with it, and the DaemonSet controller decides placement with it.

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
}
