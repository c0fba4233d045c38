//! The approximate index: an HNSW graph built by `hnsw_rs`, and a compact read-only mirror
//! of that graph that searches walk.
//!
//! `hnsw_rs` builds the graph (level sampling, neighbour selection, reverse links), inserts
//! concurrently, and is kept alive so later vectors are added incrementally. Its own search
//! is several times slower than hnswlib's on the same graph: every visited node costs a hash
//! map entry, `Arc` clones and heap allocations, a lock per neighbour list, and the descent
//! through the upper layers takes a single step per layer. So the graph is copied, node by
//! node as it changes, into [`Graph`]: neighbour lists by slot in one flat array, walked with
//! a reusable epoch-stamped visited list. The walk computes the exact search distances on the
//! index's own vectors, skips tombstones and rejected items when collecting results (but still
//! walks through them), and never allocates in proportion to the collection.
//!
//! `hnsw_rs` asserts that distances are non-negative, so every graph is built on Euclidean
//! distance (`anndists`' `DistL2`, SIMD) over a copy of the vectors that orders neighbours
//! exactly as the configured distance does: L2 uses the raw vectors; cosine the unit vectors
//! (|a - b|² = 2 - 2 cos) plus a coordinate that puts the zero vector at cosine 0 from all of
//! them; dot product the MIPS-to-L2 reduction (Bachrach et al., 2014): each vector gets an
//! extra coordinate √(M² - |x|²), M the largest norm, and queries get 0, so
//! |q' - x'|² = |q|² + M² - 2 q·x falls as q·x rises. Walks compare on the index's own
//! vectors instead (see [`super::flat`]), so the copy only shapes the graph.
//!
//! `DistL2` is also what `hnsw_rs` itself instantiates (for its C API), which matters for
//! debug builds: with `hnsw_rs` compiled at `opt-level = 1` (see the workspace manifest) the
//! debug build reuses those optimised instances instead of compiling the graph code
//! unoptimised in this crate, which made a 20k-vector test build 30 times slower.

use std::borrow::Cow;
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use hnsw_rs::prelude::{DistL2, Hnsw, Point};

use super::flat::dot;
use crate::config::{AnnConfig, Distance};

/// Layers `hnsw_rs` can create.
pub(super) const MAX_LAYERS: usize = 16;

/// Level of a slot that is not in the graph.
const ABSENT: u8 = u8::MAX;

/// One node of the graph as `hnsw_rs` holds it now: its level and neighbour slots per layer.
#[derive(Debug)]
pub(super) struct NodeUpdate {
    pub(super) slot: u32,
    pub(super) level: u8,
    /// Neighbour slots of layers 0 to `level`.
    pub(super) layers: Vec<Vec<u32>>,
}

/// The `hnsw_rs` graph being built or extended, with the handles needed to read it back.
pub(super) struct Builder {
    hnsw: Hnsw<'static, f32, DistL2>,
    distance: Distance,
    /// Dot product only: the norm bound M of the MIPS reduction, squared.
    bound_sq: f32,
    /// `hnsw_rs` point of each slot, to read its neighbours again after later inserts.
    handles: Vec<Option<Arc<Point<'static, f32>>>>,
    /// Points of each layer already registered in `handles`.
    seen: [usize; MAX_LAYERS],
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("points", &self.hnsw.get_nb_point())
            .field("distance", &self.distance)
            .finish_non_exhaustive()
    }
}

impl Builder {
    /// An empty graph for about `capacity` vectors; `bound_sq` is the largest squared norm
    /// (dot product only).
    pub(super) fn new(ann: &AnnConfig, distance: Distance, capacity: usize, bound_sq: f32) -> Self {
        let hnsw = Hnsw::new(
            ann.m,
            capacity.max(16),
            MAX_LAYERS,
            ann.ef_construction,
            DistL2,
        );
        Builder {
            hnsw,
            distance,
            bound_sq,
            handles: Vec::new(),
            seen: [0; MAX_LAYERS],
        }
    }

