//! The review kinds, created and answered but never stored: authentication.k8s.io's TokenReview
//! and SelfSubjectReview, authorization.k8s.io's SubjectAccessReview, LocalSubjectAccessReview,
//! SelfSubjectAccessReview and SelfSubjectRulesReview (upstream's `pkg/registry/authentication`
//! and `pkg/registry/authorization`, with `pkg/apis/authorization/validation`'s checks and
//! messages).

use crate::{
    context,
    error::{ApiError, ApiResult},
    registry::Kind,
    request::{self, Target},
    rest::json_response,
    service_account_token::api_audiences,
    state::ApiServer,
};
use api::field::{ErrorType, FieldError};
use authz::{Attributes, Decision, UserInfo};
use axum::{
    http::{HeaderMap, Method, StatusCode},
    response::Response,
};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

impl ApiServer {
    /// Serves a create of a review kind (any other verb on them is 405, as upstream registers
    /// only `create`).
    pub(crate) async fn review(
        &self,
        method: &Method,
        t: &Target,
        headers: &HeaderMap,
        body: &Bytes,
    ) -> ApiResult<Response> {
        if *method != Method::POST || t.name.is_some() || t.sub.is_some() {
            return Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            ));
        }
        // Reviews have no table form (upstream registers no TableConvertor for them): a client
        // that will take only a Table is refused, as conformance checks.
        if matches!(
            request::negotiate(headers, None)?,
            request::Output::Table(_)
        ) {
            return Err(ApiError::not_acceptable(
                "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf",
            ));
        }
        let obj = request::decode_object(body, request::body_type(headers)?.1)?;
        let out = match (t.def.group.as_str(), t.def.kind.as_str()) {
            ("authentication.k8s.io", "TokenReview") => self.token_review(obj).await?,
            ("authentication.k8s.io", "SelfSubjectReview") => self_subject_review()?,
            ("authorization.k8s.io", "SubjectAccessReview") => self.subject_access_review(obj)?,
            ("authorization.k8s.io", "LocalSubjectAccessReview") => {
                self.local_subject_access_review(t.namespace.as_deref(), obj)?
            }
            ("authorization.k8s.io", "SelfSubjectAccessReview") => {
                self.self_subject_access_review(obj)?
            }
            ("authorization.k8s.io", "SelfSubjectRulesReview") => {
                self.self_subject_rules_review(obj)?
            }
            _ => {
                return Err(ApiError::internal(format!(
                    "no handler for {}",
                    t.def.group_kind()
                )));
            }
        };
        Ok(json_response(StatusCode::CREATED, out.to_string()))
    }

    /// TokenReview: who a bearer token is, for the audiences asked (upstream's
    /// `tokenreview.REST.Create`).
    async fn token_review(&self, mut review: Value) -> ApiResult<Value> {
        let spec: TokenReviewSpec = spec_of(&review)?;
        if spec.token.is_empty() {
            return Err(ApiError::bad_request(
                "token is required for TokenReview in authentication",
            ));
        }
        let audiences = if spec.audiences.is_empty() {
            api_audiences()
        } else {
            spec.audiences
        };
        // Read what the token names as of now, not as of the cache's last event.
        self.sync_cache().await?;
        let mut status = Map::new();
        match self.authenticate_bearer(&spec.token, &audiences) {
            Some(Ok(found)) => {
                if !found.audiences.iter().any(|a| audiences.contains(a)) {
                    return Err(ApiError::internal("error validating audiences"));
                }
                status.insert("authenticated".into(), json!(true));
                status.insert("user".into(), json!(found.user));
                status.insert("audiences".into(), json!(found.audiences));
            }
            Some(Err(e)) => {
                status.insert("user".into(), json!({}));
                status.insert("error".into(), json!(e));
            }
            None => {
                status.insert("user".into(), json!({}));
                status.insert("error".into(), json!("invalid bearer token"));
            }
        }
        set_type(&mut review, "authentication.k8s.io/v1", "TokenReview");
        review["status"] = Value::Object(status);
        Ok(review)
    }

    /// SubjectAccessReview: whether the user in the spec may do what it describes.
    fn subject_access_review(&self, mut review: Value) -> ApiResult<Value> {
        let (spec, errors) = access_spec(&review, true, false)?;
        valid(errors)?;
        let decision = self.authorize(&spec.attributes(spec.user_info()));
        set_type(
            &mut review,
            "authorization.k8s.io/v1",
            "SubjectAccessReview",
        );
        review["status"] = access_status(&decision);
        Ok(review)
    }

    /// LocalSubjectAccessReview: a SubjectAccessReview confined to the namespace in the path.
    fn local_subject_access_review(
        &self,
        namespace: Option<&str>,
        mut review: Value,
    ) -> ApiResult<Value> {
        let Some(namespace) = namespace.filter(|n| !n.is_empty()) else {
            return Err(ApiError::bad_request(
                "namespace is required on this type: ",
            ));
        };
        // The create handler's `EnsureObjectNamespaceMatchesRequestNamespace`.
        match crate::object::namespace(&review) {
            Some(ns) if !ns.is_empty() && ns != namespace => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                if !review.get("metadata").is_some_and(Value::is_object) {
                    review["metadata"] = json!({});
                }
                review["metadata"]["namespace"] = json!(namespace);
            }
        }
        let (spec, mut errors) = access_spec(&review, true, true)?;
        if let Some(r) = spec
            .resource_attributes
            .as_ref()
            .filter(|r| r.namespace != namespace)
        {
            errors.push(FieldError::invalid(
                "spec.resourceAttributes.namespace",
                json!(r.namespace),
                "must match metadata.namespace",
            ));
        }
        if let Some(n) = &spec.non_resource_attributes {
            errors.push(invalid_repr(
                "spec.nonResourceAttributes",
                n.repr(),
                "disallowed on this kind of request",
            ));
        }
        valid(errors)?;
        let decision = self.authorize(&spec.attributes(spec.user_info()));
        set_type(
            &mut review,
            "authorization.k8s.io/v1",
            "LocalSubjectAccessReview",
        );
        review["status"] = access_status(&decision);
        Ok(review)
    }

    /// SelfSubjectAccessReview: whether the caller may do what the spec describes
    /// (`kubectl auth can-i`).
    fn self_subject_access_review(&self, mut review: Value) -> ApiResult<Value> {
        let (spec, errors) = access_spec(&review, false, false)?;
        valid(errors)?;
        let user = (*context::user()?).clone();
        let decision = self.authorize(&spec.attributes(user));
        set_type(
            &mut review,
            "authorization.k8s.io/v1",
            "SelfSubjectAccessReview",
        );
        review["status"] = access_status(&decision);
        Ok(review)
    }

    /// SelfSubjectRulesReview: what the caller may do in a namespace (`kubectl auth can-i
    /// --list`).
    fn self_subject_rules_review(&self, review: Value) -> ApiResult<Value> {
        let spec: RulesSpec = spec_of(&review)?;
        if spec.namespace.is_empty() {
            return Err(ApiError::bad_request("no namespace on request"));
        }
        let rules = self.rules_for(&*context::user()?, &spec.namespace);
        let mut status = json!({
            "resourceRules": rules.resource_rules,
            "nonResourceRules": rules.non_resource_rules,
            "incomplete": rules.incomplete,
        });
        if !rules.evaluation_error.is_empty() {
            status["evaluationError"] = json!(rules.evaluation_error);
        }
        // Upstream answers with a new object that carries only the status.
        Ok(json!({
            "kind": "SelfSubjectRulesReview",
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": null},
            "spec": {},
            "status": status,
        }))
    }
}

