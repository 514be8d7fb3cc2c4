//! The AdmissionReview exchanged with a webhook, as upstream's `request/admissionreview.go`
//! builds the request and verifies the response, and the refusal a denial becomes
//! (`errors/statuserror.go` `ToStatusErr`).

use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{
    error::ApiError,
    plugins::{Operation, Review},
    registry::Kind,
};

const ADMISSION_V1: &str = "admission.k8s.io/v1";
const ADMISSION_V1BETA1: &str = "admission.k8s.io/v1beta1";

/// What a webhook is called about: the kind and resource its rule matched (the written one, or
/// an equivalent under `matchPolicy: Equivalent`), and the objects in that kind's form.
pub(super) struct Subject<'a> {
    pub kind: &'a Kind,
    /// The request's namespace (a Namespace's own name when written through its URL).
    pub namespace: &'a str,
    pub object: Option<Value>,
    pub old: Option<Value>,
}

fn gvk(k: &Kind) -> Value {
    json!({"group": k.group, "version": k.version, "kind": k.kind})
}

fn gvr(k: &Kind) -> Value {
    json!({"group": k.group, "version": k.version, "resource": k.plural})
}

/// The options object of the write (`CreateOptions`, `UpdateOptions`, `DeleteOptions`).
fn options(review: &Review<'_>) -> Value {
    let kind = match review.operation {
        Operation::Create => "CreateOptions",
        Operation::Update => "UpdateOptions",
        Operation::Delete => "DeleteOptions",
    };
    let mut options = json!({"kind": kind, "apiVersion": "meta.k8s.io/v1"});
    if review.dry_run {
        options["dryRun"] = json!(["All"]);
    }
    options
}

/// The AdmissionReview sent for `review`, with request `uid`.
pub(super) fn request(uid: &str, review: &Review<'_>, subject: Subject<'_>) -> Value {
    let sub = review.subresource.unwrap_or_default();
    // Upstream admits a new object before its name is generated: a `generateName` create is
    // sent without a name (here the object already carries the generated one).
    let object_name = subject.object.as_ref().map(crate::object::name);
    let name = match review.operation {
        Operation::Create if object_name != Some(review.name) => String::new(),
        _ => review.name.to_string(),
    };
    let mut request = json!({
        "uid": uid,
        "kind": gvk(subject.kind),
        "resource": gvr(subject.kind),
        "requestKind": gvk(review.view),
        "requestResource": gvr(review.view),
        "operation": review.operation.as_str(),
        "userInfo": serde_json::to_value(review.user).unwrap_or_else(|_| json!({})),
        "object": subject.object,
        "oldObject": subject.old,
        "dryRun": review.dry_run,
        "options": options(review),
    });
    // Empty strings are left out, as Go's `omitempty` leaves them.
    for (key, value) in [
        ("subResource", sub),
        ("requestSubResource", sub),
        ("name", name.as_str()),
        ("namespace", subject.namespace),
    ] {
        if !value.is_empty() {
            request[key] = json!(value);
        }
    }
    json!({"apiVersion": ADMISSION_V1, "kind": "AdmissionReview", "request": request})
}

