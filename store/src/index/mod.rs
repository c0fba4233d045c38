//! The in-process vector index behind semantic search: exact (flat) for small collections and
//! as the recall oracle, HNSW (feature `hnsw`) above [`AnnConfig::flat_threshold`].
//!
//! Interface contract (used by the engine):
//! - `VectorIndex::new(dims, distance, ann)`
//! - `upsert(key, vectors)` replaces every vector of the item (an empty list removes it);
//!   `remove(key)`; `load(items)` bulk-inserts at open.
//! - `search(query, k, accept)` returns up to `k` distinct items whose `accept(key)` is true,
//!   each scored by the max over its vectors, exact scores (cosine similarity, dot product or
//!   negative L2 computed on the stored vectors), best first, ties by key.
//! - `search_exact` is the same over a flat scan (the oracle).
//!
//! How it works. Vectors live in one arena of slots (`flat.rs`). Up to `flat_threshold` live
//! vectors every search scans them all. Above it, an HNSW graph built by `hnsw_rs` proposes
//! candidates (`hnsw.rs`) and every score is still computed exactly on the stored vectors.
//! Searches walk a compact copy of that graph, brought up to date in batches as vectors are
//! added; the few vectors added since the last batch are scanned exactly.
//!
//! `hnsw_rs` cannot delete, so a removed or replaced vector stays in the graph as a
//! tombstone: walks pass through it but never return it. Once tombstones exceed
//! `rebuild_ratio` of the graph, a background thread builds a fresh graph from the live
//! vectors while searches and writes go on against the old one; vectors written meanwhile are
//! logged and added to the new graph before it replaces the old one.
//!
//! Filters. `accept` is asked during the walk: rejected items are walked through like
//! tombstones and never take a result's place, so a selective filter does not empty the
//! page. If a walk still finds fewer than `k` distinct items while more may exist (a filter
//! rejecting most items, or items with many vectors), it is repeated with a candidate list
//! four times longer; a walk that would have to visit half the graph, or cannot reach all
//! of it, gives way to an exact scan of the accepted items.
//!
//! Locking. Searches take a read lock on the state and nothing else. Writers are serialised
//! by a second mutex and take the state's write lock only for short bookkeeping; graph
//! inserts happen under the read lock, so searches run alongside them. Whoever wants the write
//! lock holds the writer mutex first, so no writer ever queues on the state while an insert
//! holds the read lock, and searches never wait behind one.

mod flat;
#[cfg(feature = "hnsw")]
mod hnsw;
#[cfg(feature = "hnsw")]
mod snapshot;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use parking_lot::{Condvar, Mutex, RwLock};

use crate::ItemKey;
use crate::config::{AnnConfig, Distance};
use flat::{Query, Vectors};
#[cfg(feature = "hnsw")]
use hnsw::{Builder, Graph, Scratch, Space as _, Walk};

/// Counts that describe an index at one moment, for tests and monitoring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexStats {
    /// Items with at least one vector.
    pub items: usize,
    /// Vectors of those items.
    pub vectors: usize,
    /// Nodes of the HNSW graph, tombstones included (0 without a graph).
    pub graph_nodes: usize,
    /// Graph nodes whose vector was removed or replaced.
    pub tombstones: usize,
    /// Vectors not yet linked into the graph searches use; searches scan them exactly.
    pub pending: usize,
    /// Whether searches use the graph (otherwise they scan every vector).
    pub approximate: bool,
    /// Whether a graph build is running.
    pub building: bool,
    /// Graph builds completed so far.
    pub builds: u64,
    /// Graph searches that ended in an exact scan (a filter too selective for the walk).
    pub fallbacks: u64,
    /// Graph nodes taken from a snapshot when the index was loaded (0: built from scratch).
    pub restored: usize,
}

/// Vectors of items, searchable by similarity.
///
/// Every method takes `&self`; the index is `Send + Sync` and meant to be shared.
pub struct VectorIndex {
    shared: Arc<Shared>,
}

