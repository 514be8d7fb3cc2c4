//! `hostPathVolumes` (baseline, upstream's `check_hostPathVolumes.go`): no `hostPath` volume.

use super::{Check, Versioned};
use crate::{
    level::Level,
    pod,
    text::{join_quote, pluralize},
    verdict::Violation,
};
use serde_json::Value;

pub(crate) const ID: &str = "hostPathVolumes";

pub(crate) const CHECK: Check = Check {
    id: ID,
    level: Level::Baseline,
    versions: &[Versioned {
        min: 0,
        check: v1_0,
        overrides: &[],
    }],
};

fn v1_0(_meta: &Value, spec: &Value) -> Option<Violation> {
    let host: Vec<&str> = spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| pod::set(&v["hostPath"]).is_some())
        .map(pod::name)
        .collect();
    (!host.is_empty()).then(|| {
        Violation::new(
            "hostPath volumes",
            format!(
                "{} {}",
                pluralize("volume", "volumes", host.len()),
                join_quote(&host)
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn no_host_path_volumes() {
        let pod = json!({"spec": {"volumes": [
            {"name": "a", "hostPath": {}},
            {"name": "b", "hostPath": {"path": "/"}},
            {"name": "c", "emptyDir": {}},
        ]}});
        assert_violation(
            "hostPathVolumes",
            0,
            &pod,
            "hostPath volumes",
            r#"volumes "a", "b""#,
        );
        let one = json!({"spec": {"volumes": [{"name": "a", "hostPath": {"path": "/"}}]}});
        assert_violation(
            "hostPathVolumes",
            0,
            &one,
            "hostPath volumes",
            r#"volume "a""#,
        );
    }
}
