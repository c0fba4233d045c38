//! The SQL, and the functions that run it on a connection (always inside a worker thread).
//!
//! No SQL text is ever built from data: `list` picks among fixed clause fragments by which
//! options are present, and every value (including metadata filters, matched by the
//! `waypoint_json_contains` function) is a bound parameter.

use std::collections::{BTreeSet, HashMap, HashSet};
use waypoint_checkpoint::metadata;
use waypoint_checkpoint::raw::{PreparedPut, PreparedWrites};

use bytes::Bytes;

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};
use serde_json::Value;
use waypoint_checkpoint::serde::{CHILD_CHANNEL, child_record_task};
use waypoint_checkpoint::{Checkpoint, Result};

use crate::cache::{BlobCache, BlobKey};
use crate::convert::{
    EMPTY, RawBlob, RawCheckpoint, RawWrite, decode_checkpoint, decode_metadata, record_at,
    type_tag_at,
};
use crate::error::sqlite_error;

const SELECT_CHECKPOINT: &str = "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata FROM checkpoints";

/// One stored channel value by its key; `empty` rows mean a versioned channel without value.
const SELECT_BLOB: &str = "SELECT type, blob FROM checkpoint_blobs
    WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND channel = ?3 AND version = ?4";

/// A checkpoint's writes in the order a step applied them, LangGraph's `writes_sort_key`
/// `(task_path, task_id, idx)` (text compares as bytes under SQLite's default collation).
const SELECT_WRITES: &str = "SELECT task_id, idx, channel, type, blob FROM checkpoint_writes
    WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3
    ORDER BY task_path, task_id, idx";

/// A value as stored: its (possibly sealed) tag and bytes.
pub(crate) type Stored = (String, Vec<u8>);

/// Stores a prepared checkpoint (its record columns given) and its new values atomically,
/// but those `cache` knows are stored already (see [`stored_already`]). A re-put keeps the
/// first parent. Returns, per value, whether it was stored now (a version that already had a
/// value keeps it).
pub(crate) fn put(
    conn: &mut Connection,
    put: &PreparedPut,
    checkpoint: &[u8],
    metadata: &[u8],
    cache: &BlobCache,
) -> Result<Vec<bool>> {
    // Immediate: `data_version` must be read under the write lock (see `stored_already`).
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sqlite_error)?;
    let skip = stored_already(&tx, put, cache)?;
    let stored = put_in(&tx, put, checkpoint, metadata, &skip)?;
    tx.commit().map_err(sqlite_error)?;
    Ok(stored)
}

/// Which of `put`'s values are stored already, as far as `cache`'s marks of the writer's
/// commits tell while no other connection has written (`tx` holds the write lock, so none
/// can until it ends); storing them again would be ignored. Values a caller hands over at
/// their current version (every channel of most puts) need no statement then.
pub(crate) fn stored_already(
    tx: &Connection,
    put: &PreparedPut,
    cache: &BlobCache,
) -> Result<Vec<bool>> {
    // One key, refilled per value: no allocation per lookup.
    let mut key: BlobKey = (
        put.thread_id.clone(),
        put.checkpoint_ns.clone(),
        String::new(),
        String::new(),
    );
    let marked: Vec<bool> = put
        .values
        .iter()
        .map(|v| {
            key.2.clear();
            key.2.push_str(&v.channel);
            key.3.clear();
            key.3.push_str(v.version.as_str());
            cache.committed(&key)
        })
        .collect();
    if !marked.contains(&true) {
        return Ok(marked);
    }
    let data_version: i64 = tx
        .prepare_cached("PRAGMA data_version")
        .and_then(|mut q| q.query_row([], |r| r.get(0)))
        .map_err(sqlite_error)?;
    if cache.still_exact(data_version) {
        Ok(marked)
    } else {
        Ok(vec![false; marked.len()])
    }
}

/// The newest checkpoint id of `put`'s thread and namespace other than its own.
pub(crate) fn newest_other(tx: &Connection, put: &PreparedPut) -> Result<Option<String>> {
    tx.prepare_cached(
        "SELECT max(checkpoint_id) FROM checkpoints
         WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id <> ?3",
    )
    .and_then(|mut q| {
        q.query_row(
            params![put.thread_id, put.checkpoint_ns, put.checkpoint.id],
            |r| r.get(0),
        )
    })
    .map_err(sqlite_error)
}

