//! RBAC as upstream evaluates it: `plugin/pkg/auth/authorizer/rbac/rbac.go` (the authorizer and
//! `RuleAllows`), `pkg/registry/rbac/validation/rule.go` (which bindings apply to a user and the
//! rules they grant) and `pkg/apis/rbac/v1/evaluation_helpers.go` (how one rule matches).
//!
//! A [`Policy`] is a snapshot of the four RBAC kinds. Upstream lists every (Cluster)RoleBinding
//! per request and checks each one's subjects; the snapshot instead indexes bindings by the user
//! names and groups their subjects name, so a request only looks at the bindings that can apply
//! to it. Which of those apply, in which order, and what they grant is upstream's.

use crate::{Attributes, Decision, UserInfo, quote};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use std::{
    collections::{BTreeMap, HashMap},
    fmt,
    sync::Arc,
};

/// Why a binding's role could not be resolved (upstream's lister errors, which the authorizer
/// reports in its no-opinion reason).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RoleRefError {
    /// The referenced ClusterRole does not exist.
    #[error("clusterrole.rbac.authorization.k8s.io {} not found", quote(.0))]
    ClusterRoleNotFound(String),
    /// The referenced Role does not exist in the binding's namespace.
    #[error("role.rbac.authorization.k8s.io {} not found", quote(.0))]
    RoleNotFound(String),
    /// The reference is neither to a Role nor a ClusterRole.
    #[error("unsupported role reference kind: {}", quote(.0))]
    UnsupportedKind(String),
}

impl RoleRefError {
    /// The message as upstream's RBAC storage reports it (its role getters read the registry,
    /// whose NotFound names the plural resource), for the escalation checks.
    pub fn registry_message(&self) -> String {
        match self {
            RoleRefError::ClusterRoleNotFound(n) => {
                format!(
                    "clusterroles.rbac.authorization.k8s.io {} not found",
                    quote(n)
                )
            }
            RoleRefError::RoleNotFound(n) => {
                format!("roles.rbac.authorization.k8s.io {} not found", quote(n))
            }
            RoleRefError::UnsupportedKind(_) => self.to_string(),
        }
    }

    /// Whether the role is missing (a 404 in the storage checks), rather than unsupported.
    pub fn is_not_found(&self) -> bool {
        !matches!(self, RoleRefError::UnsupportedKind(_))
    }
}

/// Which binding granted a rule, worded as upstream's describers (the allow reason).
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    /// A ClusterRoleBinding and the subject of it that matched.
    ClusterRoleBinding(&'a ClusterRoleBinding, &'a Subject),
    /// A RoleBinding and the subject of it that matched.
    RoleBinding(&'a RoleBinding, &'a Subject),
}

fn binding_name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

fn describe_subject(s: &Subject, binding_namespace: &str) -> String {
    match s.kind.as_str() {
        "ServiceAccount" => {
            let ns = s
                .namespace
                .as_deref()
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_namespace);
            format!("{} {}", s.kind, quote(&format!("{}/{ns}", s.name)))
        }
        _ => format!("{} {}", s.kind, quote(&s.name)),
    }
}

impl fmt::Display for Source<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::ClusterRoleBinding(b, s) => write!(
                f,
                "ClusterRoleBinding {} of {} {} to {}",
                quote(binding_name(&b.metadata)),
                b.role_ref.kind,
                quote(&b.role_ref.name),
                describe_subject(s, "")
            ),
            Source::RoleBinding(b, s) => {
                let ns = b.metadata.namespace.as_deref().unwrap_or_default();
                write!(
                    f,
                    "RoleBinding {} of {} {} to {}",
                    quote(&format!("{}/{ns}", binding_name(&b.metadata))),
                    b.role_ref.kind,
                    quote(&b.role_ref.name),
                    describe_subject(s, ns)
                )
            }
        }
    }
}

/// Bindings of one scope (cluster, or one namespace) and the index of their subjects.
#[derive(Debug, Default)]
struct Bindings<B> {
    /// In name order (upstream's listers have no order; name order keeps ours stable).
    items: Vec<B>,
    /// Positions in `items` of bindings with a subject of the user name (a User subject, or a
    /// ServiceAccount subject as the user name its tokens authenticate as).
    by_user: HashMap<String, Vec<usize>>,
    /// Positions in `items` of bindings with a Group subject of the name.
    by_group: HashMap<String, Vec<usize>>,
}

