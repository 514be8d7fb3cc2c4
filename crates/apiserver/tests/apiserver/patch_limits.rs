//! JSON patches bounded as upstream bounds them: more than 10,000 operations is 413, and copies
//! that would grow the object past the request size limit are refused before they are made, so
//! a 57 KB patch cannot make the server build gigabytes.

use crate::common::Server;

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

const CM: &str = "/api/v1/namespaces/default/configmaps/big";

async fn json_patch(s: &Server, ops: &Value) -> (StatusCode, Value) {
    crate::common::patch(&s.router, CM, "application/json-patch+json", ops.clone()).await
}

#[tokio::test]
async fn copies_and_operations_are_bounded() {
    let s = Server::start().await;
    let big = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"},
        "data": {"k": "x".repeat(1_000_000)}});
    let (code, body) = s
        .call(
            Method::POST,
            "/api/v1/namespaces/default/configmaps",
            Some(big),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let copies: Vec<Value> = (0..1_000)
        .map(|i| json!({"op": "copy", "from": "/data/k", "path": format!("/data/c{i}")}))
        .collect();
    let (code, body) = json_patch(&s, &Value::Array(copies)).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(
        body["message"],
        // The fourth copy of the 1,000,002-byte string crosses the 3 MiB limit.
        "the server rejected our request due to an error in our request: Unable to complete the copy, the accumulated size increase of copy is 4000008, exceeding the limit 3145728"
    );
    let ops = Value::Array(vec![
        json!({"op": "test", "path": "/data/k", "value": "x"});
        10_001
    ]);
    let (code, body) = json_patch(&s, &ops).await;
    assert_eq!(code, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(body["reason"], "RequestEntityTooLarge");
    assert_eq!(
        body["message"],
        "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
    );
    // Nothing was changed by either.
    let (_, cm) = s.call(Method::GET, CM, None).await;
    assert_eq!(cm["data"].as_object().unwrap().len(), 1);
}
