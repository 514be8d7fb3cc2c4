//! A CustomResourceDefinition's conditions through writes that change nothing about them:
//! upstream's naming and establishing controllers set a condition with `SetCRDCondition`, which
//! moves `lastTransitionTime` only when the condition's status changes, and a write that leaves
//! the object as it was (a repeated server-side apply, a label set to the value it has) is not
//! written at all, so the resourceVersion stays.

use crate::common::Server;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::Duration;

const URI: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const NAME: &str = "gadgets.example.com";

fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": NAME},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"kind": "Gadget", "plural": "gadgets"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    })
}

/// A PATCH of `content_type`; the status and the body.
async fn patch(s: &Server, query: &str, content_type: &str, body: &Value) -> (StatusCode, Value) {
    let uri = format!("{URI}/{NAME}{query}");
    crate::common::patch(&s.router, &uri, content_type, body.clone()).await
}

/// Each condition's type, status and lastTransitionTime.
fn conditions(crd: &Value) -> Vec<(String, String, String)> {
    crd["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["type"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
                c["lastTransitionTime"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn rv(obj: &Value) -> &str {
    obj["metadata"]["resourceVersion"].as_str().unwrap()
}

/// The clock is tokio's, paused: each step moves it a minute on, so a rewritten time shows.
#[tokio::test(start_paused = true)]
async fn writes_that_change_no_condition_keep_its_time_and_no_op_writes_write_nothing() {
    let s = Server::start().await;
    let (code, created) = s.call(Method::POST, URI, Some(crd())).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    let established = conditions(&created);
    assert_eq!(
        established
            .iter()
            .map(|(t, st, _)| (t.as_str(), st.as_str()))
            .collect::<Vec<_>>(),
        [("NamesAccepted", "True"), ("Established", "True")]
    );

    // The first server-side apply takes the fields over (a write), the second is a no-op.
    tokio::time::advance(Duration::from_secs(60)).await;
    let apply = "application/apply-patch+yaml";
    let query = "?fieldManager=kubectl&force=true";
    let (code, first) = patch(&s, query, apply, &crd()).await;
    assert_eq!(code, StatusCode::OK, "{first}");
    assert_eq!(conditions(&first), established);
    tokio::time::advance(Duration::from_secs(60)).await;
    let (code, second) = patch(&s, query, apply, &crd()).await;
    assert_eq!(code, StatusCode::OK, "{second}");
    assert_eq!(conditions(&second), established);
    assert_eq!(rv(&second), rv(&first), "a no-op apply wrote");

    // `kubectl label`: a merge patch; the same label again changes nothing.
    let label = json!({"metadata": {"labels": {"team": "a"}}});
    let merge = "application/merge-patch+json";
    tokio::time::advance(Duration::from_secs(60)).await;
    let (code, labelled) = patch(&s, "", merge, &label).await;
    assert_eq!(code, StatusCode::OK, "{labelled}");
    assert_eq!(conditions(&labelled), established);
    tokio::time::advance(Duration::from_secs(60)).await;
    let (code, again) = patch(&s, "", merge, &label).await;
    assert_eq!(code, StatusCode::OK, "{again}");
    assert_eq!(conditions(&again), established);
    assert_eq!(rv(&again), rv(&labelled), "a no-op label wrote");
}