impl<B> Bindings<B> {
    fn new(mut items: Vec<B>, meta: impl Fn(&B) -> (&[Subject], &str, &str)) -> Self {
        items.sort_by(|a, b| meta(a).2.cmp(meta(b).2));
        let mut by_user: HashMap<String, Vec<usize>> = HashMap::new();
        let mut by_group: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, b) in items.iter().enumerate() {
            let (subjects, namespace, _) = meta(b);
            for s in subjects {
                let key = match s.kind.as_str() {
                    "User" => Some((&mut by_user, s.name.clone())),
                    "Group" => Some((&mut by_group, s.name.clone())),
                    "ServiceAccount" => {
                        service_account_user(s, namespace).map(|u| (&mut by_user, u))
                    }
                    _ => None,
                };
                if let Some((map, key)) = key {
                    let list = map.entry(key).or_default();
                    if list.last() != Some(&i) {
                        list.push(i);
                    }
                }
            }
        }
        Self {
            items,
            by_user,
            by_group,
        }
    }

    /// The positions of the bindings that may apply to `user`, in order.
    fn candidates(&self, user: &UserInfo) -> Vec<usize> {
        let mut out: Vec<usize> = self
            .by_user
            .get(&user.username)
            .into_iter()
            .chain(user.groups.iter().filter_map(|g| self.by_group.get(g)))
            .flatten()
            .copied()
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// The user name a ServiceAccount subject's tokens authenticate as (upstream's
/// `serviceaccount.MatchesUsername`); `None` without a namespace to take it from.
fn service_account_user(s: &Subject, binding_namespace: &str) -> Option<String> {
    let ns = s
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(binding_namespace);
    (!ns.is_empty()).then(|| format!("system:serviceaccount:{ns}:{}", s.name))
}

/// Upstream's `appliesToUser`.
fn applies_to_user(user: &UserInfo, s: &Subject, namespace: &str) -> bool {
    match s.kind.as_str() {
        "User" => user.username == s.name,
        "Group" => user.in_group(&s.name),
        "ServiceAccount" => service_account_user(s, namespace).is_some_and(|u| u == user.username),
        _ => false,
    }
}

/// Upstream's `appliesTo`: the first subject of the binding that names the user.
fn applies_to<'s>(
    user: &UserInfo,
    subjects: &'s [Subject],
    namespace: &str,
) -> Option<&'s Subject> {
    subjects
        .iter()
        .find(|s| applies_to_user(user, s, namespace))
}

/// A snapshot of the cluster's RBAC objects, indexed for authorization.
#[derive(Debug, Default)]
pub struct Policy {
    cluster_roles: HashMap<String, Arc<ClusterRole>>,
    /// Roles by namespace, then name.
    roles: HashMap<String, HashMap<String, Arc<Role>>>,
    cluster_bindings: Bindings<ClusterRoleBinding>,
    /// RoleBindings by namespace.
    role_bindings: HashMap<String, Bindings<RoleBinding>>,
}

impl Policy {
    /// A snapshot of these objects.
    pub fn new(
        cluster_roles: Vec<ClusterRole>,
        roles: Vec<Role>,
        cluster_role_bindings: Vec<ClusterRoleBinding>,
        role_bindings: Vec<RoleBinding>,
    ) -> Self {
        let cluster_roles = cluster_roles
            .into_iter()
            .map(|r| (binding_name(&r.metadata).to_string(), Arc::new(r)))
            .collect();
        let mut by_ns: HashMap<String, HashMap<String, Arc<Role>>> = HashMap::new();
        for r in roles {
            let ns = r.metadata.namespace.clone().unwrap_or_default();
            by_ns
                .entry(ns)
                .or_default()
                .insert(binding_name(&r.metadata).to_string(), Arc::new(r));
        }
        let mut rb_by_ns: BTreeMap<String, Vec<RoleBinding>> = BTreeMap::new();
        for b in role_bindings {
            let ns = b.metadata.namespace.clone().unwrap_or_default();
            rb_by_ns.entry(ns).or_default().push(b);
        }
        Self {
            cluster_roles,
            roles: by_ns,
            cluster_bindings: Bindings::new(cluster_role_bindings, |b: &ClusterRoleBinding| {
                (
                    b.subjects.as_deref().unwrap_or_default(),
                    "",
                    binding_name(&b.metadata),
                )
            }),
            role_bindings: rb_by_ns
                .into_iter()
                .map(|(ns, items)| {
                    let bindings = Bindings::new(items, |b: &RoleBinding| {
                        (
                            b.subjects.as_deref().unwrap_or_default(),
                            b.metadata.namespace.as_deref().unwrap_or_default(),
                            binding_name(&b.metadata),
                        )
                    });
                    (ns, bindings)
                })
                .collect(),
        }
    }

