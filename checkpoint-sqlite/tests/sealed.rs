//! A keyed saver fails closed: a channel value whose ciphertext was nulled, deleted, or
//! swapped for another slot's is an error on read, never an absent channel.

use std::path::PathBuf;

use serde_json::json;
use waypoint_checkpoint::serde::{RECORD_KEY, record};
use waypoint_checkpoint::{
    ChannelVersion, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSource, Error, Keyring, Result, Serde,
};
use waypoint_checkpoint_sqlite::{SqliteConfig, SqliteSaver};

fn keyed() -> Result<Serde> {
    Ok(Serde::default().with_keyring(Keyring::new("k1", &[7u8; 32])?))
}

/// A file with one checkpoint: `secret` holds a value, `flag` is versioned but empty.
async fn stored(serde: Serde) -> Result<(PathBuf, CheckpointConfig)> {
    let path = tempfile::tempdir()
        .expect("temp dir")
        .keep()
        .join("sealed.db");
    let saver = SqliteSaver::open(SqliteConfig::file(&path).serde(serde.clone())).await?;
    let mut cp = Checkpoint::new(0);
    cp.channel_values
        .insert("secret".into(), serde.dumps(&json!("launch codes"))?);
    let versions: std::collections::BTreeMap<String, ChannelVersion> = [
        ("secret".to_owned(), ChannelVersion::from(1)),
        ("flag".to_owned(), ChannelVersion::from(1)),
    ]
    .into();
    cp.channel_versions = versions.clone();
    let meta = CheckpointMetadata::new(CheckpointSource::Loop, 0);
    let config = saver
        .put(&CheckpointConfig::new("t").with_ns(""), cp, meta, versions)
        .await?;
    Ok((path, config))
}

/// Reads the checkpoint back through a new saver (as another process would).
async fn read(path: &PathBuf, serde: Serde, config: &CheckpointConfig) -> Result<Vec<String>> {
    let saver = SqliteSaver::open(SqliteConfig::file(path).serde(serde)).await?;
    let tuple = saver.get_tuple(config).await?.expect("stored");
    Ok(tuple.checkpoint.channel_values.into_keys().collect())
}

fn tamper(path: &PathBuf, sql: &str) {
    let conn = rusqlite::Connection::open(path).expect("open the file");
    let changed = conn.execute(sql, []).expect("tamper");
    assert!(changed > 0, "{sql} changed nothing");
}

