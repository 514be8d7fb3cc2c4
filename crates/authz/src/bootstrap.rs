//! Upstream v1.28's bootstrap RBAC policy: the ClusterRoles, ClusterRoleBindings, Roles and
//! RoleBindings kube-apiserver keeps in every cluster (`plugin/pkg/auth/authorizer/rbac/
//! bootstrappolicy/policy.go`, `controller_policy.go`, `namespace_policy.go`).
//!
//! The objects are data: `bootstrap/policy.json` holds what differs between them, transcribed by
//! `tools/transcribe-bootstrap-policy.py` from the fixtures upstream's own policy test compares
//! its policy code against. Every object also carries upstream's bootstrapping label and
//! autoupdate annotation, added here.

use k8s_openapi::{
    api::rbac::v1::{
        AggregationRule, ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef,
        Subject,
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use serde::Deserialize;
use std::{collections::BTreeMap, sync::LazyLock};

/// The annotation that lets the API server reconcile an object with its bootstrap version at
/// start (`"false"` protects a user's changes).
pub const AUTOUPDATE_ANNOTATION: &str = "rbac.authorization.kubernetes.io/autoupdate";
/// The label every bootstrap object carries.
pub const BOOTSTRAPPING_LABEL: &str = "kubernetes.io/bootstrapping";

/// The bootstrap policy, in upstream's grouping.
#[derive(Clone, Debug, Default)]
pub struct BootstrapPolicy {
    /// `ClusterRoles()` then `ControllerRoles()`.
    pub cluster_roles: Vec<ClusterRole>,
    /// `ClusterRoleBindings()` then `ControllerRoleBindings()`.
    pub cluster_role_bindings: Vec<ClusterRoleBinding>,
    /// `NamespaceRoles()` (kube-system, kube-public).
    pub roles: Vec<Role>,
    /// `NamespaceRoleBindings()`.
    pub role_bindings: Vec<RoleBinding>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Item {
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    aggregation_rule: Option<AggregationRule>,
    #[serde(default)]
    rules: Option<Vec<PolicyRule>>,
    #[serde(default)]
    role_ref: Option<RoleRef>,
    #[serde(default)]
    subjects: Option<Vec<Subject>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Data {
    cluster_roles: Vec<Item>,
    controller_roles: Vec<Item>,
    cluster_role_bindings: Vec<Item>,
    controller_role_bindings: Vec<Item>,
    roles: Vec<Item>,
    role_bindings: Vec<Item>,
}

impl Item {
    fn metadata(&self) -> ObjectMeta {
        let mut labels = self.labels.clone();
        labels.insert(BOOTSTRAPPING_LABEL.into(), "rbac-defaults".into());
        ObjectMeta {
            name: Some(self.name.clone()),
            namespace: self.namespace.clone(),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(
                AUTOUPDATE_ANNOTATION.to_string(),
                "true".to_string(),
            )])),
            ..Default::default()
        }
    }

    fn cluster_role(self) -> ClusterRole {
        ClusterRole {
            metadata: self.metadata(),
            aggregation_rule: self.aggregation_rule,
            rules: Some(self.rules.unwrap_or_default()),
        }
    }

    fn role(self) -> Role {
        Role {
            metadata: self.metadata(),
            rules: Some(self.rules.unwrap_or_default()),
        }
    }

    fn role_ref(&self) -> RoleRef {
        self.role_ref.clone().unwrap_or_default()
    }

    fn cluster_role_binding(self) -> ClusterRoleBinding {
        ClusterRoleBinding {
            metadata: self.metadata(),
            role_ref: self.role_ref(),
            subjects: self.subjects,
        }
    }

    fn role_binding(self) -> RoleBinding {
        RoleBinding {
            metadata: self.metadata(),
            role_ref: self.role_ref(),
            subjects: self.subjects,
        }
    }
}

static POLICY: LazyLock<BootstrapPolicy> = LazyLock::new(|| {
    // The data is part of this crate and checked by its tests; a parse failure cannot come from
    // input, so an empty policy (and the failing tests) is the answer to one.
    let data: Data = match serde_json::from_str(include_str!("bootstrap/policy.json")) {
        Ok(d) => d,
        Err(_) => return BootstrapPolicy::default(),
    };
    BootstrapPolicy {
        cluster_roles: data
            .cluster_roles
            .into_iter()
            .chain(data.controller_roles)
            .map(Item::cluster_role)
            .collect(),
        cluster_role_bindings: data
            .cluster_role_bindings
            .into_iter()
            .chain(data.controller_role_bindings)
            .map(Item::cluster_role_binding)
            .collect(),
        roles: data.roles.into_iter().map(Item::role).collect(),
        role_bindings: data
            .role_bindings
            .into_iter()
            .map(Item::role_binding)
            .collect(),
    }
});

/// Upstream's bootstrap policy.
pub fn policy() -> &'static BootstrapPolicy {
    &POLICY
}