    /// The ClusterRole of `name`.
    pub fn cluster_role(&self, name: &str) -> Option<&ClusterRole> {
        self.cluster_roles.get(name).map(|r| &**r)
    }

    /// The Role `name` in `namespace`.
    pub fn role(&self, namespace: &str, name: &str) -> Option<&Role> {
        self.roles.get(namespace)?.get(name).map(|r| &**r)
    }

    /// The rules a binding in `binding_namespace` (empty for a ClusterRoleBinding) grants through
    /// `role_ref` (upstream's `GetRoleReferenceRules`).
    pub fn role_ref_rules(
        &self,
        role_ref: &RoleRef,
        binding_namespace: &str,
    ) -> Result<&[PolicyRule], RoleRefError> {
        match role_ref.kind.as_str() {
            "Role" => self
                .role(binding_namespace, &role_ref.name)
                .map(|r| r.rules.as_deref().unwrap_or_default())
                .ok_or_else(|| RoleRefError::RoleNotFound(role_ref.name.clone())),
            "ClusterRole" => self
                .cluster_role(&role_ref.name)
                .map(|r| r.rules.as_deref().unwrap_or_default())
                .ok_or_else(|| RoleRefError::ClusterRoleNotFound(role_ref.name.clone())),
            other => Err(RoleRefError::UnsupportedKind(other.to_string())),
        }
    }

