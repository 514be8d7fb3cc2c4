//! A snapshot from a recorded cluster: the List that `kubectl get <kinds> -A -o json` prints,
//! read by the rules a live reading follows (the same kinds under the same keys, the same `-n`
//! scope, the same pod timings), so that a cluster this machine cannot reach, or one recorded as
//! test data, can be rehearsed on.
//!
//! A recording cannot say "forbidden" or "not served": a kind it holds no item of was either not
//! asked for or had none, and the file does not say which. Such a kind is noted under
//! `unreadable`, as a live reading notes what it may not list, rather than taken for empty.
//! Items of kinds the snapshot does not read (Services, Events, and Secrets and ConfigMaps on
//! purpose) are skipped, so no secret data in a recording reaches the document.

use super::{SOURCES, Snapshot, Unreadable, api_version, document, in_scope, plain, resource_name};
use anyhow::{Context, anyhow, bail};
use jiff::Timestamp;
use kube::core::DynamicObject;
use serde_json::{Map, Value};
use std::path::Path;

/// The command that records what the snapshot reads, as messages tell the user to run it.
pub fn command() -> String {
    let plurals: Vec<&str> = SOURCES.iter().map(|s| s.plural).collect();
    format!("kubectl get {} -A -o json > FILE", plurals.join(","))
}

/// Reads the recording at `path` into a snapshot of `namespaces` (all when empty).
pub fn read(path: &Path, namespaces: &[String]) -> anyhow::Result<Snapshot> {
    let taken_at = Timestamp::now();
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    snapshot_of(&text, &path.display().to_string(), namespaces, taken_at)
}

/// The snapshot of the recording `text`, which messages call `file`.
fn snapshot_of(
    text: &str,
    file: &str,
    namespaces: &[String],
    taken_at: Timestamp,
) -> anyhow::Result<Snapshot> {
    let fix = || format!("record it with `{}`", command());
    let list: Value =
        serde_json::from_str(text).map_err(|e| anyhow!("{file} is not JSON ({e}): {}", fix()))?;
    match list.get("kind").and_then(Value::as_str) {
        Some("List") => {}
        Some(kind) => bail!("{file} holds a {kind}, not a List: {}", fix()),
        None => bail!("{file} is not a List (it has no kind): {}", fix()),
    }
    let Some(items) = list.get("items").and_then(Value::as_array) else {
        bail!("{file} is a List without items: {}", fix());
    };

    // Per source, in SOURCES' order: None until the recording holds one of its kind.
    let mut read: Vec<Option<Vec<Value>>> = SOURCES.iter().map(|_| None).collect();
    for (index, item) in items.iter().enumerate() {
        let type_of = |field: &str| item.get(field).and_then(Value::as_str);
        let (Some(kind), Some(version)) = (type_of("kind"), type_of("apiVersion")) else {
            bail!(
                "{file}: item {index}{} has no kind and apiVersion, as kubectl prints every item: {}",
                named(item),
                fix()
            );
        };
        let Some(at) = SOURCES
            .iter()
            .position(|s| s.kind == kind && api_version(s) == version)
        else {
            continue;
        };
        let source = &SOURCES[at];
        let object: DynamicObject = serde_json::from_value(item.clone()).map_err(|e| {
            anyhow!(
                "{file}: item {index} ({kind}{}) is not a Kubernetes object ({e}): {}",
                named(item),
                fix()
            )
        })?;
        let object = plain(object, source);
        let kept = read[at].get_or_insert_with(Vec::new);
        if in_scope(source, &object, namespaces) {
            kept.push(object);
        }
    }

    let mut objects = Map::new();
    let mut unreadable = Vec::new();
    for (source, items) in SOURCES.iter().zip(read) {
        if items.is_none() {
            unreadable.push(Unreadable {
                resource: resource_name(source),
                namespace: None,
                reason: format!(
                    "the recording {file} holds no {} ({}): it was not recorded, or the cluster \
                     had none",
                    source.kind,
                    api_version(source)
                ),
            });
        }
        objects.insert(
            source.key.to_string(),
            Value::Array(items.unwrap_or_default()),
        );
    }
    Ok(document(taken_at, file, namespaces, objects, unreadable))
}