/// The statements of [`put`], inside the caller's transaction, leaving out the values `skip`
/// marks (stored already); as [`put`], which values were stored now.
pub(crate) fn put_in(
    tx: &Connection,
    put: &PreparedPut,
    checkpoint: &[u8],
    metadata: &[u8],
    skip: &[bool],
) -> Result<Vec<bool>> {
    let mut stored = Vec::with_capacity(put.values.len());
    {
        let mut blob = tx
            .prepare_cached(
                "INSERT OR IGNORE INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .map_err(sqlite_error)?;
        for (v, skip) in put.values.iter().zip(skip) {
            if *skip {
                stored.push(false);
                continue;
            }
            let (tag, bytes) = match &v.value {
                Some(value) => (value.type_tag.as_ref(), Some(&value.bytes[..])),
                None => (EMPTY, None),
            };
            let changed = blob
                .execute(params![
                    put.thread_id,
                    put.checkpoint_ns,
                    v.channel,
                    v.version.as_str(),
                    tag,
                    bytes
                ])
                .map_err(sqlite_error)?;
            stored.push(changed > 0);
        }
        tx.prepare_cached(
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata, run_id)
             VALUES (?1, ?2, ?3, ?4, 'json', ?5, ?6, ?7)
             ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
                checkpoint = excluded.checkpoint, metadata = excluded.metadata, run_id = excluded.run_id",
        )
        .map_err(sqlite_error)?
        .execute(params![
            put.thread_id,
            put.checkpoint_ns,
            put.checkpoint.id,
            put.parent,
            checkpoint,
            metadata,
            put.metadata.run_id
        ])
        .map_err(sqlite_error)?;
    }
    if let Some(child) = &put.child {
        put_writes_in(tx, child)?;
    }
    Ok(stored)
}

/// Stores one task's prepared writes: replace when all are reserved, else insert-or-ignore.
pub(crate) fn put_writes(conn: &mut Connection, w: &PreparedWrites) -> Result<()> {
    let tx = conn.transaction().map_err(sqlite_error)?;
    put_writes_in(&tx, w)?;
    tx.commit().map_err(sqlite_error)
}

/// The statements of [`put_writes`], inside the caller's transaction.
pub(crate) fn put_writes_in(tx: &Connection, w: &PreparedWrites) -> Result<()> {
    let sql = if w.replace {
        "INSERT OR REPLACE INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
    } else {
        "INSERT OR IGNORE INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
    };
    {
        let mut stmt = tx.prepare_cached(sql).map_err(sqlite_error)?;
        for row in &w.rows {
            stmt.execute(params![
                w.thread_id,
                w.checkpoint_ns,
                w.checkpoint_id,
                w.task_id,
                row.idx,
                row.channel,
                row.value.type_tag.as_ref(),
                &row.value.bytes[..],
                w.task_path
            ])
            .map_err(sqlite_error)?;
        }
    }
    Ok(())
}

/// The columns of `SELECT_CHECKPOINT`, undecoded.
type Head = (String, String, String, Option<String>, Vec<u8>, Vec<u8>);

fn row_head(r: &rusqlite::Row<'_>) -> rusqlite::Result<Head> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        record_at(r, 4)?,
        record_at(r, 5)?,
    ))
}

/// Values already read in this operation; `None` = a versioned channel without value.
type Seen = HashMap<BlobKey, Option<RawBlob>>;

