//! `capabilities_restricted` (upstream's `check_capabilities_restricted.go`): from v1.22 every
//! container must drop `ALL` and may add only `NET_BIND_SERVICE`; it replaces the baseline
//! capabilities check at the restricted level. Windows pods are exempt from v1.25.

use super::{Check, Versioned, capabilities_baseline};
use crate::{
    level::Level,
    pod,
    text::{join_quote, pluralize},
    verdict::Violation,
};
use serde_json::Value;
use std::collections::BTreeSet;

pub(crate) const CHECK: Check = Check {
    id: "capabilities_restricted",
    level: Level::Restricted,
    versions: &[
        Versioned {
            min: 22,
            check: v1_22,
            overrides: &[capabilities_baseline::ID],
        },
        Versioned {
            min: 25,
            check: v1_25,
            overrides: &[capabilities_baseline::ID],
        },
    ],
};

fn v1_22(_meta: &Value, spec: &Value) -> Option<Violation> {
    let mut missing_drop_all = Vec::new();
    let mut adding_forbidden = Vec::new();
    let mut forbidden = BTreeSet::new();
    for c in pod::containers(spec) {
        let Some(caps) = pod::security_context(c).and_then(|sc| pod::set(&sc["capabilities"]))
        else {
            missing_drop_all.push(pod::name(c));
            continue;
        };
        let list = |key: &str| caps[key].as_array().into_iter().flatten().map(pod::string);
        if !list("drop").any(|cap| cap == "ALL") {
            missing_drop_all.push(pod::name(c));
        }
        let mut added_forbidden = false;
        for cap in list("add").filter(|cap| *cap != "NET_BIND_SERVICE") {
            added_forbidden = true;
            forbidden.insert(cap);
        }
        if added_forbidden {
            adding_forbidden.push(pod::name(c));
        }
    }
    let mut details = Vec::new();
    if !missing_drop_all.is_empty() {
        details.push(format!(
            r#"{} {} must set securityContext.capabilities.drop=["ALL"]"#,
            pluralize("container", "containers", missing_drop_all.len()),
            join_quote(&missing_drop_all)
        ));
    }
    if !adding_forbidden.is_empty() {
        details.push(format!(
            "{} {} must not include {} in securityContext.capabilities.add",
            pluralize("container", "containers", adding_forbidden.len()),
            join_quote(&adding_forbidden),
            join_quote(&forbidden)
        ));
    }
    (!details.is_empty()).then(|| Violation::new("unrestricted capabilities", details.join("; ")))
}

fn v1_25(meta: &Value, spec: &Value) -> Option<Violation> {
    if pod::is_windows(spec) {
        return None;
    }
    v1_22(meta, spec)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn containers_must_drop_all_and_add_only_net_bind_service() {
        let pod = json!({"spec": {"containers": [
            {"name": "a", "securityContext": {"capabilities": {"add": ["FOO", "BAR"]}}},
            {"name": "b", "securityContext": {"capabilities": {"add": ["BAR", "BAZ"]}}},
            {"name": "c", "securityContext": {"capabilities": {
                "add": ["NET_BIND_SERVICE", "CHOWN"], "drop": ["ALL", "FOO"]}}},
        ]}});
        for minor in [22, 25] {
            assert_violation(
                "capabilities_restricted",
                minor,
                &pod,
                "unrestricted capabilities",
                r#"containers "a", "b" must set securityContext.capabilities.drop=["ALL"]; containers "a", "b", "c" must not include "BAR", "BAZ", "CHOWN", "FOO" in securityContext.capabilities.add"#,
            );
        }
        let ok = json!({"spec": {"containers": [{"name": "a", "securityContext": {
            "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}}}]}});
        assert_allowed("capabilities_restricted", 25, &ok);
    }

    #[test]
    fn windows_pods_are_exempt_from_1_25() {
        let windows = json!({"spec": {"os": {"name": "windows"}, "containers": [{"name": "a"}]}});
        assert_allowed("capabilities_restricted", 25, &windows);
        let linux = json!({"spec": {"os": {"name": "linux"}, "containers": [{"name": "a"}]}});
        assert_violation(
            "capabilities_restricted",
            25,
            &linux,
            "unrestricted capabilities",
            r#"container "a" must set securityContext.capabilities.drop=["ALL"]"#,
        );
    }
}
