//! `put`: storing checkpoints, values by version, namespaces, parents.

use serde_json::json;

use super::*;
use crate::{ChannelVersions, Error};

/// The returned config is exactly thread, namespace and the new checkpoint's id.
pub async fn put_returns_config(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let cp = Checkpoint::new(-1);
    let id = cp.id.clone();
    let got = saver
        .put(
            &cfg(&t, ""),
            cp,
            meta(CheckpointSource::Input, -1),
            ChannelVersions::new(),
        )
        .await?;
    assert_eq!(got, CheckpointConfig::of(&t, "", &id));
    Ok(())
}

/// A put checkpoint reads back with its id and value.
pub async fn put_roundtrip(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let cp = checkpoint(0, &[("msg", json!("hello"))], &[("msg", 1)]);
    let id = cp.id.clone();
    let stored = saver
        .put(
            &cfg(&t, ""),
            cp,
            meta(CheckpointSource::Loop, 0),
            versions(&[("msg", 1)]),
        )
        .await?;
    let tuple = saver.get_tuple(&stored).await?.expect("stored checkpoint");
    assert_eq!(tuple.checkpoint.id, id);
    assert_eq!(
        values_of(&tuple),
        [("msg".to_owned(), json!("hello"))].into()
    );
    Ok(())
}

/// Strings, numbers, lists and maps round-trip.
pub async fn put_preserves_channel_values(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let vals = [
        ("s", json!("text")),
        ("i", json!(42)),
        ("l", json!([1, "two", 3.5])),
        ("d", json!({"nested": {"k": [true, null]}})),
    ];
    let vers = [("s", 1), ("i", 1), ("l", 1), ("d", 1)];
    let cp = checkpoint(0, &vals, &vers);
    let stored = saver
        .put(
            &cfg(&t, ""),
            cp,
            meta(CheckpointSource::Loop, 0),
            versions(&vers),
        )
        .await?;
    let tuple = saver.get_tuple(&stored).await?.expect("stored");
    let expected = vals
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    assert_eq!(values_of(&tuple), expected);
    Ok(())
}

/// Channel versions round-trip.
pub async fn put_preserves_channel_versions(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let cp = checkpoint(0, &[], &[("a", 1), ("b", 2)]);
    let stored = saver
        .put(
            &cfg(&t, ""),
            cp,
            meta(CheckpointSource::Loop, 0),
            versions(&[("a", 1), ("b", 2)]),
        )
        .await?;
    let tuple = saver.get_tuple(&stored).await?.expect("stored");
    let counters: Vec<(String, Option<u64>)> = tuple
        .checkpoint
        .channel_versions
        .iter()
        .map(|(k, v)| (k.clone(), v.counter()))
        .collect();
    assert_eq!(counters, [("a".into(), Some(1)), ("b".into(), Some(2))]);
    Ok(())
}

/// The nodes of `versions_seen` survive.
pub async fn put_preserves_versions_seen(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let mut cp = Checkpoint::new(0);
    cp.versions_seen
        .insert("node1".into(), versions(&[("a", 1)]));
    cp.versions_seen
        .insert("node2".into(), versions(&[("b", 2)]));
    let stored = saver
        .put(
            &cfg(&t, ""),
            cp,
            meta(CheckpointSource::Loop, 0),
            ChannelVersions::new(),
        )
        .await?;
    let tuple = saver.get_tuple(&stored).await?.expect("stored");
    let nodes: Vec<&String> = tuple.checkpoint.versions_seen.keys().collect();
    assert_eq!(nodes, ["node1", "node2"]);
    Ok(())
}

/// Source, step and custom keys round-trip.
pub async fn put_preserves_metadata(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let m = meta(CheckpointSource::Loop, 3).with("custom_key", "custom_value");
    let stored = put_empty(saver, &cfg(&t, ""), m).await?;
    let tuple = saver.get_tuple(&stored).await?.expect("stored");
    assert_eq!(tuple.metadata.source, Some(CheckpointSource::Loop));
    assert_eq!(tuple.metadata.step, Some(3));
    assert_eq!(tuple.metadata.extra["custom_key"], json!("custom_value"));
    Ok(())
}

