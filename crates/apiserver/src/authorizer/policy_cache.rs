//! The RBAC snapshot authorization decides over, kept with the cache's change counts of the
//! four RBAC kinds: a request compares four counters and rebuilds only when one moved.

use crate::cache::{Cache, ChangeCount};
use authz::rbac::Policy;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use serde::de::DeserializeOwned;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

/// The RBAC kinds the snapshot is built from, as (group, plural).
const RBAC_KINDS: [&str; 4] = [
    "clusterroles",
    "roles",
    "clusterrolebindings",
    "rolebindings",
];
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The change counts of [`RBAC_KINDS`], in that order.
type Counts = [u64; RBAC_KINDS.len()];

/// The server's RBAC snapshot and the change counts of the RBAC kinds it was built at.
#[derive(Default)]
pub(crate) struct PolicyCache {
    /// The RBAC kinds' change counts, taken from the cache on first use.
    counts: OnceLock<Vec<ChangeCount>>,
    built: RwLock<Option<Built>>,
    /// Held while rebuilding, so that requests arriving together after a change rebuild once.
    rebuild: Mutex<()>,
}

struct Built {
    policy: Arc<Policy>,
    /// The counts read before the objects were.
    at: Counts,
}

impl PolicyCache {
    /// The current snapshot, rebuilt first if an RBAC object changed. The change counts are
    /// read before the objects, so a change landing during a build makes the next request
    /// build again.
    pub(crate) fn policy(&self, cache: &Cache) -> Arc<Policy> {
        let at = self.now(cache);
        if let Some(policy) = self.current(&at) {
            return policy;
        }
        let _rebuilding = self.rebuild.lock().unwrap_or_else(|e| e.into_inner());
        // Another request may have rebuilt while this one waited.
        let at = self.now(cache);
        if let Some(policy) = self.current(&at) {
            return policy;
        }
        let policy = Arc::new(build_policy(cache));
        *self.built.write().unwrap_or_else(|e| e.into_inner()) = Some(Built {
            policy: policy.clone(),
            at,
        });
        policy
    }

    /// The RBAC kinds' change counts now (read on every request: no allocation).
    fn now(&self, cache: &Cache) -> Counts {
        let counts = self.counts.get_or_init(|| {
            RBAC_KINDS
                .iter()
                .filter_map(|plural| cache.registry().owner(RBAC_GROUP, plural))
                .map(|def| cache.changes(&def))
                .collect()
        });
        let mut now = [0; RBAC_KINDS.len()];
        for (n, count) in now.iter_mut().zip(counts) {
            *n = count.get();
        }
        now
    }

    /// The snapshot, if none of the RBAC kinds changed since it was built at `at`.
    fn current(&self, at: &Counts) -> Option<Arc<Policy>> {
        self.built
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|b| b.at == *at)
            .map(|b| b.policy.clone())
    }
}

fn objects<T: DeserializeOwned>(cache: &Cache, plural: &str) -> Vec<T> {
    let Some(def) = cache.registry().owner(RBAC_GROUP, plural) else {
        return Vec::new();
    };
    cache
        .list(&def, None)
        .0
        .iter()
        .filter_map(|e| serde_json::from_slice(&e.json).ok())
        .collect()
}

/// A snapshot of the RBAC objects the cache holds.
pub(crate) fn build_policy(cache: &Cache) -> Policy {
    Policy::new(
        objects::<ClusterRole>(cache, "clusterroles"),
        objects::<Role>(cache, "roles"),
        objects::<ClusterRoleBinding>(cache, "clusterrolebindings"),
        objects::<RoleBinding>(cache, "rolebindings"),
    )
}
