//! Vector storage and the exact (flat) index: items, their vectors in one contiguous arena,
//! the distance kernels, and the exhaustive top-k scan that also serves as the recall oracle.
//!
//! Every comparison goes through one search distance per metric, lower is closer, which
//! converts exactly to the score: L2 uses the Euclidean distance (score = -d); cosine the
//! squared Euclidean distance between unit vectors (score = 1 - d²/2), with a zero vector at
//! d² = 2 from everything (score 0); dot product the negated product (score = -d).
//! Euclidean distances use `anndists`' kernel when the `hnsw` feature brings it in: it picks
//! AVX2 or AVX-512 at run time, 2.2x faster than what the compiler makes of portable code for
//! the x86-64 baseline (SSE2), and safe Rust cannot dispatch on CPU features itself.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};

use crate::ItemKey;
use crate::config::Distance;

/// Owner of a slot that belongs to no item (removed, or free for reuse).
const NO_ITEM: u32 = u32::MAX;

/// Accumulator lanes of the portable kernels: independent partial sums let LLVM vectorise
/// the loop (strict float order forbids it for a single running sum) and hide add latency.
const LANES: usize = 16;

/// Dot product of two equally long slices.
#[inline]
pub(super) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i];
        }
    }
    let mut tail = 0.0;
    for (x, y) in ra.iter().zip(rb) {
        tail += x * y;
    }
    reduce(acc) + tail
}

/// Euclidean distance of two equally long slices.
#[cfg(feature = "hnsw")]
#[inline]
pub(super) fn euclidean(a: &[f32], b: &[f32]) -> f32 {
    use hnsw_rs::prelude::{DistL2, Distance as _};
    // Finite inputs of equal length (see `prepare`), as its assertions require.
    DistL2.eval(a, b)
}

/// Euclidean distance of two equally long slices.
#[cfg(not(feature = "hnsw"))]
#[inline]
pub(super) fn euclidean(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..LANES {
            let d = x[i] - y[i];
            acc[i] += d * d;
        }
    }
    let mut tail = 0.0;
    for (x, y) in ra.iter().zip(rb) {
        let d = x - y;
        tail += d * d;
    }
    (reduce(acc) + tail).sqrt()
}

/// Sum of the lanes, folded four lanes wide: written so that LLVM keeps the main loop in
/// full-width SSE registers (a lane-by-lane reduction makes it fall back to 2-wide loads).
#[inline]
fn reduce(acc: [f32; LANES]) -> f32 {
    let s: [f32; 4] = std::array::from_fn(|i| (acc[i] + acc[i + 4]) + (acc[i + 8] + acc[i + 12]));
    (s[0] + s[1]) + (s[2] + s[3])
}

/// Reads one float per cache line of `v` and returns their sum, so that the caller can ask
/// for several vectors' memory at once before computing distances on them. Safe Rust has no
/// prefetch instruction; independent loads give the same memory-level parallelism.
#[inline]
fn touch(v: &[f32]) -> f32 {
    v.iter().step_by(16).sum()
}

/// Puts `v` into the form it is stored and compared in for `distance` (unit length for
/// cosine); returns `None` if it cannot be indexed, else whether it is the zero vector.
///
/// Refused: a wrong length, non-finite values, or a squared norm beyond `f32` (its distances
/// would overflow). For cosine, a vector whose norm underflows `f32` is the zero vector.
pub(super) fn prepare(v: &mut [f32], dims: usize, distance: Distance) -> Option<bool> {
    if v.len() != dims {
        return None;
    }
    // In f64 so that tiny vectors normalise accurately; a NaN or infinity makes it non-finite.
    let norm_sq: f64 = v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum();
    if !norm_sq.is_finite() || norm_sq > f64::from(f32::MAX) {
        return None;
    }
    let zero = norm_sq == 0.0;
    if distance == Distance::Cosine {
        let norm = norm_sq.sqrt();
        for x in v.iter_mut() {
            *x = if zero {
                0.0
            } else {
                (f64::from(*x) / norm) as f32
            };
        }
        return Some(zero || v.iter().all(|x| *x == 0.0));
    }
    Some(zero)
}

