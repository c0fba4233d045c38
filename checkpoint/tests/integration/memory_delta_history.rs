//! `InMemorySaver::delta_channel_history` (a walk over its per-checkpoint index of parent
//! and channel versions) against the generic walk over `get_tuple` (which decodes each
//! record), on random branching threads: with ids in creation order and in random order,
//! re-puts of existing ids, and after every call that removes or copies checkpoints.

use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng};
use serde_json::json;
use waypoint_checkpoint::raw::walk_delta_history;
use waypoint_checkpoint::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointSaver, CheckpointSource, InMemorySaver, Keyring, ListOptions, PruneStrategy, Result,
    Serde, SerializedValue,
};

/// A seeded generator (a failure replays) with the two draws the thread is made of.
struct Rng(StdRng);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(StdRng::seed_from_u64(seed))
    }

    fn next(&mut self) -> u64 {
        self.0.random()
    }

    fn below(&mut self, n: usize) -> usize {
        self.0.random_range(0..n)
    }

    /// True with probability `percent` / 100.
    fn chance(&mut self, percent: u64) -> bool {
        self.0.random_range(0..100) < percent
    }
}

/// `messages` is the delta channel (rarely stored); `b` has a name sorting before it and
/// `z` after; `late` appears only in some checkpoints, so the channel names change.
const CHANNELS: [&str; 4] = ["b", "messages", "z", "late"];

fn value(v: serde_json::Value) -> SerializedValue {
    SerializedValue::new("json", serde_json::to_vec(&v).expect("json"))
}

/// A stored checkpoint of the generated thread.
#[derive(Clone)]
struct Node {
    config: CheckpointConfig,
    versions: ChannelVersions,
}

/// A thread of `n` checkpoints in namespace `ns`: mostly each the child of the last, some
/// the child of a random earlier one (their ids interleave with the main line), a few new
/// roots and re-puts of an existing id with other values. `random_ids`: ids in no order, so
/// a parent's id is as often above its child's as below. Runs `r0`..`r3` own the
/// checkpoints in turn.
async fn branching_thread(
    saver: &InMemorySaver,
    rng: &mut Rng,
    thread: &str,
    ns: &str,
    n: usize,
    random_ids: bool,
) -> Result<Vec<CheckpointConfig>> {
    let mut nodes: Vec<Node> = Vec::new();
    for step in 0..n as i64 {
        let reput = !nodes.is_empty() && rng.chance(3);
        let parent = match (nodes.last(), rng.below(100)) {
            _ if reput => None,
            (None, _) | (Some(_), 0..=1) => None,
            (Some(_), 2..=16) => Some(nodes[rng.below(nodes.len())].clone()),
            (Some(last), _) => Some(last.clone()),
        };
        let (config, mut versions) = match &parent {
            None => (
                CheckpointConfig::new(thread).with_ns(ns),
                ChannelVersions::new(),
            ),
            Some(p) => (p.config.clone(), p.versions.clone()),
        };
        let mut cp = Checkpoint::new(step);
        if reput {
            // The same id again, with the versions (and values) of another checkpoint.
            let again = nodes[rng.below(nodes.len())].clone();
            cp.id = again.config.checkpoint_id.clone().expect("stored id");
            versions = nodes[rng.below(nodes.len())].versions.clone();
        } else if random_ids {
            cp.id = format!("{:016x}", rng.next());
        }
        let mut new_versions = ChannelVersions::new();
        for channel in CHANNELS {
            if channel == "late" && rng.chance(50) {
                versions.remove(channel);
                continue;
            }
            if !rng.chance(60) {
                continue;
            }
            // Branches bump the same counters: they share (channel, version) blobs.
            let next = versions
                .get(channel)
                .and_then(ChannelVersion::counter)
                .map_or(1, |v| v + 1);
            let version = ChannelVersion::from(next);
            versions.insert(channel.to_owned(), version.clone());
            new_versions.insert(channel.to_owned(), version);
            let stored = if channel == "messages" { 8 } else { 40 };
            if rng.chance(stored) {
                cp.channel_values.insert(
                    channel.to_owned(),
                    value(json!({ "step": step, "ch": channel })),
                );
            }
        }
        cp.channel_versions = versions.clone();
        let metadata = CheckpointMetadata::new(CheckpointSource::Loop, step)
            .with_run_id(format!("r{}", step % 4));
        let config = saver.put(&config, cp, metadata, new_versions).await?;
        for t in 0..rng.below(3) {
            let task = format!("task-{}", [10, 2][t]);
            let writes: Vec<(String, SerializedValue)> = (0..rng.below(3) + 1)
                .map(|i| {
                    let channel = CHANNELS[rng.below(CHANNELS.len())];
                    (channel.to_owned(), value(json!([step, t, i])))
                })
                .collect();
            let path = if rng.chance(30) { "a" } else { "b" };
            saver.put_writes(&config, writes, &task, path).await?;
        }
        nodes.push(Node { config, versions });
    }
    Ok(nodes.into_iter().map(|n| n.config).collect())
}

