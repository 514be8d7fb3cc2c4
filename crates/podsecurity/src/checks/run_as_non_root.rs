//! `runAsNonRoot` (restricted, upstream's `check_runAsNonRoot.go`): the pod or every container
//! must set `runAsNonRoot=true`, and none may set it false.

use super::{Check, Versioned};
use crate::{
    level::Level,
    pod,
    text::{join_quote, pluralize},
    verdict::Violation,
};
use serde_json::Value;

pub(crate) const CHECK: Check = Check {
    id: "runAsNonRoot",
    level: Level::Restricted,
    versions: &[Versioned {
        min: 0,
        check: v1_0,
        overrides: &[],
    }],
};

const REASON: &str = "runAsNonRoot != true";

fn v1_0(_meta: &Value, spec: &Value) -> Option<Violation> {
    let mut bad_setters = Vec::new();
    let pod_level = pod::security_context(spec).and_then(|sc| sc["runAsNonRoot"].as_bool());
    if pod_level == Some(false) {
        bad_setters.push("pod".to_string());
    }
    let pod_non_root = pod_level == Some(true);

    let mut explicitly_bad = Vec::new();
    let mut implicitly_bad = Vec::new();
    for c in pod::containers(spec) {
        match pod::security_context(c).and_then(|sc| sc["runAsNonRoot"].as_bool()) {
            Some(false) => explicitly_bad.push(pod::name(c)),
            Some(true) => {}
            None if !pod_non_root => implicitly_bad.push(pod::name(c)),
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
            REASON,
            format!(
                "{} must not set securityContext.runAsNonRoot=false",
                bad_setters.join(" and ")
            ),
        ));
    }
    (!implicitly_bad.is_empty()).then(|| {
        Violation::new(
            REASON,
            format!(
                "pod or {} {} must set securityContext.runAsNonRoot=true",
                pluralize("container", "containers", implicitly_bad.len()),
                join_quote(&implicitly_bad)
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn pod_or_containers_must_run_as_non_root() {
        let cases = [
            (
                json!({"spec": {"containers": [{"name": "a"}]}}),
                r#"pod or container "a" must set securityContext.runAsNonRoot=true"#,
            ),
            (
                json!({"spec": {"securityContext": {"runAsNonRoot": false},
                    "containers": [{"name": "a", "securityContext": null}]}}),
                "pod must not set securityContext.runAsNonRoot=false",
            ),
            (
                json!({"spec": {"securityContext": {"runAsNonRoot": true}, "containers": [
                    {"name": "a", "securityContext": null},
                    {"name": "b", "securityContext": {}},
                    {"name": "c", "securityContext": {"runAsNonRoot": false}},
                    {"name": "d", "securityContext": {"runAsNonRoot": false}},
                    {"name": "e", "securityContext": {"runAsNonRoot": true}},
                    {"name": "f", "securityContext": {"runAsNonRoot": true}},
                ]}}),
                r#"containers "c", "d" must not set securityContext.runAsNonRoot=false"#,
            ),
            (
                json!({"spec": {"containers": [
                    {"name": "a", "securityContext": null},
                    {"name": "b", "securityContext": {}},
                    {"name": "d", "securityContext": {"runAsNonRoot": true}},
                    {"name": "e", "securityContext": {"runAsNonRoot": true}},
                ]}}),
                r#"pod or containers "a", "b" must set securityContext.runAsNonRoot=true"#,
            ),
            (
                json!({"spec": {"securityContext": {"runAsNonRoot": false}, "containers": [
                    {"name": "a", "securityContext": {"runAsNonRoot": false}},
                ]}}),
                r#"pod and container "a" must not set securityContext.runAsNonRoot=false"#,
            ),
        ];
        for (pod, detail) in cases {
            assert_violation("runAsNonRoot", 0, &pod, "runAsNonRoot != true", detail);
        }
        let ok = json!({"spec": {"securityContext": {"runAsNonRoot": true},
            "containers": [{"name": "a"}]}});
        assert_allowed("runAsNonRoot", 0, &ok);
    }
}
