//! The SQL of each backend operation, run synchronously on one connection.
//!
//! Every statement is prepared once per connection (`prepare_cached`). Liveness is always
//! `expires_at IS NULL OR expires_at > now` with `now` bound from the engine: timestamps are
//! fixed-width UTC text, so text comparison is time comparison.

use chrono::{DateTime, Utc};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use waypoint_store::raw::{FieldVector, ItemVectors, Row, Write, expiry};
use waypoint_store::{Error, ItemKey, Namespace, Result};

use super::convert::{Scope, corrupt, row, timestamp};
use crate::error::store_error;
use waypoint_store::raw::{decode_vector, encode_vector};

/// `SELECT` of the columns [`row`] decodes, in its order.
macro_rules! select_rows {
    () => {
        "SELECT prefix, key, value, created_at, updated_at, ttl_minutes FROM store"
    };
}

const GET: &str = concat!(
    select_rows!(),
    " WHERE prefix = ?1 AND key = ?2 AND (expires_at IS NULL OR expires_at > ?3)"
);

const SCAN_ALL: &str = concat!(
    select_rows!(),
    " WHERE (expires_at IS NULL OR expires_at > ?1)",
    " ORDER BY updated_at DESC, prefix, key"
);

// Whole-label prefix match as a range, not LIKE or GLOB: every character of a label stays
// literal, and `P.` <= prefix < `P/` ('/' follows '.') is exactly "starts with `P.`".
const SCAN_UNDER: &str = concat!(
    select_rows!(),
    " WHERE (prefix = ?1 OR (prefix >= ?2 AND prefix < ?3))",
    " AND (expires_at IS NULL OR expires_at > ?4)",
    " ORDER BY updated_at DESC, prefix, key"
);

// A namespace without descendants, through `waypoint_store_prefix_updated_idx`: rows stream
// in order straight from the index, with no sort of the whole namespace first.
const SCAN_EXACT: &str = concat!(
    select_rows!(),
    " WHERE prefix = ?1 AND (expires_at IS NULL OR expires_at > ?2)",
    " ORDER BY updated_at DESC, key"
);

// The namespaces below one (`?1 <= prefix < ?2`), at most ?3, one index seek each (a loose
// index scan): a namespace's rows stream in order from `waypoint_store_prefix_updated_idx`,
// and a few such streams merged stay in order where `SCAN_UNDER` sorts every row under the
// prefix first (5,000 rows in 10 namespaces: 8.4 ms to the first 100 rows, against 0.3 ms).
const NESTED: &str = "WITH RECURSIVE p(x) AS (
        SELECT min(prefix) FROM store WHERE prefix >= ?1 AND prefix < ?2
        UNION ALL
        SELECT (SELECT min(prefix) FROM store WHERE prefix > p.x AND prefix < ?2)
        FROM p WHERE p.x IS NOT NULL)
    SELECT x FROM p WHERE x IS NOT NULL LIMIT ?3";

/// Namespaces a scan merges at most (its own and those below it); with more it sorts.
const MERGED_AT_MOST: usize = 64;

const NAMESPACES: &str =
    "SELECT DISTINCT prefix FROM store WHERE expires_at IS NULL OR expires_at > ?1";

const TTL_OF_LIVE: &str = "SELECT ttl_minutes FROM store WHERE prefix = ?1 AND key = ?2 \
     AND ttl_minutes IS NOT NULL AND (expires_at IS NULL OR expires_at > ?3)";

const SET_EXPIRY: &str = "UPDATE store SET expires_at = ?3 WHERE prefix = ?1 AND key = ?2";

// An expired row not yet swept is gone for readers, so a put over it starts a new item.
const UPSERT: &str =
    "INSERT INTO store (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes)
     VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6)
     ON CONFLICT (prefix, key) DO UPDATE SET
         value = excluded.value,
         created_at = CASE
             WHEN store.expires_at IS NOT NULL AND store.expires_at <= excluded.updated_at
             THEN excluded.created_at
             ELSE store.created_at
         END,
         updated_at = excluded.updated_at,
         expires_at = excluded.expires_at,
         ttl_minutes = excluded.ttl_minutes";

