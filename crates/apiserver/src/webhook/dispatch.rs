//! The mutating and validating dispatchers (upstream's `mutating/dispatcher.go`,
//! `validating/dispatcher.go` and `generic/webhook.go`): which webhooks a write calls, calling
//! them, and what their answers and failures do to the write.

use std::{collections::HashSet, sync::Arc};

use api::selector::LabelSelector;
use serde_json::{Map, Value};

use super::{
    client,
    config::{self, Flavor, Hook, Rule},
    matching::{self, Attributes, Resource},
    review::{self, Answer, AnswerError, Subject},
};
use crate::{
    admission,
    error::{ApiError, ApiResult},
    plugins::{Operation, Review},
    registry::Kind,
    state::ApiServer,
};

/// How one webhook call went wrong.
enum Failure {
    /// The webhook could not be called or answered unusably (upstream's `ErrCallingWebhook`):
    /// the write fails unless `failurePolicy` is Ignore. The text follows
    /// `failed calling webhook "NAME": `.
    Call(String),
    /// The webhook refused the write, or may not be called for it: the write fails.
    Refused(ApiError),
}

/// Upstream never sends the admission configuration objects to webhooks, so that a broken webhook
/// cannot lock its own configuration (`rules.IsExemptAdmissionConfigurationResource`).
fn exempt(review: &Review<'_>) -> bool {
    review.kind.group == "admissionregistration.k8s.io"
        && matches!(
            review.kind.kind.as_str(),
            "ValidatingWebhookConfiguration"
                | "MutatingWebhookConfiguration"
                | "ValidatingAdmissionPolicy"
                | "ValidatingAdmissionPolicyBinding"
        )
}

fn resource_of(k: &Kind) -> Resource {
    Resource {
        group: k.group.clone(),
        version: k.version.clone(),
        resource: k.plural.clone(),
    }
}

/// One write as the dispatchers see it: its attributes, the resources that serve the same objects
/// (the written one first), and the namespace's labels once looked up.
pub(crate) struct Write<'a> {
    server: &'a ApiServer,
    review: &'a Review<'a>,
    /// The written kind first, then the other kinds over the same stored objects (upstream's
    /// equivalent resources: other versions or groups of the resource).
    kinds: Vec<Arc<Kind>>,
    resources: Vec<Resource>,
    /// The namespace the write is in (a Namespace's own name for a Namespace).
    pub(crate) namespace: String,
    namespace_labels: Option<Map<String, Value>>,
}

impl<'a> Write<'a> {
    pub(crate) fn new(server: &'a ApiServer, review: &'a Review<'a>) -> Self {
        let view = review.view;
        let sub = review.subresource;
        let mut kinds = vec![Arc::new(view.clone())];
        kinds.extend(
            server
                .registry()
                .kinds()
                .iter()
                .filter(|k| {
                    k.storage_resource() == view.storage_resource()
                        && (k.group != view.group || k.version != view.version)
                        && sub.is_none_or(|s| k.subresources.iter().any(|r| r.name() == s))
                })
                .cloned(),
        );
        let resources = kinds.iter().map(|k| resource_of(k)).collect();
        // A Namespace's name, from its URL, is its namespace, as in upstream's request
        // attributes (a create's URL names none).
        let namespace = match review.namespace {
            Some(ns) => ns.to_string(),
            None if Self::is_namespace(review) && review.operation != Operation::Create => {
                review.name.to_string()
            }
            None => String::new(),
        };
        Write {
            server,
            review,
            kinds,
            resources,
            namespace,
            namespace_labels: None,
        }
    }

    pub(crate) fn is_namespace(review: &Review<'_>) -> bool {
        review.kind.group.is_empty() && review.kind.plural == "namespaces"
    }

