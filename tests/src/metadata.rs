//! Checkpoint metadata as a LangGraph user sees it: none of Waypoint's own bookkeeping keys.

use std::sync::Arc;

use serde_json::json;
use waypoint_checkpoint::{CheckpointConfig, CheckpointSaver, ListOptions, metadata};
use waypoint_runtime::RunConfig;

use crate::graphs::{Calls, documented_json};
use crate::{TestResult, obj, thread};

/// Waypoint's delta-history keys may be stored with a checkpoint, but no snapshot shows
/// them, even for a thread long enough to store appending channels as deltas.
pub async fn bookkeeping_keys_are_hidden(saver: Arc<dyn CheckpointSaver>) -> TestResult {
    let graph = documented_json(Arc::clone(&saver), &Calls::default())?;
    let thread_id = thread();
    let config = RunConfig::thread(thread_id.clone());
    for _ in 0..3 {
        graph.invoke(Some(obj(json!({"foo": ""}))), &config).await?;
    }
    let history = graph
        .get_state_history(&config, &ListOptions::default())
        .await?;
    let latest = graph.get_state(&config).await?;
    for meta in history
        .iter()
        .map(|s| &s.metadata)
        .chain([&latest.metadata])
    {
        for key in metadata::BOOKKEEPING {
            assert!(!meta.to_json().contains_key(key), "{key} shown in {meta:?}");
        }
    }
    // Where the saver stores deltas (not PostgreSQL in LangGraph mode), it keeps the keys
    // for its loads and prune: they are hidden, not lost.
    let stored = saver
        .list(
            Some(&CheckpointConfig::new(thread_id)),
            &ListOptions::default(),
        )
        .await?;
    let kept = stored
        .iter()
        .any(|t| t.metadata.extra.contains_key(metadata::DELTA_COUNTERS));
    let deltas = stored.iter().any(|t| {
        t.checkpoint.channel_versions.contains_key("bar")
            && !t.checkpoint.channel_values.contains_key("bar")
    });
    assert_eq!(kept, deltas, "counters are stored exactly where deltas are");
    Ok(())
}
