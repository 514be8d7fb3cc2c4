//! A store that lives only in memory: for tests, and as the reference for the store's rules.
//!
//! The rules of a write (what `create`, `update` and `delete` do to a key, and when they fail) are
//! the pure [`Write::apply`] here; the SQLite backend applies the same function to its table.

use std::{
    collections::BTreeMap,
    ops::Bound,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use bytes::Bytes;

use crate::{
    Event, EventKind, EventStream, KeyValue, Result, Revision, Store, StoreError,
    window::{DEFAULT_CAPACITY, Window},
};

/// One write request, before it has a revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Write {
    /// Create a key that must not exist.
    Create { key: String, value: Bytes },
    /// Replace the value of a key that must exist (at `expected`, if given).
    Update {
        key: String,
        value: Bytes,
        expected: Option<Revision>,
    },
    /// Remove a key that must exist (at `expected`, if given).
    Delete {
        key: String,
        expected: Option<Revision>,
    },
}

impl Write {
    /// The key written.
    pub(crate) fn key(&self) -> &str {
        match self {
            Write::Create { key, .. } | Write::Update { key, .. } | Write::Delete { key, .. } => {
                key
            }
        }
    }

    /// Decides what this write does to a key whose state is `current`, were it given `revision`:
    /// the event to record, or why the write fails (in which case it consumes no revision).
    pub(crate) fn apply(self, current: Option<KeyValue>, revision: Revision) -> Result<Event> {
        fn check(key: &str, current: &KeyValue, expected: Option<Revision>) -> Result<()> {
            match expected {
                Some(expected) if expected != current.mod_revision => Err(StoreError::Conflict {
                    key: key.to_owned(),
                    expected,
                    current: current.mod_revision,
                }),
                _ => Ok(()),
            }
        }
        match (self, current) {
            (Write::Create { key, .. }, Some(_)) => Err(StoreError::AlreadyExists(key)),
            (Write::Create { key, value }, None) => Ok(Event {
                kind: EventKind::Put,
                kv: KeyValue {
                    key,
                    value,
                    create_revision: revision,
                    mod_revision: revision,
                },
                prev: None,
            }),
            (Write::Update { key, .. } | Write::Delete { key, .. }, None) => {
                Err(StoreError::NotFound(key))
            }
            (
                Write::Update {
                    key,
                    value,
                    expected,
                },
                Some(prev),
            ) => {
                check(&key, &prev, expected)?;
                Ok(Event {
                    kind: EventKind::Put,
                    kv: KeyValue {
                        key,
                        value,
                        create_revision: prev.create_revision,
                        mod_revision: revision,
                    },
                    prev: Some(prev),
                })
            }
            (Write::Delete { key, expected }, Some(prev)) => {
                check(&key, &prev, expected)?;
                Ok(Event {
                    kind: EventKind::Delete,
                    kv: KeyValue {
                        key,
                        value: prev.value.clone(),
                        create_revision: prev.create_revision,
                        mod_revision: revision,
                    },
                    prev: Some(prev),
                })
            }
        }
    }
}

/// A [`Store`] in a map under one lock: linearizable by construction, lost on drop.
pub struct MemoryStore {
    state: Mutex<State>,
    window: Arc<Window>,
}

struct State {
    keys: BTreeMap<String, KeyValue>,
    /// When each key was last written (Unix milliseconds), for time-to-live sweeps.
    written: std::collections::HashMap<String, i64>,
    revision: Revision,
}

impl MemoryStore {
    /// An empty store at revision 0 that retains the last 10,000 events for watches.
    pub fn new() -> Self {
        Self::with_window(DEFAULT_CAPACITY)
    }

