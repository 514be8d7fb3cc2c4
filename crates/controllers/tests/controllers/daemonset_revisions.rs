//! A DaemonSet's ControllerRevisions are upstream's: named `<ds>-<hash>`, labelled with the
//! template's labels and the hash, annotated as the DaemonSet, numbered 1, 2, ... and recording
//! the template byte for byte as upstream's kube-controller-manager (v1.28.4) does, since the
//! e2e suite's `daemon.Match` and `kubectl rollout undo` compare those bytes with the patch they
//! marshal from the DaemonSet. The expected bytes were read from upstream's control plane for the
//! same DaemonSet.

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use kube::{
    Api, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams},
    runtime::watcher,
};
use serde_json::json;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(60);
const HTTPD: &str = "registry.k8s.io/e2e-test-images/httpd:2.4.38-4";
const AGNHOST: &str = "registry.k8s.io/e2e-test-images/agnhost:2.45";

/// Upstream's `data` for the e2e suite's DaemonSet (`newDaemonSet` with a node selector) with
/// `image`.
fn upstream_data(image: &str) -> String {
    format!(
        r#"{{"spec":{{"template":{{"$patch":"replace","metadata":{{"creationTimestamp":null,"labels":{{"daemonset-name":"daemon-set"}}}},"spec":{{"containers":[{{"image":"{image}","imagePullPolicy":"IfNotPresent","name":"app","ports":[{{"containerPort":9376,"protocol":"TCP"}}],"resources":{{}},"securityContext":{{}},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}}],"dnsPolicy":"ClusterFirst","nodeSelector":{{"probe":"none"}},"restartPolicy":"Always","schedulerName":"default-scheduler","securityContext":{{}},"terminationGracePeriodSeconds":30}}}}}}}}"#
    )
}

/// The revisions the e2e suite lists (by the DaemonSet's label selector), once there are `n`;
/// listed again after every revision event.
async fn revisions(api: &Api<ControllerRevision>, n: usize) -> Vec<ControllerRevision> {
    let selector = "daemonset-name=daemon-set";
    let mut events = watcher(api.clone(), watcher::Config::default().labels(selector)).boxed();
    let wait = async {
        loop {
            let list = api
                .list(&ListParams::default().labels(selector))
                .await
                .unwrap()
                .items;
            if list.len() == n {
                return list;
            }
            events.next().await;
        }
    };
    tokio::time::timeout(TIMEOUT, wait)
        .await
        .unwrap_or_else(|_| panic!("{n} revisions listed by the DaemonSet's selector"))
}

#[tokio::test]
async fn daemonset_revisions_are_upstreams_byte_for_byte() {
    let server = embedded::Embedded::memory().await.unwrap();
    let client = server.client();
    let settings = controllers::Settings {
        enabled: controllers::Selection::only(["daemonset"]),
        ..Default::default()
    };
    let informers = informer::Informers::new(client.clone());
    let _controllers = tokio::spawn(controllers::run(&informers, &settings).unwrap());

    // As the e2e suite's client sends it (Go's zero values included).
    let ds: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "daemon-set", "annotations": {"note": "kept"}},
        "spec": {
            "selector": {"matchLabels": {"daemonset-name": "daemon-set"}},
            "template": {
                "metadata": {"labels": {"daemonset-name": "daemon-set"}},
                "spec": {
                    "nodeSelector": {"probe": "none"},
                    "containers": [{"name": "app", "image": HTTPD, "ports": [{"containerPort": 9376}],
                                    "resources": {}, "securityContext": {}}],
                    "securityContext": {}
                }
            },
            "updateStrategy": {"type": "RollingUpdate"}
        }
    }))
    .unwrap();
    let daemonsets: Api<DaemonSet> = Api::default_namespaced(client.clone());
    daemonsets
        .create(&PostParams::default(), &ds)
        .await
        .unwrap();
    let api: Api<ControllerRevision> = Api::default_namespaced(client.clone());

    let first = revisions(&api, 1).await.remove(0);
    let hash = first.labels()["controller-revision-hash"].clone();
    assert_eq!(first.name_any(), format!("daemon-set-{hash}"));
    assert_eq!(first.labels().len(), 2, "{:?}", first.labels());
    assert_eq!(first.labels()["daemonset-name"], "daemon-set");
    assert_eq!(first.annotations()["note"], "kept");
    assert_eq!(first.revision, 1);
    let owner = &first.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("DaemonSet", "daemon-set", Some(true))
    );
    let data = serde_json::to_string(&first.data.as_ref().unwrap().0).unwrap();
    assert_eq!(data, upstream_data(HTTPD));

    // The e2e suite's image update: a second revision, numbered 2, the first kept.
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": AGNHOST}]}}}});
    daemonsets
        .patch(
            "daemon-set",
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .await
        .unwrap();
    let both = revisions(&api, 2).await;
    let second = both
        .iter()
        .find(|r| r.name_any() != first.name_any())
        .unwrap();
    assert_eq!(second.revision, 2);
    let data = serde_json::to_string(&second.data.as_ref().unwrap().0).unwrap();
    assert_eq!(data, upstream_data(AGNHOST));
    let hash = &second.labels()["controller-revision-hash"];
    assert_eq!(second.name_any(), format!("daemon-set-{hash}"));
}
