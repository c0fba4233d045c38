//! `put_writes`: pending writes per task, idempotency, reserved channels.

use serde_json::json;

use super::*;
use crate::Error;

async fn root(saver: &dyn CheckpointSaver, t: &str, ns: &str) -> Result<CheckpointConfig> {
    put_empty(saver, &cfg(t, ns), meta(CheckpointSource::Loop, 0)).await
}

fn w(channel: &str, v: Value) -> (String, SerializedValue) {
    (channel.to_owned(), val(v))
}

/// One write is visible on its checkpoint.
pub async fn put_writes_basic(saver: &dyn CheckpointSaver) -> Result<()> {
    let c = root(saver, &thread(), "").await?;
    saver
        .put_writes(&c, vec![w("channel1", json!("value1"))], "task1", "")
        .await?;
    let tuple = saver.get_tuple(&c).await?.expect("stored");
    assert_eq!(
        writes_of(&tuple),
        [("task1".into(), "channel1".into(), json!("value1"))]
    );
    Ok(())
}

/// Three writes in one call are three pending writes.
pub async fn put_writes_multiple_writes_same_task(saver: &dyn CheckpointSaver) -> Result<()> {
    let c = root(saver, &thread(), "").await?;
    let writes = vec![w("a", json!(1)), w("b", json!(2)), w("c", json!(3))];
    saver.put_writes(&c, writes, "task", "").await?;
    let tuple = saver.get_tuple(&c).await?.expect("stored");
    let expected: Vec<(String, String, Value)> = [("a", 1), ("b", 2), ("c", 3)]
        .iter()
        .map(|(ch, v)| ("task".into(), (*ch).into(), json!(v)))
        .collect();
    assert_eq!(writes_of(&tuple), expected);
    Ok(())
}

/// Two tasks writing the same channel are two writes.
pub async fn put_writes_multiple_tasks(saver: &dyn CheckpointSaver) -> Result<()> {
    let c = root(saver, &thread(), "").await?;
    saver
        .put_writes(&c, vec![w("ch", json!("x"))], "task-a", "")
        .await?;
    saver
        .put_writes(&c, vec![w("ch", json!("y"))], "task-b", "")
        .await?;
    let tuple = saver.get_tuple(&c).await?.expect("stored");
    assert_eq!(
        writes_of(&tuple),
        [
            ("task-a".into(), "ch".into(), json!("x")),
            ("task-b".into(), "ch".into(), json!("y"))
        ]
    );
    Ok(())
}

/// The task id is echoed.
pub async fn put_writes_preserves_task_id(saver: &dyn CheckpointSaver) -> Result<()> {
    let c = root(saver, &thread(), "").await?;
    let task = "6f1c2a4e-0b1d-4c6e-9a3f-2b7d8e9f0a1b";
    saver
        .put_writes(&c, vec![w("ch", json!(1))], task, "")
        .await?;
    let tuple = saver.get_tuple(&c).await?.expect("stored");
    assert_eq!(tuple.pending_writes[0].task_id, task);
    Ok(())
}

/// Channel and a structured value round-trip.
pub async fn put_writes_preserves_channel_and_value(saver: &dyn CheckpointSaver) -> Result<()> {
    let c = root(saver, &thread(), "").await?;
    saver
        .put_writes(&c, vec![w("my_channel", json!({"data": 123}))], "t", "")
        .await?;
    let tuple = saver.get_tuple(&c).await?.expect("stored");
    assert_eq!(
        writes_of(&tuple),
        [("t".into(), "my_channel".into(), json!({"data": 123}))]
    );
    Ok(())
}

/// A task path is accepted.
pub async fn put_writes_task_path(saver: &dyn CheckpointSaver) -> Result<()> {
    let c = root(saver, &thread(), "").await?;
    saver
        .put_writes(&c, vec![w("ch", json!(1))], "t", "a:b:c")
        .await?;
    let tuple = saver.get_tuple(&c).await?.expect("stored");
    assert_eq!(tuple.pending_writes.len(), 1);
    Ok(())
}