/// Everything the index and its build thread share.
struct Shared {
    dims: usize,
    distance: Distance,
    ann: AnnConfig,
    state: RwLock<State>,
    /// Serialises writers (and the end of a build); held before `state` is written.
    writer: Mutex<Writer>,
    /// Walk buffers, reused by searches.
    #[cfg(feature = "hnsw")]
    scratch: Mutex<Vec<Scratch>>,
    /// Whether a graph build is running, and its end signal.
    building: Mutex<bool>,
    built: Condvar,
    builds: AtomicU64,
    fallbacks: AtomicU64,
    /// Nodes restored from a snapshot at load.
    restored: AtomicUsize,
    /// Set when the index is dropped: a running build stops early.
    closed: AtomicBool,
}

/// What searches read.
struct State {
    vectors: Vectors,
    /// The graph searches walk, if one has been built.
    #[cfg(feature = "hnsw")]
    graph: Option<Graph>,
    /// Slots added to the graph builder but not yet copied into `graph`: scanned exactly.
    #[cfg(feature = "hnsw")]
    pending: Vec<u32>,
    /// Removed slots whose data is kept because a graph links, or may link, to them.
    #[cfg(feature = "hnsw")]
    retired: Vec<u32>,
}

/// What only writers touch.
#[derive(Default)]
struct Writer {
    /// The `hnsw_rs` graph behind `State::graph`, which receives new vectors.
    #[cfg(feature = "hnsw")]
    builder: Option<Builder>,
    /// While a build runs: slots added since its snapshot, to add to the new graph.
    #[cfg(feature = "hnsw")]
    log: Option<Vec<u32>>,
    /// Vectors inserted into `builder` since the graph was last brought up to date.
    #[cfg(feature = "hnsw")]
    unsynced: usize,
    /// Of those, dot-product vectors longer than the graph's norm bound.
    #[cfg(feature = "hnsw")]
    misfits: usize,
}

impl fmt::Debug for VectorIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VectorIndex")
            .field("dims", &self.shared.dims)
            .field("distance", &self.shared.distance)
            .field("ann", &self.shared.ann)
            .field("stats", &self.stats())
            .finish()
    }
}

impl VectorIndex {
    /// An empty index.
    ///
    /// Out-of-range tuning is clamped: `m` to 2..=255 (`hnsw_rs` stores neighbour counts in
    /// a byte), `ef_construction` to at least `m`, `ef_search` to at least 1, and
    /// `rebuild_ratio` to 0.01..=1 (NaN means the default).
    pub fn new(dims: usize, distance: Distance, ann: AnnConfig) -> Self {
        let m = ann.m.clamp(2, 255);
        let ann = AnnConfig {
            flat_threshold: ann.flat_threshold,
            m,
            ef_construction: ann.ef_construction.max(m),
            ef_search: ann.ef_search.max(1),
            rebuild_ratio: if ann.rebuild_ratio.is_nan() {
                AnnConfig::default().rebuild_ratio
            } else {
                ann.rebuild_ratio.clamp(0.01, 1.0)
            },
        };
        VectorIndex {
            shared: Arc::new(Shared {
                dims,
                distance,
                ann,
                state: RwLock::new(State {
                    vectors: Vectors::new(dims, distance),
                    #[cfg(feature = "hnsw")]
                    graph: None,
                    #[cfg(feature = "hnsw")]
                    pending: Vec::new(),
                    #[cfg(feature = "hnsw")]
                    retired: Vec::new(),
                }),
                writer: Mutex::new(Writer::default()),
                #[cfg(feature = "hnsw")]
                scratch: Mutex::new(Vec::new()),
                building: Mutex::new(false),
                built: Condvar::new(),
                builds: AtomicU64::new(0),
                fallbacks: AtomicU64::new(0),
                restored: AtomicUsize::new(0),
                closed: AtomicBool::new(false),
            }),
        }
    }

    /// Dimensions every vector must have.
    pub fn dims(&self) -> usize {
        self.shared.dims
    }

    /// How vectors are compared.
    pub fn distance(&self) -> Distance {
        self.shared.distance
    }

    /// The approximate-index tuning in effect (after clamping).
    pub fn ann(&self) -> AnnConfig {
        self.shared.ann
    }

