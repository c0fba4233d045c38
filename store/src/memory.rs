//! [`InMemoryStore`]: the store in process memory, the reference for tests and docs.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use parking_lot::RwLock;

use crate::forward_store;
use crate::raw::Engine;
use crate::raw::{Backend, ItemVectors, Row, Write};
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
    rows: HashMap<Hashed, Stored, BuildHasherDefault<Prehashed>>,
    order: BTreeSet<Ordered>,
    /// One copy of each namespace the keys use, which they all share (a lookup then compares
    /// labels already in cache instead of each item's own), with how many rows use it.
    namespaces: HashMap<Namespace, usize, foldhash::fast::RandomState>,
    /// Hashes each key once per operation (seeded per process: keys are user-chosen).
    hasher: foldhash::fast::RandomState,
}

impl Rows {
    fn hash(&self, key: &ItemKey) -> u64 {
        self.hasher.hash_one(key)
    }

    fn get(&self, key: &ItemKey) -> Option<&Stored> {
        self.rows.get(&(self.hash(key), key) as &dyn Probe)
    }

    fn get_mut(&mut self, key: &ItemKey) -> Option<&mut Stored> {
        let hash = self.hash(key);
        self.rows.get_mut(&(hash, key) as &dyn Probe)
    }
}

/// A map key with its hash, computed once. The map re-hashes every key each time it grows,
/// and hashing an `ItemKey` reads every label through several pointers (cache misses): at
/// 460,000 items one growth took 215 ms, as long as all the puts since the previous one;
/// with stored hashes it takes 50 ms.
#[derive(Clone)]
struct Hashed {
    hash: u64,
    key: Arc<ItemKey>,
}

/// A key as the map hashes and compares it: stored ([`Hashed`]) or looked up (a hash and a
/// borrowed key, so lookups neither allocate nor clone).
trait Probe {
    fn hash_value(&self) -> u64;
    fn item_key(&self) -> &ItemKey;
}

impl Probe for Hashed {
    fn hash_value(&self) -> u64 {
        self.hash
    }

    fn item_key(&self) -> &ItemKey {
        &self.key
    }
}

impl Probe for (u64, &ItemKey) {
    fn hash_value(&self) -> u64 {
        self.0
    }

    fn item_key(&self) -> &ItemKey {
        self.1
    }
}

impl<'a> Borrow<dyn Probe + 'a> for Hashed {
    fn borrow(&self) -> &(dyn Probe + 'a) {
        self
    }
}

// `Hashed` and `dyn Probe` hash and compare alike, as `Borrow` requires.
impl Hash for dyn Probe + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash_value());
    }
}

impl PartialEq for dyn Probe + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.hash_value() == other.hash_value() && self.item_key() == other.item_key()
    }
}

impl Eq for dyn Probe + '_ {}

impl Hash for Hashed {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self as &dyn Probe).hash(state);
    }
}

impl PartialEq for Hashed {
    fn eq(&self, other: &Self) -> bool {
        (self as &dyn Probe) == (other as &dyn Probe)
    }
}

impl Eq for Hashed {}

/// The map's hasher: passes the precomputed hash of a [`Hashed`] key through.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }

    fn write(&mut self, bytes: &[u8]) {
        // Keys only ever write one `u64`; anything else is still mixed in, never dropped.
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }
}

struct Stored {
    value: Arc<Object>,
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
                value: Arc::clone(&self.value),
                created_at: self.created_at,
                updated_at: self.updated_at,
            },
            ttl_minutes: self.ttl_minutes,
        }
    }
}

/// A row's place in the scan order every backend uses: newest update first, then the
/// dot-joined namespace (compared without building it), then the key.
///
/// The update time is kept in microseconds since the epoch (the engine hands out whole
/// microseconds): one integer comparison instead of chrono's date and time fields, on every
/// step of every insert.
#[derive(Clone, PartialEq, Eq)]
struct Ordered(i64, Arc<ItemKey>);