const DELETE_ROW: &str = "DELETE FROM store WHERE prefix = ?1 AND key = ?2";

const DELETE_VECTORS: &str = "DELETE FROM waypoint_store_vectors WHERE prefix = ?1 AND key = ?2";

const INSERT_VECTOR: &str =
    "INSERT INTO waypoint_store_vectors (prefix, key, field_name, embedding)
     VALUES (?1, ?2, ?3, ?4)";

const ALL_VECTORS: &str = "SELECT prefix, key, field_name, embedding FROM waypoint_store_vectors
     ORDER BY prefix, key, field_name";

const VECTORS_OF: &str = "SELECT prefix, key, field_name, embedding FROM waypoint_store_vectors
     WHERE prefix = ?1 AND key = ?2 ORDER BY field_name";

const SWEEP: &str = "DELETE FROM store WHERE expires_at IS NOT NULL AND expires_at <= ?1
     RETURNING prefix, key";

const LOG_CHANGE: &str =
    "INSERT INTO waypoint_store_changes (prefix, key, changed_at) VALUES (?1, ?2, ?3)";

// The first entry young enough to keep: entries are in `seq` order, which is time order up to
// the clocks of the processes writing, so the walk stops at the first kept entry.
const FIRST_KEPT: &str =
    "SELECT seq FROM waypoint_store_changes WHERE changed_at >= ?1 ORDER BY seq LIMIT 1";

const LAST_CHANGE: &str = "SELECT max(seq) FROM waypoint_store_changes";

const TRIM: &str = "DELETE FROM waypoint_store_changes WHERE seq < ?1";

const MARK_TRIMMED: &str = "UPDATE waypoint_store_changes_trimmed
     SET through_seq = max(through_seq, ?1) WHERE id = 1";

const TRIMMED: &str = "SELECT through_seq FROM waypoint_store_changes_trimmed WHERE id = 1";

const CHANGES_AFTER: &str =
    "SELECT seq, prefix, key FROM waypoint_store_changes WHERE seq > ?1 ORDER BY seq";

/// How long the change log keeps an entry: a process that has not searched for longer reloads
/// its whole index instead of replaying the log.
const LOG_KEEPS: chrono::TimeDelta = chrono::TimeDelta::minutes(10);

/// Writes trim the change log each time its `seq` passes a multiple of this (sweeps always
/// do), so the log stays bounded without a sweeper.
const TRIM_EVERY: i64 = 1024;

/// Live rows by key, positionally, read in one snapshot.
pub(crate) fn get(conn: &Connection, keys: &[ItemKey], now: &str) -> Result<Vec<Option<Row>>> {
    // One statement is its own snapshot; several need a transaction around them.
    let tx = if keys.len() > 1 {
        Some(conn.unchecked_transaction().map_err(store_error)?)
    } else {
        None
    };
    let mut found = Vec::with_capacity(keys.len());
    {
        let mut stmt = conn.prepare_cached(GET).map_err(store_error)?;
        for key in keys {
            let prefix = key.namespace.joined();
            let mut rows = stmt
                .query(params![prefix, key.key, now])
                .map_err(store_error)?;
            found.push(match rows.next().map_err(store_error)? {
                Some(r) => Some(row(r)?),
                None => None,
            });
        }
    }
    if let Some(tx) = tx {
        tx.commit().map_err(store_error)?;
    }
    Ok(found)
}