/// A query in stored form.
#[derive(Debug)]
pub(super) struct Query {
    v: Vec<f32>,
    zero: bool,
}

impl Query {
    /// `raw` in stored form, if it can be compared.
    pub(super) fn new(raw: &[f32], dims: usize, distance: Distance) -> Option<Self> {
        let mut v = raw.to_vec();
        let zero = prepare(&mut v, dims, distance)?;
        Some(Query { v, zero })
    }
}

/// An item and the slots of its vectors.
#[derive(Debug)]
struct Entry {
    key: ItemKey,
    slots: Slots,
}

/// The slots of an item's vectors; one (the common case) without a heap allocation, so a
/// scan over items does not chase a pointer per item.
#[derive(Debug)]
enum Slots {
    One(u32),
    Many(Box<[u32]>),
}

impl Slots {
    fn as_slice(&self) -> &[u32] {
        match self {
            Slots::One(slot) => std::slice::from_ref(slot),
            Slots::Many(slots) => slots,
        }
    }
}

/// A candidate result; orders by score, then (for equal scores) the smaller key first.
struct Ranked<'a> {
    score: f32,
    key: &'a ItemKey,
}

impl Ord for Ranked<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.key.cmp(self.key))
    }
}

impl PartialOrd for Ranked<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Ranked<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ranked<'_> {}

/// The `k` best of a stream of scored items, best first.
struct TopK<'a> {
    k: usize,
    heap: BinaryHeap<Reverse<Ranked<'a>>>,
}

impl<'a> TopK<'a> {
    fn new(k: usize) -> Self {
        TopK {
            k,
            heap: BinaryHeap::with_capacity(k.saturating_add(1).min(1 << 16)),
        }
    }

    fn push(&mut self, score: f32, key: &'a ItemKey) {
        if self.k == 0 {
            return;
        }
        let ranked = Ranked { score, key };
        if self.heap.len() == self.k {
            match self.heap.peek() {
                Some(Reverse(worst)) if ranked > *worst => {
                    self.heap.pop();
                }
                _ => return,
            }
        }
        self.heap.push(Reverse(ranked));
    }

    fn into_results(self) -> Vec<(ItemKey, f32)> {
        // Ascending order of `Reverse` is descending order of rank: best first.
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|Reverse(r)| (r.key.clone(), r.score))
            .collect()
    }
}

/// Every item's vectors, in the form searches compare (unit length for cosine), and the exact
/// search over them.
///
/// Vectors live in slots of one arena. A slot whose item is gone may keep its data while a
/// graph still links to it (a tombstone); the caller decides when it is released for reuse.
#[derive(Debug)]
pub(super) struct Vectors {
    dims: usize,
    distance: Distance,
    /// `dims` floats per slot.
    data: Vec<f32>,
    /// Whether a slot holds the zero vector (cosine treats it as orthogonal to everything).
    zero: Vec<bool>,
    /// Item id per slot, or [`NO_ITEM`].
    owner: Vec<u32>,
    /// Released slots, reused first.
    free: Vec<u32>,
    ids: HashMap<ItemKey, u32>,
    /// Items by id; `None` for ids free for reuse.
    items: Vec<Option<Entry>>,
    free_items: Vec<u32>,
    live_vectors: usize,
}

// Without the graph, the accessors it uses are idle.
#[cfg_attr(not(feature = "hnsw"), allow(dead_code))]
impl Vectors {
    /// An empty arena for `dims`-dimensional vectors compared by `distance`.
    pub(super) fn new(dims: usize, distance: Distance) -> Self {
        Vectors {
            dims,
            distance,
            data: Vec::new(),
            zero: Vec::new(),
            owner: Vec::new(),
            free: Vec::new(),
            ids: HashMap::new(),
            items: Vec::new(),
            free_items: Vec::new(),
            live_vectors: 0,
        }
    }

    /// Number of dimensions.
    pub(super) fn dims(&self) -> usize {
        self.dims
    }

