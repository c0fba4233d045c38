//! All SQL. Every operation is one statement: atomic on its own, one round trip (a scan is one
//! statement per page).
//!
//! Namespaces are stored joined by `.` (LangGraph's `prefix`). A whole-label prefix `p`
//! matches `prefix = p` or `p.` < `prefix` < `p/` byte-wise (`/` is the byte after `.`),
//! compared with the `text_pattern_ops` operators (`~>=~`, `~<~`) so LangGraph's
//! `store_prefix_idx` serves it whatever the database's collation. No SQL is built from
//! labels, keys or values: they are always bound.

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use futures::TryStreamExt;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::Query;
use sqlx::{PgConnection, Postgres, Row as _};

use super::convert::{Timestamp, field_vector, pg_error, row_at, scanned_row};
use waypoint_store::raw::encode_vector;
use waypoint_store::raw::{FieldVector, ItemVectors, Row};
use waypoint_store::{ItemKey, Namespace, Result};

/// Columns of an item after its key, as [`row_at`] reads them.
pub(super) const ITEM_COLUMNS: &str =
    "s.value::text, s.created_at, s.updated_at, s.ttl_minutes::float8";

/// `now + ttl` for a TTL column `ttl`; absurd TTLs are capped at 10^11 minutes (about 190,000
/// years), inside PostgreSQL's range, where they mean "practically never" as in memory.
macro_rules! expiry {
    ($now:literal, $ttl:literal) => {
        concat!($now, " + LEAST(", $ttl, ", 1e11) * interval '1 minute'")
    };
}

/// A query, prepared on the server (and cached per connection) unless `persistent` is off.
fn query(sql: &str, persistent: bool) -> Query<'_, Postgres, PgArguments> {
    sqlx::query(sql).persistent(persistent)
}

/// Parallel `(prefix, key)` arrays of `keys`.
fn key_arrays<'a>(keys: impl Iterator<Item = &'a ItemKey>) -> (Vec<String>, Vec<&'a str>) {
    keys.map(|k| (k.namespace.joined(), k.key.as_str())).unzip()
}

/// Live rows of `keys`, positionally.
pub(crate) async fn get(
    conn: &mut PgConnection,
    keys: &[ItemKey],
    now: Timestamp,
    persistent: bool,
) -> Result<Vec<Option<Row>>> {
    static SQL: OnceLock<[String; 2]> = OnceLock::new();
    let [one, many] = SQL.get_or_init(|| {
        [
            // One key, the common case, has a statement of its own: the server plans the
            // array form anew on every call when it holds one key (its generic plan, sized
            // for ten, looks costlier), which takes longer than running it.
            format!(
                "SELECT 1::int8, {ITEM_COLUMNS} FROM store s
                WHERE s.prefix = $1 AND s.key = $2 AND (s.expires_at IS NULL OR s.expires_at > $3)"
            ),
            format!(
                "SELECT k.i, {ITEM_COLUMNS}
                FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(prefix, key, i)
                JOIN store s ON s.prefix = k.prefix AND s.key = k.key
                WHERE s.expires_at IS NULL OR s.expires_at > $3"
            ),
        ]
    });
    let q = match keys {
        [key] => query(one, persistent)
            .bind(key.namespace.joined())
            .bind(key.key.as_str()),
        _ => {
            let (prefixes, names) = key_arrays(keys.iter());
            query(many, persistent).bind(prefixes).bind(names)
        }
    };
    let rows = q.bind(now).fetch_all(conn).await.map_err(pg_error)?;
    let mut found: Vec<Option<Row>> = vec![None; keys.len()];
    for row in rows {
        let i: i64 = row.try_get(0).map_err(pg_error)?;
        let slot = usize::try_from(i - 1).ok().filter(|&i| i < keys.len());
        if let Some(slot) = slot {
            found[slot] = Some(row_at(&row, 1, keys[slot].clone())?);
        }
    }
    Ok(found)
}

/// Where a scan resumes: after this row in `updated_at DESC, prefix, key` order.
#[derive(Clone, Debug)]
pub(crate) struct Cursor {
    updated_at: Timestamp,
    prefix: String,
    key: String,
}

impl Cursor {
    /// The position just after `row`.
    pub(crate) fn after(row: &Row) -> Self {
        Cursor {
            updated_at: Timestamp::new(row.item.updated_at),
            prefix: row.item.namespace.joined(),
            key: row.item.key.clone(),
        }
    }
}

