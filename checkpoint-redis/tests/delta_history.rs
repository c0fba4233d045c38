//! `delta_channel_history` (one script) against the generic walk over `get_tuple`, on long
//! random branching threads, and the ttl renewals both make.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;
use waypoint_checkpoint::raw::walk_delta_history;

use serde_json::json;
use waypoint_checkpoint::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointSaver, CheckpointSource, Result, SerializedValue,
};
use waypoint_checkpoint_redis::RedisSaver;

/// SplitMix64: a seeded generator, so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability `percent` / 100.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Channels with names the field encodings must keep apart (a `:`, a length-prefix look-alike,
/// a prefix of another name, non-ASCII, JSON escapes around another channel's field).
const CHANNELS: [&str; 8] = [
    "messages",
    "a",
    "ab",
    "2:ab",
    "ü:x",
    "files",
    "q\",\\\"2:ab\t",
    "z\"2:ab",
];

fn value(v: serde_json::Value) -> SerializedValue {
    SerializedValue::new("json", serde_json::to_vec(&v).expect("json"))
}

/// A stored checkpoint of the generated thread: its config and channel versions.
struct Node {
    config: CheckpointConfig,
    versions: ChannelVersions,
}

/// Puts `n` checkpoints on `(thread, ns)`: mostly a chain, with forks from random earlier
/// checkpoints and an occasional new root; each step bumps random channels, storing a value
/// for some of them only, and gets writes from several tasks on random channels.
async fn branching_thread(
    saver: &RedisSaver,
    rng: &mut Rng,
    thread: &str,
    ns: &str,
    n: usize,
) -> Result<Vec<CheckpointConfig>> {
    let mut nodes: Vec<Node> = Vec::new();
    for step in 0..n {
        let parent = match (nodes.last(), rng.below(100)) {
            (None, _) | (Some(_), 0..=1) => None,
            (Some(_), 2..=11) => Some(&nodes[rng.below(nodes.len())]),
            (Some(last), _) => Some(last),
        };
        let (config, mut versions) = match parent {
            None => (
                CheckpointConfig::new(thread).with_ns(ns),
                ChannelVersions::new(),
            ),
            Some(p) => (p.config.clone(), p.versions.clone()),
        };
        let mut cp = Checkpoint::new(step as i64);
        let mut new_versions = ChannelVersions::new();
        for channel in CHANNELS {
            if !rng.chance(45) {
                continue;
            }
            // Forks bump the same counters: branches share (channel, version) fields.
            let next = versions
                .get(channel)
                .and_then(|v| v.as_str().parse::<u64>().ok())
                .map_or(1, |v| v + 1);
            let version = ChannelVersion::from(next);
            versions.insert(channel.to_owned(), version.clone());
            new_versions.insert(channel.to_owned(), version);
            // `messages` is a delta channel: rarely a snapshot.
            let stored = if channel == "messages" { 8 } else { 40 };
            if rng.chance(stored) {
                cp.channel_values.insert(
                    channel.to_owned(),
                    value(json!({ "step": step, "ch": channel })),
                );
            }
        }
        cp.channel_versions = versions.clone();
        let metadata = CheckpointMetadata::new(CheckpointSource::Loop, step as i64);
        let config = saver.put(&config, cp, metadata, new_versions).await?;
        let tasks = rng.below(4);
        for t in 0..tasks {
            // Task ids that sort differently as strings and as numbers.
            let task = format!("task-{}", [10, 2, 1, 33][t]);
            let writes: Vec<(String, SerializedValue)> = (0..rng.below(4) + 1)
                .map(|i| {
                    let channel = CHANNELS[rng.below(CHANNELS.len())];
                    (channel.to_owned(), value(json!([step, t, i])))
                })
                .collect();
            saver.put_writes(&config, writes, &task, "path").await?;
        }
        nodes.push(Node { config, versions });
    }
    Ok(nodes.into_iter().map(|n| n.config).collect())
}

/// The channel sets each checkpoint is asked about.
fn channel_sets() -> Vec<Vec<String>> {
    let set = |names: &[&str]| names.iter().map(|s| (*s).to_owned()).collect();
    vec![
        CHANNELS.iter().map(|s| (*s).to_owned()).collect(),
        set(&["messages"]),
        // Duplicates, and a channel nothing ever writes.
        set(&["ab", "nope", "2:ab", "ab"]),
        set(&["q\",\\\"2:ab\t", "files"]),
    ]
}