    /// Items with at least one vector.
    pub fn len(&self) -> usize {
        self.shared.state.read().vectors.len()
    }

    /// Whether no item has a vector.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counts describing the index now.
    pub fn stats(&self) -> IndexStats {
        let building = *self.shared.building.lock();
        let st = self.shared.state.read();
        #[cfg_attr(not(feature = "hnsw"), allow(unused_mut))]
        let mut stats = IndexStats {
            items: st.vectors.len(),
            vectors: st.vectors.live_vectors(),
            building,
            builds: self.shared.builds.load(Ordering::Relaxed),
            fallbacks: self.shared.fallbacks.load(Ordering::Relaxed),
            restored: self.shared.restored.load(Ordering::Relaxed),
            ..IndexStats::default()
        };
        #[cfg(feature = "hnsw")]
        if let Some(graph) = &st.graph {
            stats.graph_nodes = graph.nodes();
            stats.tombstones = graph.tombstones();
            stats.pending = st.pending.len();
            stats.approximate = self.shared.uses_graph(&st);
        }
        stats
    }

    /// Blocks until no graph build is running.
    pub fn wait_for_rebuild(&self) {
        let mut building = self.shared.building.lock();
        while *building {
            self.shared.built.wait(&mut building);
        }
    }

    /// Replaces every vector of `key` (an empty list removes the item).
    ///
    /// Vectors that cannot be indexed are left out: a wrong number of dimensions, NaN or
    /// infinite values, or a squared norm beyond `f32`'s range. The engine checks
    /// dimensions first; the rest would only produce NaN scores.
    pub fn upsert(&self, key: ItemKey, vectors: Vec<Vec<f32>>) {
        let vectors = self.shared.prepare_all(vectors);
        let shared = &self.shared;
        let mut w = shared.writer.lock();
        // A change read back from the log is usually this process's own write, already here:
        // replacing it would only tombstone and re-link the same vectors.
        if shared.state.read().vectors.holds(&key, &vectors) {
            return;
        }
        let slots = {
            let mut st = shared.state.write();
            shared.replace(&mut st, &w, key, vectors)
        };
        shared.added(&mut w, &slots, false);
        Shared::settle(shared, w, false);
    }

    /// Removes the item's vectors.
    pub fn remove(&self, key: &ItemKey) {
        let shared = &self.shared;
        let w = shared.writer.lock();
        {
            let mut st = shared.state.write();
            let removed = st.vectors.remove(key);
            shared.retire(&mut st, &w, removed);
        }
        Shared::settle(shared, w, false);
    }

    /// Bulk-inserts items at open (an item already present is replaced).
    ///
    /// Builds the graph on every core before returning when the collection is above
    /// `flat_threshold`, so the first searches are already approximate.
    pub fn load(&self, items: Vec<(ItemKey, Vec<Vec<f32>>)>) {
        let items: Vec<_> = items
            .into_iter()
            .map(|(key, vectors)| (key, self.shared.prepare_all(vectors)))
            .collect();
        let shared = &self.shared;
        let mut w = shared.writer.lock();
        let mut slots = Vec::new();
        {
            let mut st = shared.state.write();
            for (key, vectors) in items {
                slots.extend(shared.replace(&mut st, &w, key, vectors));
            }
        }
        shared.added(&mut w, &slots, true);
        Shared::settle(shared, w, true);
    }

