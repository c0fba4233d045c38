//! The vector index: HNSW recall against the flat oracle, exact scores for every distance,
//! max pooling over an item's vectors, tombstones, background rebuilds, filtered searches that
//! never come back short, and inputs that must not panic.
#![allow(missing_docs)]

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use waypoint_store::index::VectorIndex;
use waypoint_store::{AnnConfig, Distance, ItemKey, Namespace};

type Hit = (ItemKey, f32);

/// Whether the graph is compiled in; without it every search is exact and the graph-state
/// assertions do not apply.
const GRAPH: bool = cfg!(feature = "hnsw");

/// One standard normal draw (Box-Muller; `rand` 0.9 has no normal distribution).
fn normal(rng: &mut StdRng) -> f32 {
    let u1: f32 = rng.random::<f32>().max(f32::MIN_POSITIVE);
    let u2: f32 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
}

/// Gaussian clusters: centres uniform in [-spread, spread]^dims, points at `sigma` around a
/// random centre. Returns the centres too, to draw queries from the same distribution.
fn clusters(
    rng: &mut StdRng,
    n: usize,
    dims: usize,
    count: usize,
    sigma: f32,
    spread: f32,
) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let centres: Vec<Vec<f32>> = (0..count)
        .map(|_| {
            (0..dims)
                .map(|_| rng.random_range(-spread..spread))
                .collect()
        })
        .collect();
    let points = (0..n).map(|_| near(rng, &centres, sigma)).collect();
    (centres, points)
}

/// A point near a random centre.
fn near(rng: &mut StdRng, centres: &[Vec<f32>], sigma: f32) -> Vec<f32> {
    let c = &centres[rng.random_range(0..centres.len())];
    c.iter().map(|x| x + sigma * normal(rng)).collect()
}

fn key(i: usize) -> ItemKey {
    ItemKey::new(["docs"], format!("{i:06}"))
}

fn index_of(key: &ItemKey) -> usize {
    key.key.parse().expect("numeric test key")
}

fn all(_: &ItemKey) -> bool {
    true
}

/// A graph above `flat_threshold` vectors, so that small tests exercise HNSW; built with a
/// short candidate list, since these tests check behaviour and the recall test checks the
/// defaults.
fn ann(flat_threshold: usize) -> AnnConfig {
    AnnConfig {
        flat_threshold,
        ef_construction: 48,
        ..AnnConfig::default()
    }
}

fn load(index: &VectorIndex, points: &[Vec<f32>]) {
    index.load(
        points
            .iter()
            .enumerate()
            .map(|(i, v)| (key(i), vec![v.clone()]))
            .collect(),
    );
}

/// Share of `exact`'s items that `approx` found.
fn recall(approx: &[Hit], exact: &[Hit]) -> f64 {
    if exact.is_empty() {
        return 1.0;
    }
    let found: HashSet<&ItemKey> = approx.iter().map(|(k, _)| k).collect();
    exact.iter().filter(|(k, _)| found.contains(k)).count() as f64 / exact.len() as f64
}

/// The reference score, in f64 from the raw vectors: what the index must report.
fn reference(distance: Distance, q: &[f32], v: &[f32]) -> f64 {
    let dot: f64 = q
        .iter()
        .zip(v)
        .map(|(a, b)| f64::from(*a) * f64::from(*b))
        .sum();
    match distance {
        Distance::Dot => dot,
        Distance::Cosine => {
            let nq = q.iter().map(|a| f64::from(*a).powi(2)).sum::<f64>().sqrt();
            let nv = v.iter().map(|a| f64::from(*a).powi(2)).sum::<f64>().sqrt();
            if nq == 0.0 || nv == 0.0 {
                0.0
            } else {
                dot / (nq * nv)
            }
        }
        Distance::L2 => -q
            .iter()
            .zip(v)
            .map(|(a, b)| (f64::from(*a) - f64::from(*b)).powi(2))
            .sum::<f64>()
            .sqrt(),
    }
}

