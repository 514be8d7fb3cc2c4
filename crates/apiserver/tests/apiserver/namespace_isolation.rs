//! A request scoped to namespace `a` never shows an object of namespace `b`: for every namespaced
//! kind served (built-in and custom), lists and watches of every kind (from now, from a list's
//! resourceVersion, from 0, with `sendInitialEvents`, with label and field selectors, on one
//! object), across a relist of the watch cache, over JSON and protobuf.
//!
//! Objects of `b` are named `foreign-*`, and the one object name both namespaces share (`shared`)
//! carries the namespace in a label, so any leak shows up as text whatever the encoding.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common::{self, DEADLINE, Server};

use axum::{
    body::Body,
    http::{Method, Request, StatusCode},
};
use bytes::Bytes;
use futures::StreamExt;
use serde_json::json;
use store::Store;
use tower::ServiceExt;

/// A namespaced resource as discovery lists it.
#[derive(Clone, Debug)]
struct Resource {
    /// `/api/v1` or `/apis/{group}/{version}`.
    prefix: String,
    /// The store's group segment (`core` for the legacy group).
    group: String,
    plural: String,
}

impl Resource {
    fn collection(&self, ns: &str) -> String {
        format!("{}/namespaces/{ns}/{}", self.prefix, self.plural)
    }

    /// Where the store keeps its objects: a view (events.k8s.io's Events over core/v1's) reads
    /// another kind's.
    fn key(&self, ns: &str, name: &str) -> String {
        let group = match (self.group.as_str(), self.plural.as_str()) {
            ("events.k8s.io", "events") => "core",
            (g, _) => g,
        };
        format!("/registry/{group}/{}/{ns}/{name}", self.plural)
    }
}

/// Every namespaced resource (not subresource) that discovery says can be watched.
async fn namespaced_resources(s: &Server) -> Vec<Resource> {
    let mut prefixes = vec![("core".to_string(), "/api/v1".to_string())];
    let (_, groups) = s.call(Method::GET, "/apis", None).await;
    for g in groups["groups"].as_array().unwrap() {
        let name = g["name"].as_str().unwrap();
        for v in g["versions"].as_array().unwrap() {
            prefixes.push((
                name.to_string(),
                format!("/apis/{}", v["groupVersion"].as_str().unwrap()),
            ));
        }
    }
    let mut out = Vec::new();
    for (group, prefix) in prefixes {
        let (code, list) = s.call(Method::GET, &prefix, None).await;
        assert_eq!(code, StatusCode::OK, "{prefix}: {list}");
        for r in list["resources"].as_array().unwrap() {
            let plural = r["name"].as_str().unwrap();
            let verbs = r["verbs"].as_array().unwrap();
            if plural.contains('/')
                || r["namespaced"] != true
                || !verbs.iter().any(|v| v == "watch")
            {
                continue;
            }
            out.push(Resource {
                prefix: prefix.clone(),
                group: group.clone(),
                plural: plural.to_string(),
            });
        }
    }
    out
}

/// An object as the store holds it: no kind's validation stands between it and the cache, so
/// every kind can be tried with the same few objects.
fn object(ns: &str, name: &str, mark: &str) -> Bytes {
    Bytes::from(
        json!({
            "metadata": {
                "name": name, "namespace": ns, "uid": format!("{ns}-{name}"),
                "labels": {"app": "x", "ns": ns, "mark": mark},
            }
        })
        .to_string(),
    )
}