/// Decodes a row and loads its values (each distinct version at most once per operation,
/// from the shared cache when it has it) and its writes.
fn fill(
    conn: &Connection,
    head: Head,
    seen: &mut Seen,
    cache: &BlobCache,
) -> Result<RawCheckpoint> {
    let (thread_id, checkpoint_ns, checkpoint_id, parent, checkpoint, metadata) = head;
    let checkpoint = decode_checkpoint(&checkpoint)?;
    let mut blobs = Vec::with_capacity(checkpoint.channel_versions.len());
    let mut stmt = conn.prepare_cached(SELECT_BLOB).map_err(sqlite_error)?;
    for (channel, version) in &checkpoint.channel_versions {
        let key = (
            thread_id.clone(),
            checkpoint_ns.clone(),
            channel.clone(),
            version.to_string(),
        );
        let found = match seen.get(&key).cloned().or_else(|| cache.get(&key)) {
            Some(found) => found,
            None => {
                let row: Option<(String, Option<Vec<u8>>)> = stmt
                    .query_row(params![key.0, key.1, key.2, key.3], |r| {
                        Ok((r.get(0)?, r.get(1)?))
                    })
                    .optional()
                    .map_err(sqlite_error)?;
                // Empty rows are kept (their seal is checked under a keyring); `None` is a
                // version with no row at all.
                let found = row.map(|(tag, blob)| RawBlob {
                    channel: channel.clone(),
                    version: key.3.clone(),
                    type_tag: tag,
                    blob: blob.map(Bytes::from).unwrap_or_default(),
                });
                cache.insert(key.clone(), found.clone());
                seen.insert(key, found.clone());
                found
            }
        };
        blobs.extend(found);
    }
    let writes = writes(conn, &thread_id, &checkpoint_ns, &checkpoint_id)?;
    Ok(RawCheckpoint {
        thread_id,
        checkpoint_ns,
        checkpoint_id,
        parent,
        checkpoint,
        metadata,
        blobs,
        writes,
    })
}

fn writes(conn: &Connection, thread_id: &str, ns: &str, id: &str) -> Result<Vec<RawWrite>> {
    let mut stmt = conn.prepare_cached(SELECT_WRITES).map_err(sqlite_error)?;
    stmt.query_map(params![thread_id, ns, id], |r| {
        Ok(RawWrite {
            task_id: r.get(0)?,
            idx: r.get(1)?,
            channel: r.get(2)?,
            type_tag: type_tag_at(r, 3)?,
            blob: r.get(4)?,
        })
    })
    .and_then(|rows| rows.collect())
    .map_err(sqlite_error)
}

/// Runs `f` in one read transaction, so its statements share one snapshot and take the WAL
/// read lock once rather than once per statement.
pub(crate) fn read<T>(
    conn: &mut Connection,
    f: impl FnOnce(&Connection) -> Result<T>,
) -> Result<T> {
    let tx = conn.transaction().map_err(sqlite_error)?;
    let out = f(&tx)?;
    tx.commit().map_err(sqlite_error)?;
    Ok(out)
}

/// The checkpoint `id` (or the latest) of a thread and namespace, with values and writes.
pub(crate) fn get(
    conn: &Connection,
    thread_id: &str,
    ns: &str,
    id: Option<&str>,
    cache: &BlobCache,
) -> Result<Option<RawCheckpoint>> {
    let head = match id {
        Some(id) => conn
            .prepare_cached(&format!("{SELECT_CHECKPOINT} WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3"))
            .and_then(|mut s| s.query_row(params![thread_id, ns, id], row_head).optional()),
        None => conn
            .prepare_cached(&format!(
                "{SELECT_CHECKPOINT} WHERE thread_id = ?1 AND checkpoint_ns = ?2 ORDER BY checkpoint_id DESC LIMIT 1"
            ))
            .and_then(|mut s| s.query_row(params![thread_id, ns], row_head).optional()),
    }
    .map_err(sqlite_error)?;
    head.map(|h| fill(conn, h, &mut Seen::new(), cache))
        .transpose()
}

/// What `list` selects on; every field is bound, never spliced.
#[derive(Default)]
pub(crate) struct ListQuery {
    pub(crate) thread_id: Option<String>,
    pub(crate) checkpoint_ns: Option<String>,
    pub(crate) checkpoint_id: Option<String>,
    pub(crate) before: Option<String>,
    pub(crate) filter: Option<String>,
    pub(crate) limit: Option<usize>,
}

