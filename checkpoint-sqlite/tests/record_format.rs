//! The stored record: new rows hold compact records (BLOBs); rows earlier versions wrote as
//! JSON text still read, filter, fork (delta history) and prune beside them; a corrupt
//! record is a clear error.

use std::collections::BTreeMap;

use serde_json::json;
use waypoint_checkpoint::serde::record::RECORD_TAG;
use waypoint_checkpoint::{
    ChannelVersion, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSource, ListOptions, PruneStrategy, Result, SerializedValue,
};
use waypoint_checkpoint_sqlite::SqliteSaver;

fn value(v: serde_json::Value) -> SerializedValue {
    SerializedValue::new("json", serde_json::to_vec(&v).expect("json"))
}

/// Puts `n` chained checkpoints on `thread`: channel `a` versioned every step (with a value
/// on the first only), `b` on the first only, and a pending write to `a` on each.
async fn history(saver: &SqliteSaver, thread: &str, n: i64) -> Result<Vec<CheckpointConfig>> {
    let mut parent = CheckpointConfig::new(thread);
    let mut versions: BTreeMap<String, ChannelVersion> = BTreeMap::new();
    let mut out = Vec::new();
    for step in 0..n {
        let mut cp = Checkpoint::new(step);
        let mut new = BTreeMap::new();
        for channel in ["a", "b"] {
            if step == 0 || channel == "a" {
                let v = saver.next_version(versions.get(channel))?;
                versions.insert(channel.into(), v.clone());
                new.insert(channel.to_owned(), v);
                // Later versions of `a` have no value, as a delta channel's: a history walks
                // back to the first checkpoint for its seed.
                if step == 0 {
                    cp.channel_values
                        .insert(channel.into(), value(json!({ "step": step })));
                }
            }
        }
        cp.channel_versions = versions.clone();
        let seen = versions.clone();
        cp.versions_seen.insert("node".into(), seen);
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, step).with("turn", step);
        parent = saver.put(&parent, cp, meta, new).await?;
        saver
            .put_writes(&parent, vec![("a".into(), value(json!(step)))], "task", "")
            .await?;
        out.push(parent.clone());
    }
    Ok(out)
}

#[tokio::test]
async fn json_rows_of_earlier_versions_read_beside_compact_ones() -> Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("records.db");
    let saver = SqliteSaver::from_path(&path).await?;
    let configs = history(&saver, "t", 4).await?;
    let before = saver
        .list(Some(&CheckpointConfig::new("t")), &ListOptions::default())
        .await?;
    let channels = ["a".to_string(), "b".to_string()];
    let histories = saver.delta_channel_history(&configs[3], &channels).await?;
    let raw = rusqlite::Connection::open(&path).expect("open");
    let (kind, first): (String, Vec<u8>) = raw
        .query_row(
            "SELECT typeof(checkpoint), checkpoint FROM checkpoints LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("row");
    assert_eq!((kind.as_str(), first[0]), ("blob", RECORD_TAG));

    // The two oldest rows as the JSON text earlier versions wrote.
    for tuple in &before[2..] {
        let mut head = tuple.checkpoint.clone();
        head.channel_values.clear();
        raw.execute(
            "UPDATE checkpoints SET checkpoint = ?1, metadata = ?2 WHERE checkpoint_id = ?3",
            rusqlite::params![
                serde_json::to_string(&head).expect("json"),
                serde_json::to_string(&tuple.metadata.to_json()).expect("json"),
                tuple.checkpoint.id,
            ],
        )
        .expect("update");
    }
    let after = saver
        .list(Some(&CheckpointConfig::new("t")), &ListOptions::default())
        .await?;
    assert_eq!(after, before);

    // Metadata filters match both forms.
    for turn in 0..4 {
        let options = ListOptions {
            filter: Some(json!({ "turn": turn })),
            ..Default::default()
        };
        let found = saver
            .list(Some(&CheckpointConfig::new("t")), &options)
            .await?;
        assert_eq!(found.len(), 1, "turn {turn}");
    }

    // Delta histories read both forms alike.
    assert_eq!(histories["a"].writes.len(), 3, "{histories:?}");
    assert_eq!(
        saver.delta_channel_history(&configs[3], &channels).await?,
        histories
    );

    // Pruning reads both forms for the values still referred to.
    saver
        .prune(&["t".to_string()], PruneStrategy::KeepLatest)
        .await?;
    let latest = saver
        .get_tuple(&CheckpointConfig::new("t"))
        .await?
        .expect("latest");
    assert_eq!(latest.checkpoint, before[0].checkpoint);

    // A corrupt record is a clear error, not a panic.
    raw.execute(
        "UPDATE checkpoints SET checkpoint = ?1",
        [vec![RECORD_TAG, 1, 0xff]],
    )
    .expect("update");
    let err = saver
        .get_tuple(&CheckpointConfig::new("t"))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("corrupt checkpoint record"),
        "{err}"
    );
    Ok(())
}