/// Both walks agree at every checkpoint of two random namespaces of a thread, at the
/// latest checkpoint of each, and at unknown targets.
async fn agrees_with_the_generic_walk(saver: &RedisSaver, seed: u64) -> Result<()> {
    let mut rng = Rng(seed);
    let thread = format!("delta-{seed}");
    let mut configs = Vec::new();
    for ns in ["", "inner:1"] {
        configs.extend(branching_thread(saver, &mut rng, &thread, ns, 160).await?);
        configs.push(CheckpointConfig::new(&thread).with_ns(ns));
        configs.push(
            CheckpointConfig::new(&thread)
                .with_ns(ns)
                .with_id("no-such-checkpoint"),
        );
    }
    configs.push(CheckpointConfig::new("no-such-thread"));
    let sets = channel_sets();
    let mut nonempty = 0;
    let mut seeded = 0;
    for (i, config) in configs.iter().enumerate() {
        // Every checkpoint with the full set; the others in turn.
        for channels in [&sets[0], &sets[1 + i % (sets.len() - 1)], &Vec::new()] {
            let fast = saver.delta_channel_history(config, channels).await?;
            let slow = walk_delta_history(saver, config, channels).await?;
            assert_eq!(fast, slow, "seed {seed}, {config:?}, {channels:?}");
            nonempty += fast.values().filter(|h| !h.writes.is_empty()).count();
            seeded += fast.values().filter(|h| h.seed.is_some()).count();
        }
    }
    // The thread exercised both halves of the result.
    assert!(nonempty > 100 && seeded > 100, "{nonempty} {seeded}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matches_the_generic_walk() -> Result<()> {
    let Some(saver) = common::saver(Default::default()).await? else {
        return Ok(());
    };
    for seed in [1, 2] {
        agrees_with_the_generic_walk(&saver, seed).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matches_the_generic_walk_encrypted() -> Result<()> {
    let Some(saver) = common::saver(common::keyed()?).await? else {
        return Ok(());
    };
    agrees_with_the_generic_walk(&saver, 3).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matches_the_generic_walk_with_ttl() -> Result<()> {
    let Some(config) = common::config() else {
        return Ok(());
    };
    let saver = RedisSaver::connect(config.ttl(Duration::from_secs(600))).await?;
    agrees_with_the_generic_walk(&saver, 4).await
}

/// The keys of the saver's prefix whose ttl is above `floor_ms`.
async fn renewed(saver: &RedisSaver, floor_ms: i64) -> BTreeSet<String> {
    let mut conn = saver.connection();
    let mut out = BTreeSet::new();
    for key in common::scan(&mut conn, &format!("{}:*", saver.config().prefix)).await {
        if common::pttl(&mut conn, &key).await > floor_ms {
            out.insert(key);
        }
    }
    out
}

/// Shortens the ttl of every key of the prefix, and marks the thread fully renewed just now
/// (so the next read renews only the keys it touches).
async fn shorten(saver: &RedisSaver, thread: &str) {
    let mut conn = saver.connection();
    let prefix = saver.config().prefix.clone();
    let keys = common::scan(&mut conn, &format!("{prefix}:*")).await;
    let mut pipe = redis::pipe();
    for key in &keys {
        pipe.cmd("PEXPIRE").arg(key).arg(100_000).ignore();
    }
    // Far in the future: no full renewal is due.
    pipe.cmd("HSET")
        .arg(format!("{prefix}:{{{thread}}}:meta"))
        .arg("refreshed")
        .arg(i64::MAX / 2)
        .ignore();
    let _: () = pipe.query_async(&mut conn).await.expect("shorten");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renews_the_keys_get_tuple_renews() -> Result<()> {
    let Some(config) = common::config() else {
        return Ok(());
    };
    let saver = RedisSaver::connect(config.ttl(Duration::from_secs(3600))).await?;
    let thread = "ttl-thread";
    let configs = branching_thread(&saver, &mut Rng(7), thread, "", 40).await?;
    let channels: Vec<String> = CHANNELS.iter().map(|s| (*s).to_owned()).collect();
    for target in [&configs[39], &configs[25], &configs[3]] {
        shorten(&saver, thread).await;
        let slow = walk_delta_history(&saver, target, &channels).await?;
        let by_get = renewed(&saver, 200_000).await;
        shorten(&saver, thread).await;
        let fast = saver.delta_channel_history(target, &channels).await?;
        let by_script = renewed(&saver, 200_000).await;
        assert_eq!(fast, slow);
        assert_eq!(by_script, by_get, "{target:?}");
        // The target's checkpoint hash is among them, and not every key of the thread.
        let id = target.checkpoint_id.as_deref().unwrap_or_default();
        assert!(
            by_script
                .iter()
                .any(|k| k.contains(":checkpoint:") && k.ends_with(id)),
            "{by_script:#?}"
        );
        let all = common::scan(
            &mut saver.connection(),
            &format!("{}:*", saver.config().prefix),
        )
        .await;
        assert!(by_script.len() < all.len(), "{by_script:#?}");
    }
    Ok(())
}

/// A channel whose JSON-escaped name holds another channel's field start does not lend
/// that channel a value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escaped_names_do_not_shadow_fields() -> Result<()> {
    let Some(saver) = common::saver(Default::default()).await? else {
        return Ok(());
    };
    let root = CheckpointConfig::new("escapes");
    let put = |channel: &str, stored: bool, parent: &CheckpointConfig, step: i64| {
        let mut cp = Checkpoint::new(step);
        let version = ChannelVersion::from(1);
        cp.channel_versions
            .insert(channel.to_owned(), version.clone());
        if stored {
            cp.channel_values
                .insert(channel.to_owned(), value(json!(channel)));
        }
        let new_versions = ChannelVersions::from([(channel.to_owned(), version)]);
        let metadata = CheckpointMetadata::new(CheckpointSource::Loop, step);
        let (saver, parent) = (&saver, parent.clone());
        async move { saver.put(&parent, cp, metadata, new_versions).await }
    };
    // Field `2:ab1` holds a value; a second root names only `z"2:ab` (JSON `"6:z\"2:ab1"`).
    put("ab", true, &root, 0).await?;
    let other = put("z\"2:ab", false, &root, 1).await?;
    let child = put("z\"2:ab", false, &other, 2).await?;
    let channels = vec!["ab".to_owned()];
    let fast = saver.delta_channel_history(&child, &channels).await?;
    assert_eq!(fast, walk_delta_history(&saver, &child, &channels).await?);
    assert_eq!(fast["ab"].seed, None);
    Ok(())
}