/// Checkpoints newest first, streamed from one statement with `LIMIT` in the query.
pub(crate) fn list(
    conn: &Connection,
    q: &ListQuery,
    cache: &BlobCache,
) -> Result<Vec<RawCheckpoint>> {
    let clauses = [
        (q.thread_id.is_some(), "thread_id = :thread_id"),
        (q.checkpoint_ns.is_some(), "checkpoint_ns = :checkpoint_ns"),
        (q.checkpoint_id.is_some(), "checkpoint_id = :checkpoint_id"),
        (q.before.is_some(), "checkpoint_id < :before"),
        (
            q.filter.is_some(),
            "waypoint_json_contains(metadata, :filter)",
        ),
    ];
    let mut sql = String::from(SELECT_CHECKPOINT);
    for (i, (_, clause)) in clauses.iter().filter(|(on, _)| *on).enumerate() {
        sql.push_str(if i == 0 { " WHERE " } else { " AND " });
        sql.push_str(clause);
    }
    // Pick the order the indexes can serve: one namespace of one thread reads its primary-key
    // range backwards; one thread across namespaces sorts its own rows (`+` keeps SQLite from
    // scanning the global id index through every thread); everything walks the id index.
    sql.push_str(match (q.thread_id.is_some(), q.checkpoint_ns.is_some()) {
        (true, true) => " ORDER BY checkpoint_id DESC",
        (true, false) => " ORDER BY +checkpoint_id DESC, checkpoint_ns DESC",
        (false, _) => " ORDER BY checkpoint_id DESC, thread_id DESC, checkpoint_ns DESC",
    });
    sql.push_str(" LIMIT :limit");
    let mut stmt = conn.prepare_cached(&sql).map_err(sqlite_error)?;
    let limit = q
        .limit
        .map(|l| l.min(i64::MAX as usize) as i64)
        .unwrap_or(-1);
    let mut named: Vec<(&str, &dyn rusqlite::ToSql)> = vec![(":limit", &limit)];
    for (name, value) in [
        (":thread_id", &q.thread_id),
        (":checkpoint_ns", &q.checkpoint_ns),
        (":checkpoint_id", &q.checkpoint_id),
        (":before", &q.before),
        (":filter", &q.filter),
    ] {
        if let Some(v) = value {
            named.push((name, v));
        }
    }
    let heads: Vec<Head> = stmt
        .query_map(named.as_slice(), row_head)
        .and_then(|rows| rows.collect())
        .map_err(sqlite_error)?;
    let mut seen = Seen::new();
    heads
        .into_iter()
        .map(|h| fill(conn, h, &mut seen, cache))
        .collect()
}

/// Deletes every row of a thread.
pub(crate) fn delete_thread(conn: &mut Connection, thread_id: &str) -> Result<()> {
    let tx = conn.transaction().map_err(sqlite_error)?;
    delete_thread_in(&tx, thread_id)?;
    tx.commit().map_err(sqlite_error)
}

fn delete_thread_in(tx: &Transaction<'_>, thread_id: &str) -> Result<()> {
    for table in ["checkpoints", "checkpoint_blobs", "checkpoint_writes"] {
        tx.execute(
            &format!("DELETE FROM {table} WHERE thread_id = ?1"),
            [thread_id],
        )
        .map_err(sqlite_error)?;
    }
    Ok(())
}

