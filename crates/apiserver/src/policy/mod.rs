//! ValidatingAdmissionPolicy: the stored policies' CEL validations run against each write, as
//! upstream's `ValidatingAdmissionPolicy` plugin runs them
//! (`staging/src/k8s.io/apiserver/pkg/admission/plugin/validatingadmissionpolicy`,
//! `.../plugin/cel`), between Pod Security and the validating webhooks.
//!
//! - [`config`]: the stored policies and bindings, compiled.
//! - [`expression`]: the CEL environment (the `cel` crate with Kubernetes' libraries).
//! - [`parse_limits`]: cel-go's size and depth limits, checked before anything is parsed.
//! - [`cost`]: cel-go's runtime cost, its per-expression limit and upstream's budgets.
//! - [`evaluator`]: the threads CEL runs on, off the async workers.
//! - [`authorizer`]: the `authorizer` library.
//! - [`urls`]: the `url` library.
//! - [`validation`]: defaults and validation of the stored objects.
//!
//! Matching (`matchConstraints`, a binding's `matchResources`) reuses the webhooks' rule and
//! selector matching. Each expression is held to cel-go's per-call cost limit and each group
//! of them to upstream's budget ([`cost`]); no static cost estimate is made at create or
//! update, as upstream 1.28 makes none for these policies. Not done: type checking and
//! `status.typeChecking`.

mod authorizer;
mod config;
mod cost;
mod evaluator;
mod expression;
mod parse_limits;
mod urls;
pub(crate) mod validation;
mod values;

use std::{collections::BTreeMap, sync::Arc};

use cel::Value as Cel;
use serde_json::{Value, json};

use self::{
    config::{Binding, MatchResources, NamedRule, Policy},
    expression::Compiled,
    values::{map_of, value_of},
};
use crate::{
    error::{ApiError, ApiResult},
    plugins::{Operation, Review},
    registry::Kind,
    state::ApiServer,
    webhook::{Write, config::Rule},
};

/// Upstream's `celconfig.MaxEvaluatedMessageExpressionSizeBytes`.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// Upstream's `maxAuditAnnotationValueLength`.
const MAX_AUDIT_ANNOTATION_BYTES: usize = 10 * 1024;

/// The audit annotation the `Audit` action publishes.
const VALIDATION_FAILURE: &str = "validation.policy.admission.k8s.io/validation_failure";

/// A refusal: which policy and binding, why, and the status reason.
struct Denial {
    policy: String,
    binding: Option<String>,
    message: String,
    reason: Option<String>,
}

/// Runs the policies that match the write. Returns the `Warn` actions' warnings; a `Deny`
/// refuses the write.
pub(crate) async fn validate(
    server: &ApiServer,
    review: &Review<'_>,
    obj: &Value,
) -> ApiResult<Vec<String>> {
    let policies = config::policies(server);
    if policies.is_empty() {
        return Ok(Vec::new());
    }
    let mut write = Write::new(server, review);
    let object = (review.operation != Operation::Delete).then_some(obj);
    let mut warnings = Vec::new();
    let mut denials = Vec::new();
    for (index, (policy, bindings)) in policies.iter().enumerate() {
        let config_error = |binding: Option<&Binding>, why: String| -> Option<Denial> {
            let message = match &policy.unknown_failure_policy {
                Some(p) => format!("unrecognized failure policy: '{p}'"),
                None if policy.ignore_failures => return None,
                None if binding.is_some() => format!("failed to configure binding: {why}"),
                None => format!("failed to configure policy: {why}"),
            };
            Some(Denial {
                policy: policy.name.clone(),
                binding: binding.map(|b| b.name.clone()),
                message,
                reason: None,
            })
        };
        let kind = match matches(&mut write, review, &policy.match_constraints, object) {
            Ok(Some(kind)) => kind,
            Ok(None) => continue,
            Err(why) => {
                denials.extend(config_error(None, why));
                continue;
            }
        };
        let mut annotations: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for binding in bindings {
            if let Some(mr) = &binding.match_resources {
                match matches(&mut write, review, mr, object) {
                    Ok(Some(_)) => {}
                    Ok(None) => continue,
                    Err(why) => {
                        denials.extend(config_error(Some(binding), why));
                        continue;
                    }
                }
            }
            let params = match params(server, policy, binding, &write) {
                Ok(params) => params,
                Err(why) => {
                    denials.extend(config_error(Some(binding), why));
                    continue;
                }
            };
            let inputs = Arc::new(Inputs::new(server, review, &write, &kind, object)?);
            for param in params {
                let (policies, inputs) = (policies.clone(), inputs.clone());
                let outcome = evaluator::run(move || {
                    let policy = &policies[index].0;
                    authorizer::with(&inputs.user, &inputs.authorize, || {
                        evaluate(policy, &inputs, param.as_ref())
                    })
                })
                .await?;
                for (index, message, reason) in outcome.failed {
                    for action in &binding.validation_actions {
                        match action.as_str() {
                            "Deny" => denials.push(Denial {
                                policy: policy.name.clone(),
                                binding: Some(binding.name.clone()),
                                message: message.clone(),
                                reason: reason.clone(),
                            }),
                            "Warn" => warnings.push(format!(
                                "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {message}",
                                policy.name, binding.name
                            )),
                            "Audit" => {
                                let value = json!([{
                                    "message": message,
                                    "policy": policy.name,
                                    "binding": binding.name,
                                    "expressionIndex": index,
                                    "validationActions": binding.validation_actions,
                                }]);
                                crate::audit::annotate(VALIDATION_FAILURE, &value.to_string());
                            }
                            _ => {}
                        }
                    }
                }
                for message in outcome.errors {
                    denials.push(Denial {
                        policy: policy.name.clone(),
                        binding: Some(binding.name.clone()),
                        message,
                        reason: None,
                    });
                }
                for (key, value) in outcome.annotations {
                    let values = annotations.entry(key).or_default();
                    if !values.contains(&value) {
                        values.push(value);
                    }
                }
            }
        }
        // Each policy's annotations under `POLICY/KEY`, distinct values of several bindings or
        // parameters joined (upstream's `auditAnnotationCollector`).
        for (key, values) in annotations {
            crate::audit::annotate(&format!("{}/{key}", policy.name), &values.join(", "));
        }
    }
    match denials.into_iter().next() {
        Some(d) => Err(refusal(review, d)),
        None => Ok(warnings),
    }
}

