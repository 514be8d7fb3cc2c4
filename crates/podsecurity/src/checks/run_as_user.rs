//! `runAsUser` (restricted, upstream's `check_runAsUser.go`): from v1.23 neither the pod nor a
//! container may set `runAsUser: 0`.

use super::{Check, Versioned};
use crate::{
    level::Level,
    pod,
    text::{join_quote, pluralize},
    verdict::Violation,
};
use serde_json::Value;

pub(crate) const CHECK: Check = Check {
    id: "runAsUser",
    level: Level::Restricted,
    versions: &[Versioned {
        min: 23,
        check: v1_23,
        overrides: &[],
    }],
};

fn runs_as_root(v: &Value) -> bool {
    pod::security_context(v).and_then(|sc| sc["runAsUser"].as_i64()) == Some(0)
}

fn v1_23(_meta: &Value, spec: &Value) -> Option<Violation> {
    let mut bad_setters = Vec::new();
    if runs_as_root(spec) {
        bad_setters.push("pod".to_string());
    }
    let bad: Vec<&str> = pod::containers(spec)
        .filter(|c| runs_as_root(c))
        .map(pod::name)
        .collect();
    if !bad.is_empty() {
        bad_setters.push(format!(
            "{} {}",
            pluralize("container", "containers", bad.len()),
            join_quote(&bad)
        ));
    }
    (!bad_setters.is_empty()).then(|| {
        Violation::new(
            "runAsUser=0",
            format!("{} must not set runAsUser=0", bad_setters.join(" and ")),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn nobody_runs_as_uid_0() {
        let pod = json!({"spec": {"securityContext": {"runAsUser": 0},
            "containers": [{"name": "a", "securityContext": null}]}});
        assert_violation(
            "runAsUser",
            23,
            &pod,
            "runAsUser=0",
            "pod must not set runAsUser=0",
        );
        let containers = json!({"spec": {"securityContext": {"runAsUser": 1000}, "containers": [
            {"name": "a", "securityContext": null},
            {"name": "b", "securityContext": {}},
            {"name": "c", "securityContext": {"runAsUser": 0}},
            {"name": "d", "securityContext": {"runAsUser": 0}},
            {"name": "e", "securityContext": {"runAsUser": 1}},
            {"name": "f", "securityContext": {"runAsUser": 1}},
        ]}});
        assert_violation(
            "runAsUser",
            23,
            &containers,
            "runAsUser=0",
            r#"containers "c", "d" must not set runAsUser=0"#,
        );
        for ok in [
            json!({"spec": {"securityContext": {"runAsUser": 1000}, "containers": [{"name": "a"}]}}),
            json!({"spec": {"securityContext": {"runAsUser": null}, "containers": [{"name": "a"}]}}),
            json!({"spec": {"containers": [
                {"name": "c", "securityContext": {"runAsUser": 1}},
                {"name": "d", "securityContext": {"runAsUser": 2}},
            ]}}),
        ] {
            assert_allowed("runAsUser", 23, &ok);
        }
    }
}
