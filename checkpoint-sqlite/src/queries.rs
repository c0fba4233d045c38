//! The SQL, and the functions that run it on a connection (always inside a worker thread).
//!
//! No SQL text is ever built from data: `list` picks among fixed clause fragments by which
//! options are present, and every value (including metadata filters, matched by the
//! `waypoint_json_contains` function) is a bound parameter.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;

use rusqlite::{Connection, OptionalExtension, Transaction, params};
use serde_json::Value;
use waypoint_checkpoint::{Checkpoint, DELTA_COUNTERS_KEY, PreparedPut, PreparedWrites, Result};

use crate::cache::{BlobCache, BlobKey};
use crate::convert::{
    EMPTY, RawBlob, RawCheckpoint, RawWrite, decode_checkpoint, decode_metadata, sqlite_error,
};

const SELECT_CHECKPOINT: &str = "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata FROM checkpoints";

/// One stored channel value by its key; `empty` rows mean a versioned channel without value.
const SELECT_BLOB: &str = "SELECT type, blob FROM checkpoint_blobs
    WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND channel = ?3 AND version = ?4";

const SELECT_WRITES: &str = "SELECT task_id, idx, channel, type, blob FROM checkpoint_writes
    WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3 ORDER BY task_id, idx";

/// A value as stored: its (possibly sealed) tag and bytes.
pub(crate) type Stored = (String, Vec<u8>);

/// Stores a prepared checkpoint (its JSON columns given) and its new values atomically.
/// A re-put keeps the first parent.
pub(crate) fn put(
    conn: &mut Connection,
    put: &PreparedPut,
    checkpoint: &str,
    metadata: &str,
) -> Result<()> {
    let tx = conn.transaction().map_err(sqlite_error)?;
    put_in(&tx, put, checkpoint, metadata)?;
    tx.commit().map_err(sqlite_error)
}