fn assert_best_first(hits: &[Hit]) {
    for pair in hits.windows(2) {
        let ((ka, sa), (kb, sb)) = (&pair[0], &pair[1]);
        assert!(sa > sb || (sa == sb && ka < kb), "not best first: {pair:?}");
    }
}

#[test]
fn index_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<VectorIndex>();
}

#[test]
fn recall_at_10_against_flat_on_20k_clustered_vectors() {
    let mut rng = StdRng::seed_from_u64(7);
    let (centres, points) = clusters(&mut rng, 20_000, 32, 200, 1.5, 10.0);
    let index = VectorIndex::new(32, Distance::L2, AnnConfig::default());
    let started = Instant::now();
    load(&index, &points);
    let built = started.elapsed();
    let stats = index.stats();
    if GRAPH {
        assert!(
            stats.approximate,
            "20k vectors must use the graph: {stats:?}"
        );
        assert_eq!(stats.graph_nodes, 20_000);
        assert_eq!(stats.pending, 0);
    }

    let queries = 200;
    let mut total = 0.0;
    for _ in 0..queries {
        let q = near(&mut rng, &centres, 1.5);
        let approx = index.search(&q, 10, &all);
        let exact = index.search_exact(&q, 10, &all);
        assert_eq!(approx.len(), 10);
        assert_best_first(&approx);
        total += recall(&approx, &exact);
    }
    let recall = total / f64::from(queries);
    eprintln!("20k: load {built:?}, recall@10 {recall:.4}");
    assert!(recall >= 0.95, "recall@10 {recall:.4} below 0.95");
}

#[test]
fn scores_are_exact_for_every_distance() {
    for distance in [Distance::Cosine, Distance::Dot, Distance::L2] {
        let mut rng = StdRng::seed_from_u64(11);
        let (centres, mut points) = clusters(&mut rng, 2_000, 24, 20, 1.5, 4.0);
        if distance == Distance::Dot {
            // Unnormalised on purpose: norms from 0.1x to 10x, the case the MIPS reduction
            // exists for (`hnsw_rs` asserts non-negative distances).
            for v in &mut points {
                let scale = rng.random_range(0.1f32..10.0);
                v.iter_mut().for_each(|x| *x *= scale);
            }
        }
        points[0] = vec![0.0; 24]; // a zero vector: cosine 0 with everything
        let index = VectorIndex::new(24, distance, ann(300));
        load(&index, &points);
        assert_eq!(index.stats().approximate, GRAPH, "{distance:?}");
        let mut total = 0.0;
        for _ in 0..50 {
            let q = near(&mut rng, &centres, 1.5);
            let approx = index.search(&q, 10, &all);
            let exact = index.search_exact(&q, 10, &all);
            assert_eq!(approx.len(), 10, "{distance:?}");
            assert_best_first(&approx);
            assert_best_first(&exact);
            for (key, score) in approx.iter().chain(&exact) {
                let want = reference(distance, &q, &points[index_of(key)]);
                let tolerance = 1e-3 * want.abs().max(1.0);
                assert!(
                    (f64::from(*score) - want).abs() <= tolerance,
                    "{distance:?} {key:?}: {score} vs {want}"
                );
            }
            total += recall(&approx, &exact);
        }
        let recall = total / 50.0;
        assert!(recall >= 0.9, "{distance:?} recall {recall}");
    }
}

#[test]
fn cosine_of_a_zero_vector_is_zero() {
    let index = VectorIndex::new(3, Distance::Cosine, AnnConfig::default());
    index.upsert(key(0), vec![vec![0.0, 0.0, 0.0]]);
    index.upsert(key(1), vec![vec![1.0, 0.0, 0.0]]);
    let hits = index.search(&[0.0, 0.0, 0.0], 5, &all);
    assert_eq!(hits, vec![(key(0), 0.0), (key(1), 0.0)]);
    let hits = index.search(&[-1.0, 0.0, 0.0], 5, &all);
    assert_eq!(hits, vec![(key(0), 0.0), (key(1), -1.0)]);
}

