//! `windowsHostProcess` (baseline, upstream's `check_windowsHostProcess.go`): no Windows
//! HostProcess pod or container.

use super::{Check, Versioned};
use crate::{
    level::Level,
    pod,
    text::{join_quote, pluralize},
    verdict::Violation,
};
use serde_json::Value;

pub(crate) const CHECK: Check = Check {
    id: "windowsHostProcess",
    level: Level::Baseline,
    versions: &[Versioned {
        min: 0,
        check: v1_0,
        overrides: &[],
    }],
};

fn host_process(v: &Value) -> bool {
    pod::security_context(v).and_then(|sc| sc["windowsOptions"]["hostProcess"].as_bool())
        == Some(true)
}

fn v1_0(_meta: &Value, spec: &Value) -> Option<Violation> {
    let bad: Vec<&str> = pod::containers(spec)
        .filter(|c| host_process(c))
        .map(pod::name)
        .collect();
    let mut setters = Vec::new();
    if host_process(spec) {
        setters.push("pod".to_string());
    }
    if !bad.is_empty() {
        setters.push(format!(
            "{} {}",
            pluralize("container", "containers", bad.len()),
            join_quote(&bad)
        ));
    }
    (!setters.is_empty()).then(|| {
        Violation::new(
            "hostProcess",
            format!(
                "{} must not set securityContext.windowsOptions.hostProcess=true",
                setters.join(" and ")
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn no_host_process() {
        let pod = json!({"spec": {
        "securityContext": {"windowsOptions": {"hostProcess": true}},
        "containers": [
            {"name": "a", "securityContext": null},
            {"name": "b", "securityContext": {}},
            {"name": "c", "securityContext": {"windowsOptions": {}}},
            {"name": "d", "securityContext": {"windowsOptions": {"hostProcess": false}}},
            {"name": "e", "securityContext": {"windowsOptions": {"hostProcess": true}}},
            {"name": "f", "securityContext": {"windowsOptions": {"hostProcess": true}}},
        ]}});
        assert_violation(
            "windowsHostProcess",
            0,
            &pod,
            "hostProcess",
            r#"pod and containers "e", "f" must not set securityContext.windowsOptions.hostProcess=true"#,
        );
    }
}
