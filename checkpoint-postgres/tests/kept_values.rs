//! A put sends only the values of the channels it versions anew and checks the others (the
//! values it keeps) are stored: after a committed delete of the thread those are gone, and
//! every way of putting stores them again, as when every value was sent.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use waypoint_checkpoint::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointSaver, CheckpointSource, Result, Save, Serde,
};

/// A checkpoint of `thread` after its first: `kept` at its first version, `new` at version
/// `step + 1`, handed over with both values and only `new` in `new_versions`.
fn second(thread: &str, parent: &str, step: i64) -> Result<Save> {
    let serde = Serde::default();
    let mut checkpoint = Checkpoint::new(step);
    let step_version = u64::try_from(step).expect("a step") + 1;
    let (one, two) = (
        ChannelVersion::from(1u64),
        ChannelVersion::from(step_version),
    );
    checkpoint.channel_versions =
        BTreeMap::from([("kept".into(), one), ("new".into(), two.clone())]);
    checkpoint.channel_values = BTreeMap::from([
        ("kept".into(), serde.dumps(&json!("kept value"))?),
        ("new".into(), serde.dumps(&json!(step))?),
    ]);
    Ok(Save::Put {
        config: CheckpointConfig::new(thread)
            .with_ns("")
            .with_id(parent.to_owned()),
        checkpoint,
        metadata: CheckpointMetadata::new(CheckpointSource::Loop, step),
        new_versions: BTreeMap::from([("new".into(), two)]),
    })
}

/// The arguments of `put` a [`Save::Put`] holds.
fn put_args(
    save: Save,
) -> (
    CheckpointConfig,
    Checkpoint,
    CheckpointMetadata,
    ChannelVersions,
) {
    match save {
        Save::Put {
            config,
            checkpoint,
            metadata,
            new_versions,
        } => (config, checkpoint, metadata, new_versions),
        Save::Writes { .. } => unreachable!("a put"),
    }
}

/// Stores the thread's first checkpoint (both channels at version 1), deletes the thread
/// (committed), and returns the first checkpoint's id.
async fn put_then_delete(saver: &dyn CheckpointSaver, thread: &str) -> Result<String> {
    let id = put_first(saver, thread).await?;
    saver.delete_thread(thread).await?;
    Ok(id)
}

/// Stores the thread's first checkpoint (both channels at version 1) and returns its id.
async fn put_first(saver: &dyn CheckpointSaver, thread: &str) -> Result<String> {
    let serde = Serde::default();
    let mut checkpoint = Checkpoint::new(0);
    let one = ChannelVersion::from(1u64);
    let versions = BTreeMap::from([("kept".into(), one.clone()), ("new".into(), one)]);
    checkpoint.channel_versions = versions.clone();
    checkpoint.channel_values = BTreeMap::from([
        ("kept".into(), serde.dumps(&json!("kept value"))?),
        ("new".into(), serde.dumps(&json!(0))?),
    ]);
    let id = checkpoint.id.clone();
    let meta = CheckpointMetadata::new(CheckpointSource::Input, -1);
    let config = CheckpointConfig::new(thread).with_ns("");
    saver.put(&config, checkpoint, meta, versions).await?;
    Ok(id)
}

/// The values the newest checkpoint of `thread` reads as.
async fn values(saver: &dyn CheckpointSaver, thread: &str) -> Result<BTreeMap<String, Value>> {
    let serde = Serde::default();
    let config = CheckpointConfig::new(thread).with_ns("");
    let tuple = saver.get_tuple(&config).await?.expect("a checkpoint");
    let mut out = BTreeMap::new();
    for (channel, value) in &tuple.checkpoint.channel_values {
        out.insert(channel.clone(), serde.loads(value)?);
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_after_a_committed_delete_stores_the_values_it_keeps() -> Result<()> {
    let Some(saver) = common::saver(Serde::default()).await? else {
        return Ok(());
    };
    let expected = BTreeMap::from([
        ("kept".to_owned(), json!("kept value")),
        ("new".to_owned(), json!(1)),
    ]);
    // put
    let parent = put_then_delete(&saver, "put").await?;
    let (config, checkpoint, metadata, new_versions) = put_args(second("put", &parent, 1)?);
    saver
        .put(&config, checkpoint, metadata, new_versions)
        .await?;
    assert_eq!(values(&saver, "put").await?, expected);
    // put_unleased
    let parent = put_then_delete(&saver, "unleased").await?;
    let (config, checkpoint, metadata, new_versions) = put_args(second("unleased", &parent, 1)?);
    let stored = (saver.put_unleased(&config, checkpoint, metadata, new_versions)).await?;
    assert!(stored.is_some());
    assert_eq!(values(&saver, "unleased").await?, expected);
    // save_batch
    let parent = put_then_delete(&saver, "batch").await?;
    saver.save_batch(vec![second("batch", &parent, 1)?]).await?;
    assert_eq!(values(&saver, "batch").await?, expected);
    // save_fenced: one put (one statement) and two (a transaction)
    let parent = put_then_delete(&saver, "fenced").await?;
    let lease = saver
        .acquire_lease("fenced", Duration::from_secs(60))
        .await?;
    saver
        .save_fenced(&lease, vec![second("fenced", &parent, 1)?])
        .await?;
    assert_eq!(values(&saver, "fenced").await?, expected);
    saver.delete_thread("fenced").await?;
    let first = second("fenced", &parent, 1)?;
    let Save::Put { checkpoint, .. } = &first else {
        unreachable!()
    };
    let then = second("fenced", &checkpoint.id.clone(), 2)?;
    saver.save_fenced(&lease, vec![first, then]).await?;
    let expected = BTreeMap::from([
        ("kept".to_owned(), json!("kept value")),
        ("new".to_owned(), json!(2)),
    ]);
    assert_eq!(values(&saver, "fenced").await?, expected);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_is_still_refused_when_values_are_kept() -> Result<()> {
    let Some(saver) = common::saver(Serde::default()).await? else {
        return Ok(());
    };
    // The values kept are stored: the fence alone refuses.
    let parent = put_first(&saver, "lost").await?;
    let lease = saver.acquire_lease("lost", Duration::from_secs(60)).await?;
    saver.release_lease(&lease).await?;
    let taken = saver.acquire_lease("lost", Duration::from_secs(60)).await?;
    let refused = saver
        .save_fenced(&lease, vec![second("lost", &parent, 1)?])
        .await;
    assert!(refused.is_err(), "{refused:?}");
    let config = CheckpointConfig::new("lost").with_ns("");
    let newest = saver.get_tuple(&config).await?.expect("the first");
    assert_eq!(newest.checkpoint.id, parent);
    // Deleted: the values kept are missing too.
    saver.delete_thread("lost").await?;
    let refused = saver
        .save_fenced(&lease, vec![second("lost", &parent, 1)?])
        .await;
    assert!(refused.is_err(), "{refused:?}");
    assert!(saver.get_tuple(&config).await?.is_none());
    saver.release_lease(&taken).await?;
    Ok(())
}
