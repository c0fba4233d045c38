//! One database shared with the real Python packages (langgraph, langgraph-checkpoint-postgres
//! from PyPI, in the venv `scripts/test.sh` makes): a LangGraph `StateGraph` thread read back
//! by Rust, and a Rust thread read back by LangGraph's `PostgresSaver`.

mod common;

use std::collections::BTreeMap;

use serde_json::{Value, json};
use waypoint_checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource,
    CheckpointTuple, ListOptions, Result, Serde,
};
use waypoint_checkpoint_postgres::PostgresSaver;

/// A tuple's channel values decoded to JSON.
fn values_of(t: &CheckpointTuple) -> Result<BTreeMap<String, Value>> {
    let serde = Serde::default();
    t.checkpoint
        .channel_values
        .iter()
        .map(|(k, v)| Ok((k.clone(), serde.loads::<Value>(v)?)))
        .collect()
}

/// A tuple's pending writes as sorted `[task, channel, value]` triples.
fn writes_of(t: &CheckpointTuple) -> Result<Vec<Value>> {
    let serde = Serde::default();
    let mut out = t
        .pending_writes
        .iter()
        .map(|w| {
            Ok(json!([
                w.task_id,
                w.channel,
                serde.loads::<Value>(&w.value)?
            ]))
        })
        .collect::<Result<Vec<_>>>()?;
    out.sort_by_key(|v| v.to_string());
    Ok(out)
}

fn sorted(list: &Value) -> Vec<Value> {
    let mut out = list.as_array().cloned().unwrap_or_default();
    out.sort_by_key(|v| v.to_string());
    out
}

fn map_of(v: &Value) -> BTreeMap<String, Value> {
    v.as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_langgraph_thread_reads_back_as_python_reports_it() -> Result<()> {
    let Some((url, python)) = common::fresh_database("interop").await else {
        return Ok(());
    };
    let history = common::run_python(&python, "python_writes.py", &[&url, "py-thread"]);
    let history = history.as_array().expect("history list");
    assert_eq!(history.len(), 10, "two runs of a three-node graph");

    let saver = PostgresSaver::from_url(&url).await?;
    // LangGraph ran setup; ours adds only its own migrations.
    saver.setup().await?;
    let thread = CheckpointConfig::new("py-thread");
    let listed = saver.list(Some(&thread), &ListOptions::default()).await?;
    let ids: Vec<&str> = listed.iter().map(|t| t.checkpoint.id.as_str()).collect();
    let python_ids: Vec<&str> = history
        .iter()
        .map(|h| h["checkpoint_id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, python_ids, "same checkpoints, newest first");

    for (tuple, h) in listed.iter().zip(history) {
        let single = saver
            .get_tuple(&tuple.config)
            .await?
            .expect("listed checkpoint");
        assert_eq!(&single, tuple, "get_tuple and list agree");
        assert_eq!(
            tuple
                .parent_config
                .as_ref()
                .and_then(|p| p.checkpoint_id.as_deref()),
            h["parent_checkpoint_id"].as_str()
        );
        assert_eq!(Value::Object(tuple.metadata.to_json()), h["metadata"]);
        let values = values_of(tuple)?;
        assert_eq!(
            values,
            map_of(&h["channel_values"]),
            "at {}",
            tuple.checkpoint.id
        );
        // The state Python's get_state_history reports: every state key we hold is equal
        // (Python adds reducer defaults for channels never written).
        for (key, value) in map_of(&h["values"]) {
            if let Some(ours) = values.get(&key) {
                assert_eq!(ours, &value, "state key {key} at {}", tuple.checkpoint.id);
            }
        }
        let versions: BTreeMap<String, Value> = tuple
            .checkpoint
            .channel_versions
            .iter()
            .map(|(k, v)| (k.clone(), json!(v.as_str())))
            .collect();
        assert_eq!(versions, map_of(&h["channel_versions"]));
        assert_eq!(writes_of(tuple)?, sorted(&h["pending_writes"]));
    }
    let latest = saver.get_tuple(&thread).await?.expect("latest");
    assert_eq!(latest.checkpoint.id, python_ids[0]);
    let final_state = values_of(&latest)?;
    assert_eq!(final_state["count"], history[0]["values"]["count"]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_thread_reads_back_in_langgraph() -> Result<()> {
    let Some((url, python)) = common::fresh_database("interop").await else {
        return Ok(());
    };
    let saver = PostgresSaver::from_url(&url).await?;
    saver.setup().await?;
    let serde = Serde::default();
    let states = [
        json!({"topic": "rust", "count": 1, "items": ["a"], "notes": {"k": [1, 2.5, null, true]}}),
        json!({"topic": "rust", "count": 2, "items": ["a", "b"], "notes": {"k": "ünïcödé"}}),
        json!({"topic": "done", "count": 3, "items": ["a", "b", "c"], "notes": {}}),
    ];
    let mut parent = CheckpointConfig::new("rs-thread").with_ns("");
    let mut versions = BTreeMap::new();
    let mut previous: Option<Value> = None;
    for (step, state) in states.iter().enumerate() {
        let mut cp = Checkpoint::new(step as i64);
        let mut new_versions = BTreeMap::new();
        for (channel, value) in state.as_object().expect("state") {
            if previous.as_ref().is_some_and(|p| &p[channel] == value) {
                continue;
            }
            let v = saver.next_version(versions.get(channel))?;
            versions.insert(channel.clone(), v.clone());
            new_versions.insert(channel.clone(), v);
            cp.channel_values
                .insert(channel.clone(), serde.dumps(value)?);
        }
        cp.channel_versions = versions.clone();
        let meta =
            CheckpointMetadata::new(CheckpointSource::Loop, step as i64).with("writer", "waypoint");
        parent = saver.put(&parent, cp, meta, new_versions).await?;
        previous = Some(state.clone());
    }
    saver
        .put_writes(
            &parent,
            vec![
                ("items".into(), serde.dumps(&json!(["d"]))?),
                ("topic".into(), serde.dumps("next")?),
            ],
            "task-1",
            "",
        )
        .await?;

    let read = common::run_python(&python, "python_reads.py", &[&url, "rs-thread"]);
    let tuples = read["tuples"].as_array().expect("tuples");
    let ours = saver
        .list(
            Some(&CheckpointConfig::new("rs-thread")),
            &ListOptions::default(),
        )
        .await?;
    assert_eq!(tuples.len(), states.len());
    for ((t, state), py) in ours.iter().zip(states.iter().rev()).zip(tuples) {
        assert_eq!(py["checkpoint_id"], json!(t.checkpoint.id));
        assert_eq!(
            py["parent_checkpoint_id"].as_str(),
            t.parent_config
                .as_ref()
                .and_then(|p| p.checkpoint_id.as_deref())
        );
        assert_eq!(
            &py["channel_values"], state,
            "Python sees every channel value"
        );
        assert_eq!(py["metadata"], Value::Object(t.metadata.to_json()));
        assert_eq!(py["metadata"]["writer"], json!("waypoint"));
        assert_eq!(py["v"], json!(4));
    }
    assert_eq!(read["latest"]["checkpoint_id"], tuples[0]["checkpoint_id"]);
    assert_eq!(
        sorted(&read["latest"]["pending_writes"]),
        sorted(&json!([
            ["task-1", "items", ["d"]],
            ["task-1", "topic", "next"]
        ]))
    );
    Ok(())
}