/// One page of live rows under `prefix` (whole labels; empty = all) whose value contains
/// `contains` (`{}` for all), newest update first, after `cursor`, streamed to `visit` until
/// it says false. Returns how many rows the page held and whether `visit` wants more.
pub(crate) async fn scan_page(
    conn: &mut PgConnection,
    (prefix, contains): (&Namespace, &serde_json::Value),
    now: Timestamp,
    cursor: &mut Option<Cursor>,
    limit: i64,
    persistent: bool,
    visit: &mut (dyn FnMut(Row) -> bool + Send),
) -> Result<(i64, bool)> {
    static SQL: OnceLock<[String; 4]> = OnceLock::new();
    let texts = SQL.get_or_init(|| {
        const ORDER: &str = "ORDER BY updated_at DESC, prefix COLLATE \"C\", key COLLATE \"C\"";
        // `resume` is the number of the first cursor parameter (its time, prefix, key).
        // `contains` is bound last: `$3` at the root, one later under a prefix, three later
        // after a cursor.
        let select = |condition: &str, resume: Option<u8>, contains: u8| {
            let mut sql = format!(
                "SELECT s.prefix, s.key, {ITEM_COLUMNS} FROM store s
                WHERE (s.expires_at IS NULL OR s.expires_at > $1){condition}
                AND s.value @> ${contains}::jsonb"
            );
            if let Some(at) = resume {
                let (p, k) = (at + 1, at + 2);
                // `<=` alone bounds the index range; the rest filters within equal times.
                sql += &format!(
                    " AND s.updated_at <= ${at} AND (s.updated_at < ${at}
                    OR s.prefix COLLATE \"C\" > ${p} OR (s.prefix = ${p} AND s.key COLLATE \"C\" > ${k}))"
                );
            }
            sql
        };
        let root = |resume: bool| {
            let contains = if resume { 6 } else { 3 };
            format!("{} {ORDER} LIMIT $2", select("", resume.then_some(3), contains))
        };
        // The namespace itself and its descendants, merged: the first part walks
        // `waypoint_store_prefix_updated_at_idx` in order and stops at the limit however
        // many newer items other namespaces hold; the server picks a plan for the second.
        let under = |resume: bool| {
            let contains = if resume { 7 } else { 4 };
            // Within one namespace the prefix is constant: ordering by it too would hide
            // that the index is already in order.
            format!(
                "SELECT * FROM (({} ORDER BY updated_at DESC, key COLLATE \"C\" LIMIT $2)
                UNION ALL ({} {ORDER} LIMIT $2)) AS u {ORDER} LIMIT $2",
                select(" AND s.prefix = $3", resume.then_some(4), contains),
                select(
                    " AND s.prefix ~>=~ ($3 || '.') AND s.prefix ~<~ ($3 || '/')",
                    resume.then_some(4),
                    contains
                ),
            )
        };
        [root(false), root(true), under(false), under(true)]
    });
    let under = !prefix.is_empty();
    let sql = &texts[usize::from(under) * 2 + usize::from(cursor.is_some())];
    // Under a prefix, the server must plan each page with the prefix in hand: a generic plan
    // cannot tell a namespace with a few descendants from one with millions, and walking
    // every newer item for the descendants the first cost milliseconds per page in tests.
    // An unnamed statement is planned for its parameters (one more round trip).
    let mut q = query(sql, persistent && !under).bind(now).bind(limit);
    if under {
        q = q.bind(prefix.joined());
    }
    if let Some(c) = cursor.as_ref() {
        q = q
            .bind(c.updated_at)
            .bind(c.prefix.clone())
            .bind(c.key.clone());
    }
    let mut rows = q.bind(contains).fetch(conn);
    let mut seen = 0;
    while let Some(row) = rows.try_next().await.map_err(pg_error)? {
        seen += 1;
        let row = scanned_row(&row)?;
        *cursor = Some(Cursor::after(&row));
        if !visit(row) {
            return Ok((seen, false));
        }
    }
    Ok((seen, true))
}

/// Restarts the TTL of those of `keys` that have one and are live.
pub(crate) async fn refresh(
    conn: &mut PgConnection,
    keys: &[ItemKey],
    now: Timestamp,
    persistent: bool,
) -> Result<()> {
    // One key has a statement of its own, as in `get`.
    const ONE: &str = concat!(
        "UPDATE store s SET expires_at = ",
        expiry!("$3", "s.ttl_minutes"),
        " WHERE s.prefix = $1 AND s.key = $2 AND s.ttl_minutes IS NOT NULL
            AND (s.expires_at IS NULL OR s.expires_at > $3)"
    );
    const MANY: &str = concat!(
        "UPDATE store s SET expires_at = ",
        expiry!("$3", "s.ttl_minutes"),
        " FROM unnest($1::text[], $2::text[]) AS k(prefix, key)
        WHERE s.prefix = k.prefix AND s.key = k.key AND s.ttl_minutes IS NOT NULL
            AND (s.expires_at IS NULL OR s.expires_at > $3)"
    );
    let q = match keys {
        [key] => query(ONE, persistent)
            .bind(key.namespace.joined())
            .bind(key.key.as_str()),
        _ => {
            // Rows are locked in key order, so two refreshes of overlapping keys cannot
            // deadlock.
            let mut sorted: Vec<&ItemKey> = keys.iter().collect();
            sorted.sort();
            sorted.dedup();
            let (prefixes, names) = key_arrays(sorted.into_iter());
            query(MANY, persistent).bind(prefixes).bind(names)
        }
    };
    q.bind(now).execute(conn).await.map_err(pg_error).map(drop)
}