/// A served namespaced custom resource, so that run-time kinds are tried as well as built-ins.
async fn serve_custom_resource(s: &Server) {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    });
    let (code, body) = s
        .call(
            Method::POST,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            Some(crd),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let (code, _) = s.call(Method::GET, "/apis/example.com/v1", None).await;
        if code == StatusCode::OK {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "widgets.example.com never served"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

async fn namespaces(s: &Server) {
    for ns in ["a", "b"] {
        let (code, body) = s
            .call(
                Method::POST,
                "/api/v1/namespaces",
                Some(json!({"metadata": {"name": ns}})),
            )
            .await;
        assert_eq!(code, StatusCode::CREATED, "{body}");
    }
}

/// A streaming GET with an `Accept` header; its raw bytes as they come.
struct RawStream {
    uri: String,
    body: futures::stream::BoxStream<'static, Result<Bytes, axum::Error>>,
    seen: Vec<u8>,
}

impl RawStream {
    async fn open(s: &Server, uri: String, accept: &str) -> RawStream {
        let req = Request::builder()
            .uri(&uri)
            .header("accept", accept)
            .body(Body::empty())
            .unwrap();
        let resp = s.router.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{uri}");
        RawStream {
            uri,
            body: resp.into_body().into_data_stream().boxed(),
            seen: Vec::new(),
        }
    }

    fn contains(&self, needle: &str) -> bool {
        self.seen
            .windows(needle.len())
            .any(|w| w == needle.as_bytes())
    }

    /// Reads until `needle` has been seen; fails the test if it does not come in time.
    async fn read_until(&mut self, needle: &str) {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        while !self.contains(needle) {
            match tokio::time::timeout_at(deadline, self.body.next()).await {
                Ok(Some(Ok(chunk))) => self.seen.extend_from_slice(&chunk),
                Ok(_) => panic!(
                    "{}: the stream ended before {needle:?}; it sent {}",
                    self.uri,
                    String::from_utf8_lossy(&self.seen)
                ),
                Err(_) => panic!(
                    "{}: {needle:?} never came; it sent {}",
                    self.uri,
                    String::from_utf8_lossy(&self.seen)
                ),
            }
        }
    }

    fn assert_no_foreign(&self) {
        for needle in ["foreign-", "\"ns\":\"b\""] {
            assert!(
                !self.contains(needle),
                "{} showed an object of namespace b: {}",
                self.uri,
                String::from_utf8_lossy(&self.seen)
            );
        }
    }
}

const JSON: &str = "application/json";

#[tokio::test]
async fn every_namespaced_kind_lists_and_watches_only_its_namespace() {
    let s = Server::start().await;
    namespaces(&s).await;
    serve_custom_resource(&s).await;
    let resources = namespaced_resources(&s).await;
    for must in ["pods", "configmaps", "deployments", "leases", "widgets"] {
        assert!(
            resources.iter().any(|r| r.plural == must),
            "{must} not discovered"
        );
    }

    // Objects both namespaces hold before any watch starts (what a watch from 0 or with initial
    // events replays). Versions of one group share their storage: one set of objects each.
    let mut keys = std::collections::BTreeSet::new();
    for (i, r) in resources.iter().enumerate() {
        for (ns, name) in [
            ("a", "local-0".to_string()),
            ("b", "foreign-0".to_string()),
            ("b", format!("foreign-del-{i}")),
            ("a", "shared".to_string()),
            ("b", "shared".to_string()),
        ] {
            let key = r.key(ns, &name);
            if keys.insert(key.clone()) {
                s.store
                    .create(&key, object(ns, &name, "before"))
                    .await
                    .unwrap();
            }
        }
    }
    for (i, r) in resources.iter().enumerate() {
        let a = r.collection("a");
        let (code, list) = s.call(Method::GET, &a, None).await;
        if code != StatusCode::OK {
            panic!("{a}: {code} {list}");
        }
        let text = list.to_string();
        assert!(
            !text.contains("foreign-") && !text.contains("\"ns\":\"b\""),
            "{a} listed namespace b: {text}"
        );
        let rv = list["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
        let mut watches = Vec::new();
        for query in [
            String::new(),
            format!("&resourceVersion={rv}"),
            "&resourceVersion=0".to_string(),
            "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
                .to_string(),
            "&labelSelector=app%3Dx".to_string(),
            "&fieldSelector=metadata.name%21%3Dnothing".to_string(),
        ] {
            watches.push(RawStream::open(&s, format!("{a}?watch=1{query}"), JSON).await);
        }
        let mut single =
            RawStream::open(&s, format!("{a}/shared?watch=1&resourceVersion=0"), JSON).await;
        // Readers of all namespaces must still see both (the filter is the path's, nothing more).
        let all = format!("{}/{}", r.prefix, r.plural);
        let mut everywhere =
            RawStream::open(&s, format!("{all}?watch=1&resourceVersion={rv}"), JSON).await;

        // Changes in b, then one in a that every collection watcher waits for.
        let (added, end) = (format!("foreign-1-{i}"), format!("local-end-{i}"));
        s.store
            .create(&r.key("b", &added), object("b", &added, "after"))
            .await
            .unwrap();
        s.store
            .update(
                &r.key("b", "shared"),
                object("b", "shared", "changed"),
                None,
            )
            .await
            .unwrap();
        s.store
            .delete(&r.key("b", &format!("foreign-del-{i}")), None)
            .await
            .unwrap();
        s.store
            .create(&r.key("a", &end), object("a", &end, "after"))
            .await
            .unwrap();
        s.store
            .update(&r.key("a", "shared"), object("a", "shared", "end"), None)
            .await
            .unwrap();

        for w in &mut watches {
            w.read_until(&end).await;
            w.assert_no_foreign();
        }
        single.read_until("\"mark\":\"end\"").await;
        single.assert_no_foreign();
        assert!(
            !single.contains("local-"),
            "{}: showed another object",
            single.uri
        );
        everywhere.read_until("\"mark\":\"end\"").await;
        assert!(
            everywhere.contains(&added),
            "{all}: an all-namespaces watch lost namespace b"
        );
    }
}

#[tokio::test]
async fn a_namespaced_watch_stays_in_its_namespace_across_a_cache_relist() {
    let s = Server::start().await;
    namespaces(&s).await;
    let key = |ns: &str, name: &str| format!("/registry/core/configmaps/{ns}/{name}");
    s.store
        .create(&key("a", "local-0"), object("a", "local-0", "before"))
        .await
        .unwrap();
    let (_, list) = s
        .call(Method::GET, "/api/v1/namespaces/a/configmaps", None)
        .await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut watch = s
        .stream(&format!(
            "/api/v1/namespaces/a/configmaps?watch=1&resourceVersion={rv}"
        ))
        .await;

    // The cache loses its store watch and relists while both namespaces change.
    s.store.hold_lists(true);
    s.store.break_watches();
    s.store
        .create(&key("b", "foreign-1"), object("b", "foreign-1", "after"))
        .await
        .unwrap();
    s.store
        .create(&key("a", "local-1"), object("a", "local-1", "after"))
        .await
        .unwrap();
    s.store.hold_lists(false);

    // The watcher either goes on (seeing only a) or is told to relist.
    loop {
        let ev = watch
            .next_within(DEADLINE)
            .await
            .expect("the watch went quiet with neither local-1 nor a 410");
        assert_ne!(ev["object"]["metadata"]["namespace"], "b", "{ev}");
        if ev["type"] == "ERROR" {
            assert_eq!(ev["object"]["code"], 410, "{ev}");
            break;
        }
        if ev["object"]["metadata"]["name"] == "local-1" {
            break;
        }
    }
    // After the relist, a new watch from 0 replays namespace a only.
    let mut fresh = RawStream::open(
        &s,
        "/api/v1/namespaces/a/configmaps?watch=1&resourceVersion=0".into(),
        JSON,
    )
    .await;
    // The replay comes in key order (b after a), so wait for a change made after it.
    s.store
        .create(&key("a", "local-2"), object("a", "local-2", "after"))
        .await
        .unwrap();
    fresh.read_until("local-2").await;
    fresh.assert_no_foreign();
}

#[tokio::test]
async fn a_namespaced_protobuf_watch_shows_only_its_namespace() {
    let s = Server::start().await;
    namespaces(&s).await;
    let create = |ns: &'static str, name: &'static str| {
        let mut p = common::pod(name);
        p["metadata"]["labels"]["ns"] = ns.into();
        (format!("/api/v1/namespaces/{ns}/pods"), p)
    };
    for (ns, name) in [("a", "local-0"), ("b", "foreign-0")] {
        let (uri, p) = create(ns, name);
        let (code, body) = s.call(Method::POST, &uri, Some(p)).await;
        assert_eq!(code, StatusCode::CREATED, "{body}");
    }
    let proto = "application/vnd.kubernetes.protobuf;stream=watch";
    let mut watches = Vec::new();
    for q in ["", "&resourceVersion=0", "&labelSelector=app%3Dx"] {
        watches.push(
            RawStream::open(&s, format!("/api/v1/namespaces/a/pods?watch=1{q}"), proto).await,
        );
    }
    for (ns, name) in [("b", "foreign-1"), ("a", "local-end")] {
        let (uri, p) = create(ns, name);
        let (code, body) = s.call(Method::POST, &uri, Some(p)).await;
        assert_eq!(code, StatusCode::CREATED, "{body}");
    }
    for w in &mut watches {
        w.read_until("local-end").await;
        w.assert_no_foreign();
    }
    // And a protobuf list.
    let req = Request::builder()
        .uri("/api/v1/namespaces/a/pods")
        .header("accept", "application/vnd.kubernetes.protobuf")
        .body(Body::empty())
        .unwrap();
    let resp = s.router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        text.contains("local-end") && !text.contains("foreign-"),
        "{text}"
    );
}