/// The root namespace is `""`.
pub async fn put_root_namespace(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let stored = put_empty(saver, &cfg(&t, ""), meta(CheckpointSource::Loop, 0)).await?;
    let tuple = saver.get_tuple(&stored).await?.expect("stored");
    assert_eq!(tuple.config.checkpoint_ns.as_deref(), Some(""));
    Ok(())
}

/// A child namespace is stored and echoed.
pub async fn put_child_namespace(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let stored = put_empty(
        saver,
        &cfg(&t, "child:abc"),
        meta(CheckpointSource::Loop, 0),
    )
    .await?;
    assert_eq!(stored.checkpoint_ns.as_deref(), Some("child:abc"));
    let tuple = saver.get_tuple(&stored).await?.expect("stored");
    assert_eq!(tuple.config.checkpoint_ns.as_deref(), Some("child:abc"));
    Ok(())
}

/// A config without a namespace puts into the root.
pub async fn put_default_namespace(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let stored = put_empty(
        saver,
        &CheckpointConfig::new(&t),
        meta(CheckpointSource::Loop, 0),
    )
    .await?;
    assert_eq!(stored.checkpoint_ns.as_deref(), Some(""));
    let latest = saver
        .get_tuple(&cfg(&t, ""))
        .await?
        .expect("stored in root");
    assert_eq!(latest.config, stored);
    Ok(())
}

/// Three chained puts are each retrievable by id.
pub async fn put_multiple_checkpoints_same_thread(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let configs = chain(saver, &t, "", 3).await?;
    for c in &configs {
        let tuple = saver.get_tuple(c).await?.expect("each checkpoint stored");
        assert_eq!(&tuple.config, c);
    }
    Ok(())
}

/// The same channel on two threads keeps separate values.
pub async fn put_multiple_threads_isolated(saver: &dyn CheckpointSaver) -> Result<()> {
    let (t1, t2) = (thread(), thread());
    for (t, v) in [(&t1, "one"), (&t2, "two")] {
        let cp = checkpoint(0, &[("ch", json!(v))], &[("ch", 1)]);
        saver
            .put(
                &cfg(t, ""),
                cp,
                meta(CheckpointSource::Loop, 0),
                versions(&[("ch", 1)]),
            )
            .await?;
    }
    let a = saver.get_tuple(&cfg(&t1, "")).await?.expect("t1");
    let b = saver.get_tuple(&cfg(&t2, "")).await?.expect("t2");
    assert_eq!(values_of(&a)["ch"], json!("one"));
    assert_eq!(values_of(&b)["ch"], json!("two"));
    Ok(())
}

/// The second checkpoint's parent is the first.
pub async fn put_parent_config(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let configs = chain(saver, &t, "", 2).await?;
    let second = saver.get_tuple(&configs[1]).await?.expect("stored");
    assert_eq!(second.parent_config.as_ref(), Some(&configs[0]));
    Ok(())
}

/// Unchanged channels are joined from older versions; older checkpoints keep their values.
pub async fn put_incremental_channel_update(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let cp1 = checkpoint(
        0,
        &[("a", json!("v1")), ("b", json!("v2"))],
        &[("a", 1), ("b", 1)],
    );
    let c1 = saver
        .put(
            &cfg(&t, ""),
            cp1,
            meta(CheckpointSource::Loop, 0),
            versions(&[("a", 1), ("b", 1)]),
        )
        .await?;
    let cp2 = checkpoint(
        1,
        &[("a", json!("v1_updated")), ("b", json!("v2"))],
        &[("a", 2), ("b", 1)],
    );
    let c2 = saver
        .put(
            &c1,
            cp2,
            meta(CheckpointSource::Loop, 1),
            versions(&[("a", 2)]),
        )
        .await?;
    let t2 = saver.get_tuple(&c2).await?.expect("cp2");
    assert_eq!(values_of(&t2)["a"], json!("v1_updated"));
    assert_eq!(values_of(&t2)["b"], json!("v2"));
    let t1 = saver.get_tuple(&c1).await?.expect("cp1");
    assert_eq!(values_of(&t1)["a"], json!("v1"));
    Ok(())
}