/// Every namespace holding a live row: a loose index scan (one probe of the primary key per
/// namespace) rather than reading every row.
pub(crate) async fn namespaces(
    conn: &mut PgConnection,
    now: Timestamp,
    persistent: bool,
) -> Result<Vec<Namespace>> {
    const SQL: &str = "WITH RECURSIVE p(prefix) AS (
        (SELECT prefix FROM store WHERE expires_at IS NULL OR expires_at > $1
            ORDER BY prefix LIMIT 1)
        UNION ALL
        SELECT (SELECT s.prefix FROM store s
            WHERE s.prefix > p.prefix AND (s.expires_at IS NULL OR s.expires_at > $1)
            ORDER BY s.prefix LIMIT 1)
        FROM p WHERE p.prefix IS NOT NULL
    )
    SELECT prefix FROM p WHERE prefix IS NOT NULL";
    let prefixes: Vec<String> = sqlx::query_scalar(SQL)
        .persistent(persistent)
        .bind(now)
        .fetch_all(conn)
        .await
        .map_err(pg_error)?;
    Ok(prefixes.iter().map(|p| Namespace::from_joined(p)).collect())
}

/// The write statement for a combination of parts: deletes, upserts, vector replacements
/// (`owners`), new vectors. One statement, so one round trip and atomic. The trigger on
/// `store` logs every row it changes.
fn write_sql(deletes: bool, upserts: bool, owners: bool, vectors: bool, lexical: bool) -> String {
    let mut parts = Vec::new();
    // $1 is `now`; arrays follow in the order the parts appear.
    let mut n = 1;
    let mut next = || {
        n += 1;
        n
    };
    if deletes {
        let (p, k) = (next(), next());
        parts.push(format!(
            "del AS (DELETE FROM store s USING unnest(${p}::text[], ${k}::text[]) AS d(prefix, key)
            WHERE s.prefix = d.prefix AND s.key = d.key)"
        ));
    }
    if upserts {
        let (p, k, v, t, e) = (next(), next(), next(), next(), next());
        // An expired row not yet swept is gone for readers: a put recreates it. A put that
        // writes the item's vectors marks them as made from this value; one that does not
        // (a store without an index) leaves the item to be embedded by one that has.
        parts.push(format!(
            "up AS (INSERT INTO store AS s (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes, waypoint_embedded_at)
            SELECT u.prefix, u.key, u.value::jsonb, $1, $1, {}, u.ttl, CASE WHEN u.embedded THEN $1::timestamptz END
            FROM unnest(${p}::text[], ${k}::text[], ${v}::text[], ${t}::float8[], ${e}::bool[])
                AS u(prefix, key, value, ttl, embedded)
            ON CONFLICT (prefix, key) DO UPDATE SET value = EXCLUDED.value,
                created_at = CASE WHEN s.expires_at IS NULL OR s.expires_at > $1
                    THEN s.created_at ELSE EXCLUDED.created_at END,
                updated_at = EXCLUDED.updated_at, expires_at = EXCLUDED.expires_at,
                ttl_minutes = EXCLUDED.ttl_minutes,
                waypoint_embedded_at = EXCLUDED.waypoint_embedded_at)",
            expiry!("$1", "u.ttl")
        ));
    }
    if owners {
        let (op, ok) = (next(), next());
        let new = vectors.then(|| (next(), next(), next(), next()));
        let owners = format!("unnest(${op}::text[], ${ok}::text[])");
        let stale = replace_vectors_sql(&owners, new, false, &mut parts);
        parts.push(stale);
    }
    if lexical {
        let (p, k, b) = (next(), next(), next());
        let source =
            format!("unnest(${p}::text[], ${k}::text[], ${b}::text[]) AS t(prefix, key, body)");
        parts.push(upsert_cte("lex", &source, "$1::timestamptz"));
    }
    if parts.is_empty() {
        String::from("SELECT 1")
    } else {
        format!("WITH {} SELECT 1", parts.join(",\n"))
    }
}