/// Deletes blobs of `(thread, ns)` that no remaining checkpoint refers to: the live set is
/// read from the records once, then each stored version not in it is deleted.
fn collect_garbage(tx: &Connection, thread_id: &str, ns: &str) -> Result<()> {
    let mut live: HashMap<String, HashSet<String>> = HashMap::new();
    let mut stmt = tx
        .prepare_cached(
            "SELECT checkpoint FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2",
        )
        .map_err(sqlite_error)?;
    let mut rows = stmt.query(params![thread_id, ns]).map_err(sqlite_error)?;
    while let Some(row) = rows.next().map_err(sqlite_error)? {
        let checkpoint = decode_checkpoint(&record_at(row, 0).map_err(sqlite_error)?)?;
        for (channel, version) in checkpoint.channel_versions {
            live.entry(channel).or_default().insert(version.to_string());
        }
    }
    let stored: Vec<(String, String)> = tx
        .prepare_cached("SELECT channel, version FROM checkpoint_blobs WHERE thread_id = ?1 AND checkpoint_ns = ?2")
        .and_then(|mut s| s.query_map(params![thread_id, ns], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .map_err(sqlite_error)?;
    let mut delete = tx
        .prepare_cached("DELETE FROM checkpoint_blobs WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND channel = ?3 AND version = ?4")
        .map_err(sqlite_error)?;
    for (channel, version) in stored {
        if !live.get(&channel).is_some_and(|l| l.contains(&version)) {
            delete
                .execute(params![thread_id, ns, channel, version])
                .map_err(sqlite_error)?;
        }
    }
    Ok(())
}

/// Deletes the checkpoints of the given runs, their writes, and values left unreferenced.
pub(crate) fn delete_for_runs(conn: &mut Connection, run_ids: &str) -> Result<()> {
    let tx = conn.transaction().map_err(sqlite_error)?;
    let touched: Vec<(String, String)> = tx
        .prepare("SELECT DISTINCT thread_id, checkpoint_ns FROM checkpoints WHERE run_id IN (SELECT value FROM json_each(?1))")
        .and_then(|mut s| s.query_map([run_ids], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .map_err(sqlite_error)?;
    tx.execute(
        "DELETE FROM checkpoint_writes WHERE (thread_id, checkpoint_ns, checkpoint_id) IN (
            SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints WHERE run_id IN (SELECT value FROM json_each(?1)))",
        [run_ids],
    )
    .map_err(sqlite_error)?;
    // Their child records on surviving parents (authenticated history) go with them.
    tx.execute(
        "DELETE FROM checkpoint_writes WHERE channel = ?2 AND (thread_id, checkpoint_ns, task_id) IN (
            SELECT thread_id, checkpoint_ns, ?3 || checkpoint_id FROM checkpoints
            WHERE run_id IN (SELECT value FROM json_each(?1)))",
        params![run_ids, CHILD_CHANNEL, child_record_task("")],
    )
    .map_err(sqlite_error)?;
    tx.execute(
        "DELETE FROM checkpoints WHERE run_id IN (SELECT value FROM json_each(?1))",
        [run_ids],
    )
    .map_err(sqlite_error)?;
    for (thread_id, ns) in touched {
        collect_garbage(&tx, &thread_id, &ns)?;
    }
    tx.commit().map_err(sqlite_error)
}

/// Whether a thread has any checkpoint.
fn has_checkpoints(conn: &Connection, thread_id: &str) -> Result<bool> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = ?1)",
        [thread_id],
        |r| r.get(0),
    )
    .map_err(sqlite_error)
}

/// Re-seals a copied value for the target thread.
pub(crate) type ResealFn<'a> = dyn Fn(CopiedValue<'_>) -> Result<Stored> + 'a;

/// How `copy_thread` moves sealed values: as they are (`None`), or re-sealed.
pub(crate) type Reseal<'a> = Option<&'a ResealFn<'a>>;

/// A value being copied, with where it lived.
pub(crate) struct CopiedValue<'a> {
    pub(crate) ns: &'a str,
    /// `Ok((channel, version))` for channel values, `Err((checkpoint_id, task_id, channel, idx))` for writes.
    pub(crate) slot: std::result::Result<(&'a str, &'a str), (&'a str, &'a str, &'a str, i64)>,
    pub(crate) type_tag: String,
    pub(crate) blob: Vec<u8>,
}

/// Copies every row of `source` to `target` in one transaction, re-sealing values when asked.
/// Returns `false` (and changes nothing) when `target` has checkpoints.
pub(crate) fn copy_thread(
    conn: &mut Connection,
    source: &str,
    target: &str,
    reseal: Reseal<'_>,
) -> Result<bool> {
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(sqlite_error)?;
    if has_checkpoints(&tx, target)? {
        return Ok(false);
    }
    // Leftovers of a deleted target (late writes) must not attach to the copied checkpoints.
    delete_thread_in(&tx, target)?;
    tx.execute(
        "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata, run_id)
         SELECT ?2, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata, run_id FROM checkpoints WHERE thread_id = ?1",
        [source, target],
    )
    .map_err(sqlite_error)?;
    match reseal {
        None => {
            tx.execute(
                "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
                 SELECT ?2, checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs WHERE thread_id = ?1",
                [source, target],
            )
            .map_err(sqlite_error)?;
            tx.execute(
                "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path)
                 SELECT ?2, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path FROM checkpoint_writes WHERE thread_id = ?1",
                [source, target],
            )
            .map_err(sqlite_error)?;
        }
        Some(reseal) => copy_resealed(&tx, source, target, reseal)?,
    }
    tx.commit().map_err(sqlite_error)?;
    Ok(true)
}

