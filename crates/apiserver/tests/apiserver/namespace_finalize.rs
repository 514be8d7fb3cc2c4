//! `spec.finalizers` of a namespace change only through `namespaces/{name}/finalize`, as on
//! upstream's API server: a plain update or a status write keeps them (controllers that finalize
//! with a plain PUT would leave namespaces Terminating on a real cluster), and finalizing the
//! last one of a namespace being deleted removes it.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common::Server;

use axum::http::{Method, StatusCode};
use serde_json::json;

#[tokio::test]
async fn only_the_finalize_subresource_changes_spec_finalizers() {
    let s = Server::start().await;
    let (code, ns) = s
        .call(
            Method::POST,
            "/api/v1/namespaces",
            Some(json!({"metadata": {"name": "fin"}})),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{ns}");
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));

    let mut next = ns.clone();
    next["spec"]["finalizers"] = json!(["kubernetes", "e2e.example.com/fake"]);
    next["metadata"]["labels"] = json!({"seen": "yes"});
    let (code, put) = s
        .call(Method::PUT, "/api/v1/namespaces/fin", Some(next.clone()))
        .await;
    assert_eq!(code, StatusCode::OK, "{put}");
    assert_eq!(put["spec"]["finalizers"], json!(["kubernetes"]), "{put}");
    assert_eq!(put["metadata"]["labels"]["seen"], "yes");

    next["metadata"]["resourceVersion"] = put["metadata"]["resourceVersion"].clone();
    let (code, fin) = s
        .call(Method::PUT, "/api/v1/namespaces/fin/finalize", Some(next))
        .await;
    assert_eq!(code, StatusCode::OK, "{fin}");
    assert_eq!(
        fin["spec"]["finalizers"],
        json!(["kubernetes", "e2e.example.com/fake"])
    );

    let (_, discovery) = s.call(Method::GET, "/api/v1", None).await;
    let finalize = discovery["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "namespaces/finalize")
        .unwrap();
    assert_eq!(finalize["verbs"], json!(["update"]));

    // Deleted, then finalized to nothing: gone.
    let (code, _) = s.call(Method::DELETE, "/api/v1/namespaces/fin", None).await;
    assert_eq!(code, StatusCode::OK);
    let (_, terminating) = s.call(Method::GET, "/api/v1/namespaces/fin", None).await;
    assert_eq!(terminating["status"]["phase"], "Terminating");
    let mut done = terminating.clone();
    done["spec"]["finalizers"] = json!([]);
    let (code, body) = s
        .call(Method::PUT, "/api/v1/namespaces/fin/finalize", Some(done))
        .await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let (code, _) = s.call(Method::GET, "/api/v1/namespaces/fin", None).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
}