    /// The vector the graph holds for a stored vector, and whether it fits the MIPS bound.
    ///
    /// Cosine adds a coordinate too, 1 for the zero vector and 0 for unit vectors, so that the
    /// zero vector sits at the same distance from every unit vector in the graph as in
    /// searches (|a - b|² = 2, cosine 0) instead of looking closer than most of them.
    fn graph_form<'v>(&self, v: &'v [f32]) -> (Cow<'v, [f32]>, bool) {
        match self.distance {
            Distance::L2 => (Cow::Borrowed(v), true),
            Distance::Cosine => {
                let zero = v.iter().all(|x| *x == 0.0);
                let mut out = Vec::with_capacity(v.len() + 1);
                out.extend_from_slice(v);
                out.push(if zero { 1.0 } else { 0.0 });
                (Cow::Owned(out), true)
            }
            Distance::Dot => {
                let norm_sq = dot(v, v);
                let mut out = Vec::with_capacity(v.len() + 1);
                out.extend_from_slice(v);
                out.push((self.bound_sq - norm_sq).max(0.0).sqrt());
                (Cow::Owned(out), norm_sq <= self.bound_sq)
            }
        }
    }

    /// Inserts one stored vector; `false` if it is longer than the dot-product bound (the
    /// graph then places it less well, and the caller counts it towards a rebuild).
    pub(super) fn insert(&self, slot: u32, v: &[f32]) -> bool {
        let (g, fits) = self.graph_form(v);
        self.hnsw.insert_slice((&g, slot as usize));
        fits
    }

    /// Inserts many stored vectors on all cores; returns how many exceed the bound.
    pub(super) fn insert_many(&self, batch: &[(u32, &[f32])]) -> usize {
        let forms: Vec<_> = batch.iter().map(|(_, v)| self.graph_form(v)).collect();
        let misfits = forms.iter().filter(|(_, fits)| !fits).count();
        let refs: Vec<(&[f32], usize)> = forms
            .iter()
            .zip(batch)
            .map(|((g, _), (slot, _))| (&**g, *slot as usize))
            .collect();
        self.hnsw.parallel_insert_slice(&refs);
        misfits
    }

    /// Points inserted since the last call, and every node whose neighbours they changed,
    /// as they are now.
    ///
    /// Inserting a point links it to its neighbours and adds reverse links to their lists, so
    /// re-reading new points and their neighbours catches almost every change. A reverse link
    /// added by a point that later dropped that neighbour from its own list is missed until
    /// the next full rebuild: the mirror then lacks one edge into the new point, which costs
    /// nothing but a sliver of recall.
    pub(super) fn collect(&mut self) -> Vec<NodeUpdate> {
        let points = self.hnsw.get_point_indexation();
        let mut fresh = Vec::new();
        for layer in 0..MAX_LAYERS {
            let known = self.seen[layer];
            if points.get_layer_nb_point(layer) <= known {
                continue;
            }
            // The layer iterator has no random access; skipping costs one `Arc` clone per
            // point, which is why updates are collected in batches.
            for point in points.get_layer_iterator(layer).skip(known) {
                self.seen[layer] += 1;
                let Ok(slot) = u32::try_from(point.get_origin_id()) else {
                    continue;
                };
                let i = slot as usize;
                if self.handles.len() <= i {
                    self.handles.resize(i + 1, None);
                }
                self.handles[i] = Some(point);
                fresh.push(slot);
            }
        }
        let mut changed = fresh.clone();
        for &slot in &fresh {
            if let Some(point) = &self.handles[slot as usize] {
                for layer in point.get_neighborhood_id() {
                    changed.extend(layer.iter().filter_map(|n| u32::try_from(n.d_id).ok()));
                }
            }
        }
        changed.sort_unstable();
        changed.dedup();
        changed
            .into_iter()
            .filter_map(|slot| {
                let point = self.handles.get(slot as usize)?.as_ref()?;
                let level = point.get_point_id().0.min(MAX_LAYERS as u8 - 1);
                let layers = point
                    .get_neighborhood_id()
                    .into_iter()
                    .take(level as usize + 1)
                    .map(|l| {
                        l.iter()
                            .filter_map(|n| u32::try_from(n.d_id).ok())
                            .collect()
                    })
                    .collect();
                Some(NodeUpdate {
                    slot,
                    level,
                    layers,
                })
            })
            .collect()
    }

    /// Points in the `hnsw_rs` graph.
    pub(super) fn points(&self) -> usize {
        self.hnsw.get_nb_point()
    }
}