/// The CTE deleting the old vectors of the items `owners` (a row source of `prefix, key`)
/// that their new set lacks; the new set, when there is one, is upserted by a CTE pushed to
/// `parts` from the parameters `(prefix, key, field, embedding)`, only for items of `owners`
/// when `only_owners` (else every one given). Sub-statements of one statement cannot touch a
/// row twice, and their order is unspecified: old fields the new set lacks are deleted, the
/// rest upserted.
fn replace_vectors_sql(
    owners: &str,
    new: Option<(i32, i32, i32, i32)>,
    only_owners: bool,
    parts: &mut Vec<String>,
) -> String {
    let keep = match new {
        Some((p, k, f, e)) => {
            let filter = if only_owners {
                format!(
                    " WHERE EXISTS (SELECT 1 FROM {owners} AS o(prefix, key)
                    WHERE o.prefix = n.prefix AND o.key = n.key)"
                )
            } else {
                String::new()
            };
            parts.push(format!(
                "vec AS (INSERT INTO waypoint_store_vectors (prefix, key, field_name, embedding)
                SELECT n.* FROM unnest(${p}::text[], ${k}::text[], ${f}::text[], ${e}::bytea[])
                    AS n(prefix, key, field, embedding){filter}
                ON CONFLICT (prefix, key, field_name) DO UPDATE SET embedding = EXCLUDED.embedding)"
            ));
            format!(
                " AND NOT EXISTS (SELECT 1 FROM unnest(${p}::text[], ${k}::text[], ${f}::text[]) AS n(prefix, key, field)
                WHERE n.prefix = v.prefix AND n.key = v.key AND n.field = v.field_name)"
            )
        }
        None => String::new(),
    };
    format!(
        "stale AS (DELETE FROM waypoint_store_vectors v USING {owners} AS o(prefix, key)
        WHERE v.prefix = o.prefix AND v.key = o.key{keep})"
    )
}

/// One write, ready for the statement: a delete, or a put with its value's JSON text.
pub(crate) enum Prepared<'a> {
    /// Remove the item (its vectors cascade).
    Delete,
    /// Insert or update the item.
    Put {
        /// The value as JSON text.
        text: String,
        /// TTL in minutes.
        ttl_minutes: Option<f64>,
        /// The item's new set of vectors, when the writer has an index.
        vectors: Option<&'a [FieldVector]>,
        /// The text of the item's new `tsvector` (`lexical::body`), when the writer keeps one.
        lexical: Option<String>,
    },
}

/// The vectors of `vectors` to store: a field named twice (two paths yielding one name) keeps
/// its last vector, since one statement cannot write a row twice.
pub(super) fn last_of_each_field(vectors: &[FieldVector]) -> impl Iterator<Item = &FieldVector> {
    let last: HashMap<&str, &FieldVector> = vectors.iter().map(|f| (f.field.as_str(), f)).collect();
    vectors.iter().filter(move |f| {
        last.get(f.field.as_str())
            .is_some_and(|l| std::ptr::eq(*l, *f))
    })
}

/// Applies `writes` in one statement, rows in key order, so concurrent writers lock rows in
/// one order.
pub(crate) async fn write(
    conn: &mut PgConnection,
    writes: &BTreeMap<&ItemKey, Prepared<'_>>,
    now: Timestamp,
    persistent: bool,
) -> Result<()> {
    static SQL: OnceLock<Vec<String>> = OnceLock::new();
    let texts = SQL.get_or_init(|| {
        (0..32usize)
            .map(|m| write_sql(m & 1 != 0, m & 2 != 0, m & 4 != 0, m & 8 != 0, m & 16 != 0))
            .collect()
    });
    let (mut del_p, mut del_k) = (Vec::new(), Vec::new());
    let (mut up_p, mut up_k, mut up_v, mut up_t) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut up_e = Vec::new();
    let (mut own_p, mut own_k) = (Vec::new(), Vec::new());
    let (mut vec_p, mut vec_k, mut vec_f, mut vec_e) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut lex_p, mut lex_k, mut lex_b) = (Vec::new(), Vec::new(), Vec::new());
    for (key, write) in writes {
        let prefix = key.namespace.joined();
        match write {
            Prepared::Delete => {
                del_p.push(prefix);
                del_k.push(key.key.as_str());
            }
            Prepared::Put {
                text,
                ttl_minutes,
                vectors,
                lexical,
            } => {
                if let Some(body) = lexical {
                    lex_p.push(prefix.clone());
                    lex_k.push(key.key.as_str());
                    lex_b.push(body.as_str());
                }
                if let Some(vectors) = vectors {
                    own_p.push(prefix.clone());
                    own_k.push(key.key.as_str());
                    for field in last_of_each_field(vectors) {
                        vec_p.push(prefix.clone());
                        vec_k.push(key.key.as_str());
                        vec_f.push(field.field.as_str());
                        vec_e.push(encode_vector(&field.vector));
                    }
                }
                up_p.push(prefix);
                up_k.push(key.key.as_str());
                up_v.push(text.as_str());
                up_t.push(*ttl_minutes);
                up_e.push(vectors.is_some());
            }
        }
    }
    let parts = [
        !del_p.is_empty(),
        !up_p.is_empty(),
        !own_p.is_empty(),
        !vec_p.is_empty(),
        !lex_p.is_empty(),
    ];
    let mask = parts
        .iter()
        .enumerate()
        .fold(0, |m, (bit, &on)| m | (usize::from(on) << bit));
    let mut q = query(&texts[mask], persistent).bind(now);
    if parts[0] {
        q = q.bind(del_p).bind(del_k);
    }
    if parts[1] {
        q = q.bind(up_p).bind(up_k).bind(up_v).bind(up_t).bind(up_e);
    }
    if parts[2] {
        q = q.bind(own_p).bind(own_k);
    }
    if parts[3] {
        q = q.bind(vec_p).bind(vec_k).bind(vec_f).bind(vec_e);
    }
    if parts[4] {
        q = q.bind(lex_p).bind(lex_k).bind(lex_b);
    }
    q.execute(conn).await.map_err(pg_error).map(drop)
}