    pub(crate) fn attributes(&self) -> Attributes<'_> {
        Attributes {
            operation: self.review.operation.as_str(),
            subresource: self.review.subresource.unwrap_or_default(),
            namespace: &self.namespace,
        }
    }

    /// The labels the namespace selector is matched against: a Namespace's own when it is
    /// created or updated, otherwise the stored namespace's (upstream's `GetNamespaceLabels`).
    fn namespace_labels(&mut self, object: Option<&Value>) -> ApiResult<&Map<String, Value>> {
        let own = Self::is_namespace(self.review)
            && self.review.subresource.is_none()
            && self.review.operation != Operation::Delete;
        if own {
            self.namespace_labels = Some(object.map(matching::labels).unwrap_or_default());
        }
        if self.namespace_labels.is_none() {
            let def = self
                .server
                .registry()
                .find("", "v1", "namespaces")
                .ok_or_else(|| ApiError::internal("no namespaces kind"))?;
            let ns = self
                .server
                .cache
                .get(&def, None, &self.namespace)
                .ok_or_else(|| ApiError::not_found(&def, &self.namespace))?
                .value();
            self.namespace_labels = Some(matching::labels(&ns));
        }
        Ok(self.namespace_labels.get_or_insert_default())
    }

    /// The kind `hook` is called with, if it is called for this write (upstream's
    /// `ShouldCallHook`; `matchConditions` are not evaluated).
    fn should_call(&mut self, hook: &Hook, object: Option<&Value>) -> ApiResult<Option<Arc<Kind>>> {
        self.matched_kind(
            &hook.rules,
            hook.equivalent,
            &hook.namespace_selector,
            &hook.object_selector,
            object,
        )
    }

    /// The kind (the written one or an equivalent one) that `rules` match for this write, if
    /// the namespace and object selectors select it too. Shared with ValidatingAdmissionPolicy's
    /// `matchConstraints`/`matchResources`, which upstream matches the same way.
    pub(crate) fn matched_kind(
        &mut self,
        rules: &[Rule],
        equivalent: bool,
        namespace_selector: &Result<LabelSelector, String>,
        object_selector: &Result<LabelSelector, String>,
        object: Option<&Value>,
    ) -> ApiResult<Option<Arc<Kind>>> {
        let Some(kind) = self.matched_rules(rules, equivalent) else {
            return Ok(None);
        };
        if !self.selected(namespace_selector, object_selector, object)? {
            return Ok(None);
        }
        Ok(Some(kind))
    }

    /// The kind (the written one or, if `equivalent`, an equivalent one) that `rules` match.
    pub(crate) fn matched_rules(&self, rules: &[Rule], equivalent: bool) -> Option<Arc<Kind>> {
        matching::matched_resource(rules, equivalent, &self.attributes(), &self.resources)
            .map(|at| self.kinds[at].clone())
    }

    /// The kind the client wrote.
    pub(crate) fn requested_kind(&self) -> Arc<Kind> {
        self.kinds[0].clone()
    }

    /// Whether the namespace and object selectors select this write.
    pub(crate) fn selected(
        &mut self,
        namespace_selector: &Result<LabelSelector, String>,
        object_selector: &Result<LabelSelector, String>,
        object: Option<&Value>,
    ) -> ApiResult<bool> {
        let ns_selector = namespace_selector
            .as_ref()
            .map_err(|e| ApiError::internal(e.clone()))?;
        let applies = !self.namespace.is_empty() || Self::is_namespace(self.review);
        if applies
            && !ns_selector.is_empty()
            && !ns_selector.matches_map(self.namespace_labels(object)?)
        {
            return Ok(false);
        }
        let object_selector = object_selector
            .as_ref()
            .map_err(|e| ApiError::internal(e.clone()))?;
        Ok(matching::object_selected(
            object_selector,
            object,
            self.review.old,
        ))
    }

    /// Calls `hook` about `object` presented as `kind`, and checks its answer.
    async fn call(
        &self,
        hook: &Hook,
        kind: &Kind,
        object: Option<&Value>,
        flavor: Flavor,
    ) -> Result<Answer, Failure> {
        let review = self.review;
        if review.dry_run {
            match hook.side_effects.as_deref() {
                None => return Err(Failure::Call("Webhook SideEffects is nil".into())),
                Some("None" | "NoneOnDryRun") => {}
                Some(_) => {
                    return Err(Failure::Refused(ApiError::bad_request(format!(
                        "admission webhook {:?} does not support dry run",
                        hook.name
                    ))));
                }
            }
        }
        let uid = admission::new_uid();
        let present = |v: &Value| crate::view::present(kind, v.clone());
        let request = review::request(
            &uid,
            review,
            Subject {
                kind,
                namespace: &self.namespace,
                object: object.map(present),
                old: review.old.map(present),
            },
        );
        let body = serde_json::to_vec(&request)
            .map_err(|e| Failure::Call(format!("could not create admission objects: {e}")))?;
        let answer = client::post(self.server, hook, body)
            .await
            .map_err(|e| Failure::Call(format!("failed to call webhook: {e}")))?;
        let answer =
            review::verify(&uid, flavor == Flavor::Mutating, &answer).map_err(|e| match e {
                AnswerError::Undecodable(why) => {
                    Failure::Call(format!("failed to call webhook: {why}"))
                }
                AnswerError::Invalid(why) => {
                    Failure::Call(format!("received invalid webhook response: {why}"))
                }
            })?;
        if !answer.allowed {
            return Err(Failure::Refused(review::denial(
                &hook.name,
                answer.status.as_ref(),
            )));
        }
        Ok(answer)
    }
}

