//! `hostNamespaces` (baseline, upstream's `check_hostNamespaces.go`): no host network, PID or
//! IPC namespace.

use super::{Check, Versioned};
use crate::{level::Level, verdict::Violation};
use serde_json::Value;

pub(crate) const CHECK: Check = Check {
    id: "hostNamespaces",
    level: Level::Baseline,
    versions: &[Versioned {
        min: 0,
        check: v1_0,
        overrides: &[],
    }],
};

fn v1_0(_meta: &Value, spec: &Value) -> Option<Violation> {
    let shared: Vec<&str> = [
        ("hostNetwork", "hostNetwork=true"),
        ("hostPID", "hostPID=true"),
        ("hostIPC", "hostIPC=true"),
    ]
    .into_iter()
    .filter(|(field, _)| spec[*field].as_bool() == Some(true))
    .map(|(_, text)| text)
    .collect();
    (!shared.is_empty()).then(|| Violation::new("host namespaces", shared.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn no_host_namespaces() {
        let pod = json!({"spec": {"hostNetwork": true, "hostIPC": true, "hostPID": true}});
        assert_violation(
            "hostNamespaces",
            0,
            &pod,
            "host namespaces",
            "hostNetwork=true, hostPID=true, hostIPC=true",
        );
        let ipc = json!({"spec": {"hostNetwork": false, "hostIPC": true}});
        assert_violation("hostNamespaces", 0, &ipc, "host namespaces", "hostIPC=true");
        assert_allowed(
            "hostNamespaces",
            0,
            &json!({"spec": {"hostNetwork": false}}),
        );
    }
}
