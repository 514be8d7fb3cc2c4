//! The three patch types a `PATCH` may carry (JSON patch, merge patch, strategic merge patch),
//! applied to the caller's copy of the current object, as upstream's patch handler
//! (`k8s.io/apiserver/pkg/endpoints/handlers/patch.go`) applies them.
//!
//! A JSON patch is bounded as upstream bounds it: at most [`MAX_JSON_PATCH_OPERATIONS`]
//! operations, and `copy` operations may add at most [`MAX_COPY_BYTES`] to the document between
//! them (evanphx/json-patch's `AccumulatedCopySizeLimit`, which kube-apiserver sets to its
//! request size limit). The growth is checked before each copy is made, so a small patch cannot
//! make the server build a huge document first and refuse it afterwards.

use std::io;

use json_patch::PatchOperation;
use serde_json::Value;

use crate::{
    error::{ApiError, ApiResult},
    request::{BodyType, MAX_BODY},
};

/// Upstream's `maxJSONPatchOperations`.
pub(crate) const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// Upstream's `JSONPatchMaxCopyBytes`: the request size limit.
pub(crate) const MAX_COPY_BYTES: usize = MAX_BODY;

/// Applies a patch of type `bt` to `doc`, the caller's own copy of the current object.
pub(crate) fn apply(bt: BodyType, doc: Value, patch: &Value) -> ApiResult<Value> {
    match bt {
        BodyType::JsonPatch => apply_json_patch(doc, patch),
        BodyType::MergePatch => {
            if !patch.is_object() {
                return Err(ApiError::bad_request(
                    "a JSON merge patch must be an object",
                ));
            }
            let mut doc = doc;
            json_patch::merge(&mut doc, patch);
            Ok(doc)
        }
        BodyType::StrategicMergePatch => api::smp::apply_owned(doc, patch, &api::smp::Builtin)
            .map_err(|e| ApiError::bad_request(e.to_string())),
        BodyType::ApplyPatch => Err(ApiError::unsupported_media_type(
            "application/apply-patch+yaml (server-side apply is served on objects and their status, not here)",
        )),
        BodyType::Object => Err(ApiError::unsupported_media_type(
            "application/json on PATCH",
        )),
    }
}

fn apply_json_patch(mut doc: Value, patch: &Value) -> ApiResult<Value> {
    let p: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
    if p.0.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(ApiError::entity_too_large(format!(
            "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
            p.0.len()
        )));
    }
    let mut copied = 0usize;
    // One operation at a time, so that each copy's growth is charged before it is made. The
    // document is the caller's own: on an error it is dropped, so no undo is kept.
    for (i, op) in p.0.iter().enumerate() {
        if let PatchOperation::Copy(copy) = op
            && let Some(source) = doc.pointer(copy.from.as_str())
        {
            copied = copied.saturating_add(encoded_len(source));
            if copied > MAX_COPY_BYTES {
                return Err(rejected(format!(
                    "Unable to complete the copy, the accumulated size increase of copy is {copied}, exceeding the limit {MAX_COPY_BYTES}"
                )));
            }
        }
        json_patch::patch_unsafe(&mut doc, std::slice::from_ref(op)).map_err(|mut e| {
            e.operation = i;
            rejected(e.to_string())
        })?;
    }
    Ok(doc)
}

/// Upstream's answer to a patch that does not apply: 422 with the patch library's words.
fn rejected(why: String) -> ApiError {
    ApiError {
        code: 422,
        reason: "Invalid",
        message: format!("the server rejected our request due to an error in our request: {why}"),
        details: None,
    }
}

/// The length of `v` encoded as JSON, counted without building the encoding.
fn encoded_len(v: &Value) -> usize {
    struct Count(usize);
    impl io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` to a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, v);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn copies(n: usize) -> Value {
        Value::Array(
            (0..n)
                .map(|i| json!({"op": "copy", "from": "/data/k", "path": format!("/data/c{i}")}))
                .collect(),
        )
    }

    #[test]
    fn copies_are_refused_before_they_outgrow_the_request_limit() {
        let big = "x".repeat(1024 * 1024);
        let doc = json!({"data": {"k": big}});
        let e = apply(BodyType::JsonPatch, doc.clone(), &copies(1000)).unwrap_err();
        assert_eq!(e.code, 422);
        // The third copy crosses 3 MiB: 3 x (1 MiB + 2 quotes).
        assert_eq!(
            e.message,
            "the server rejected our request due to an error in our request: Unable to complete the copy, the accumulated size increase of copy is 3145734, exceeding the limit 3145728"
        );
        // Two copies are within the limit.
        let patched = apply(BodyType::JsonPatch, doc, &copies(2)).unwrap();
        assert_eq!(patched["data"].as_object().unwrap().len(), 3);
    }

    #[test]
    fn more_than_ten_thousand_operations_are_too_large() {
        let ops = Value::Array(vec![
            json!({"op": "test", "path": "/a", "value": 1});
            10_001
        ]);
        let e = apply(BodyType::JsonPatch, json!({"a": 1}), &ops).unwrap_err();
        assert_eq!((e.code, e.reason), (413, "RequestEntityTooLarge"));
        assert_eq!(
            e.message,
            "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
        );
        let ops = Value::Array(vec![
            json!({"op": "test", "path": "/a", "value": 1});
            10_000
        ]);
        assert!(apply(BodyType::JsonPatch, json!({"a": 1}), &ops).is_ok());
    }

    #[test]
    fn a_failing_operation_is_named_by_its_index_in_the_whole_patch() {
        let ops = json!([
            {"op": "add", "path": "/b", "value": 2},
            {"op": "remove", "path": "/missing"},
        ]);
        let e = apply(BodyType::JsonPatch, json!({"a": 1}), &ops).unwrap_err();
        let whole = json_patch::patch(
            &mut json!({"a": 1}),
            &serde_json::from_value::<json_patch::Patch>(ops).unwrap(),
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            format!("the server rejected our request due to an error in our request: {whole}")
        );
    }
}
