//! `hostPorts` (baseline, upstream's `check_hostPorts.go`): no container port bound on the host.

use super::{Check, Versioned};
use crate::{
    level::Level,
    pod,
    text::{join_quote, pluralize},
    verdict::Violation,
};
use serde_json::Value;
use std::collections::BTreeSet;

pub(crate) const CHECK: Check = Check {
    id: "hostPorts",
    level: Level::Baseline,
    versions: &[Versioned {
        min: 0,
        check: v1_0,
        overrides: &[],
    }],
};

fn v1_0(_meta: &Value, spec: &Value) -> Option<Violation> {
    let mut bad = Vec::new();
    // Upstream keeps the ports as a set of strings, so they are listed in string order.
    let mut ports = BTreeSet::new();
    for c in pod::containers(spec) {
        let mut valid = true;
        for p in c["ports"].as_array().into_iter().flatten() {
            let port = p["hostPort"].as_i64().unwrap_or_default();
            if port != 0 {
                valid = false;
                ports.insert(port.to_string());
            }
        }
        if !valid {
            bad.push(pod::name(c));
        }
    }
    (!bad.is_empty()).then(|| {
        Violation::new(
            "hostPort",
            format!(
                "{} {} {} {} {}",
                pluralize("container", "containers", bad.len()),
                join_quote(&bad),
                pluralize("uses", "use", bad.len()),
                pluralize("hostPort", "hostPorts", ports.len()),
                ports.into_iter().collect::<Vec<_>>().join(", ")
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn no_host_ports() {
        let one = json!({"spec": {"containers": [
            {"name": "a", "ports": [{"hostPort": 0}]},
            {"name": "b", "ports": [{"hostPort": 0}, {"hostPort": 20}]},
        ]}});
        assert_violation(
            "hostPorts",
            0,
            &one,
            "hostPort",
            r#"container "b" uses hostPort 20"#,
        );
        let many = json!({"spec": {"containers": [
            {"name": "a", "ports": [{"hostPort": 0}]},
            {"name": "b", "ports": [{"hostPort": 0}, {"hostPort": 10}, {"hostPort": 20}]},
            {"name": "c", "ports": [{"hostPort": 0}, {"hostPort": 10}, {"hostPort": 30}]},
        ]}});
        assert_violation(
            "hostPorts",
            0,
            &many,
            "hostPort",
            r#"containers "b", "c" use hostPorts 10, 20, 30"#,
        );
    }
}