/// Rewrites the stored records of checkpoint `id` with `edit`, as an attacker with write
/// access to the file would.
fn edit_record(
    path: &PathBuf,
    id: &str,
    edit: impl FnOnce(&mut Checkpoint, &mut CheckpointMetadata),
) {
    let conn = rusqlite::Connection::open(path).expect("open the file");
    let (checkpoint, metadata): (Vec<u8>, Vec<u8>) = conn
        .query_row(
            "SELECT checkpoint, metadata FROM checkpoints WHERE checkpoint_id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("the checkpoint's row");
    let mut checkpoint = record::decode_checkpoint(&checkpoint).expect("checkpoint record");
    let mut metadata = record::decode_metadata(&metadata).expect("metadata record");
    edit(&mut checkpoint, &mut metadata);
    conn.execute(
        "UPDATE checkpoints SET checkpoint = ?1, metadata = ?2 WHERE checkpoint_id = ?3",
        rusqlite::params![
            record::encode_checkpoint(&checkpoint),
            record::encode_metadata(&metadata),
            id
        ],
    )
    .expect("tamper");
}

/// The stored record of checkpoint `id`.
fn stored_record(path: &PathBuf, id: &str) -> Checkpoint {
    let conn = rusqlite::Connection::open(path).expect("open the file");
    let stored: Vec<u8> = conn
        .query_row(
            "SELECT checkpoint FROM checkpoints WHERE checkpoint_id = ?1",
            [id],
            |r| r.get(0),
        )
        .expect("the checkpoint's row");
    record::decode_checkpoint(&stored).expect("checkpoint record")
}

fn refused(r: Result<Vec<String>>, what: &str) {
    assert!(matches!(r, Err(Error::Decrypt(_))), "{what}: {r:?}");
}

#[tokio::test]
async fn intact_rows_read_back() -> Result<()> {
    let (path, config) = stored(keyed()?).await?;
    assert_eq!(read(&path, keyed()?, &config).await?, ["secret"]);
    Ok(())
}

#[tokio::test]
async fn nulled_ciphertext_is_refused() -> Result<()> {
    let (path, config) = stored(keyed()?).await?;
    tamper(
        &path,
        "UPDATE checkpoint_blobs SET blob = NULL WHERE channel = 'secret'",
    );
    refused(read(&path, keyed()?, &config).await, "NULL blob");
    Ok(())
}

#[tokio::test]
async fn value_turned_empty_is_refused() -> Result<()> {
    let (path, config) = stored(keyed()?).await?;
    tamper(
        &path,
        "UPDATE checkpoint_blobs SET type = 'empty', blob = NULL WHERE channel = 'secret'",
    );
    refused(
        read(&path, keyed()?, &config).await,
        "value made an unsealed empty",
    );
    Ok(())
}

#[tokio::test]
async fn deleted_row_is_refused() -> Result<()> {
    let (path, config) = stored(keyed()?).await?;
    tamper(
        &path,
        "DELETE FROM checkpoint_blobs WHERE channel = 'secret'",
    );
    refused(read(&path, keyed()?, &config).await, "deleted value row");
    let (path, config) = stored(keyed()?).await?;
    tamper(&path, "DELETE FROM checkpoint_blobs WHERE channel = 'flag'");
    refused(read(&path, keyed()?, &config).await, "deleted empty row");
    Ok(())
}

#[tokio::test]
async fn empty_seal_moved_to_another_channel_is_refused() -> Result<()> {
    let (path, config) = stored(keyed()?).await?;
    tamper(
        &path,
        "UPDATE checkpoint_blobs SET type = 'empty', blob =
            (SELECT blob FROM checkpoint_blobs WHERE channel = 'flag') WHERE channel = 'secret'",
    );
    refused(
        read(&path, keyed()?, &config).await,
        "another slot's empty seal",
    );
    tamper(
        &path,
        "UPDATE checkpoint_blobs SET blob = NULL WHERE channel = 'flag'",
    );
    refused(read(&path, keyed()?, &config).await, "nulled empty seal");
    Ok(())
}

/// Without a keyring, LangGraph's layout holds: an `empty` row with a NULL blob is an
/// absent channel. Legacy plaintext accepted under a keyring reads it the same way.
#[tokio::test]
async fn unkeyed_empty_rows_are_absent_channels() -> Result<()> {
    let (path, config) = stored(Serde::default()).await?;
    tamper(
        &path,
        "UPDATE checkpoint_blobs SET type = 'empty', blob = NULL WHERE channel = 'secret'",
    );
    assert!(read(&path, Serde::default(), &config).await?.is_empty());
    let legacy = keyed()?.accept_plaintext(true);
    assert!(read(&path, legacy, &config).await?.is_empty());
    Ok(())
}

/// Two checkpoints of one thread: `secret` is "old" at the first and "new" at the second.
async fn two_steps(serde: Serde) -> Result<(PathBuf, CheckpointConfig, CheckpointConfig)> {
    let path = tempfile::tempdir()
        .expect("temp dir")
        .keep()
        .join("history.db");
    let saver = SqliteSaver::open(SqliteConfig::file(&path).serde(serde.clone())).await?;
    let mut parent = CheckpointConfig::new("t").with_ns("");
    let mut stored = Vec::new();
    for (step, value) in ["old", "new"].into_iter().enumerate() {
        let mut cp = Checkpoint::new(step as i64);
        cp.channel_values
            .insert("secret".into(), serde.dumps(&json!(value))?);
        let versions: std::collections::BTreeMap<String, ChannelVersion> =
            [("secret".to_owned(), ChannelVersion::from(step as u64 + 1))].into();
        cp.channel_versions = versions.clone();
        let meta = CheckpointMetadata::new(CheckpointSource::Loop, step as i64);
        parent = saver.put(&parent, cp, meta, versions).await?;
        stored.push(parent.clone());
    }
    Ok((path, stored[0].clone(), stored[1].clone()))
}

/// The latest checkpoint's `secret`, read through a new saver.
async fn latest_secret(path: &PathBuf, serde: Serde) -> Result<serde_json::Value> {
    let saver = SqliteSaver::open(SqliteConfig::file(path).serde(serde.clone())).await?;
    let tuple = saver
        .get_tuple(&CheckpointConfig::new("t"))
        .await?
        .expect("stored");
    serde.loads(&tuple.checkpoint.channel_values["secret"])
}

fn authenticated() -> Result<Serde> {
    Ok(keyed()?.authenticate_history(true))
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
    let re_point = |path: &PathBuf, first: &CheckpointConfig, second: &CheckpointConfig| {
        let old = stored_record(path, id(first)).channel_versions["secret"].clone();
        edit_record(path, id(second), |checkpoint, _| {
            checkpoint.channel_versions.insert("secret".into(), old);
        });
    };
    let (path, first, second) = two_steps(keyed()?).await?;
    assert_eq!(latest_secret(&path, keyed()?).await?, json!("new"));
    re_point(&path, &first, &second);
    assert_eq!(latest_secret(&path, keyed()?).await?, json!("old"));

    let (path, first, second) = two_steps(authenticated()?).await?;
    assert_eq!(latest_secret(&path, authenticated()?).await?, json!("new"));
    re_point(&path, &first, &second);
    let r = latest_secret(&path, authenticated()?).await;
    assert!(matches!(r, Err(Error::Decrypt(_))), "re-pointed: {r:?}");
    Ok(())
}

/// The newest checkpoint deleted: the thread silently rolls back under sealing alone; an
/// authenticated history finds the sealed child record its parent keeps, and refuses.
#[tokio::test]
async fn deleted_newest_checkpoint_is_refused_by_an_authenticated_history() -> Result<()> {
    let (path, _, second) = two_steps(keyed()?).await?;
    tamper(
        &path,
        &format!(
            "DELETE FROM checkpoints WHERE checkpoint_id = '{}'",
            id(&second)
        ),
    );
    assert_eq!(latest_secret(&path, keyed()?).await?, json!("old"));

    let (path, _, second) = two_steps(authenticated()?).await?;
    tamper(
        &path,
        &format!(
            "DELETE FROM checkpoints WHERE checkpoint_id = '{}'",
            id(&second)
        ),
    );
    let r = latest_secret(&path, authenticated()?).await;
    let Err(Error::Decrypt(message)) = r else {
        panic!("deleted newest: {r:?}");
    };
    assert!(message.contains(id(&second)), "{message}");
    // A record seal stripped from the metadata is refused too.
    let (path, _, second) = two_steps(authenticated()?).await?;
    edit_record(&path, id(&second), |_, metadata| {
        assert!(
            metadata.extra.remove(RECORD_KEY).is_some(),
            "stored with its seal"
        );
    });
    let r = latest_secret(&path, authenticated()?).await;
    assert!(matches!(r, Err(Error::Decrypt(_))), "no seal: {r:?}");
    Ok(())
}

/// An intact authenticated history reads back like any other, bookkeeping hidden: no
/// record seal in the metadata, no child record among the pending writes.
#[tokio::test]
async fn authenticated_history_hides_its_bookkeeping() -> Result<()> {
    let (path, first, _) = two_steps(authenticated()?).await?;
    assert_eq!(latest_secret(&path, authenticated()?).await?, json!("new"));
    let saver = SqliteSaver::open(SqliteConfig::file(&path).serde(authenticated()?)).await?;
    let parent = saver.get_tuple(&first).await?.expect("stored");
    assert!(
        parent.pending_writes.is_empty(),
        "{:?}",
        parent.pending_writes
    );
    assert!(!parent.metadata.extra.contains_key("waypoint_record_seal"));
    Ok(())
}