    /// Upstream's `VisitRulesFor`: every rule granted to `user` in `namespace` (cluster-wide
    /// bindings first, then the namespace's RoleBindings), with where it came from, and every
    /// role that could not be resolved; stops when `visit` returns false.
    pub fn visit_rules_for<'p>(
        &'p self,
        user: &UserInfo,
        namespace: &str,
        mut visit: impl FnMut(Result<(Source<'p>, &'p PolicyRule), RoleRefError>) -> bool,
    ) {
        for i in self.cluster_bindings.candidates(user) {
            let b = &self.cluster_bindings.items[i];
            let Some(subject) = applies_to(user, b.subjects.as_deref().unwrap_or_default(), "")
            else {
                continue;
            };
            match self.role_ref_rules(&b.role_ref, "") {
                Err(e) => {
                    if !visit(Err(e)) {
                        return;
                    }
                }
                Ok(rules) => {
                    for rule in rules {
                        if !visit(Ok((Source::ClusterRoleBinding(b, subject), rule))) {
                            return;
                        }
                    }
                }
            }
        }
        if namespace.is_empty() {
            return;
        }
        let Some(bindings) = self.role_bindings.get(namespace) else {
            return;
        };
        for i in bindings.candidates(user) {
            let b = &bindings.items[i];
            let Some(subject) =
                applies_to(user, b.subjects.as_deref().unwrap_or_default(), namespace)
            else {
                continue;
            };
            match self.role_ref_rules(&b.role_ref, namespace) {
                Err(e) => {
                    if !visit(Err(e)) {
                        return;
                    }
                }
                Ok(rules) => {
                    for rule in rules {
                        if !visit(Ok((Source::RoleBinding(b, subject), rule))) {
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Upstream's `RulesFor`: the rules `user` holds in `namespace` (cluster-wide ones included),
    /// and the roles that could not be resolved.
    pub fn rules_for(
        &self,
        user: &UserInfo,
        namespace: &str,
    ) -> (Vec<PolicyRule>, Vec<RoleRefError>) {
        let mut rules = Vec::new();
        let mut errors = Vec::new();
        self.visit_rules_for(user, namespace, |r| {
            match r {
                Ok((_, rule)) => rules.push(rule.clone()),
                Err(e) => errors.push(e),
            }
            true
        });
        (rules, errors)
    }

    /// Upstream's `RBACAuthorizer.Authorize`: allowed by the first rule that matches (the reason
    /// names its binding), otherwise no opinion, with the roles that could not be resolved.
    pub fn authorize(&self, attrs: &Attributes) -> Decision {
        let mut errors = Vec::new();
        let mut allowed = None;
        self.visit_rules_for(&attrs.user, &attrs.namespace, |r| match r {
            Ok((source, rule)) if rule_allows(attrs, rule) => {
                allowed = Some(format!("RBAC: allowed by {source}"));
                false
            }
            Ok(_) => true,
            Err(e) => {
                errors.push(e.to_string());
                true
            }
        });
        match allowed {
            Some(reason) => Decision::Allow(reason),
            None if errors.is_empty() => Decision::NoOpinion(String::new()),
            None => Decision::NoOpinion(format!("RBAC: {}", aggregate(&errors))),
        }
    }
}

/// Upstream's `utilerrors.NewAggregate(...).Error()`: one message as is; several deduplicated,
/// joined by ", " in brackets.
pub(crate) fn aggregate(messages: &[String]) -> String {
    if messages.len() == 1 {
        return messages[0].clone();
    }
    let mut seen: Vec<&str> = Vec::new();
    for m in messages {
        if !seen.contains(&m.as_str()) {
            seen.push(m);
        }
    }
    match seen.as_slice() {
        [one] => one.to_string(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// Upstream's `RulesAllow`.
pub fn rules_allow(attrs: &Attributes, rules: &[PolicyRule]) -> bool {
    rules.iter().any(|r| rule_allows(attrs, r))
}

/// Upstream's `RuleAllows`: whether one rule grants the request.
pub fn rule_allows(attrs: &Attributes, rule: &PolicyRule) -> bool {
    if !verb_matches(rule, &attrs.verb) {
        return false;
    }
    if attrs.resource_request {
        let combined;
        let resource = if attrs.subresource.is_empty() {
            attrs.resource.as_str()
        } else {
            combined = format!("{}/{}", attrs.resource, attrs.subresource);
            combined.as_str()
        };
        api_group_matches(rule, &attrs.api_group)
            && resource_matches(rule, resource, &attrs.subresource)
            && resource_name_matches(rule, &attrs.name)
    } else {
        non_resource_url_matches(rule, &attrs.path)
    }
}

fn list(v: &Option<Vec<String>>) -> &[String] {
    v.as_deref().unwrap_or_default()
}

fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    rule.verbs.iter().any(|v| v == "*" || v == verb)
}

fn api_group_matches(rule: &PolicyRule, group: &str) -> bool {
    list(&rule.api_groups)
        .iter()
        .any(|g| g == "*" || g == group)
}

fn resource_matches(rule: &PolicyRule, combined: &str, subresource: &str) -> bool {
    list(&rule.resources).iter().any(|r| {
        r == "*"
            || r == combined
            || (!subresource.is_empty()
                && r.len() == subresource.len() + 2
                && r.starts_with("*/")
                && r.ends_with(subresource))
    })
}

fn resource_name_matches(rule: &PolicyRule, name: &str) -> bool {
    let names = list(&rule.resource_names);
    names.is_empty() || names.iter().any(|n| n == name)
}

fn non_resource_url_matches(rule: &PolicyRule, path: &str) -> bool {
    list(&rule.non_resource_urls).iter().any(|u| {
        u == "*" || u == path || (u.ends_with('*') && path.starts_with(u.trim_end_matches('*')))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn split(s: &str) -> Option<Vec<String>> {
        Some(s.split(',').map(str::to_string).collect())
    }

    /// Upstream's test helper `newRule(verbs, apiGroups, resources, nonResourceURLs)`.
    fn rule(verbs: &str, groups: &str, resources: &str, urls: &str) -> PolicyRule {
        PolicyRule {
            verbs: split(verbs).unwrap_or_default(),
            api_groups: split(groups),
            resources: split(resources),
            non_resource_urls: split(urls),
            resource_names: None,
        }
    }

    fn meta(ns: &str, name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: (!ns.is_empty()).then(|| ns.to_string()),
            ..Default::default()
        }
    }

    fn subjects(list: &[&str]) -> Option<Vec<Subject>> {
        Some(
            list.iter()
                .map(|s| {
                    let (kind, rest) = s.split_once(':').unwrap();
                    let (namespace, name) = match rest.split_once('/') {
                        Some((ns, n)) => (Some(ns.to_string()), n.to_string()),
                        None => (None, rest.to_string()),
                    };
                    Subject {
                        kind: kind.into(),
                        name,
                        namespace,
                        api_group: None,
                    }
                })
                .collect(),
        )
    }

    fn cluster_role(name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
        ClusterRole {
            metadata: meta("", name),
            rules: Some(rules),
            aggregation_rule: None,
        }
    }

    fn crb(name: &str, role: &str, subs: &[&str]) -> ClusterRoleBinding {
        ClusterRoleBinding {
            metadata: meta("", name),
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "ClusterRole".into(),
                name: role.into(),
            },
            subjects: subjects(subs),
        }
    }

    fn rb(ns: &str, name: &str, kind: &str, role: &str, subs: &[&str]) -> RoleBinding {
        RoleBinding {
            metadata: meta(ns, name),
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: kind.into(),
                name: role.into(),
            },
            subjects: subjects(subs),
        }
    }

    fn user(name: &str, groups: &str) -> UserInfo {
        UserInfo {
            username: name.into(),
            groups: groups
                .split(',')
                .filter(|g| !g.is_empty())
                .map(str::to_string)
                .collect(),
            ..Default::default()
        }
    }

    /// Upstream's `defaultAttributes{user, groups, verb, resource, subresource, namespace, apiGroup}`.
    fn attrs(
        u: &str,
        g: &str,
        verb: &str,
        res: &str,
        sub: &str,
        ns: &str,
        group: &str,
    ) -> Attributes {
        Attributes {
            user: user(u, g),
            verb: verb.into(),
            resource_request: true,
            api_group: group.into(),
            resource: res.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            ..Default::default()
        }
    }

    fn url(u: &str, g: &str, verb: &str, path: &str) -> Attributes {
        Attributes {
            user: user(u, g),
            verb: verb.into(),
            path: path.into(),
            ..Default::default()
        }
    }

    fn check(policy: &Policy, pass: &[Attributes], fail: &[Attributes]) {
        for a in pass {
            assert!(
                policy.authorize(a).allowed(),
                "incorrectly restricted {a:?}"
            );
        }
        for a in fail {
            assert!(!policy.authorize(a).allowed(), "incorrectly passed {a:?}");
        }
    }

    // The cases of upstream's TestAuthorizer (rbac_test.go).
    #[test]
    fn role_binding_to_cluster_role_grants_in_its_namespace_only() {
        let p = Policy::new(
            vec![cluster_role("admin", vec![rule("*", "*", "*", "*")])],
            vec![],
            vec![],
            vec![rb(
                "ns1",
                "b",
                "ClusterRole",
                "admin",
                &["User:admin", "Group:admins"],
            )],
        );
        check(
            &p,
            &[
                attrs("admin", "", "get", "Pods", "", "ns1", ""),
                attrs("admin", "", "watch", "Pods", "", "ns1", ""),
                attrs("admin", "group1", "watch", "Foobar", "", "ns1", ""),
                attrs("joe", "admins", "watch", "Foobar", "", "ns1", ""),
                attrs("joe", "group1,admins", "watch", "Foobar", "", "ns1", ""),
            ],
            &[
                attrs("admin", "", "GET", "Pods", "", "ns2", ""),
                attrs("admin", "", "GET", "Nodes", "", "", ""),
                attrs("admin", "admins", "GET", "Pods", "", "ns2", ""),
                attrs("admin", "admins", "GET", "Nodes", "", "", ""),
            ],
        );
    }

    #[test]
    fn non_resource_urls_match_exactly_or_by_trailing_star() {
        let p = Policy::new(
            vec![
                cluster_role(
                    "non-resource-url-getter",
                    vec![rule("get", "", "", "/apis")],
                ),
                cluster_role("non-resource-url", vec![rule("*", "", "", "/apis")]),
                cluster_role(
                    "non-resource-url-prefix",
                    vec![rule("get", "", "", "/apis/*")],
                ),
            ],
            vec![],
            vec![
                crb("a", "non-resource-url-getter", &["User:foo", "Group:bar"]),
                crb("b", "non-resource-url", &["User:admin", "Group:admin"]),
                crb(
                    "c",
                    "non-resource-url-prefix",
                    &["User:prefixed", "Group:prefixed"],
                ),
            ],
            vec![],
        );
        check(
            &p,
            &[
                url("foo", "", "get", "/apis"),
                url("", "bar", "get", "/apis"),
                url("admin", "", "get", "/apis"),
                url("", "admin", "get", "/apis"),
                url("admin", "", "watch", "/apis"),
                url("", "admin", "watch", "/apis"),
                url("prefixed", "", "get", "/apis/v1"),
                url("", "prefixed", "get", "/apis/v1"),
                url("prefixed", "", "get", "/apis/v1/foobar"),
                url("", "prefixed", "get", "/apis/v1/foorbar"),
            ],
            &[
                url("foo", "", "watch", "/apis"),
                url("", "bar", "watch", "/apis"),
                url("foo", "", "get", "/api/v1"),
                url("", "bar", "get", "/api/v1"),
                url("admin", "", "get", "/api/v1"),
                url("", "admin", "get", "/api/v1"),
                url("prefixed", "", "get", "/api/v1"),
                url("", "prefixed", "get", "/api/v1"),
            ],
        );
    }

    #[test]
    fn subresources_match_by_name_or_star_slash() {
        let p = Policy::new(
            vec![cluster_role("admin", vec![rule("*", "*", "pods", "*")])],
            vec![],
            vec![],
            vec![rb("ns1", "b", "ClusterRole", "admin", &["User:admin"])],
        );
        check(
            &p,
            &[attrs("admin", "", "get", "pods", "", "ns1", "")],
            &[attrs("admin", "", "get", "pods", "status", "ns1", "")],
        );
        let p = Policy::new(
            vec![cluster_role(
                "admin",
                vec![
                    rule("*", "*", "pods/status", "*"),
                    rule("*", "*", "*/scale", "*"),
                ],
            )],
            vec![],
            vec![],
            vec![rb("ns1", "b", "ClusterRole", "admin", &["User:admin"])],
        );
        check(
            &p,
            &[
                attrs("admin", "", "get", "pods", "status", "ns1", ""),
                attrs("admin", "", "get", "pods", "scale", "ns1", ""),
                attrs("admin", "", "get", "deployments", "scale", "ns1", ""),
                attrs("admin", "", "get", "anything", "scale", "ns1", ""),
            ],
            &[attrs("admin", "", "get", "pods", "", "ns1", "")],
        );
    }

    #[test]
    fn resource_names_restrict_to_the_named_objects() {
        let mut r = rule("get", "", "secrets", "");
        r.resource_names = split("s1");
        let p = Policy::new(
            vec![cluster_role("one", vec![r])],
            vec![],
            vec![crb("b", "one", &["User:u"])],
            vec![],
        );
        let mut a = attrs("u", "", "get", "secrets", "", "ns", "");
        a.name = "s1".into();
        assert!(p.authorize(&a).allowed());
        a.name = "s2".into();
        assert!(!p.authorize(&a).allowed());
        a.name = String::new();
        a.verb = "list".into();
        assert!(!p.authorize(&a).allowed());
    }

    #[test]
    fn allow_reasons_name_the_binding_role_and_subject_as_upstream() {
        let p = Policy::new(
            vec![cluster_role("viewer", vec![rule("get", "", "pods", "")])],
            vec![Role {
                metadata: meta("ns1", "r"),
                rules: Some(vec![rule("list", "", "pods", "")]),
            }],
            vec![crb("view-all", "viewer", &["Group:g", "User:alice"])],
            vec![rb("ns1", "rb", "Role", "r", &["ServiceAccount:sa"])],
        );
        assert_eq!(
            p.authorize(&attrs("alice", "", "get", "pods", "", "ns1", "")),
            Decision::Allow(
                r#"RBAC: allowed by ClusterRoleBinding "view-all" of ClusterRole "viewer" to User "alice""#
                    .into()
            )
        );
        assert_eq!(
            p.authorize(&attrs("alice", "g", "get", "pods", "", "", "")),
            Decision::Allow(
                r#"RBAC: allowed by ClusterRoleBinding "view-all" of ClusterRole "viewer" to Group "g""#
                    .into()
            )
        );
        // A ServiceAccount subject without a namespace is the binding's namespace's.
        assert_eq!(
            p.authorize(&attrs(
                "system:serviceaccount:ns1:sa",
                "system:serviceaccounts,system:serviceaccounts:ns1",
                "list",
                "pods",
                "",
                "ns1",
                ""
            )),
            Decision::Allow(
                r#"RBAC: allowed by RoleBinding "rb/ns1" of Role "r" to ServiceAccount "sa/ns1""#
                    .into()
            )
        );
        assert!(
            !p.authorize(&attrs(
                "system:serviceaccount:ns2:sa",
                "",
                "list",
                "pods",
                "",
                "ns1",
                ""
            ))
            .allowed()
        );
    }

    #[test]
    fn a_cluster_role_binding_service_account_needs_its_namespace() {
        let p = Policy::new(
            vec![cluster_role("all", vec![rule("*", "*", "*", "")])],
            vec![],
            vec![
                crb("no-ns", "all", &["ServiceAccount:sa"]),
                crb("ns", "all", &["ServiceAccount:kube-system/ctl"]),
            ],
            vec![],
        );
        assert!(
            !p.authorize(&attrs(
                "system:serviceaccount::sa",
                "",
                "get",
                "pods",
                "",
                "",
                ""
            ))
            .allowed()
        );
        assert!(
            p.authorize(&attrs(
                "system:serviceaccount:kube-system:ctl",
                "",
                "get",
                "pods",
                "",
                "",
                ""
            ))
            .allowed()
        );
    }

    #[test]
    fn groups_of_service_accounts_are_matched_as_groups() {
        let p = Policy::new(
            vec![cluster_role("view", vec![rule("get", "", "pods", "")])],
            vec![],
            vec![crb("sas", "view", &["Group:system:serviceaccounts:ns1"])],
            vec![],
        );
        let sa = |ns: &str| {
            attrs(
                &format!("system:serviceaccount:{ns}:default"),
                &format!("system:serviceaccounts,system:serviceaccounts:{ns},system:authenticated"),
                "get",
                "pods",
                "",
                ns,
                "",
            )
        };
        assert!(p.authorize(&sa("ns1")).allowed());
        assert!(!p.authorize(&sa("ns2")).allowed());
    }

    #[test]
    fn missing_roles_are_the_no_opinion_reason() {
        let p = Policy::new(
            vec![],
            vec![],
            vec![crb("b1", "gone", &["User:u"])],
            vec![
                rb("ns", "b2", "Role", "missing", &["User:u"]),
                rb("ns", "b3", "ClusterRole", "gone", &["User:u"]),
            ],
        );
        assert_eq!(
            p.authorize(&attrs("u", "", "get", "pods", "", "", "")),
            Decision::NoOpinion(
                r#"RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found"#.into()
            )
        );
        // The same message twice counts once, as upstream's aggregate prints it.
        assert_eq!(
            p.authorize(&attrs("u", "", "get", "pods", "", "ns", "")),
            Decision::NoOpinion(
                r#"RBAC: [clusterrole.rbac.authorization.k8s.io "gone" not found, role.rbac.authorization.k8s.io "missing" not found]"#
                    .into()
            )
        );
        assert_eq!(
            p.authorize(&attrs("other", "", "get", "pods", "", "ns", "")),
            Decision::NoOpinion(String::new())
        );
        let (rules, errors) = p.rules_for(&user("u", ""), "ns");
        assert!(rules.is_empty());
        assert_eq!(errors.len(), 3);
    }

    #[test]
    fn rules_for_lists_cluster_rules_then_namespace_rules() {
        let p = Policy::new(
            vec![
                cluster_role("c", vec![rule("get", "", "nodes", "")]),
                cluster_role("n", vec![rule("list", "", "pods", "")]),
            ],
            vec![],
            vec![crb("b", "c", &["Group:system:authenticated"])],
            vec![
                rb("ns", "b", "ClusterRole", "n", &["User:u"]),
                rb("other", "b", "ClusterRole", "n", &["User:u"]),
            ],
        );
        let u = user("u", "system:authenticated");
        let (rules, errors) = p.rules_for(&u, "ns");
        assert!(errors.is_empty());
        assert_eq!(
            rules,
            vec![rule("get", "", "nodes", ""), rule("list", "", "pods", "")]
        );
        assert_eq!(p.rules_for(&u, "").0, vec![rule("get", "", "nodes", "")]);
    }

    // Upstream's TestAppliesTo (rule_test.go): which subject of a binding names the user.
    #[test]
    fn applies_to_finds_the_first_matching_subject() {
        let cases: &[(&[&str], UserInfo, &str, Option<usize>)] = &[
            (&["User:foobar"], user("foobar", ""), "", Some(0)),
            (
                &["User:barfoo", "User:foobar"],
                user("foobar", ""),
                "",
                Some(1),
            ),
            (
                &["User:barfoo", "User:foobar"],
                user("zimzam", ""),
                "",
                None,
            ),
            (
                &["User:barfoo", "Group:foobar"],
                user("zimzam", "foobar"),
                "",
                Some(1),
            ),
            (
                &["User:barfoo", "Group:foobar"],
                user("zimzam", "foobar"),
                "namespace1",
                Some(1),
            ),
            (
                &[
                    "User:barfoo",
                    "Group:foobar",
                    "ServiceAccount:kube-system/default",
                ],
                user("system:serviceaccount:kube-system:default", ""),
                "default",
                Some(2),
            ),
            (&["User:*"], user("foobar", ""), "default", None),
            (
                &["Group:system:authenticated", "Group:system:unauthenticated"],
                user("foobar", "system:authenticated"),
                "default",
                Some(0),
            ),
            (
                &["Group:system:authenticated", "Group:system:unauthenticated"],
                user("system:anonymous", "system:unauthenticated"),
                "default",
                Some(1),
            ),
        ];
        for (subs, u, ns, want) in cases {
            let list = subjects(subs).unwrap();
            let got = applies_to(u, &list, ns).map(|s| list.iter().position(|x| x == s).unwrap());
            assert_eq!(got, *want, "{subs:?} {u:?} {ns}");
        }
    }

    // Upstream's TestRuleMatches, "star verb", "star group", "star resource" and "tuple
    // expansion" cases in one table.
    #[test]
    fn rule_matching_expands_stars_and_tuples() {
        let mk = |verbs: &str, groups: &str, resources: &str| PolicyRule {
            verbs: split(verbs).unwrap_or_default(),
            api_groups: split(groups),
            resources: split(resources),
            ..Default::default()
        };
        let req = |verb: &str, group: &str, res: &str| attrs("u", "", verb, res, "", "", group);
        let cases = [
            (
                mk("*", "group1", "resource1"),
                [true, false, false, false, true, false, false, false],
            ),
            (
                mk("verb1", "*", "resource1"),
                [true, true, false, false, false, false, false, false],
            ),
            (
                mk("verb1", "group1", "*"),
                [true, false, true, false, false, false, false, false],
            ),
            (
                mk("verb1,verb2", "group1,group2", "resource1,resource2"),
                [true; 8],
            ),
        ];
        for (r, expected) in cases {
            let mut got = Vec::new();
            for verb in ["verb1", "verb2"] {
                for res in ["resource1", "resource2"] {
                    for group in ["group1", "group2"] {
                        got.push(rule_allows(&req(verb, group, res), &r));
                    }
                }
            }
            // Upstream lists (verb, resource, group) with group varying fastest, as here.
            assert_eq!(got, expected, "{r:?}");
        }
    }
}
