//! `seccompProfile_restricted` (upstream's `check_seccompProfile_restricted.go`): from v1.19 the
//! pod or every container must set a `RuntimeDefault` or `Localhost` seccomp profile; it replaces
//! the baseline seccomp check. Windows pods are exempt from v1.25.

use super::{
    Check, Versioned,
    seccomp_profile_baseline::{self, profile_type, valid_type},
};
use crate::{
    level::Level,
    pod,
    text::{join_quote, pluralize},
    verdict::Violation,
};
use serde_json::Value;
use std::collections::BTreeSet;

pub(crate) const CHECK: Check = Check {
    id: "seccompProfile_restricted",
    level: Level::Restricted,
    versions: &[
        Versioned {
            min: 19,
            check: v1_19,
            overrides: &[seccomp_profile_baseline::ID],
        },
        Versioned {
            min: 25,
            check: v1_25,
            overrides: &[seccomp_profile_baseline::ID],
        },
    ],
};

fn v1_19(_meta: &Value, spec: &Value) -> Option<Violation> {
    let mut bad_setters = Vec::new();
    let mut bad_values = BTreeSet::new();
    let mut pod_set = false;
    match profile_type(spec) {
        Some(t) if !valid_type(t) => {
            bad_setters.push("pod".to_string());
            bad_values.insert(t);
        }
        Some(_) => pod_set = true,
        None => {}
    }
    let mut explicitly_bad = Vec::new();
    let mut implicitly_bad = Vec::new();
    for c in pod::containers(spec) {
        match profile_type(c) {
            Some(t) if !valid_type(t) => {
                explicitly_bad.push(pod::name(c));
                bad_values.insert(t);
            }
            Some(_) => {}
            None if !pod_set => implicitly_bad.push(pod::name(c)),
            None => {}
        }
    }
    if !explicitly_bad.is_empty() {
        bad_setters.push(format!(
            "{} {}",
            pluralize("container", "containers", explicitly_bad.len()),
            join_quote(&explicitly_bad)
        ));
    }
    if !bad_setters.is_empty() {
        return Some(Violation::new(
            "seccompProfile",
            format!(
                "{} must not set securityContext.seccompProfile.type to {}",
                bad_setters.join(" and "),
                join_quote(&bad_values)
            ),
        ));
    }
    (!implicitly_bad.is_empty()).then(|| {
        Violation::new(
            "seccompProfile",
            format!(
                r#"pod or {} {} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost""#,
                pluralize("container", "containers", implicitly_bad.len()),
                join_quote(&implicitly_bad)
            ),
        )
    })
}

fn v1_25(meta: &Value, spec: &Value) -> Option<Violation> {
    if pod::is_windows(spec) {
        return None;
    }
    v1_19(meta, spec)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn pod_or_containers_must_set_a_profile() {
        let cases = [
            (
                json!({"spec": {"containers": [{"name": "a"}]}}),
                r#"pod or container "a" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost""#,
            ),
            (
                json!({"spec": {"securityContext": {"seccompProfile": {"type": "Unconfined"}},
                    "containers": [{"name": "a", "securityContext": null}]}}),
                r#"pod must not set securityContext.seccompProfile.type to "Unconfined""#,
            ),
            (
                json!({"spec": {"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [
                    {"name": "a", "securityContext": null},
                    {"name": "b", "securityContext": {}},
                    {"name": "c", "securityContext": {"seccompProfile": {"type": "Unconfined"}}},
                    {"name": "d", "securityContext": {"seccompProfile": {"type": "Unconfined"}}},
                    {"name": "e", "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}},
                    {"name": "f", "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}},
                ]}}),
                r#"containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined""#,
            ),
            (
                json!({"spec": {"containers": [
                    {"name": "a", "securityContext": null},
                    {"name": "b", "securityContext": {}},
                    {"name": "d", "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}},
                    {"name": "e", "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}},
                ]}}),
                r#"pod or containers "a", "b" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost""#,
            ),
        ];
        for minor in [19, 25] {
            for (pod, detail) in &cases {
                assert_violation(
                    "seccompProfile_restricted",
                    minor,
                    pod,
                    "seccompProfile",
                    detail,
                );
            }
        }
    }

    #[test]
    fn windows_pods_are_exempt_from_1_25() {
        let windows = json!({"spec": {"os": {"name": "windows"}, "containers": [{"name": "a"}]}});
        assert_allowed("seccompProfile_restricted", 25, &windows);
        assert!(run("seccompProfile_restricted", 24, &windows).is_some());
    }
}