#[test]
fn an_item_scores_its_best_vector_and_appears_once() {
    // Three vectors per item; the graph finds each item through any of them.
    let mut rng = StdRng::seed_from_u64(3);
    let (centres, points) = clusters(&mut rng, 3_000, 16, 50, 1.0, 5.0);
    for flat_threshold in [usize::MAX, 100] {
        let index = VectorIndex::new(16, Distance::L2, ann(flat_threshold));
        let items: Vec<(ItemKey, Vec<Vec<f32>>)> = points
            .chunks(3)
            .enumerate()
            .map(|(i, vs)| (key(i), vs.to_vec()))
            .collect();
        index.load(items.clone());
        assert_eq!(index.len(), 1_000);
        assert_eq!(index.stats().approximate, GRAPH && flat_threshold == 100);
        for _ in 0..20 {
            let q = near(&mut rng, &centres, 1.0);
            let hits = index.search(&q, 10, &all);
            assert_eq!(hits.len(), 10);
            let distinct: HashSet<_> = hits.iter().map(|(k, _)| k).collect();
            assert_eq!(distinct.len(), 10, "an item came back twice");
            for (key, score) in &hits {
                let best = items[index_of(key)]
                    .1
                    .iter()
                    .map(|v| reference(Distance::L2, &q, v))
                    .fold(f64::NEG_INFINITY, f64::max);
                assert!((f64::from(*score) - best).abs() < 1e-3, "{score} vs {best}");
            }
            assert!(recall(&hits, &index.search_exact(&q, 10, &all)) >= 0.8);
        }
    }
}

#[test]
fn removed_and_replaced_vectors_are_never_returned() {
    let mut rng = StdRng::seed_from_u64(5);
    let (centres, points) = clusters(&mut rng, 3_000, 16, 30, 1.0, 5.0);
    // No rebuild: every removed or replaced vector stays in the graph as a tombstone.
    let index = VectorIndex::new(
        16,
        Distance::L2,
        AnnConfig {
            rebuild_ratio: 1.0,
            ..ann(100)
        },
    );
    load(&index, &points);
    let far = vec![1_000.0; 16];
    for i in (0..3_000).step_by(3) {
        index.remove(&key(i));
    }
    for i in (1..3_000).step_by(3) {
        index.upsert(key(i), vec![far.clone()]);
    }
    let stats = index.stats();
    if GRAPH {
        assert!(stats.approximate && stats.tombstones >= 2_000, "{stats:?}");
    }
    assert_eq!(index.len(), 2_000);
    for _ in 0..50 {
        let q = near(&mut rng, &centres, 1.0);
        let hits = index.search(&q, 10, &all);
        assert_eq!(hits.len(), 10);
        for (key, score) in &hits {
            let i = index_of(key);
            assert_ne!(i % 3, 0, "removed item {key:?} returned");
            let v = if i % 3 == 1 { &far } else { &points[i] };
            assert!((f64::from(*score) - reference(Distance::L2, &q, v)).abs() < 1e-3);
        }
        assert!(recall(&hits, &index.search_exact(&q, 10, &all)) >= 0.8);
    }
    // The replacements are found where they now are.
    let hits = index.search(&far, 5, &all);
    assert!(
        hits.iter().all(|(k, s)| index_of(k) % 3 == 1 && *s == 0.0),
        "{hits:?}"
    );
}

