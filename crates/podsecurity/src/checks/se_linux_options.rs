//! `seLinuxOptions` (baseline, upstream's `check_seLinuxOptions.go`): the SELinux type may only
//! be a container type, and user and role may not be set.

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
    id: "seLinuxOptions",
    level: Level::Baseline,
    versions: &[Versioned {
        min: 0,
        check: v1_0,
        overrides: &[],
    }],
};

const ALLOWED_TYPES: &[&str] = &["", "container_t", "container_init_t", "container_kvm_t"];

/// What the pod and its containers set wrong, gathered across all of them.
#[derive(Default)]
struct Findings<'a> {
    types: BTreeSet<&'a str>,
    user: bool,
    role: bool,
}

impl<'a> Findings<'a> {
    /// Whether `v`'s `securityContext.seLinuxOptions`, when set, is valid (noting what is not).
    fn valid(&mut self, v: &'a Value) -> bool {
        let Some(opts) = pod::security_context(v).and_then(|sc| pod::set(&sc["seLinuxOptions"]))
        else {
            return true;
        };
        let mut valid = true;
        let ty = pod::string(&opts["type"]);
        if !ALLOWED_TYPES.contains(&ty) {
            valid = false;
            self.types.insert(ty);
        }
        if !pod::string(&opts["user"]).is_empty() {
            valid = false;
            self.user = true;
        }
        if !pod::string(&opts["role"]).is_empty() {
            valid = false;
            self.role = true;
        }
        valid
    }
}

fn v1_0(_meta: &Value, spec: &Value) -> Option<Violation> {
    let mut found = Findings::default();
    let mut bad_setters = Vec::new();
    if !found.valid(spec) {
        bad_setters.push("pod".to_string());
    }
    let bad: Vec<&str> = pod::containers(spec)
        .filter(|c| !found.valid(c))
        .map(pod::name)
        .collect();
    if !bad.is_empty() {
        bad_setters.push(format!(
            "{} {}",
            pluralize("container", "containers", bad.len()),
            join_quote(&bad)
        ));
    }
    if bad_setters.is_empty() {
        return None;
    }
    let mut data = Vec::new();
    if !found.types.is_empty() {
        data.push(format!(
            "{} {}",
            pluralize("type", "types", found.types.len()),
            join_quote(&found.types)
        ));
    }
    if found.user {
        data.push("user may not be set".to_string());
    }
    if found.role {
        data.push("role may not be set".to_string());
    }
    Some(Violation::new(
        "seLinuxOptions",
        format!(
            "{} set forbidden securityContext.seLinuxOptions: {}",
            bad_setters.join(" and "),
            data.join("; ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use serde_json::json;

    fn containers() -> Vec<serde_json::Value> {
        [
            ("a", json!({"type": "container_t"})),
            ("b", json!({"type": "container_init_t"})),
            ("c", json!({"type": "container_kvm_t"})),
            ("d", json!({"type": "bar"})),
            ("e", json!({"user": "bar"})),
            ("f", json!({"role": "baz"})),
        ]
        .into_iter()
        .map(|(name, opts)| json!({"name": name, "securityContext": {"seLinuxOptions": opts}}))
        .collect()
    }

    #[test]
    fn only_container_types_and_no_user_or_role() {
        let bad_pod = json!({"type": "foo", "user": "bar", "role": "baz"});
        let cases = [
            (
                json!({"spec": {"securityContext": {"seLinuxOptions": bad_pod},
                    "containers": containers()}}),
                r#"pod and containers "d", "e", "f" set forbidden securityContext.seLinuxOptions: types "bar", "foo"; user may not be set; role may not be set"#,
            ),
            (
                json!({"spec": {"securityContext": {"seLinuxOptions": bad_pod},
                    "containers": containers()[..3]}}),
                r#"pod set forbidden securityContext.seLinuxOptions: type "foo"; user may not be set; role may not be set"#,
            ),
            (
                json!({"spec": {"securityContext": {"seLinuxOptions": {}},
                    "containers": containers()}}),
                r#"containers "d", "e", "f" set forbidden securityContext.seLinuxOptions: type "bar"; user may not be set; role may not be set"#,
            ),
            (
                json!({"spec": {"securityContext": {"seLinuxOptions": {"type": "bad"}}}}),
                r#"pod set forbidden securityContext.seLinuxOptions: type "bad""#,
            ),
            (
                json!({"spec": {"securityContext": {"seLinuxOptions": {"user": "bad"}}}}),
                "pod set forbidden securityContext.seLinuxOptions: user may not be set",
            ),
            (
                json!({"spec": {"securityContext": {"seLinuxOptions": {"role": "bad"}}}}),
                "pod set forbidden securityContext.seLinuxOptions: role may not be set",
            ),
        ];
        for (pod, detail) in cases {
            assert_violation("seLinuxOptions", 0, &pod, "seLinuxOptions", detail);
        }
    }
}
