//! The targets, each a function over bytes, with the corpus of valid inputs it starts from.

use crate::Target;
use axum::{Router, body::Body, http::Request};
use serde_json::{Value, json};
use std::sync::{Arc, OnceLock};
use tower::ServiceExt;

/// Every target by name, with its corpus.
pub fn all() -> Vec<(&'static str, Target, Vec<Vec<u8>>)> {
    let c = |items: &[&str]| {
        items
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect::<Vec<_>>()
    };
    vec![
        (
            "label-selector",
            label_selector as Target,
            c(&[
                "a=b,c!=d",
                "e in (x,y),f notin (z)",
                "g,!h",
                "app=web,tier in (a, b)",
                "x>1,y<2",
            ]),
        ),
        (
            "field-selector",
            field_selector,
            c(&[
                "metadata.name=x,spec.nodeName!=",
                "status.phase==Running",
                "a\\,b=c\\=d",
            ]),
        ),
        (
            "quantity",
            quantity,
            c(&[
                "100m",
                "1.5Gi",
                "2e3",
                "0.001",
                "-1Ki",
                "1E",
                "123456789012345678n",
            ]),
        ),
        (
            "int-or-percent",
            int_or_percent,
            c(&["3", "\"25%\"", "\"-5%\"", "1.5", "\"100%\"", "0"]),
        ),
        (
            "body-decoding",
            body_decoding,
            c(&[
                r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}}"#,
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    image: i\n",
            ]),
        ),
        (
            "patch",
            patch,
            c(&[
                r#"{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"app:2"}]}}}}"#,
                r#"{"spec":{"replicas":5,"strategy":{"rollingUpdate":{"maxSurge":"50%"}}}}"#,
                r#"{"metadata":{"labels":{"a":null}},"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"app"}],"containers":[{"name":"app","$patch":"delete"}]}}}}"#,
                r#"[{"op":"replace","path":"/spec/replicas","value":2},{"op":"add","path":"/metadata/labels/x","value":"y"}]"#,
                r#"[{"op":"remove","path":"/spec/template/spec/containers/0"},{"op":"test","path":"/kind","value":"Deployment"}]"#,
            ]),
        ),
    ]
}

fn text(data: &[u8]) -> &str {
    std::str::from_utf8(data).unwrap_or_default()
}

fn label_selector(data: &[u8]) -> Result<(), String> {
    if let Ok(sel) = api::selector::LabelSelector::parse(text(data)) {
        let _ = sel.matches(|k| (k == "a").then_some("b"));
        let _ = sel.exact_values().count();
    }
    Ok(())
}

fn field_selector(data: &[u8]) -> Result<(), String> {
    if let Ok(sel) = api::selector::FieldSelector::parse(text(data)) {
        let _ = sel.matches(|f| Some(f.to_string()));
        let _ = sel.fields().count();
    }
    Ok(())
}

fn quantity(data: &[u8]) -> Result<(), String> {
    if let Ok(q) = api::quantity::Quantity::parse(text(data)) {
        let _ = (q.milli_value(), q.value(), q.is_negative(), q.is_zero());
        let _ = q.saturating_add(q);
    }
    Ok(())
}

fn int_or_percent(data: &[u8]) -> Result<(), String> {
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return Ok(());
    };
    if let Ok(p) = api::intstr::IntOrPercent::parse(&v) {
        for total in [0, 1, 3, 10, i32::MAX, -1] {
            let _ = api::intstr::scaled_value(&p, total, true);
            let _ = api::intstr::scaled_value(&p, total, false);
        }
    }
    let _ = api::intstr::resolve_fenceposts(Some(&v), Some(&v), 10);
    Ok(())
}

/// An API server on a memory store, shared by the HTTP targets (one per process).
fn server() -> &'static (tokio::runtime::Runtime, Router) {
    static SERVER: OnceLock<(tokio::runtime::Runtime, Router)> = OnceLock::new();
    SERVER.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("a runtime: {e}"));
        let router = rt.block_on(async {
            let store: Arc<dyn store::Store> = Arc::new(store::memory::MemoryStore::new());
            let server = apiserver::ApiServer::start(store, Default::default())
                .await
                .unwrap_or_else(|e| panic!("the API server starts: {e}"));
            let router = server.in_process_router();
            let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web"},
                "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "app", "image": "app:1"}]}}}});
            let _ = send(
                &router,
                "POST",
                "/apis/apps/v1/namespaces/default/deployments",
                "application/json",
                deployment.to_string().into_bytes(),
            )
            .await;
            router
        });
        (rt, router)
    })
}

async fn send(
    router: &Router,
    method: &str,
    uri: &str,
    content_type: &str,
    body: Vec<u8>,
) -> Result<u16, String> {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .body(Body::from(body))
        .map_err(|e| e.to_string())?;
    let resp = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        router.clone().oneshot(req),
    )
    .await
    .map_err(|_| format!("{method} {uri} did not finish within 10 s"))?
    .map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap_or_default();
    if status >= 500 {
        return Err(format!(
            "{method} {uri} ({content_type}): {status} {}",
            String::from_utf8_lossy(&body)
        ));
    }
    Ok(status)
}

/// A body in each format the server reads, created (dry run) as a Pod: no 5xx, no hang.
fn body_decoding(data: &[u8]) -> Result<(), String> {
    let (rt, router) = server();
    rt.block_on(async {
        for ct in [
            "application/json",
            "application/yaml",
            "application/vnd.kubernetes.protobuf",
        ] {
            let mut body = data.to_vec();
            if ct.ends_with("protobuf") {
                body = [b"k8s\x00".as_slice(), data].concat();
            }
            send(
                router,
                "POST",
                "/api/v1/namespaces/default/pods?dryRun=All",
                ct,
                body,
            )
            .await?;
        }
        Ok(())
    })
}

/// A patch of each type on a Deployment (dry run): no 5xx, no hang.
fn patch(data: &[u8]) -> Result<(), String> {
    let (rt, router) = server();
    rt.block_on(async {
        for ct in [
            "application/strategic-merge-patch+json",
            "application/merge-patch+json",
            "application/json-patch+json",
        ] {
            send(
                router,
                "PATCH",
                "/apis/apps/v1/namespaces/default/deployments/web?dryRun=All",
                ct,
                data.to_vec(),
            )
            .await?;
        }
        Ok(())
    })
}
