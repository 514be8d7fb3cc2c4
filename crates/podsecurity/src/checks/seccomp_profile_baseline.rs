//! `seccompProfile_baseline` (upstream's `check_seccompProfile_baseline.go`): a seccomp profile,
//! when given, is the runtime's default or a localhost one. Up to v1.18 the profiles are the
//! alpha annotations; from v1.19 the `securityContext.seccompProfile` fields.

use super::{Check, Versioned};
use crate::{
    level::Level,
    pod,
    text::{go_quote, join_quote, pluralize},
    verdict::Violation,
};
use serde_json::Value;
use std::collections::BTreeSet;

pub(crate) const ID: &str = "seccompProfile_baseline";

pub(crate) const CHECK: Check = Check {
    id: ID,
    level: Level::Baseline,
    versions: &[
        Versioned {
            min: 0,
            check: v1_0,
            overrides: &[],
        },
        Versioned {
            min: 19,
            check: v1_19,
            overrides: &[],
        },
    ],
};

const POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
const CONTAINER_ANNOTATION_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";

/// Whether a `seccompProfile.type` is `RuntimeDefault` or `Localhost`.
pub(crate) fn valid_type(t: &str) -> bool {
    t == "Localhost" || t == "RuntimeDefault"
}

fn valid_annotation(v: &str) -> bool {
    v == "runtime/default" || v == "docker/default" || v.starts_with("localhost/")
}

fn v1_0(meta: &Value, spec: &Value) -> Option<Violation> {
    let annotations = &meta["annotations"];
    let mut forbidden = BTreeSet::new();
    let mut check = |key: &str| {
        if let Some(v) = pod::set(&annotations[key]) {
            let v = pod::string(v);
            if !valid_annotation(v) {
                forbidden.insert(format!("{key}={}", go_quote(v)));
            }
        }
    };
    check(POD_ANNOTATION);
    for c in pod::containers(spec) {
        check(&format!("{CONTAINER_ANNOTATION_PREFIX}{}", pod::name(c)));
    }
    (!forbidden.is_empty()).then(|| {
        Violation::new(
            "seccompProfile",
            format!(
                "forbidden {} {}",
                pluralize("annotation", "annotations", forbidden.len()),
                forbidden.into_iter().collect::<Vec<_>>().join(", ")
            ),
        )
    })
}

/// The profile type `v` sets in its `securityContext.seccompProfile`, if it sets one.
pub(crate) fn profile_type(v: &Value) -> Option<&str> {
    let profile = pod::security_context(v).and_then(|sc| pod::set(&sc["seccompProfile"]))?;
    Some(pod::string(&profile["type"]))
}

fn v1_19(_meta: &Value, spec: &Value) -> Option<Violation> {
    let mut bad_setters = Vec::new();
    let mut bad_values = BTreeSet::new();
    if let Some(t) = profile_type(spec).filter(|t| !valid_type(t)) {
        bad_setters.push("pod".to_string());
        bad_values.insert(t);
    }
    let mut bad = Vec::new();
    for c in pod::containers(spec) {
        if let Some(t) = profile_type(c).filter(|t| !valid_type(t)) {
            bad.push(pod::name(c));
            bad_values.insert(t);
        }
    }
    if !bad.is_empty() {
        bad_setters.push(format!(
            "{} {}",
            pluralize("container", "containers", bad.len()),
            join_quote(&bad)
        ));
    }
    (!bad_setters.is_empty()).then(|| {
        Violation::new(
            "seccompProfile",
            format!(
                "{} must not set securityContext.seccompProfile.type to {}",
                bad_setters.join(" and "),
                join_quote(&bad_values)
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn annotations_up_to_1_18() {
        let three = json!([{"name": "a"}, {"name": "b"}, {"name": "c"}]);
        let cases = [
            (
                json!({"metadata": {"annotations": {
                    "seccomp.security.alpha.kubernetes.io/pod": "unconfined"}}, "spec": {}}),
                r#"forbidden annotation seccomp.security.alpha.kubernetes.io/pod="unconfined""#,
            ),
            (
                json!({"metadata": {"annotations": {
                    "container.seccomp.security.alpha.kubernetes.io/a": "unconfined",
                    "container.seccomp.security.alpha.kubernetes.io/b": "unknown"}},
                    "spec": {"containers": three}}),
                r#"forbidden annotations container.seccomp.security.alpha.kubernetes.io/a="unconfined", container.seccomp.security.alpha.kubernetes.io/b="unknown""#,
            ),
            (
                json!({"metadata": {"annotations": {
                    "seccomp.security.alpha.kubernetes.io/pod": "unconfined",
                    "container.seccomp.security.alpha.kubernetes.io/a": "unconfined",
                    "container.seccomp.security.alpha.kubernetes.io/b": "unknown"}},
                    "spec": {"containers": three}}),
                r#"forbidden annotations container.seccomp.security.alpha.kubernetes.io/a="unconfined", container.seccomp.security.alpha.kubernetes.io/b="unknown", seccomp.security.alpha.kubernetes.io/pod="unconfined""#,
            ),
        ];
        for (pod, detail) in cases {
            assert_violation(
                "seccompProfile_baseline",
                18,
                &pod,
                "seccompProfile",
                detail,
            );
            // From v1.19 the annotations are not looked at.
            assert_allowed("seccompProfile_baseline", 19, &pod);
        }
    }

    #[test]
    fn fields_from_1_19() {
        let mixed = |pod_type: &str| {
            json!({"spec": {"securityContext": {"seccompProfile": {"type": pod_type}},
            "containers": [
                {"name": "a", "securityContext": null},
                {"name": "b", "securityContext": {}},
                {"name": "c", "securityContext": {"seccompProfile": {"type": "Unconfined"}}},
                {"name": "d", "securityContext": {"seccompProfile": {"type": "Unconfined"}}},
                {"name": "e", "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}},
                {"name": "f", "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}},
            ]}})
        };
        let cases = [
            (
                json!({"spec": {"securityContext": {"seccompProfile": {"type": "Unconfined"}},
                    "containers": [{"name": "a", "securityContext": null}]}}),
                r#"pod must not set securityContext.seccompProfile.type to "Unconfined""#,
            ),
            (
                mixed("RuntimeDefault"),
                r#"containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined""#,
            ),
            (
                mixed("Unconfined"),
                r#"pod and containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined""#,
            ),
        ];
        for (pod, detail) in cases {
            assert_violation(
                "seccompProfile_baseline",
                19,
                &pod,
                "seccompProfile",
                detail,
            );
        }
        assert_allowed(
            "seccompProfile_baseline",
            19,
            &json!({"spec": {"containers": [{"name": "a"}]}}),
        );
    }
}