/// Stored vectors of `keys` (every item with `None`), grouped per item; only those made from
/// the item's current value: an item another writer changed since has none until it is
/// embedded again.
pub(crate) async fn vectors(
    conn: &mut PgConnection,
    keys: Option<&[ItemKey]>,
    persistent: bool,
) -> Result<Vec<ItemVectors>> {
    const ALL: &str = "SELECT v.prefix, v.key, v.field_name, v.embedding
        FROM waypoint_store_vectors v
        JOIN store s ON s.prefix = v.prefix AND s.key = v.key
        WHERE s.waypoint_embedded_at = s.updated_at";
    const SOME: &str = "SELECT v.prefix, v.key, v.field_name, v.embedding
        FROM unnest($1::text[], $2::text[]) AS k(prefix, key)
        JOIN store s ON s.prefix = k.prefix AND s.key = k.key
        JOIN waypoint_store_vectors v ON v.prefix = k.prefix AND v.key = k.key
        WHERE s.waypoint_embedded_at = s.updated_at";
    let mut grouped: HashMap<(String, String), Vec<FieldVector>> = HashMap::new();
    let mut add = |row: PgRow| -> Result<()> {
        let prefix: String = row.try_get(0).map_err(pg_error)?;
        let key: String = row.try_get(1).map_err(pg_error)?;
        let field: String = row.try_get(2).map_err(pg_error)?;
        let bytes: &[u8] = row.try_get(3).map_err(pg_error)?;
        let item = ItemKey::new(Namespace::from_joined(&prefix), key.clone());
        let vector = field_vector(&item, field, bytes)?;
        grouped.entry((prefix, key)).or_default().push(vector);
        Ok(())
    };
    match keys {
        None => {
            // The one statement here that reads whole tables: the session's
            // `enable_seqscan = off` (for the keyed statements) is lifted for it.
            let mut tx = sqlx::Connection::begin(conn).await.map_err(pg_error)?;
            query("SET LOCAL enable_seqscan = on", persistent)
                .execute(&mut *tx)
                .await
                .map_err(pg_error)?;
            // Streamed: only the decoded vectors are held, never the raw rows.
            let mut rows = query(ALL, persistent).fetch(&mut *tx);
            while let Some(row) = rows.try_next().await.map_err(pg_error)? {
                add(row)?;
            }
            drop(rows);
            tx.commit().await.map_err(pg_error)?;
        }
        Some(keys) => {
            let (prefixes, names) = key_arrays(keys.iter());
            let mut rows = query(SOME, persistent)
                .bind(prefixes)
                .bind(names)
                .fetch(conn);
            while let Some(row) = rows.try_next().await.map_err(pg_error)? {
                add(row)?;
            }
        }
    }
    Ok(grouped
        .into_iter()
        .map(|((prefix, key), vectors)| ItemVectors {
            key: ItemKey::new(Namespace::from_joined(&prefix), key),
            vectors,
        })
        .collect())
}

/// The CTEs trimming the change log to its last 10 minutes before `$1` and raising the
/// trimmed marker to the newest transaction trimmed.
const TRIM: &str = "trimmed AS (
        DELETE FROM waypoint_store_changes WHERE changed_at < $1 - interval '10 minutes'
        RETURNING xid),
    marked AS (
        UPDATE waypoint_store_changes_trimmed
        SET through_xid = GREATEST(through_xid, (SELECT max(xid) FROM trimmed))
        WHERE id = 1 AND EXISTS (SELECT 1 FROM trimmed))";

/// Deletes expired rows (their vectors cascade; the trigger logs them) and trims the change
/// log to its last 10 minutes; returns the keys removed. A process that has not searched for
/// longer than that reloads every vector instead of replaying the log.
pub(crate) async fn sweep(
    conn: &mut PgConnection,
    now: Timestamp,
    persistent: bool,
) -> Result<Vec<ItemKey>> {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| {
        format!(
            "WITH gone AS (
                DELETE FROM store WHERE expires_at IS NOT NULL AND expires_at <= $1
                RETURNING prefix, key),
            {TRIM}
            SELECT prefix, key FROM gone"
        )
    });
    let gone: Vec<(String, String)> = sqlx::query_as(sql)
        .persistent(persistent)
        .bind(now)
        .fetch_all(conn)
        .await
        .map_err(pg_error)?;
    Ok(gone
        .into_iter()
        .map(|(prefix, key)| ItemKey::new(Namespace::from_joined(&prefix), key))
        .collect())
}

