//! Large lists are bounded in memory (issue 36): a list is written as its client reads it, so
//! many concurrent slow readers of a large collection do not each make the server hold a copy of
//! it; and what they read is what a list built whole was, byte for byte, page by page.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common::{self, DEADLINE, Server};
use axum::{
    body::Body,
    http::{Method, Request, StatusCode},
};
use bytes::Bytes;
use futures::{StreamExt, stream};
use serde_json::{Value, json};
use tower::ServiceExt;

/// The namespace the large collection lives in.
const NS: &str = "big";

/// `n` ConfigMaps of about `size` bytes each in [`NS`], written straight to the store (the API's
/// admission would take far longer, and is not what is tested), labelled by parity; the
/// server's cache has them all once this returns (a list without `resourceVersion` is
/// consistent).
async fn fill(s: &Server, n: usize, size: usize) {
    let filler = "x".repeat(size);
    stream::iter(0..n)
        .map(|i| {
            let store = s.store.clone();
            let obj = json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {
                    "name": format!("cm-{i:05}"), "namespace": NS, "uid": format!("uid-{i}"),
                    "labels": {"parity": if i % 2 == 0 { "even" } else { "odd" }},
                },
                "data": {"filler": filler},
            });
            async move {
                use store::Store;
                store
                    .create(
                        &format!("/registry/core/configmaps/{NS}/cm-{i:05}"),
                        Bytes::from(obj.to_string()),
                    )
                    .await
                    .unwrap();
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    let (code, list) = s
        .call(
            Method::GET,
            &format!("/api/v1/namespaces/{NS}/configmaps?limit=1"),
            None,
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{list}");
    assert_eq!(list["metadata"]["remainingItemCount"], json!(n - 1));
}

/// The server's `rollwright_list_response_buffered_bytes`: bytes of list bodies rendered and
/// not yet dropped.
async fn list_buffered(s: &Server) -> i64 {
    let (_, text) = common::call_raw(&s.router, Method::GET, "/metrics", None).await;
    let text = String::from_utf8(text.to_vec()).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("rollwright_list_response_buffered_bytes "))
        .unwrap_or_else(|| panic!("no list buffer gauge in {text}"))
        .trim()
        .parse()
        .unwrap()
}

/// A GET whose body is read as the caller asks.
async fn open(s: &Server, uri: &str, accept: &str) -> axum::body::BodyDataStream {
    let req = Request::builder()
        .uri(uri)
        .header("accept", accept)
        .body(Body::empty())
        .unwrap();
    let resp = s.router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK, "{uri}");
    resp.into_body().into_data_stream()
}

/// One GET's whole body.
async fn get(s: &Server, uri: &str, accept: &str) -> Vec<u8> {
    let mut body = open(s, uri, accept).await;
    let mut out = Vec::new();
    while let Some(chunk) = body.next().await {
        out.extend_from_slice(&chunk.unwrap());
    }
    out
}

