//! Privilege-escalation prevention, as upstream's RBAC storage does it: a user may only write a
//! (Cluster)Role granting rules the user already holds (or with the `escalate` verb on it), and
//! only bind a role whose rules the user holds (or with the `bind` verb on it).
//!
//! Mirrors `staging/src/k8s.io/component-helpers/auth/rbac/validation/policy_comparator.go`
//! (`Covers`), `pkg/registry/rbac/validation/rule.go` (`ConfirmNoEscalation`),
//! `policy_compact.go` (`CompactRules`), `pkg/registry/rbac/escalation_check.go` and the
//! `policybased` storages of roles, clusterroles, rolebindings and clusterrolebindings.

use crate::{
    Attributes, Decision, MASTERS_GROUP, UserInfo,
    quote::quote_list,
    rbac::{Policy, RoleRefError},
};
use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef};
use std::collections::{BTreeSet, HashMap};

/// Why a write of an RBAC object is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Forbidden: the message follows upstream's `<resource> "<name>" is forbidden: `.
    #[error("{0}")]
    Forbidden(String),
    /// The binding's role does not exist (upstream answers the registry's NotFound).
    #[error("{}", .0.registry_message())]
    RoleNotFound(RoleRefError),
    /// The binding's role reference is of an unsupported kind (an internal error upstream).
    #[error("{0}")]
    Unsupported(RoleRefError),
}

/// Upstream's `EscalationAllowed`: members of `system:masters` may write anything.
pub fn escalation_allowed(user: &UserInfo) -> bool {
    user.in_group(MASTERS_GROUP)
}

/// Upstream's `Covers`: whether `owner` rules grant everything `servant` rules grant, and the
/// broken-down servant rules they do not.
pub fn covers(owner: &[PolicyRule], servant: &[PolicyRule]) -> (bool, Vec<PolicyRule>) {
    let uncovered: Vec<PolicyRule> = servant
        .iter()
        .flat_map(breakdown_rule)
        .filter(|sub| !owner.iter().any(|o| rule_covers(o, sub)))
        .collect();
    (uncovered.is_empty(), uncovered)
}

fn list(v: &Option<Vec<String>>) -> &[String] {
    v.as_deref().unwrap_or_default()
}

fn one(s: &str) -> Option<Vec<String>> {
    Some(vec![s.to_string()])
}

/// Upstream's `BreakdownRule`: one rule per group, resource, verb (and resource name), and per
/// non-resource URL and verb.
pub fn breakdown_rule(rule: &PolicyRule) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    for group in list(&rule.api_groups) {
        for resource in list(&rule.resources) {
            for verb in &rule.verbs {
                let base = PolicyRule {
                    api_groups: one(group),
                    resources: one(resource),
                    verbs: vec![verb.clone()],
                    ..Default::default()
                };
                let names = list(&rule.resource_names);
                if names.is_empty() {
                    out.push(base);
                } else {
                    out.extend(names.iter().map(|n| PolicyRule {
                        resource_names: one(n),
                        ..base.clone()
                    }));
                }
            }
        }
    }
    for url in list(&rule.non_resource_urls) {
        for verb in &rule.verbs {
            out.push(PolicyRule {
                non_resource_urls: one(url),
                verbs: vec![verb.clone()],
                ..Default::default()
            });
        }
    }
    out
}

fn has(set: &[String], s: &str) -> bool {
    set.iter().any(|x| x == s)
}

fn has_all(set: &[String], items: &[String]) -> bool {
    items.iter().all(|i| has(set, i))
}

fn resource_covers_all(set: &[String], covers: &[String]) -> bool {
    if has(set, "*") || has_all(set, covers) {
        return true;
    }
    covers.iter().all(|path| {
        has(set, path)
            || path
                .split_once('/')
                .is_some_and(|(_, sub)| has(set, &format!("*/{sub}")))
    })
}

fn non_resource_url_covers(owner: &str, sub: &str) -> bool {
    owner == sub || (owner.ends_with('*') && sub.starts_with(owner.trim_end_matches('*')))
}