    /// Bulk-inserts items at open, like [`load`](Self::load), with the graph of `snapshot`
    /// (from [`snapshot`](Self::snapshot), maybe another process's, maybe stale) instead of
    /// building one first; returns the graph nodes restored.
    ///
    /// Every node is checked against the vectors loaded: a node whose item or vector changed
    /// is left out, and vectors no node matches are scanned exactly, so searches agree with
    /// `items` whatever the snapshot holds. Searches walk the restored graph at once while a
    /// graph that takes new vectors is built in the background. A snapshot that cannot be
    /// used (corrupt, another format, another index shape), or an index that is not empty,
    /// falls back to [`load`](Self::load), with a warning when the snapshot is the reason.
    pub fn restore(&self, items: Vec<(ItemKey, Vec<Vec<f32>>)>, snapshot: &[u8]) -> usize {
        #[cfg(feature = "hnsw")]
        {
            let shape = snapshot::Shape {
                dims: self.shared.dims,
                distance: self.shared.distance,
                m: self.shared.ann.m,
            };
            let nodes = match snapshot::decode(snapshot, shape) {
                Ok(nodes) => nodes,
                Err(why) => {
                    tracing::warn!(
                        bytes = snapshot.len(),
                        "ignoring the vector index snapshot ({why}); rebuilding the index"
                    );
                    self.load(items);
                    return 0;
                }
            };
            let shared = &self.shared;
            let mut w = shared.writer.lock();
            if !self.is_empty() || w.builder.is_some() || w.log.is_some() {
                drop(w);
                self.load(items);
                return 0;
            }
            let mut st = shared.state.write();
            let mut slot_of = std::collections::HashMap::with_capacity(nodes.len());
            for (key, vectors) in items {
                let vectors = shared.prepare_all(vectors);
                let digests: Vec<u64> = vectors
                    .iter()
                    .map(|(v, _)| snapshot::digest(&key, v))
                    .collect();
                let slots = shared.replace(&mut st, &w, key, vectors);
                slot_of.extend(digests.into_iter().zip(slots));
            }
            let graph = snapshot::rebuild_graph(nodes, shared.ann.m, slot_of);
            let restored = graph.nodes();
            st.pending = st
                .vectors
                .live_slots()
                .filter(|&s| !graph.contains(s))
                .collect();
            st.graph = Some(graph);
            shared.restored.store(restored, Ordering::Relaxed);
            drop(st);
            // Nothing is pending for the (absent) builder; the build takes every vector.
            w.unsynced = 0;
            Shared::settle(shared, w, false);
            restored
        }
        #[cfg(not(feature = "hnsw"))]
        {
            let _ = snapshot;
            self.load(items);
            0
        }
    }

    /// The graph searches walk, as bytes for [`restore`](Self::restore); `None` without a
    /// graph (an exact index needs none).
    pub fn snapshot(&self) -> Option<Vec<u8>> {
        #[cfg(feature = "hnsw")]
        {
            // Vectors the builder holds but searches do not walk yet go into the graph first.
            self.shared.sync(&mut self.shared.writer.lock());
            let st = self.shared.state.read();
            let graph = st.graph.as_ref()?;
            let vectors = &st.vectors;
            let nodes: Vec<_> = (0..graph.slots() as u32)
                .filter(|&s| vectors.is_live(s))
                .filter_map(|s| {
                    let key = vectors.key(vectors.owner(s)?)?;
                    Some((graph.node(s)?, snapshot::digest(key, vectors.vector(s))))
                })
                .collect();
            let shape = snapshot::Shape {
                dims: self.shared.dims,
                distance: self.shared.distance,
                m: self.shared.ann.m,
            };
            Some(snapshot::encode(shape, &nodes))
        }
        #[cfg(not(feature = "hnsw"))]
        None
    }