#[tokio::test]
async fn concurrent_slow_readers_of_a_large_list_hold_a_bounded_amount_of_memory() {
    const OBJECTS: usize = 2_000;
    const READERS: usize = 40;
    let s = Server::start().await;
    fill(&s, OBJECTS, 10_000).await;
    let collection = format!("/api/v1/namespaces/{NS}/configmaps");
    let reference = get(&s, &collection, "application/json").await;
    assert!(reference.len() > 20_000_000, "{}", reference.len());
    assert_eq!(list_buffered(&s).await, 0, "a finished list holds nothing");

    // Forty clients each start the list, read about a megabyte of it and stop: slow readers all
    // in the middle of their bodies at once. A reader keeps the chunk it stopped in (what a
    // connection holds of a body its client has not read yet) and lets go of the ones before.
    let mut readers = Vec::new();
    for _ in 0..READERS {
        let mut body = open(&s, &collection, "application/json").await;
        let mut read = 0;
        let holding = loop {
            let chunk = body.next().await.unwrap().unwrap();
            assert_eq!(chunk, reference[read..read + chunk.len()]);
            read += chunk.len();
            if read >= 1_000_000 {
                break chunk;
            }
        };
        readers.push((body, read, holding));
    }
    let held = list_buffered(&s).await;
    // A list built whole holds all of itself until its last byte is read (40 × 20 MB here); a
    // streamed one holds what it has rendered that its reader has not taken, a chunk or so.
    let bound = (READERS * 256 * 1024) as i64;
    assert!(
        held <= bound,
        "{READERS} slow lists of {} bytes hold {held} bytes of rendered body, over the bound of {bound}",
        reference.len()
    );

    // Each reader then reads on to the end and gets the whole list.
    let reference = &reference;
    let read = tokio::time::timeout(
        DEADLINE,
        stream::iter(readers)
            .map(|(mut body, mut read, holding)| async move {
                drop(holding);
                while let Some(chunk) = body.next().await {
                    let chunk = chunk.unwrap();
                    assert_eq!(chunk, reference[read..read + chunk.len()]);
                    read += chunk.len();
                }
                read
            })
            .buffer_unordered(READERS)
            .collect::<Vec<_>>(),
    )
    .await
    .unwrap();
    assert_eq!(read, vec![reference.len(); READERS]);
    let list: Value = serde_json::from_slice(reference).unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), OBJECTS);
    assert_eq!(list_buffered(&s).await, 0, "finished lists hold nothing");
}

/// What a list built whole answers: the head with `metadata`, then each item as a GET of it
/// serves it (the stored JSON), separated by commas.
fn built_whole(metadata: &Value, items: &[Vec<u8>]) -> Vec<u8> {
    built_whole_as("ConfigMapList", "v1", metadata, items)
}

/// [`built_whole`] of another kind.
fn built_whole_as(kind: &str, api_version: &str, metadata: &Value, items: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!(
        "{{\"kind\":\"{kind}\",\"apiVersion\":\"{api_version}\",\"metadata\":{metadata},\"items\":["
    )
    .into_bytes();
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item);
    }
    out.extend_from_slice(b"]}");
    out
}

