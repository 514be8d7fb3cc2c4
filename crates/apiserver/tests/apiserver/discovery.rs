//! Discovery answers with and without a trailing slash, and every group upstream's conformance
//! spec "should locate the groupVersion and a resource within each APIGroup" reads is served
//! with the resource it looks for (those rollwright serves; see CONFORMANCE.md for the rest).

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common::Server;

use axum::http::{Method, StatusCode};
use serde_json::Value;

#[tokio::test]
async fn discovery_paths_answer_with_a_trailing_slash() {
    let s = Server::start().await;
    for (plain, slashed) in [
        ("/api", "/api/"),
        ("/apis", "/apis/"),
        ("/api/v1", "/api/v1/"),
        ("/apis/apps", "/apis/apps/"),
        ("/apis/apps/v1", "/apis/apps/v1/"),
    ] {
        let (c1, a) = s.call(Method::GET, plain, None).await;
        let (c2, b) = s.call(Method::GET, slashed, None).await;
        assert_eq!((c1, c2), (StatusCode::OK, StatusCode::OK), "{slashed}");
        assert_eq!(a, b, "{slashed}");
    }
    let (_, groups) = s.call(Method::GET, "/apis/", None).await;
    for g in groups["groups"].as_array().unwrap() {
        let name = g["name"].as_str().unwrap();
        let (code, group) = s.call(Method::GET, &format!("/apis/{name}/"), None).await;
        assert_eq!(code, StatusCode::OK, "{name}");
        let preferred = &group["preferredVersion"]["groupVersion"];
        assert!(
            group["versions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| &v["groupVersion"] == preferred),
            "{name}: preferred version {preferred} not among its versions"
        );
    }
}

#[tokio::test]
async fn the_groups_upstream_checks_serve_their_resource() {
    let s = Server::start().await;
    for (gv, resource) in [
        ("/api/v1", "namespaces"),
        (
            "/apis/admissionregistration.k8s.io/v1",
            "validatingwebhookconfigurations",
        ),
        ("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions"),
        ("/apis/apiregistration.k8s.io/v1", "apiservices"),
        ("/apis/apps/v1", "deployments"),
        ("/apis/autoscaling/v1", "horizontalpodautoscalers"),
        ("/apis/autoscaling/v2", "horizontalpodautoscalers"),
        ("/apis/batch/v1", "jobs"),
        ("/apis/certificates.k8s.io/v1", "certificatesigningrequests"),
        ("/apis/coordination.k8s.io/v1", "leases"),
        ("/apis/discovery.k8s.io/v1", "endpointslices"),
        ("/apis/events.k8s.io/v1", "events"),
        ("/apis/networking.k8s.io/v1", "ingresses"),
        ("/apis/node.k8s.io/v1", "runtimeclasses"),
        ("/apis/policy/v1", "poddisruptionbudgets"),
        ("/apis/scheduling.k8s.io/v1", "priorityclasses"),
        ("/apis/storage.k8s.io/v1", "csinodes"),
    ] {
        let (code, list) = s.call(Method::GET, gv, None).await;
        assert_eq!(code, StatusCode::OK, "{gv}: {list}");
        assert_eq!(
            list["groupVersion"],
            Value::from(gv.trim_start_matches("/apis/").trim_start_matches("/api/")),
        );
        assert!(
            list["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["name"] == resource),
            "{gv} lacks {resource}"
        );
    }
}