#[test]
fn rebuild_keeps_results_and_the_writes_made_during_it() {
    let mut rng = StdRng::seed_from_u64(9);
    let dims = 16;
    let (centres, points) = clusters(&mut rng, 6_000, dims, 60, 1.0, 5.0);
    let index = Arc::new(VectorIndex::new(dims, Distance::L2, ann(500)));
    load(&index, &points[..5_000]);
    assert_eq!(index.stats().builds, u64::from(GRAPH));

    // Remove 30% (past the default 25% ratio): a background rebuild starts.
    for i in (0..5_000).filter(|i| i % 10 < 3) {
        index.remove(&key(i));
    }
    // Searches and writes go on while it runs; count the writes it had to catch up with.
    let mut during = 0;
    for (i, v) in points.iter().enumerate().skip(5_000) {
        let rebuilding = index.stats().building;
        index.upsert(key(i), vec![v.clone()]);
        let q = near(&mut rng, &centres, 1.0);
        let hits = index.search(&q, 10, &all);
        assert_eq!(hits.len(), 10);
        assert!(
            hits.iter()
                .all(|(k, _)| index_of(k) % 10 >= 3 || index_of(k) >= 5_000)
        );
        if rebuilding && index.stats().building {
            during += 1;
        }
    }
    index.wait_for_rebuild();
    let stats = index.stats();
    assert_eq!(stats.items, 3_500 + 1_000);
    if GRAPH {
        assert!(stats.builds >= 2, "{stats:?}");
        assert!(during > 0, "no write landed during the rebuild: {stats:?}");
        assert!(stats.tombstones < stats.graph_nodes / 4, "{stats:?}");
    }

    // Everything written during the rebuild is in the new graph and found.
    for (i, v) in points.iter().enumerate().skip(5_000) {
        let hits = index.search(v, 1, &all);
        assert_eq!(
            hits.first().map(|(k, _)| index_of(k)),
            Some(i),
            "item {i} lost"
        );
    }
    let mut total = 0.0;
    for _ in 0..50 {
        let q = near(&mut rng, &centres, 1.0);
        let hits = index.search(&q, 10, &all);
        assert!(
            hits.iter()
                .all(|(k, _)| index_of(k) % 10 >= 3 || index_of(k) >= 5_000)
        );
        total += recall(&hits, &index.search_exact(&q, 10, &all));
    }
    assert!(total / 50.0 >= 0.9, "recall after rebuild {}", total / 50.0);
}

#[test]
fn filtered_search_fills_the_page() {
    let mut rng = StdRng::seed_from_u64(13);
    let (centres, points) = clusters(&mut rng, 20_000, 16, 200, 1.0, 5.0);
    let index = VectorIndex::new(16, Distance::L2, ann(500));
    load(&index, &points);
    // 1% of items (200), spread over every cluster: the walk fills its results with them.
    let one_percent = |k: &ItemKey| index_of(k) % 100 == 7;
    let mut total = 0.0;
    for _ in 0..30 {
        let q = near(&mut rng, &centres, 1.0);
        let hits = index.search(&q, 10, &one_percent);
        assert_eq!(hits.len(), 10, "a filtered page came back short");
        assert!(hits.iter().all(|(k, _)| one_percent(k)));
        assert_best_first(&hits);
        total += recall(&hits, &index.search_exact(&q, 10, &one_percent));
    }
    assert!(total / 30.0 >= 0.95, "filtered recall {}", total / 30.0);
    assert_eq!(
        index.stats().fallbacks,
        0,
        "the walk should have been enough"
    );
    // Fewer accepted items than asked for: all of them, nothing else, via the exact scan.
    let five = |k: &ItemKey| index_of(k) % 4_000 == 1;
    let hits = index.search(&centres[0], 10, &five);
    assert_eq!(hits.len(), 5);
    assert_eq!(hits, index.search_exact(&centres[0], 10, &five));
    assert_eq!(index.stats().fallbacks, u64::from(GRAPH));
    // Several vectors per item cannot shrink a page either.
    index.upsert(key(1), vec![points[1].clone(); 40]);
    assert_eq!(index.search(&points[1], 30, &all).len(), 30);
    // A namespace filter, as the engine builds them.
    let other = ItemKey::new(["other", "ns"], "x");
    index.upsert(other.clone(), vec![points[0].clone()]);
    let prefix = Namespace::new(["other"]);
    let in_ns = |k: &ItemKey| k.namespace.starts_with(&prefix);
    assert_eq!(
        index.search(&points[1], 3, &in_ns),
        vec![(other, index.search(&points[1], 1, &in_ns)[0].1)]
    );
}

