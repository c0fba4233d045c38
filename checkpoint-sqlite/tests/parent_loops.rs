//! Rows written by others (hand-edited, another program's) can name a checkpoint as its own
//! parent or form a longer loop of parent links: every read and maintenance operation that
//! follows parent links still ends, and the delta history agrees with the generic walk.

use std::time::Duration;

use serde_json::json;
use waypoint_checkpoint::raw::walk_delta_history;
use waypoint_checkpoint::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointSaver, CheckpointSource, ListOptions, PruneStrategy, SerializedValue, metadata,
};
use waypoint_checkpoint_sqlite::SqliteSaver;

/// Only a guard against a loop: a test that hangs fails instead of never ending.
const GUARD: Duration = Duration::from_secs(60);

/// Runs `f` under [`GUARD`].
async fn ends<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(GUARD, f)
        .await
        .unwrap_or_else(|_| panic!("{what} never ended"))
}

/// A thread of four checkpoints (oldest first), each writing the appending channel `m`
/// without a snapshot, so every walk goes back to the root.
async fn chain(saver: &SqliteSaver, thread: &str) -> Vec<CheckpointConfig> {
    let mut parent = CheckpointConfig::new(thread).with_ns("");
    let mut version: Option<ChannelVersion> = None;
    let mut configs = Vec::new();
    for step in 0..4i64 {
        let next = ChannelVersion::next(version.as_ref()).expect("version");
        version = Some(next.clone());
        let mut cp = Checkpoint::new(step);
        cp.channel_versions.insert("m".to_owned(), next.clone());
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, step)
            .with(metadata::DELTA_COUNTERS, json!({"m": [step + 1, step + 1]}));
        let config = saver
            .put(
                &parent,
                cp,
                meta,
                ChannelVersions::from([("m".to_owned(), next)]),
            )
            .await
            .expect("put");
        let value = SerializedValue::new("json", format!("\"w{step}\"").into_bytes());
        saver
            .put_writes(&config, vec![("m".to_owned(), value)], "task", "")
            .await
            .expect("writes");
        configs.push(config);
        parent = configs[configs.len() - 1].clone();
    }
    configs
}

/// Every operation that follows parent links ends on `thread`, and the history agrees with
/// the generic walk at each checkpoint; returns the number of writes of the history at the
/// latest.
async fn walks_end(saver: &SqliteSaver, thread: &str, configs: &[CheckpointConfig]) -> usize {
    let wanted = ["m".to_owned()];
    let mut at_latest = 0;
    for config in configs {
        let fast = ends(
            "delta history",
            saver.delta_channel_history(config, &wanted),
        )
        .await
        .expect("history");
        let slow = ends("generic walk", walk_delta_history(saver, config, &wanted))
            .await
            .expect("walk");
        assert_eq!(fast, slow, "at {config:?}");
        at_latest = fast["m"].writes.len();
        ends("get_tuple", saver.get_tuple(config))
            .await
            .expect("get_tuple")
            .expect("stored");
    }
    let listed = ends(
        "list",
        saver.list(
            Some(&CheckpointConfig::new(thread)),
            &ListOptions::default(),
        ),
    )
    .await
    .expect("list");
    assert_eq!(listed.len(), configs.len());
    let copy = format!("{thread}-copy");
    ends("copy_thread", saver.copy_thread(thread, &copy))
        .await
        .expect("copy");
    let copied = CheckpointConfig::new(copy.as_str()).with_ns("");
    ends(
        "history of the copy",
        saver.delta_channel_history(&copied, &wanted),
    )
    .await
    .expect("history of the copy");
    ends(
        "prune",
        saver.prune(&[thread.to_owned(), copy], PruneStrategy::KeepLatest),
    )
    .await
    .expect("prune");
    let latest = CheckpointConfig::new(thread).with_ns("");
    assert!(
        saver.get_tuple(&latest).await.expect("latest").is_some(),
        "prune keeps the latest"
    );
    at_latest
}

/// Sets `child`'s parent to `parent` by hand, as another program might.
fn set_parent(path: &std::path::Path, thread: &str, child: &CheckpointConfig, parent: &str) {
    let conn = rusqlite::Connection::open(path).expect("open raw");
    let changed = conn
        .execute(
            "UPDATE checkpoints SET parent_checkpoint_id = ?3
             WHERE thread_id = ?1 AND checkpoint_id = ?2",
            rusqlite::params![thread, child.checkpoint_id.as_deref(), parent],
        )
        .expect("update");
    assert_eq!(changed, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn walks_end_on_a_self_parented_checkpoint() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("loops.db");
    let saver = SqliteSaver::from_path(&path).await.expect("open");
    let c = chain(&saver, "t").await;
    // The third checkpoint names itself: the walk from the latest reads it and stops.
    let own = c[2].checkpoint_id.clone().expect("id");
    set_parent(&path, "t", &c[2], &own);
    assert_eq!(walks_end(&saver, "t", &c).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn walks_end_on_a_loop_of_two() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("loops.db");
    let saver = SqliteSaver::from_path(&path).await.expect("open");
    let c = chain(&saver, "t").await;
    // The second and third checkpoints name each other: the walk from the latest reads both.
    let third = c[2].checkpoint_id.clone().expect("id");
    set_parent(&path, "t", &c[1], &third);
    assert_eq!(walks_end(&saver, "t", &c).await, 2);
    // The latest itself in a loop with its parent.
    let c = chain(&saver, "u").await;
    let latest = c[3].checkpoint_id.clone().expect("id");
    set_parent(&path, "u", &c[2], &latest);
    assert_eq!(walks_end(&saver, "u", &c).await, 1);
}
