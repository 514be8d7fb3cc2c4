//! Local APIServices: one for every built-in group/version the server serves, made once at start
//! (labelled `kube-aggregator.kubernetes.io/automanaged: onstart`), and one for every served
//! version of a CustomResourceDefinition, kept for as long as a definition serves it (labelled
//! `true`). Upstream's `autoregister` controller with kube-apiserver's `apiServicesToRegister`
//! and `crdregistration` controller feeding it.

use std::collections::{BTreeMap, HashSet};

use axum::http::Method;
use serde_json::{Value, json};

use super::{API_SERVICES, Change, Follow, GROUP, call};
use crate::{object, state::ApiServer};

/// The label that marks an APIService as the server's own.
pub(crate) const MANAGED_LABEL: &str = "kube-aggregator.kubernetes.io/automanaged";
/// Synced once, when the server starts: edits made later are left alone.
const ON_START: &str = "onstart";
/// Synced for as long as the server runs.
const CONTINUOUSLY: &str = "true";

/// kube-apiserver's `apiVersionPriorities` (v1.28): the group priority and version priority of
/// each built-in group/version. A group/version not listed gets no APIService, as upstream.
const PRIORITIES: &[(&str, &str, i64, i64)] = &[
    ("", "v1", 18000, 1),
    ("apps", "v1", 17800, 15),
    ("events.k8s.io", "v1", 17750, 15),
    ("events.k8s.io", "v1beta1", 17750, 5),
    ("authentication.k8s.io", "v1", 17700, 15),
    ("authentication.k8s.io", "v1beta1", 17700, 9),
    ("authentication.k8s.io", "v1alpha1", 17700, 1),
    ("authorization.k8s.io", "v1", 17600, 15),
    ("autoscaling", "v1", 17500, 15),
    ("autoscaling", "v2", 17500, 30),
    ("autoscaling", "v2beta1", 17500, 9),
    ("autoscaling", "v2beta2", 17500, 1),
    ("batch", "v1", 17400, 15),
    ("batch", "v1beta1", 17400, 9),
    ("batch", "v2alpha1", 17400, 9),
    ("certificates.k8s.io", "v1", 17300, 15),
    ("certificates.k8s.io", "v1alpha1", 17300, 1),
    ("networking.k8s.io", "v1", 17200, 15),
    ("networking.k8s.io", "v1alpha1", 17200, 1),
    ("policy", "v1", 17100, 15),
    ("policy", "v1beta1", 17100, 9),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
    ("storage.k8s.io", "v1", 16800, 15),
    ("storage.k8s.io", "v1beta1", 16800, 9),
    ("storage.k8s.io", "v1alpha1", 16800, 1),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("admissionregistration.k8s.io", "v1beta1", 16700, 12),
    ("admissionregistration.k8s.io", "v1alpha1", 16700, 9),
    ("scheduling.k8s.io", "v1", 16600, 15),
    ("coordination.k8s.io", "v1", 16500, 15),
    ("node.k8s.io", "v1", 16300, 15),
    ("node.k8s.io", "v1alpha1", 16300, 1),
    ("node.k8s.io", "v1beta1", 16300, 9),
    ("discovery.k8s.io", "v1", 16200, 15),
    ("discovery.k8s.io", "v1beta1", 16200, 12),
    ("flowcontrol.apiserver.k8s.io", "v1beta3", 16100, 18),
    ("flowcontrol.apiserver.k8s.io", "v1beta2", 16100, 15),
    ("flowcontrol.apiserver.k8s.io", "v1beta1", 16100, 12),
    ("flowcontrol.apiserver.k8s.io", "v1alpha1", 16100, 9),
    ("internal.apiserver.k8s.io", "v1alpha1", 16000, 9),
    ("resource.k8s.io", "v1alpha2", 15900, 9),
];

/// The group and version priority of a CustomResourceDefinition's APIServices (upstream's
/// crdregistration controller: low, and sorted by Kubernetes version order among themselves).
const CRD_PRIORITIES: (i64, i64) = (1000, 100);

fn api_service(group: &str, version: &str, priorities: (i64, i64), managed: &str) -> Value {
    let mut spec = json!({"version": version,
        "groupPriorityMinimum": priorities.0, "versionPriority": priorities.1});
    // The core group's is stored without one, as upstream writes an empty group.
    if !group.is_empty() {
        spec["group"] = json!(group);
    }
    json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": format!("{version}.{group}"), "labels": {MANAGED_LABEL: managed}},
        "spec": spec,
    })
}

/// The built-in group/versions' APIServices, for `served` group/versions.
fn built_in<'a>(served: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<Value> {
    let mut out = Vec::new();
    for (group, version) in served {
        if let Some((.., gp, vp)) = PRIORITIES
            .iter()
            .find(|(g, v, ..)| *g == group && *v == version)
        {
            out.push(api_service(group, version, (*gp, *vp), ON_START));
        }
    }
    out
}