/// Trims the change log to its last 10 minutes before `now`.
pub(crate) async fn trim(conn: &mut PgConnection, now: Timestamp, persistent: bool) -> Result<()> {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| format!("WITH {TRIM} SELECT 1"));
    query(sql, persistent)
        .bind(now)
        .execute(conn)
        .await
        .map_err(pg_error)
        .map(drop)
}

/// Where a reader of the change log stands: the snapshot of its last read. Every change by a
/// transaction that had finished by then was read; the next read takes the changes of
/// transactions still running then (`running`) or started since (`xid >= next`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LogPosition {
    /// Every transaction below this one had finished (`pg_snapshot_xmin`).
    pub(crate) xmin: i64,
    /// Every transaction from this one on had not started (`pg_snapshot_xmax`).
    pub(crate) next: i64,
    /// Transactions in between still running (`pg_snapshot_xip`).
    pub(crate) running: Vec<i64>,
}

impl LogPosition {
    /// A position knowing only that every change below `xid` was read.
    pub(crate) fn from_xid(xid: i64) -> Self {
        LogPosition {
            xmin: xid,
            next: xid,
            running: Vec::new(),
        }
    }
}

/// One read of the change log.
pub(crate) struct LogRead {
    /// The position after this read.
    pub(crate) position: LogPosition,
    /// The keys changed (including this process's own writes; may repeat).
    pub(crate) keys: Vec<ItemKey>,
    /// The newest transaction id the sweeper trimmed from the log.
    pub(crate) trimmed: i64,
    /// Whether some live item's vectors were not made from its current value (another writer
    /// changed it): it waits to be embedded.
    pub(crate) unembedded: bool,
}

/// What the change log holds after `from`. Transaction ids, not `seq`, order the log: a
/// sequence number is taken before commit, so a reader could see seq 5 while seq 4 is still
/// in flight, and skip it for good; a snapshot says exactly which transactions had finished.
/// `from = None` reads only the position.
pub(crate) async fn changes(
    conn: &mut PgConnection,
    from: Option<&LogPosition>,
    now: Timestamp,
    persistent: bool,
) -> Result<LogRead> {
    // The partial index `waypoint_store_unembedded_idx` answers `unembedded`: a scalar
    // subquery in index order, since the server cannot estimate how few rows match the
    // predicate and would answer an EXISTS (which drops ORDER BY and LIMIT) with a scan of
    // the whole table.
    const SQL: &str = "SELECT h.xmin, h.xmax, h.running, h.trimmed, h.unembedded, c.prefix, c.key
        FROM (SELECT pg_snapshot_xmin(s)::text::bigint AS xmin,
                pg_snapshot_xmax(s)::text::bigint AS xmax,
                ARRAY(SELECT x::text::bigint FROM pg_snapshot_xip(s) AS x) AS running,
                coalesce((SELECT through_xid FROM waypoint_store_changes_trimmed WHERE id = 1), -1)
                    AS trimmed,
                (SELECT 1 FROM store u
                    WHERE u.waypoint_embedded_at IS DISTINCT FROM u.updated_at
                    AND u.updated_at IS NOT NULL
                    AND (u.expires_at IS NULL OR u.expires_at > $3)
                    ORDER BY u.updated_at DESC LIMIT 1) IS NOT NULL AS unembedded
            FROM pg_current_snapshot() AS s) AS h
        LEFT JOIN waypoint_store_changes c ON c.xid >= $1 OR c.xid = ANY($2)";
    let (next, running): (i64, &[i64]) = match from {
        Some(p) => (p.next, &p.running),
        None => (i64::MAX, &[]),
    };
    let rows = query(SQL, persistent)
        .bind(next)
        .bind(running)
        .bind(now)
        .fetch_all(conn)
        .await
        .map_err(pg_error)?;
    let mut head = None;
    let mut keys = Vec::new();
    for row in rows {
        if head.is_none() {
            let position = LogPosition {
                xmin: row.try_get(0).map_err(pg_error)?,
                next: row.try_get(1).map_err(pg_error)?,
                running: row.try_get(2).map_err(pg_error)?,
            };
            let trimmed: i64 = row.try_get(3).map_err(pg_error)?;
            let unembedded: bool = row.try_get(4).map_err(pg_error)?;
            head = Some((position, trimmed, unembedded));
        }
        let prefix: Option<String> = row.try_get(5).map_err(pg_error)?;
        let key: Option<String> = row.try_get(6).map_err(pg_error)?;
        if let (Some(prefix), Some(key)) = (prefix, key) {
            keys.push(ItemKey::new(Namespace::from_joined(&prefix), key));
        }
    }
    let (position, trimmed, unembedded) = head.ok_or_else(|| {
        waypoint_store::Error::backend(crate::error::BACKEND, "the snapshot query returned no row")
    })?;
    Ok(LogRead {
        position,
        keys,
        trimmed,
        unembedded,
    })
}

