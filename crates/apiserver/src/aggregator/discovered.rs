//! What the aggregator remembers between requests: the resources each available remote
//! APIService's server listed at its last discovery check (upstream's discovery manager cache).

use std::{collections::HashMap, sync::RwLock};

use serde_json::Value;

/// What the aggregator remembers between requests: the resources each available remote
/// APIService's server listed at its last discovery check (upstream's discovery manager cache).
#[derive(Default)]
pub(crate) struct Aggregator {
    discovered: RwLock<HashMap<String, Vec<Value>>>,
}

impl Aggregator {
    pub(crate) fn set_discovered(&self, name: &str, resources: Option<Vec<Value>>) {
        let mut map = self.discovered.write().unwrap_or_else(|e| e.into_inner());
        match resources {
            Some(r) => map.insert(name.to_string(), r),
            None => map.remove(name),
        };
    }

    pub(crate) fn discovered(&self, name: &str) -> Option<Vec<Value>> {
        self.discovered
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }
}