/// Both walks agree at every stored checkpoint of `thread`, at its latest, and at an
/// unknown id; returns how many answers had writes and how many a seed.
async fn agree(saver: &InMemorySaver, thread: &str) -> Result<(usize, usize)> {
    let stored = saver
        .list(
            Some(&CheckpointConfig::new(thread)),
            &ListOptions::default(),
        )
        .await?;
    let mut targets: Vec<CheckpointConfig> = stored.into_iter().map(|t| t.config).collect();
    for ns in ["", "inner"] {
        targets.push(CheckpointConfig::new(thread).with_ns(ns));
        targets.push(CheckpointConfig::new(thread).with_ns(ns).with_id("none"));
    }
    let all: Vec<String> = CHANNELS.iter().map(|c| (*c).to_owned()).collect();
    let sets = [all, vec!["messages".to_owned()], vec!["never".to_owned()]];
    let (mut with_writes, mut seeded) = (0, 0);
    for target in &targets {
        for channels in &sets {
            let fast = saver.delta_channel_history(target, channels).await?;
            let slow = walk_delta_history(saver, target, channels).await?;
            assert_eq!(fast, slow, "{target:?} {channels:?}");
            with_writes += fast.values().filter(|h| !h.writes.is_empty()).count();
            seeded += fast.values().filter(|h| h.seed.is_some()).count();
        }
    }
    Ok((with_writes, seeded))
}

async fn agrees_through_removals_and_copies(saver: InMemorySaver, seed: u64) -> Result<()> {
    let mut rng = Rng::new(seed);
    for (thread, random_ids) in [("ordered", false), ("unordered", true)] {
        for ns in ["", "inner"] {
            branching_thread(&saver, &mut rng, thread, ns, 150, random_ids).await?;
        }
        let (with_writes, seeded) = agree(&saver, thread).await?;
        assert!(with_writes > 100 && seeded > 100, "{with_writes} {seeded}");
        saver.copy_thread(thread, "copy").await?;
        agree(&saver, "copy").await?;
        saver.delete_thread("copy").await?;
        saver.delete_for_runs(&["r1".to_owned()]).await?;
        agree(&saver, thread).await?;
        saver
            .prune(&[thread.to_owned()], PruneStrategy::KeepLatest)
            .await?;
        agree(&saver, thread).await?;
        // The pruned thread grows again from its latest checkpoint.
        branching_thread(&saver, &mut rng, thread, "", 30, random_ids).await?;
        agree(&saver, thread).await?;
    }
    Ok(())
}

#[tokio::test]
async fn matches_the_generic_walk() -> Result<()> {
    for seed in [1, 2, 3] {
        agrees_through_removals_and_copies(InMemorySaver::new(), seed).await?;
    }
    Ok(())
}

#[tokio::test]
async fn matches_the_generic_walk_sealed() -> Result<()> {
    let keyring = Keyring::new("k1", &[7u8; 32])?;
    let saver = InMemorySaver::with_serde(Serde::default().with_keyring(keyring));
    agrees_through_removals_and_copies(saver, 4).await
}

/// A sealed thread whose checkpoint versions a channel without a value (its empty marker is
/// sealed for its slot) copies: the marker is sealed again for the new thread, as values are.
#[tokio::test]
async fn a_sealed_empty_channel_copies() -> Result<()> {
    let keyring = Keyring::new("k1", &[7u8; 32])?;
    let saver = InMemorySaver::with_serde(Serde::default().with_keyring(keyring));
    let mut cp = Checkpoint::new(0);
    cp.channel_versions
        .insert("messages".into(), ChannelVersion::from(1));
    let new_versions = ChannelVersions::from([("messages".to_owned(), ChannelVersion::from(1))]);
    let metadata = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    let config = CheckpointConfig::new("from");
    saver.put(&config, cp, metadata, new_versions).await?;
    saver.copy_thread("from", "to").await?;
    let copied = saver.get_tuple(&CheckpointConfig::new("to")).await?;
    let copied = copied.expect("the copy has the checkpoint");
    assert!(copied.checkpoint.channel_values.is_empty());
    assert_eq!(
        copied.checkpoint.channel_versions["messages"],
        ChannelVersion::from(1)
    );
    Ok(())
}
