//! LangGraph's legacy `writes` metadata key: in LangGraph mode (the default) this saver
//! drops it when storing, as LangGraph's PostgreSQL saver does, through `put` and batches
//! alike, keeping every other key; with LangGraph's value encoding off it is kept.

mod common;

use serde_json::json;
use waypoint_checkpoint::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSource, Result, Save, metadata,
};
use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver};

/// The metadata of a put with `writes` and one key of the caller's.
fn with_writes() -> CheckpointMetadata {
    CheckpointMetadata::new(CheckpointSource::Loop, 0)
        .with(metadata::WRITES, json!({"node": {"foo": "a"}}))
        .with("mine", "kept")
}

/// Puts one checkpoint through `put` and one through `save_batch` on `saver`, and returns
/// whether each read back has `writes`; the caller's own key survives either way.
async fn stored_writes(saver: &PostgresSaver) -> Result<Vec<bool>> {
    let mut found = Vec::new();
    for batched in [false, true] {
        let config = CheckpointConfig::new(uuid::Uuid::new_v4().to_string());
        let checkpoint = Checkpoint::new(0);
        let versions = ChannelVersions::new();
        let stored = if batched {
            let id = checkpoint.id.clone();
            let save = Save::Put {
                config: config.clone(),
                checkpoint,
                metadata: with_writes(),
                new_versions: versions,
            };
            saver.save_batch(vec![save]).await?;
            CheckpointConfig::of(&config.thread_id, "", &id)
        } else {
            saver
                .put(&config, checkpoint, with_writes(), versions)
                .await?
        };
        let tuple = saver
            .get_tuple(&stored)
            .await?
            .expect("the checkpoint just put");
        let meta = tuple.metadata.to_json();
        assert_eq!(meta.get("mine"), Some(&json!("kept")));
        found.push(meta.contains_key(metadata::WRITES));
    }
    Ok(found)
}

#[tokio::test]
async fn langgraph_mode_drops_writes_and_waypoint_mode_keeps_it() -> Result<()> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(());
    };
    for (langgraph, kept) in [(true, false), (false, true)] {
        let config = PostgresConfig::new(url.clone())
            .schema(common::fresh_schema())
            .max_connections(2)
            .langgraph_values(langgraph);
        let saver = PostgresSaver::connect(config).await?;
        assert_eq!(
            stored_writes(&saver).await?,
            [kept, kept],
            "langgraph {langgraph}"
        );
    }
    Ok(())
}