/// Upstream's `ValidatingAdmissionPolicy` plugin: the stored policies decide which writes they
/// match.
pub(crate) struct ValidatingAdmissionPolicy;

#[async_trait::async_trait]
impl crate::plugins::Plugin for ValidatingAdmissionPolicy {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionPolicy"
    }

    fn handles(&self, review: &Review<'_>) -> bool {
        !crate::plugins::creates_subresource(review)
    }

    async fn validate(
        &self,
        server: &ApiServer,
        review: &Review<'_>,
        obj: &Value,
    ) -> ApiResult<Vec<String>> {
        validate(server, review, obj).await
    }
}

/// The error a denial answers with: upstream's `NewForbidden` wording, the decision's reason
/// (`Invalid` by default) and its code.
fn refusal(review: &Review<'_>, d: Denial) -> ApiError {
    let message = match &d.binding {
        Some(b) => format!(
            "ValidatingAdmissionPolicy '{}' with binding '{b}' denied request: {}",
            d.policy, d.message
        ),
        None => format!(
            "ValidatingAdmissionPolicy '{}' denied request: {}",
            d.policy, d.message
        ),
    };
    let mut e = ApiError::forbidden_by_admission(review.view, review.name, &message);
    let (reason, code) = match d.reason.as_deref() {
        Some("Forbidden") => ("Forbidden", 403),
        Some("Unauthorized") => ("Unauthorized", 401),
        Some("RequestEntityTooLarge") => ("RequestEntityTooLarge", 413),
        _ => ("Invalid", 422),
    };
    e.reason = reason;
    e.code = code;
    if let Some(Value::Object(details)) = &mut e.details {
        details.insert("causes".into(), json!([{ "message": message }]));
    }
    e
}

/// The rules that apply to an object named `name`: those that name no objects or name it.
fn applicable(rules: &[NamedRule], name: &str) -> Vec<Rule> {
    rules
        .iter()
        .filter(|r| r.resource_names.is_empty() || r.resource_names.iter().any(|n| n == name))
        .map(|r| r.rule.clone())
        .collect()
}

/// The kind `mr` matches the write as, if it does (upstream's `matching.Matcher.Matches`):
/// selectors, then excluded rules, then rules (none: everything). Errors are configuration
/// errors.
fn matches(
    write: &mut Write<'_>,
    review: &Review<'_>,
    mr: &MatchResources,
    object: Option<&Value>,
) -> Result<Option<Arc<Kind>>, String> {
    if !write
        .selected(&mr.namespace_selector, &mr.object_selector, object)
        .map_err(|e| e.message)?
    {
        return Ok(None);
    }
    let excluded = applicable(&mr.exclude_resource_rules, review.name);
    if write.matched_rules(&excluded, mr.equivalent).is_some() {
        return Ok(None);
    }
    if mr.resource_rules.is_empty() {
        return Ok(Some(write.requested_kind()));
    }
    Ok(write.matched_rules(&applicable(&mr.resource_rules, review.name), mr.equivalent))
}