impl Ordered {
    fn new(updated_at: DateTime<Utc>, key: &Arc<ItemKey>) -> Self {
        Ordered(updated_at.timestamp_micros(), Arc::clone(key))
    }
}

impl Ord for Ordered {
    // Small enough to inline into the tree's search: times nearly always differ.
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        match other.0.cmp(&self.0) {
            Ordering::Equal => key_cmp(&self.1, &other.1),
            order => order,
        }
    }
}

/// The scan order of two keys updated at the same time.
fn key_cmp(a: &ItemKey, b: &ItemKey) -> Ordering {
    joined_cmp(&a.namespace, &b.namespace).then_with(|| a.key.cmp(&b.key))
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

/// Counts one row less in `namespace`, and forgets it with its last row.
fn release(
    namespaces: &mut HashMap<Namespace, usize, foldhash::fast::RandomState>,
    namespace: &Namespace,
) {
    if let Some(rows) = namespaces.get_mut(namespace) {
        *rows = rows.saturating_sub(1);
        if *rows == 0 {
            namespaces.remove(namespace);
        }
    }
}

/// `now + minutes`, exact to the microsecond.
pub fn expiry(now: DateTime<Utc>, minutes: f64) -> DateTime<Utc> {
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
    fn name(&self) -> &'static str {
        "memory"
    }

    async fn get(&self, keys: &[ItemKey], now: DateTime<Utc>) -> Result<Vec<Option<Row>>> {
        let rows = self.rows.read();
        Ok(keys
            .iter()
            .map(|key| rows.get(key).filter(|s| s.live(now)).map(|s| s.row(key)))
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
            let Some(stored) = rows.get(key).filter(|s| s.live(now)) else {
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
            if let Some(stored) = rows.get_mut(key).filter(|s| s.live(now))
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
            .map(|(k, _)| &k.key.namespace)
            .collect();
        Ok(live.into_iter().cloned().collect())
    }

    async fn write(&self, writes: Vec<Write>, now: DateTime<Utc>) -> Result<()> {
        let mut rows = self.rows.write();
        let Rows {
            rows,
            order,
            namespaces,
            hasher,
        } = &mut *rows;
        for write in writes {
            match write {
                Write::Put(mut put) => {
                    let namespace = std::mem::take(&mut put.key.namespace);
                    put.key.namespace = match namespaces.entry(namespace) {
                        Entry::Occupied(entry) => entry.key().clone(),
                        Entry::Vacant(entry) => entry.insert_entry(0).key().clone(),
                    };
                    let mut stored = Stored {
                        value: Arc::new(put.value),
                        created_at: now,
                        updated_at: now,
                        expires_at: put.ttl_minutes.map(|m| expiry(now, m)),
                        ttl_minutes: put.ttl_minutes,
                    };
                    // One hash and probe per put. An update keeps the map's own key (shared
                    // with `order`) and drops the new one.
                    let key = Hashed {
                        hash: hasher.hash_one(&put.key),
                        key: Arc::new(put.key),
                    };
                    match rows.entry(key) {
                        Entry::Occupied(mut entry) => {
                            let (key, old) = (&entry.key().key, entry.get());
                            order.remove(&Ordered::new(old.updated_at, key));
                            // An expired, unswept row is gone for readers: a put recreates it.
                            if old.live(now) {
                                stored.created_at = old.created_at;
                            }
                            order.insert(Ordered::new(now, key));
                            entry.insert(stored);
                        }
                        Entry::Vacant(entry) => {
                            let key = &entry.key().key;
                            order.insert(Ordered::new(now, key));
                            if let Some(rows) = namespaces.get_mut(&key.namespace) {
                                *rows += 1;
                            }
                            entry.insert(stored);
                        }
                    }
                }
                Write::Delete(key) => {
                    let probe = (hasher.hash_one(&key), &key);
                    if let Some((key, old)) = rows.remove_entry(&probe as &dyn Probe) {
                        order.remove(&Ordered::new(old.updated_at, &key.key));
                        release(namespaces, &key.key.namespace);
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
        let Rows {
            rows,
            order,
            namespaces,
            ..
        } = &mut *rows;
        let expired: Vec<Hashed> = rows
            .iter()
            .filter(|(_, s)| !s.live(now))
            .map(|(k, _)| k.clone())
            .collect();
        for key in &expired {
            if let Some(old) = rows.remove(key) {
                order.remove(&Ordered::new(old.updated_at, &key.key));
                release(namespaces, &key.key.namespace);
            }
        }
        Ok(expired.iter().map(|k| (*k.key).clone()).collect())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{SearchOp, StoreExt};

    #[tokio::test]
    async fn rows_survive_growth_updates_and_deletes() -> Result<()> {
        let store = InMemoryStore::new();
        let ns = |i: usize| Namespace::new(["a".to_owned(), format!("n{}", i % 7)]);
        for i in 0..5000 {
            store.put(ns(i), &format!("k{i}"), json!({"v": i})).await?;
        }
        let first = store.get(ns(10), "k10").await?.expect("put");
        for i in (0..5000).step_by(2) {
            store
                .put(ns(i), &format!("k{i}"), json!({"v": i + 1}))
                .await?;
        }
        for i in (0..5000).step_by(3) {
            store.delete(ns(i), &format!("k{i}")).await?;
        }
        for i in 0..5000 {
            let item = store.get(ns(i), &format!("k{i}")).await?;
            let expected = match (i % 3, i % 2) {
                (0, _) => None,
                (_, 0) => Some(i + 1),
                _ => Some(i),
            };
            assert_eq!(
                item.map(|item| item.value["v"].clone()),
                expected.map(|v| json!(v))
            );
        }
        assert_eq!(store.len(), (0..5000).filter(|i| i % 3 != 0).count());
        // An update keeps `created_at` and moves the item to the front of the scan order.
        let updated = store.get(ns(10), "k10").await?.expect("kept");
        assert_eq!(updated.created_at, first.created_at);
        assert!(updated.updated_at > first.updated_at);
        let newest = store.search(SearchOp::new(["a"]).limit(2)).await?;
        let keys: Vec<&str> = newest.iter().map(|hit| hit.key.as_str()).collect();
        assert_eq!(keys, ["k4996", "k4994"]);
        Ok(())
    }

    #[tokio::test]
    async fn keys_share_one_namespace_copy_until_its_last_row_goes() -> Result<()> {
        let store = InMemoryStore::new();
        let counts = || {
            let rows = store.engine.backend().rows.read();
            let mut counts: Vec<(String, usize)> = (rows.namespaces.iter())
                .map(|(namespace, rows)| (namespace.joined(), *rows))
                .collect();
            counts.sort();
            counts
        };
        store.put(["x"], "a", json!({"v": 1})).await?;
        store.put(["x"], "b", json!({"v": 2})).await?;
        store.put(["y"], "a", json!({"v": 3})).await?;
        store.put(["x"], "a", json!({"v": 4})).await?;
        assert_eq!(counts(), [("x".to_owned(), 2), ("y".to_owned(), 1)]);
        store.delete(["x"], "a").await?;
        store.delete(["x"], "missing").await?;
        assert_eq!(counts(), [("x".to_owned(), 1), ("y".to_owned(), 1)]);
        store.delete(["x"], "b").await?;
        assert_eq!(counts(), [("y".to_owned(), 1)]);
        let item = store.get(["y"], "a").await?.expect("kept");
        assert_eq!(
            *item.value,
            *json!({"v": 3}).as_object().expect("an object")
        );
        store.delete(["y"], "a").await?;
        assert!(counts().is_empty());
        Ok(())
    }

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