/// A search distance and a slot, ordered by distance (then slot, for determinism).
#[derive(Clone, Copy, Debug)]
struct Near {
    dist: f32,
    slot: u32,
}

impl Ord for Near {
    fn cmp(&self, other: &Self) -> Ordering {
        self.dist
            .total_cmp(&other.dist)
            .then(self.slot.cmp(&other.slot))
    }
}

impl PartialOrd for Near {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Near {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Near {}

/// Buffers of one walk, reused across searches so that a search allocates nothing in
/// proportion to the collection.
#[derive(Debug, Default)]
pub(super) struct Scratch {
    /// `epoch` where a slot was visited by the current walk; 16 bits keep the array small
    /// enough to stay in cache.
    visited: Vec<u16>,
    epoch: u16,
    /// Unvisited neighbours of the node being expanded, with their distances.
    batch: Vec<Near>,
    candidates: BinaryHeap<Reverse<Near>>,
    results: BinaryHeap<Near>,
    /// The last walk's results: (search distance, slot), in no particular order.
    pub(super) found: Vec<(f32, u32)>,
}

impl Scratch {
    /// Starts a walk over `slots` slots: a fresh epoch and empty heaps.
    fn reset(&mut self, slots: usize) {
        if self.visited.len() < slots {
            self.visited.resize(slots, 0);
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            // Stamps from 2¹⁶ walks ago would read as visited: clear them once per wrap.
            self.visited.fill(0);
            self.epoch = 1;
        }
        self.candidates.clear();
        self.results.clear();
        self.found.clear();
        self.batch.clear();
    }
}

/// How a walk ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Walk {
    /// The closest unexpanded candidate was farther than `ef` results: the normal end.
    Converged,
    /// Candidates ran out after every node was visited: all accepted nodes were found.
    Complete,
    /// Candidates ran out before every node was visited (a part of the graph unreachable).
    Exhausted,
    /// The visit budget ran out, with fewer than `ef` results (a very selective filter).
    Truncated,
}

/// What a walk needs to know about slots.
pub(super) trait Space {
    /// Search distance from the query: lower is closer.
    fn dist(&self, slot: u32) -> f32;
    /// Reads the slot's vector into cache; the result is meaningless.
    fn touch(&self, slot: u32) -> f32;
    /// Reads what [`keep`](Self::keep) will need into cache; the result is meaningless.
    fn touch_item(&self, slot: u32) -> usize;
    /// Whether the slot may be a result: a live vector of an accepted item.
    fn keep(&self, slot: u32) -> bool;
}

/// A read-optimised copy of the `hnsw_rs` graph: neighbour lists by slot.
#[derive(Debug)]
pub(super) struct Graph {
    /// Capacity of a layer-0 list (2 M); each slot has `1 + m0` entries: length, neighbours.
    m0: usize,
    links: Vec<u32>,
    /// Level per slot, [`ABSENT`] if the slot is not in the graph.
    level: Vec<u8>,
    /// Neighbours on layers 1..=level of the few nodes above layer 0.
    upper: HashMap<u32, Vec<Vec<u32>>>,
    /// A node on the top layer, where walks start.
    entry: Option<(u32, u8)>,
    nodes: usize,
    /// Nodes whose slot no longer holds a live vector.
    tombstones: usize,
    /// Dot product only: nodes inserted with a norm above the graph's bound.
    stale: usize,
}

impl Graph {
    /// An empty mirror for a graph with `m` neighbours per node.
    pub(super) fn new(m: usize) -> Self {
        Graph {
            m0: 2 * m,
            links: Vec::new(),
            level: Vec::new(),
            upper: HashMap::new(),
            entry: None,
            nodes: 0,
            tombstones: 0,
            stale: 0,
        }
    }

