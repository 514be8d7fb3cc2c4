//! The webhooks of the stored Mutating- and ValidatingWebhookConfigurations, read from the watch
//! cache with upstream's v1 defaults, in upstream's order (configurations by name, webhooks in
//! their order), as upstream's `configuration/{mutating,validating}_webhook_manager.go` serve
//! them to the dispatchers.

use std::time::Duration;

use api::selector::LabelSelector;
use base64::Engine;
use serde::Deserialize;
use serde_json::Value;

use crate::state::ApiServer;

/// Which configuration kind a webhook comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flavor {
    /// A MutatingWebhookConfiguration's webhook: may patch the object.
    Mutating,
    /// A ValidatingWebhookConfiguration's webhook: may only allow or deny.
    Validating,
}

impl Flavor {
    fn plural(self) -> &'static str {
        match self {
            Flavor::Mutating => "mutatingwebhookconfigurations",
            Flavor::Validating => "validatingwebhookconfigurations",
        }
    }
}

/// One rule of a webhook (`RuleWithOperations`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct Rule {
    pub operations: Vec<String>,
    pub api_groups: Vec<String>,
    pub api_versions: Vec<String>,
    pub resources: Vec<String>,
    /// `*` (the default), `Cluster` or `Namespaced`.
    pub scope: Option<String>,
}

/// A webhook's `service` reference.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub(super) struct ServiceRef {
    pub namespace: String,
    pub name: String,
    pub path: Option<String>,
    pub port: Option<i32>,
}

/// Where and how a webhook is called (`WebhookClientConfig`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub(super) struct ClientConfig {
    pub url: Option<String>,
    pub service: Option<ServiceRef>,
    /// Base64 of the PEM bundle, as on the wire.
    pub ca_bundle: Option<String>,
}

impl ClientConfig {
    /// The PEM bytes of `caBundle` (empty when absent or not base64).
    pub(super) fn ca_pem(&self) -> Vec<u8> {
        self.ca_bundle
            .as_deref()
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .unwrap_or_default()
    }
}

/// The wire form of one webhook (the fields both kinds share, and `reinvocationPolicy`).
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct WireHook {
    name: String,
    client_config: ClientConfig,
    rules: Vec<Rule>,
    failure_policy: Option<String>,
    match_policy: Option<String>,
    namespace_selector: Option<Value>,
    object_selector: Option<Value>,
    side_effects: Option<String>,
    timeout_seconds: Option<i64>,
    reinvocation_policy: Option<String>,
}

/// One webhook, defaulted as upstream's v1 defaults do.
#[derive(Clone, Debug)]
pub(super) struct Hook {
    /// Upstream's webhook UID, `CONFIG/NAME/INDEX`: what reinvocation tracks.
    pub uid: String,
    /// The webhook's name, as messages quote it.
    pub name: String,
    pub client: ClientConfig,
    pub rules: Vec<Rule>,
    /// `matchPolicy: Equivalent` (the v1 default) rather than `Exact`.
    pub equivalent: bool,
    /// The parsed `namespaceSelector` (empty matches all); an unparsable one is an error when
    /// the webhook would be called, as upstream's `GetParsedNamespaceSelector`.
    pub namespace_selector: Result<LabelSelector, String>,
    /// The parsed `objectSelector`, likewise.
    pub object_selector: Result<LabelSelector, String>,
    /// `sideEffects`; `None` when unset.
    pub side_effects: Option<String>,
    /// `timeoutSeconds`, 10 by default.
    pub timeout: Duration,
    /// `failurePolicy: Ignore` (the default is Fail).
    pub ignore_failures: bool,
    /// `reinvocationPolicy: IfNeeded` (the default is Never).
    pub reinvoke_if_needed: bool,
}

fn selector(v: Option<&Value>) -> Result<LabelSelector, String> {
    match v {
        None | Some(Value::Null) => Ok(LabelSelector::default()),
        Some(v) => LabelSelector::from_json(v).map_err(|e| e.to_string()),
    }
}