#[tokio::test]
async fn a_streamed_list_is_the_list_built_whole_with_pages_and_selectors() {
    const OBJECTS: usize = 600;
    let s = Server::start().await;
    fill(&s, OBJECTS, 2_000).await;
    let mut stored = Vec::new();
    for i in 0..OBJECTS {
        let uri = format!("/api/v1/namespaces/{NS}/configmaps/cm-{i:05}");
        stored.push(get(&s, &uri, "application/json").await);
    }

    // Unpaged, whole collection and with a label selector.
    let collection = format!("/api/v1/namespaces/{NS}/configmaps");
    for (query, keep) in [("", 1), ("?labelSelector=parity%3Deven", 2)] {
        let body = get(&s, &format!("{collection}{query}"), "application/json").await;
        let list: Value = serde_json::from_slice(&body).unwrap();
        let items: Vec<Vec<u8>> = stored.iter().step_by(keep).cloned().collect();
        assert_eq!(
            String::from_utf8(body).unwrap(),
            String::from_utf8(built_whole(&list["metadata"], &items)).unwrap(),
            "{query}"
        );
        assert_eq!(list["metadata"].as_object().unwrap().len(), 1, "{list:?}");
    }

    // Paged, with and without a selector: every page is the list built whole of its items, the
    // pages together are the collection, and `remainingItemCount` counts down when unfiltered.
    for (query, keep) in [("", 1), ("&labelSelector=parity%3Dodd", 2)] {
        let items: Vec<Vec<u8>> = stored
            .iter()
            .skip(keep - 1)
            .step_by(keep)
            .cloned()
            .collect();
        let mut token = String::new();
        let mut seen = 0;
        loop {
            let uri = format!("{collection}?limit=70{query}&continue={token}");
            let body = get(&s, &uri, "application/json").await;
            let page: Value = serde_json::from_slice(&body).unwrap();
            let n = page["items"].as_array().unwrap().len();
            assert_eq!(
                body,
                built_whole(&page["metadata"], &items[seen..seen + n]),
                "{uri}"
            );
            seen += n;
            match page["metadata"]["continue"].as_str() {
                Some(next) => {
                    assert_eq!(n, 70);
                    let remaining = &page["metadata"]["remainingItemCount"];
                    if keep == 1 {
                        assert_eq!(remaining, &json!(items.len() - seen), "{uri}");
                    } else {
                        assert!(remaining.is_null(), "{uri}: {remaining}");
                    }
                    token = next.to_string();
                }
                None => break,
            }
        }
        assert_eq!(seen, items.len(), "{query}");
    }

    // A Table and a metadata-only list of the whole collection (rendered item by item, and
    // streamed at this size) have a row or an item for each object, in order, and the same rows
    // as a small page of the same list (built whole).
    let table_accept = "application/json;as=Table;v=v1;g=meta.k8s.io";
    let meta_accept = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io";
    for (accept, field) in [(table_accept, "rows"), (meta_accept, "items")] {
        let whole: Value = serde_json::from_slice(&get(&s, &collection, accept).await).unwrap();
        let rows = whole[field].as_array().unwrap();
        assert_eq!(rows.len(), OBJECTS, "{accept}");
        let small: Value =
            serde_json::from_slice(&get(&s, &format!("{collection}?limit=5"), accept).await)
                .unwrap();
        assert_eq!(&rows[..5], small[field].as_array().unwrap(), "{accept}");
        let name = |v: &Value| {
            let obj = if field == "rows" { &v["object"] } else { v };
            obj["metadata"]["name"].as_str().unwrap().to_string()
        };
        let names: Vec<String> = rows.iter().map(name).collect();
        let expected: Vec<String> = (0..OBJECTS).map(|i| format!("cm-{i:05}")).collect();
        assert_eq!(names, expected, "{accept}");
        if field == "rows" {
            assert_eq!(whole["columnDefinitions"], small["columnDefinitions"]);
        }
    }

    // As of an earlier revision (`resourceVersionMatch=Exact`), after one object changed and
    // one went: the list as it was then, byte for byte.
    let before = get(&s, &collection, "application/json").await;
    let rv = serde_json::from_slice::<Value>(&before).unwrap()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    {
        use store::Store;
        let key = |i: usize| format!("/registry/core/configmaps/{NS}/cm-{i:05}");
        s.store
            .update(
                &key(3),
                Bytes::from(json!({"metadata": {"name": "cm-00003", "namespace": NS}}).to_string()),
                None,
            )
            .await
            .unwrap();
        s.store.delete(&key(4), None).await.unwrap();
    }
    let now = get(&s, &collection, "application/json").await;
    assert_ne!(now, before);
    let exact = format!("{collection}?resourceVersion={rv}&resourceVersionMatch=Exact");
    assert_eq!(get(&s, &exact, "application/json").await, before);

    // A view converts each object on the way out (events.k8s.io/v1 of core Events), streamed at
    // this size: the items as a GET of each serves it.
    {
        use store::Store;
        for i in 0..150 {
            let ev = json!({
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": format!("ev-{i:03}"), "namespace": NS, "uid": format!("ev-{i}")},
                "involvedObject": {"kind": "ConfigMap", "namespace": NS, "name": "cm-00000"},
                "reason": "Filled", "message": "y".repeat(2_000), "type": "Normal",
            });
            s.store
                .create(
                    &format!("/registry/core/events/{NS}/ev-{i:03}"),
                    Bytes::from(ev.to_string()),
                )
                .await
                .unwrap();
        }
    }
    let events = format!("/apis/events.k8s.io/v1/namespaces/{NS}/events");
    let body = get(&s, &events, "application/json").await;
    let list: Value = serde_json::from_slice(&body).unwrap();
    let mut items = Vec::new();
    for i in 0..150 {
        items.push(get(&s, &format!("{events}/ev-{i:03}"), "application/json").await);
    }
    assert!(items.iter().map(Vec::len).sum::<usize>() > 256 * 1024);
    assert_eq!(
        String::from_utf8(body).unwrap(),
        String::from_utf8(built_whole_as(
            "EventList",
            "events.k8s.io/v1",
            &list["metadata"],
            &items
        ))
        .unwrap()
    );
}