/// The statements of [`put`], inside the caller's transaction.
pub(crate) fn put_in(
    tx: &Connection,
    put: &PreparedPut,
    checkpoint: &str,
    metadata: &str,
) -> Result<()> {
    {
        let mut blob = tx
            .prepare_cached(
                "INSERT OR REPLACE INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .map_err(sqlite_error)?;
        for v in &put.values {
            let (tag, bytes) = match &v.value {
                Some(value) => (value.type_tag.as_ref(), Some(&value.bytes[..])),
                None => (EMPTY, None),
            };
            blob.execute(params![
                put.thread_id,
                put.checkpoint_ns,
                v.channel,
                v.version.as_str(),
                tag,
                bytes
            ])
            .map_err(sqlite_error)?;
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
    Ok(())
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
type Head = (String, String, String, Option<String>, String, String);

fn row_head(r: &rusqlite::Row<'_>) -> rusqlite::Result<Head> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
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
                let found = match row {
                    Some((tag, Some(blob))) if tag != EMPTY => Some(RawBlob {
                        channel: channel.clone(),
                        version: key.3.clone(),
                        type_tag: tag,
                        blob: Bytes::from(blob),
                    }),
                    _ => None,
                };
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
            type_tag: r.get(3)?,
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

/// Deletes blobs of `(thread, ns)` that no remaining checkpoint refers to. The live set is
/// one uncorrelated subquery (built once), not a probe per blob.
const COLLECT_GARBAGE: &str =
    "DELETE FROM checkpoint_blobs WHERE thread_id = ?1 AND checkpoint_ns = ?2
    AND (channel, version) NOT IN (
        SELECT v.key, v.value FROM checkpoints c, json_each(c.checkpoint, '$.channel_versions') v
        WHERE c.thread_id = ?1 AND c.checkpoint_ns = ?2)";

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
    tx.execute(
        "DELETE FROM checkpoints WHERE run_id IN (SELECT value FROM json_each(?1))",
        [run_ids],
    )
    .map_err(sqlite_error)?;
    for (thread_id, ns) in touched {
        tx.execute(COLLECT_GARBAGE, params![thread_id, ns])
            .map_err(sqlite_error)?;
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
        let (tag, blob) = match blob {
            Some(blob) if tag != EMPTY => {
                let (t, b) = reseal(CopiedValue {
                    ns: &ns,
                    slot: Ok((&channel, &version)),
                    type_tag: tag,
                    blob,
                })?;
                (t, Some(b))
            }
            _ => (tag, None),
        };
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
            tx.execute(COLLECT_GARBAGE, params![thread_id, ns])
                .map_err(sqlite_error)?;
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
    let row: Option<(Option<String>, String, String)> = conn
        .prepare_cached("SELECT parent_checkpoint_id, checkpoint, metadata FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3")
        .and_then(|mut s| s.query_row(params![thread_id, ns, id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional())
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
    let mut open: Vec<String> = Vec::new();
    if let Some(Value::Object(counters)) = meta.get(DELTA_COUNTERS_KEY) {
        for channel in counters.keys() {
            if !has_value(conn, thread_id, ns, &cp, channel)? {
                open.push(channel.clone());
            }
        }
    }
    while let (false, Some(id)) = (open.is_empty(), next.take()) {
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

/// One channel's history as read: its writes oldest first, each with the id of the
/// checkpoint it belongs to, and the seed value if an ancestor has one.
#[derive(Debug, Default)]
pub(crate) struct RawHistory {
    pub(crate) writes: Vec<(String, RawWrite)>,
    pub(crate) seed: Option<RawBlob>,
}

/// The delta history of some channels in one statement, whatever the chain's length.
///
/// `chain` walks parent links from the target (depth 0), once per channel (channels end
/// independently), and stops at the first ancestor with a stored value for the channel
/// (`seeded`): a non-`empty` blob under the version the checkpoint JSON names. The version
/// is read by a JSON path that quotes the channel name (`json_quote` escapes it, and SQLite
/// reads escapes in quoted path labels since 3.45; the bundled one is newer), so names with
/// dots, quotes or a leading `$` stay one key; `CAST` matches integer versions of older
/// savers to their text key, as `get` matches them. `CROSS JOIN` fixes the loop order, so
/// each ancestor is one probe by key: SQLite would otherwise scan the thread's writes (or
/// blobs) and probe the chain for each.
///
/// The result holds the ancestors' writes to each channel (`task_id` not null), oldest
/// ancestor first and by `(task_id, idx)` within one, and each channel's seed (`task_id`
/// null, the last column is then its version).
///
/// `?1` thread, `?2` namespace, `?3` target id (`NULL`: the latest), `?4` the channels as a
/// JSON array of distinct names.
const DELTA_HISTORY: &str =
    "WITH RECURSIVE chain (channel, path, checkpoint_id, parent_id, depth, seeded) AS (
    SELECT o.value, '$.channel_versions.' || json_quote(o.value), t.checkpoint_id,
        t.parent_checkpoint_id, 0, 0
    FROM checkpoints t CROSS JOIN json_each(?4) o
    WHERE t.thread_id = ?1 AND t.checkpoint_ns = ?2 AND t.checkpoint_id = coalesce(?3,
        (SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2))
    UNION ALL
    SELECT chain.channel, chain.path, c.checkpoint_id, c.parent_checkpoint_id, chain.depth + 1,
        EXISTS (SELECT 1 FROM checkpoint_blobs b
            WHERE b.thread_id = ?1 AND b.checkpoint_ns = ?2 AND b.channel = chain.channel
                AND b.version = CAST(json_extract(c.checkpoint, chain.path) AS TEXT)
                AND b.type <> 'empty' AND b.blob IS NOT NULL)
    FROM chain CROSS JOIN checkpoints c
    WHERE NOT chain.seeded
        AND c.thread_id = ?1 AND c.checkpoint_ns = ?2 AND c.checkpoint_id = chain.parent_id
)
SELECT chain.depth, w.channel, w.task_id, w.idx, w.type, w.blob, chain.checkpoint_id
FROM chain CROSS JOIN checkpoint_writes w
WHERE chain.depth > 0 AND w.thread_id = ?1 AND w.checkpoint_ns = ?2
    AND w.checkpoint_id = chain.checkpoint_id AND w.channel = chain.channel
UNION ALL
SELECT chain.depth, b.channel, NULL, NULL, b.type, b.blob, b.version
FROM chain CROSS JOIN checkpoints c CROSS JOIN checkpoint_blobs b
WHERE chain.seeded
    AND c.thread_id = ?1 AND c.checkpoint_ns = ?2 AND c.checkpoint_id = chain.checkpoint_id
    AND b.thread_id = ?1 AND b.checkpoint_ns = ?2 AND b.channel = chain.channel
    AND b.version = CAST(json_extract(c.checkpoint, chain.path) AS TEXT)
ORDER BY 1 DESC, 3, 4";

/// For each channel, its writes (oldest first) and seed, walking parent links from the
/// parent of `target` (the latest when `None`); an unknown target gives empty histories.
/// See [`DELTA_HISTORY`].
pub(crate) fn delta_history(
    conn: &Connection,
    thread_id: &str,
    ns: &str,
    target: Option<&str>,
    channels: &[String],
) -> Result<BTreeMap<String, RawHistory>> {
    let mut out: BTreeMap<String, RawHistory> = channels
        .iter()
        .map(|c| (c.clone(), RawHistory::default()))
        .collect();
    let wanted: Vec<&String> = out.keys().collect();
    let wanted = serde_json::to_string(&wanted)
        .map_err(|e| waypoint_checkpoint::Error::serialization("json", e))?;
    let mut stmt = conn.prepare_cached(DELTA_HISTORY).map_err(sqlite_error)?;
    let mut rows = stmt
        .query(params![thread_id, ns, target, wanted])
        .map_err(sqlite_error)?;
    while let Some(row) = rows.next().map_err(sqlite_error)? {
        let get = |i| row.get::<_, String>(i).map_err(sqlite_error);
        let channel = get(1)?;
        let Some(history) = out.get_mut(&channel) else {
            continue;
        };
        let task_id: Option<String> = row.get(2).map_err(sqlite_error)?;
        match task_id {
            Some(task_id) => {
                let write = RawWrite {
                    task_id,
                    idx: row.get(3).map_err(sqlite_error)?,
                    channel,
                    type_tag: get(4)?,
                    blob: row.get(5).map_err(sqlite_error)?,
                };
                history.writes.push((get(6)?, write));
            }
            None => {
                history.seed = Some(RawBlob {
                    channel,
                    version: get(6)?,
                    type_tag: get(4)?,
                    blob: Bytes::from(row.get::<_, Vec<u8>>(5).map_err(sqlite_error)?),
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use waypoint_checkpoint::{
        ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
        CheckpointSaver, CheckpointSource, SerializedValue, walk_delta_history,
    };

    use crate::SqliteSaver;

    fn val(text: &str) -> SerializedValue {
        SerializedValue::new("json", format!("{text:?}").into_bytes())
    }

    /// Names a JSON path would need escaped, a channel nobody wrote, and a repeated name: the
    /// one-statement history agrees with the generic walk at every checkpoint.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn delta_history_matches_generic_walk_for_odd_channel_names() {
        let dir = tempfile::tempdir().expect("temp dir");
        let saver = SqliteSaver::from_path(dir.path().join("d.db"))
            .await
            .expect("open");
        let names = ["a.b", "q\"x", "$.c", "plain", "back\\slash"];
        let mut parent = CheckpointConfig::new("t").with_ns("");
        let mut configs = Vec::new();
        let mut versions = ChannelVersions::new();
        for step in 0..9i64 {
            let mut cp = Checkpoint::new(step);
            let mut new_versions = ChannelVersions::new();
            for (i, name) in names.iter().enumerate() {
                let next = ChannelVersion::next(versions.get(*name)).expect("version");
                versions.insert((*name).to_owned(), next.clone());
                new_versions.insert((*name).to_owned(), next);
                if step % (i as i64 + 2) == 0 {
                    cp.channel_values
                        .insert((*name).to_owned(), val(&format!("seed {step}")));
                }
            }
            cp.channel_versions = versions.clone();
            let meta = CheckpointMetadata::new(CheckpointSource::Loop, step);
            parent = saver
                .put(&parent, cp, meta, new_versions)
                .await
                .expect("put");
            for (task, name) in ["t2", "t1"].iter().zip(names.iter().rev()) {
                let writes = vec![
                    ((*name).to_owned(), val(&format!("{task} {step}"))),
                    ("a.b".to_owned(), val(&format!("{task} {step} again"))),
                ];
                saver
                    .put_writes(&parent, writes, task, "")
                    .await
                    .expect("writes");
            }
            configs.push(parent.clone());
        }
        let mut wanted: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        wanted.extend(["missing".to_owned(), "a.b".to_owned()]);
        configs.push(CheckpointConfig::new("t").with_ns(""));
        for config in &configs {
            let fast = saver
                .delta_channel_history(config, &wanted)
                .await
                .expect("history");
            let slow = walk_delta_history(&saver, config, &wanted)
                .await
                .expect("walk");
            assert_eq!(fast, slow, "at {config:?}");
        }
    }

    /// Versions stored as JSON integers (older savers) find their values, as `get` finds them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn delta_history_reads_integer_versions() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("d.db");
        let saver = SqliteSaver::from_path(&path).await.expect("open");
        let conn = rusqlite::Connection::open(&path).expect("open raw");
        let ids: Vec<String> = (0..3).map(waypoint_checkpoint::checkpoint_id).collect();
        for (i, id) in ids.iter().enumerate() {
            let checkpoint = serde_json::json!({
                "v": 4, "id": id, "ts": "2026-01-01T00:00:00+00:00",
                "channel_versions": {"ch": i + 1}, "versions_seen": {}
            });
            let parent = i.checked_sub(1).map(|p| ids[p].clone());
            conn.execute(
                "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata)
                 VALUES ('t', '', ?1, ?2, 'json', ?3, '{}')",
                rusqlite::params![id, parent, checkpoint.to_string()],
            )
            .expect("checkpoint");
            conn.execute(
                "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob)
                 VALUES ('t', '', ?1, 'task', 0, 'ch', 'json', ?2)",
                rusqlite::params![id, format!("{i}").into_bytes()],
            )
            .expect("write");
        }
        conn.execute(
            "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
             VALUES ('t', '', 'ch', '1', 'json', CAST('[0]' AS BLOB))",
            [],
        )
        .expect("blob");
        let config = CheckpointConfig::new("t").with_ns("");
        let wanted = ["ch".to_owned()];
        let fast = saver
            .delta_channel_history(&config, &wanted)
            .await
            .expect("history");
        assert_eq!(fast["ch"].writes.len(), 2);
        assert_eq!(
            fast["ch"].seed.as_ref().map(|s| s.bytes.to_vec()),
            Some(b"[0]".to_vec())
        );
        let slow = walk_delta_history(&saver, &config, &wanted)
            .await
            .expect("walk");
        assert_eq!(fast, slow);
    }
}