#[test]
fn k_zero_and_an_empty_index_return_nothing() {
    let index = VectorIndex::new(4, Distance::Cosine, AnnConfig::default());
    assert!(index.is_empty());
    assert!(index.search(&[1.0, 0.0, 0.0, 0.0], 10, &all).is_empty());
    index.upsert(key(1), vec![vec![1.0, 0.0, 0.0, 0.0]]);
    assert!(index.search(&[1.0, 0.0, 0.0, 0.0], 0, &all).is_empty());
    assert_eq!(index.search(&[1.0, 0.0, 0.0, 0.0], 10, &all).len(), 1);
    index.upsert(key(1), Vec::new());
    assert!(index.is_empty());
    assert!(index.search(&[1.0, 0.0, 0.0, 0.0], 10, &all).is_empty());
    index.remove(&key(42)); // absent: nothing happens
}

#[test]
fn bad_vectors_and_queries_do_not_panic() {
    let index = VectorIndex::new(4, Distance::L2, ann(10));
    index.upsert(key(0), vec![vec![1.0, 2.0]]); // wrong dims: not indexed
    index.upsert(key(1), vec![vec![f32::NAN, 0.0, 0.0, 0.0]]);
    index.upsert(key(2), vec![vec![f32::INFINITY, 0.0, 0.0, 0.0]]);
    index.upsert(key(3), vec![vec![3e38, 3e38, 0.0, 0.0]]); // squared norm overflows
    assert!(index.is_empty());
    index.upsert(key(4), vec![vec![1.0, 2.0], vec![1.0, 0.0, 0.0, 0.0]]); // one of two kept
    assert_eq!(index.len(), 1);
    assert!(index.search(&[1.0, 0.0], 5, &all).is_empty());
    assert!(index.search(&[], 5, &all).is_empty());
    assert!(index.search(&[f32::NAN, 0.0, 0.0, 0.0], 5, &all).is_empty());
    assert_eq!(
        index.search(&[1.0, 0.0, 0.0, 0.0], usize::MAX, &all).len(),
        1
    );
    // The same through a graph.
    let mut rng = StdRng::seed_from_u64(1);
    let (_, points) = clusters(&mut rng, 200, 4, 5, 1.0, 3.0);
    load(&index, &points);
    assert_eq!(index.stats().approximate, GRAPH);
    assert!(index.search(&[1.0; 3], 5, &all).is_empty());
    assert_eq!(index.search(&[1e15; 4], 5, &all).len(), 5);
    assert_eq!(index.search(&[1.0; 4], usize::MAX, &all).len(), 200);
}

#[test]
fn dot_product_graph_handles_any_norm() {
    // Norms spanning four orders of magnitude, some vectors opposite to the query: the
    // reduction keeps every graph distance non-negative and finds the largest products.
    let mut rng = StdRng::seed_from_u64(17);
    let (centres, points) = clusters(&mut rng, 2_000, 16, 20, 1.0, 1.0);
    let points: Vec<Vec<f32>> = points
        .into_iter()
        .map(|v| {
            let scale = 10f32.powf(rng.random_range(-2.0..2.0));
            v.into_iter().map(|x| x * scale).collect()
        })
        .collect();
    let index = VectorIndex::new(16, Distance::Dot, ann(100));
    load(&index, &points);
    // Later vectors longer than any in the graph still go in (and count towards a rebuild).
    for (i, v) in points.iter().enumerate().take(50) {
        index.upsert(
            key(10_000 + i),
            vec![v.iter().map(|x| x * 1_000.0).collect()],
        );
    }
    let mut total = 0.0;
    for _ in 0..30 {
        let q = near(&mut rng, &centres, 1.0);
        let hits = index.search(&q, 10, &all);
        let exact = index.search_exact(&q, 10, &all);
        assert_best_first(&hits);
        total += recall(&hits, &exact);
    }
    index.wait_for_rebuild();
    assert!(total / 30.0 >= 0.9, "dot recall {}", total / 30.0);
}