/// The binding's parameter objects (upstream's `collectParams`); `None` stands for "no
/// parameters" (no `paramKind` or no `paramRef`).
fn params(
    server: &ApiServer,
    policy: &Policy,
    binding: &Binding,
    write: &Write<'_>,
) -> Result<Vec<Option<Value>>, String> {
    let (Some(pk), Some(pr)) = (&policy.param_kind, &binding.param_ref) else {
        return Ok(vec![None]);
    };
    let api_version = if pk.group.is_empty() {
        pk.version.clone()
    } else {
        format!("{}/{}", pk.group, pk.version)
    };
    let kinds = server.registry().kinds();
    let Some(def) = kinds
        .iter()
        .find(|k| k.group == pk.group && k.version == pk.version && k.kind == pk.kind)
    else {
        return Err(format!(
            "paramKind kind `&ParamKind{{APIVersion:{api_version},Kind:{},}}` not known",
            pk.kind
        ));
    };
    let namespace = if def.namespaced {
        if !pr.namespace.is_empty() {
            Some(pr.namespace.as_str())
        } else if !write.namespace.is_empty() {
            Some(write.namespace.as_str())
        } else {
            return Err(
                "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
                    .into(),
            );
        }
    } else if !pr.namespace.is_empty() {
        return Err(
            "paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into(),
        );
    } else {
        None
    };
    let found: Vec<Value> = match (&pr.name, &pr.selector) {
        (name, Some(_)) if !name.is_empty() => {
            return Err("paramRef.name and paramRef.selector are mutually exclusive".into());
        }
        (name, None) if !name.is_empty() => server
            .cache
            .get(def, namespace, name)
            .map(|e| e.value())
            .into_iter()
            .collect(),
        (_, Some(selector)) => {
            let selector = selector.as_ref().map_err(Clone::clone)?;
            server
                .cache
                .list(def, namespace)
                .0
                .iter()
                .map(|e| e.value())
                .filter(|o| selector.matches_map(&crate::webhook::matching::labels(o)))
                .collect()
        }
        _ => return Err("one of name or selector must be provided".into()),
    };
    if found.is_empty() && pr.deny_when_missing {
        return Err(
            "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
        );
    }
    Ok(found
        .into_iter()
        .map(|o| Some(crate::view::present(def, o)))
        .collect())
}

/// The CEL variables of one write that do not depend on the binding.
struct Inputs {
    /// `authorizer`, with `authorizer.requestResource`.
    authorizer: Cel,
    /// Asks the server's authorizer for `authorizer`'s checks.
    authorize: authorizer::Authorize,
    user: authz::UserInfo,
    object: Cel,
    old_object: Cel,
    request: Cel,
    namespace_object: Cel,
}

impl Inputs {
    fn new(
        server: &ApiServer,
        review: &Review<'_>,
        write: &Write<'_>,
        kind: &Kind,
        object: Option<&Value>,
    ) -> ApiResult<Self> {
        let present = |v: &Value| crate::view::present(kind, v.clone());
        let object = object.map(present);
        let old = review.old.map(present);
        let view = review.view;
        let user = review.user;
        let mut request = json!({
            "uid": crate::admission::new_uid(),
            "kind": {"group": kind.group, "version": kind.version, "kind": kind.kind},
            "resource": {"group": kind.group, "version": kind.version, "resource": kind.plural},
            "subResource": review.subresource.unwrap_or_default(),
            "requestKind": {"group": view.group, "version": view.version, "kind": view.kind},
            "requestResource": {"group": view.group, "version": view.version, "resource": view.plural},
            "requestSubResource": review.subresource.unwrap_or_default(),
            "name": review.name,
            "namespace": write.namespace,
            "operation": review.operation.as_str(),
            "userInfo": serde_json::to_value(user).unwrap_or_default(),
            "dryRun": review.dry_run,
        });
        // AdmissionRequest's optional strings are omitted when empty, so that `has()` is false.
        if let Some(fields) = request.as_object_mut() {
            fields.retain(|_, v| v.as_str() != Some(""));
        }
        // A Namespace is not in a namespace of its own here (upstream unsets it likewise).
        let namespace_object = if write.namespace.is_empty() || Write::is_namespace(review) {
            Cel::Null
        } else {
            let def = server
                .registry()
                .find("", "v1", "namespaces")
                .ok_or_else(|| ApiError::internal("no namespaces kind"))?;
            match server.cache.get(&def, None, &write.namespace) {
                Some(e) => {
                    let mut ns = e.value();
                    if let Some(meta) = ns.get_mut("metadata").and_then(Value::as_object_mut) {
                        meta.remove("managedFields");
                    }
                    value_of(&ns)
                }
                None => return Err(ApiError::not_found(&def, &write.namespace)),
            }
        };
        let mut authorizer_value = authorizer::authorizer();
        if let Cel::Map(m) = &mut authorizer_value {
            let mut fields = m.map.as_ref().clone();
            fields.insert(
                cel::objects::Key::from("requestResource".to_string()),
                authorizer::request_resource(
                    &kind.group,
                    &kind.plural,
                    review.subresource.unwrap_or_default(),
                    &write.namespace,
                    review.name,
                ),
            );
            *m = fields.into();
        }
        let server = server.clone();
        Ok(Inputs {
            authorizer: authorizer_value,
            authorize: Arc::new(move |a| server.authorize(a)),
            user: review.user.clone(),
            object: object.as_ref().map_or(Cel::Null, value_of),
            old_object: old.as_ref().map_or(Cel::Null, value_of),
            request: value_of(&request),
            namespace_object,
        })
    }
}