    /// Nodes in the graph, tombstones included.
    pub(super) fn nodes(&self) -> usize {
        self.nodes
    }

    /// Nodes whose vector was removed or replaced.
    pub(super) fn tombstones(&self) -> usize {
        self.tombstones
    }

    /// Nodes that need a rebuild: tombstones, and dot-product vectors beyond the bound.
    pub(super) fn debt(&self) -> usize {
        self.tombstones + self.stale
    }

    /// Counts nodes inserted beyond the dot-product bound.
    pub(super) fn add_stale(&mut self, n: usize) {
        self.stale += n;
    }

    /// Whether the slot is a node.
    pub(super) fn contains(&self, slot: u32) -> bool {
        self.level.get(slot as usize).is_some_and(|&l| l != ABSENT)
    }

    /// Slots the per-slot tables cover (every node's slot is below).
    pub(super) fn slots(&self) -> usize {
        self.level.len()
    }

    /// A node as [`apply`](Self::apply) takes it: its level and neighbours per layer.
    pub(super) fn node(&self, slot: u32) -> Option<NodeUpdate> {
        if !self.contains(slot) {
            return None;
        }
        let level = self.level[slot as usize];
        let base = slot as usize * (self.m0 + 1);
        let len = self.links[base] as usize;
        let mut layers = vec![self.links[base + 1..base + 1 + len].to_vec()];
        if level > 0 {
            layers.extend(self.upper.get(&slot).into_iter().flatten().cloned());
        }
        layers.resize(usize::from(level) + 1, Vec::new());
        Some(NodeUpdate {
            slot,
            level,
            layers,
        })
    }

    /// Records that a slot's vector is gone; a node stays in the graph as a tombstone.
    pub(super) fn retire(&mut self, slot: u32) {
        if self.contains(slot) {
            self.tombstones += 1;
        }
    }

    /// Grows the per-slot tables to `slots` slots.
    fn reserve(&mut self, slots: usize) {
        if self.level.len() < slots {
            self.level.resize(slots, ABSENT);
            self.links.resize(slots * (self.m0 + 1), 0);
        }
    }

    /// Copies nodes as `hnsw_rs` now holds them; `is_live` tells tombstones apart.
    pub(super) fn apply(&mut self, updates: Vec<NodeUpdate>, is_live: impl Fn(u32) -> bool) {
        // Every slot a list names must be addressable, node or not (yet).
        let highest = updates
            .iter()
            .flat_map(|u| std::iter::once(u.slot).chain(u.layers.iter().flatten().copied()))
            .max();
        if let Some(highest) = highest {
            self.reserve(highest as usize + 1);
        }
        for update in updates {
            let slot = update.slot as usize;
            if self.level[slot] == ABSENT {
                self.nodes += 1;
                if !is_live(update.slot) {
                    self.tombstones += 1;
                }
            }
            self.level[slot] = update.level;
            let mut layers = update.layers.into_iter();
            let base = slot * (self.m0 + 1);
            let list = layers.next().unwrap_or_default();
            let len = list.len().min(self.m0);
            self.links[base] = len as u32;
            self.links[base + 1..base + 1 + len].copy_from_slice(&list[..len]);
            if update.level > 0 {
                self.upper.insert(update.slot, layers.collect());
            }
            if self.entry.is_none_or(|(_, top)| update.level > top) {
                self.entry = Some((update.slot, update.level));
            }
        }
    }