/// The APIServices of the served versions of `crds`.
fn of_definitions(crds: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for crd in crds {
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        for v in crd["spec"]["versions"].as_array().into_iter().flatten() {
            if v["served"] != true {
                continue;
            }
            let version = v["name"].as_str().unwrap_or_default();
            out.push(api_service(group, version, CRD_PRIORITIES, CONTINUOUSLY));
        }
    }
    out
}

fn managed(obj: Option<&Value>) -> Option<&str> {
    obj?.pointer("/metadata/labels")?
        .get(MANAGED_LABEL)?
        .as_str()
}

/// What to do about one APIService name.
#[derive(Debug, PartialEq)]
enum Action {
    Nothing,
    Create(Value),
    /// The stored object with the desired spec.
    Update(Value),
    /// Delete the object with this uid.
    Delete(String),
}

/// Upstream's `checkAPIService`: `desired` is what the server wants under this name, `current`
/// what is stored; `synced` says the name was synced once already, `at_start` that an object of
/// that name existed when the server started.
fn decide(
    desired: Option<&Value>,
    current: Option<&Value>,
    synced: bool,
    at_start: bool,
) -> Action {
    match (desired, current) {
        (None, None) => Action::Nothing,
        (Some(d), _) if managed(Some(d)) == Some(ON_START) && synced => Action::Nothing,
        (Some(d), None) => Action::Create(d.clone()),
        (_, Some(c)) => {
            let kind = managed(Some(c));
            match kind {
                Some(ON_START) if !at_start || synced => Action::Nothing,
                Some(ON_START | CONTINUOUSLY) => match desired {
                    None => Action::Delete(
                        c.pointer("/metadata/uid")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                    ),
                    Some(d) if d["spec"] == c["spec"] => Action::Nothing,
                    Some(d) => {
                        let mut updated = c.clone();
                        updated["spec"] = d["spec"].clone();
                        Action::Update(updated)
                    }
                },
                // Not the server's: left alone.
                _ => Action::Nothing,
            }
        }
    }
}

struct Registration {
    /// The APIServices stored when the controller started.
    at_start: HashSet<String>,
    /// The names synced once.
    synced: HashSet<String>,
}

impl Registration {
    /// One pass over every name the server wants or manages; false when a write failed.
    async fn sync(&mut self, server: &ApiServer) -> bool {
        let served = crate::registry::builtin_kinds()
            .iter()
            .map(|k| (k.group.as_str(), k.version.as_str()));
        let crds: Vec<Value> = server
            .registry()
            .owner("apiextensions.k8s.io", "customresourcedefinitions")
            .map(|def| {
                server
                    .cache
                    .list(&def, None)
                    .0
                    .iter()
                    .map(|e| e.value())
                    .collect()
            })
            .unwrap_or_default();
        let mut desired: BTreeMap<String, Value> = BTreeMap::new();
        // A definition's group/version never replaces a built-in one (upstream refuses such
        // definitions; here the built-in wins).
        for d in of_definitions(&crds).into_iter().chain(built_in(served)) {
            desired.insert(object::name(&d).to_string(), d);
        }
        let current: BTreeMap<String, Value> = super::api_services(server)
            .into_iter()
            .map(|o| (object::name(&o).to_string(), o))
            .collect();
        let names: HashSet<&String> = desired
            .keys()
            .chain(
                current
                    .iter()
                    .filter(|(_, c)| managed(Some(c)).is_some())
                    .map(|(n, _)| n),
            )
            .collect();
        let mut ok = true;
        for name in names {
            let action = decide(
                desired.get(name),
                current.get(name),
                self.synced.contains(name),
                self.at_start.contains(name),
            );
            let (code, _) = match &action {
                Action::Nothing => (200, Value::Null),
                Action::Create(obj) => call(server, Method::POST, API_SERVICES, Some(obj)).await,
                Action::Update(obj) => {
                    let uri = format!("{API_SERVICES}/{name}");
                    call(server, Method::PUT, &uri, Some(obj)).await
                }
                Action::Delete(uid) => {
                    let uri = format!("{API_SERVICES}/{name}");
                    let options = json!({"kind": "DeleteOptions", "apiVersion": "v1",
                        "preconditions": {"uid": uid}});
                    call(server, Method::DELETE, &uri, Some(&options)).await
                }
            };
            // Upstream counts a lost race (exists already, gone, changed since) as done.
            if code < 300 || matches!(code, 404 | 409) {
                self.synced.insert(name.clone());
            } else {
                tracing::warn!(apiservice = %name, code, "autoregister: write failed");
                ok = false;
            }
        }
        ok
    }
}

