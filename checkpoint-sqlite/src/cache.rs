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

#[derive(Debug, Default)]
struct Inner {
    entries: foldhash::HashMap<BlobKey, (Option<RawBlob>, u64)>,
    bytes: usize,
    tick: u64,
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
            inner: Mutex::new(Inner::default()),
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
        let (value, used) = inner.entries.get_mut(key)?;
        *used = tick;
        Some(value.clone())
    }

    /// Remembers `value` for `key`, evicting the least recently used entries past the budget.
    pub(crate) fn insert(&self, key: BlobKey, value: Option<RawBlob>) {
        let size = cost(&key, &value);
        if self.budget == 0 || size > self.budget / 4 {
            return;
        }
        let mut inner = self.inner.lock();
        inner.tick += 1;
        let tick = inner.tick;
        if let Some((old, _)) = inner.entries.insert(key.clone(), (value, tick)) {
            inner.bytes -= cost(&key, &old);
        }
        inner.bytes += size;
        if inner.bytes > self.budget {
            // Evict down to three quarters of the budget in one pass, oldest first.
            let mut by_age: Vec<(u64, BlobKey)> = inner
                .entries
                .iter()
                .map(|(k, (_, t))| (*t, k.clone()))
                .collect();
            by_age.sort_unstable_by_key(|(t, _)| *t);
            for (_, k) in by_age {
                if inner.bytes <= self.budget / 4 * 3 {
                    break;
                }
                if let Some((v, _)) = inner.entries.remove(&k) {
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
