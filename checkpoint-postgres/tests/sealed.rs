//! A keyed saver fails closed: a channel value whose ciphertext was nulled, deleted, or
//! swapped for another slot's is an error on read, never an absent channel. An
//! authenticated history also refuses a re-pointed version and a deleted newest checkpoint.
//! Every case tampers with real rows on the test server, then reads through a new saver.

mod common;

use std::collections::BTreeMap;

use futures::TryStreamExt;
use serde_json::json;
use waypoint_checkpoint::serde::CHILD_CHANNEL;
use waypoint_checkpoint::{
    ChannelVersion, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSource, Error, Keyring, ListOptions, Result, Serde,
};
use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver};

fn keyed() -> Result<Serde> {
    Ok(Serde::default().with_keyring(Keyring::new("k1", &[7u8; 32])?))
}

fn authenticated() -> Result<Serde> {
    Ok(keyed()?.authenticate_history(true))
}

/// A saver on `schema` of the test server (set up); `None` without a server.
async fn saver_on(schema: &str, serde: Serde) -> Result<Option<PostgresSaver>> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(None);
    };
    let config = PostgresConfig::new(url)
        .schema(schema)
        .max_connections(2)
        .serde(serde);
    let saver = PostgresSaver::connect(config).await?;
    saver.setup().await?;
    Ok(Some(saver))
}

/// A fresh schema with one checkpoint: `secret` holds a value, `flag` is versioned but
/// empty. `None` without a server.
async fn stored(serde: Serde) -> Result<Option<(String, CheckpointConfig)>> {
    let schema = common::fresh_schema();
    let Some(saver) = saver_on(&schema, serde.clone()).await? else {
        return Ok(None);
    };
    let mut cp = Checkpoint::new(0);
    cp.channel_values
        .insert("secret".into(), serde.dumps(&json!("launch codes"))?);
    let versions: BTreeMap<String, ChannelVersion> = [
        ("secret".to_owned(), ChannelVersion::from(1)),
        ("flag".to_owned(), ChannelVersion::from(1)),
    ]
    .into();
    cp.channel_versions = versions.clone();
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    let config = saver
        .put(&CheckpointConfig::new("t").with_ns(""), cp, meta, versions)
        .await?;
    Ok(Some((schema, config)))
}

/// The channels of the checkpoint read back through a new saver (as another process would),
/// by every read path: `get_tuple` by id and latest, `list` and `list_stream`; they must
/// agree.
async fn read(schema: &str, serde: Serde, config: &CheckpointConfig) -> Result<Vec<String>> {
    let saver = saver_on(schema, serde).await?.expect("a server");
    let keys = |t: waypoint_checkpoint::CheckpointTuple| -> Vec<String> {
        t.checkpoint.channel_values.into_keys().collect()
    };
    let by_id = saver
        .get_tuple(config)
        .await
        .map(|t| keys(t.expect("stored")));
    let latest = saver
        .get_tuple(&CheckpointConfig::new("t").with_ns(""))
        .await
        .map(|t| keys(t.expect("stored")));
    let thread = CheckpointConfig::new("t");
    let listed = saver
        .list(Some(&thread), &ListOptions::default())
        .await
        .map(|mut all| {
            assert_eq!(all.len(), 1, "one checkpoint");
            keys(all.remove(0))
        });
    let streamed = saver
        .list_stream(Some(&thread), &ListOptions::default())
        .try_collect::<Vec<_>>()
        .await
        .map(|mut all| {
            assert_eq!(all.len(), 1, "one checkpoint");
            keys(all.remove(0))
        });
    for (path, other) in [
        ("latest", &latest),
        ("list", &listed),
        ("list_stream", &streamed),
    ] {
        match (&by_id, other) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{path} disagrees with get_tuple"),
            (Err(Error::Decrypt(_)), Err(Error::Decrypt(_))) => {}
            (a, b) => panic!("{path} disagrees with get_tuple: {b:?} vs {a:?}"),
        }
    }
    by_id
}

/// Runs `sql` on `schema` with the saver's own pool; it must change some row.
async fn tamper(schema: &str, sql: &str) {
    let saver = saver_on(schema, Serde::default())
        .await
        .expect("connect")
        .expect("a server");
    let changed = sqlx::query(sql)
        .execute(saver.pool())
        .await
        .expect("tamper")
        .rows_affected();
    assert!(changed > 0, "{sql} changed nothing");
}