fn copy_resealed(
    tx: &Transaction<'_>,
    source: &str,
    target: &str,
    reseal: &ResealFn<'_>,
) -> Result<()> {
    let mut read = tx
        .prepare("SELECT checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs WHERE thread_id = ?1")
        .map_err(sqlite_error)?;
    let mut insert = tx
        .prepare("INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
        .map_err(sqlite_error)?;
    let mut rows = read.query([source]).map_err(sqlite_error)?;
    while let Some(r) = rows.next().map_err(sqlite_error)? {
        let (ns, channel, version, tag): (String, String, String, String) = (
            r.get(0).map_err(sqlite_error)?,
            r.get(1).map_err(sqlite_error)?,
            r.get(2).map_err(sqlite_error)?,
            r.get(3).map_err(sqlite_error)?,
        );
        let blob: Option<Vec<u8>> = r.get(4).map_err(sqlite_error)?;
        // Empty rows are resealed too: under a keyring their seal names the slot.
        let (tag, blob) = reseal(CopiedValue {
            ns: &ns,
            slot: Ok((&channel, &version)),
            type_tag: tag,
            blob: blob.unwrap_or_default(),
        })?;
        let blob = (!blob.is_empty() || tag != EMPTY).then_some(blob);
        insert
            .execute(params![target, ns, channel, version, tag, blob])
            .map_err(sqlite_error)?;
    }
    let mut read = tx
        .prepare("SELECT checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path FROM checkpoint_writes WHERE thread_id = ?1")
        .map_err(sqlite_error)?;
    let mut insert = tx
        .prepare(
            "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )
        .map_err(sqlite_error)?;
    let mut rows = read.query([source]).map_err(sqlite_error)?;
    while let Some(r) = rows.next().map_err(sqlite_error)? {
        let get = |i| r.get::<_, String>(i).map_err(sqlite_error);
        let (ns, id, task, channel, tag, path) =
            (get(0)?, get(1)?, get(2)?, get(4)?, get(5)?, get(7)?);
        let idx: i64 = r.get(3).map_err(sqlite_error)?;
        let blob: Vec<u8> = r.get(6).map_err(sqlite_error)?;
        let slot = Err((id.as_str(), task.as_str(), channel.as_str(), idx));
        let (tag, blob) = reseal(CopiedValue {
            ns: &ns,
            slot,
            type_tag: tag,
            blob,
        })?;
        insert
            .execute(params![target, ns, id, task, idx, channel, tag, blob, path])
            .map_err(sqlite_error)?;
    }
    Ok(())
}

/// Deletes whole threads (`keep_latest` false) or keeps the newest checkpoint of each
/// namespace plus the ancestors its delta channels still need, with their writes.
pub(crate) fn prune(conn: &mut Connection, thread_ids: &[String], keep_latest: bool) -> Result<()> {
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(sqlite_error)?;
    for thread_id in thread_ids {
        if !keep_latest {
            delete_thread_in(&tx, thread_id)?;
            continue;
        }
        let namespaces: Vec<String> = tx
            .prepare_cached("SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = ?1")
            .and_then(|mut s| s.query_map([thread_id], |r| r.get(0))?.collect())
            .map_err(sqlite_error)?;
        for ns in namespaces {
            let keep = ids_to_keep(&tx, thread_id, &ns)?;
            let newest = keep.iter().next_back().cloned().unwrap_or_default();
            let keep = serde_json::to_string(&keep)
                .map_err(|e| waypoint_checkpoint::Error::serialization("json", e))?;
            tx.execute(
                "DELETE FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id NOT IN (SELECT value FROM json_each(?3))",
                params![thread_id, ns, keep],
            )
            .map_err(sqlite_error)?;
            // Writes for checkpoints not stored yet (newer than the latest) stay.
            tx.execute(
                "DELETE FROM checkpoint_writes WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id <= ?4
                 AND checkpoint_id NOT IN (SELECT value FROM json_each(?3))",
                params![thread_id, ns, keep, newest],
            )
            .map_err(sqlite_error)?;
            collect_garbage(&tx, thread_id, &ns)?;
        }
    }
    tx.commit().map_err(sqlite_error)
}

/// A checkpoint's parent and decoded row, for walks along parent links.
fn checkpoint_at(
    conn: &Connection,
    thread_id: &str,
    ns: &str,
    id: &str,
) -> Result<Option<(Option<String>, Checkpoint, Value)>> {
    let row: Option<(Option<String>, Vec<u8>, Vec<u8>)> = conn
        .prepare_cached("SELECT parent_checkpoint_id, checkpoint, metadata FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3")
        .and_then(|mut s| s.query_row(params![thread_id, ns, id], |r| Ok((r.get(0)?, record_at(r, 1)?, record_at(r, 2)?))).optional())
        .map_err(sqlite_error)?;
    let Some((parent, checkpoint, metadata)) = row else {
        return Ok(None);
    };
    let (cp, meta) = (decode_checkpoint(&checkpoint)?, decode_metadata(&metadata)?);
    Ok(Some((parent, cp, Value::Object(meta.to_json()))))
}

/// Whether `checkpoint` has a stored (non-empty) value for `channel`.
fn has_value(
    conn: &Connection,
    thread_id: &str,
    ns: &str,
    checkpoint: &Checkpoint,
    channel: &str,
) -> Result<bool> {
    let Some(version) = checkpoint.channel_versions.get(channel) else {
        return Ok(false);
    };
    conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM checkpoint_blobs WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND channel = ?3 AND version = ?4 AND type <> 'empty')",
    )
    .and_then(|mut s| s.query_row(params![thread_id, ns, channel, version.as_str()], |r| r.get(0)))
    .map_err(sqlite_error)
}

