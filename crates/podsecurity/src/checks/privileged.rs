//! `privileged` (baseline, upstream's `check_privileged.go`): no privileged container.

use super::{Check, Versioned};
use crate::{
    level::Level,
    pod,
    text::{join_quote, pluralize},
    verdict::Violation,
};
use serde_json::Value;

pub(crate) const CHECK: Check = Check {
    id: "privileged",
    level: Level::Baseline,
    versions: &[Versioned {
        min: 0,
        check: v1_0,
        overrides: &[],
    }],
};

fn v1_0(_meta: &Value, spec: &Value) -> Option<Violation> {
    let bad: Vec<&str> = pod::containers(spec)
        .filter(|c| {
            pod::security_context(c).and_then(|sc| sc["privileged"].as_bool()) == Some(true)
        })
        .map(pod::name)
        .collect();
    (!bad.is_empty()).then(|| {
        Violation::new(
            "privileged",
            format!(
                "{} {} must not set securityContext.privileged=true",
                pluralize("container", "containers", bad.len()),
                join_quote(&bad)
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn no_privileged_containers() {
        let pod = json!({"spec": {"containers": [
            {"name": "a", "securityContext": null},
            {"name": "b", "securityContext": {}},
            {"name": "c", "securityContext": {"privileged": false}},
            {"name": "d", "securityContext": {"privileged": true}},
            {"name": "e", "securityContext": {"privileged": true}},
        ]}});
        assert_violation(
            "privileged",
            0,
            &pod,
            "privileged",
            r#"containers "d", "e" must not set securityContext.privileged=true"#,
        );
    }
}