/// Registers the local APIServices (before the server serves, as upstream's readiness waits for
/// them), then keeps them in the background as definitions come and go.
pub(super) async fn start(server: &ApiServer) {
    // Followed before the first pass, so that no change after it is missed.
    let (Some(crds), Some(apis)) = (
        Follow::new(server, "apiextensions.k8s.io", "customresourcedefinitions"),
        Follow::new(server, GROUP, "apiservices"),
    ) else {
        return;
    };
    let mut registration = Registration {
        at_start: super::api_services(server)
            .iter()
            .map(|o| object::name(o).to_string())
            .collect(),
        synced: HashSet::new(),
    };
    let ok = registration.sync(server).await;
    tokio::spawn(keep(server.clone(), registration, ok, crds, apis));
}

async fn keep(
    server: ApiServer,
    mut registration: Registration,
    mut ok: bool,
    mut crds: Follow,
    mut apis: Follow,
) {
    let mut delay = std::time::Duration::from_millis(100);
    loop {
        let retry = async move {
            if ok {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(delay).await;
        };
        tokio::select! {
            c = crds.changed() => drop(c),
            c = apis.changed() => {
                // The server's own writes come back here; only a managed or removed object can
                // call for another write.
                if let Change::One(e) = &c
                    && e.kind != crate::cache::EventType::Deleted
                    && managed(Some(&e.entry.value())).is_none()
                {
                    continue;
                }
            }
            () = retry => {}
        }
        ok = registration.sync(&server).await;
        delay = if ok {
            std::time::Duration::from_millis(100)
        } else {
            (delay * 2).min(std::time::Duration::from_secs(30))
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(name: &str, label: Option<&str>, spec: Value) -> Value {
        let mut o = json!({"metadata": {"name": name, "uid": "u1"}, "spec": spec});
        if let Some(l) = label {
            o["metadata"]["labels"] = json!({MANAGED_LABEL: l});
        }
        o
    }

    #[test]
    fn built_in_group_versions_get_upstreams_priorities_and_unknown_ones_none() {
        let got = built_in([
            ("", "v1"),
            ("apps", "v1"),
            ("autoscaling", "v2"),
            ("apiregistration.k8s.io", "v1"),
        ]);
        let names: Vec<&str> = got.iter().map(object::name).collect();
        assert_eq!(names, ["v1.", "v1.apps", "v2.autoscaling"]);
        assert_eq!(
            got[1]["spec"],
            json!({"group": "apps", "version": "v1", "groupPriorityMinimum": 17800, "versionPriority": 15})
        );
        assert_eq!(got[1]["metadata"]["labels"][MANAGED_LABEL], "onstart");
    }

    #[test]
    fn definitions_give_their_served_versions() {
        let crd = json!({"spec": {"group": "example.com", "versions": [
            {"name": "v1", "served": true}, {"name": "v2", "served": false}]}});
        let got = of_definitions(&[crd]);
        assert_eq!(got.len(), 1);
        assert_eq!(object::name(&got[0]), "v1.example.com");
        assert_eq!(got[0]["spec"]["groupPriorityMinimum"], 1000);
        assert_eq!(got[0]["metadata"]["labels"][MANAGED_LABEL], "true");
    }

    #[test]
    fn decisions_follow_upstreams_autoregister() {
        let want = api_service("apps", "v1", (17800, 15), ON_START);
        let crd = api_service("example.com", "v1", CRD_PRIORITIES, CONTINUOUSLY);
        let edited = stored(
            "v1.apps",
            Some(ON_START),
            json!({"group": "apps", "version": "v1"}),
        );
        // Missing: created, unless an on-start one was synced once already (then a delete sticks).
        assert_eq!(
            decide(Some(&want), None, false, false),
            Action::Create(want.clone())
        );
        assert_eq!(decide(Some(&want), None, true, true), Action::Nothing);
        assert_eq!(
            decide(Some(&crd), None, true, false),
            Action::Create(crd.clone())
        );
        // An on-start one stored before the server started is reset once; later edits stay.
        let Action::Update(u) = decide(Some(&want), Some(&edited), false, true) else {
            panic!("not updated");
        };
        assert_eq!(u["spec"], want["spec"]);
        assert_eq!(
            decide(Some(&want), Some(&edited), true, true),
            Action::Nothing
        );
        assert_eq!(
            decide(Some(&want), Some(&edited), false, false),
            Action::Nothing
        );
        // One no longer wanted goes (an on-start one only at the first sync).
        let old = stored("v1.example.com", Some(CONTINUOUSLY), json!({}));
        assert_eq!(
            decide(None, Some(&old), true, false),
            Action::Delete("u1".into())
        );
        let old_start = stored("v1alpha1.gone", Some(ON_START), json!({}));
        assert_eq!(
            decide(None, Some(&old_start), false, true),
            Action::Delete("u1".into())
        );
        // Someone else's is never touched.
        let theirs = stored("v1.apps", None, json!({"group": "apps"}));
        assert_eq!(
            decide(Some(&want), Some(&theirs), false, true),
            Action::Nothing
        );
    }
}