fn refused(r: Result<Vec<String>>, what: &str) {
    assert!(matches!(r, Err(Error::Decrypt(_))), "{what}: {r:?}");
}

#[tokio::test]
async fn intact_rows_read_back() -> Result<()> {
    let Some((schema, config)) = stored(keyed()?).await? else {
        return Ok(());
    };
    assert_eq!(read(&schema, keyed()?, &config).await?, ["secret"]);
    Ok(())
}

#[tokio::test]
async fn nulled_ciphertext_is_refused() -> Result<()> {
    let Some((schema, config)) = stored(keyed()?).await? else {
        return Ok(());
    };
    tamper(
        &schema,
        "UPDATE checkpoint_blobs SET blob = NULL WHERE channel = 'secret'",
    )
    .await;
    refused(read(&schema, keyed()?, &config).await, "NULL blob");
    Ok(())
}

#[tokio::test]
async fn value_turned_empty_is_refused() -> Result<()> {
    let Some((schema, config)) = stored(keyed()?).await? else {
        return Ok(());
    };
    tamper(
        &schema,
        "UPDATE checkpoint_blobs SET type = 'empty', blob = NULL WHERE channel = 'secret'",
    )
    .await;
    refused(
        read(&schema, keyed()?, &config).await,
        "value made an unsealed empty",
    );
    Ok(())
}

#[tokio::test]
async fn deleted_row_is_refused() -> Result<()> {
    let Some((schema, config)) = stored(keyed()?).await? else {
        return Ok(());
    };
    tamper(
        &schema,
        "DELETE FROM checkpoint_blobs WHERE channel = 'secret'",
    )
    .await;
    refused(read(&schema, keyed()?, &config).await, "deleted value row");
    let Some((schema, config)) = stored(keyed()?).await? else {
        return Ok(());
    };
    tamper(
        &schema,
        "DELETE FROM checkpoint_blobs WHERE channel = 'flag'",
    )
    .await;
    refused(read(&schema, keyed()?, &config).await, "deleted empty row");
    Ok(())
}

#[tokio::test]
async fn empty_seal_moved_to_another_channel_is_refused() -> Result<()> {
    let Some((schema, config)) = stored(keyed()?).await? else {
        return Ok(());
    };
    tamper(
        &schema,
        "UPDATE checkpoint_blobs SET type = 'empty', blob =
            (SELECT blob FROM checkpoint_blobs WHERE channel = 'flag') WHERE channel = 'secret'",
    )
    .await;
    refused(
        read(&schema, keyed()?, &config).await,
        "another slot's empty seal",
    );
    tamper(
        &schema,
        "UPDATE checkpoint_blobs SET blob = NULL WHERE channel = 'flag'",
    )
    .await;
    refused(read(&schema, keyed()?, &config).await, "nulled empty seal");
    Ok(())
}

/// `copy_thread` reseals every row, empty ones included: a nulled empty seal fails the copy,
/// and nothing of the target is left behind.
#[tokio::test]
async fn copy_of_a_stripped_empty_seal_is_refused() -> Result<()> {
    let Some((schema, _)) = stored(keyed()?).await? else {
        return Ok(());
    };
    let saver = saver_on(&schema, keyed()?).await?.expect("a server");
    saver.copy_thread("t", "intact").await?;
    let copied = saver
        .get_tuple(&CheckpointConfig::new("intact"))
        .await?
        .expect("copied");
    let keys: Vec<&String> = copied.checkpoint.channel_values.keys().collect();
    assert_eq!(keys, ["secret"]);
    tamper(
        &schema,
        "UPDATE checkpoint_blobs SET blob = NULL WHERE thread_id = 't' AND channel = 'flag'",
    )
    .await;
    let r = saver.copy_thread("t", "copy").await;
    assert!(matches!(r, Err(Error::Decrypt(_))), "copy: {r:?}");
    assert!(
        saver
            .get_tuple(&CheckpointConfig::new("copy"))
            .await?
            .is_none()
    );
    Ok(())
}

