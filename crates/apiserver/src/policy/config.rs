//! The stored ValidatingAdmissionPolicies and their bindings, read from the watch cache with
//! upstream's defaults (`pkg/apis/admissionregistration/v1beta1/defaults.go`), their expressions
//! compiled.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use api::selector::LabelSelector;
use serde::Deserialize;
use serde_json::Value;

use super::expression::Compiled;
use crate::{state::ApiServer, webhook::config::Rule};

const GROUP: &str = "admissionregistration.k8s.io";

/// `NamedRuleWithOperations`: a rule, optionally narrowed to some object names.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct NamedRule {
    #[serde(flatten)]
    pub rule: Rule,
    pub resource_names: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct WireMatchResources {
    namespace_selector: Option<Value>,
    object_selector: Option<Value>,
    resource_rules: Vec<NamedRule>,
    exclude_resource_rules: Vec<NamedRule>,
    match_policy: Option<String>,
}

/// `MatchResources`, parsed.
pub(crate) struct MatchResources {
    pub namespace_selector: Result<LabelSelector, String>,
    pub object_selector: Result<LabelSelector, String>,
    pub resource_rules: Vec<NamedRule>,
    pub exclude_resource_rules: Vec<NamedRule>,
    /// `matchPolicy: Equivalent` (the default) rather than `Exact`.
    pub equivalent: bool,
}

fn selector(v: Option<&Value>) -> Result<LabelSelector, String> {
    match v {
        None | Some(Value::Null) => Ok(LabelSelector::default()),
        Some(v) => LabelSelector::from_json(v).map_err(|e| e.to_string()),
    }
}

