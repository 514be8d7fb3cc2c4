//! The workload objects a controller keeps parsed beside the shared cache, and which of them a
//! child's change concerns (upstream's `resolveControllerRef` and `getPodDaemonSets` /
//! `getPodStatefulSets`, written once for the DaemonSet and StatefulSet controllers).
//!
//! The shared cache holds these objects as `DynamicObject`s, because rollwright's own fields
//! (`podUpdatePolicy`, `paused`) are not in the typed API; a controller reads each one once per
//! change into its own type ([`Owner::from_json`]) rather than once per sync.

use super::written::later;
use api::{pod::controller_of, selector::LabelSelector};
use informer::{Change, Key, Object, key as make_key};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use serde_json::Value;
use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
};

/// A workload object as its controller keeps it.
pub trait Owner: Sized + Send + Sync + 'static {
    /// The kind its children's controller references name.
    const KIND: &'static str;

    /// Reads it from its JSON, with what the controller derives from it.
    fn from_json(value: Value) -> Result<Self, String>;

    /// Its metadata.
    fn meta(&self) -> &ObjectMeta;

    /// Its selector, parsed.
    fn selector(&self) -> &LabelSelector;
}

/// Parses a workload's `spec.selector` (no spec: the empty selector, which adopts nothing).
pub fn parse_selector(
    selector: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
) -> Result<LabelSelector, String> {
    LabelSelector::from_label_selector(&selector.cloned().unwrap_or_default())
        .map_err(|e| e.to_string())
}

/// Whether `written`, an object as a write of its status returned it, is `held` with only its
/// status changed: the same generation, labels, annotations and deletion. A write that went
/// through a conflict onto a user's change is not, and waits for the watch, which brings that
/// change with it.
pub fn same_but_status(written: &ObjectMeta, held: &ObjectMeta) -> bool {
    written.uid == held.uid
        && written.generation == held.generation
        && written.labels == held.labels
        && written.annotations == held.annotations
        && written.deletion_timestamp == held.deletion_timestamp
}

/// The owners of one kind, by `namespace/name`.
pub struct Owners<O> {
    by_key: RwLock<HashMap<Key, Arc<O>>>,
}

impl<O> Default for Owners<O> {
    fn default() -> Self {
        Self {
            by_key: RwLock::default(),
        }
    }
}

impl<O: Owner> Owners<O> {
    /// The owner under `key`, if held.
    pub fn get(&self, key: &str) -> Option<Arc<O>> {
        self.by_key
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
    }

