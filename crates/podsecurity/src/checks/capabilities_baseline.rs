//! `capabilities_baseline` (upstream's `check_capabilities_baseline.go`): containers may add
//! only capabilities of the runtime's default set.

use super::{Check, Versioned};
use crate::{
    level::Level,
    pod,
    text::{join_quote, pluralize},
    verdict::Violation,
};
use serde_json::Value;
use std::collections::BTreeSet;

pub(crate) const ID: &str = "capabilities_baseline";

pub(crate) const CHECK: Check = Check {
    id: ID,
    level: Level::Baseline,
    versions: &[Versioned {
        min: 0,
        check: v1_0,
        overrides: &[],
    }],
};

const ALLOWED: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

fn v1_0(_meta: &Value, spec: &Value) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut added = BTreeSet::new();
    for c in pod::containers(spec) {
        let Some(caps) = pod::security_context(c).and_then(|sc| pod::set(&sc["capabilities"]))
        else {
            continue;
        };
        let mut valid = true;
        for cap in caps["add"].as_array().into_iter().flatten() {
            let cap = pod::string(cap);
            if !ALLOWED.contains(&cap) {
                valid = false;
                added.insert(cap);
            }
        }
        if !valid {
            bad.push(pod::name(c));
        }
    }
    (!bad.is_empty()).then(|| {
        Violation::new(
            "non-default capabilities",
            format!(
                "{} {} must not include {} in securityContext.capabilities.add",
                pluralize("container", "containers", bad.len()),
                join_quote(&bad),
                join_quote(&added)
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn only_default_capabilities() {
        let pod = json!({"spec": {"containers": [
            {"name": "a", "securityContext": {"capabilities": {"add": ["FOO", "BAR"]}}},
            {"name": "b", "securityContext": {"capabilities": {"add": ["BAR", "BAZ"]}}},
            {"name": "c", "securityContext": {"capabilities": {"add": ["CHOWN", "KILL"]}}},
            {"name": "d", "securityContext": {"capabilities": {"drop": ["ALL"]}}},
        ]}});
        assert_violation(
            "capabilities_baseline",
            0,
            &pod,
            "non-default capabilities",
            r#"containers "a", "b" must not include "BAR", "BAZ", "FOO" in securityContext.capabilities.add"#,
        );
    }
}