/// What one policy's evaluation for one parameter object found.
#[derive(Default)]
struct Outcome {
    /// Failed validations (index in `validations`, message, reason), errors included unless
    /// `failurePolicy` is Ignore: these go through the binding's `validationActions`.
    failed: Vec<(usize, String, Option<String>)>,
    /// `auditAnnotations` errors under `failurePolicy: Fail`: these deny the write whatever the
    /// actions (upstream's `AuditAnnotationActionError`).
    errors: Vec<String>,
    /// `auditAnnotations` values: key and value.
    annotations: Vec<(String, String)>,
}

/// A filter's cost budget (upstream's `remainingBudget` in `filter.ForInput`): what its
/// expressions may cost together.
struct Budget(u64);

impl Budget {
    /// Charges `cost`; `Err` once more has been spent than the budget held.
    fn spend(&mut self, cost: u64) -> Result<(), ()> {
        self.0 = self.0.checked_sub(cost).ok_or(())?;
        Ok(())
    }
}

/// Evaluates `policy` for one parameter object (upstream's `validator.Validate`), each
/// expression within cel-go's per-call cost limit and each group of them within its budget.
fn evaluate(policy: &Policy, inputs: &Inputs, param: Option<&Value>) -> Outcome {
    let params = &param.map_or(Cel::Null, value_of);
    let mut variables: Vec<(String, Cel)> = Vec::new();
    let bind = |variables: &Vec<(String, Cel)>| {
        let variables = map_of(variables.iter().cloned());
        move |c: &Compiled| {
            c.eval_metered(&[
                ("object", &inputs.object),
                ("oldObject", &inputs.old_object),
                ("request", &inputs.request),
                ("params", params),
                ("namespaceObject", &inputs.namespace_object),
                ("variables", &variables),
                ("authorizer", &inputs.authorizer),
            ])
        }
    };
    // Variables are evaluated in order, each seeing the ones before; one that fails is left
    // out, so that an expression using it fails (upstream evaluates them lazily). What they
    // cost is charged to the validations' budget (upstream charges a variable to the filter
    // whose expression first uses it).
    let mut composition_cost = 0u64;
    for (name, compiled) in &policy.variables {
        let evaluated = bind(&variables)(compiled);
        composition_cost = composition_cost.saturating_add(evaluated.cost);
        match evaluated.value {
            Ok(v) => variables.push((name.clone(), v)),
            Err(e) => {
                tracing::debug!(policy = %policy.name, variable = %name, error = %e, "variable failed")
            }
        }
    }
    let eval = bind(&variables);
    let mut outcome = Outcome::default();
    // An error that ends a group of expressions (running out of its budget) is one decision,
    // per failurePolicy, that replaces all others (upstream returns it alone).
    let fail = |message: &str| {
        let mut outcome = Outcome::default();
        if !policy.ignore_failures {
            outcome.failed.push((0, message.to_string(), None));
        }
        outcome
    };
    // matchConditions, all evaluated within their budget: any false skips the policy; errors
    // follow failurePolicy.
    let mut budget = Budget(cost::MATCH_CONDITIONS_BUDGET);
    let mut errors = Vec::new();
    let mut matched = true;
    for (_, condition) in &policy.match_conditions {
        let evaluated = eval(condition);
        if budget.spend(evaluated.cost).is_err() {
            return fail(cost::OUT_OF_BUDGET);
        }
        match evaluated.value {
            Ok(Cel::Bool(false)) => matched = false,
            Ok(_) => {}
            Err(e) => errors.push(e),
        }
    }
    if !matched {
        return outcome;
    }
    if !errors.is_empty() {
        if !policy.ignore_failures {
            let message = if errors.len() == 1 {
                errors.remove(0)
            } else {
                format!("[{}]", errors.join(", "))
            };
            outcome.failed.push((0, message, None));
        }
        return outcome;
    }
    let mut budget = Budget(cost::RUNTIME_BUDGET);
    if budget.spend(composition_cost).is_err() {
        return fail(cost::OUT_OF_BUDGET);
    }
    let mut results = Vec::with_capacity(policy.validations.len());
    for v in &policy.validations {
        let evaluated = eval(&v.expression);
        if budget.spend(evaluated.cost).is_err() {
            return fail(cost::OUT_OF_BUDGET);
        }
        results.push(evaluated.value);
    }
    // Every messageExpression is evaluated, within what the validations left of the budget;
    // running out of it fails every validation that did not fail itself.
    let mut messages = Vec::with_capacity(policy.validations.len());
    let mut messages_out_of_budget = false;
    for v in &policy.validations {
        let message = v.message_expression.as_ref().and_then(|m| {
            let evaluated = eval(m);
            if budget.spend(evaluated.cost).is_err() {
                messages_out_of_budget = true;
            }
            evaluated.value.ok()
        });
        messages.push(message);
        if messages_out_of_budget {
            break;
        }
    }
    for (i, (v, result)) in policy.validations.iter().zip(results).enumerate() {
        match result {
            Err(e) if !policy.ignore_failures => outcome.failed.push((i, e, None)),
            Err(_) => {}
            Ok(_) if messages_out_of_budget => {
                if !policy.ignore_failures {
                    let message = format!("failed messageExpression: {}", cost::OUT_OF_BUDGET);
                    outcome.failed.push((i, message, None));
                }
            }
            Ok(Cel::Bool(true)) => {}
            Ok(_) => {
                let from_expression = messages
                    .get_mut(i)
                    .and_then(Option::take)
                    .and_then(|m| match m {
                        Cel::String(s) => Some(s.trim().to_string()),
                        _ => None,
                    })
                    .filter(|m| m.len() <= MAX_MESSAGE_BYTES && !m.contains('\n'))
                    .filter(|m| !m.is_empty());
                let message = from_expression
                    .or_else(|| Some(v.message.trim().to_string()).filter(|m| !m.is_empty()))
                    .unwrap_or_else(|| format!("failed expression: {}", v.source.trim()));
                outcome.failed.push((i, message, v.reason.clone()));
            }
        }
    }
    // Audit annotations have a budget of their own.
    let mut budget = Budget(cost::RUNTIME_BUDGET);
    for a in &policy.audit_annotations {
        let evaluated = eval(&a.value_expression);
        if budget.spend(evaluated.cost).is_err() {
            return fail(cost::OUT_OF_BUDGET);
        }
        match evaluated.value {
            Ok(Cel::String(value)) => {
                let value = value.trim();
                if !value.is_empty() {
                    let mut value = value.to_string();
                    if value.len() > MAX_AUDIT_ANNOTATION_BYTES {
                        let mut end = MAX_AUDIT_ANNOTATION_BYTES;
                        while !value.is_char_boundary(end) {
                            end -= 1;
                        }
                        value.truncate(end);
                    }
                    outcome.annotations.push((a.key.clone(), value));
                }
            }
            Ok(Cel::Null) => {}
            Ok(other) if !policy.ignore_failures => outcome.errors.push(format!(
                "valueExpression '{}' resulted in unsupported return type: {}. Return type must be either string or null.",
                a.source,
                type_name(&other)
            )),
            Err(e) if !policy.ignore_failures => outcome.errors.push(e),
            Ok(_) | Err(_) => {}
        }
    }
    outcome
}

/// A value's CEL type name, as cel-go prints it.
fn type_name(v: &Cel) -> &'static str {
    match v {
        Cel::List(_) => "list",
        Cel::Map(_) => "map",
        Cel::Int(_) => "int",
        Cel::UInt(_) => "uint",
        Cel::Float(_) => "double",
        Cel::String(_) => "string",
        Cel::Bytes(_) => "bytes",
        Cel::Bool(_) => "bool",
        Cel::Duration(_) => "google.protobuf.Duration",
        Cel::Timestamp(_) => "google.protobuf.Timestamp",
        Cel::Null => "null_type",
        _ => "dyn",
    }
}
