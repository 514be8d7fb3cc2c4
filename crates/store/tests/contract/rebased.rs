//! The suite counts revisions from 0, the revision of an empty store. A fresh etcd is at revision
//! 1 (its first write gets 2), so its store is seen through this adapter, which shifts every
//! revision in and out by the store's revision when the test opened it.

use bytes::Bytes;
use futures::StreamExt;
use store::{EventStream, KeyValue, Result, Revision, Store, StoreError};

/// A store whose revisions count from its revision at creation.
pub struct Rebased<S> {
    inner: S,
    base: Revision,
}

impl<S: Store> Rebased<S> {
    pub fn new(inner: S) -> Self {
        let base = inner.revision();
        Self { inner, base }
    }
}

fn kv(base: Revision, mut kv: KeyValue) -> KeyValue {
    kv.create_revision -= base;
    kv.mod_revision -= base;
    kv
}

fn error(base: Revision, e: StoreError) -> StoreError {
    match e {
        StoreError::Conflict {
            key,
            expected,
            current,
        } => StoreError::Conflict {
            key,
            expected: expected - base,
            current: current - base,
        },
        StoreError::Compacted { requested, oldest } => StoreError::Compacted {
            requested: requested - base,
            oldest: oldest - base,
        },
        other => other,
    }
}

#[async_trait::async_trait]
impl<S: Store> Store for Rebased<S> {
    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        let base = self.base;
        self.inner
            .create(key, value)
            .await
            .map(|v| kv(base, v))
            .map_err(|e| error(base, e))
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected: Option<Revision>,
    ) -> Result<KeyValue> {
        let base = self.base;
        self.inner
            .update(key, value, expected.map(|r| r + base))
            .await
            .map(|v| kv(base, v))
            .map_err(|e| error(base, e))
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<KeyValue> {
        let base = self.base;
        self.inner
            .delete(key, expected.map(|r| r + base))
            .await
            .map(|v| kv(base, v))
            .map_err(|e| error(base, e))
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let base = self.base;
        Ok(self.inner.get(key).await?.map(|v| kv(base, v)))
    }

    async fn list(&self, prefix: &str) -> Result<(Vec<KeyValue>, Revision)> {
        let base = self.base;
        let (kvs, revision) = self.inner.list(prefix).await?;
        Ok((
            kvs.into_iter().map(|v| kv(base, v)).collect(),
            revision - base,
        ))
    }

    fn watch(&self, prefix: &str, from: Revision) -> Result<EventStream> {
        let base = self.base;
        let stream = self
            .inner
            .watch(prefix, from + base)
            .map_err(|e| error(base, e))?;
        Ok(stream
            .map(move |item| {
                item.map(|mut event| {
                    event.kv = kv(base, event.kv);
                    event.prev = event.prev.map(|p| kv(base, p));
                    event
                })
                .map_err(|e| error(base, e))
            })
            .boxed())
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.inner.compact(revision + self.base).await
    }

    fn revision(&self) -> Revision {
        self.inner.revision() - self.base
    }

    async fn current_revision(&self) -> Result<Revision> {
        Ok(self.inner.current_revision().await? - self.base)
    }

    async fn written_before(
        &self,
        prefix: &str,
        before: std::time::SystemTime,
        limit: usize,
    ) -> Result<Vec<(String, Revision)>> {
        let found = self.inner.written_before(prefix, before, limit).await?;
        Ok(found
            .into_iter()
            .map(|(key, rev)| (key, rev - self.base))
            .collect())
    }
}