    /// Walks the graph towards the query: greedy through the upper layers, then a best-first
    /// search of layer 0 that keeps the `ef` closest nodes `space` keeps. At most `budget`
    /// nodes are visited. Results go to `scratch.found`.
    pub(super) fn walk(
        &self,
        ef: usize,
        budget: usize,
        scratch: &mut Scratch,
        space: &impl Space,
    ) -> Walk {
        scratch.reset(self.level.len());
        let Some((mut ep, top)) = self.entry else {
            return Walk::Complete;
        };
        let ef = ef.max(1);
        let mut d_ep = space.dist(ep);
        for layer in (1..=top as usize).rev() {
            loop {
                let mut moved = false;
                let list = self.upper.get(&ep).and_then(|layers| layers.get(layer - 1));
                for &n in list.into_iter().flatten() {
                    let d = space.dist(n);
                    if d < d_ep {
                        d_ep = d;
                        ep = n;
                        moved = true;
                    }
                }
                if !moved {
                    break;
                }
            }
        }

        let Scratch {
            visited,
            epoch,
            batch,
            candidates,
            results,
            found,
        } = scratch;
        let epoch = *epoch;
        let stride = self.m0 + 1;
        if let Some(seen) = visited.get_mut(ep as usize) {
            *seen = epoch;
        }
        let mut count = 1usize;
        candidates.push(Reverse(Near {
            dist: d_ep,
            slot: ep,
        }));
        if space.keep(ep) {
            results.push(Near {
                dist: d_ep,
                slot: ep,
            });
        }
        let mut outcome = Walk::Exhausted;
        while let Some(Reverse(current)) = candidates.pop() {
            if results.len() >= ef && results.peek().is_some_and(|w| current.dist > w.dist) {
                outcome = Walk::Converged;
                break;
            }
            let base = current.slot as usize * stride;
            let len = self.links.get(base).map_or(0, |&l| l as usize);
            let list = self.links.get(base + 1..base + 1 + len).unwrap_or_default();
            batch.clear();
            for &n in list {
                if let Some(seen) = visited.get_mut(n as usize)
                    && *seen != epoch
                {
                    *seen = epoch;
                    batch.push(Near {
                        dist: f32::INFINITY,
                        slot: n,
                    });
                }
            }
            count += batch.len();
            // Safe Rust cannot prefetch, so each step asks for all the memory it will read
            // before using any of it, and the cache misses overlap instead of queueing: first
            // the neighbours' vectors, then the item records of those that may become results.
            std::hint::black_box(batch.iter().map(|n| space.touch(n.slot)).sum::<f32>());
            // Whether a node this far would enter the results now.
            let admits = |results: &BinaryHeap<Near>, dist: f32| {
                results.len() < ef || results.peek().is_some_and(|w| dist < w.dist)
            };
            let mut wanted = 0usize;
            for n in batch.iter_mut() {
                n.dist = space.dist(n.slot);
                if admits(results, n.dist) {
                    // A candidate now, expanded later: its links are wanted too.
                    let links = n.slot as usize * stride;
                    let first = self.links.get(links).copied().unwrap_or(0);
                    let last = self.links.get(links + self.m0).copied().unwrap_or(0);
                    wanted = wanted
                        .wrapping_add(space.touch_item(n.slot))
                        .wrapping_add((first ^ last) as usize);
                }
            }
            std::hint::black_box(wanted);
            for &n in batch.iter() {
                if admits(results, n.dist) {
                    candidates.push(Reverse(n));
                    if space.keep(n.slot) {
                        results.push(n);
                        if results.len() > ef {
                            results.pop();
                        }
                    }
                }
            }
            if count > budget && results.len() < ef {
                outcome = Walk::Truncated;
                break;
            }
        }
        if outcome == Walk::Exhausted && count >= self.nodes {
            outcome = Walk::Complete;
        }
        found.extend(results.drain().map(|n| (n.dist, n.slot)));
        outcome
    }
}
