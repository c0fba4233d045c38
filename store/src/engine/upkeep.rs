//! Keeping the in-process indexes (vectors and lexical) in step with the backend: the load
//! at open, snapshots, and other processes' changes.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tracing::field::Empty;

use super::{Engine, Inner, checked_vectors, record};
use crate::index::VectorIndex;
use crate::lexical::stored_texts;
use crate::raw::Backend;
use crate::{ItemKey, Result};

impl<B: Backend> Engine<B> {
    /// Rebuilds the index from every stored vector.
    #[tracing::instrument(name = "store.reload_index", level = "debug", skip_all,
        fields(backend = self.inner.backend.name(), rows = Empty))]
    pub(super) async fn reload_index(&self) -> Result<()> {
        let (Some(slot), Some(config)) = (&self.inner.index, &self.inner.config.index) else {
            return Ok(());
        };
        let mut seen = self.inner.seen.lock().await;
        // Read the log's head first: changes made while vectors load are replayed later.
        if let Some(changes) = self.inner.backend.changes(i64::MAX).await? {
            *seen = changes.last_seq;
        }
        let mut items = Vec::new();
        for stored in self.inner.backend.vectors(None).await? {
            items.push((stored.key, checked_vectors(stored.vectors, config.dims)?));
        }
        record("store.reload_index", "rows", items.len());
        let snapshot = match self.inner.backend.load_index_snapshot().await {
            Ok(snapshot) => snapshot,
            Err(error) => {
                tracing::warn!(%error, "cannot read the vector index snapshot; rebuilding the index");
                None
            }
        };
        let index = VectorIndex::new(config.dims, config.distance, config.ann);
        // Building the graph is CPU work: hand this worker's tasks to others meanwhile.
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        let load = move || {
            match snapshot {
                Some(snapshot) => {
                    index.restore(items, &snapshot);
                }
                None => index.load(items),
            }
            index
        };
        let index = if multi_thread {
            tokio::task::block_in_place(load)
        } else {
            load()
        };
        *slot.write() = Arc::new(index);
        drop(seen);
        self.save_snapshot_later();
        Ok(())
    }

    /// Saves the index's graph to the backend in the background once no build is running,
    /// if a build completed since the last save, so that the next open restores it instead
    /// of building it. Writes never wait for it; nothing is saved outside a tokio runtime.
    pub(super) fn save_snapshot_later(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.inner.index.is_none() || self.inner.saving.swap(true, Ordering::AcqRel) {
            return;
        }
        // A weak reference: a dropped store stops the task instead of being kept alive.
        let weak = Arc::downgrade(&self.inner);
        runtime.spawn(async move {
            if let Err(error) = save_snapshot(weak, true).await {
                tracing::warn!(%error, "cannot save the vector index snapshot");
            }
        });
    }

    /// Waits for a running index build to finish, then saves the index's graph to the
    /// backend now: the next open restores it instead of building it. Returns whether a
    /// snapshot was written (not without a graph).
    pub async fn save_index_snapshot(&self) -> Result<bool> {
        save_snapshot(Arc::downgrade(&self.inner), false).await
    }

    /// Applies other processes' changes to the index before a semantic search.
    #[tracing::instrument(name = "store.catch_up", level = "debug", skip_all,
        fields(backend = self.inner.backend.name(), rows = Empty))]
    pub(super) async fn catch_up(&self, index: &VectorIndex) -> Result<()> {
        let mut seen = self.inner.seen.lock().await;
        let Some(changes) = self.inner.backend.changes(*seen).await? else {
            return Ok(());
        };
        if !changes.complete {
            drop(seen);
            self.reload_index().await?;
            return self.reload_lexical().await;
        }
        if changes.keys.is_empty() {
            *seen = changes.last_seq;
            return Ok(());
        }
        let keys: Vec<ItemKey> = changes
            .keys
            .into_iter()
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        record("store.catch_up", "rows", keys.len());
        let mut fresh: HashMap<ItemKey, Vec<Vec<f32>>> = HashMap::new();
        for stored in self.inner.backend.vectors(Some(&keys)).await? {
            fresh.insert(stored.key, checked_vectors(stored.vectors, index.dims())?);
        }
        self.update_lexical(&keys).await?;
        for key in keys {
            match fresh.remove(&key) {
                Some(vectors) => index.upsert(key, vectors),
                None => index.remove(&key),
            }
        }
        *seen = changes.last_seq;
        Ok(())
    }

    /// Rebuilds the lexical index from the texts of every item with stored vectors.
    pub(super) async fn reload_lexical(&self) -> Result<()> {
        let Some(lexical) = &self.inner.lexical else {
            return Ok(());
        };
        lexical.load(self.stored_texts(None).await?);
        Ok(())
    }

    /// Re-reads the texts of `keys` into the lexical index (other processes' changes).
    async fn update_lexical(&self, keys: &[ItemKey]) -> Result<()> {
        let Some(lexical) = &self.inner.lexical else {
            return Ok(());
        };
        let mut fresh: HashMap<ItemKey, Vec<String>> =
            self.stored_texts(Some(keys)).await?.into_iter().collect();
        for key in keys {
            match fresh.remove(key) {
                Some(texts) => lexical.upsert(key.clone(), &texts),
                None => lexical.remove(key),
            }
        }
        Ok(())
    }

    /// The indexed texts of the live items among `keys` (all with `None`) that have vectors.
    async fn stored_texts(&self, keys: Option<&[ItemKey]>) -> Result<Vec<(ItemKey, Vec<String>)>> {
        let stored = self.inner.backend.vectors(keys).await?;
        let keys: Vec<ItemKey> = stored.iter().map(|s| s.key.clone()).collect();
        let rows = self.inner.backend.get(&keys, self.now()).await?;
        let mut texts = Vec::with_capacity(rows.len());
        for (stored, row) in stored.into_iter().zip(rows) {
            let Some(row) = row else { continue };
            let fields: Vec<String> = stored.vectors.into_iter().map(|f| f.field).collect();
            let value = serde_json::Value::Object(Arc::unwrap_or_clone(row.item.value));
            texts.push((stored.key, stored_texts(&value, &fields)));
        }
        Ok(texts)
    }
}

/// Waits until the index of the store behind `weak` is not building, then saves its snapshot.
/// In the `background`, it saves only a build not saved yet, and clears the waiting flag once
/// the build is done so that a build starting later schedules another save. Saves are
/// serialised, so an older graph never overwrites a newer one.
async fn save_snapshot<B: Backend>(
    weak: std::sync::Weak<Inner<B>>,
    background: bool,
) -> Result<bool> {
    loop {
        let Some(inner) = weak.upgrade() else {
            return Ok(false);
        };
        let Some(index) = inner.index.as_ref().map(|i| Arc::clone(&i.read())) else {
            return Ok(false);
        };
        if index.stats().building {
            drop((index, inner));
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        }
        if background {
            inner.saving.store(false, Ordering::Release);
        }
        let mut saved = inner.saved.lock().await;
        let id = (Arc::as_ptr(&index) as usize, index.stats().builds);
        if background && (id.1 == 0 || *saved == id) {
            return Ok(false);
        }
        let Ok(Some(snapshot)) = tokio::task::spawn_blocking(move || index.snapshot()).await else {
            return Ok(false);
        };
        inner.backend.save_index_snapshot(snapshot).await?;
        *saved = id;
        return Ok(true);
    }
}