impl From<WireMatchResources> for MatchResources {
    fn from(w: WireMatchResources) -> Self {
        MatchResources {
            namespace_selector: selector(w.namespace_selector.as_ref()),
            object_selector: selector(w.object_selector.as_ref()),
            resource_rules: w.resource_rules,
            exclude_resource_rules: w.exclude_resource_rules,
            equivalent: w.match_policy.as_deref() != Some("Exact"),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct WireExpression {
    name: String,
    expression: String,
    message: String,
    message_expression: String,
    reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct WireParamKind {
    api_version: String,
    kind: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct WirePolicySpec {
    param_kind: Option<WireParamKind>,
    match_constraints: Option<WireMatchResources>,
    validations: Vec<WireExpression>,
    failure_policy: Option<String>,
    match_conditions: Vec<WireExpression>,
    variables: Vec<WireExpression>,
    audit_annotations: Vec<WireAuditAnnotation>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct WireAuditAnnotation {
    key: String,
    value_expression: String,
}

/// One `auditAnnotations` entry.
pub(crate) struct AuditAnnotation {
    pub key: String,
    pub value_expression: Compiled,
    pub source: String,
}

/// One `validations` entry.
pub(crate) struct Validation {
    pub expression: Compiled,
    pub source: String,
    pub message: String,
    pub message_expression: Option<Compiled>,
    /// The status reason of a denial (`Invalid` by default).
    pub reason: Option<String>,
}

/// `paramKind`: the group, version and kind of the policy's parameters.
pub(crate) struct ParamKind {
    pub group: String,
    pub version: String,
    pub kind: String,
}

/// A ValidatingAdmissionPolicy, compiled.
pub(crate) struct Policy {
    pub name: String,
    pub param_kind: Option<ParamKind>,
    pub match_constraints: MatchResources,
    pub validations: Vec<Validation>,
    /// `failurePolicy: Ignore` (the default is Fail).
    pub ignore_failures: bool,
    /// `failurePolicy` when it is neither Fail nor Ignore.
    pub unknown_failure_policy: Option<String>,
    pub match_conditions: Vec<(String, Compiled)>,
    pub variables: Vec<(String, Compiled)>,
    pub audit_annotations: Vec<AuditAnnotation>,
}

impl Policy {
    fn from_object(obj: &Value) -> Result<Self, String> {
        let name = crate::object::name(obj).to_string();
        let spec = WirePolicySpec::deserialize(obj.get("spec").unwrap_or(&Value::Null))
            .map_err(|e| e.to_string())?;
        let (unknown_failure_policy, ignore_failures) = match spec.failure_policy.as_deref() {
            None | Some("Fail") => (None, false),
            Some("Ignore") => (None, true),
            Some(other) => (Some(other.to_string()), false),
        };
        let named = |list: Vec<WireExpression>| {
            list.into_iter()
                .map(|e| (e.name, Compiled::new(&e.expression)))
                .collect()
        };
        Ok(Policy {
            name,
            param_kind: spec.param_kind.map(|p| {
                let (group, version) = p.api_version.rsplit_once('/').map_or_else(
                    || (String::new(), p.api_version.clone()),
                    |(g, v)| (g.to_string(), v.to_string()),
                );
                ParamKind {
                    group,
                    version,
                    kind: p.kind,
                }
            }),
            match_constraints: spec.match_constraints.unwrap_or_default().into(),
            validations: spec
                .validations
                .into_iter()
                .map(|v| Validation {
                    expression: Compiled::new(&v.expression),
                    source: v.expression,
                    message: v.message,
                    message_expression: (!v.message_expression.is_empty())
                        .then(|| Compiled::new(&v.message_expression)),
                    reason: v.reason,
                })
                .collect(),
            ignore_failures,
            unknown_failure_policy,
            match_conditions: named(spec.match_conditions),
            variables: named(spec.variables),
            audit_annotations: spec
                .audit_annotations
                .into_iter()
                .map(|a| AuditAnnotation {
                    key: a.key,
                    value_expression: Compiled::new(&a.value_expression),
                    source: a.value_expression,
                })
                .collect(),
        })
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct WireParamRef {
    name: String,
    namespace: String,
    selector: Option<Value>,
    parameter_not_found_action: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct WireBindingSpec {
    policy_name: String,
    param_ref: Option<WireParamRef>,
    match_resources: Option<WireMatchResources>,
    validation_actions: Vec<String>,
}

/// `paramRef`.
pub(crate) struct ParamRef {
    pub name: String,
    pub namespace: String,
    pub selector: Option<Result<LabelSelector, String>>,
    /// `parameterNotFoundAction: Deny` (the default is Allow).
    pub deny_when_missing: bool,
}

/// A ValidatingAdmissionPolicyBinding.
pub(crate) struct Binding {
    pub name: String,
    pub param_ref: Option<ParamRef>,
    /// `None` matches everything the policy matches.
    pub match_resources: Option<MatchResources>,
    pub validation_actions: Vec<String>,
}

impl Binding {
    fn from_object(obj: &Value) -> Result<(String, Self), String> {
        let spec = WireBindingSpec::deserialize(obj.get("spec").unwrap_or(&Value::Null))
            .map_err(|e| e.to_string())?;
        Ok((
            spec.policy_name,
            Binding {
                name: crate::object::name(obj).to_string(),
                param_ref: spec.param_ref.map(|p| ParamRef {
                    name: p.name,
                    namespace: p.namespace,
                    selector: p.selector.as_ref().map(|s| selector(Some(s))),
                    deny_when_missing: p.parameter_not_found_action.as_deref() == Some("Deny"),
                }),
                match_resources: spec.match_resources.map(Into::into),
                validation_actions: spec.validation_actions,
            },
        ))
    }
}

fn stored(server: &ApiServer, plural: &str) -> Vec<Value> {
    let Some(def) = ["v1", "v1beta1", "v1alpha1"]
        .into_iter()
        .find_map(|v| server.registry().find(GROUP, v, plural))
    else {
        return Vec::new();
    };
    let mut objects: Vec<Value> = server
        .cache
        .list(&def, None)
        .0
        .iter()
        .map(|e| e.value())
        .collect();
    objects.sort_by(|a, b| crate::object::name(a).cmp(crate::object::name(b)));
    objects
}

/// The policies with their bindings, compiled.
pub(crate) type Policies = Vec<(Policy, Vec<Binding>)>;

/// What identifies one state of the stored objects: each one's uid and resourceVersion.
type Generation = Vec<(String, String)>;

fn generation(objects: &[Value]) -> Generation {
    objects
        .iter()
        .map(|o| {
            let meta = |k: &str| {
                o.pointer(&format!("/metadata/{k}"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            (meta("uid"), meta("resourceVersion"))
        })
        .collect()
}

/// The last compiled state (a write compiles the policies only when one of them or of their
/// bindings changed, as upstream's controller recompiles on change).
static LAST: Mutex<Option<(Generation, Arc<Policies>)>> = Mutex::new(None);

/// Every stored policy (by name) with its bindings (by name).
pub(crate) fn policies(server: &ApiServer) -> Arc<Policies> {
    let policies = stored(server, "validatingadmissionpolicies");
    if policies.is_empty() {
        return Arc::default();
    }
    let bindings = stored(server, "validatingadmissionpolicybindings");
    let mut key = generation(&policies);
    key.extend(generation(&bindings));
    if let Ok(last) = LAST.lock()
        && let Some((k, compiled)) = last.as_ref()
        && *k == key
    {
        return compiled.clone();
    }
    let compiled = Arc::new(compile(&policies, &bindings));
    if let Ok(mut last) = LAST.lock() {
        *last = Some((key, compiled.clone()));
    }
    compiled
}

fn compile(policies: &[Value], binding_objects: &[Value]) -> Policies {
    let mut bindings: HashMap<String, Vec<Binding>> = HashMap::new();
    for obj in binding_objects {
        match Binding::from_object(obj) {
            Ok((policy, binding)) => bindings.entry(policy).or_default().push(binding),
            Err(e) => {
                tracing::warn!(binding = %crate::object::name(obj), error = %e, "unreadable binding skipped")
            }
        }
    }
    policies
        .iter()
        .filter_map(|obj| match Policy::from_object(obj) {
            Ok(p) => {
                let b = bindings.remove(&p.name).unwrap_or_default();
                Some((p, b))
            }
            Err(e) => {
                tracing::warn!(policy = %crate::object::name(obj), error = %e, "unreadable policy skipped");
                None
            }
        })
        .collect()
}