/// ` namespace/name` (or ` name`) of an item, when it has one, for messages.
fn named(item: &Value) -> String {
    let text = |p: &str| item.pointer(p).and_then(Value::as_str);
    match (text("/metadata/namespace"), text("/metadata/name")) {
        (Some(ns), Some(name)) => format!(" {ns}/{name}"),
        (None, Some(name)) => format!(" {name}"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at() -> Timestamp {
        Timestamp::UNIX_EPOCH
    }

    fn pod(ns: &str, name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "uid": format!("u-{name}"),
                "managedFields": [{"manager": "kube-scheduler", "operation": "Update"}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]},
            "status": {"phase": "Running", "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T10:00:00Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T10:00:04Z"}],
                "containerStatuses": [{"name": "c",
                    "state": {"running": {"startedAt": "2026-01-01T10:00:02Z"}}}]}})
    }

    fn named_object(api_version: &str, kind: &str, ns: Option<&str>, name: &str) -> Value {
        let mut o = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
        if let Some(ns) = ns {
            o["metadata"]["namespace"] = json!(ns);
        }
        o
    }

    fn list(items: Vec<Value>) -> String {
        json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
            "items": items})
        .to_string()
    }

    fn names(s: &Snapshot, key: &str) -> Vec<String> {
        s.objects[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|o| o.pointer("/metadata/name")?.as_str().map(str::to_string))
            .collect()
    }

    fn unreadable(s: &Snapshot) -> Vec<&str> {
        s.unreadable.iter().map(|u| u.resource.as_str()).collect()
    }

    #[test]
    fn secrets_config_maps_and_kinds_it_does_not_read_are_dropped() {
        let mut secret = named_object("v1", "Secret", Some("shop"), "db");
        secret["data"] = json!({"password": "aHVudGVyMg=="});
        let mut config = named_object("v1", "ConfigMap", Some("shop"), "settings");
        config["data"] = json!({"token": "in-a-config-map"});
        let text = list(vec![
            named_object("v1", "Node", None, "n1"),
            secret,
            config,
            named_object("example.com/v1", "Widget", Some("shop"), "w"),
            named_object("v1", "Service", Some("shop"), "web"),
            pod("shop", "web-1"),
        ]);
        let s = snapshot_of(&text, "rec.json", &[], at()).expect("a snapshot");
        let keys: Vec<&str> = s.objects.keys().map(String::as_str).collect();
        let expected: Vec<&str> = SOURCES.iter().map(|s| s.key).collect();
        assert_eq!(keys, expected);
        assert_eq!(names(&s, "nodes"), ["n1"]);
        assert_eq!(names(&s, "pods"), ["web-1"]);
        let written = serde_json::to_string(&s).expect("serializes");
        for never in [
            "aHVudGVyMg==",
            "in-a-config-map",
            "Widget",
            "Service",
            "Secret",
        ] {
            assert!(!written.contains(never), "{never} in {written}");
        }
        // As a live reading: the type filled in, no managed fields, the pod's timing.
        let p = &s.objects["pods"][0];
        assert_eq!(
            (&p["apiVersion"], &p["kind"]),
            (&json!("v1"), &json!("Pod"))
        );
        assert!(p.pointer("/metadata/managedFields").is_none(), "{p}");
        assert_eq!(
            s.timings["shop/web-1"],
            json!({"startedAfterSeconds": 2.0, "readyAfterSeconds": 4.0})
        );
        assert_eq!(s.server, "rec.json");
        assert_eq!(
            (s.api_version.as_str(), s.kind.as_str()),
            (super::super::API_VERSION, super::super::KIND)
        );
    }

    #[test]
    fn namespaces_limit_namespaced_objects_and_the_namespace_list() {
        let text = list(vec![
            named_object("v1", "Namespace", None, "shop"),
            named_object("v1", "Namespace", None, "kube-system"),
            named_object("v1", "Node", None, "n1"),
            named_object("storage.k8s.io/v1", "StorageClass", None, "standard"),
            pod("shop", "web-1"),
            pod("kube-system", "coredns-1"),
            named_object("apps/v1", "Deployment", Some("kube-system"), "coredns"),
        ]);
        let s = snapshot_of(&text, "rec.json", &["shop".into()], at()).expect("a snapshot");
        assert_eq!(s.namespaces, ["shop"]);
        assert_eq!(names(&s, "namespaces"), ["shop"]);
        assert_eq!(names(&s, "pods"), ["web-1"]);
        assert_eq!(s.timings.keys().collect::<Vec<_>>(), ["shop/web-1"]);
        // Cluster-scoped kinds whole.
        assert_eq!(names(&s, "nodes"), ["n1"]);
        assert_eq!(names(&s, "storageClasses"), ["standard"]);
        // Recorded, though none is in `shop`: empty, not unreadable.
        assert_eq!(names(&s, "deployments"), Vec::<String>::new());
        assert!(!unreadable(&s).contains(&"deployments.apps"), "{s:?}");
    }

    #[test]
    fn kinds_the_recording_lacks_are_unreadable_not_empty() {
        let text = list(vec![
            named_object("v1", "Node", None, "n1"),
            pod("shop", "web-1"),
            // A version the snapshot does not read counts as none.
            named_object("policy/v1beta1", "PodDisruptionBudget", Some("shop"), "old"),
        ]);
        let s = snapshot_of(&text, "rec.json", &[], at()).expect("a snapshot");
        let missing = unreadable(&s);
        assert_eq!(missing.len(), SOURCES.len() - 2, "{missing:?}");
        assert!(!missing.contains(&"nodes") && !missing.contains(&"pods"));
        assert_eq!(missing[0], "namespaces");
        let budgets = s
            .unreadable
            .iter()
            .find(|u| u.resource == "poddisruptionbudgets.policy")
            .expect("budgets noted");
        assert_eq!(budgets.namespace, None);
        assert_eq!(
            budgets.reason,
            "the recording rec.json holds no PodDisruptionBudget (policy/v1): it was not \
             recorded, or the cluster had none"
        );
        assert_eq!(names(&s, "podDisruptionBudgets"), Vec::<String>::new());
    }

    #[test]
    fn bad_recordings_are_refused_with_the_file_and_the_fix() {
        let fix = "record it with `kubectl get nodes,namespaces,deployments,replicasets,daemonsets,statefulsets,controllerrevisions,jobs,pods,poddisruptionbudgets,priorityclasses,resourcequotas,persistentvolumeclaims,persistentvolumes,storageclasses -A -o json > FILE`";
        let cases = [
            (
                "apiVersion: v1\nkind: List\n",
                "rec.json is not JSON (expected value at line 1 column 1): ",
            ),
            (
                &pod("shop", "web-1").to_string(),
                "rec.json holds a Pod, not a List: ",
            ),
            ("[]", "rec.json is not a List (it has no kind): "),
            (
                r#"{"kind": "List", "apiVersion": "v1"}"#,
                "rec.json is a List without items: ",
            ),
            (
                &list(vec![
                    pod("shop", "web-1"),
                    json!({"metadata": {"name": "x", "namespace": "shop"}}),
                ]),
                "rec.json: item 1 shop/x has no kind and apiVersion, as kubectl prints every \
                 item: ",
            ),
            (
                &list(vec![
                    json!({"apiVersion": "v1", "kind": "Pod", "metadata": 7}),
                ]),
                "rec.json: item 0 (Pod) is not a Kubernetes object (",
            ),
        ];
        for (text, message) in cases {
            let err = snapshot_of(text, "rec.json", &[], at())
                .expect_err(message)
                .to_string();
            assert!(err.starts_with(message), "{err}");
            assert!(err.ends_with(fix), "{err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
        let missing = read(Path::new("/nonexistent/rec.json"), &[]).expect_err("no file");
        assert!(
            missing
                .to_string()
                .starts_with("cannot read /nonexistent/rec.json"),
            "{missing}"
        );
    }

    #[test]
    fn a_recording_and_a_cluster_are_not_both_read() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: super::super::SnapshotArgs,
        }
        use clap::Parser;
        for other in [["--kubeconfig", "k"], ["--context", "c"]] {
            let parsed =
                Cli::try_parse_from(["snapshot", "--from", "rec.json", other[0], other[1]]);
            assert!(parsed.is_err(), "--from with {}", other[0]);
        }
        let parsed = Cli::try_parse_from(["snapshot", "--from", "rec.json", "-n", "shop"])
            .expect("--from with -n");
        assert_eq!(parsed.args.from.as_deref(), Some(Path::new("rec.json")));
    }
}
