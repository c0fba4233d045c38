//! `get_tuple`: latest and by id, config shape, parents, writes, namespaces.

use serde_json::json;

use super::*;

/// An unknown thread gives `None`.
pub async fn get_tuple_nonexistent_returns_none(saver: &dyn CheckpointSaver) -> Result<()> {
    assert!(saver.get_tuple(&cfg(&thread(), "")).await?.is_none());
    Ok(())
}

/// Without an id, the latest checkpoint comes back.
pub async fn get_tuple_latest_when_no_checkpoint_id(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let configs = chain(saver, &t, "", 3).await?;
    let latest = saver.get_tuple(&cfg(&t, "")).await?.expect("stored");
    assert_eq!(latest.config, configs[2]);
    assert_eq!(latest.metadata.step, Some(2));
    Ok(())
}

/// An older checkpoint is fetched by id.
pub async fn get_tuple_specific_checkpoint_id(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let configs = chain(saver, &t, "", 3).await?;
    let first = saver.get_tuple(&configs[0]).await?.expect("stored");
    assert_eq!(first.config, configs[0]);
    assert_eq!(first.metadata.step, Some(0));
    Ok(())
}

/// The tuple's config is exactly thread, namespace and id.
pub async fn get_tuple_config_structure(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let c = put_empty(saver, &cfg(&t, ""), meta(CheckpointSource::Loop, 0)).await?;
    let by_latest = saver
        .get_tuple(&CheckpointConfig::new(&t))
        .await?
        .expect("stored");
    assert_eq!(by_latest.config, CheckpointConfig::of(&t, "", id_of(&c)));
    let by_id = saver
        .get_tuple(&CheckpointConfig::new(&t).with_id(id_of(&c)))
        .await?
        .expect("stored");
    assert_eq!(by_id.config, by_latest.config);
    Ok(())
}

/// Id, version, timestamp, values, versions and seen versions are all there.
pub async fn get_tuple_checkpoint_fields(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let mut cp = checkpoint(0, &[("k", json!("v"))], &[("k", 1)]);
    cp.v = 1;
    cp.versions_seen.insert("n".into(), versions(&[("k", 1)]));
    let id = cp.id.clone();
    let c = saver
        .put(
            &cfg(&t, ""),
            cp,
            meta(CheckpointSource::Loop, 0),
            versions(&[("k", 1)]),
        )
        .await?;
    let tuple = saver.get_tuple(&c).await?.expect("stored");
    assert_eq!(tuple.checkpoint.id, id);
    assert_eq!(tuple.checkpoint.v, 1);
    assert!(!tuple.checkpoint.ts.is_empty());
    assert_eq!(values_of(&tuple), [("k".into(), json!("v"))].into());
    assert_eq!(tuple.checkpoint.channel_versions["k"].counter(), Some(1));
    assert!(tuple.checkpoint.versions_seen.contains_key("n"));
    Ok(())
}

/// Input metadata (`source` input, `step` -1) round-trips.
pub async fn get_tuple_metadata(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let c = put_empty(saver, &cfg(&t, ""), meta(CheckpointSource::Input, -1)).await?;
    let tuple = saver.get_tuple(&c).await?.expect("stored");
    assert_eq!(tuple.metadata.source, Some(CheckpointSource::Input));
    assert_eq!(tuple.metadata.step, Some(-1));
    Ok(())
}

/// The first checkpoint has no parent; the second's parent is the first.
pub async fn get_tuple_parent_config(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let configs = chain(saver, &t, "", 2).await?;
    assert!(
        saver
            .get_tuple(&configs[0])
            .await?
            .expect("first")
            .parent_config
            .is_none()
    );
    let second = saver.get_tuple(&configs[1]).await?.expect("second");
    assert_eq!(second.parent_config, Some(configs[0].clone()));
    Ok(())
}

/// Pending writes come with the tuple.
pub async fn get_tuple_pending_writes(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let c = put_empty(saver, &cfg(&t, ""), meta(CheckpointSource::Loop, 0)).await?;
    saver
        .put_writes(
            &c,
            vec![("animals".into(), val(json!("dog")))],
            "pet_task",
            "",
        )
        .await?;
    let tuple = saver.get_tuple(&c).await?.expect("stored");
    assert_eq!(
        writes_of(&tuple),
        [("pet_task".into(), "animals".into(), json!("dog"))]
    );
    Ok(())
}

/// Root and child namespaces are fetched independently.
pub async fn get_tuple_respects_namespace(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let r = put_empty(saver, &cfg(&t, ""), meta(CheckpointSource::Loop, 0)).await?;
    let c = put_empty(saver, &cfg(&t, "child:1"), meta(CheckpointSource::Loop, 0)).await?;
    assert_eq!(
        saver.get_tuple(&cfg(&t, "")).await?.expect("root").config,
        r
    );
    assert_eq!(
        saver
            .get_tuple(&cfg(&t, "child:1"))
            .await?
            .expect("child")
            .config,
        c
    );
    Ok(())
}

/// An unknown id on an existing thread gives `None`.
pub async fn get_tuple_nonexistent_checkpoint_id(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    chain(saver, &t, "", 1).await?;
    let missing = cfg(&t, "").with_id(crate::checkpoint_id(0));
    assert!(saver.get_tuple(&missing).await?.is_none());
    Ok(())
}

/// Channels last written by ancestors are rebuilt, by id and as latest (LangGraph JS suite).
pub async fn get_tuple_channels_from_ancestors(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let cp1 = checkpoint(
        1,
        &[("messages", json!(["hi"])), ("stepCount", json!(1))],
        &[("messages", 1), ("stepCount", 1)],
    );
    let c1 = saver
        .put(
            &cfg(&t, ""),
            cp1,
            meta(CheckpointSource::Loop, 1),
            versions(&[("messages", 1), ("stepCount", 1)]),
        )
        .await?;
    let cp2 = checkpoint(
        2,
        &[("messages", json!(["hi"])), ("stepCount", json!(2))],
        &[("messages", 1), ("stepCount", 2)],
    );
    let c2 = saver
        .put(
            &c1,
            cp2,
            meta(CheckpointSource::Loop, 2),
            versions(&[("stepCount", 2)]),
        )
        .await?;
    let cp3 = checkpoint(
        3,
        &[("messages", json!(["hi"])), ("stepCount", json!(3))],
        &[("messages", 1), ("stepCount", 3)],
    );
    let c3 = saver
        .put(
            &c2,
            cp3,
            meta(CheckpointSource::Loop, 3),
            versions(&[("stepCount", 3)]),
        )
        .await?;
    let expected = [
        ("messages".into(), json!(["hi"])),
        ("stepCount".into(), json!(3)),
    ]
    .into();
    assert_eq!(
        values_of(&saver.get_tuple(&c3).await?.expect("by id")),
        expected
    );
    assert_eq!(
        values_of(&saver.get_tuple(&cfg(&t, "")).await?.expect("latest")),
        expected
    );
    Ok(())
}

/// An empty thread id finds nothing (and is not an error).
pub async fn get_tuple_empty_thread_id_returns_none(saver: &dyn CheckpointSaver) -> Result<()> {
    assert!(saver.get_tuple(&CheckpointConfig::new("")).await?.is_none());
    Ok(())
}