/// A channel first written in a later checkpoint appears there only.
pub async fn put_new_channel_added(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let cp1 = checkpoint(0, &[("a", json!("a1"))], &[("a", 1)]);
    let c1 = saver
        .put(
            &cfg(&t, ""),
            cp1,
            meta(CheckpointSource::Loop, 0),
            versions(&[("a", 1)]),
        )
        .await?;
    let cp2 = checkpoint(
        1,
        &[("a", json!("a1")), ("b", json!("b1"))],
        &[("a", 1), ("b", 1)],
    );
    let c2 = saver
        .put(
            &c1,
            cp2,
            meta(CheckpointSource::Loop, 1),
            versions(&[("b", 1)]),
        )
        .await?;
    let t2 = saver.get_tuple(&c2).await?.expect("cp2");
    assert_eq!(
        values_of(&t2),
        [("a".into(), json!("a1")), ("b".into(), json!("b1"))].into()
    );
    let t1 = saver.get_tuple(&c1).await?.expect("cp1");
    assert_eq!(values_of(&t1), [("a".into(), json!("a1"))].into());
    Ok(())
}

/// A channel dropped from `channel_versions` is absent, though its old value exists.
pub async fn put_channel_removed(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let cp1 = checkpoint(
        0,
        &[("a", json!(1)), ("b", json!(2))],
        &[("a", 1), ("b", 1)],
    );
    let c1 = saver
        .put(
            &cfg(&t, ""),
            cp1,
            meta(CheckpointSource::Loop, 0),
            versions(&[("a", 1), ("b", 1)]),
        )
        .await?;
    let cp2 = checkpoint(1, &[("a", json!(1))], &[("a", 1)]);
    let c2 = saver
        .put(
            &c1,
            cp2,
            meta(CheckpointSource::Loop, 1),
            ChannelVersions::new(),
        )
        .await?;
    let t2 = saver.get_tuple(&c2).await?.expect("cp2");
    assert_eq!(values_of(&t2), [("a".into(), json!(1))].into());
    assert!(!t2.checkpoint.channel_versions.contains_key("b"));
    Ok(())
}

/// `run_id` round-trips.
pub async fn put_preserves_run_id(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let stored = put_empty(saver, &cfg(&t, ""), run_meta(0, "run-123")).await?;
    let tuple = saver.get_tuple(&stored).await?.expect("stored");
    assert_eq!(tuple.metadata.run_id.as_deref(), Some("run-123"));
    Ok(())
}

/// Nested `versions_seen` values round-trip.
pub async fn put_preserves_versions_seen_values(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let mut cp = Checkpoint::new(0);
    cp.versions_seen
        .insert("agent".into(), versions(&[("messages", 3), ("tools", 7)]));
    cp.versions_seen
        .insert("__input__".into(), versions(&[("__start__", 1)]));
    let expected = cp.versions_seen.clone();
    let stored = saver
        .put(
            &cfg(&t, ""),
            cp,
            meta(CheckpointSource::Loop, 0),
            ChannelVersions::new(),
        )
        .await?;
    let tuple = saver.get_tuple(&stored).await?.expect("stored");
    assert_eq!(tuple.checkpoint.versions_seen, expected);
    Ok(())
}

/// Checkpoint (id, ts, v, values, versions, seen, updated channels) and metadata come back
/// exactly as given.
pub async fn put_stores_checkpoint_and_metadata_unaltered(
    saver: &dyn CheckpointSaver,
) -> Result<()> {
    let t = thread();
    let mut cp = checkpoint(
        2,
        &[("messages", json!(["hi", "there"])), ("count", json!(2))],
        &[("messages", 2), ("count", 2)],
    );
    cp.channel_versions
        .insert("count".into(), saver.next_version(None)?);
    cp.versions_seen
        .insert("node".into(), versions(&[("messages", 1)]));
    cp.updated_channels = Some(vec!["count".into(), "messages".into()]);
    let new_versions = cp.channel_versions.clone();
    let m = meta(CheckpointSource::Loop, 2)
        .with_run_id("run")
        .with("score", 0.5)
        .with("tags", json!(["a", {"b": null}]));
    let stored = saver
        .put(&cfg(&t, "ns"), cp.clone(), m.clone(), new_versions)
        .await?;
    let tuple = saver.get_tuple(&stored).await?.expect("stored");
    assert_eq!(tuple.checkpoint, cp);
    assert_eq!(tuple.metadata, m);
    Ok(())
}