    /// An empty store that retains the last `events` events for watches (at least one), so tests
    /// can push a watcher out of the window quickly.
    pub fn with_window(events: usize) -> Self {
        Self {
            state: Mutex::new(State {
                keys: BTreeMap::new(),
                written: Default::default(),
                revision: 0,
            }),
            window: Window::new(events, 0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing between lock and unlock can panic halfway through a mutation, so a poisoned map
        // is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self, write: Write) -> Result<KeyValue> {
        let mut state = self.lock();
        let revision = state.revision + 1;
        let current = state.keys.get(write.key()).cloned();
        let event = write.apply(current, revision)?;
        match event.kind {
            EventKind::Put => {
                let now = crate::unix_millis(clock::system_now());
                state.written.insert(event.kv.key.clone(), now);
                state.keys.insert(event.kv.key.clone(), event.kv.clone());
            }
            EventKind::Delete => {
                state.written.remove(&event.kv.key);
                state.keys.remove(&event.kv.key);
            }
        }
        state.revision = revision;
        let kv = event.kv.clone();
        // Published under the map's lock, so the window sees events in revision order.
        self.window.publish([event]);
        Ok(kv)
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for MemoryStore {
    fn drop(&mut self) {
        self.window.close();
    }
}

#[async_trait::async_trait]
impl Store for MemoryStore {
    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        self.write(Write::Create {
            key: key.to_owned(),
            value,
        })
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected: Option<Revision>,
    ) -> Result<KeyValue> {
        self.write(Write::Update {
            key: key.to_owned(),
            value,
            expected,
        })
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<KeyValue> {
        self.write(Write::Delete {
            key: key.to_owned(),
            expected,
        })
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        Ok(self.lock().keys.get(key).cloned())
    }

    async fn list(&self, prefix: &str) -> Result<(Vec<KeyValue>, Revision)> {
        let state = self.lock();
        let kvs = state
            .keys
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(key, _)| key.starts_with(prefix))
            .map(|(_, kv)| kv.clone())
            .collect();
        Ok((kvs, state.revision))
    }

    async fn written_before(
        &self,
        prefix: &str,
        before: std::time::SystemTime,
        limit: usize,
    ) -> Result<Vec<(String, Revision)>> {
        let before = crate::unix_millis(before);
        let state = self.lock();
        Ok(state
            .keys
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(key, _)| key.starts_with(prefix))
            .filter(|(key, _)| state.written.get(*key).is_some_and(|t| *t < before))
            .take(limit)
            .map(|(key, kv)| (key.clone(), kv.mod_revision))
            .collect())
    }

    fn watch(&self, prefix: &str, from: Revision) -> Result<EventStream> {
        self.window.watch(prefix, from)
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.window.compact(revision);
        Ok(())
    }

    fn revision(&self) -> Revision {
        self.lock().revision
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a test fails by panicking")]
mod tests {
    use super::*;

    fn kv(key: &str, value: &'static str, create: Revision, modified: Revision) -> KeyValue {
        KeyValue {
            key: key.to_owned(),
            value: Bytes::from_static(value.as_bytes()),
            create_revision: create,
            mod_revision: modified,
        }
    }

    fn create(value: &'static str) -> Write {
        Write::Create {
            key: "/k".into(),
            value: Bytes::from_static(value.as_bytes()),
        }
    }

    fn update(value: &'static str, expected: Option<Revision>) -> Write {
        Write::Update {
            key: "/k".into(),
            value: Bytes::from_static(value.as_bytes()),
            expected,
        }
    }

    fn delete(expected: Option<Revision>) -> Write {
        Write::Delete {
            key: "/k".into(),
            expected,
        }
    }

    fn conflict(expected: Revision, current: Revision) -> StoreError {
        StoreError::Conflict {
            key: "/k".into(),
            expected,
            current,
        }
    }

    #[test]
    fn apply_follows_the_store_contract() {
        let existing = || Some(kv("/k", "old", 3, 5));
        let put = |kv, prev| {
            Ok(Event {
                kind: EventKind::Put,
                kv,
                prev,
            })
        };
        let del = |kv, prev| {
            Ok(Event {
                kind: EventKind::Delete,
                kv,
                prev,
            })
        };
        let cases: Vec<(Write, Option<KeyValue>, Result<Event>)> = vec![
            (create("new"), None, put(kv("/k", "new", 9, 9), None)),
            (
                create("new"),
                existing(),
                Err(StoreError::AlreadyExists("/k".into())),
            ),
            (
                update("new", None),
                None,
                Err(StoreError::NotFound("/k".into())),
            ),
            (
                update("new", Some(5)),
                None,
                Err(StoreError::NotFound("/k".into())),
            ),
            (
                update("new", None),
                existing(),
                put(kv("/k", "new", 3, 9), existing()),
            ),
            (
                update("new", Some(5)),
                existing(),
                put(kv("/k", "new", 3, 9), existing()),
            ),
            (update("new", Some(4)), existing(), Err(conflict(4, 5))),
            (update("new", Some(3)), existing(), Err(conflict(3, 5))),
            (delete(None), None, Err(StoreError::NotFound("/k".into()))),
            (
                delete(Some(5)),
                None,
                Err(StoreError::NotFound("/k".into())),
            ),
            (
                delete(None),
                existing(),
                del(kv("/k", "old", 3, 9), existing()),
            ),
            (
                delete(Some(5)),
                existing(),
                del(kv("/k", "old", 3, 9), existing()),
            ),
            (delete(Some(6)), existing(), Err(conflict(6, 5))),
        ];
        for (write, current, want) in cases {
            let name = format!("{write:?} on {current:?}");
            assert_eq!(write.apply(current, 9), want, "{name}");
        }
    }

    #[tokio::test]
    async fn list_takes_only_keys_under_the_prefix() {
        let store = MemoryStore::new();
        for key in ["/a", "/a/1", "/a/2", "/a0", "/b/1", "/"] {
            store.create(key, Bytes::new()).await.unwrap();
        }
        let cases: &[(&str, &[&str])] = &[
            ("/a/", &["/a/1", "/a/2"]),
            ("/a", &["/a", "/a/1", "/a/2", "/a0"]),
            ("/b/", &["/b/1"]),
            ("/c/", &[]),
            ("", &["/", "/a", "/a/1", "/a/2", "/a0", "/b/1"]),
        ];
        for (prefix, want) in cases {
            let (kvs, revision) = store.list(prefix).await.unwrap();
            let keys: Vec<_> = kvs.iter().map(|kv| kv.key.as_str()).collect();
            assert_eq!(&keys, want, "prefix {prefix:?}");
            assert_eq!(revision, 6);
        }
    }
}