/// The same call twice stores one write.
pub async fn put_writes_idempotent(saver: &dyn CheckpointSaver) -> Result<()> {
    let c = root(saver, &thread(), "").await?;
    for _ in 0..2 {
        saver
            .put_writes(&c, vec![w("ch", json!("v"))], "t", "")
            .await?;
    }
    let tuple = saver.get_tuple(&c).await?.expect("stored");
    assert_eq!(writes_of(&tuple), [("t".into(), "ch".into(), json!("v"))]);
    Ok(())
}

/// `__error__` and `__interrupt__` writes are stored with their values.
pub async fn put_writes_special_channels(saver: &dyn CheckpointSaver) -> Result<()> {
    let c = root(saver, &thread(), "").await?;
    saver
        .put_writes(&c, vec![w(channels::ERROR, json!("boom"))], "t1", "")
        .await?;
    saver
        .put_writes(
            &c,
            vec![w(channels::INTERRUPT, json!({"q": "ok?"}))],
            "t2",
            "",
        )
        .await?;
    let tuple = saver.get_tuple(&c).await?.expect("stored");
    assert_eq!(
        writes_of(&tuple),
        [
            ("t1".into(), channels::ERROR.into(), json!("boom")),
            ("t2".into(), channels::INTERRUPT.into(), json!({"q": "ok?"}))
        ]
    );
    Ok(())
}

/// Writes are isolated per namespace.
pub async fn put_writes_across_namespaces(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let r = root(saver, &t, "").await?;
    let child = saver
        .put(
            &cfg(&t, "child:1"),
            Checkpoint {
                id: id_of(&r).to_owned(),
                ..Checkpoint::new(0)
            },
            meta(CheckpointSource::Loop, 0),
            Default::default(),
        )
        .await?;
    saver
        .put_writes(&r, vec![w("ch", json!("root"))], "t", "")
        .await?;
    saver
        .put_writes(&child, vec![w("ch", json!("child"))], "t", "")
        .await?;
    let rt = saver.get_tuple(&r).await?.expect("root");
    let ct = saver.get_tuple(&child).await?.expect("child");
    assert_eq!(writes_of(&rt), [("t".into(), "ch".into(), json!("root"))]);
    assert_eq!(writes_of(&ct), [("t".into(), "ch".into(), json!("child"))]);
    Ok(())
}

/// A child checkpoint starts with no pending writes.
pub async fn put_writes_cleared_on_next_checkpoint(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let c1 = root(saver, &t, "").await?;
    saver
        .put_writes(&c1, vec![w("ch", json!(1))], "t", "")
        .await?;
    let c2 = put_empty(saver, &c1, meta(CheckpointSource::Loop, 1)).await?;
    let tuple = saver.get_tuple(&c2).await?.expect("stored");
    assert!(tuple.pending_writes.is_empty());
    Ok(())
}

/// Writes without a checkpoint id are an `InvalidConfig` error.
pub async fn put_writes_requires_checkpoint_id(saver: &dyn CheckpointSaver) -> Result<()> {
    let err = saver
        .put_writes(&cfg(&thread(), ""), vec![w("ch", json!(1))], "t", "")
        .await;
    assert!(matches!(err, Err(Error::InvalidConfig(_))), "{err:?}");
    Ok(())
}

/// Writes without a thread id are an `InvalidConfig` error.
pub async fn put_writes_requires_thread_id(saver: &dyn CheckpointSaver) -> Result<()> {
    let c = CheckpointConfig::new("").with_id(crate::checkpoint_id(0));
    let err = saver.put_writes(&c, vec![w("ch", json!(1))], "t", "").await;
    assert!(matches!(err, Err(Error::InvalidConfig(_))), "{err:?}");
    Ok(())
}