/// An item whose vectors were not made from its value, as read to embed it.
#[derive(Clone)]
pub(crate) struct Unembedded {
    /// The item.
    pub(crate) key: ItemKey,
    /// Its value as JSON text.
    pub(crate) value: String,
    /// Its `updated_at`: the version of the value read.
    pub(crate) updated_at: Timestamp,
}

/// Up to `limit` live items whose vectors were not made from their current value, newest
/// first, leaving out `skip` (keys at the `updated_at` they had when embedding them failed),
/// each locked (a session advisory lock keyed by `seed` and the item) so that one process at
/// a time embeds it: an item another session holds is left out. None when the stored vectors
/// are not of `dims` dimensions (this process's index is not the one the others use: its
/// vectors would be refused by theirs). Read them with [`read_unembedded`]; release the locks
/// with [`unlock`], or, `in_transaction` (behind a transaction pooler, where a session lock
/// could outlive its client on a server session lent to others), they are the transaction's.
pub(crate) async fn lock_unembedded(
    conn: &mut PgConnection,
    now: Timestamp,
    skip: &[(ItemKey, Timestamp)],
    (limit, dims): (i64, i32),
    seed: i64,
    in_transaction: bool,
    persistent: bool,
) -> Result<Vec<ItemKey>> {
    // The candidates are fixed (LIMIT) before any lock is tried: a volatile condition is never
    // pushed into a subquery. `waypoint_store_unembedded_idx` serves them.
    const SQL: &str = "SELECT c.prefix, c.key
        FROM (SELECT s.prefix, s.key FROM store s
            WHERE s.waypoint_embedded_at IS DISTINCT FROM s.updated_at
            AND s.updated_at IS NOT NULL
            AND (s.expires_at IS NULL OR s.expires_at > $1)
            AND NOT EXISTS (SELECT 1 FROM unnest($2::text[], $3::text[], $4::timestamptz[])
                AS f(prefix, key, at)
                WHERE f.prefix = s.prefix AND f.key = s.key AND f.at = s.updated_at)
            ORDER BY s.updated_at DESC LIMIT $5) AS c
        WHERE coalesce((SELECT octet_length(v.embedding) FROM waypoint_store_vectors v LIMIT 1), $7 * 4)
                = $7 * 4
            AND pg_try_advisory_lock(hashtextextended(c.prefix, hashtextextended(c.key, $6)))";
    let (prefixes, names) = key_arrays(skip.iter().map(|(k, _)| k));
    let times: Vec<Timestamp> = skip.iter().map(|(_, at)| *at).collect();
    let sql = if in_transaction {
        SQL.replace("pg_try_advisory_lock", "pg_try_advisory_xact_lock")
    } else {
        SQL.to_owned()
    };
    let locked: Vec<(String, String)> = sqlx::query_as(&sql)
        .persistent(persistent)
        .bind(now)
        .bind(prefixes)
        .bind(names)
        .bind(times)
        .bind(limit)
        .bind(seed)
        .bind(dims)
        .fetch_all(conn)
        .await
        .map_err(pg_error)?;
    Ok(locked
        .into_iter()
        .map(|(prefix, key)| ItemKey::new(Namespace::from_joined(&prefix), key))
        .collect())
}

/// Those of `keys` (locked by [`lock_unembedded`]) whose vectors are still not made from
/// their value, read afresh: another process may have embedded one between the lock
/// statement's snapshot and its lock.
pub(crate) async fn read_unembedded(
    conn: &mut PgConnection,
    keys: &[ItemKey],
    persistent: bool,
) -> Result<Vec<Unembedded>> {
    const SQL: &str = "SELECT s.prefix, s.key, s.value::text, s.updated_at
        FROM unnest($1::text[], $2::text[]) AS k(prefix, key)
        JOIN store s ON s.prefix = k.prefix AND s.key = k.key
        WHERE s.waypoint_embedded_at IS DISTINCT FROM s.updated_at AND s.updated_at IS NOT NULL";
    let (prefixes, names) = key_arrays(keys.iter());
    let rows = query(SQL, persistent)
        .bind(prefixes)
        .bind(names)
        .fetch_all(conn)
        .await
        .map_err(pg_error)?;
    rows.iter()
        .map(|row| {
            let prefix: String = row.try_get(0).map_err(pg_error)?;
            let key: String = row.try_get(1).map_err(pg_error)?;
            Ok(Unembedded {
                key: ItemKey::new(Namespace::from_joined(&prefix), key),
                value: row.try_get(2).map_err(pg_error)?,
                updated_at: row.try_get(3).map_err(pg_error)?,
            })
        })
        .collect()
}