/// Streams live rows of `scope` newest update first to `visit` until it says false.
pub(crate) fn scan(
    conn: &Connection,
    scope: &Scope,
    now: &str,
    visit: &mut dyn FnMut(Row) -> bool,
) -> Result<()> {
    // The namespaces found below the scope and their rows share one snapshot.
    let tx = match scope {
        Scope::All => None,
        Scope::Under { .. } => Some(conn.unchecked_transaction().map_err(store_error)?),
    };
    {
        let mut stmt;
        let rows = match scope {
            Scope::All => {
                stmt = conn.prepare_cached(SCAN_ALL).map_err(store_error)?;
                Some(stmt.query(params![now]))
            }
            Scope::Under { exact, from, to } => {
                let nested: Vec<String> = conn
                    .prepare_cached(NESTED)
                    .and_then(|mut s| {
                        let most = MERGED_AT_MOST as i64;
                        s.query_map(params![from, to, most], |r| r.get(0))?
                            .collect()
                    })
                    .map_err(store_error)?;
                if nested.is_empty() {
                    stmt = conn.prepare_cached(SCAN_EXACT).map_err(store_error)?;
                    Some(stmt.query(params![exact, now]))
                } else if nested.len() < MERGED_AT_MOST {
                    let prefixes: Vec<&str> = std::iter::once(exact.as_str())
                        .chain(nested.iter().map(String::as_str))
                        .collect();
                    merge(conn, &prefixes, now, visit)?;
                    None
                } else {
                    stmt = conn.prepare_cached(SCAN_UNDER).map_err(store_error)?;
                    Some(stmt.query(params![exact, from, to, now]))
                }
            }
        };
        if let Some(rows) = rows {
            let mut rows = rows.map_err(store_error)?;
            while let Some(r) = rows.next().map_err(store_error)? {
                if !visit(row(r)?) {
                    break;
                }
            }
        }
    }
    match tx {
        Some(tx) => tx.commit().map_err(store_error),
        None => Ok(()),
    }
}

/// Streams the live rows of the namespaces `prefixes` to `visit` in `SCAN_UNDER`'s order
/// (newest update first, then namespace, then key) until it says false: one `SCAN_EXACT`
/// stream per namespace, merged.
fn merge(
    conn: &Connection,
    prefixes: &[&str],
    now: &str,
    visit: &mut dyn FnMut(Row) -> bool,
) -> Result<()> {
    let mut statements = prefixes
        .iter()
        .map(|_| conn.prepare_cached(SCAN_EXACT))
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(store_error)?;
    let mut streams = Vec::with_capacity(prefixes.len());
    for (stmt, prefix) in statements.iter_mut().zip(prefixes) {
        streams.push(stmt.query(params![prefix, now]).map_err(store_error)?);
    }
    let mut heads = std::collections::BinaryHeap::with_capacity(streams.len());
    for (i, rows) in streams.iter_mut().enumerate() {
        heads.extend(Head::next(rows, i)?);
    }
    while let Some(head) = heads.pop() {
        if !visit(head.row?) {
            break;
        }
        heads.extend(Head::next(&mut streams[head.stream], head.stream)?);
    }
    Ok(())
}

/// The next row of one of [`merge`]'s streams, ordered as `SCAN_UNDER` orders rows: the
/// greatest is the newest update, then the first namespace and key (text, byte order).
struct Head {
    /// `updated_at`, `prefix` and `key` as stored (empty where not text).
    order: [Vec<u8>; 3],
    /// The row, or why it does not decode (reported when its turn comes, as a scan would).
    row: Result<Row>,
    /// The stream it came from.
    stream: usize,
}

impl Head {
    /// The next row of `rows`, stream `stream`, if any.
    fn next(rows: &mut rusqlite::Rows<'_>, stream: usize) -> Result<Option<Head>> {
        let Some(r) = rows.next().map_err(store_error)? else {
            return Ok(None);
        };
        let text = |i: usize| match r.get_ref(i) {
            Ok(ValueRef::Text(bytes)) => bytes.to_vec(),
            _ => Vec::new(),
        };
        Ok(Some(Head {
            order: [text(4), text(0), text(1)],
            row: row(r),
            stream,
        }))
    }
}

impl Ord for Head {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let [at, prefix, key] = &self.order;
        let [other_at, other_prefix, other_key] = &other.order;
        at.cmp(other_at)
            .then_with(|| other_prefix.cmp(prefix))
            .then_with(|| other_key.cmp(key))
    }
}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.order == other.order
    }
}

impl Eq for Head {}