    /// Up to `k` accepted items, best first, with max-pooled exact scores.
    ///
    /// Returns nothing for `k = 0` or a query that cannot be compared (wrong dimensions,
    /// non-finite values). `accept` is called during the graph walk, under the index's read
    /// lock: it must not call back into this index's writing methods.
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        accept: &(dyn Fn(&ItemKey) -> bool + Sync),
    ) -> Vec<(ItemKey, f32)> {
        self.search_with_ef(query, k, self.shared.ann.ef_search, accept)
    }

    /// [`search`](Self::search) with another candidate list size than the configured
    /// `ef_search` (raised to `k`): more recall for more time. Exact searches ignore it.
    pub fn search_with_ef(
        &self,
        query: &[f32],
        k: usize,
        ef_search: usize,
        accept: &(dyn Fn(&ItemKey) -> bool + Sync),
    ) -> Vec<(ItemKey, f32)> {
        if k == 0 {
            return Vec::new();
        }
        let Some(query) = self.shared.prepare_query(query) else {
            return Vec::new();
        };
        let st = self.shared.state.read();
        #[cfg(feature = "hnsw")]
        if let Some(graph) = &st.graph
            && self.shared.uses_graph(&st)
        {
            return self
                .shared
                .search_graph(&st, graph, &query, k, ef_search, accept);
        }
        let _ = ef_search;
        st.vectors.search(&query, k, accept)
    }

    /// The same as [`search`](Self::search), always by an exhaustive scan: the recall oracle.
    pub fn search_exact(
        &self,
        query: &[f32],
        k: usize,
        accept: &(dyn Fn(&ItemKey) -> bool + Sync),
    ) -> Vec<(ItemKey, f32)> {
        if k == 0 {
            return Vec::new();
        }
        let Some(query) = self.shared.prepare_query(query) else {
            return Vec::new();
        };
        self.shared.state.read().vectors.search(&query, k, accept)
    }
}

impl Drop for VectorIndex {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Relaxed);
    }
}

impl Shared {
    /// The indexable vectors of a write, in stored form, each with whether it is zero.
    fn prepare_all(&self, vectors: Vec<Vec<f32>>) -> Vec<(Vec<f32>, bool)> {
        vectors
            .into_iter()
            .filter_map(|mut v| {
                let zero = flat::prepare(&mut v, self.dims, self.distance)?;
                Some((v, zero))
            })
            .collect()
    }

    /// A query in stored form, if it can be compared.
    fn prepare_query(&self, query: &[f32]) -> Option<Query> {
        Query::new(query, self.dims, self.distance)
    }

    /// Replaces an item's vectors in `st`; returns the new slots.
    fn replace(
        &self,
        st: &mut State,
        w: &Writer,
        key: ItemKey,
        vectors: Vec<(Vec<f32>, bool)>,
    ) -> Vec<u32> {
        let removed = st.vectors.remove(&key);
        self.retire(st, w, removed);
        let slots = st.vectors.insert(key, vectors);
        #[cfg(feature = "hnsw")]
        if st.graph.is_some() {
            // Searchable at once, by an exact scan, until the graph holds them.
            st.pending.extend_from_slice(&slots);
        }
        slots
    }

    /// Disposes of removed slots: kept as tombstones while a graph may link to them,
    /// reusable at once otherwise.
    fn retire(&self, st: &mut State, w: &Writer, slots: Vec<u32>) {
        #[cfg(feature = "hnsw")]
        if w.builder.is_some() || w.log.is_some() {
            if let Some(graph) = &mut st.graph {
                slots.iter().for_each(|&s| graph.retire(s));
            }
            st.retired.extend(slots);
            return;
        }
        let _ = w;
        st.vectors.release(slots);
    }

    /// Whether searches should walk the graph rather than scan.
    #[cfg(feature = "hnsw")]
    fn uses_graph(&self, st: &State) -> bool {
        st.graph.is_some() && st.vectors.live_vectors() > self.ann.flat_threshold
    }

    /// Hands newly written slots to the graph builder and to a running build.
    #[cfg(feature = "hnsw")]
    fn added(&self, w: &mut Writer, slots: &[u32], parallel: bool) {
        if slots.is_empty() {
            return;
        }
        if let Some(log) = &mut w.log {
            log.extend_from_slice(slots);
        }
        let Some(builder) = &w.builder else {
            return;
        };
        // The read lock lets searches run during the insert; no writer can queue on the
        // state meanwhile because they all hold `writer` first.
        let misfits = {
            let st = self.state.read();
            if parallel {
                let batch: Vec<(u32, &[f32])> =
                    slots.iter().map(|&s| (s, st.vectors.vector(s))).collect();
                builder.insert_many(&batch)
            } else {
                slots
                    .iter()
                    .filter(|&&s| !builder.insert(s, st.vectors.vector(s)))
                    .count()
            }
        };
        w.unsynced += slots.len();
        w.misfits += misfits;
        let batch = (builder.points() / 1024).clamp(64, 512);
        if w.unsynced >= batch || parallel {
            self.sync(w);
        }
    }

