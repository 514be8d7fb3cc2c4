//! Whether a request may do what it asks: upstream's authorizer chain (the `system:masters`
//! group, the Node authorizer, RBAC) over the RBAC objects and pods this server holds.
//!
//! RBAC decides over an [`authz::rbac::Policy`] snapshot of the four RBAC kinds, kept with the
//! cache's change counts of those kinds: a request compares four counters and rebuilds only when
//! one moved, so it costs a lock and an index lookup, not a walk over every binding. Unlike
//! upstream's informer-fed authorizer, a request never trails the watch cache: once the cache
//! applied an RBAC write, the next request decides by it.

pub(crate) mod policy_cache;

use crate::{cache::Cache, state::ApiServer};
use authz::{Attributes, Decision, UserInfo, node::NodeGraph, rbac::Policy};
use serde_json::{Value, json};
use std::sync::Arc;

/// What a user may do in a namespace (SelfSubjectRulesReview's status).
#[derive(Clone, Debug, Default)]
pub(crate) struct Rules {
    /// The resource rules, as `authorization.k8s.io/v1` ResourceRule objects.
    pub resource_rules: Vec<serde_json::Value>,
    /// The non-resource rules, as NonResourceRule objects.
    pub non_resource_rules: Vec<serde_json::Value>,
    /// Whether the list may be missing rules (an authorizer that cannot list them).
    pub incomplete: bool,
    /// Why the list may be incomplete.
    pub evaluation_error: String,
}

/// Pods by node, PVs and VolumeAttachments from the watch cache, for the Node authorizer.
struct CacheGraph<'c>(&'c Cache);

impl CacheGraph<'_> {
    fn values(&self, group: &str, plural: &str, ns: Option<&str>) -> Vec<Arc<crate::cache::Entry>> {
        match self.0.registry().owner(group, plural) {
            Some(def) => self.0.list(&def, ns).0,
            None => Vec::new(),
        }
    }

    fn value(&self, group: &str, plural: &str, name: &str) -> Option<Value> {
        let def = self.0.registry().owner(group, plural)?;
        Some(self.0.get(&def, None, name)?.value())
    }
}

impl NodeGraph for CacheGraph<'_> {
    fn any_pod_on_node(
        &self,
        node: &str,
        namespace: &str,
        found: &mut dyn FnMut(&Value) -> bool,
    ) -> bool {
        // The node's pods come from the cache's index of them by node, parsed one at a time until
        // one answers (unless this server wrote it last): the kubelet asks for a pod's token as
        // it starts the pod.
        let Some(def) = self.0.registry().owner("", "pods") else {
            return false;
        };
        let ns = Some(namespace).filter(|n| !n.is_empty());
        self.0.list_on_node(&def, ns, node).iter().any(|e| {
            let key = def.key(Some(&e.namespace), &e.name);
            found(&self.0.parsed(&key, e))
        })
    }

    fn persistent_volume(&self, name: &str) -> Option<Value> {
        self.value("", "persistentvolumes", name)
    }

    fn persistent_volumes(&self) -> Vec<Value> {
        self.values("", "persistentvolumes", None)
            .iter()
            .map(|e| e.value())
            .collect()
    }

    fn volume_attachment_node(&self, name: &str) -> Option<String> {
        let va = self.value("storage.k8s.io", "volumeattachments", name)?;
        va.pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .map(str::to_string)
    }
}

impl ApiServer {
    /// The current RBAC snapshot, rebuilt first if an RBAC object changed.
    pub(crate) fn rbac_policy(&self) -> Arc<Policy> {
        self.authz.policy(&self.cache)
    }

    /// A snapshot built now from the cache, for the escalation checks of RBAC writes: upstream's
    /// RBAC storage resolves roles from the registry, not an informer, so a role created just
    /// before a binding to it is found.
    pub(crate) fn current_rbac_policy(&self) -> Policy {
        policy_cache::build_policy(&self.cache)
    }

    /// The authorizers' decision on `attrs`, in upstream's order: `system:masters`, then the
    /// Node authorizer, then RBAC. A no-opinion reason joins the reasons they gave, one per line,
    /// as upstream's union authorizer does.
    pub(crate) fn authorize(&self, attrs: &Attributes) -> Decision {
        if attrs.user.in_group(authz::MASTERS_GROUP) {
            return Decision::Allow(String::new());
        }
        let node = authz::node::authorize(&CacheGraph(&self.cache), attrs);
        if !matches!(node, Decision::NoOpinion(_)) {
            return node;
        }
        match self.rbac_policy().authorize(attrs) {
            Decision::NoOpinion(rbac) => {
                let reasons: Vec<&str> = [node.reason(), rbac.as_str()]
                    .into_iter()
                    .filter(|r| !r.is_empty())
                    .collect();
                Decision::NoOpinion(reasons.join("\n"))
            }
            other => other,
        }
    }

    /// The rules `user` holds in `namespace` (SelfSubjectRulesReview), as upstream's rule
    /// resolvers (the Node authorizer, which cannot list a node's, then RBAC) give them.
    pub(crate) fn rules_for(&self, user: &UserInfo, namespace: &str) -> Rules {
        let mut out = Rules::default();
        let mut errors = Vec::new();
        if authz::node::node_identity(user).is_some() {
            out.incomplete = true;
            errors.push("node authorizer does not support user rule resolution".to_string());
        }
        let (rules, rbac_errors) = self.rbac_policy().rules_for(user, namespace);
        errors.extend(rbac_errors.iter().map(ToString::to_string));
        for r in rules {
            let some = |v: &Option<Vec<String>>| v.as_ref().filter(|l| !l.is_empty()).cloned();
            if let Some(resources) = some(&r.resources) {
                let mut rule = json!({"verbs": r.verbs});
                if let Some(g) = some(&r.api_groups) {
                    rule["apiGroups"] = json!(g);
                }
                rule["resources"] = json!(resources);
                if let Some(n) = some(&r.resource_names) {
                    rule["resourceNames"] = json!(n);
                }
                out.resource_rules.push(rule);
            }
            if let Some(urls) = some(&r.non_resource_urls) {
                out.non_resource_rules
                    .push(json!({"verbs": r.verbs, "nonResourceURLs": urls}));
            }
        }
        out.evaluation_error = aggregate(&errors);
        out
    }
}

/// Upstream's aggregate error message (one as is; several deduplicated in brackets).
fn aggregate(messages: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for m in messages {
        if !seen.contains(&m.as_str()) {
            seen.push(m);
        }
    }
    match seen.as_slice() {
        [] => String::new(),
        [one] => one.to_string(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// Test hooks: the authorizer's decision and the rules a user holds, without a request (tests
/// make requests as a user with [`ApiServer::in_process_router_as`]).
impl ApiServer {
    /// The authorizer chain's decision on `attrs` (what the HTTP pipeline asks per request).
    pub fn authorize_for_test(&self, attrs: &Attributes) -> Decision {
        self.authorize(attrs)
    }

    /// The rules `user` holds in `namespace`, as SelfSubjectRulesReview's status JSON
    /// (`resourceRules`, `nonResourceRules`, `incomplete`, `evaluationError`).
    pub fn rules_for_test(&self, user: &UserInfo, namespace: &str) -> Value {
        let r = self.rules_for(user, namespace);
        json!({
            "resourceRules": r.resource_rules,
            "nonResourceRules": r.non_resource_rules,
            "incomplete": r.incomplete,
            "evaluationError": r.evaluation_error,
        })
    }
}
