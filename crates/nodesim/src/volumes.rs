//! Pods wait for their volumes, as a kubelet does not start a pod until every claim it mounts is
//! bound and attached: a bound pod whose PersistentVolumeClaims are not all `Bound` is held here
//! (no status written, so it shows `Pending`) and released the moment the last one binds. A pod
//! deleted while it waits is released at once, so its deletion completes.

use crate::pod::PodView;
use std::collections::{HashMap, HashSet};

/// `namespace/name` of a claim.
fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The pods held for their claims, and which claims are bound.
#[derive(Debug, Default)]
pub struct VolumeGate {
    bound: HashSet<String>,
    waiting: HashMap<String, PodView>,
    by_claim: HashMap<String, HashSet<String>>,
}

impl VolumeGate {
    fn ready(&self, view: &PodView) -> bool {
        view.deletion_grace.is_some()
            || view
                .claims
                .iter()
                .all(|c| self.bound.contains(&key(&view.namespace, c)))
    }

    /// A pod seen for the first time (or again while held): returns it if it may start now,
    /// else holds it.
    pub fn admit(&mut self, view: PodView) -> Option<PodView> {
        let uid = view.uid.clone();
        if self.ready(&view) {
            self.forget(&uid);
            return Some(view);
        }
        for c in &view.claims {
            self.by_claim
                .entry(key(&view.namespace, c))
                .or_default()
                .insert(uid.clone());
        }
        self.waiting.insert(uid, view);
        None
    }

    /// A claim changed: returns the pods it was the last unbound claim of.
    pub fn claim_changed(&mut self, namespace: &str, name: &str, bound: bool) -> Vec<PodView> {
        let k = key(namespace, name);
        if !bound {
            self.bound.remove(&k);
            return Vec::new();
        }
        self.bound.insert(k.clone());
        let uids: Vec<String> = self
            .by_claim
            .get(&k)
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        let released: Vec<String> = uids
            .into_iter()
            .filter(|u| self.waiting.get(u).is_some_and(|v| self.ready(v)))
            .collect();
        released
            .iter()
            .filter_map(|u| {
                let view = self.waiting.get(u).cloned();
                self.forget(u);
                view
            })
            .collect()
    }

    /// Whether a pod is held.
    pub fn holds(&self, uid: &str) -> bool {
        self.waiting.contains_key(uid)
    }

    /// The pods held.
    pub fn held(&self) -> impl Iterator<Item = &String> {
        self.waiting.keys()
    }

    /// Drops a pod (deleted, or released).
    pub fn forget(&mut self, uid: &str) {
        let Some(view) = self.waiting.remove(uid) else {
            return;
        };
        for c in &view.claims {
            let k = key(&view.namespace, c);
            if let Some(set) = self.by_claim.get_mut(&k) {
                set.remove(uid);
                if set.is_empty() {
                    self.by_claim.remove(&k);
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn view(uid: &str, claims: &[&str]) -> PodView {
        PodView {
            namespace: "ns".into(),
            name: uid.into(),
            uid: uid.into(),
            node: "node-0".into(),
            init: vec![],
            containers: vec![],
            restart_policy: "Always".into(),
            deletion_grace: None,
            labels: Default::default(),
            fault_annotation: None,
            exit_code: None,
            scheduled: None,
            status: None,
            claims: claims.iter().map(|c| c.to_string()).collect(),
            service_account: "default".into(),
            tokens: vec![],
            mounts: vec![],
            host_network: false,
        }
    }

    #[test]
    fn a_pod_starts_once_every_claim_is_bound() {
        let mut g = VolumeGate::default();
        assert!(g.admit(view("free", &[])).is_some());
        assert!(g.admit(view("p", &["a", "b"])).is_none());
        assert!(g.holds("p"));
        assert!(g.claim_changed("ns", "a", true).is_empty());
        assert!(g.claim_changed("other", "b", true).is_empty());
        let released = g.claim_changed("ns", "b", true);
        assert_eq!(released.len(), 1);
        assert!(!g.holds("p"));
        // Bound claims stay known: the next pod using them starts at once.
        assert!(g.admit(view("q", &["a"])).is_some());
        g.claim_changed("ns", "a", false);
        assert!(g.admit(view("r", &["a"])).is_none());
    }

    #[test]
    fn a_held_pod_that_is_deleted_is_released() {
        let mut g = VolumeGate::default();
        assert!(g.admit(view("p", &["a"])).is_none());
        let mut deleting = view("p", &["a"]);
        deleting.deletion_grace = Some(30);
        assert!(g.admit(deleting).is_some());
        assert!(!g.holds("p"));
        assert!(g.claim_changed("ns", "a", true).is_empty());
    }
}
