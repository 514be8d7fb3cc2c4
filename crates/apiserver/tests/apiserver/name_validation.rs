//! Every built-in kind validates its name as upstream's `ValidateXxxName` does: a name with `/`
//! (which no kind takes: DNS subdomains, DNS labels and path segments all refuse it) is 422
//! Invalid on `metadata.name`, so no object is stored under a key it can never be read or deleted
//! by.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common::Server;

use axum::http::{Method, StatusCode};
use serde_json::json;

/// Every resource (not subresource) discovery lists that can be created and read back: the
/// stored kinds (reviews are created and answered, never stored).
async fn stored_resources(s: &Server) -> Vec<(String, String, String, bool)> {
    let mut group_versions = vec!["v1".to_string()];
    let (_, groups) = s.call(Method::GET, "/apis", None).await;
    for g in groups["groups"].as_array().unwrap() {
        for v in g["versions"].as_array().unwrap() {
            group_versions.push(v["groupVersion"].as_str().unwrap().to_string());
        }
    }
    let mut out = Vec::new();
    for gv in group_versions {
        let prefix = if gv == "v1" {
            "/api/v1".to_string()
        } else {
            format!("/apis/{gv}")
        };
        let (code, list) = s.call(Method::GET, &prefix, None).await;
        assert_eq!(code, StatusCode::OK, "{prefix}: {list}");
        for r in list["resources"].as_array().unwrap() {
            let plural = r["name"].as_str().unwrap();
            let verbs = r["verbs"].as_array().unwrap();
            if plural.contains('/')
                || !verbs.iter().any(|v| v == "create")
                || !verbs.iter().any(|v| v == "get")
            {
                continue;
            }
            let namespaced = r["namespaced"] == true;
            let collection = if namespaced {
                format!("{prefix}/namespaces/default/{plural}")
            } else {
                format!("{prefix}/{plural}")
            };
            out.push((
                gv.clone(),
                r["kind"].as_str().unwrap().to_string(),
                collection,
                namespaced,
            ));
        }
    }
    out
}

/// Upstream's `NameIsDNSSubdomain` message for `evil/x`.
const DNS_SUBDOMAIN: &str = "Invalid value: \"evil/x\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

#[tokio::test]
async fn every_kind_refuses_a_name_with_a_slash() {
    let s = Server::start().await;
    let resources = stored_resources(&s).await;
    assert!(resources.len() > 40, "{}", resources.len());
    let mut accepted = Vec::new();
    // A name of its own for each, as some resources are one kind served in two versions.
    for (i, (api_version, kind, collection, _)) in resources.into_iter().enumerate() {
        let obj = json!({
            "apiVersion": api_version, "kind": kind,
            "metadata": {"name": format!("evil/x{i}")},
        });
        let (code, status) = s.call(Method::POST, &collection, Some(obj)).await;
        let on_name: Vec<&str> = status["details"]["causes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["field"] == "metadata.name")
            .filter_map(|c| c["message"].as_str())
            .collect();
        if code != StatusCode::UNPROCESSABLE_ENTITY
            || status["reason"] != "Invalid"
            || on_name.is_empty()
        {
            accepted.push(format!("{api_version} {kind}: {code} {status}"));
            continue;
        }
        // The kinds that used to take any name answer with their own rule's message.
        let want = match kind.as_str() {
            "CertificateSigningRequest" => Some("Invalid value: \"evil/x\": may not contain '/'"),
            "Endpoints"
            | "LimitRange"
            | "PodTemplate"
            | "ServiceAccount"
            | "HorizontalPodAutoscaler"
            | "IngressClass"
            | "Ingress"
            | "NetworkPolicy"
            | "CSIDriver"
            | "CSINode"
            | "CSIStorageCapacity"
            | "VolumeAttachment"
            | "MutatingWebhookConfiguration"
            | "ValidatingWebhookConfiguration"
            | "ValidatingAdmissionPolicy"
            | "ValidatingAdmissionPolicyBinding" => Some(DNS_SUBDOMAIN),
            _ => None,
        };
        if let Some(want) = want {
            let want = want.replace("evil/x", &format!("evil/x{i}"));
            assert_eq!(on_name, [want.as_str()], "{api_version} {kind}");
        }
    }
    assert!(
        accepted.is_empty(),
        "kinds that did not refuse the name:\n{}",
        accepted.join("\n")
    );
}

/// Upstream's `rest.BeforeUpdate` checks the metadata of every kind on update as on create: a
/// CustomResourceDefinition whose annotations grow past 256 KiB (a `kubectl apply` of a large
/// definition, whose last-applied annotation holds all of it) is refused, as kube-apiserver
/// v1.28.4 refuses it.
#[tokio::test]
async fn updates_keep_annotations_within_upstreams_total_size() {
    let s = Server::start().await;
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let crd = |annotation: &str| {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "bigs.example.com", "annotations": {"note": annotation}},
            "spec": {
                "group": "example.com", "scope": "Namespaced",
                "names": {"kind": "Big", "plural": "bigs", "singular": "big", "listKind": "BigList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object"}}}],
            },
        })
    };
    let (code, created) = s.call(Method::POST, crds, Some(crd("small"))).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    let mut big = crd(&"x".repeat(290_000));
    big["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"].clone();
    let (code, status) = s
        .call(Method::PUT, &format!("{crds}/bigs.example.com"), Some(big))
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{status}");
    assert_eq!(
        status["message"],
        "CustomResourceDefinition.apiextensions.k8s.io \"bigs.example.com\" is invalid: metadata.annotations: Too long: must have at most 262144 bytes"
    );
}