/// Without a keyring, LangGraph's layout holds: an `empty` row with a NULL blob, or a
/// version without a row, is an absent channel. Legacy plaintext accepted under a keyring
/// reads it the same way.
#[tokio::test]
async fn unkeyed_empty_rows_are_absent_channels() -> Result<()> {
    let Some((schema, config)) = stored(Serde::default()).await? else {
        return Ok(());
    };
    assert_eq!(read(&schema, Serde::default(), &config).await?, ["secret"]);
    tamper(
        &schema,
        "UPDATE checkpoint_blobs SET type = 'empty', blob = NULL WHERE channel = 'secret'",
    )
    .await;
    assert!(read(&schema, Serde::default(), &config).await?.is_empty());
    let legacy = keyed()?.accept_plaintext(true);
    assert!(read(&schema, legacy, &config).await?.is_empty());
    tamper(&schema, "DELETE FROM checkpoint_blobs").await;
    assert!(read(&schema, Serde::default(), &config).await?.is_empty());
    Ok(())
}

/// A fresh schema with two checkpoints of one thread: `secret` is "old" at the first (run
/// `r1`) and "new" at the second (run `r2`).
async fn two_steps(serde: Serde) -> Result<Option<(String, CheckpointConfig, CheckpointConfig)>> {
    let schema = common::fresh_schema();
    let Some(saver) = saver_on(&schema, serde.clone()).await? else {
        return Ok(None);
    };
    let mut parent = CheckpointConfig::new("t").with_ns("");
    let mut stored = Vec::new();
    for (step, value) in ["old", "new"].into_iter().enumerate() {
        let mut cp = Checkpoint::new(step as i64);
        cp.channel_values
            .insert("secret".into(), serde.dumps(&json!(value))?);
        let versions: BTreeMap<String, ChannelVersion> =
            [("secret".to_owned(), ChannelVersion::from(step as u64 + 1))].into();
        cp.channel_versions = versions.clone();
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, step as i64)
            .with_run_id(format!("r{}", step + 1));
        parent = saver.put(&parent, cp, meta, versions).await?;
        stored.push(parent.clone());
    }
    Ok(Some((schema, stored[0].clone(), stored[1].clone())))
}

/// The latest checkpoint's `secret`, read through a new saver.
async fn latest_secret(schema: &str, serde: Serde) -> Result<serde_json::Value> {
    let saver = saver_on(schema, serde.clone()).await?.expect("a server");
    let tuple = saver
        .get_tuple(&CheckpointConfig::new("t"))
        .await?
        .expect("stored");
    serde.loads(&tuple.checkpoint.channel_values["secret"])
}

fn id(c: &CheckpointConfig) -> &str {
    c.checkpoint_id
        .as_deref()
        .expect("stored configs carry an id")
}

/// A checkpoint re-pointed at an older sealed version: sealing alone reads the old value
/// back without complaint; an authenticated history refuses it.
#[tokio::test]
async fn re_pointed_version_is_refused_by_an_authenticated_history() -> Result<()> {
    let re_point = |first: &CheckpointConfig, second: &CheckpointConfig| {
        format!(
            "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{{channel_versions,secret}}',
                (SELECT checkpoint -> 'channel_versions' -> 'secret' FROM checkpoints
                 WHERE checkpoint_id = '{}')) WHERE checkpoint_id = '{}'",
            id(first),
            id(second)
        )
    };
    let Some((schema, first, second)) = two_steps(keyed()?).await? else {
        return Ok(());
    };
    assert_eq!(latest_secret(&schema, keyed()?).await?, json!("new"));
    tamper(&schema, &re_point(&first, &second)).await;
    assert_eq!(latest_secret(&schema, keyed()?).await?, json!("old"));

    let Some((schema, first, second)) = two_steps(authenticated()?).await? else {
        return Ok(());
    };
    assert_eq!(
        latest_secret(&schema, authenticated()?).await?,
        json!("new")
    );
    tamper(&schema, &re_point(&first, &second)).await;
    let r = latest_secret(&schema, authenticated()?).await;
    assert!(matches!(r, Err(Error::Decrypt(_))), "re-pointed: {r:?}");
    // By id and in a list too.
    let saver = saver_on(&schema, authenticated()?)
        .await?
        .expect("a server");
    let r = saver.get_tuple(&second).await;
    assert!(matches!(r, Err(Error::Decrypt(_))), "by id: {r:?}");
    let r = saver
        .list(Some(&CheckpointConfig::new("t")), &ListOptions::default())
        .await;
    assert!(matches!(r, Err(Error::Decrypt(_))), "list: {r:?}");
    Ok(())
}