    /// Every owner held.
    pub fn all(&self) -> Vec<Arc<O>> {
        self.by_key
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Applies a change of the owners' informer and returns the key to sync. An object that
    /// does not read is dropped with a warning (its controller cannot act on it).
    pub fn apply(&self, change: &Change<DynamicObject>) -> Key {
        let obj = change.object();
        let key = obj.key();
        let parsed = match change {
            Change::Deleted(_) => None,
            Change::Added(_) | Change::Updated { .. } => {
                let object: &DynamicObject = obj;
                match serde_json::to_value(object)
                    .map_err(|e| e.to_string())
                    .and_then(O::from_json)
                {
                    Ok(o) => Some(Arc::new(o)),
                    Err(e) => {
                        tracing::warn!(kind = O::KIND, object = %key, error = %e, "ignoring an unreadable object");
                        None
                    }
                }
            }
        };
        let mut by_key = self.by_key.write().unwrap_or_else(|e| e.into_inner());
        match parsed {
            // The watch catching up with a write of the controller's own it already holds.
            Some(o)
                if by_key
                    .get(&key)
                    .is_some_and(|held| later(held.meta(), o.meta())) => {}
            Some(o) => {
                by_key.insert(key.clone(), o);
            }
            None => {
                by_key.remove(&key);
            }
        };
        key
    }

    /// Holds `newer` in place of the owner held under its key, if it is a later version of it:
    /// what the controller's own status write returned, before the watch delivers it. A sync
    /// that runs in between (on the next pod event) then compares with the status just written
    /// and writes over it, instead of writing over the one before with a resourceVersion the
    /// server has moved past: a 409, a GET and a second write, three requests from the
    /// controller's rate limit where one would do (issue 39: 45 conflicts in a 100-node
    /// DaemonSet update under 20/30, upstream's controller 17).
    pub fn hold_newer(&self, newer: O) {
        let key = make_key(
            newer.meta().namespace.as_deref().unwrap_or_default(),
            newer.meta().name.as_deref().unwrap_or_default(),
        );
        let mut by_key = self.by_key.write().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = by_key.get_mut(&key)
            && later(newer.meta(), held.meta())
        {
            *held = Arc::new(newer);
        }
    }

    /// The owner a child's controller reference names, if held with the same uid (a recreated
    /// owner of the same name does not inherit the old one's children).
    pub fn resolve(&self, child: &ObjectMeta) -> Option<Key> {
        let r = controller_of(child)?;
        if r.kind != O::KIND {
            return None;
        }
        let key = make_key(child.namespace.as_deref().unwrap_or_default(), &r.name);
        self.get(&key)
            .filter(|o| o.meta().uid.as_deref() == Some(r.uid.as_str()))
            .map(|_| key)
    }

    /// Owners in the child's namespace whose (non-empty) selector matches its labels: who may
    /// adopt it.
    pub fn matching(&self, child: &ObjectMeta) -> Vec<Key> {
        let namespace = child.namespace.as_deref();
        self.all()
            .iter()
            .filter(|o| o.meta().namespace.as_deref() == namespace)
            .filter(|o| {
                !o.selector().is_empty() && o.selector().matches_labels(child.labels.as_ref())
            })
            .map(|o| {
                make_key(
                    o.meta().namespace.as_deref().unwrap_or_default(),
                    o.meta().name.as_deref().unwrap_or_default(),
                )
            })
            .collect()
    }

    /// The owners a child's change concerns, as upstream's `addPod`/`updatePod`/`deletePod`:
    /// its controller (before and after, if that changed), or, for an orphan that appeared,
    /// changed its labels or was just released, every owner that may adopt it. A relist that
    /// delivers a version already held concerns nobody.
    pub fn affected<K: Object>(&self, change: &Change<K>) -> Vec<Key> {
        match change {
            Change::Added(child) => match self.resolve(child.meta()) {
                Some(key) => vec![key],
                None if controller_of(child.meta()).is_none() => self.matching(child.meta()),
                None => Vec::new(),
            },
            Change::Updated { .. } if change.is_resync() => Vec::new(),
            Change::Updated { old, new } => {
                let (old, new) = (old.meta(), new.meta());
                let mut keys: Vec<Key> = self.resolve(new).into_iter().collect();
                if let Some(key) = self.resolve(old).filter(|k| !keys.contains(k)) {
                    keys.push(key);
                }
                if controller_of(new).is_none()
                    && (old.labels != new.labels || controller_of(old).is_some())
                {
                    for key in self.matching(new) {
                        if !keys.contains(&key) {
                            keys.push(key);
                        }
                    }
                }
                keys
            }
            Change::Deleted(child) => self.resolve(child.meta()).into_iter().collect(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail by panicking")]
mod tests {
    use super::*;
    use informer::Cached;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    struct Web {
        meta: ObjectMeta,
        selector: LabelSelector,
    }

    impl Owner for Web {
        const KIND: &'static str = "StatefulSet";

        fn from_json(value: Value) -> Result<Self, String> {
            let meta: ObjectMeta =
                serde_json::from_value(value["metadata"].clone()).map_err(|e| e.to_string())?;
            let selector = serde_json::from_value(value["spec"]["selector"].clone())
                .map_err(|e| e.to_string())?;
            let selector =
                LabelSelector::from_label_selector(&selector).map_err(|e| e.to_string())?;
            Ok(Self { meta, selector })
        }

        fn meta(&self) -> &ObjectMeta {
            &self.meta
        }

        fn selector(&self) -> &LabelSelector {
            &self.selector
        }
    }

    fn owner(name: &str, uid: &str, app: &str) -> Change<DynamicObject> {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": "ns", "uid": uid},
            "spec": {"selector": {"matchLabels": {"app": app}}}
        }))
        .unwrap();
        Change::Added(Cached::shared(obj))
    }

    fn pod(app: &str, controller: Option<(&str, &str)>, rv: &str) -> Arc<Cached<Pod>> {
        let refs: Vec<Value> = controller
            .map(|(name, uid)| {
                json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name, "uid": uid, "controller": true})
            })
            .into_iter()
            .collect();
        Cached::shared(
            serde_json::from_value(json!({
                "metadata": {"name": "p", "namespace": "ns", "resourceVersion": rv,
                             "labels": {"app": app}, "ownerReferences": refs}
            }))
            .unwrap(),
        )
    }