/// Upstream's `ruleCovers`: whether `owner` grants everything the broken-down `sub` does.
fn rule_covers(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let verbs = has(&owner.verbs, "*") || has_all(&owner.verbs, &sub.verbs);
    let groups = has(list(&owner.api_groups), "*")
        || has_all(list(&owner.api_groups), list(&sub.api_groups));
    let resources = resource_covers_all(list(&owner.resources), list(&sub.resources));
    let urls = list(&sub.non_resource_urls).iter().all(|p| {
        list(&owner.non_resource_urls)
            .iter()
            .any(|o| non_resource_url_covers(o, p))
    });
    let owner_names = list(&owner.resource_names);
    let names = if list(&sub.resource_names).is_empty() {
        owner_names.is_empty()
    } else {
        owner_names.is_empty() || has_all(owner_names, list(&sub.resource_names))
    };
    verbs && groups && resources && names && urls
}

/// Upstream's `CompactRules`: rules of one group, one resource and at most one resource name
/// merged into one rule with all their verbs (the rest as they are).
pub fn compact_rules(rules: &[PolicyRule]) -> Vec<PolicyRule> {
    let mut compacted = Vec::new();
    let mut simple: Vec<PolicyRule> = Vec::new();
    let mut index: HashMap<(String, String, Option<String>), usize> = HashMap::new();
    for rule in rules {
        let groups = list(&rule.api_groups);
        let resources = list(&rule.resources);
        let names = list(&rule.resource_names);
        let is_simple = names.len() <= 1
            && list(&rule.non_resource_urls).is_empty()
            && groups.len() == 1
            && resources.len() == 1;
        if !is_simple {
            compacted.push(rule.clone());
            continue;
        }
        let key = (
            groups[0].clone(),
            resources[0].clone(),
            names.first().cloned(),
        );
        match index.get(&key) {
            Some(&i) => simple[i].verbs.extend(rule.verbs.iter().cloned()),
            None => {
                index.insert(key, simple.len());
                simple.push(rule.clone());
            }
        }
    }
    compacted.extend(simple);
    compacted
}