/// Restarts the TTL of those of `keys` that have one and are live.
pub(crate) fn refresh(conn: &mut Connection, keys: &[ItemKey], now: DateTime<Utc>) -> Result<()> {
    let now_text = timestamp(now);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(store_error)?;
    {
        let mut ttl_of = tx.prepare_cached(TTL_OF_LIVE).map_err(store_error)?;
        let mut set = tx.prepare_cached(SET_EXPIRY).map_err(store_error)?;
        for key in keys {
            let prefix = key.namespace.joined();
            let ttl: Option<f64> = ttl_of
                .query_row(params![prefix, key.key, now_text], |r| r.get(0))
                .optional()
                .map_err(store_error)?;
            if let Some(minutes) = ttl {
                set.execute(params![prefix, key.key, timestamp(expiry(now, minutes))])
                    .map_err(store_error)?;
            }
        }
    }
    tx.commit().map_err(store_error)
}

/// Every namespace holding a live row.
pub(crate) fn namespaces(conn: &Connection, now: &str) -> Result<Vec<Namespace>> {
    let mut stmt = conn.prepare_cached(NAMESPACES).map_err(store_error)?;
    let mut rows = stmt.query(params![now]).map_err(store_error)?;
    let mut found = Vec::new();
    while let Some(r) = rows.next().map_err(store_error)? {
        let prefix: String = r.get(0).map_err(store_error)?;
        found.push(Namespace::from_joined(&prefix));
    }
    Ok(found)
}

/// Applies `writes` in one transaction: all of them, or none when one fails. With `log`, each
/// put that sets vectors and each delete goes to the change log in the same transaction.
pub(crate) fn write(
    conn: &mut Connection,
    writes: Vec<Write>,
    now: DateTime<Utc>,
    log: bool,
) -> Result<()> {
    let now_text = timestamp(now);
    // Dropped without commit on any error below: rusqlite rolls the transaction back.
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(store_error)?;
    // The `seq` of the first change this write logs.
    let mut first_logged = None;
    {
        let mut upsert = tx.prepare_cached(UPSERT).map_err(store_error)?;
        let mut delete_vectors = tx.prepare_cached(DELETE_VECTORS).map_err(store_error)?;
        let mut logged = tx.prepare_cached(LOG_CHANGE).map_err(store_error)?;
        for write in writes {
            match write {
                Write::Put(put) => {
                    let prefix = put.key.namespace.joined();
                    let value = serde_json::to_string(&put.value)
                        .map_err(|e| Error::InvalidValue(e.to_string()))?;
                    let expires_at = put.ttl_minutes.map(|m| timestamp(expiry(now, m)));
                    upsert
                        .execute(params![
                            prefix,
                            put.key.key,
                            value,
                            now_text,
                            expires_at,
                            put.ttl_minutes
                        ])
                        .map_err(store_error)?;
                    match &put.texts {
                        Some(texts) => {
                            super::lexical::set_texts(&tx, &prefix, &put.key.key, texts)?
                        }
                        None => super::lexical::remove(&tx, &prefix, &put.key.key)?,
                    }
                    if let Some(vectors) = put.vectors {
                        if log {
                            first_logged.get_or_insert(
                                logged
                                    .insert(params![prefix, put.key.key, now_text])
                                    .map_err(store_error)?,
                            );
                        }
                        delete_vectors
                            .execute(params![prefix, put.key.key])
                            .map_err(store_error)?;
                        if !vectors.is_empty() {
                            let mut insert =
                                tx.prepare_cached(INSERT_VECTOR).map_err(store_error)?;
                            for field in vectors {
                                insert
                                    .execute(params![
                                        prefix,
                                        put.key.key,
                                        field.field,
                                        encode_vector(&field.vector)
                                    ])
                                    .map_err(store_error)?;
                            }
                        }
                    }
                }
                Write::Delete(key) => {
                    let prefix = key.namespace.joined();
                    tx.prepare_cached(DELETE_ROW)
                        .and_then(|mut s| s.execute(params![prefix, key.key]))
                        .map_err(store_error)?;
                    delete_vectors
                        .execute(params![prefix, key.key])
                        .map_err(store_error)?;
                    super::lexical::remove(&tx, &prefix, &key.key)?;
                    if log {
                        first_logged.get_or_insert(
                            logged
                                .insert(params![prefix, key.key, now_text])
                                .map_err(store_error)?,
                        );
                    }
                }
            }
        }
    }
    if let Some(first) = first_logged {
        let last = tx.last_insert_rowid();
        if last / TRIM_EVERY > (first - 1) / TRIM_EVERY {
            trim_log(&tx, now)?;
        }
    }
    tx.commit().map_err(store_error)
}

