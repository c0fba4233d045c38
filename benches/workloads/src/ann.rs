//! The vector-index workload: Gaussian clusters of vectors and queries drawn the same way,
//! seeded, with recall@k measured against the exact scan.

use std::collections::HashSet;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use waypoint_store::ItemKey;
use waypoint_store::index::VectorIndex;

/// Neighbours per node (hnswlib's usual setting, which the peer script uses too).
pub const M: usize = 16;
/// Candidate list size while building (hnswlib's usual setting).
pub const EF_CONSTRUCTION: usize = 200;

/// The size of one dataset.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AnnSize {
    /// Vectors indexed.
    pub vectors: usize,
    /// Dimensions per vector.
    pub dims: usize,
    /// Cluster centres, drawn from N(0, 1) per coordinate.
    pub clusters: usize,
    /// Standard deviation of points around their centre.
    pub sigma: f32,
    /// Queries, drawn like the vectors.
    pub queries: usize,
    /// Neighbours asked for and compared (recall@k).
    pub k: usize,
}

/// 100,000 vectors of 128 dimensions in 1,000 clusters, 1,000 queries, recall@10.
pub const FULL: AnnSize = AnnSize {
    vectors: 100_000,
    dims: 128,
    clusters: 1_000,
    sigma: 1.5,
    queries: 1_000,
    k: 10,
};

/// One standard normal draw (Box-Muller).
fn normal(rng: &mut StdRng) -> f32 {
    let u1: f32 = rng.random::<f32>().max(f32::MIN_POSITIVE);
    let u2: f32 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
}

/// The vectors and the queries of `size`.
pub fn dataset(size: AnnSize) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let mut rng = StdRng::seed_from_u64(crate::SEED);
    let centres: Vec<Vec<f32>> = (0..size.clusters)
        .map(|_| (0..size.dims).map(|_| normal(&mut rng)).collect())
        .collect();
    let point = |rng: &mut StdRng| -> Vec<f32> {
        let c = &centres[rng.random_range(0..size.clusters)];
        c.iter().map(|x| x + size.sigma * normal(rng)).collect()
    };
    let vectors = (0..size.vectors).map(|_| point(&mut rng)).collect();
    let queries = (0..size.queries).map(|_| point(&mut rng)).collect();
    (vectors, queries)
}

/// The index key of vector `i`.
pub fn key(i: usize) -> ItemKey {
    ItemKey::new(["bench"], format!("{i:06}"))
}

/// The vector number of a key made by [`key`].
pub fn id(key: &ItemKey) -> Option<usize> {
    key.key.parse().ok()
}

fn all(_: &ItemKey) -> bool {
    true
}

/// The index items of `vectors`, ready to `load`.
pub fn items(vectors: &[Vec<f32>]) -> Vec<(ItemKey, Vec<Vec<f32>>)> {
    vectors
        .iter()
        .enumerate()
        .map(|(i, v)| (key(i), vec![v.clone()]))
        .collect()
}

/// The exact `k` nearest vector numbers of each query (the flat scan).
pub fn exact(index: &VectorIndex, queries: &[Vec<f32>], k: usize) -> Vec<Vec<usize>> {
    queries
        .iter()
        .map(|q| {
            index
                .search_exact(q, k, &all)
                .iter()
                .filter_map(|(key, _)| id(key))
                .collect()
        })
        .collect()
}

/// One single-thread pass over the queries at `ef`: queries/s and mean recall@k against
/// `truth`.
pub fn pass(
    index: &VectorIndex,
    queries: &[Vec<f32>],
    truth: &[Vec<usize>],
    k: usize,
    ef: usize,
) -> (f64, f64) {
    let start = Instant::now();
    let results: Vec<_> = queries
        .iter()
        .map(|q| index.search_with_ef(q, k, ef, &all))
        .collect();
    let qps = queries.len() as f64 / start.elapsed().as_secs_f64();
    let hits: usize = results
        .iter()
        .zip(truth)
        .map(|(r, t)| {
            let t: HashSet<usize> = t.iter().copied().collect();
            r.iter()
                .filter(|(key, _)| id(key).is_some_and(|i| t.contains(&i)))
                .count()
        })
        .sum();
    (qps, hits as f64 / (k * queries.len()).max(1) as f64)
}