/// What a failed call does to the write: nothing under `failurePolicy: Ignore` (upstream logs and
/// fails open), otherwise the write fails with upstream's 500 or the webhook's refusal.
fn settle(hook: &Hook, failure: Failure) -> ApiResult<()> {
    match failure {
        Failure::Call(why) if hook.ignore_failures => {
            tracing::warn!(webhook = %hook.name, error = %why, "failed calling webhook, failing open");
            Ok(())
        }
        Failure::Call(why) => Err(ApiError::internal(format!(
            "failed calling webhook {:?}: {why}",
            hook.name
        ))),
        Failure::Refused(e) => Err(e),
    }
}

/// Applies a mutating webhook's patch to the stored-form `obj`, through the kind the webhook saw.
/// Returns whether the object changed.
fn apply_patch(
    hook: &Hook,
    review: &Review<'_>,
    kind: &Kind,
    answer: &Answer,
    obj: &mut Value,
) -> Result<bool, Failure> {
    if answer.patch.is_empty() {
        return Ok(false);
    }
    let patch: json_patch::Patch = serde_json::from_slice(&answer.patch)
        .map_err(|e| Failure::Refused(ApiError::internal(e.to_string())))?;
    if patch.0.is_empty() {
        return Ok(false);
    }
    if review.operation == Operation::Delete {
        return Err(Failure::Refused(ApiError::internal(format!(
            "admission webhook {:?} attempted to modify the object, which is not supported for this operation",
            hook.name
        ))));
    }
    if answer.patch_type != "JSONPatch" {
        return Err(Failure::Call(format!(
            "unsupported patch type {:?}",
            answer.patch_type
        )));
    }
    // Compared in the form the webhook saw, as upstream compares the versioned objects.
    let seen = crate::view::present(kind, obj.clone());
    let mut patched = seen.clone();
    json_patch::patch(&mut patched, &patch)
        .map_err(|e| Failure::Refused(ApiError::internal(e.to_string())))?;
    if patched == seen {
        return Ok(false);
    }
    *obj = crate::view::intake(kind, review.kind, patched);
    if review.subresource.is_none_or(|s| s == "status") {
        // The patched object must still be what it says it is and decode as the kind's type:
        // upstream decodes it into its versioned type here, and a failure is its internal error.
        crate::admission::check_type(review.kind, obj)
            .and_then(|()| crate::admission::typecheck(review.kind, obj))
            .map_err(|e| Failure::Refused(ApiError::internal(e.message)))?;
    }
    Ok(true)
}