/// SelfSubjectReview: who the caller is (`kubectl auth whoami`).
fn self_subject_review() -> ApiResult<Value> {
    let user = context::user()?;
    let now = clock::now().as_second();
    let created = jiff::Timestamp::from_second(now)
        .map(|t| json!(t.to_string()))
        .unwrap_or(Value::Null);
    Ok(json!({
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": created},
        "status": {"userInfo": *user},
    }))
}

/// The kind upstream's review errors name: the decoded internal object carries no kind, so the
/// message reads `.authorization.k8s.io "" is invalid: ...`.
fn internal_kind() -> Kind {
    Kind::new("authorization.k8s.io", "v1", "", "", false)
}

fn set_type(obj: &mut Value, api_version: &str, kind: &str) {
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
}

/// The status of an access review (`allowed` always written, the rest when set).
fn access_status(decision: &Decision) -> Value {
    let mut status = json!({"allowed": decision.allowed()});
    if matches!(decision, Decision::Deny(_)) {
        status["denied"] = json!(true);
    }
    if !decision.reason().is_empty() {
        status["reason"] = json!(decision.reason());
    }
    status
}

/// The review's `spec`, decoded as Go would (a null is an absent field); a wrong type is a 400.
fn spec_of<T: for<'de> Deserialize<'de> + Default>(review: &Value) -> ApiResult<T> {
    let mut spec = review.get("spec").cloned().unwrap_or(Value::Null);
    drop_nulls(&mut spec);
    if spec.is_null() {
        return Ok(T::default());
    }
    serde_json::from_value(spec).map_err(|e| ApiError::bad_request(format!("spec: {e}")))
}

