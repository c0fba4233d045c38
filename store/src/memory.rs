//! [`InMemoryStore`]: the store in process memory, the reference for tests and docs.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use parking_lot::RwLock;

use crate::backend::{Backend, ItemVectors, Row, Write};
use crate::engine::{Engine, forward_store};
use crate::{Item, ItemKey, Namespace, Object, Result, StoreConfig};

/// A store held in memory; vectors live only in its index. Cheap to create, gone when dropped.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use serde_json::json;
/// use waypoint_store::{InMemoryStore, StoreExt};
///
/// let store = InMemoryStore::new();
/// store.put(["users", "alice"], "prefs", json!({"theme": "dark"})).await?;
/// let item = store.get(["users", "alice"], "prefs").await?.expect("just put");
/// assert_eq!(item.value["theme"], "dark");
/// # Ok::<_, waypoint_store::Error>(()) }).unwrap();
/// ```
pub struct InMemoryStore {
    engine: Engine<MemoryBackend>,
}

impl InMemoryStore {
    /// A store without an index or default TTL.
    pub fn new() -> Self {
        InMemoryStore {
            engine: Engine::new(MemoryBackend::default(), StoreConfig::default())
                .unwrap_or_else(|_| unreachable!("the default config is valid")),
        }
    }

    /// A store with `config` (an index, a TTL policy); fails on an unusable config.
    pub fn with_config(config: StoreConfig) -> Result<Self> {
        Ok(InMemoryStore {
            engine: Engine::new(MemoryBackend::default(), config)?,
        })
    }

    /// How many items it holds, expired ones included until swept.
    pub fn len(&self) -> usize {
        self.engine.backend().rows.read().rows.len()
    }

    /// Whether it holds no item.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for InMemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for InMemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InMemoryStore")
            .field("items", &self.len())
            .finish()
    }
}

forward_store!(InMemoryStore);

/// Rows by key, plus the scan order (newest update first, then namespace, then key).
#[derive(Default)]
pub(crate) struct MemoryBackend {
    rows: RwLock<Rows>,
}

#[derive(Default)]
struct Rows {
    rows: HashMap<Arc<ItemKey>, Stored, foldhash::fast::RandomState>,
    order: BTreeSet<Ordered>,
}

struct Stored {
    value: Object,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    expires_at: Option<DateTime<Utc>>,
    ttl_minutes: Option<f64>,
}

impl Stored {
    fn live(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_none_or(|at| at > now)
    }

    fn row(&self, key: &ItemKey) -> Row {
        Row {
            item: Item {
                namespace: key.namespace.clone(),
                key: key.key.clone(),
                value: self.value.clone(),
                created_at: self.created_at,
                updated_at: self.updated_at,
            },
            ttl_minutes: self.ttl_minutes,
        }
    }
}

/// A row's place in the scan order every backend uses: newest update first, then the
/// dot-joined namespace (compared without building it), then the key.
#[derive(Clone, PartialEq, Eq)]
struct Ordered(DateTime<Utc>, Arc<ItemKey>);

impl Ord for Ordered {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .0
            .cmp(&self.0)
            .then_with(|| joined_cmp(&self.1.namespace, &other.1.namespace))
            .then_with(|| self.1.key.cmp(&other.1.key))
    }
}

