//! Which checks a level and version run, and running them (upstream's `policy/registry.go`).

use crate::{
    checks::{CHECKS, Check, Versioned},
    level::{Level, LevelVersion, Version},
    verdict::Verdict,
};
use serde_json::Value;

/// The newest version any check changed in: later versions, and `latest`, judge as it does.
fn max_version() -> u64 {
    CHECKS
        .iter()
        .filter_map(|c| c.versions.last())
        .map(|v| v.min)
        .max()
        .unwrap_or_default()
}

/// The version of `check` in force at `v1.<minor>`, if it exists yet.
fn in_force(check: &Check, minor: u64) -> Option<&Versioned> {
    check.versions.iter().rev().find(|v| v.min <= minor)
}

/// Judges a pod (or pod template) by its `metadata` and `spec` against `lv`: every check of the
/// level at that version (restricted includes baseline, less the baseline checks a restricted
/// one replaces), in upstream's order. `privileged` allows everything.
pub fn evaluate(lv: LevelVersion, metadata: &Value, spec: &Value) -> Verdict {
    if lv.level == Level::Privileged {
        return Verdict::default();
    }
    let max = max_version();
    let minor = match lv.version {
        Version::Minor(m) => m.min(max),
        Version::Latest => max,
    };
    let overridden: Vec<&str> = if lv.level == Level::Restricted {
        CHECKS
            .iter()
            .filter(|c| c.level == Level::Restricted)
            .filter_map(|c| in_force(c, minor))
            .flat_map(|v| v.overrides.iter().copied())
            .collect()
    } else {
        Vec::new()
    };
    let violations = CHECKS
        .iter()
        .filter(|c| c.level <= lv.level && !overridden.contains(&c.id))
        .filter_map(|c| in_force(c, minor))
        .filter_map(|v| (v.check)(metadata, spec))
        .collect();
    Verdict { violations }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reasons(level: Level, version: Version, pod: &Value) -> Vec<String> {
        evaluate(
            LevelVersion::new(level, version),
            &pod["metadata"],
            &pod["spec"],
        )
        .violations
        .into_iter()
        .map(|v| v.reason)
        .collect()
    }

    /// A pod that breaks every check there is.
    fn worst_pod() -> Value {
        json!({
            "metadata": {"annotations": {
                "container.apparmor.security.beta.kubernetes.io/c": "unconfined",
                "seccomp.security.alpha.kubernetes.io/pod": "unconfined",
            }},
            "spec": {
                "hostNetwork": true,
                "securityContext": {
                    "runAsUser": 0,
                    "sysctls": [{"name": "kernel.msgmax"}],
                    "seLinuxOptions": {"user": "root"},
                    "seccompProfile": {"type": "Unconfined"},
                    "windowsOptions": {"hostProcess": true},
                },
                "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
                "containers": [{
                    "name": "c",
                    "ports": [{"containerPort": 80, "hostPort": 80}],
                    "securityContext": {
                        "privileged": true,
                        "procMount": "Unmasked",
                        "capabilities": {"add": ["SYS_ADMIN"]},
                    },
                }],
            },
        })
    }

    #[test]
    fn runs_the_checks_of_the_level_in_upstreams_order() {
        let pod = worst_pod();
        let baseline = [
            "forbidden AppArmor profile",
            "non-default capabilities",
            "host namespaces",
            "hostPath volumes",
            "hostPort",
            "privileged",
            "procMount",
            "seLinuxOptions",
            "seccompProfile",
            "forbidden sysctls",
            "hostProcess",
        ];
        assert_eq!(reasons(Level::Baseline, Version::Latest, &pod), baseline);
        // Restricted replaces the baseline capabilities, hostPath and seccomp checks.
        let restricted = [
            "forbidden AppArmor profile",
            "host namespaces",
            "hostPort",
            "privileged",
            "procMount",
            "seLinuxOptions",
            "forbidden sysctls",
            "hostProcess",
            "allowPrivilegeEscalation != false",
            "unrestricted capabilities",
            "restricted volume types",
            "runAsNonRoot != true",
            "runAsUser=0",
            "seccompProfile",
        ];
        assert_eq!(
            reasons(Level::Restricted, Version::Latest, &pod),
            restricted
        );
        assert!(reasons(Level::Privileged, Version::Latest, &pod).is_empty());
    }

    #[test]
    fn honours_the_version() {
        let pod = worst_pod();
        // v1.0: no allowPrivilegeEscalation (1.8), restricted capabilities (1.22), runAsUser
        // (1.23) or restricted seccomp (1.19): the baseline capabilities and annotation-based
        // seccomp checks apply instead.
        let v1_0 = [
            "forbidden AppArmor profile",
            "non-default capabilities",
            "host namespaces",
            "hostPort",
            "privileged",
            "procMount",
            "seLinuxOptions",
            "seccompProfile",
            "forbidden sysctls",
            "hostProcess",
            "restricted volume types",
            "runAsNonRoot != true",
        ];
        assert_eq!(reasons(Level::Restricted, Version::Minor(0), &pod), v1_0);
        let detail = |v| {
            evaluate(
                LevelVersion::new(Level::Baseline, v),
                &pod["metadata"],
                &pod["spec"],
            )
            .violations
            .into_iter()
            .find(|v| v.reason == "seccompProfile")
            .map(|v| v.detail)
        };
        assert_eq!(
            detail(Version::Minor(18)).as_deref(),
            Some(r#"forbidden annotation seccomp.security.alpha.kubernetes.io/pod="unconfined""#)
        );
        assert_eq!(
            detail(Version::Minor(19)).as_deref(),
            Some(r#"pod must not set securityContext.seccompProfile.type to "Unconfined""#)
        );
        // Versions past the newest check judge as the newest.
        assert_eq!(
            reasons(Level::Restricted, Version::Minor(28), &pod),
            reasons(Level::Restricted, Version::Latest, &pod)
        );
        assert_eq!(max_version(), 27);
    }

    #[test]
    fn prints_reasons_and_details_as_upstream() {
        let pod = json!({"spec": {"hostNetwork": true, "containers": [{"name": "c"}]}});
        let verdict = evaluate(
            LevelVersion::new(Level::Restricted, Version::Latest),
            &pod["metadata"],
            &pod["spec"],
        );
        assert_eq!(
            verdict.forbidden_detail(),
            concat!(
                "host namespaces (hostNetwork=true), ",
                r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), "#,
                r#"unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), "#,
                r#"runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), "#,
                r#"seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#,
            )
        );
        assert_eq!(
            verdict.forbidden_reason(),
            "host namespaces, allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile"
        );
        let compliant = json!({"spec": {
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "c", "securityContext": {
                "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}]}});
        assert!(
            evaluate(
                LevelVersion::new(Level::Restricted, Version::Latest),
                &compliant["metadata"],
                &compliant["spec"]
            )
            .allowed()
        );
    }
}