    #[cfg(not(feature = "hnsw"))]
    fn added(&self, _w: &mut Writer, _slots: &[u32], _parallel: bool) {}

    /// Copies what changed in the `hnsw_rs` graph into the graph searches walk.
    #[cfg(feature = "hnsw")]
    fn sync(&self, w: &mut Writer) {
        let Some(builder) = &mut w.builder else {
            return;
        };
        let updates = builder.collect();
        let mut st = self.state.write();
        let State {
            vectors,
            graph,
            pending,
            ..
        } = &mut *st;
        if let Some(graph) = graph {
            graph.apply(updates, |s| vectors.is_live(s));
            graph.add_stale(w.misfits);
            pending.retain(|&s| !graph.contains(s));
        }
        w.unsynced = 0;
        w.misfits = 0;
    }

    /// After a write: starts a graph build, or drops the graph, when the collection calls
    /// for it. With `inline`, a build runs on this thread before returning.
    #[cfg(feature = "hnsw")]
    fn settle(shared: &Arc<Shared>, mut w: parking_lot::MutexGuard<'_, Writer>, inline: bool) {
        if w.log.is_some() {
            return;
        }
        // A read lock is enough to decide and to copy the vectors: holding `writer` keeps
        // every other writer away, and searches go on meanwhile.
        let st = shared.state.read();
        let live = st.vectors.live_vectors();
        let small = live <= shared.ann.flat_threshold;
        // A graph restored from a snapshot has no `hnsw_rs` graph to insert into: build one.
        let due = w.builder.is_none()
            || st.graph.as_ref().is_none_or(|graph| {
                graph.debt() as f64 > f64::from(shared.ann.rebuild_ratio) * graph.nodes() as f64
            });
        if !due || (small && st.graph.is_none()) {
            return;
        }
        if small {
            // Small again: scanning is exact and cheap, and the graph only costs memory.
            drop(st);
            let mut st = shared.state.write();
            st.graph = None;
            st.pending.clear();
            let retired = std::mem::take(&mut st.retired);
            st.vectors.release(retired);
            drop(st);
            let builder = w.builder.take();
            drop(w);
            drop(builder);
            return;
        }
        let snapshot = Snapshot::take(&st.vectors, shared.distance);
        drop(st);
        w.log = Some(Vec::new());
        *shared.building.lock() = true;
        drop(w);
        if inline {
            build(shared, snapshot);
            return;
        }
        let background = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name("waypoint-hnsw-build".into())
            .spawn(move || build(&background, snapshot));
        if spawned.is_err() {
            // No thread: stay on the current graph (or exact search); the next write retries.
            BuildGuard::new(shared).abandon();
        }
    }

