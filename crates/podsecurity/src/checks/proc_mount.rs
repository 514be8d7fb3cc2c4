//! `procMount` (baseline, upstream's `check_procMount.go`): containers keep the default masked
//! `/proc`.

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
    id: "procMount",
    level: Level::Baseline,
    versions: &[Versioned {
        min: 0,
        check: v1_0,
        overrides: &[],
    }],
};

fn v1_0(_meta: &Value, spec: &Value) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut types = BTreeSet::new();
    for c in pod::containers(spec) {
        let Some(mount) = pod::security_context(c).and_then(|sc| pod::set(&sc["procMount"])) else {
            continue;
        };
        let mount = pod::string(mount);
        if mount != "Default" {
            bad.push(pod::name(c));
            types.insert(mount);
        }
    }
    (!bad.is_empty()).then(|| {
        Violation::new(
            "procMount",
            format!(
                "{} {} must not set securityContext.procMount to {}",
                pluralize("container", "containers", bad.len()),
                join_quote(&bad),
                join_quote(&types)
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn only_the_default_proc_mount() {
        let pod = json!({"spec": {"containers": [
            {"name": "a", "securityContext": null},
            {"name": "b", "securityContext": {}},
            {"name": "c", "securityContext": {"procMount": "Default"}},
            {"name": "d", "securityContext": {"procMount": "Unmasked"}},
            {"name": "e", "securityContext": {"procMount": "other"}},
        ]}});
        assert_violation(
            "procMount",
            0,
            &pod,
            "procMount",
            r#"containers "d", "e" must not set securityContext.procMount to "Unmasked", "other""#,
        );
    }
}