    /// Items with at least one vector.
    pub(super) fn len(&self) -> usize {
        self.ids.len()
    }

    /// Vectors of live items.
    pub(super) fn live_vectors(&self) -> usize {
        self.live_vectors
    }

    /// Whether the slot holds a vector of a live item.
    #[inline]
    pub(super) fn is_live(&self, slot: u32) -> bool {
        self.owner.get(slot as usize).is_some_and(|&o| o != NO_ITEM)
    }

    /// The item id owning a live slot.
    #[inline]
    pub(super) fn owner(&self, slot: u32) -> Option<u32> {
        self.owner
            .get(slot as usize)
            .copied()
            .filter(|&o| o != NO_ITEM)
    }

    /// The key of a live item id.
    #[inline]
    pub(super) fn key(&self, item: u32) -> Option<&ItemKey> {
        self.items
            .get(item as usize)
            .and_then(Option::as_ref)
            .map(|e| &e.key)
    }

    /// The stored vector of a slot.
    #[inline]
    pub(super) fn vector(&self, slot: u32) -> &[f32] {
        let start = slot as usize * self.dims;
        &self.data[start..start + self.dims]
    }

    /// Loads a slot's vector into cache (see [`touch`]).
    #[inline]
    pub(super) fn touch(&self, slot: u32) -> f32 {
        let start = slot as usize * self.dims;
        self.data.get(start..start + self.dims).map_or(0.0, touch)
    }

    /// Loads what finding a slot's item and key reads into cache; the result is meaningless.
    #[inline]
    pub(super) fn touch_item(&self, slot: u32) -> usize {
        match self.owner(slot).and_then(|id| self.items.get(id as usize)) {
            Some(Some(entry)) => entry.slots.as_slice().len(),
            _ => 0,
        }
    }

    /// The slots of a live item's vectors.
    #[inline]
    pub(super) fn slots(&self, item: u32) -> &[u32] {
        self.items
            .get(item as usize)
            .and_then(Option::as_ref)
            .map_or(&[], |e| e.slots.as_slice())
    }

    /// Whether `key` holds exactly `vectors` (prepared, in order), so that writing them again
    /// would change nothing.
    pub(super) fn holds(&self, key: &ItemKey, vectors: &[(Vec<f32>, bool)]) -> bool {
        let Some(&id) = self.ids.get(key) else {
            return vectors.is_empty();
        };
        let slots = self.slots(id);
        slots.len() == vectors.len()
            && slots
                .iter()
                .zip(vectors)
                .all(|(&slot, (v, _))| self.vector(slot) == v.as_slice())
    }

    /// Search distance from a query to a slot: lower is closer, and [`score`](Self::score)
    /// turns it into the exact score.
    #[inline]
    pub(super) fn dist(&self, query: &Query, slot: u32) -> f32 {
        let v = self.vector(slot);
        let d = match self.distance {
            Distance::L2 => euclidean(&query.v, v),
            Distance::Cosine => {
                if query.zero || self.zero.get(slot as usize).copied().unwrap_or(true) {
                    2.0
                } else {
                    let d = euclidean(&query.v, v);
                    d * d
                }
            }
            Distance::Dot => -dot(&query.v, v),
        };
        // NaN (overflowing products) sorts as the farthest possible vector.
        if d.is_nan() { f32::INFINITY } else { d }
    }

    /// The score of a search distance: cosine similarity, dot product or negative L2.
    #[inline]
    pub(super) fn score(&self, dist: f32) -> f32 {
        let s = match self.distance {
            Distance::L2 | Distance::Dot => -dist,
            Distance::Cosine => 1.0 - 0.5 * dist,
        };
        // `+ 0.0` turns -0.0 into 0.0 so equal scores tie (and fall back to key order).
        if s.is_nan() {
            f32::NEG_INFINITY
        } else {
            s + 0.0
        }
    }

    /// An item's score: the best over its vectors.
    pub(super) fn item_score(&self, query: &Query, item: u32) -> f32 {
        let best = self
            .slots(item)
            .iter()
            .map(|&s| self.dist(query, s))
            .fold(f32::INFINITY, f32::min);
        self.score(best)
    }