    #[cfg(not(feature = "hnsw"))]
    fn settle(_shared: &Arc<Shared>, _w: parking_lot::MutexGuard<'_, Writer>, _inline: bool) {}

    /// A search through the graph, widened until `k` items are found, with an exact scan as
    /// the last resort.
    #[cfg(feature = "hnsw")]
    fn search_graph(
        &self,
        st: &State,
        graph: &Graph,
        query: &Query,
        k: usize,
        ef_search: usize,
        accept: &(dyn Fn(&ItemKey) -> bool + Sync),
    ) -> Vec<(ItemKey, f32)> {
        let vectors = &st.vectors;
        let space = Space {
            vectors,
            query,
            accept,
        };
        // Exact scores of the vectors not in the graph yet.
        let pending: Vec<(u32, f32)> = st
            .pending
            .iter()
            .filter(|&&s| space.keep(s))
            .filter_map(|&s| Some((vectors.owner(s)?, vectors.dist(query, s))))
            .collect();
        let mut scratch = self.scratch.lock().pop().unwrap_or_default();
        let mut ef = ef_search.max(k).max(1);
        let mut items = Vec::new();
        let found = loop {
            // A walk that has to look at half the graph to fill its results (a very
            // selective filter) is better replaced by the exact scan.
            let budget = (graph.nodes() / 2).max(ef.saturating_mul(32));
            let walk = graph.walk(ef, budget, &mut scratch, &space);
            if walk == Walk::Truncated {
                // What it found is wherever the walk happened to go: not the best.
                break None;
            }
            items.clear();
            items.extend_from_slice(&pending);
            items.extend(
                scratch
                    .found
                    .iter()
                    .filter_map(|&(d, s)| Some((vectors.owner(s)?, d))),
            );
            items.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
            items.dedup_by_key(|(item, _)| *item);
            if items.len() >= k || items.len() >= vectors.len() || walk == Walk::Complete {
                break Some(vectors.rank(query, k, &items));
            }
            if walk != Walk::Converged || ef >= graph.nodes() {
                break None;
            }
            // Too few distinct items: several vectors per item, or a filter rejecting most.
            ef = ef.saturating_mul(4).min(graph.nodes());
        };
        self.scratch.lock().push(scratch);
        found.unwrap_or_else(|| {
            self.fallbacks.fetch_add(1, Ordering::Relaxed);
            vectors.search(query, k, accept)
        })
    }
}

/// The slots a graph walk sees: distances to one query, and the caller's filter.
#[cfg(feature = "hnsw")]
struct Space<'a> {
    vectors: &'a Vectors,
    query: &'a Query,
    accept: &'a (dyn Fn(&ItemKey) -> bool + Sync),
}

#[cfg(feature = "hnsw")]
impl hnsw::Space for Space<'_> {
    #[inline]
    fn dist(&self, slot: u32) -> f32 {
        self.vectors.dist(self.query, slot)
    }

    #[inline]
    fn touch(&self, slot: u32) -> f32 {
        self.vectors.touch(slot)
    }

    #[inline]
    fn touch_item(&self, slot: u32) -> usize {
        self.vectors.touch_item(slot)
    }

    #[inline]
    fn keep(&self, slot: u32) -> bool {
        self.vectors
            .owner(slot)
            .and_then(|id| self.vectors.key(id))
            .is_some_and(self.accept)
    }
}

/// The live vectors a build starts from.
#[cfg(feature = "hnsw")]
struct Snapshot {
    slots: Vec<u32>,
    data: Vec<f32>,
    /// Dot product: the largest squared norm, the bound of the MIPS reduction.
    bound_sq: f32,
}

#[cfg(feature = "hnsw")]
impl Snapshot {
    fn take(vectors: &Vectors, distance: Distance) -> Self {
        let slots: Vec<u32> = vectors.live_slots().collect();
        let mut data = Vec::with_capacity(slots.len() * vectors.dims());
        let mut bound_sq = 0.0f32;
        for &s in &slots {
            let v = vectors.vector(s);
            if distance == Distance::Dot {
                bound_sq = bound_sq.max(flat::dot(v, v));
            }
            data.extend_from_slice(v);
        }
        Snapshot {
            slots,
            data,
            bound_sq,
        }
    }
}

/// Marks the end of a build however it ends, so waiters wake and writes stop logging.
#[cfg(feature = "hnsw")]
struct BuildGuard {
    shared: Arc<Shared>,
    /// Set once a completed build has ended itself: dropping the guard then does nothing.
    ended: bool,
}

#[cfg(feature = "hnsw")]
impl BuildGuard {
    /// The guard of a build that starts now.
    fn new(shared: &Arc<Shared>) -> Self {
        BuildGuard {
            shared: Arc::clone(shared),
            ended: false,
        }
    }

    /// Ends a build that will not complete.
    fn abandon(self) {
        drop(self);
    }

    /// Ends a completed build (its log already closed) before `w` lets writers go on: one of
    /// them may start the next build at once, whose log and flag this one must not end.
    fn complete(mut self, w: parking_lot::MutexGuard<'_, Writer>) {
        self.ended = true;
        self.shared.build_ended();
        drop(w);
    }
}