/// The object the webhooks see: none for a delete (its `oldObject` is the stored one).
fn object_of<'v>(review: &Review<'_>, obj: &'v Value) -> Option<&'v Value> {
    (review.operation != Operation::Delete).then_some(obj)
}

/// Calls the matching mutating webhooks in order and applies their patches; once more for the
/// `reinvocationPolicy: IfNeeded` ones called before a later webhook changed the object.
pub(super) async fn mutate(
    server: &ApiServer,
    review: &Review<'_>,
    obj: &mut Value,
) -> ApiResult<Vec<String>> {
    if exempt(review) {
        return Ok(Vec::new());
    }
    let hooks = config::hooks(server, Flavor::Mutating);
    if hooks.is_empty() {
        return Ok(Vec::new());
    }
    let mut write = Write::new(server, review);
    let mut warnings = Vec::new();
    // Upstream's `webhookReinvokeContext`: the IfNeeded webhooks called since the last change,
    // and those a later change requires calling again.
    let mut previously_invoked: HashSet<&str> = HashSet::new();
    let mut reinvoke: HashSet<&str> = HashSet::new();
    let mut changed_any = false;
    for round in 0..2 {
        if round == 1 && !changed_any {
            break;
        }
        for hook in &hooks {
            let Some(kind) = write.should_call(hook, object_of(review, obj))? else {
                continue;
            };
            if round == 1 && !reinvoke.contains(hook.uid.as_str()) {
                continue;
            }
            let outcome = match write
                .call(hook, &kind, object_of(review, obj), Flavor::Mutating)
                .await
            {
                Ok(answer) => {
                    warnings.extend(answer.warnings.iter().cloned());
                    apply_patch(hook, review, &kind, &answer, obj)
                }
                Err(failure) => Err(failure),
            };
            let changed = match outcome {
                Ok(changed) => changed,
                Err(failure) => {
                    settle(hook, failure)?;
                    false
                }
            };
            if changed {
                reinvoke.extend(previously_invoked.drain());
                changed_any = true;
                review.mark_mutated();
            }
            if hook.reinvoke_if_needed {
                previously_invoked.insert(hook.uid.as_str());
            }
        }
    }
    // What the webhooks changed is defaulted and validated again by the chain
    // (`admission::after_mutation`), once every mutating plugin has run.
    Ok(warnings)
}

/// Calls every matching validating webhook, concurrently as upstream; any refusal refuses the
/// write (the first in webhook order when several do).
pub(super) async fn validate(
    server: &ApiServer,
    review: &Review<'_>,
    obj: &Value,
) -> ApiResult<Vec<String>> {
    if exempt(review) {
        return Ok(Vec::new());
    }
    let hooks = config::hooks(server, Flavor::Validating);
    if hooks.is_empty() {
        return Ok(Vec::new());
    }
    let mut write = Write::new(server, review);
    let object = object_of(review, obj);
    let mut called = Vec::new();
    for hook in &hooks {
        if let Some(kind) = write.should_call(hook, object)? {
            called.push((hook, kind));
        }
    }
    let write = &write;
    let answers = futures::future::join_all(
        called
            .iter()
            .map(|(hook, kind)| write.call(hook, kind, object, Flavor::Validating)),
    )
    .await;
    let mut warnings = Vec::new();
    let mut refusal = None;
    for ((hook, _), answer) in called.iter().zip(answers) {
        match answer {
            Ok(answer) => warnings.extend(answer.warnings),
            Err(failure) => {
                if let Err(e) = settle(hook, failure) {
                    refusal.get_or_insert(e);
                }
            }
        }
    }
    match refusal {
        Some(e) => Err(e),
        None => Ok(warnings),
    }
}
