//! An in-process cache of stored channel values, so reads do not fetch the same blob again.
//!
//! A value is stored once per `(thread, namespace, channel, version)` and never changes while
//! a checkpoint refers to it: versions carry a random suffix, so a new value always has a new
//! key. Reads still fetch the checkpoint row itself from the database every time, and only
//! then look its versions up here, so nothing a current row does not name is ever returned.
//! The writer fills the cache as it stores values; deletes, copies and prunes clear it. The
//! one way to see a stale value is another process deleting a thread and storing a different
//! value under the very same version string (only possible with hand-made versions); set
//! `cache_bytes` to 0 to rule that out.
//!
//! Values the writer committed are also marked, so a put can skip storing a value handed over
//! again at a version already stored (most puts hand every channel's value over, one of them
//! new): the marks hold only while `PRAGMA data_version`, read inside the put's write
//! transaction, shows no other connection has committed since they were checked; then a
//! marked row is known to exist, since this process's own deletes clear the cache.

use parking_lot::Mutex;

use crate::convert::RawBlob;

/// `(thread, namespace, channel, version)`.
pub(crate) type BlobKey = (String, String, String, String);

/// A byte-bounded cache of stored values; `None` remembers a versioned-but-empty channel.
#[derive(Debug)]
pub(crate) struct BlobCache {
    inner: Mutex<Inner>,
    budget: usize,
}

#[derive(Debug)]
struct Inner {
    /// Value, last use, and the generation in which the writer committed it (0: read).
    entries: foldhash::HashMap<BlobKey, (Option<RawBlob>, u64, u64)>,
    bytes: usize,
    tick: u64,
    /// Marks of an older generation are stale; bumped when another connection has written
    /// (from 1: generation 0 marks nothing).
    generation: u64,
    /// The writer connection's `data_version` when the generation began.
    data_version: Option<i64>,
}

fn cost(key: &BlobKey, value: &Option<RawBlob>) -> usize {
    key.0.len()
        + key.1.len()
        + key.2.len()
        + key.3.len()
        + value
            .as_ref()
            .map_or(0, |b| b.blob.len() + b.type_tag.len())
        + 64
}

impl BlobCache {
    /// A cache holding at most `budget` bytes (0 disables it).
    pub(crate) fn new(budget: usize) -> Self {
        BlobCache {
            inner: Mutex::new(Inner {
                entries: foldhash::HashMap::default(),
                bytes: 0,
                tick: 0,
                generation: 1,
                data_version: None,
            }),
            budget,
        }
    }

    /// The cached value of `key`: `Some(None)` for a known-empty channel, `None` if unknown.
    pub(crate) fn get(&self, key: &BlobKey) -> Option<Option<RawBlob>> {
        if self.budget == 0 {
            return None;
        }
        let mut inner = self.inner.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let (value, used, _) = inner.entries.get_mut(key)?;
        *used = tick;
        Some(value.clone())
    }

    /// Remembers `value` for `key` as read, evicting the least recently used entries past the
    /// budget.
    pub(crate) fn insert(&self, key: BlobKey, value: Option<RawBlob>) {
        self.remember(key, value, false);
    }

    /// Remembers `value` for `key` as committed by the writer just now (see the module docs).
    pub(crate) fn insert_committed(&self, key: BlobKey, value: Option<RawBlob>) {
        self.remember(key, value, true);
    }

    /// Marks `key`'s entry, if any, as committed: the writer's commit just left its row in
    /// place (a put whose insert of it was ignored).
    pub(crate) fn mark_committed(&self, key: &BlobKey) {
        let mut inner = self.inner.lock();
        let generation = inner.generation;
        if let Some(entry) = inner.entries.get_mut(key) {
            entry.2 = generation;
        }
    }

    /// Whether the writer committed `key`'s row in the current generation (not yet checked
    /// against `data_version`: see [`Self::still_exact`]).
    pub(crate) fn committed(&self, key: &BlobKey) -> bool {
        let inner = self.inner.lock();
        inner
            .entries
            .get(key)
            .is_some_and(|e| e.2 != 0 && e.2 == inner.generation)
    }

    /// Whether the marks still hold, given the writer's `data_version` read inside its write
    /// transaction: no other connection has committed since the generation began. When one
    /// has, a new generation begins at `data_version` (every mark so far is stale).
    pub(crate) fn still_exact(&self, data_version: i64) -> bool {
        let mut inner = self.inner.lock();
        if inner.data_version == Some(data_version) {
            return true;
        }
        inner.generation += 1;
        inner.data_version = Some(data_version);
        false
    }

    fn remember(&self, key: BlobKey, value: Option<RawBlob>, committed: bool) {
        let size = cost(&key, &value);
        if self.budget == 0 || size > self.budget / 4 {
            return;
        }
        let mut inner = self.inner.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let generation = if committed { inner.generation } else { 0 };
        if let Some((old, _, _)) = inner.entries.insert(key.clone(), (value, tick, generation)) {
            inner.bytes -= cost(&key, &old);
        }
        inner.bytes += size;
        if inner.bytes > self.budget {
            // Evict down to three quarters of the budget in one pass, oldest first.
            let mut by_age: Vec<(u64, BlobKey)> = inner
                .entries
                .iter()
                .map(|(k, (_, t, _))| (*t, k.clone()))
                .collect();
            by_age.sort_unstable_by_key(|(t, _)| *t);
            for (_, k) in by_age {
                if inner.bytes <= self.budget / 4 * 3 {
                    break;
                }
                if let Some((v, _, _)) = inner.entries.remove(&k) {
                    inner.bytes -= cost(&k, &v);
                }
            }
        }
    }

    /// Forgets everything (after deletes, copies and prunes).
    pub(crate) fn clear(&self) {
        let mut inner = self.inner.lock();
        inner.entries.clear();
        inner.bytes = 0;
    }
}
