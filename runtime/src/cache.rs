//! The state each thread's last run ended at, kept so the thread's next run starts from it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// Threads whose last state is kept.
const CACHED_THREADS: usize = 1024;

/// Thread id and namespace.
type CacheKey = (String, String);

/// The state the last run on each thread ended at, with its checkpoint id: the next run on
/// the thread starts from it instead of rebuilding appending channels from their history.
/// A checkpoint never changes once written, so an entry is right for as long as its id is
/// the thread's latest, whichever process wrote what came after.
pub(crate) struct StateCache<S> {
    entries: Mutex<CacheEntries<S>>,
}

/// The entries, and the order they came in (oldest first) to evict by.
struct CacheEntries<S> {
    map: HashMap<CacheKey, (String, Arc<S>)>,
    order: VecDeque<CacheKey>,
}

impl<S> Default for StateCache<S> {
    fn default() -> Self {
        StateCache {
            entries: Mutex::new(CacheEntries {
                map: HashMap::new(),
                order: VecDeque::new(),
            }),
        }
    }
}

impl<S> StateCache<S> {
    /// The state at `checkpoint_id`, if cached. `take` removes the entry, so the run that
    /// continues the thread holds the only reference and changes it in place (it puts its
    /// own end state back when it finishes).
    pub(crate) fn lookup(
        &self,
        thread: &str,
        ns: &str,
        checkpoint_id: &str,
        take: bool,
    ) -> Option<Arc<S>> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let key = (thread.to_owned(), ns.to_owned());
        let (id, state) = entries.map.get(&key)?;
        if id != checkpoint_id {
            return None;
        }
        if !take {
            return Some(Arc::clone(state));
        }
        entries.order.retain(|k| *k != key);
        entries.map.remove(&key).map(|(_, state)| state)
    }

    pub(crate) fn put(&self, thread: &str, ns: &str, checkpoint_id: String, state: Arc<S>) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let key = (thread.to_owned(), ns.to_owned());
        if entries
            .map
            .insert(key.clone(), (checkpoint_id, state))
            .is_none()
        {
            entries.order.push_back(key);
        }
        while entries.map.len() > CACHED_THREADS {
            let Some(oldest) = entries.order.pop_front() else {
                break;
            };
            entries.map.remove(&oldest);
        }
    }
}
