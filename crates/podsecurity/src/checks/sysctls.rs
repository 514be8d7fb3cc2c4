//! `sysctls` (baseline, upstream's `check_sysctls.go`): only the safe, namespaced sysctls; v1.27
//! adds `net.ipv4.ip_local_reserved_ports`.

use super::{Check, Versioned};
use crate::{level::Level, pod, verdict::Violation};
use serde_json::Value;

pub(crate) const CHECK: Check = Check {
    id: "sysctls",
    level: Level::Baseline,
    versions: &[
        Versioned {
            min: 0,
            check: v1_0,
            overrides: &[],
        },
        Versioned {
            min: 27,
            check: v1_27,
            overrides: &[],
        },
    ],
};

const ALLOWED_1_0: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
];

fn v1_0(_meta: &Value, spec: &Value) -> Option<Violation> {
    check(spec, |name| ALLOWED_1_0.contains(&name))
}

fn v1_27(_meta: &Value, spec: &Value) -> Option<Violation> {
    check(spec, |name| {
        ALLOWED_1_0.contains(&name) || name == "net.ipv4.ip_local_reserved_ports"
    })
}

fn check(spec: &Value, allowed: impl Fn(&str) -> bool) -> Option<Violation> {
    let forbidden: Vec<&str> = pod::security_context(spec)
        .and_then(|sc| sc["sysctls"].as_array())
        .into_iter()
        .flatten()
        .map(pod::name)
        .filter(|name| !allowed(name))
        .collect();
    (!forbidden.is_empty()).then(|| Violation::new("forbidden sysctls", forbidden.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn only_safe_sysctls() {
        let pod = json!({"spec": {"securityContext": {"sysctls": [{"name": "a"}, {"name": "b"}]}}});
        for minor in [0, 27] {
            assert_violation("sysctls", minor, &pod, "forbidden sysctls", "a, b");
        }
        let reserved = json!({"spec": {"securityContext": {"sysctls": [
            {"name": "net.ipv4.ip_local_reserved_ports", "value": "1024-4999"}]}}});
        assert_violation(
            "sysctls",
            26,
            &reserved,
            "forbidden sysctls",
            "net.ipv4.ip_local_reserved_ports",
        );
        assert_allowed("sysctls", 27, &reserved);
    }
}