impl Hook {
    fn from_wire(config: &str, index: usize, w: WireHook) -> Self {
        Hook {
            uid: format!("{config}/{}/{index}", w.name),
            namespace_selector: selector(w.namespace_selector.as_ref()),
            object_selector: selector(w.object_selector.as_ref()),
            name: w.name,
            client: w.client_config,
            rules: w.rules,
            equivalent: w.match_policy.as_deref() != Some("Exact"),
            side_effects: w.side_effects,
            timeout: Duration::from_secs(
                w.timeout_seconds
                    .and_then(|s| u64::try_from(s).ok())
                    .unwrap_or(10),
            ),
            ignore_failures: w.failure_policy.as_deref() == Some("Ignore"),
            reinvoke_if_needed: w.reinvocation_policy.as_deref() == Some("IfNeeded"),
        }
    }
}

/// The webhooks of one configuration object, in order.
pub(super) fn hooks_of(config: &Value) -> Vec<Hook> {
    let name = crate::object::name(config).to_string();
    config
        .get("webhooks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, w)| match WireHook::deserialize(w) {
            Ok(w) => Some(Hook::from_wire(&name, i, w)),
            Err(e) => {
                tracing::warn!(configuration = %name, index = i, error = %e, "unreadable webhook skipped");
                None
            }
        })
        .collect()
}

/// Whether any configuration of `flavor` exists (most clusters have no mutating one).
pub(super) fn any(server: &ApiServer, flavor: Flavor) -> bool {
    server
        .registry()
        .find("admissionregistration.k8s.io", "v1", flavor.plural())
        .is_some_and(|def| server.cache.len(&def) > 0)
}

/// Every webhook of `flavor`: configurations sorted by name, then each one's webhooks in order.
pub(super) fn hooks(server: &ApiServer, flavor: Flavor) -> Vec<Hook> {
    let Some(def) = server
        .registry()
        .find("admissionregistration.k8s.io", "v1", flavor.plural())
    else {
        return Vec::new();
    };
    let mut configs: Vec<Value> = server
        .cache
        .list(&def, None)
        .0
        .iter()
        .map(|e| e.value())
        .collect();
    configs.sort_by(|a, b| crate::object::name(a).cmp(crate::object::name(b)));
    configs.iter().flat_map(hooks_of).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_are_upstreams_v1_defaults() {
        let config = json!({"metadata": {"name": "cfg"}, "webhooks": [
            {"name": "a.example.com", "clientConfig": {"url": "https://127.0.0.1:1/"},
             "sideEffects": "None", "admissionReviewVersions": ["v1"]},
            {"name": "b.example.com", "clientConfig": {"url": "https://127.0.0.1:1/"},
             "failurePolicy": "Ignore", "matchPolicy": "Exact", "timeoutSeconds": 3,
             "reinvocationPolicy": "IfNeeded", "objectSelector": {"matchLabels": {"x": "y"}}}
        ]});
        let hooks = hooks_of(&config);
        assert_eq!(hooks.len(), 2);
        let (a, b) = (&hooks[0], &hooks[1]);
        assert_eq!(a.uid, "cfg/a.example.com/0");
        assert_eq!(b.uid, "cfg/b.example.com/1");
        assert!(a.equivalent && !b.equivalent);
        assert!(!a.ignore_failures && b.ignore_failures);
        assert!(!a.reinvoke_if_needed && b.reinvoke_if_needed);
        assert_eq!(a.timeout, Duration::from_secs(10));
        assert_eq!(b.timeout, Duration::from_secs(3));
        assert!(a.object_selector.as_ref().unwrap().is_empty());
        assert!(!b.object_selector.as_ref().unwrap().is_empty());
        assert_eq!(a.side_effects.as_deref(), Some("None"));
        assert_eq!(b.side_effects, None);
    }
}
