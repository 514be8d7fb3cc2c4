//! API errors and their wire form, a `meta.k8s.io/v1` `Status`.
//!
//! Every failure a client can see is one of these, with upstream's `reason`, HTTP code and message
//! shape, so kubectl prints the same sentences it prints against a real cluster.

use crate::registry::kind::Kind;
use api::field::FieldError;
use axum::{
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

/// A failed API request.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Upstream's `StatusReason`, e.g. `NotFound`.
    pub reason: &'static str,
    /// The human message.
    pub message: String,
    /// `details` of the Status, when there is something to say.
    pub details: Option<Value>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// 404 for a named object.
    pub fn not_found(def: &Kind, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", def.group_resource()),
        )
        .with_details(json!({"name": name, "group": def.group, "kind": def.plural}))
    }

    /// 404 for a path that names no resource, worded as upstream's (the path is not repeated:
    /// kubectl prints the message as is).
    pub fn no_route(path: &str) -> Self {
        tracing::debug!(path, "no route");
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    /// 409 on create of an existing name.
    pub fn already_exists(def: &Kind, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", def.group_resource()),
        )
        .with_details(json!({"name": name, "group": def.group, "kind": def.plural}))
    }

    /// 409 on a stale `resourceVersion` or failed precondition.
    pub fn conflict(def: &Kind, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                def.group_resource()
            ),
        )
        .with_details(json!({"name": name, "group": def.group, "kind": def.plural}))
    }

    /// The conflict upstream reports for a stale `resourceVersion`.
    pub fn stale(def: &Kind, name: &str) -> Self {
        Self::conflict(
            def,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 with field causes.
    pub fn invalid(def: &Kind, name: &str, errors: &[FieldError]) -> Self {
        let list: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        let joined = if list.len() == 1 {
            list[0].clone()
        } else {
            format!("[{}]", list.join(", "))
        };
        let causes: Vec<Value> = errors
            .iter()
            .map(|e| json!({"reason": e.kind.reason(), "message": e.message(), "field": e.field}))
            .collect();
        Self::new(
            422,
            "Invalid",
            format!("{} \"{name}\" is invalid: {joined}", def.group_kind()),
        )
        .with_details(json!({"name": name, "group": def.group, "kind": def.kind, "causes": causes}))
    }

    /// 400 for a request that cannot be understood.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 410 for a watch or list from a compacted revision.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 401.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 with a reason.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// 403 for `resource` in `group` (and `name`, when the request names an object), as
    /// upstream's `NewForbidden` words it: `pods "x" is forbidden: WHY`.
    pub fn forbidden_for(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let qualified = if group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{group}")
        };
        let message = match (qualified.is_empty(), name.is_empty()) {
            (true, _) => format!("forbidden: {why}"),
            (false, true) => format!("{qualified} is forbidden: {why}"),
            (false, false) => format!("{qualified} \"{name}\" is forbidden: {why}"),
        };
        // Upstream's StatusDetails omits empty fields.
        let details: serde_json::Map<String, Value> =
            [("name", name), ("group", group), ("kind", resource)]
                .into_iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect();
        Self::new(403, "Forbidden", message).with_details(Value::Object(details))
    }

    /// 403 from an admission plugin about one object (upstream's `NewForbidden`):
    /// `pods "p" is forbidden: <why>`.
    pub fn forbidden_by_admission(def: &Kind, name: &str, why: &str) -> Self {
        Self::forbidden_for(&def.group, &def.plural, name, why)
    }

    /// 405.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    /// 406.
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    /// 413.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// 413 with upstream's `NewRequestEntityTooLargeError` wording.
    pub fn entity_too_large(why: impl std::fmt::Display) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: {why}"),
        )
    }

    /// 415.
    pub fn unsupported_media_type(what: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf; got {what}"
            ),
        )
    }

    /// 429 from the max-in-flight filter: the server is busy, retry after `seconds`.
    pub fn too_many_requests(seconds: u32) -> Self {
        Self::new(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
        )
        .with_details(json!({"retryAfterSeconds": seconds}))
    }

    /// 500; the server's fault, not the client's.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", message.into()),
        )
    }

    /// 503: the server cannot serve this now (its store is gone, or etcd has no quorum; reads
    /// from the watch cache still work).
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    /// 504 for a wait that ran out (e.g. the cache not catching up).
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(504, "Timeout", message)
    }

    /// A `Status` another server answered with (an admission webhook's denial), passed on with
    /// its code, reason and details. A reason upstream does not define is dropped.
    pub fn from_status(
        code: u16,
        reason: &str,
        message: impl Into<String>,
        details: Option<Value>,
    ) -> Self {
        const REASONS: &[&str] = &[
            "Unauthorized",
            "Forbidden",
            "NotFound",
            "AlreadyExists",
            "Conflict",
            "Gone",
            "Invalid",
            "ServerTimeout",
            "StoreReadError",
            "Timeout",
            "TooManyRequests",
            "BadRequest",
            "MethodNotAllowed",
            "NotAcceptable",
            "RequestEntityTooLarge",
            "UnsupportedMediaType",
            "InternalError",
            "Expired",
            "ServiceUnavailable",
        ];
        let reason = REASONS
            .iter()
            .find(|r| **r == reason)
            .copied()
            .unwrap_or("");
        Self {
            code,
            reason,
            message: message.into(),
            details,
        }
    }

    /// The `Status` object.
    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            status["details"] = d.clone();
        }
        // A plain error from a REST storage has no reason (upstream's StatusReasonUnknown,
        // omitted when empty).
        if self.reason.is_empty()
            && let Some(m) = status.as_object_mut()
        {
            m.remove("reason");
        }
        status
    }
}

impl From<store::StoreError> for ApiError {
    fn from(e: store::StoreError) -> Self {
        match e {
            store::StoreError::Compacted { requested, oldest } => {
                ApiError::expired(format!("too old resource version: {requested} ({oldest})"))
            }
            store::StoreError::Unavailable(why) => ApiError::unavailable(format!(
                "the storage backend is unavailable ({why}); retry once it is reachable again"
            )),
            store::StoreError::Closed => ApiError::unavailable(
                "the store is not taking requests (the server is shutting down, or its store stopped)",
            ),
            other => ApiError::internal(other.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = (code, self.status().to_string()).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        resp
    }
}

/// The result of a handler.
pub type ApiResult<T> = Result<T, ApiError>;
