//! `appArmorProfile` (baseline, upstream's `check_appArmorProfile.go`): the
//! `container.apparmor.security.beta.kubernetes.io/*` annotations may only name
//! `runtime/default`, a `localhost/` profile, or be empty.

use super::{Check, Versioned};
use crate::{
    level::Level,
    text::{go_quote, pluralize},
    verdict::Violation,
};
use serde_json::Value;

pub(crate) const CHECK: Check = Check {
    id: "appArmorProfile",
    level: Level::Baseline,
    versions: &[Versioned {
        min: 0,
        check: v1_0,
        overrides: &[],
    }],
};

const PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

fn allowed(profile: &str) -> bool {
    profile.is_empty() || profile == "runtime/default" || profile.starts_with("localhost/")
}

fn v1_0(meta: &Value, _spec: &Value) -> Option<Violation> {
    let mut forbidden: Vec<String> = meta["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let v = v.as_str().unwrap_or_default();
            (k.starts_with(PREFIX) && !allowed(v)).then(|| format!("{k}={}", go_quote(v)))
        })
        .collect();
    forbidden.sort();
    (!forbidden.is_empty()).then(|| {
        Violation::new(
            pluralize(
                "forbidden AppArmor profile",
                "forbidden AppArmor profiles",
                forbidden.len(),
            ),
            forbidden.join(", "),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn only_default_and_localhost_profiles() {
        let pod = json!({"metadata": {"annotations": {
            "container.apparmor.security.beta.kubernetes.io/": "bogus",
            "container.apparmor.security.beta.kubernetes.io/a": "",
            "container.apparmor.security.beta.kubernetes.io/b": "runtime/default",
            "container.apparmor.security.beta.kubernetes.io/c": "localhost/",
            "container.apparmor.security.beta.kubernetes.io/d": "localhost/foo",
            "container.apparmor.security.beta.kubernetes.io/e": "unconfined",
            "container.apparmor.security.beta.kubernetes.io/f": "unknown",
        }}, "spec": {}});
        assert_violation(
            "appArmorProfile",
            0,
            &pod,
            "forbidden AppArmor profiles",
            r#"container.apparmor.security.beta.kubernetes.io/="bogus", container.apparmor.security.beta.kubernetes.io/e="unconfined", container.apparmor.security.beta.kubernetes.io/f="unknown""#,
        );
        let one = json!({"metadata": {"annotations": {
            "container.apparmor.security.beta.kubernetes.io/x": "unconfined", "env": "prod"}}});
        assert_violation(
            "appArmorProfile",
            0,
            &one,
            "forbidden AppArmor profile",
            r#"container.apparmor.security.beta.kubernetes.io/x="unconfined""#,
        );
        for ok in [
            json!({"metadata": {"annotations": {"env": "dev"}}}),
            json!({"metadata": {}}),
            json!({"metadata": {"annotations": {
                "container.apparmor.security.beta.kubernetes.io/test": "localhost/sec-profile01"}}}),
        ] {
            assert_allowed("appArmorProfile", 0, &ok);
        }
    }
}