/// The newest checkpoint id plus the ancestors its delta channels need back to a seed.
fn ids_to_keep(conn: &Connection, thread_id: &str, ns: &str) -> Result<BTreeSet<String>> {
    let mut keep = BTreeSet::new();
    let latest: Option<String> = conn
        .prepare_cached("SELECT MAX(checkpoint_id) FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2")
        .and_then(|mut s| s.query_row(params![thread_id, ns], |r| r.get(0)))
        .map_err(sqlite_error)?;
    let Some(latest) = latest else {
        return Ok(keep);
    };
    keep.insert(latest.clone());
    let Some((mut next, cp, meta)) = checkpoint_at(conn, thread_id, ns, &latest)? else {
        return Ok(keep);
    };
    if let (true, Some(parent)) = (
        metadata::writes_from_parent(meta.get(metadata::WRITES_FROM)),
        &next,
    ) {
        keep.insert(parent.clone());
    }
    let mut open: Vec<String> = Vec::new();
    if let Some(Value::Object(counters)) = meta.get(metadata::DELTA_COUNTERS) {
        for channel in counters.keys() {
            if !has_value(conn, thread_id, ns, &cp, channel)? {
                open.push(channel.clone());
            }
        }
    }
    // A parent link back into the walk (rows written by others) ends it.
    let mut walked = BTreeSet::from([latest]);
    while let (false, Some(id)) = (open.is_empty(), next.take()) {
        if !walked.insert(id.clone()) {
            break;
        }
        let Some((parent, ancestor, _)) = checkpoint_at(conn, thread_id, ns, &id)? else {
            break;
        };
        keep.insert(id);
        let mut still_open = Vec::with_capacity(open.len());
        for channel in open {
            if !has_value(conn, thread_id, ns, &ancestor, &channel)? {
                still_open.push(channel);
            }
        }
        open = still_open;
        next = parent;
    }
    Ok(keep)
}