/// The newest checkpoint deleted: the thread silently rolls back under sealing alone; an
/// authenticated history finds the sealed child record its parent keeps, and refuses.
#[tokio::test]
async fn deleted_newest_checkpoint_is_refused_by_an_authenticated_history() -> Result<()> {
    let delete = |second: &CheckpointConfig| {
        format!(
            "DELETE FROM checkpoints WHERE checkpoint_id = '{}'",
            id(second)
        )
    };
    let Some((schema, _, second)) = two_steps(keyed()?).await? else {
        return Ok(());
    };
    tamper(&schema, &delete(&second)).await;
    assert_eq!(latest_secret(&schema, keyed()?).await?, json!("old"));

    let Some((schema, _, second)) = two_steps(authenticated()?).await? else {
        return Ok(());
    };
    tamper(&schema, &delete(&second)).await;
    let r = latest_secret(&schema, authenticated()?).await;
    let Err(Error::Decrypt(message)) = r else {
        panic!("deleted newest: {r:?}");
    };
    assert!(message.contains(id(&second)), "{message}");
    // A record seal stripped from the metadata is refused too.
    let Some((schema, ..)) = two_steps(authenticated()?).await? else {
        return Ok(());
    };
    tamper(
        &schema,
        "UPDATE checkpoints SET metadata = metadata - 'waypoint_record_seal'",
    )
    .await;
    let r = latest_secret(&schema, authenticated()?).await;
    assert!(matches!(r, Err(Error::Decrypt(_))), "no seal: {r:?}");
    Ok(())
}

/// An intact authenticated history reads back like any other, bookkeeping hidden: no
/// record seal in the metadata, no child record among the pending writes, though the child
/// record is stored.
#[tokio::test]
async fn authenticated_history_hides_its_bookkeeping() -> Result<()> {
    let Some((schema, first, _)) = two_steps(authenticated()?).await? else {
        return Ok(());
    };
    assert_eq!(
        latest_secret(&schema, authenticated()?).await?,
        json!("new")
    );
    let saver = saver_on(&schema, authenticated()?)
        .await?
        .expect("a server");
    let children: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM checkpoint_writes WHERE checkpoint_id = $1 AND channel = $2",
    )
    .bind(id(&first))
    .bind(CHILD_CHANNEL)
    .fetch_one(saver.pool())
    .await
    .expect("count");
    assert_eq!(children, 1, "the child record is stored on the parent");
    let parent = saver.get_tuple(&first).await?.expect("stored");
    assert!(
        parent.pending_writes.is_empty(),
        "{:?}",
        parent.pending_writes
    );
    assert!(!parent.metadata.extra.contains_key("waypoint_record_seal"));
    let all = saver
        .list(Some(&CheckpointConfig::new("t")), &ListOptions::default())
        .await?;
    assert_eq!(all.len(), 2);
    for tuple in all {
        assert!(
            tuple.pending_writes.is_empty(),
            "{:?}",
            tuple.pending_writes
        );
        assert!(!tuple.metadata.extra.contains_key("waypoint_record_seal"));
    }
    Ok(())
}

/// `delete_for_runs` takes the child records of the checkpoints it deletes with them: the
/// surviving parent reads as the latest without complaint.
#[tokio::test]
async fn delete_for_runs_takes_child_records_along() -> Result<()> {
    let Some((schema, first, _)) = two_steps(authenticated()?).await? else {
        return Ok(());
    };
    let saver = saver_on(&schema, authenticated()?)
        .await?
        .expect("a server");
    saver.delete_for_runs(&["r2".to_owned()]).await?;
    assert_eq!(
        latest_secret(&schema, authenticated()?).await?,
        json!("old")
    );
    let latest = saver
        .get_tuple(&CheckpointConfig::new("t"))
        .await?
        .expect("stored");
    assert_eq!(latest.config, first);
    let children: i64 =
        sqlx::query_scalar("SELECT count(*) FROM checkpoint_writes WHERE channel = $1")
            .bind(CHILD_CHANNEL)
            .fetch_one(saver.pool())
            .await
            .expect("count");
    assert_eq!(children, 0);
    Ok(())
}