    /// Removes `key`, returning the slots that held its vectors (their data stays until the
    /// caller releases them).
    pub(super) fn remove(&mut self, key: &ItemKey) -> Vec<u32> {
        let Some(id) = self.ids.remove(key) else {
            return Vec::new();
        };
        let Some(entry) = self.items.get_mut(id as usize).and_then(Option::take) else {
            return Vec::new();
        };
        self.free_items.push(id);
        let slots = entry.slots.as_slice().to_vec();
        for &s in &slots {
            self.owner[s as usize] = NO_ITEM;
        }
        self.live_vectors -= slots.len();
        slots
    }

    /// Adds an item that is not present, with vectors already [prepared](prepare) (each with
    /// whether it is zero); returns their slots. Nothing is added without vectors.
    pub(super) fn insert(&mut self, key: ItemKey, vectors: Vec<(Vec<f32>, bool)>) -> Vec<u32> {
        debug_assert!(!self.ids.contains_key(&key), "insert of a present item");
        if vectors.is_empty() {
            return Vec::new();
        }
        let id = match self.free_items.pop() {
            Some(id) => id,
            None => {
                self.items.push(None);
                (self.items.len() - 1) as u32
            }
        };
        let mut slots = Vec::with_capacity(vectors.len());
        for (v, zero) in vectors {
            let slot = match self.free.pop() {
                Some(slot) => {
                    let start = slot as usize * self.dims;
                    self.data[start..start + self.dims].copy_from_slice(&v);
                    slot
                }
                None => {
                    self.data.extend_from_slice(&v);
                    self.owner.push(NO_ITEM);
                    self.zero.push(false);
                    (self.owner.len() - 1) as u32
                }
            };
            self.owner[slot as usize] = id;
            self.zero[slot as usize] = zero;
            slots.push(slot);
        }
        self.live_vectors += slots.len();
        self.ids.insert(key.clone(), id);
        self.items[id as usize] = Some(Entry {
            key,
            slots: match slots.as_slice() {
                [one] => Slots::One(*one),
                many => Slots::Many(many.into()),
            },
        });
        slots
    }

    /// Makes removed slots reusable; their data is overwritten by later inserts.
    pub(super) fn release(&mut self, slots: impl IntoIterator<Item = u32>) {
        self.free.extend(slots);
    }

    /// Every live slot, in slot order.
    pub(super) fn live_slots(&self) -> impl Iterator<Item = u32> + '_ {
        self.owner
            .iter()
            .enumerate()
            .filter(|(_, o)| **o != NO_ITEM)
            .map(|(s, _)| s as u32)
    }

    /// Ranks distinct items, each given with the best search distance seen among its vectors,
    /// by exact score (max over all its vectors); the best `k`, best first.
    pub(super) fn rank(
        &self,
        query: &Query,
        k: usize,
        items: &[(u32, f32)],
    ) -> Vec<(ItemKey, f32)> {
        let mut top = TopK::new(k);
        for &(id, dist) in items {
            let Some(key) = self.key(id) else { continue };
            // One vector: the distance seen is the item's. Several: some may not have been.
            let score = if self.slots(id).len() == 1 {
                self.score(dist)
            } else {
                self.item_score(query, id)
            };
            top.push(score, key);
        }
        top.into_results()
    }

    /// The exact search: every accepted item scored, the best `k`, best first.
    pub(super) fn search(
        &self,
        query: &Query,
        k: usize,
        accept: &(dyn Fn(&ItemKey) -> bool + Sync),
    ) -> Vec<(ItemKey, f32)> {
        let mut top = TopK::new(k);
        if k == 0 {
            return Vec::new();
        }
        for (id, entry) in self.items.iter().enumerate() {
            if let Some(entry) = entry
                && accept(&entry.key)
            {
                top.push(self.item_score(query, id as u32), &entry.key);
            }
        }
        top.into_results()
    }
}