fn drop_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(drop_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// TokenReview's spec.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct TokenReviewSpec {
    token: String,
    audiences: Vec<String>,
}

/// SelfSubjectRulesReview's spec.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RulesSpec {
    namespace: String,
}

/// The spec of the access reviews (SubjectAccessReviewSpec; the self review has only the
/// attributes).
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct AccessSpec {
    resource_attributes: Option<ResourceAttributes>,
    non_resource_attributes: Option<NonResourceAttributes>,
    user: String,
    groups: Vec<String>,
    extra: BTreeMap<String, Vec<String>>,
    uid: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ResourceAttributes {
    namespace: String,
    verb: String,
    group: String,
    version: String,
    resource: String,
    subresource: String,
    name: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct NonResourceAttributes {
    path: String,
    verb: String,
}

impl NonResourceAttributes {
    /// Go's `%#v` of the internal type, as upstream's message shows it.
    fn repr(&self) -> String {
        format!(
            "authorization.NonResourceAttributes{{Path:{}, Verb:{}}}",
            json!(self.path),
            json!(self.verb)
        )
    }
}

impl AccessSpec {
    fn user_info(&self) -> UserInfo {
        UserInfo {
            username: self.user.clone(),
            uid: self.uid.clone(),
            groups: self.groups.clone(),
            extra: self.extra.clone(),
        }
    }

    /// Upstream's `ResourceAttributesFrom`/`NonResourceAttributesFrom` (an empty version means
    /// every version).
    fn attributes(&self, user: UserInfo) -> Attributes {
        match (&self.resource_attributes, &self.non_resource_attributes) {
            (Some(r), _) => Attributes {
                user,
                verb: r.verb.clone(),
                resource_request: true,
                api_group: r.group.clone(),
                api_version: if r.version.is_empty() {
                    "*".into()
                } else {
                    r.version.clone()
                },
                resource: r.resource.clone(),
                subresource: r.subresource.clone(),
                namespace: r.namespace.clone(),
                name: r.name.clone(),
                path: String::new(),
            },
            (None, n) => {
                let n = n.as_ref();
                Attributes {
                    user,
                    verb: n.map(|n| n.verb.clone()).unwrap_or_default(),
                    resource_request: false,
                    path: n.map(|n| n.path.clone()).unwrap_or_default(),
                    ..Default::default()
                }
            }
        }
    }
}

/// `ValidateSubjectAccessReviewSpec` (`with_subject`) or `ValidateSelfSubjectAccessReviewSpec`.
fn validate_spec(spec: &AccessSpec, with_subject: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    match (&spec.resource_attributes, &spec.non_resource_attributes) {
        (Some(_), Some(n)) => errors.push(invalid_repr(
            "spec.nonResourceAttributes",
            n.repr(),
            "cannot be specified in combination with resourceAttributes",
        )),
        (None, None) => errors.push(FieldError::invalid(
            "spec.resourceAttributes",
            json!("null"),
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
        _ => {}
    }
    if with_subject && spec.user.is_empty() && spec.groups.is_empty() {
        errors.push(FieldError::invalid(
            "spec.user",
            json!(""),
            "at least one of user or group must be specified",
        ));
    }
    errors
}

/// An `Invalid` error whose value is shown as Go prints it, not JSON-quoted.
fn invalid_repr(field: &str, repr: String, detail: &str) -> FieldError {
    FieldError {
        kind: ErrorType::Invalid,
        field: field.into(),
        value: None,
        detail: format!("{repr}: {detail}"),
    }
}

/// Whether the review's metadata is empty (managed fields aside; for the local review, the
/// namespace too), as upstream requires.
fn metadata_empty(review: &Value, namespace_allowed: bool) -> bool {
    let mut meta = review.get("metadata").cloned().unwrap_or(Value::Null);
    drop_nulls(&mut meta);
    match meta {
        Value::Null => true,
        Value::Object(mut m) => {
            m.remove("managedFields");
            if namespace_allowed {
                m.remove("namespace");
            }
            m.values().all(|v| {
                v.as_str() == Some("")
                    || v.as_object().is_some_and(Map::is_empty)
                    || v.as_array().is_some_and(Vec::is_empty)
                    || v.as_i64() == Some(0)
            })
        }
        _ => false,
    }
}

/// Go's `%#v` of the review's ObjectMeta, as upstream's "must be empty" message prints it.
/// (The names, uid, version, labels and annotations are rendered; the rarer fields print as
/// their zero values.)
fn object_meta_repr(review: &Value) -> String {
    let meta = review.get("metadata").cloned().unwrap_or(Value::Null);
    let s = |k: &str| json!(meta.get(k).and_then(Value::as_str).unwrap_or("")).to_string();
    let map = |k: &str| match meta.get(k).and_then(Value::as_object) {
        Some(m) if !m.is_empty() => {
            let mut entries: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{}:{}", json!(k), json!(v.as_str().unwrap_or(""))))
                .collect();
            entries.sort();
            format!("map[string]string{{{}}}", entries.join(", "))
        }
        _ => "map[string]string(nil)".to_string(),
    };
    format!(
        "v1.ObjectMeta{{Name:{}, GenerateName:{}, Namespace:{}, SelfLink:\"\", UID:{}, \
         ResourceVersion:{}, Generation:0, CreationTimestamp:time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC), \
         DeletionTimestamp:<nil>, DeletionGracePeriodSeconds:(*int64)(nil), Labels:{}, \
         Annotations:{}, OwnerReferences:[]v1.OwnerReference(nil), Finalizers:[]string(nil), \
         ManagedFields:[]v1.ManagedFieldsEntry(nil)}}",
        s("name"),
        s("generateName"),
        s("namespace"),
        s("uid"),
        s("resourceVersion"),
        map("labels"),
        map("annotations"),
    )
}

/// An access review's spec and what is wrong with it and its metadata, as upstream's
/// validation finds them: `with_user` for the reviews that name a user in their spec,
/// `namespaced` for LocalSubjectAccessReview (whose metadata may hold its namespace).
fn access_spec(
    review: &Value,
    with_user: bool,
    namespaced: bool,
) -> ApiResult<(AccessSpec, Vec<FieldError>)> {
    let spec: AccessSpec = spec_of(review)?;
    let mut errors = validate_spec(&spec, with_user);
    if !metadata_empty(review, namespaced) {
        let why = if namespaced {
            "must be empty except for namespace"
        } else {
            "must be empty"
        };
        errors.push(invalid_repr("metadata", object_meta_repr(review), why));
    }
    Ok((spec, errors))
}

/// Upstream's Invalid status for a review with `errors`.
fn valid(errors: Vec<FieldError>) -> ApiResult<()> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&internal_kind(), "", &errors))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a test fails by panicking")]
mod tests {
    use super::*;

    fn spec(v: Value) -> AccessSpec {
        spec_of(&json!({ "spec": v })).unwrap()
    }

    #[test]
    fn access_specs_are_validated_as_upstream() {
        let messages = |s: &AccessSpec, subject| -> Vec<String> {
            validate_spec(s, subject)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(
            messages(&spec(json!({})), true),
            [
                r#"spec.resourceAttributes: Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes must be specified"#,
                r#"spec.user: Invalid value: "": at least one of user or group must be specified"#,
            ]
        );
        let both = spec(json!({
            "resourceAttributes": {"verb": "get"},
            "nonResourceAttributes": {"path": "/healthz", "verb": "get"},
            "groups": ["g"],
        }));
        assert_eq!(
            messages(&both, true),
            [
                r#"spec.nonResourceAttributes: Invalid value: authorization.NonResourceAttributes{Path:"/healthz", Verb:"get"}: cannot be specified in combination with resourceAttributes"#
            ]
        );
        let self_review = spec(json!({"resourceAttributes": {"verb": "get"}}));
        assert!(messages(&self_review, false).is_empty());
    }

    #[test]
    fn attributes_come_from_the_spec() {
        let s = spec(json!({
            "resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "ns"},
            "user": "alice", "groups": null,
        }));
        let a = s.attributes(s.user_info());
        assert_eq!(a.user.username, "alice");
        assert!(a.resource_request);
        assert_eq!(
            (a.verb.as_str(), a.resource.as_str(), a.namespace.as_str()),
            ("list", "pods", "ns")
        );
        assert_eq!(a.api_version, "*");
        let n = spec(json!({"nonResourceAttributes": {"path": "/healthz", "verb": "get"}}));
        let a = n.attributes(UserInfo::anonymous());
        assert!(!a.resource_request);
        assert_eq!((a.path.as_str(), a.verb.as_str()), ("/healthz", "get"));
    }

    #[test]
    fn metadata_must_be_empty() {
        assert!(metadata_empty(
            &json!({"metadata": {"creationTimestamp": null}}),
            false
        ));
        assert!(metadata_empty(&json!({}), false));
        assert!(!metadata_empty(&json!({"metadata": {"name": "x"}}), false));
        assert!(metadata_empty(
            &json!({"metadata": {"namespace": "x"}}),
            true
        ));
        assert!(
            object_meta_repr(&json!({"metadata": {"name": "x"}}))
                .starts_with(r#"v1.ObjectMeta{Name:"x", GenerateName:"", "#)
        );
    }
}