#[cfg(feature = "hnsw")]
impl Drop for BuildGuard {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let shared = &self.shared;
        let mut w = shared.writer.lock();
        if w.log.take().is_some() && w.builder.is_none() {
            // An abandoned first build: no graph links to the slots removed meanwhile.
            let mut st = shared.state.write();
            let retired = std::mem::take(&mut st.retired);
            st.vectors.release(retired);
        }
        shared.build_ended();
    }
}

#[cfg(feature = "hnsw")]
impl Shared {
    /// Clears the building flag and wakes waiters; called with `writer` held, so that no
    /// build can start in between.
    fn build_ended(&self) {
        *self.building.lock() = false;
        self.built.notify_all();
    }
}

/// Vectors inserted per step of a build, between checks for a dropped index.
#[cfg(feature = "hnsw")]
const BUILD_CHUNK: usize = 8192;

/// A write log at most this long is drained while writers wait, to finish a build.
#[cfg(feature = "hnsw")]
const FINAL_CATCH_UP: usize = 256;

/// Builds a graph from `snapshot` plus everything written meanwhile, then makes it the one
/// searches use.
#[cfg(feature = "hnsw")]
fn build(shared: &Arc<Shared>, snapshot: Snapshot) {
    let guard = BuildGuard::new(shared);
    let dims = shared.dims;
    let mut builder = Builder::new(
        &shared.ann,
        shared.distance,
        snapshot.slots.len() + snapshot.slots.len() / 8,
        snapshot.bound_sq,
    );
    let mut misfits = 0;
    let vectors: Vec<(u32, &[f32])> = snapshot
        .slots
        .iter()
        .enumerate()
        .map(|(i, &s)| (s, &snapshot.data[i * dims..(i + 1) * dims]))
        .collect();
    for chunk in vectors.chunks(BUILD_CHUNK) {
        if shared.closed.load(Ordering::Relaxed) {
            return;
        }
        misfits += builder.insert_many(chunk);
    }
    drop(vectors);
    drop(snapshot);

    // Catch up with writes made during the build, until few enough remain to add them
    // while holding writers back.
    let mut w = loop {
        if shared.closed.load(Ordering::Relaxed) {
            return;
        }
        let mut w = shared.writer.lock();
        let logged = w.log.as_mut().map(std::mem::take).unwrap_or_default();
        if logged.len() <= FINAL_CATCH_UP {
            let st = shared.state.read();
            for s in logged.into_iter().filter(|&s| st.vectors.is_live(s)) {
                misfits += usize::from(!builder.insert(s, st.vectors.vector(s)));
            }
            break w;
        }
        drop(w);
        // Copy what to insert so that no state lock is held while writers may queue.
        let batch: Vec<(u32, Vec<f32>)> = {
            let st = shared.state.read();
            logged
                .into_iter()
                .filter(|&s| st.vectors.is_live(s))
                .map(|s| (s, st.vectors.vector(s).to_vec()))
                .collect()
        };
        let refs: Vec<(u32, &[f32])> = batch.iter().map(|(s, v)| (*s, v.as_slice())).collect();
        misfits += builder.insert_many(&refs);
    };

    // Writers wait from here on; searches go on until the swap.
    let mut graph = Graph::new(shared.ann.m);
    let updates = builder.collect();
    {
        let st = shared.state.read();
        graph.apply(updates, |s| st.vectors.is_live(s));
    }
    graph.add_stale(misfits);
    let (old_graph, old_builder) = {
        let mut st = shared.state.write();
        let retired = std::mem::take(&mut st.retired);
        let (kept, released): (Vec<u32>, Vec<u32>) =
            retired.into_iter().partition(|&s| graph.contains(s));
        st.retired = kept;
        st.vectors.release(released);
        // Every live slot is in the new graph: the snapshot's, and the logged ones.
        st.pending.clear();
        let old_graph = st.graph.replace(graph);
        let old_builder = w.builder.replace(builder);
        w.log = None;
        w.unsynced = 0;
        w.misfits = 0;
        (old_graph, old_builder)
    };
    shared.builds.fetch_add(1, Ordering::Relaxed);
    guard.complete(w);
    // Freeing a large `hnsw_rs` graph takes a while; no lock is held any more.
    drop(old_graph);
    drop(old_builder);
}