/// A webhook's verified answer.
#[derive(Debug, Default)]
pub(super) struct Answer {
    pub allowed: bool,
    /// The `status` the webhook gave (used for a denial's message and code).
    pub status: Option<Value>,
    /// The decoded JSON Patch, for a mutating webhook.
    pub patch: Vec<u8>,
    /// `patchType`, empty when no patch.
    pub patch_type: String,
    pub warnings: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireReview {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    response: Option<WireResponse>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireResponse {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    allowed: bool,
    status: Option<Value>,
    /// Base64, as Go marshals `[]byte`.
    patch: Option<String>,
    patch_type: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
}

/// Why a webhook's answer is unusable.
#[derive(Debug, thiserror::Error)]
pub(super) enum AnswerError {
    /// The body is not an AdmissionReview at all (upstream: the client's decoding fails, a
    /// failure to call the webhook).
    #[error("{0}")]
    Undecodable(String),
    /// An AdmissionReview that breaks the protocol (upstream's `VerifyAdmissionResponse`).
    #[error("{0}")]
    Invalid(String),
}

/// Decodes and verifies a webhook's answer to the request with `uid`.
pub(super) fn verify(uid: &str, mutating: bool, body: &[u8]) -> Result<Answer, AnswerError> {
    let review: WireReview = serde_json::from_slice(body)
        .map_err(|e| AnswerError::Undecodable(format!("couldn't decode the response: {e}")))?;
    let invalid = |m: String| Err(AnswerError::Invalid(m));
    let v1 = match (review.api_version.as_str(), review.kind.as_str()) {
        (ADMISSION_V1, "AdmissionReview") => true,
        (ADMISSION_V1BETA1, "AdmissionReview") => false,
        (av, kind) => {
            let (group, version) = av.rsplit_once('/').unwrap_or(("", av));
            return invalid(format!(
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {group}/{version}, Kind={kind}"
            ));
        }
    };
    let Some(r) = review.response else {
        return invalid("webhook response was absent".into());
    };
    if v1 && r.uid != uid {
        return invalid(format!("expected response.uid={uid:?}, got {:?}", r.uid));
    }
    let patch = match r.patch.as_deref().filter(|p| !p.is_empty()) {
        None => Vec::new(),
        Some(p) => base64::engine::general_purpose::STANDARD
            .decode(p)
            .map_err(|e| AnswerError::Undecodable(format!("response.patch: {e}")))?,
    };
    let mut patch_type = r.patch_type.clone().unwrap_or_default();
    if !mutating {
        if !patch.is_empty() {
            return invalid("validating webhook may not return response.patch".into());
        }
        if r.patch_type.is_some() {
            return invalid("validating webhook may not return response.patchType".into());
        }
    } else if v1 {
        match (&r.patch_type, patch.is_empty()) {
            (None, false) => {
                return invalid(
                    "webhook returned response.patch but not response.patchType".into(),
                );
            }
            (Some(_), true) => {
                return invalid(
                    "webhook returned response.patchType but not response.patch".into(),
                );
            }
            (Some(t), false) if t.is_empty() => {
                return invalid(format!(
                    "webhook returned invalid response.patchType of {t:?}"
                ));
            }
            _ => {}
        }
    } else if !patch.is_empty() {
        // v1beta1 had only JSON Patch and no patchType.
        patch_type = "JSONPatch".into();
    }
    Ok(Answer {
        allowed: r.allowed,
        status: r.status,
        patch: if mutating { patch } else { Vec::new() },
        patch_type,
        warnings: r.warnings,
    })
}

/// The refusal of a webhook that did not allow the write: the webhook's status with its message
/// prefixed, at least 400 (upstream's `ToStatusErr`).
pub(super) fn denial(webhook: &str, status: Option<&Value>) -> ApiError {
    let denied = format!("admission webhook {webhook:?} denied the request");
    let field = |k: &str| {
        status
            .and_then(|s| s.get(k))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let code = status
        .and_then(|s| s.get("code"))
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(400);
    let reason = field("reason").unwrap_or_default();
    let message = match (field("message"), field("reason")) {
        (Some(m), _) => format!("{denied}: {m}"),
        (None, Some(r)) => format!("{denied}: {r}"),
        (None, None) => format!("{denied} without explanation"),
    };
    let details = status.and_then(|s| s.get("details")).cloned();
    ApiError::from_status(code, reason, message, details)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denials_are_worded_as_upstreams_to_status_err() {
        let cases = [
            (
                None,
                400,
                "",
                "admission webhook \"foo\" denied the request without explanation",
            ),
            (
                Some(json!({"message": "you shall not pass"})),
                400,
                "",
                "admission webhook \"foo\" denied the request: you shall not pass",
            ),
            (
                Some(json!({"reason": "Forbidden"})),
                400,
                "Forbidden",
                "admission webhook \"foo\" denied the request: Forbidden",
            ),
            (
                Some(json!({"code": 403, "reason": "Forbidden", "message": "no"})),
                403,
                "Forbidden",
                "admission webhook \"foo\" denied the request: no",
            ),
            (
                Some(json!({"code": 200, "message": "no"})),
                400,
                "",
                "admission webhook \"foo\" denied the request: no",
            ),
        ];
        for (status, code, reason, message) in cases {
            let e = denial("foo", status.as_ref());
            assert_eq!(
                (e.code, e.reason, e.message.as_str()),
                (code, reason, message)
            );
        }
    }

    fn answer(v: Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn answers_are_verified_as_upstream() {
        let ok = |resp: Value| {
            answer(
                json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": resp}),
            )
        };
        let err = |mutating, body: &[u8]| verify("u1", mutating, body).unwrap_err().to_string();
        assert_eq!(
            err(true, &ok(json!({"uid": "u2", "allowed": true}))),
            "expected response.uid=\"u1\", got \"u2\""
        );
        assert_eq!(
            err(
                true,
                &answer(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}))
            ),
            "webhook response was absent"
        );
        assert_eq!(
            err(
                true,
                &ok(json!({"uid": "u1", "allowed": true, "patch": "W10="}))
            ),
            "webhook returned response.patch but not response.patchType"
        );
        assert_eq!(
            err(
                false,
                &ok(
                    json!({"uid": "u1", "allowed": true, "patch": "W10=", "patchType": "JSONPatch"})
                )
            ),
            "validating webhook may not return response.patch"
        );
        let a = verify(
            "u1",
            true,
            &ok(
                json!({"uid": "u1", "allowed": true, "patch": "W10=", "patchType": "JSONPatch",
                "warnings": ["careful"]}),
            ),
        )
        .unwrap();
        assert!(a.allowed);
        assert_eq!(a.patch, b"[]");
        assert_eq!(a.patch_type, "JSONPatch");
        assert_eq!(a.warnings, ["careful"]);
    }
}