/// Upstream's `CompactString`: `{APIGroups:[""], Resources:["pods"], Verbs:["get"]}`.
pub fn compact_string(r: &PolicyRule) -> String {
    let mut parts = Vec::new();
    for (label, items) in [
        ("APIGroups", list(&r.api_groups)),
        ("Resources", list(&r.resources)),
        ("NonResourceURLs", list(&r.non_resource_urls)),
        ("ResourceNames", list(&r.resource_names)),
        ("Verbs", r.verbs.as_slice()),
    ] {
        if !items.is_empty() {
            parts.push(format!("{label}:{}", quote_list(items)));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

/// Upstream's `ConfirmNoEscalation`: `Ok` when the rules `user` holds in `namespace` cover
/// `rules`, otherwise upstream's message listing what is missing.
pub fn confirm_no_escalation(
    policy: &Policy,
    user: &UserInfo,
    namespace: &str,
    rules: &[PolicyRule],
) -> Result<(), String> {
    let (owner, errors) = policy.rules_for(user, namespace);
    let (covered, missing) = covers(&owner, rules);
    if covered {
        return Ok(());
    }
    let descriptions: BTreeSet<String> =
        compact_rules(&missing).iter().map(compact_string).collect();
    let mut msg = format!(
        "user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        crate::quote(&user.username),
        quote_list(&user.groups),
        descriptions.into_iter().collect::<Vec<_>>().join("\n")
    );
    if !errors.is_empty() {
        // Upstream prints a one-element []error holding the aggregate of the resolver's errors,
        // which its storage-backed resolver words as the registry does.
        let messages: Vec<String> = errors.iter().map(RoleRefError::registry_message).collect();
        msg.push_str(&format!(
            "; resolution errors: [{}]",
            crate::rbac::aggregate(&messages)
        ));
    }
    Err(msg)
}

/// Everything, as upstream's clusterrole storage asks of whoever sets an `aggregationRule`.
fn full_authority() -> Vec<PolicyRule> {
    vec![
        PolicyRule {
            verbs: vec!["*".into()],
            api_groups: one("*"),
            resources: one("*"),
            ..Default::default()
        },
        PolicyRule {
            verbs: vec!["*".into()],
            non_resource_urls: one("*"),
            ..Default::default()
        },
    ]
}

/// A write of a Role or ClusterRole, as the escalation check sees it.
#[derive(Clone, Copy, Debug)]
pub struct RoleWrite<'a> {
    /// `roles` or `clusterroles`.
    pub resource: &'a str,
    /// The namespace (empty for a ClusterRole).
    pub namespace: &'a str,
    /// The name in the request's URL: empty on create (a POST to the collection), as upstream's
    /// `escalate` check asks with it.
    pub request_name: &'a str,
    /// The rules the role would grant.
    pub rules: &'a [PolicyRule],
    /// Whether the new (or, on update, the old) ClusterRole has an `aggregationRule` with
    /// selectors.
    pub aggregation: bool,
}

/// Upstream's role and clusterrole `policybased` storage: a role write is allowed to members of
/// `system:masters`, to holders of `escalate` on it, and to users whose rules cover the role's
/// (and, to set an aggregation rule, cover everything).
pub fn check_role_write(
    authorize: &dyn Fn(&Attributes) -> Decision,
    policy: &Policy,
    user: &UserInfo,
    write: &RoleWrite<'_>,
) -> Result<(), Refusal> {
    if escalation_allowed(user) {
        return Ok(());
    }
    let escalate = Attributes {
        user: user.clone(),
        verb: "escalate".into(),
        resource_request: true,
        api_group: "rbac.authorization.k8s.io".into(),
        api_version: "*".into(),
        resource: write.resource.into(),
        namespace: write.namespace.into(),
        name: write.request_name.into(),
        ..Default::default()
    };
    if authorize(&escalate).allowed() {
        return Ok(());
    }
    confirm_no_escalation(policy, user, write.namespace, write.rules)
        .map_err(Refusal::Forbidden)?;
    if write.aggregation
        && confirm_no_escalation(policy, user, write.namespace, &full_authority()).is_err()
    {
        return Err(Refusal::Forbidden(
            "must have cluster-admin privileges to use the aggregationRule".into(),
        ));
    }
    Ok(())
}

/// Upstream's rolebinding and clusterrolebinding `policybased` storage: a binding write is
/// allowed to members of `system:masters`, to holders of `bind` on the referenced role, and to
/// users whose rules (in the binding's namespace) cover the role's.
pub fn check_binding_write(
    authorize: &dyn Fn(&Attributes) -> Decision,
    policy: &Policy,
    user: &UserInfo,
    role_ref: &RoleRef,
    namespace: &str,
) -> Result<(), Refusal> {
    if escalation_allowed(user) {
        return Ok(());
    }
    let resource = match role_ref.kind.as_str() {
        "ClusterRole" => Some("clusterroles"),
        "Role" => Some("roles"),
        _ => None,
    };
    if let Some(resource) = resource {
        let bind = Attributes {
            user: user.clone(),
            verb: "bind".into(),
            resource_request: true,
            api_group: role_ref.api_group.clone(),
            api_version: "*".into(),
            resource: resource.into(),
            namespace: namespace.into(),
            name: role_ref.name.clone(),
            ..Default::default()
        };
        if authorize(&bind).allowed() {
            return Ok(());
        }
    }
    let rules = policy
        .role_ref_rules(role_ref, namespace)
        .map_err(|e| match e.is_not_found() {
            true => Refusal::RoleNotFound(e),
            false => Refusal::Unsupported(e),
        })?;
    confirm_no_escalation(policy, user, namespace, rules).map_err(Refusal::Forbidden)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::{
        api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding, Subject},
        apimachinery::pkg::apis::meta::v1::ObjectMeta,
    };

    fn v(s: &[&str]) -> Option<Vec<String>> {
        Some(s.iter().map(|x| x.to_string()).collect())
    }

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: v(verbs).unwrap_or_default(),
            api_groups: v(groups),
            resources: v(resources),
            ..Default::default()
        }
    }

    fn named(r: PolicyRule, names: &[&str]) -> PolicyRule {
        PolicyRule {
            resource_names: v(names),
            ..r
        }
    }

    fn urls(verbs: &[&str], u: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: v(verbs).unwrap_or_default(),
            non_resource_urls: v(u),
            ..Default::default()
        }
    }

    fn covered(owner: &[PolicyRule], servant: &[PolicyRule]) -> bool {
        covers(owner, servant).0
    }

    // The cases of upstream's policy_comparator_test.go.
    #[test]
    fn covers_as_upstream_policy_comparator() {
        let pods = rule(&["get"], &["v1"], &["pods"]);
        assert!(covered(
            std::slice::from_ref(&pods),
            std::slice::from_ref(&pods)
        ));
        // Subresource wildcard.
        assert!(covered(
            &[rule(&["get"], &["v1"], &["*/scale"])],
            &[rule(&["get"], &["v1"], &["deployments/scale"])]
        ));
        // Multiple rules covering a single rule.
        assert!(covered(
            &[
                rule(&["delete"], &["v1"], &["deployments"]),
                rule(&["delete"], &["v1"], &["builds"]),
                rule(&["update"], &["v1"], &["builds", "deployments"]),
            ],
            &[rule(
                &["delete", "update"],
                &["v1"],
                &["builds", "deployments"]
            )]
        ));
        // Multiple API groups covering a single rule, and the reverse missing one.
        assert!(covered(
            &[
                rule(&["delete"], &["group1"], &["deployments"]),
                rule(&["delete"], &["group1"], &["builds"]),
                rule(&["update"], &["group1"], &["builds", "deployments"]),
                rule(&["delete"], &["group2"], &["deployments"]),
                rule(&["delete"], &["group2"], &["builds"]),
                rule(&["update"], &["group2"], &["builds", "deployments"]),
            ],
            &[rule(
                &["delete", "update"],
                &["group1", "group2"],
                &["builds", "deployments"]
            )]
        ));
        let (ok, missing) = covers(
            &[
                rule(&["delete"], &["v1"], &["deployments"]),
                rule(&["update"], &["v1"], &["builds", "deployments"]),
            ],
            &[rule(
                &["delete", "update"],
                &["v1"],
                &["builds", "deployments"],
            )],
        );
        assert!(!ok);
        assert_eq!(missing, vec![rule(&["delete"], &["v1"], &["builds"])]);
        // Stars cover enumerations, not the reverse.
        assert!(covered(
            &[rule(&["get"], &["*"], &["roles"])],
            &[rule(&["get"], &["group1", "group2"], &["roles"])]
        ));
        assert!(!covered(
            &[rule(&["get"], &["group1", "group2"], &["roles"])],
            &[rule(&["get"], &["*"], &["roles"])]
        ));
        assert!(covered(
            &[rule(&["get"], &["*"], &["roles"])],
            &[rule(&["get"], &["*"], &["roles"])]
        ));
        assert!(covered(
            &[rule(&["*"], &["v1"], &["roles"])],
            &[rule(&["get", "list"], &["v1"], &["roles"])]
        ));
        assert!(!covered(
            &[rule(&["get", "list"], &["v1"], &["roles"])],
            &[rule(&["*"], &["v1"], &["roles"])]
        ));
        assert!(covered(
            &[rule(&["get"], &["v1"], &["*"])],
            &[rule(&["get"], &["v1"], &["roles", "pods"])]
        ));
        assert!(!covered(
            &[rule(&["get"], &["v1"], &["roles", "pods"])],
            &[rule(&["get"], &["v1"], &["*"])]
        ));
        // An owner without resource names covers named rules; a named owner covers only those.
        assert!(covered(
            std::slice::from_ref(&pods),
            &[named(pods.clone(), &["foo", "bar"])]
        ));
        assert!(!covered(
            &[named(pods.clone(), &["foo"])],
            std::slice::from_ref(&pods)
        ));
        // Non-resource URLs.
        assert!(covered(
            &[urls(&["get"], &["apis"])],
            &[urls(&["get"], &["apis"])]
        ));
        assert!(covered(
            &[urls(&["get"], &["*"])],
            &[urls(&["get"], &["apis"])]
        ));
        assert!(!covered(
            &[urls(&["get"], &["apis/*"])],
            &[urls(&["get"], &["apis"])]
        ));
        assert!(covered(
            &[urls(&["get"], &["apis/*"])],
            &[urls(&["get"], &["apis/v1"])]
        ));
        assert!(covered(
            &[
                urls(&["get"], &["apis"]),
                rule(&["get"], &["v1"], &["pods"])
            ],
            &[PolicyRule {
                non_resource_urls: v(&["apis"]),
                ..rule(&["get"], &["v1"], &["pods"])
            }]
        ));
    }

    fn meta(ns: &str, name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: (!ns.is_empty()).then(|| ns.to_string()),
            ..Default::default()
        }
    }

    fn user_subject(name: &str) -> Option<Vec<Subject>> {
        Some(vec![Subject {
            kind: "User".into(),
            name: name.into(),
            ..Default::default()
        }])
    }

    fn role_ref(kind: &str, name: &str) -> RoleRef {
        RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: kind.into(),
            name: name.into(),
        }
    }

    /// Alice may get and list pods cluster-wide and bind `binder`; in `ns` she holds the role
    /// `deployer`.
    fn policy() -> Policy {
        Policy::new(
            vec![
                ClusterRole {
                    metadata: meta("", "pod-reader"),
                    rules: Some(vec![rule(&["get", "list"], &[""], &["pods"])]),
                    aggregation_rule: None,
                },
                ClusterRole {
                    metadata: meta("", "binder"),
                    rules: Some(vec![named(
                        rule(&["bind"], &["rbac.authorization.k8s.io"], &["clusterroles"]),
                        &["secret-reader"],
                    )]),
                    aggregation_rule: None,
                },
                ClusterRole {
                    metadata: meta("", "secret-reader"),
                    rules: Some(vec![rule(&["get"], &[""], &["secrets"])]),
                    aggregation_rule: None,
                },
            ],
            vec![Role {
                metadata: meta("ns", "deployer"),
                rules: Some(vec![rule(&["*"], &["apps"], &["deployments"])]),
            }],
            vec![
                ClusterRoleBinding {
                    metadata: meta("", "alice-pods"),
                    role_ref: role_ref("ClusterRole", "pod-reader"),
                    subjects: user_subject("alice"),
                },
                ClusterRoleBinding {
                    metadata: meta("", "alice-binds"),
                    role_ref: role_ref("ClusterRole", "binder"),
                    subjects: user_subject("alice"),
                },
            ],
            vec![RoleBinding {
                metadata: meta("ns", "alice-deploys"),
                role_ref: role_ref("Role", "deployer"),
                subjects: user_subject("alice"),
            }],
        )
    }

    fn alice() -> UserInfo {
        UserInfo::new("alice", &["devs", "system:authenticated"])
    }

    #[test]
    fn a_role_granting_more_than_the_writer_holds_is_refused_with_upstreams_message() {
        let p = policy();
        let authorize = |a: &Attributes| p.authorize(a);
        let rules = [
            rule(&["get", "list", "delete"], &[""], &["pods"]),
            rule(&["get"], &[""], &["secrets", "configmaps"]),
        ];
        let err = check_role_write(
            &authorize,
            &p,
            &alice(),
            &RoleWrite {
                resource: "clusterroles",
                namespace: "",
                request_name: "",
                rules: &rules,
                aggregation: false,
            },
        )
        .unwrap_err();
        assert_eq!(
            err,
            Refusal::Forbidden(
                "user \"alice\" (groups=[\"devs\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n\
                 {APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"get\"]}\n\
                 {APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}\n\
                 {APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\"]}"
                    .into()
            )
        );
        // Within what she holds, the write goes through; in `ns` her Role counts too.
        let held = [
            rule(&["get"], &[""], &["pods"]),
            rule(&["create"], &["apps"], &["deployments"]),
        ];
        let write = RoleWrite {
            resource: "roles",
            namespace: "ns",
            request_name: "",
            rules: &held,
            aggregation: false,
        };
        assert_eq!(check_role_write(&authorize, &p, &alice(), &write), Ok(()));
        let elsewhere = RoleWrite {
            namespace: "other",
            ..write
        };
        assert!(check_role_write(&authorize, &p, &alice(), &elsewhere).is_err());
    }

    #[test]
    fn escalate_verb_or_masters_group_bypasses_the_check() {
        let p = policy();
        let granted = |a: &Attributes| {
            if a.verb == "escalate" && a.resource == "clusterroles" {
                Decision::Allow(String::new())
            } else {
                Decision::NoOpinion(String::new())
            }
        };
        let everything = full_authority();
        let write = RoleWrite {
            resource: "clusterroles",
            namespace: "",
            request_name: "",
            rules: &everything,
            aggregation: true,
        };
        assert_eq!(check_role_write(&granted, &p, &alice(), &write), Ok(()));
        let nobody = |_: &Attributes| Decision::NoOpinion(String::new());
        let admin = UserInfo::new("root", &["system:masters"]);
        assert_eq!(check_role_write(&nobody, &p, &admin, &write), Ok(()));
    }

    #[test]
    fn an_aggregation_rule_needs_full_authority() {
        let p = policy();
        let authorize = |a: &Attributes| p.authorize(a);
        let write = RoleWrite {
            resource: "clusterroles",
            namespace: "",
            request_name: "",
            rules: &[],
            aggregation: true,
        };
        assert_eq!(
            check_role_write(&authorize, &p, &alice(), &write),
            Err(Refusal::Forbidden(
                "must have cluster-admin privileges to use the aggregationRule".into()
            ))
        );
    }

    #[test]
    fn bindings_need_bind_or_covering_rules() {
        let p = policy();
        let authorize = |a: &Attributes| p.authorize(a);
        // `bind` on secret-reader by name.
        assert_eq!(
            check_binding_write(
                &authorize,
                &p,
                &alice(),
                &role_ref("ClusterRole", "secret-reader"),
                ""
            ),
            Ok(())
        );
        // Her own rules cover pod-reader.
        assert_eq!(
            check_binding_write(
                &authorize,
                &p,
                &alice(),
                &role_ref("ClusterRole", "pod-reader"),
                "ns"
            ),
            Ok(())
        );
        let bob = UserInfo::new("bob", &[]);
        assert_eq!(
            check_binding_write(&authorize, &p, &bob, &role_ref("ClusterRole", "pod-reader"), "ns"),
            Err(Refusal::Forbidden(
                "user \"bob\" (groups=[]) is attempting to grant RBAC permissions not currently held:\n\
                 {APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"get\" \"list\"]}"
                    .into()
            ))
        );
        let missing =
            check_binding_write(&authorize, &p, &bob, &role_ref("Role", "nope"), "ns").unwrap_err();
        assert_eq!(
            missing.to_string(),
            r#"roles.rbac.authorization.k8s.io "nope" not found"#
        );
    }

    #[test]
    fn resolution_errors_are_appended() {
        let p = Policy::new(
            vec![],
            vec![],
            vec![ClusterRoleBinding {
                metadata: meta("", "dangling"),
                role_ref: role_ref("ClusterRole", "gone"),
                subjects: user_subject("carol"),
            }],
            vec![],
        );
        let err = confirm_no_escalation(
            &p,
            &UserInfo::new("carol", &[]),
            "",
            &[rule(&["get"], &[""], &["pods"])],
        )
        .unwrap_err();
        assert!(
            err.ends_with(
                r#"; resolution errors: [clusterroles.rbac.authorization.k8s.io "gone" not found]"#
            ),
            "{err}"
        );
    }

    #[test]
    fn compact_rules_merge_verbs_of_one_resource() {
        let broken = covers(&[], &[rule(&["get", "list"], &["", "apps"], &["pods"])]).1;
        let strings: BTreeSet<String> = compact_rules(&broken).iter().map(compact_string).collect();
        assert_eq!(
            strings.into_iter().collect::<Vec<_>>(),
            vec![
                r#"{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}"#,
                r#"{APIGroups:["apps"], Resources:["pods"], Verbs:["get" "list"]}"#,
            ]
        );
        assert_eq!(
            compact_string(&urls(&["get"], &["/healthz"])),
            r#"{NonResourceURLs:["/healthz"], Verbs:["get"]}"#
        );
    }
}
