//! Long-term store operations on every backend: single puts, puts in batches of 100, gets,
//! a filtered search and a semantic search (hashing embedder) over a filled, indexed store;
//! the items are `waypoint_workloads::store` (small user memories).

use std::time::Instant;

use anyhow::{Context, Result, ensure};
use indicatif::ProgressBar;
use serde_json::{Value, json};
use waypoint_store::{Namespace, Op, PutOp, SearchOp, StoreConfig, StoreExt};
use waypoint_workloads::store::{BATCH, DIMS, fill, indexed, key, namespace, queries, values};

use super::measure::{Table, latencies, per_second};
use super::peers::{Peers, record};
use super::targets::{Target, Targets};
use super::{Scale, settle};

/// Steps this group reports to its progress bar.
pub(crate) fn steps(targets: &Targets) -> u64 {
    5 * targets.list.len() as u64
}

/// Measures every backend (and LangGraph's stores, alternating, when `peers` runs).
pub(crate) async fn run(
    targets: &Targets,
    scale: &Scale,
    bar: &ProgressBar,
    peers: &mut Peers,
) -> Result<Table> {
    let mut table = Table::new(
        "store",
        "backend",
        format!(
            "Items of ~200 characters. Puts: {} per sample, one by one or in batches of {BATCH}, \
             median of {} samples. Reads on a store of {} items indexed by a {DIMS}-dimension \
             hashing embedder: {} gets, {} filtered and {} semantic searches (limit 10).",
            scale.store_puts,
            scale.samples,
            scale.items,
            scale.latency_samples,
            scale.searches,
            scale.searches
        ),
    );
    for target in &targets.list {
        let done = backend(targets, target, scale, bar, &mut table, peers).await;
        settle(&mut table, target, done)?;
    }
    Ok(table)
}

/// All workloads on one backend.
async fn backend(
    targets: &Targets,
    target: &Target,
    scale: &Scale,
    bar: &ProgressBar,
    table: &mut Table,
    peers: &mut Peers,
) -> Result<()> {
    let name = target.name();
    let items = values(scale.store_puts);

    bar.set_message(format!("store · {name} · put"));
    let store = targets.store(target, StoreConfig::new()).await?;
    let args = json!({"items": scale.store_puts});
    let (puts, theirs) = peers
        .pair(scale.samples, "store.put", name, args, async || {
            // Built before the clock starts: only the store's work is timed.
            let run = uuid::Uuid::new_v4().simple().to_string();
            let puts: Vec<_> = items
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let ns = Namespace::from(namespace(i));
                    (ns, format!("{run}{i}"), Value::Object(v.clone()))
                })
                .collect();
            let start = Instant::now();
            for (ns, key, value) in puts {
                store.put(ns, &key, value).await?;
            }
            Ok(vec![per_second(scale.store_puts, start.elapsed())])
        })
        .await
        .context("puts failed")?;
    record(table, "put", name, puts, theirs, |t, w, c, s| {
        t.rate(w, "items/s", c, s)
    });
    bar.inc(1);

    bar.set_message(format!("store · {name} · batch put"));
    let args = json!({"items": scale.store_puts, "batch": BATCH});
    let (batches, theirs) = peers
        .pair(scale.samples, "store.batch", name, args, async || {
            let run = uuid::Uuid::new_v4().simple().to_string();
            let batches: Vec<Vec<Op>> = items
                .chunks(BATCH)
                .enumerate()
                .map(|(c, chunk)| {
                    let ops = chunk.iter().enumerate().map(|(j, v)| {
                        let i = c * BATCH + j;
                        Op::Put(PutOp::new(namespace(i), format!("{run}{i}"), v.clone()))
                    });
                    ops.collect()
                })
                .collect();
            let start = Instant::now();
            for batch in batches {
                store.batch(batch).await?;
            }
            Ok(vec![per_second(scale.store_puts, start.elapsed())])
        })
        .await
        .context("batch puts failed")?;
    let workload = format!("batch put ({BATCH} per batch)");
    record(table, &workload, name, batches, theirs, |t, w, c, s| {
        t.rate(w, "items/s", c, s)
    });
    bar.inc(1);
    drop(store);

    bar.set_message(format!(
        "store · {name} · fill {} indexed items",
        scale.items
    ));
    let store = targets.store(target, indexed()).await?;
    fill(&*store, scale.items)
        .await
        .context("cannot fill the read store")?;
    bar.set_message(format!("store · {name} · get"));
    let calls = scale.latency_samples.div_ceil(scale.samples);
    let args = json!({"items": scale.items, "calls": calls});
    // Built before the clock starts, as LangGraph's side builds its (namespace, key) pairs.
    let keys: Vec<(Namespace, String)> = (0..scale.items)
        .map(|i| (Namespace::from(namespace(i)), key(i)))
        .collect();
    let (gets, theirs) = peers
        .pair(scale.samples, "store.get", name, args, async || {
            latencies(0, calls, async |n| {
                // A fixed stride visits items all over the store without a random generator.
                let i = (n * 7919) % scale.items;
                let (ns, key) = &keys[i];
                let item = store.get(ns, key).await?;
                ensure!(item.is_some(), "item {i} is missing");
                Ok(())
            })
            .await
        })
        .await
        .context("gets failed")?;
    record(table, "get p50", name, gets, theirs, |t, w, c, s| {
        t.latency(w, c, 0.5, s)
    });
    bar.inc(1);

    bar.set_message(format!("store · {name} · filtered search"));
    let limit = 10.min(scale.items / 10);
    let calls = scale.searches.div_ceil(scale.samples);
    let args = json!({"items": scale.items, "calls": calls});
    let (filtered, theirs) = peers
        .pair(
            scale.samples,
            "store.search",
            name,
            args.clone(),
            async || {
                latencies(0, calls, async |_| {
                    let op = SearchOp::new(["bench"])
                        .filter(json!({"kind": "k3"}))
                        .limit(limit);
                    let hits = store.search(op).await?;
                    ensure!(
                        hits.len() == limit,
                        "the filtered search found {} items",
                        hits.len()
                    );
                    Ok(())
                })
                .await
            },
        )
        .await
        .context("filtered searches failed")?;
    record(
        table,
        "filtered search p50",
        name,
        filtered,
        theirs,
        |t, w, c, s| t.latency(w, c, 0.5, s),
    );
    bar.inc(1);

    bar.set_message(format!("store · {name} · semantic search"));
    let texts = queries(scale.items, 200);
    let mut asked = 0;
    let (semantic, theirs) = peers
        .pair(scale.samples, "store.semantic", name, args, async || {
            latencies(0, calls, async |_| {
                let op = SearchOp::new(["bench"])
                    .query(texts[asked % texts.len()].as_str())
                    .limit(limit);
                asked += 1;
                let hits = store.search(op).await?;
                ensure!(
                    hits.len() == limit,
                    "the semantic search found {} items",
                    hits.len()
                );
                Ok(())
            })
            .await
        })
        .await
        .context("semantic searches failed")?;
    record(
        table,
        "semantic search p50",
        name,
        semantic,
        theirs,
        |t, w, c, s| t.latency(w, c, 0.5, s),
    );
    bar.inc(1);
    Ok(())
}
