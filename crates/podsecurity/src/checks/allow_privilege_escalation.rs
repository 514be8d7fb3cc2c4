//! `allowPrivilegeEscalation` (restricted, upstream's `check_allowPrivilegeEscalation.go`): every
//! container must set `securityContext.allowPrivilegeEscalation=false` (from v1.8); Windows pods
//! are exempt from v1.25.

use super::{Check, Versioned};
use crate::{
    level::Level,
    pod,
    text::{join_quote, pluralize},
    verdict::Violation,
};
use serde_json::Value;

pub(crate) const CHECK: Check = Check {
    id: "allowPrivilegeEscalation",
    level: Level::Restricted,
    versions: &[
        Versioned {
            min: 8,
            check: v1_8,
            overrides: &[],
        },
        Versioned {
            min: 25,
            check: v1_25,
            overrides: &[],
        },
    ],
};

fn v1_8(_meta: &Value, spec: &Value) -> Option<Violation> {
    let bad: Vec<&str> = pod::containers(spec)
        .filter(|c| {
            pod::security_context(c)
                .and_then(|sc| sc["allowPrivilegeEscalation"].as_bool())
                .unwrap_or(true)
        })
        .map(pod::name)
        .collect();
    (!bad.is_empty()).then(|| {
        Violation::new(
            "allowPrivilegeEscalation != false",
            format!(
                "{} {} must set securityContext.allowPrivilegeEscalation=false",
                pluralize("container", "containers", bad.len()),
                join_quote(&bad)
            ),
        )
    })
}

fn v1_25(meta: &Value, spec: &Value) -> Option<Violation> {
    if pod::is_windows(spec) {
        return None;
    }
    v1_8(meta, spec)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn containers_must_disallow_escalation() {
        let pod = json!({"spec": {"containers": [
            {"name": "a"},
            {"name": "b", "securityContext": {"allowPrivilegeEscalation": null}},
            {"name": "c", "securityContext": {"allowPrivilegeEscalation": true}},
            {"name": "d", "securityContext": {"allowPrivilegeEscalation": false}},
        ]}});
        for minor in [8, 25] {
            assert_violation(
                "allowPrivilegeEscalation",
                minor,
                &pod,
                "allowPrivilegeEscalation != false",
                r#"containers "a", "b", "c" must set securityContext.allowPrivilegeEscalation=false"#,
            );
        }
    }

    #[test]
    fn windows_pods_are_exempt_from_1_25() {
        let windows = json!({"spec": {"os": {"name": "windows"}, "containers": [{"name": "a"}]}});
        assert_allowed("allowPrivilegeEscalation", 25, &windows);
        assert!(run("allowPrivilegeEscalation", 24, &windows).is_some());
        let linux = json!({"spec": {"os": {"name": "linux"}, "containers": [{"name": "a"}]}});
        assert_violation(
            "allowPrivilegeEscalation",
            25,
            &linux,
            "allowPrivilegeEscalation != false",
            r#"container "a" must set securityContext.allowPrivilegeEscalation=false"#,
        );
    }
}