/// A value handed to `put` is never dropped: one of a channel outside `new_versions` (as
/// LangGraph's PostgreSQL saver keeps strings and numbers inline in every checkpoint) is kept
/// at its current version, a checkpoint continuing it with a put naming only some channels
/// reads back whole, and a version that already has a stored value keeps it.
///
/// LangGraph's JS suite instead expects such values to be dropped; that is the silent loss
/// issue 18 removes.
pub async fn put_never_drops_a_given_value(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let vals = [("foo", json!("bar")), ("baz", json!("qux"))];
    let vers = [("foo", 1), ("baz", 1)];
    let whole = json!({"foo": "bar", "baz": "qux"});
    let cases: [&[(&str, u64)]; 3] = [&[], &[("foo", 1)], &[("foo", 1), ("baz", 1)]];
    for new_versions in cases {
        let t = format!("{t}-{}", new_versions.len());
        let first = saver
            .put(
                &cfg(&t, ""),
                checkpoint(0, &vals, &vers),
                meta(CheckpointSource::Loop, 0),
                versions(new_versions),
            )
            .await?;
        let read = saver.get_tuple(&first).await?.expect("stored");
        assert_eq!(serde_json::to_value(values_of(&read)).expect("json"), whole);

        // Continued by a put that changes `foo` only and hands over only its value.
        let second = saver
            .put(
                &first,
                checkpoint(1, &[("foo", json!("bar2"))], &[("foo", 2), ("baz", 1)]),
                meta(CheckpointSource::Loop, 1),
                versions(&[("foo", 2)]),
            )
            .await?;
        let read = saver.get_tuple(&second).await?.expect("stored");
        assert_eq!(
            serde_json::to_value(values_of(&read)).expect("json"),
            json!({"foo": "bar2", "baz": "qux"})
        );

        // A different value at a version that has one already does not rewrite history.
        let third = saver
            .put(
                &second,
                checkpoint(2, &[("baz", json!("other"))], &[("foo", 2), ("baz", 1)]),
                meta(CheckpointSource::Loop, 2),
                versions(&[]),
            )
            .await?;
        let read = saver.get_tuple(&third).await?.expect("stored");
        assert_eq!(
            serde_json::to_value(values_of(&read)).expect("json"),
            json!({"foo": "bar2", "baz": "qux"})
        );
        let read = saver.get_tuple(&first).await?.expect("stored");
        assert_eq!(serde_json::to_value(values_of(&read)).expect("json"), whole);
    }
    Ok(())
}

/// A value for a channel without a version is refused, not dropped.
pub async fn put_refuses_a_value_without_version(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let err = saver
        .put(
            &cfg(&t, ""),
            checkpoint(0, &[("foo", json!("bar"))], &[]),
            meta(CheckpointSource::Loop, 0),
            versions(&[]),
        )
        .await;
    assert!(
        matches!(err, Err(crate::Error::InvalidConfig(_))),
        "{err:?}"
    );
    Ok(())
}

/// An empty thread id is an `InvalidConfig` error.
pub async fn put_rejects_empty_thread_id(saver: &dyn CheckpointSaver) -> Result<()> {
    let err = put_empty(
        saver,
        &CheckpointConfig::new(""),
        meta(CheckpointSource::Loop, 0),
    )
    .await;
    assert!(matches!(err, Err(Error::InvalidConfig(_))), "{err:?}");
    Ok(())
}

/// A checkpoint without an id is an `InvalidConfig` error.
pub async fn put_rejects_empty_checkpoint_id(saver: &dyn CheckpointSaver) -> Result<()> {
    let mut cp = Checkpoint::new(0);
    cp.id.clear();
    let err = saver
        .put(
            &cfg(&thread(), ""),
            cp,
            meta(CheckpointSource::Loop, 0),
            ChannelVersions::new(),
        )
        .await;
    assert!(matches!(err, Err(Error::InvalidConfig(_))), "{err:?}");
    Ok(())
}