/// Stored vectors of `keys`, or of every item, grouped per item (items without any omitted).
pub(crate) fn vectors(conn: &mut Connection, keys: Option<&[ItemKey]>) -> Result<Vec<ItemVectors>> {
    let tx = conn.transaction().map_err(store_error)?;
    let mut grouped = Grouped::default();
    {
        match keys {
            None => {
                let mut stmt = tx.prepare_cached(ALL_VECTORS).map_err(store_error)?;
                let mut rows = stmt.query([]).map_err(store_error)?;
                while let Some(r) = rows.next().map_err(store_error)? {
                    grouped.push(r)?;
                }
            }
            Some(keys) => {
                let mut stmt = tx.prepare_cached(VECTORS_OF).map_err(store_error)?;
                for key in keys {
                    let mut rows = stmt
                        .query(params![key.namespace.joined(), key.key])
                        .map_err(store_error)?;
                    while let Some(r) = rows.next().map_err(store_error)? {
                        grouped.push(r)?;
                    }
                }
            }
        }
    }
    tx.commit().map_err(store_error)?;
    Ok(grouped.finish())
}

/// Vector rows (ordered by item) gathered into one entry per item.
#[derive(Default)]
struct Grouped {
    done: Vec<ItemVectors>,
    current: Option<(String, String, Vec<FieldVector>)>,
}

impl Grouped {
    /// Adds a row of `prefix, key, field_name, embedding`.
    fn push(&mut self, r: &rusqlite::Row<'_>) -> Result<()> {
        let prefix: String = r.get(0).map_err(store_error)?;
        let key: String = r.get(1).map_err(store_error)?;
        let field: String = r.get(2).map_err(store_error)?;
        let vector = match r.get_ref(3).map_err(store_error)? {
            ValueRef::Blob(blob) => decode_vector(blob).ok_or_else(|| {
                corrupt(
                    &prefix,
                    &key,
                    &format!(
                        "the vector of field `{field}` has {} bytes, not a whole number of f32s",
                        blob.len()
                    ),
                )
            })?,
            other => {
                return Err(corrupt(
                    &prefix,
                    &key,
                    &format!(
                        "the vector of field `{field}` is {:?}, not a BLOB",
                        other.data_type()
                    ),
                ));
            }
        };
        let same = self
            .current
            .as_ref()
            .is_some_and(|(p, k, _)| *p == prefix && *k == key);
        if !same {
            self.flush();
            self.current = Some((prefix, key, Vec::new()));
        }
        if let Some((_, _, vectors)) = &mut self.current {
            vectors.push(FieldVector { field, vector });
        }
        Ok(())
    }

    fn flush(&mut self) {
        if let Some((prefix, key, vectors)) = self.current.take() {
            self.done.push(ItemVectors {
                key: ItemKey::new(Namespace::from_joined(&prefix), key),
                vectors,
            });
        }
    }

    fn finish(mut self) -> Vec<ItemVectors> {
        self.flush();
        self.done
    }
}

/// Deletes every expired row and its vectors; returns their keys. With `log`, logs them and
/// trims the change log.
pub(crate) fn sweep(conn: &mut Connection, now: DateTime<Utc>, log: bool) -> Result<Vec<ItemKey>> {
    let now_text = timestamp(now);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(store_error)?;
    let mut removed = Vec::new();
    {
        let mut stmt = tx.prepare_cached(SWEEP).map_err(store_error)?;
        let mut rows = stmt.query(params![now_text]).map_err(store_error)?;
        while let Some(r) = rows.next().map_err(store_error)? {
            let prefix: String = r.get(0).map_err(store_error)?;
            let key: String = r.get(1).map_err(store_error)?;
            removed.push((prefix, key));
        }
    }
    {
        let mut delete_vectors = tx.prepare_cached(DELETE_VECTORS).map_err(store_error)?;
        let mut logged = tx.prepare_cached(LOG_CHANGE).map_err(store_error)?;
        for (prefix, key) in &removed {
            delete_vectors
                .execute(params![prefix, key])
                .map_err(store_error)?;
            super::lexical::remove(&tx, prefix, key)?;
            if log {
                logged
                    .execute(params![prefix, key, now_text])
                    .map_err(store_error)?;
            }
        }
    }
    if log {
        trim_log(&tx, now)?;
    }
    tx.commit().map_err(store_error)?;
    Ok(removed
        .into_iter()
        .map(|(prefix, key)| ItemKey::new(Namespace::from_joined(&prefix), key))
        .collect())
}