#[test]
fn concurrent_searches_and_writes() {
    let mut rng = StdRng::seed_from_u64(21);
    let (centres, points) = clusters(&mut rng, 3_000, 8, 30, 1.0, 5.0);
    let index = Arc::new(VectorIndex::new(8, Distance::Cosine, ann(200)));
    load(&index, &points[..2_000]);
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let (index, stop, centres) = (Arc::clone(&index), Arc::clone(&stop), centres.clone());
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(100 + t);
                let mut searches = 0;
                while !stop.load(Ordering::Relaxed) {
                    let q = near(&mut rng, &centres, 1.0);
                    assert!(index.search(&q, 5, &all).len() == 5);
                    searches += 1;
                }
                searches
            })
        })
        .collect();
    for (i, v) in points.iter().enumerate().skip(2_000) {
        index.upsert(key(i), vec![v.clone()]);
        index.remove(&key(i - 2_000));
    }
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().expect("reader panicked") > 0);
    }
    index.wait_for_rebuild();
    assert_eq!(index.len(), 2_000);
    for i in (2_000..3_000).step_by(50) {
        assert!(index.search(&points[i], 1, &all)[0].1 > 0.999);
    }
}

/// A rebuild that ends while a write starts the next one does not end that one too: the
/// writes made during the next build stay searchable. (The first build's end used to take
/// the second's write log, so that build dropped every vector written while it ran.)
#[test]
fn back_to_back_rebuilds_keep_every_write() {
    let mut rng = StdRng::seed_from_u64(31);
    let (_, points) = clusters(&mut rng, 600, 8, 6, 1.0, 5.0);
    let config = AnnConfig {
        flat_threshold: 0,
        rebuild_ratio: 0.01,
        ..ann(0)
    };
    let index = Arc::new(VectorIndex::new(8, Distance::L2, config));
    load(&index, &points[..200]);
    // Two writers replace every item again and again: each replacement leaves a tombstone,
    // so one build follows another and writes keep arriving as each one ends.
    let writers: Vec<_> = (0..2)
        .map(|t| {
            let (index, points) = (Arc::clone(&index), points.clone());
            std::thread::spawn(move || {
                for round in 0..20 {
                    for i in (t..200).step_by(2) {
                        let v = &points[200 + (i * 7 + round * 13) % 400];
                        index.upsert(key(i), vec![v.clone()]);
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer panicked");
    }
    index.wait_for_rebuild();
    let stats = index.stats();
    assert_eq!(stats.items, 200);
    // Every item is found by a search that accepts it alone (a walk over the whole graph).
    for i in 0..200 {
        let wanted = key(i);
        let hits = index.search(&points[0], 1, &|k: &ItemKey| *k == wanted);
        assert_eq!(hits.len(), 1, "item {i} lost: {stats:?}");
    }
}

/// Writing an item's vectors again as they are (a change read back from the log is usually
/// the process's own write) leaves the index as it was: no tombstone, nothing pending.
#[test]
fn rewriting_the_same_vectors_changes_nothing() {
    let mut rng = StdRng::seed_from_u64(9);
    let (_, points) = clusters(&mut rng, 2_000, 16, 20, 1.0, 5.0);
    let index = VectorIndex::new(
        16,
        Distance::Cosine,
        AnnConfig {
            rebuild_ratio: 1.0,
            ..ann(100)
        },
    );
    load(&index, &points);
    let before = index.stats();
    for (i, p) in points.iter().enumerate() {
        index.upsert(key(i), vec![p.clone()]);
    }
    assert_eq!(index.stats(), before);
    // A changed vector is still replaced.
    index.upsert(key(0), vec![vec![1.0; 16]]);
    assert_eq!(index.len(), 2_000);
    if GRAPH {
        assert_eq!(index.stats().tombstones, before.tombstones + 1);
    }
}