/// Upstream's `NodeRules()`: what the Node authorizer grants a node beyond its graph checks (the
/// rules of the `system:node` ClusterRole).
pub fn node_rules() -> &'static [PolicyRule] {
    static RULES: LazyLock<Vec<PolicyRule>> = LazyLock::new(|| {
        policy()
            .cluster_roles
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some("system:node"))
            .and_then(|r| r.rules.clone())
            .unwrap_or_default()
    });
    &RULES
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Attributes, UserInfo, aggregation, rbac::Policy};

    fn cluster_role(name: &str) -> &'static ClusterRole {
        policy()
            .cluster_roles
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no bootstrap ClusterRole {name}"))
    }

    #[test]
    fn holds_upstreams_objects() {
        let p = policy();
        assert_eq!(p.cluster_roles.len(), 62);
        assert_eq!(p.cluster_role_bindings.len(), 43);
        assert_eq!(p.roles.len(), 7);
        assert_eq!(p.role_bindings.len(), 7);
        for name in [
            "cluster-admin",
            "admin",
            "edit",
            "view",
            "system:aggregate-to-admin",
            "system:aggregate-to-edit",
            "system:aggregate-to-view",
            "system:discovery",
            "system:basic-user",
            "system:public-info-viewer",
            "system:node",
            "system:node-proxier",
            "system:kube-scheduler",
            "system:kube-controller-manager",
            "system:volume-scheduler",
            "system:auth-delegator",
            "system:heapster",
            "system:controller:replicaset-controller",
            "system:controller:clusterrole-aggregation-controller",
        ] {
            let r = cluster_role(name);
            let meta = &r.metadata;
            assert_eq!(
                meta.labels.as_ref().unwrap()[BOOTSTRAPPING_LABEL],
                "rbac-defaults"
            );
            assert_eq!(
                meta.annotations.as_ref().unwrap()[AUTOUPDATE_ANNOTATION],
                "true"
            );
        }
        let ns: Vec<_> = p
            .roles
            .iter()
            .map(|r| r.metadata.namespace.as_deref().unwrap())
            .collect();
        assert!(
            ns.iter()
                .all(|n| *n == "kube-system" || *n == "kube-public")
        );
        let masters = p
            .cluster_role_bindings
            .iter()
            .find(|b| b.metadata.name.as_deref() == Some("cluster-admin"))
            .unwrap();
        assert_eq!(masters.role_ref.name, "cluster-admin");
        assert_eq!(masters.subjects.as_ref().unwrap()[0].name, "system:masters");
    }

    #[test]
    fn view_has_no_secrets_and_aggregation_chains_view_edit_admin() {
        // As the aggregation controller does, until nothing changes: admin aggregates edit's
        // rules once edit holds view's.
        let mut roles = policy().cluster_roles.clone();
        loop {
            let mut changed = false;
            for i in 0..roles.len() {
                if let Some(Ok(rules)) = aggregation::aggregated_rules(&roles[i], &roles)
                    && !aggregation::same_rules(
                        &rules,
                        roles[i].rules.as_deref().unwrap_or_default(),
                    )
                {
                    roles[i].rules = Some(rules);
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let aggregated = |name: &str| {
            roles
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(name))
                .and_then(|r| r.rules.clone())
                .unwrap()
        };
        let view = aggregated("view");
        // `res` is `resource` or `resource.group`.
        let grants = |rules: &[PolicyRule], verb: &str, res: &str| {
            let (resource, group) = res.split_once('.').unwrap_or((res, ""));
            crate::rbac::rules_allow(
                &Attributes {
                    verb: verb.into(),
                    resource_request: true,
                    resource: resource.into(),
                    api_group: group.into(),
                    ..Default::default()
                },
                rules,
            )
        };
        assert!(grants(&view, "get", "pods"));
        assert!(!grants(&view, "get", "secrets"));
        // edit aggregates to admin, view to edit.
        let edit_labels = cluster_role("edit").metadata.labels.as_ref().unwrap();
        assert_eq!(
            edit_labels["rbac.authorization.k8s.io/aggregate-to-admin"],
            "true"
        );
        let edit = aggregated("edit");
        assert!(grants(&edit, "get", "secrets"));
        assert!(grants(&edit, "create", "pods"));
        assert!(!grants(&edit, "create", "roles.rbac.authorization.k8s.io"));
        let admin = aggregated("admin");
        assert!(grants(&admin, "create", "pods"));
        assert!(grants(&admin, "create", "roles.rbac.authorization.k8s.io"));
        assert!(grants(&admin, "get", "secrets"));
        // The aggregated roles' own stored rules are empty until the controller fills them.
        assert_eq!(cluster_role("admin").rules.as_deref(), Some(&[][..]));
    }

    #[test]
    fn node_rules_are_system_nodes() {
        assert!(node_rules().len() > 10);
        let nodes = PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["nodes/status".into()]),
            verbs: vec!["patch".into(), "update".into()],
            ..Default::default()
        };
        assert!(node_rules().contains(&nodes));
    }

    #[test]
    fn bootstrap_bindings_grant_what_upstreams_do() {
        let p = policy();
        let policy = Policy::new(
            p.cluster_roles.clone(),
            p.roles.clone(),
            p.cluster_role_bindings.clone(),
            p.role_bindings.clone(),
        );
        let anyone = UserInfo::new("alice", &["system:authenticated"]);
        let url = |u: &UserInfo, path: &str| Attributes {
            user: u.clone(),
            verb: "get".into(),
            path: path.into(),
            ..Default::default()
        };
        assert!(policy.authorize(&url(&anyone, "/api")).allowed());
        assert!(policy.authorize(&url(&anyone, "/version")).allowed());
        assert!(!policy.authorize(&url(&anyone, "/metrics")).allowed());
        assert!(
            policy
                .authorize(&url(&UserInfo::anonymous(), "/healthz"))
                .allowed()
        );
        assert!(
            !policy
                .authorize(&url(&UserInfo::anonymous(), "/api"))
                .allowed()
        );
        let ssar = Attributes {
            user: anyone.clone(),
            verb: "create".into(),
            resource_request: true,
            api_group: "authorization.k8s.io".into(),
            resource: "selfsubjectaccessreviews".into(),
            ..Default::default()
        };
        assert_eq!(
            policy.authorize(&ssar).reason(),
            r#"RBAC: allowed by ClusterRoleBinding "system:basic-user" of ClusterRole "system:basic-user" to Group "system:authenticated""#
        );
        let scheduler = UserInfo::new("system:kube-scheduler", &["system:authenticated"]);
        let bind = Attributes {
            user: scheduler,
            verb: "create".into(),
            resource_request: true,
            resource: "pods".into(),
            subresource: "binding".into(),
            namespace: "default".into(),
            ..Default::default()
        };
        assert!(policy.authorize(&bind).allowed());
        let rs = UserInfo::new(
            "system:serviceaccount:kube-system:replicaset-controller",
            &[
                "system:serviceaccounts",
                "system:serviceaccounts:kube-system",
            ],
        );
        let create_pod = Attributes {
            user: rs,
            verb: "create".into(),
            resource_request: true,
            resource: "pods".into(),
            namespace: "default".into(),
            ..Default::default()
        };
        assert!(policy.authorize(&create_pod).allowed());
    }
}