    fn web_at(uid: &str, rv: &str) -> Web {
        let Change::Added(obj) = owner("web", uid, "web") else {
            unreachable!()
        };
        let mut value = serde_json::to_value(obj.object()).unwrap();
        value["metadata"]["resourceVersion"] = json!(rv);
        Web::from_json(value).unwrap()
    }

    fn updated(web: Web) -> Change<DynamicObject> {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": web.meta,
            "spec": {"selector": {"matchLabels": {"app": "web"}}}
        }))
        .unwrap();
        Change::Updated {
            old: Cached::shared(obj.clone()),
            new: Cached::shared(obj),
        }
    }

    fn held_version(owners: &Owners<Web>) -> (String, String) {
        let held = owners.get("ns/web").unwrap();
        (
            held.meta.uid.clone().unwrap(),
            held.meta.resource_version.clone().unwrap(),
        )
    }

    #[test]
    fn a_write_of_its_own_is_held_until_the_watch_moves_past_it() {
        let owners: Owners<Web> = Owners::default();
        owners.apply(&updated(web_at("u1", "5")));
        // The status write's answer, before its watch event.
        owners.hold_newer(web_at("u1", "7"));
        assert_eq!(held_version(&owners), ("u1".into(), "7".into()));
        // The watch still delivering an older version does not undo it; its own event and a
        // later write (the user's) replace it.
        assert_eq!(owners.apply(&updated(web_at("u1", "6"))), "ns/web");
        assert_eq!(held_version(&owners), ("u1".into(), "7".into()));
        owners.apply(&updated(web_at("u1", "7")));
        owners.apply(&updated(web_at("u1", "9")));
        assert_eq!(held_version(&owners), ("u1".into(), "9".into()));
        // An answer older than what the watch already gave is not held.
        owners.hold_newer(web_at("u1", "8"));
        assert_eq!(held_version(&owners), ("u1".into(), "9".into()));
        // A recreated object is another object, whatever its version; a version that is not a
        // number is never later.
        owners.apply(&updated(web_at("u2", "3")));
        assert_eq!(held_version(&owners), ("u2".into(), "3".into()));
        owners.hold_newer(web_at("u1", "12"));
        owners.hold_newer(web_at("u2", "opaque"));
        assert_eq!(held_version(&owners), ("u2".into(), "3".into()));
        // Nothing is held for an object gone.
        let Change::Added(obj) = owner("web", "u2", "web") else {
            unreachable!()
        };
        owners.apply(&Change::Deleted(obj));
        owners.hold_newer(web_at("u2", "4"));
        assert!(owners.get("ns/web").is_none());
    }

    #[test]
    fn a_change_concerns_its_controller_or_who_may_adopt_it() {
        let owners: Owners<Web> = Owners::default();
        assert_eq!(owners.apply(&owner("web", "u1", "web")), "ns/web");
        owners.apply(&owner("db", "u2", "db"));
        let ours = Some(("web", "u1"));
        let cases: Vec<(&str, Change<Pod>, Vec<&str>)> = vec![
            (
                "added, controlled",
                Change::Added(pod("web", ours, "1")),
                vec!["ns/web"],
            ),
            (
                "added, controlled by a former owner of the name (other uid)",
                Change::Added(pod("web", Some(("web", "old")), "1")),
                vec![],
            ),
            (
                "added orphan",
                Change::Added(pod("db", None, "1")),
                vec!["ns/db"],
            ),
            (
                "relist of the same version",
                Change::Updated {
                    old: pod("web", ours, "1"),
                    new: pod("web", ours, "1"),
                },
                vec![],
            ),
            (
                "released: its owner and who may adopt it",
                Change::Updated {
                    old: pod("db", ours, "1"),
                    new: pod("db", None, "2"),
                },
                vec!["ns/web", "ns/db"],
            ),
            (
                "an orphan whose labels did not change",
                Change::Updated {
                    old: pod("db", None, "1"),
                    new: pod("db", None, "2"),
                },
                vec![],
            ),
            (
                "deleted",
                Change::Deleted(pod("web", ours, "1")),
                vec!["ns/web"],
            ),
            (
                "deleted orphan",
                Change::Deleted(pod("web", None, "1")),
                vec![],
            ),
        ];
        for (name, change, want) in cases {
            assert_eq!(owners.affected(&change), want, "{name}");
        }
        let deleted = match owner("web", "u1", "web") {
            Change::Added(o) => Change::Deleted(o),
            other => other,
        };
        owners.apply(&deleted);
        assert!(owners.get("ns/web").is_none());
        assert!(
            owners
                .affected(&Change::Added(pod("web", ours, "1")))
                .is_empty()
        );
    }
}