/// Stores the vectors made from the values [`lock_unembedded`] read (`items`: key, the
/// `updated_at` read, the complete new set of vectors) and marks them as made from that
/// value, for the items still at that version: one another writer changed meanwhile keeps
/// its state (its change is logged, and it is embedded again). The trigger logs each item
/// marked. Each item's `tsvector` is made from its entry in `bodies` (`lexical::body`), when
/// given. Returns the keys stored.
pub(crate) async fn store_embedded(
    conn: &mut PgConnection,
    items: &[(ItemKey, Timestamp, Vec<FieldVector>)],
    bodies: &[(ItemKey, Timestamp, String)],
    persistent: bool,
) -> Result<Vec<ItemKey>> {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| {
        let mut parts = vec![String::from(
            "done AS (UPDATE store s SET waypoint_embedded_at = s.updated_at
            FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS e(prefix, key, at)
            WHERE s.prefix = e.prefix AND s.key = e.key AND s.updated_at = e.at
                AND s.waypoint_embedded_at IS DISTINCT FROM s.updated_at
            RETURNING s.prefix, s.key)",
        )];
        let stale = replace_vectors_sql("done", Some((4, 5, 6, 7)), true, &mut parts);
        parts.push(stale);
        parts.push(upsert_cte(
            "lex",
            "unnest($8::text[], $9::text[], $10::text[], $11::timestamptz[])
                AS t(prefix, key, body, made_at)
            JOIN done d ON d.prefix = t.prefix AND d.key = t.key",
            "t.made_at",
        ));
        format!("WITH {} SELECT prefix, key FROM done", parts.join(",\n"))
    });
    let (prefixes, names) = key_arrays(items.iter().map(|(k, _, _)| k));
    let times: Vec<Timestamp> = items.iter().map(|(_, at, _)| *at).collect();
    let (mut vec_p, mut vec_k, mut vec_f, mut vec_e) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (key, _, vectors) in items {
        let prefix = key.namespace.joined();
        for field in last_of_each_field(vectors) {
            vec_p.push(prefix.clone());
            vec_k.push(key.key.as_str());
            vec_f.push(field.field.as_str());
            vec_e.push(encode_vector(&field.vector));
        }
    }
    let (lex_p, lex_k) = key_arrays(bodies.iter().map(|(k, _, _)| k));
    let done: Vec<(String, String)> = sqlx::query_as(sql)
        .persistent(persistent)
        .bind(prefixes)
        .bind(names)
        .bind(times)
        .bind(vec_p)
        .bind(vec_k)
        .bind(vec_f)
        .bind(vec_e)
        .bind(lex_p)
        .bind(lex_k)
        .bind(
            bodies
                .iter()
                .map(|(_, _, b)| b.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(bodies.iter().map(|(_, at, _)| *at).collect::<Vec<_>>())
        .fetch_all(conn)
        .await
        .map_err(pg_error)?;
    Ok(done
        .into_iter()
        .map(|(prefix, key)| ItemKey::new(Namespace::from_joined(&prefix), key))
        .collect())
}

/// Releases every advisory lock the session holds (the store's sessions take none but
/// [`lock_unembedded`]'s).
pub(crate) async fn unlock(conn: &mut PgConnection, persistent: bool) -> Result<()> {
    query("SELECT pg_advisory_unlock_all()", persistent)
        .execute(conn)
        .await
        .map_err(pg_error)
        .map(drop)
}

/// The saved index snapshot, if any.
pub(crate) async fn load_snapshot(
    conn: &mut PgConnection,
    persistent: bool,
) -> Result<Option<Vec<u8>>> {
    const SQL: &str = "SELECT snapshot FROM waypoint_store_index_snapshot WHERE id = 1";
    let row = query(SQL, persistent)
        .fetch_optional(&mut *conn)
        .await
        .map_err(pg_error)?;
    row.map(|r| r.try_get::<Vec<u8>, _>(0).map_err(pg_error))
        .transpose()
}

/// Replaces the saved index snapshot.
pub(crate) async fn save_snapshot(
    conn: &mut PgConnection,
    snapshot: &[u8],
    persistent: bool,
) -> Result<()> {
    const SQL: &str = "INSERT INTO waypoint_store_index_snapshot (id, saved_at, snapshot)
        VALUES (1, now(), $1)
        ON CONFLICT (id) DO UPDATE SET saved_at = EXCLUDED.saved_at, snapshot = EXCLUDED.snapshot";
    query(SQL, persistent)
        .bind(snapshot)
        .execute(&mut *conn)
        .await
        .map_err(pg_error)?;
    Ok(())
}

/// The CTE named `name` upserting the `tsvector`s of the rows `source` gives (a row source of
/// `prefix, key, body`), made from the values of `made_at` (an SQL expression).
pub(crate) fn upsert_cte(name: &str, source: &str, made_at: &str) -> String {
    format!(
        "{name} AS (INSERT INTO waypoint_store_lexical (prefix, key, tsv, made_at)
        SELECT t.prefix, t.key, to_tsvector('simple', t.body), {made_at} FROM {source}
        ON CONFLICT (prefix, key) DO UPDATE SET tsv = EXCLUDED.tsv, made_at = EXCLUDED.made_at)"
    )
}