/// Deletes change-log entries older than [`LOG_KEEPS`] and records through which `seq`.
fn trim_log(tx: &Connection, now: DateTime<Utc>) -> Result<()> {
    let cutoff = timestamp(now - LOG_KEEPS);
    let kept: Option<i64> = tx
        .prepare_cached(FIRST_KEPT)
        .and_then(|mut s| s.query_row([&cutoff], |r| r.get(0)).optional())
        .map_err(store_error)?;
    let bound = match kept {
        Some(seq) => seq,
        None => {
            let last: Option<i64> = tx
                .prepare_cached(LAST_CHANGE)
                .and_then(|mut s| s.query_row([], |r| r.get(0)))
                .map_err(store_error)?;
            match last {
                Some(last) => last + 1,
                None => return Ok(()),
            }
        }
    };
    let removed = tx
        .prepare_cached(TRIM)
        .and_then(|mut s| s.execute([bound]))
        .map_err(store_error)?;
    if removed > 0 {
        tx.prepare_cached(MARK_TRIMMED)
            .and_then(|mut s| s.execute([bound - 1]))
            .map_err(store_error)?;
    }
    Ok(())
}

/// The change log after `after` from one snapshot: the newest `seq` logged (or trimmed), the
/// keys changed since `after` (none when `after` is `None`), and through which `seq` the log
/// was trimmed.
pub(crate) fn changes(
    conn: &mut Connection,
    after: Option<i64>,
) -> Result<(i64, Vec<ItemKey>, i64)> {
    let tx = conn.transaction().map_err(store_error)?;
    let trimmed: i64 = tx
        .prepare_cached(TRIMMED)
        .and_then(|mut s| s.query_row([], |r| r.get(0)).optional())
        .map_err(store_error)?
        .unwrap_or(0);
    let mut head: i64 = tx
        .prepare_cached(LAST_CHANGE)
        .and_then(|mut s| s.query_row([], |r| r.get::<_, Option<i64>>(0)))
        .map_err(store_error)?
        .unwrap_or(0)
        .max(trimmed);
    let mut keys = Vec::new();
    if let Some(after) = after {
        let mut stmt = tx.prepare_cached(CHANGES_AFTER).map_err(store_error)?;
        let mut rows = stmt.query([after]).map_err(store_error)?;
        while let Some(r) = rows.next().map_err(store_error)? {
            head = head.max(r.get(0).map_err(store_error)?);
            let prefix: String = r.get(1).map_err(store_error)?;
            let key: String = r.get(2).map_err(store_error)?;
            keys.push(ItemKey::new(Namespace::from_joined(&prefix), key));
        }
    }
    drop(tx);
    Ok((head, keys, trimmed))
}

/// The saved index snapshot, if any (a database set up before the table existed has none).
pub(crate) fn load_snapshot(conn: &mut Connection) -> Result<Option<Vec<u8>>> {
    conn.prepare_cached("SELECT snapshot FROM waypoint_store_index_snapshot WHERE id = 1")
        .and_then(|mut s| s.query_row([], |r| r.get(0)).optional())
        .map_err(store_error)
}

/// Replaces the saved index snapshot.
pub(crate) fn save_snapshot(conn: &mut Connection, snapshot: &[u8], now: &str) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO waypoint_store_index_snapshot (id, saved_at, snapshot) VALUES (1, ?1, ?2)
         ON CONFLICT (id) DO UPDATE SET saved_at = excluded.saved_at, snapshot = excluded.snapshot",
    )
    .and_then(|mut s| s.execute(params![now, snapshot]))
    .map_err(store_error)?;
    Ok(())
}