impl PartialOrd for Ordered {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Orders namespaces as their dot-joined texts would order, without joining them.
fn joined_cmp(a: &Namespace, b: &Namespace) -> Ordering {
    let (la, lb) = (a.labels(), b.labels());
    for (i, (x, y)) in la.iter().zip(lb).enumerate() {
        if x == y {
            continue;
        }
        let common = x.bytes().zip(y.bytes()).take_while(|(p, q)| p == q).count();
        // The first byte that differs: the label's own, or the `.` before its next label.
        let next = |label: &String, labels: &[String]| {
            label
                .as_bytes()
                .get(common)
                .copied()
                .or((i + 1 < labels.len()).then_some(b'.'))
        };
        // Equal only if a label holds a `.` (invalid, but never misorder): compare in full.
        return match next(x, la).cmp(&next(y, lb)) {
            Ordering::Equal => a.joined().cmp(&b.joined()),
            order => order,
        };
    }
    la.len().cmp(&lb.len())
}

/// `now + minutes`, exact to the microsecond.
pub(crate) fn expiry(now: DateTime<Utc>, minutes: f64) -> DateTime<Utc> {
    let micros = (minutes * 60_000_000.0).round();
    // Absurd TTLs (beyond chrono's range) mean "practically never".
    if micros >= i64::MAX as f64 {
        return DateTime::<Utc>::MAX_UTC;
    }
    now.checked_add_signed(chrono::Duration::microseconds(micros as i64))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

#[async_trait]
impl Backend for MemoryBackend {
    async fn get(&self, keys: &[ItemKey], now: DateTime<Utc>) -> Result<Vec<Option<Row>>> {
        let rows = self.rows.read();
        Ok(keys
            .iter()
            .map(|key| {
                rows.rows
                    .get(key)
                    .filter(|s| s.live(now))
                    .map(|s| s.row(key))
            })
            .collect())
    }

    async fn scan(
        &self,
        prefix: &Namespace,
        _contains: Option<&Object>,
        now: DateTime<Utc>,
        visit: &mut (dyn FnMut(Row) -> bool + Send),
    ) -> Result<()> {
        let rows = self.rows.read();
        for Ordered(_, key) in &rows.order {
            if !key.namespace.starts_with(prefix) {
                continue;
            }
            let Some(stored) = rows.rows.get(key).filter(|s| s.live(now)) else {
                continue;
            };
            if !visit(stored.row(key)) {
                break;
            }
        }
        Ok(())
    }

    async fn refresh(&self, keys: &[ItemKey], now: DateTime<Utc>) -> Result<()> {
        let mut rows = self.rows.write();
        for key in keys {
            if let Some(stored) = rows.rows.get_mut(key).filter(|s| s.live(now))
                && let Some(ttl) = stored.ttl_minutes
            {
                stored.expires_at = Some(expiry(now, ttl));
            }
        }
        Ok(())
    }

    async fn namespaces(&self, now: DateTime<Utc>) -> Result<Vec<Namespace>> {
        let rows = self.rows.read();
        let live: HashSet<&Namespace> = rows
            .rows
            .iter()
            .filter(|(_, s)| s.live(now))
            .map(|(k, _)| &k.namespace)
            .collect();
        Ok(live.into_iter().cloned().collect())
    }

    async fn write(&self, writes: Vec<Write>, now: DateTime<Utc>) -> Result<()> {
        let mut rows = self.rows.write();
        let Rows { rows, order } = &mut *rows;
        for write in writes {
            match write {
                Write::Put(put) => {
                    let expires_at = put.ttl_minutes.map(|m| expiry(now, m));
                    let (key, created_at) = match rows.remove_entry(&put.key) {
                        Some((key, old)) => {
                            order.remove(&Ordered(old.updated_at, Arc::clone(&key)));
                            // An expired, unswept row is gone for readers: a put recreates it.
                            (key, if old.live(now) { old.created_at } else { now })
                        }
                        None => (Arc::new(put.key), now),
                    };
                    order.insert(Ordered(now, Arc::clone(&key)));
                    rows.insert(
                        key,
                        Stored {
                            value: put.value,
                            created_at,
                            updated_at: now,
                            expires_at,
                            ttl_minutes: put.ttl_minutes,
                        },
                    );
                }
                Write::Delete(key) => {
                    if let Some((key, old)) = rows.remove_entry(&key) {
                        order.remove(&Ordered(old.updated_at, key));
                    }
                }
            }
        }
        Ok(())
    }

    async fn vectors(&self, _keys: Option<&[ItemKey]>) -> Result<Vec<ItemVectors>> {
        // Vectors of an in-memory store live only in its index.
        Ok(Vec::new())
    }

    async fn sweep(&self, now: DateTime<Utc>) -> Result<Vec<ItemKey>> {
        let mut rows = self.rows.write();
        let Rows { rows, order } = &mut *rows;
        let expired: Vec<Arc<ItemKey>> = rows
            .iter()
            .filter(|(_, s)| !s.live(now))
            .map(|(k, _)| Arc::clone(k))
            .collect();
        for key in &expired {
            if let Some(old) = rows.remove(&**key) {
                order.remove(&Ordered(old.updated_at, Arc::clone(key)));
            }
        }
        Ok(expired.iter().map(|k| (**k).clone()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_order_like_their_joined_text() {
        let cases: &[&[&str]] = &[
            &["a"],
            &["a", "b"],
            &["a-b"],
            &["a", "b", "c"],
            &["ab"],
            &["a", "bc"],
            &["a."],
            &["b"],
            &["", "x"],
            &["a", "b-"],
        ];
        for x in cases {
            for y in cases {
                let (nx, ny) = (
                    Namespace::new(x.iter().copied()),
                    Namespace::new(y.iter().copied()),
                );
                assert_eq!(
                    joined_cmp(&nx, &ny),
                    nx.joined().cmp(&ny.joined()),
                    "{x:?} vs {y:?}"
                );
            }
        }
    }
}
