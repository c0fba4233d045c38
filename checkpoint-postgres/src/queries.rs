//! All SQL. Each operation is one statement (one round trip, atomic on its own) where it
//! can be; the rest run in one transaction.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use waypoint_checkpoint::metadata;
use waypoint_checkpoint::raw::{PreparedPut, PreparedWrites, unvalued_channels};

use bytes::Bytes;
use std::sync::OnceLock;
use std::time::Duration;

use futures::TryStreamExt;
use serde_json::Value;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::Query;
use sqlx::{Acquire, PgConnection, Postgres, Row};
use waypoint_checkpoint::serde::{CHILD_CHANNEL, TAG_NULL, child_record_task};
use waypoint_checkpoint::{
    DeltaChannelHistory, PendingWrite, Result, Serde, SerializedValue, Slot, TupleWithHistory,
};

use crate::array::Elements;
use crate::convert::{EMPTY, Head, StoredCheckpoint, StoredValue, tuple_from_row};
use crate::error::{DbError, Failure, pg_error};

/// LangGraph's `writes_sort_key` over `checkpoint_writes cw`: `(task_path, task_id, idx)`,
/// text in byte order (Python's order for UTF-8), not the database collation's.
const WRITES_ORDER: &str = r#"cw.task_path COLLATE "C", cw.task_id COLLATE "C", cw.idx"#;

/// The tuple columns read by `get_tuple` and `list`, for the checkpoints `selection` (a
/// `WHERE ... ORDER BY ... LIMIT` tail) picks: the checkpoint row, the stored rows of every
/// version it names, `empty` ones included, joined by version (as parallel arrays; a version
/// without a row is absent from them, for `Serde::open_channel` to judge; left out with
/// `with_values` false, for [`fetch_values`]), and its pending writes in [`WRITES_ORDER`].
/// Rows are picked and ordered before the lateral joins, so values are read only for the rows
/// returned, in order, and streamed without sorting wide rows. Each value is one primary-key
/// probe (`LIMIT 1` keeps the planner from turning the probes into a hash of the thread's
/// values per row, which it does when statistics are stale, at quadratic cost).
fn select(selection: &str, with_values: bool) -> String {
    let (value_columns, value_join) = if with_values {
        (
            "b.channels, b.versions, b.types, b.blobs,",
            "LEFT JOIN LATERAL (
    SELECT array_agg(bl.channel) AS channels, array_agg(bl.version) AS versions,
        array_agg(bl.type) AS types, array_agg(bl.blob) AS blobs
    FROM jsonb_each_text(c.checkpoint -> 'channel_versions') cv
    CROSS JOIN LATERAL (
        SELECT v.channel, v.version, v.type, v.blob FROM checkpoint_blobs v
        WHERE v.thread_id = c.thread_id AND v.checkpoint_ns = c.checkpoint_ns
            AND v.channel = cv.key AND v.version = cv.value
        LIMIT 1
    ) bl
) b ON true",
        )
    } else {
        ("", "")
    };
    format!(
        "SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id,
    c.checkpoint::text, c.metadata::text, {value_columns}
    w.task_ids, w.idxs, w.channels, w.types, w.blobs
FROM (SELECT * FROM checkpoints c {selection}) c
{value_join}
LEFT JOIN LATERAL (
    SELECT array_agg(cw.task_id ORDER BY {WRITES_ORDER}) AS task_ids,
        array_agg(cw.idx ORDER BY {WRITES_ORDER}) AS idxs,
        array_agg(cw.channel ORDER BY {WRITES_ORDER}) AS channels,
        array_agg(cw.type ORDER BY {WRITES_ORDER}) AS types,
        array_agg(cw.blob ORDER BY {WRITES_ORDER}) AS blobs
    FROM checkpoint_writes cw
    WHERE cw.thread_id = c.thread_id AND cw.checkpoint_ns = c.checkpoint_ns
        AND cw.checkpoint_id = c.checkpoint_id
) w ON true
ORDER BY c.checkpoint_id DESC"
    )
}

/// A query, prepared on the server (and cached per connection) unless `persistent` is off.
fn query(sql: &'static str, persistent: bool) -> Query<'static, Postgres, PgArguments> {
    sqlx::query(sql).persistent(persistent)
}

/// The checkpoint `(thread, ns, id)`, or the newest of `(thread, ns)` without an id.
pub(crate) fn get(
    thread_id: String,
    ns: String,
    id: Option<String>,
    persistent: bool,
) -> Query<'static, Postgres, PgArguments> {
    static BY_ID: OnceLock<String> = OnceLock::new();
    static LATEST: OnceLock<String> = OnceLock::new();
    match id {
        Some(id) => query(
            BY_ID.get_or_init(|| {
                select(
                    "WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id = $3",
                    true,
                )
            }),
            persistent,
        )
        .bind(thread_id)
        .bind(ns)
        .bind(id),
        None => query(
            LATEST.get_or_init(|| {
                select(
                    "WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 ORDER BY c.checkpoint_id DESC LIMIT 1",
                    true,
                )
            }),
            persistent,
        )
        .bind(thread_id)
        .bind(ns),
    }
}

/// What `list` selects by; `None` leaves a field unconstrained.
#[derive(Debug, Default)]
pub(crate) struct ListQuery {
    pub(crate) thread_id: Option<String>,
    pub(crate) checkpoint_ns: Option<String>,
    pub(crate) checkpoint_id: Option<String>,
    pub(crate) before: Option<String>,
    /// The metadata filter as JSON text.
    pub(crate) filter: Option<String>,
    pub(crate) limit: Option<usize>,
}

impl ListQuery {
    /// The statement for the constraints present: one of 128 fixed texts, so each is
    /// prepared once per connection. Rows come newest first with `LIMIT` in SQL; with
    /// `with_values` false their stored values are left for [`fetch_values`].
    pub(crate) fn build(
        self,
        with_values: bool,
        persistent: bool,
    ) -> Query<'static, Postgres, PgArguments> {
        const CLAUSES: [&str; 5] = [
            "c.thread_id = ",
            "c.checkpoint_ns = ",
            "c.checkpoint_id = ",
            "c.checkpoint_id < ",
            "c.metadata @> ",
        ];
        static TEXTS: OnceLock<Vec<String>> = OnceLock::new();
        let texts = TEXTS.get_or_init(|| {
            (0..128u32)
                .map(|mask| {
                    let mut sql = String::new();
                    let mut n = 0;
                    for (bit, clause) in CLAUSES.iter().enumerate() {
                        if mask & (1 << bit) != 0 {
                            n += 1;
                            sql += if n == 1 { "WHERE " } else { " AND " };
                            sql += clause;
                            sql += &format!("${n}");
                            if bit == 4 {
                                sql += "::jsonb";
                            }
                        }
                    }
                    sql += " ORDER BY c.checkpoint_id DESC";
                    if mask & (1 << 5) != 0 {
                        sql += &format!(" LIMIT ${}", n + 1);
                    }
                    select(&sql, mask & (1 << 6) != 0)
                })
                .collect()
        });
        let fields = [
            self.thread_id,
            self.checkpoint_ns,
            self.checkpoint_id.filter(|id| !id.is_empty()),
            self.before,
            self.filter,
        ];
        let mut mask = 0;
        for (bit, field) in fields.iter().enumerate() {
            if field.is_some() {
                mask |= 1 << bit;
            }
        }
        if self.limit.is_some() {
            mask |= 1 << 5;
        }
        if with_values {
            mask |= 1 << 6;
        }
        let mut q = query(&texts[mask], persistent);
        for field in fields.into_iter().flatten() {
            q = q.bind(field);
        }
        if let Some(limit) = self.limit {
            q = q.bind(i64::try_from(limit).unwrap_or(i64::MAX));
        }
        q
    }
}

/// Stores a checkpoint, its new values and (with an authenticated history) its child record
/// on the parent in one statement: atomic, one round trip. Values already stored under the
/// same version are kept; the checkpoint row is replaced except for its parent. The row
/// records where its delta channels' histories start ([`DELTA_SEEDS`]).
///
/// `renewed` counts the values, from the first, of the channels the put versions anew (its
/// `new_versions`, [`PreparedPut::values`]); the others (a put hands over every value it
/// keeps, most stored by an earlier put) are first not sent: the statement checks their
/// `(channel, version)` rows are stored and writes nothing when one is missing, and the put
/// is made again with every value sent, which stores the missing ones as before. So a put
/// after a committed delete (of the thread, or of runs whose values it shared) stores every
/// value it keeps, as when all were sent. A kept value whose version the parent row names
/// for its channel (not inline) is taken as stored without a probe: a remaining checkpoint's
/// values are never deleted, and a version a LangGraph-written parent names without a
/// value reads as none there as it would here (LangGraph keeps a value by its version
/// alone). A delete not yet committed when the check reads can remove a value the put
/// relied on; sending it would not have saved it either: that delete, had it reached the
/// row a moment later (after the put's `DO NOTHING` found it), removes it all the same and
/// leaves the same rows (the put's own checkpoint row, newer than the delete's snapshot, is
/// not deleted either way).
///
/// Values the parent row holds inline (LangGraph keeps strings, numbers, booleans and null
/// in `channel_values`, outside `checkpoint_blobs`) are carried into the new row for every
/// channel whose version this checkpoint keeps and this put does not store, so continuing a
/// Python-written thread never drops them. A put handing over a value (or empty marker) of
/// every channel it versions reads no parent for that.
///
/// With a [`Fence`], every row is written only while the lease allows it, checked in the same
/// statement; returns whether it was written. `heads` ([`expected_heads_json`], or
/// empty) is set for the transaction before the checkpoint row is inserted, so the
/// `waypoint_checkpoint_head` trigger refuses a put whose expected head moved (SQLSTATE
/// `WP409`).
///
/// [`expected_heads_json`]: waypoint_checkpoint::raw::expected_heads_json
/// [`PreparedPut::values`]: waypoint_checkpoint::raw::PreparedPut::values
#[allow(clippy::too_many_arguments)]
pub(crate) async fn put<'a>(
    conn: &mut PgConnection,
    put: &'a PreparedPut,
    renewed: usize,
    checkpoint: &'a str,
    metadata: &'a str,
    fence: Fence<'a>,
    heads: &'a str,
    via: Via<'_>,
) -> sqlx::Result<bool> {
    // The child record's rows are one more data-modifying CTE: it runs whether or not the
    // main insert reads it, in the statement's snapshot, so each insert is gated on the
    // lease and the kept values itself. Without a child record (`on_child_conflict` none)
    // the statement has no such CTE: an empty one cost ~15 us of server time per put. Its
    // parameters ($11 to $19) are bound all the same, unused. `carry` reads the parent's
    // inline values. A kept value the parent row versions alike, and not inline, is stored:
    // no delete removes a value a remaining checkpoint names (`COLLECT_GARBAGE`, and a
    // thread's delete takes its checkpoints first or with them), so one read of the parent
    // row answers for all of them (each probe cost ~12 us of a ~330 us execute on
    // PostgreSQL 15). Any other is one primary-key probe (a subquery in the select list:
    // as `NOT EXISTS` the planner may hash the thread's values instead, ~170 buffer hits);
    // the always-true `$23[i] = channel` tells the planner the list is short, so the generic
    // plan costs what custom ones do and is cached instead of the statement being planned
    // on every call (the planner guesses ten entries for an array parameter).
    // The parent row is read once, in `parent` (materialized: joined as a subquery, it was
    // read again for each kept channel), for the kept values and the carried ones. Without
    // delta channels (no counters in the metadata) the seeds are NULL and their subquery is
    // left out: its plan, never run, still cost every execution its setup. The two took the
    // put's median execute from ~300-350 to ~240-270 us (`waypoint bench --quick --only
    // checkpoint`, every statement's duration logged).
    fn sql(fence: usize, on_child_conflict: Option<&str>, carry: bool, seeds: bool) -> String {
        const HELD: &str = "fence AS (SELECT 1 FROM waypoint_thread_leases WHERE thread_id = $21 AND token = $22 FOR SHARE), ";
        // Claimed already lapsed: the row (inserted, or locked when a lapsed lease is taken
        // over) keeps a claim made meanwhile waiting until the commit, and then lets it in.
        const CLAIM: &str = "fence AS (INSERT INTO waypoint_thread_leases (thread_id, token, expires_at)
        VALUES ($21, $22, '-infinity')
        ON CONFLICT (thread_id) DO UPDATE SET token = excluded.token, expires_at = excluded.expires_at
        WHERE waypoint_thread_leases.expires_at <= now()
        RETURNING 1), ";
        const KEPT: &str = " WHERE (SELECT ok FROM kept)";
        const KEPT_HELD: &str = " WHERE (SELECT ok FROM kept) AND EXISTS (SELECT 1 FROM fence)";
        let (fence, held) = match fence {
            0 => ("", KEPT),
            1 => (HELD, KEPT_HELD),
            _ => (CLAIM, KEPT_HELD),
        };
        let child = on_child_conflict.map_or_else(String::new, |on_conflict| format!(", child AS (
        INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
        SELECT $11::text, $12::text, $13::text, $14::text, $15::text, w.idx, w.channel, w.type, w.blob
        FROM unnest($16::int4[], $17::text[], $18::text[], $19::bytea[]) AS w(idx, channel, type, blob){held}
        ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) {on_conflict}
    )"));
        // The client's checkpoint JSON holds no values (`PreparedPut` takes them out).
        let checkpoint = if carry {
            "jsonb_set($9::jsonb, '{channel_values}', coalesce((
        SELECT jsonb_object_agg(e.key, e.value)
        FROM parent p, jsonb_each(p.inline) AS e
        WHERE p.versions -> e.key = $9::jsonb -> 'channel_versions' -> e.key
            AND e.key <> ALL($3::text[]) AND e.key <> ALL($23::text[])
    ), '{}'::jsonb))"
        } else {
            "$9::jsonb"
        };
        let seeds = if seeds { DELTA_SEEDS } else { "NULL::jsonb" };
        format!(
            "WITH {fence}parent AS MATERIALIZED (
        SELECT checkpoint -> 'channel_versions' AS versions, checkpoint -> 'channel_values' AS inline
        FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $8
    ), kept AS (
        SELECT coalesce(bool_and(
            coalesce(p.versions ->> k.channel = k.version AND NOT (p.inline ? k.channel), false)
            OR (SELECT true FROM checkpoint_blobs b
                WHERE b.thread_id = $1 AND b.checkpoint_ns = $2 AND b.channel = k.channel AND b.version = k.version) IS NOT NULL), true) AS ok
        FROM unnest($23::text[], $24::text[]) WITH ORDINALITY AS k(channel, version, i)
        LEFT JOIN parent p ON true
        WHERE ($23::text[])[k.i] = k.channel
    ), blobs AS (
        INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
        SELECT $1, $2, v.channel, v.version, v.type, v.blob
        FROM unnest($3::text[], $4::text[], $5::text[], $6::bytea[]) AS v(channel, version, type, blob){held}
        ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
    ){child}
    INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, waypoint_delta_seeds)
    SELECT $1, $2, $7, $8, {checkpoint}, $10::jsonb, {seeds}
    FROM (SELECT set_config('waypoint.expected_heads', $20, true)) AS heads{held}
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id)
    DO UPDATE SET checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata,
        waypoint_delta_seeds = EXCLUDED.waypoint_delta_seeds"
        )
    }
    static SQL: OnceLock<[[[[String; 2]; 2]; 3]; 3]> = OnceLock::new();
    let statements = SQL.get_or_init(|| {
        [0, 1, 2].map(|fence| {
            [None, Some("DO NOTHING"), Some(REPLACE_WRITE)].map(|child| {
                [false, true]
                    .map(|carry| [false, true].map(|seeds| sql(fence, child, carry, seeds)))
            })
        })
    });
    // The values before `sent` and the empty markers are sent; the rest (kept) must be
    // stored already for anything to be written. When nothing was, a value kept is missing
    // or the fence refused: sending every value answers both.
    // The parent's inline values are read only for a channel versioned without a value here.
    let given: HashSet<&str> = put.values.iter().map(|v| v.channel.as_str()).collect();
    let carry = (put.checkpoint.channel_versions.keys()).any(|c| !given.contains(c.as_str()));
    let child = put.child.as_ref();
    let child_kind = child.map_or(0, |c| 1 + usize::from(c.replace));
    let (kind, lease) = match fence {
        Fence::None => (0, None),
        Fence::Held(thread, token) => (1, Some((thread, token))),
        Fence::Claim(thread, token) => (2, Some((thread, token))),
    };
    // Without delta channels (their counters in the metadata) the seeds are NULL, and the
    // statement leaves out what would compute them.
    let seeds = matches!(
        put.metadata.extra.get(metadata::DELTA_COUNTERS),
        Some(Value::Object(_))
    );
    let sql = &statements[kind][child_kind][usize::from(carry)][usize::from(seeds)];
    let text = |s: &'a str| Param::Text(Some(s));
    let of_child = |f: fn(&'a PreparedWrites) -> &'a str| Param::Text(child.map(f));
    let n = put.values.len();
    let mut sent = renewed.min(n);
    loop {
        let (mut channels, mut versions) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let (mut types, mut blobs) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let (mut kept, mut kept_versions) = (Vec::new(), Vec::new());
        for (i, v) in put.values.iter().enumerate() {
            match &v.value {
                Some(value) if i >= sent && value.type_tag != EMPTY => {
                    kept.push(v.channel.as_str());
                    kept_versions.push(v.version.as_str());
                }
                Some(value) => {
                    channels.push(v.channel.as_str());
                    versions.push(v.version.as_str());
                    types.push(value.type_tag.as_ref());
                    blobs.push(Some(value.bytes.as_ref()));
                }
                None => {
                    channels.push(v.channel.as_str());
                    versions.push(v.version.as_str());
                    types.push(EMPTY);
                    blobs.push(None);
                }
            }
        }
        let rows = child.map(WriteColumns::of).unwrap_or_default();
        let params = vec![
            text(&put.thread_id),
            text(&put.checkpoint_ns),
            Param::Texts(channels),
            Param::Texts(versions),
            Param::Texts(types),
            Param::Blobs(blobs),
            text(&put.checkpoint.id),
            Param::Text(put.parent.as_deref()),
            text(checkpoint),
            text(metadata),
            of_child(|c| &c.thread_id),
            of_child(|c| &c.checkpoint_ns),
            of_child(|c| &c.checkpoint_id),
            of_child(|c| &c.task_id),
            of_child(|c| &c.task_path),
            Param::Ints(rows.idxs),
            Param::Texts(rows.channels),
            Param::Texts(rows.types),
            Param::Blobs(rows.blobs.into_iter().map(Some).collect()),
            text(heads),
            Param::Text(lease.map(|(thread_id, _)| thread_id)),
            Param::Text(lease.map(|(_, token)| token)),
            Param::Texts(kept),
            Param::Texts(kept_versions),
        ];
        let done = match via {
            Via::Bound { persistent } => {
                let query = params.into_iter().fold(sqlx::query(sql), Param::bind);
                query.persistent(persistent).execute(&mut *conn).await?
            }
            Via::Inline { settings } => {
                let message = format!("{settings}; {}", inline(sql, &params)?);
                sqlx::Executor::execute(&mut *conn, message.as_str()).await?
            }
        };
        if done.rows_affected() > 0 || sent == n {
            return Ok(done.rows_affected() > 0);
        }
        sent = n;
    }
}

/// A put's `waypoint_delta_seeds`: for each delta channel its metadata counts
/// (`counters_since_delta_snapshot`, [`metadata::DELTA_COUNTERS`]), where its history starts
/// as `[checkpoint id, version]`: this checkpoint when the put hands the channel's value over
/// (or hands over the version the parent's seed has, whose stored value it shares); else the
/// parent's entry; else, with no parent, this checkpoint, and under a parent that is its
/// thread's first checkpoint, that parent, both with a null version (no value: the history
/// starts empty). Otherwise (a parent written without the column) the entry is null: unknown.
/// NULL without delta channels. [`delta_history`] checks the seed it names and walks the
/// other way when an entry is missing or does not hold.
const DELTA_SEEDS: &str = "(
        SELECT jsonb_object_agg(d.channel, CASE
            WHEN h.valued OR h.version = p.seeds -> d.channel ->> 1
                THEN jsonb_build_array($7::text, h.version)
            WHEN jsonb_typeof(p.seeds -> d.channel) = 'array' THEN p.seeds -> d.channel
            WHEN $8::text IS NULL THEN jsonb_build_array($7::text, NULL::text)
            WHEN p.found AND p.parent_checkpoint_id IS NULL THEN jsonb_build_array($8::text, NULL::text)
        END)
        FROM jsonb_object_keys(CASE
            WHEN jsonb_typeof($10::jsonb -> 'counters_since_delta_snapshot') = 'object'
            THEN $10::jsonb -> 'counters_since_delta_snapshot' END) AS d(channel)
        LEFT JOIN LATERAL (
            (SELECT v.version, v.type <> 'empty' AND v.blob IS NOT NULL AS valued
            FROM unnest($3::text[], $4::text[], $5::text[], $6::bytea[]) AS v(channel, version, type, blob)
            WHERE v.channel = d.channel)
            UNION ALL
            (SELECT k.version, true FROM unnest($23::text[], $24::text[]) AS k(channel, version)
            WHERE k.channel = d.channel)
            LIMIT 1) h ON true
        LEFT JOIN (
            SELECT waypoint_delta_seeds AS seeds, parent_checkpoint_id, true AS found
            FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $8) p ON true
    )";

/// What lets a put write.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Fence<'a> {
    /// Nothing: the put writes.
    None,
    /// The lease `(thread, token)` still holds the thread (expired but not taken over
    /// included); its row stays locked `FOR SHARE` until the statement's transaction ends.
    Held(&'a str, &'a str),
    /// No live lease holds the thread: the put claims it under `(thread, token)`, already
    /// lapsed (a lapsed lease is taken over), as one statement.
    Claim(&'a str, &'a str),
}

/// How a statement reaches the server.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Via<'a> {
    /// Parameters bound (extended protocol), the statement prepared on the server and
    /// cached per connection when `persistent`: one round trip once cached.
    Bound {
        /// Whether the statement is prepared and cached.
        persistent: bool,
    },
    /// One simple-protocol message holding `settings` (`SET LOCAL` statements) and the
    /// statement, parameters written as literals: one round trip and one transaction (the
    /// server runs a message of several statements as one), which a transaction pooler
    /// serves on one server session. Bound parameters would take two round trips there
    /// (sqlx parses an unnamed statement before binding it), in a transaction of their own.
    Inline {
        /// The session settings, as `SET LOCAL` statements.
        settings: &'a str,
    },
}

impl<'a> Via<'a> {
    /// [`Via::Inline`] behind a transaction pooler (its `settings`), else [`Via::Bound`].
    pub(crate) fn of(settings: Option<&'a str>, persistent: bool) -> Self {
        match settings {
            Some(settings) => Via::Inline { settings },
            None => Via::Bound { persistent },
        }
    }
}

/// A statement parameter, bound or written as a literal ([`Via`]).
enum Param<'a> {
    Text(Option<&'a str>),
    Texts(Vec<&'a str>),
    Ints(Vec<i32>),
    Blobs(Vec<Option<&'a [u8]>>),
}

impl<'a> Param<'a> {
    /// `query` with this parameter bound next.
    fn bind(
        query: Query<'a, Postgres, PgArguments>,
        param: Self,
    ) -> Query<'a, Postgres, PgArguments> {
        match param {
            Param::Text(v) => query.bind(v),
            Param::Texts(v) => query.bind(v),
            Param::Ints(v) => query.bind(v),
            Param::Blobs(v) => query.bind(v),
        }
    }

    /// Appends this parameter as an SQL literal of its type. Text goes in an escape string
    /// (`E'...'`, read the same whatever `standard_conforming_strings` says), bytes in hex;
    /// text holding NUL, which no `text` value can hold, is refused.
    fn write_literal(&self, out: &mut String) -> sqlx::Result<()> {
        fn text(out: &mut String, s: &str) -> sqlx::Result<()> {
            if s.contains('\0') {
                return Err(sqlx::Error::Encode(
                    "a text value contains a NUL character, which PostgreSQL cannot store".into(),
                ));
            }
            out.push_str("E'");
            for c in s.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '\'' => out.push_str("''"),
                    c => out.push(c),
                }
            }
            out.push('\'');
            Ok(())
        }
        fn array<T>(
            out: &mut String,
            items: &[T],
            kind: &str,
            mut item: impl FnMut(&mut String, &T) -> sqlx::Result<()>,
        ) -> sqlx::Result<()> {
            out.push_str("ARRAY[");
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                item(out, v)?;
            }
            out.push_str("]::");
            out.push_str(kind);
            out.push_str("[]");
            Ok(())
        }
        match self {
            Param::Text(None) => out.push_str("NULL::text"),
            Param::Text(Some(s)) => {
                text(out, s)?;
                out.push_str("::text");
            }
            Param::Texts(v) => array(out, v, "text", |out, s| text(out, s))?,
            Param::Ints(v) => array(out, v, "int4", |out, i| {
                out.push_str(&i.to_string());
                Ok(())
            })?,
            Param::Blobs(v) => array(out, v, "bytea", |out, b| {
                match b {
                    None => out.push_str("NULL"),
                    Some(bytes) => {
                        out.push_str("E'\\\\x");
                        const HEX: &[u8; 16] = b"0123456789abcdef";
                        for byte in *bytes {
                            out.push(char::from(HEX[usize::from(byte >> 4)]));
                            out.push(char::from(HEX[usize::from(byte & 15)]));
                        }
                        out.push('\'');
                    }
                }
                Ok(())
            })?,
        }
        Ok(())
    }
}

/// `sql` with each placeholder (`$1`, `$2`, ...) replaced by its parameter as a literal.
/// The statements passed hold no `$` but in placeholders.
fn inline(sql: &str, params: &[Param<'_>]) -> sqlx::Result<String> {
    let mut out = String::with_capacity(sql.len() + 64 * params.len());
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let digits = rest[at + 1..]
            .bytes()
            .take_while(u8::is_ascii_digit)
            .count();
        let param = rest[at + 1..at + 1 + digits]
            .parse::<usize>()
            .ok()
            .and_then(|n| params.get(n.checked_sub(1)?))
            .ok_or_else(|| sqlx::Error::Protocol(format!("no parameter for `{}`", &rest[at..])))?;
        param.write_literal(&mut out)?;
        rest = &rest[at + 1 + digits..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The conflict action of writes that replace existing rows (last wins).
const REPLACE_WRITE: &str =
    "DO UPDATE SET channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob";

/// One call's write rows as parallel columns; of repeated indexes in a replacing call only
/// the last row (one statement cannot update a row twice).
#[derive(Default)]
struct WriteColumns<'a> {
    idxs: Vec<i32>,
    channels: Vec<&'a str>,
    types: Vec<&'a str>,
    blobs: Vec<&'a [u8]>,
}

impl<'a> WriteColumns<'a> {
    fn of(w: &'a PreparedWrites) -> Self {
        let rows: Vec<_> = if w.replace {
            w.rows
                .iter()
                .enumerate()
                .filter(|(i, r)| !w.rows[i + 1..].iter().any(|later| later.idx == r.idx))
                .map(|(_, r)| r)
                .collect()
        } else {
            w.rows.iter().collect()
        };
        WriteColumns {
            idxs: rows
                .iter()
                .map(|r| i32::try_from(r.idx).unwrap_or(i32::MAX))
                .collect(),
            channels: rows.iter().map(|r| r.channel.as_str()).collect(),
            types: rows.iter().map(|r| r.value.type_tag.as_ref()).collect(),
            blobs: rows.iter().map(|r| r.value.bytes.as_ref()).collect(),
        }
    }
}

/// Stores one call's writes in one statement: replacing rows (last wins) or keeping
/// existing ones (first wins), as prepared.
pub(crate) async fn put_writes(
    conn: &mut PgConnection,
    w: &PreparedWrites,
    persistent: bool,
) -> sqlx::Result<()> {
    const INSERT: &str = "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
        SELECT $1, $2, $3, $4, $5, w.idx, w.channel, w.type, w.blob
        FROM unnest($6::int4[], $7::text[], $8::text[], $9::bytea[]) AS w(idx, channel, type, blob)
        ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)";
    static SQL: OnceLock<[String; 2]> = OnceLock::new();
    let [ignore, replace] = SQL.get_or_init(|| {
        [
            format!("{INSERT} DO NOTHING"),
            format!("{INSERT} {REPLACE_WRITE}"),
        ]
    });
    let rows = WriteColumns::of(w);
    sqlx::query(if w.replace { replace } else { ignore })
        .persistent(persistent)
        .bind(&w.thread_id)
        .bind(&w.checkpoint_ns)
        .bind(&w.checkpoint_id)
        .bind(&w.task_id)
        .bind(&w.task_path)
        .bind(rows.idxs)
        .bind(rows.channels)
        .bind(rows.types)
        .bind(rows.blobs)
        .execute(conn)
        .await
        .map(drop)
}

/// Deletes a thread's checkpoints, values and writes in one statement.
pub(crate) async fn delete_thread(
    conn: &mut PgConnection,
    thread_id: &str,
    persistent: bool,
) -> sqlx::Result<()> {
    const SQL: &str = "WITH c AS (DELETE FROM checkpoints WHERE thread_id = $1),
        b AS (DELETE FROM checkpoint_blobs WHERE thread_id = $1)
        DELETE FROM checkpoint_writes WHERE thread_id = $1";
    sqlx::query(SQL)
        .persistent(persistent)
        .bind(thread_id)
        .execute(conn)
        .await
        .map(drop)
}

/// Deletes values of `(thread, ns)` that no remaining checkpoint refers to; the live set is
/// one hashed subquery, not a probe per value.
const COLLECT_GARBAGE: &str = "DELETE FROM checkpoint_blobs
    WHERE thread_id = $1 AND checkpoint_ns = $2
    AND (channel, version) NOT IN (
        SELECT cv.key, cv.value FROM checkpoints c, jsonb_each_text(c.checkpoint -> 'channel_versions') cv
        WHERE c.thread_id = $1 AND c.checkpoint_ns = $2)";

/// Deletes the checkpoints of the given runs, their writes, the child records they left on
/// surviving checkpoints (authenticated history), and values left unreferenced.
pub(crate) async fn delete_for_runs(
    conn: &mut PgConnection,
    run_ids: &[String],
    persistent: bool,
) -> Result<()> {
    let mut tx = conn.begin().await.map_err(pg_error)?;
    let touched: Vec<(String, String, Vec<String>)> = sqlx::query_as(
        "WITH gone AS (
            DELETE FROM checkpoints WHERE metadata ? 'run_id' AND metadata ->> 'run_id' = ANY($1)
            RETURNING thread_id, checkpoint_ns, checkpoint_id),
        writes AS (
            DELETE FROM checkpoint_writes cw USING gone g
            WHERE cw.thread_id = g.thread_id AND cw.checkpoint_ns = g.checkpoint_ns
                AND cw.checkpoint_id = g.checkpoint_id)
        SELECT thread_id, checkpoint_ns, array_agg(checkpoint_id) FROM gone
        GROUP BY thread_id, checkpoint_ns",
    )
    .persistent(persistent)
    .bind(run_ids)
    .fetch_all(&mut *tx)
    .await
    .map_err(pg_error)?;
    for (thread_id, ns, ids) in touched {
        // After the statement above, so no row is deleted twice by one statement.
        let children: Vec<String> = ids.iter().map(|id| child_record_task(id)).collect();
        sqlx::query(
            "DELETE FROM checkpoint_writes WHERE thread_id = $1 AND checkpoint_ns = $2
                AND channel = $3 AND task_id = ANY($4)",
        )
        .persistent(persistent)
        .bind(&thread_id)
        .bind(&ns)
        .bind(CHILD_CHANNEL)
        .bind(children)
        .execute(&mut *tx)
        .await
        .map_err(pg_error)?;
        sqlx::query(COLLECT_GARBAGE)
            .persistent(persistent)
            .bind(thread_id)
            .bind(ns)
            .execute(&mut *tx)
            .await
            .map_err(pg_error)?;
    }
    tx.commit().await.map_err(pg_error)
}

/// Copies every checkpoint, value and write of `source` to `target`; `false` when `target`
/// already has checkpoints. Sealed values are resealed for their new slots.
pub(crate) async fn copy_thread(
    conn: &mut PgConnection,
    source: &str,
    target: &str,
    serde: &Serde,
    persistent: bool,
) -> Result<bool> {
    let mut tx = conn.begin().await.map_err(pg_error)?;
    // Two copies to one target take turns.
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
        .persistent(persistent)
        .bind(target)
        .execute(&mut *tx)
        .await
        .map_err(pg_error)?;
    let taken: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = $1)")
            .persistent(persistent)
            .bind(target)
            .fetch_one(&mut *tx)
            .await
            .map_err(pg_error)?;
    if taken {
        return Ok(false);
    }
    // Leftovers of a deleted target (late writes) must not attach to the copied checkpoints.
    delete_thread(&mut tx, target, persistent)
        .await
        .map_err(pg_error)?;
    sqlx::query(
        "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata, waypoint_delta_seeds)
         SELECT $2, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata, waypoint_delta_seeds FROM checkpoints WHERE thread_id = $1",
    )
    .persistent(persistent)
    .bind(source)
    .bind(target)
    .execute(&mut *tx)
    .await
    .map_err(pg_error)?;
    if serde.is_encrypted() {
        copy_resealed(&mut tx, source, target, serde, persistent).await?;
    } else {
        sqlx::query(
            "WITH b AS (
                INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
                SELECT $2, checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs WHERE thread_id = $1)
            INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
            SELECT $2, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob FROM checkpoint_writes WHERE thread_id = $1",
        )
        .persistent(persistent)
        .bind(source)
        .bind(target)
        .execute(&mut *tx)
        .await
        .map_err(pg_error)?;
    }
    tx.commit().await.map_err(pg_error)?;
    Ok(true)
}

/// Copies values and writes one by one, opening each for its source slot and sealing it for
/// the target's.
async fn copy_resealed(
    conn: &mut PgConnection,
    source: &str,
    target: &str,
    serde: &Serde,
    persistent: bool,
) -> Result<()> {
    type BlobRow = (String, String, String, String, Option<Vec<u8>>);
    let blobs: Vec<BlobRow> = sqlx::query_as(
        "SELECT checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs WHERE thread_id = $1",
    )
    .persistent(persistent)
    .bind(source)
    .fetch_all(&mut *conn)
    .await
    .map_err(pg_error)?;
    for (ns, channel, version, tag, blob) in blobs {
        // Every row, empty ones included: under a keyring their seal names the slot too (a
        // NULL blob is an unsealed empty, refused unless plaintext is accepted).
        let slot = |thread_id| Slot::Channel {
            thread_id,
            checkpoint_ns: &ns,
            channel: &channel,
            version: &version,
        };
        let stored = SerializedValue::new(tag, blob.unwrap_or_default());
        let sealed = serde.reseal(&stored, &slot(source), &slot(target))?;
        let tag = sealed.type_tag.into_owned();
        // An empty channel without a seal keeps LangGraph's NULL blob.
        let blob = (tag != EMPTY || !sealed.bytes.is_empty()).then(|| sealed.bytes.to_vec());
        sqlx::query("INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) VALUES ($1, $2, $3, $4, $5, $6)")
            .persistent(persistent)
            .bind(target).bind(&ns).bind(&channel).bind(&version).bind(tag).bind(blob)
            .execute(&mut *conn)
            .await
            .map_err(pg_error)?;
    }
    type WriteRow = (
        String,
        String,
        String,
        String,
        i32,
        String,
        Option<String>,
        Vec<u8>,
    );
    let writes: Vec<WriteRow> = sqlx::query_as(
        "SELECT checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob FROM checkpoint_writes WHERE thread_id = $1",
    )
    .persistent(persistent)
    .bind(source)
    .fetch_all(&mut *conn)
    .await
    .map_err(pg_error)?;
    for (ns, id, task, path, idx, channel, tag, blob) in writes {
        let slot = |thread_id| Slot::Write {
            thread_id,
            checkpoint_ns: &ns,
            checkpoint_id: &id,
            task_id: &task,
            channel: &channel,
            idx: i64::from(idx),
        };
        let tag = tag.unwrap_or_else(|| TAG_NULL.to_owned());
        let stored = SerializedValue::new(tag, blob);
        let sealed = serde.reseal(&stored, &slot(source), &slot(target))?;
        sqlx::query(
            "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .persistent(persistent)
        .bind(target).bind(&ns).bind(&id).bind(&task).bind(&path).bind(idx).bind(&channel)
        .bind(sealed.type_tag.as_ref()).bind(sealed.bytes.as_ref())
        .execute(&mut *conn)
        .await
        .map_err(pg_error)?;
    }
    Ok(())
}

/// Deletes whole threads (`keep_latest` false) or keeps the newest checkpoint of each
/// namespace plus the ancestors its delta channels still need, with their writes.
pub(crate) async fn prune(
    conn: &mut PgConnection,
    thread_ids: &[String],
    keep_latest: bool,
    persistent: bool,
) -> Result<()> {
    let mut tx = conn.begin().await.map_err(pg_error)?;
    for thread_id in thread_ids {
        if !keep_latest {
            delete_thread(&mut tx, thread_id, persistent)
                .await
                .map_err(pg_error)?;
            continue;
        }
        let namespaces: Vec<String> = sqlx::query_scalar(
            "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = $1",
        )
        .persistent(persistent)
        .bind(thread_id)
        .fetch_all(&mut *tx)
        .await
        .map_err(pg_error)?;
        for ns in namespaces {
            let keep = ids_to_keep(&mut tx, thread_id, &ns, persistent).await?;
            let newest = keep.iter().next_back().cloned().unwrap_or_default();
            let keep: Vec<String> = keep.into_iter().collect();
            sqlx::query(
                "WITH c AS (
                    DELETE FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2
                        AND checkpoint_id <> ALL($3))
                -- Writes for checkpoints not stored yet (newer than the latest) stay.
                DELETE FROM checkpoint_writes WHERE thread_id = $1 AND checkpoint_ns = $2
                    AND checkpoint_id <= $4 AND checkpoint_id <> ALL($3)",
            )
            .persistent(persistent)
            .bind(thread_id)
            .bind(&ns)
            .bind(&keep)
            .bind(&newest)
            .execute(&mut *tx)
            .await
            .map_err(pg_error)?;
            sqlx::query(COLLECT_GARBAGE)
                .persistent(persistent)
                .bind(thread_id)
                .bind(&ns)
                .execute(&mut *tx)
                .await
                .map_err(pg_error)?;
        }
    }
    tx.commit().await.map_err(pg_error)
}

/// A stored checkpoint's parent, JSON and metadata.
async fn checkpoint_at(
    conn: &mut PgConnection,
    thread_id: &str,
    ns: &str,
    id: &str,
    persistent: bool,
) -> Result<Option<(Option<String>, StoredCheckpoint, Value)>> {
    let row: Option<(Option<String>, String, String)> = sqlx::query_as(
        "SELECT parent_checkpoint_id, checkpoint::text, metadata::text FROM checkpoints
         WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3",
    )
    .persistent(persistent)
    .bind(thread_id)
    .bind(ns)
    .bind(id)
    .fetch_optional(&mut *conn)
    .await
    .map_err(pg_error)?;
    row.map(|(parent, checkpoint, metadata)| {
        Ok((
            parent,
            StoredCheckpoint::parse(&checkpoint)?,
            serde_json::from_str(&metadata)
                .map_err(|e| waypoint_checkpoint::Error::serialization("json", e))?,
        ))
    })
    .transpose()
}

/// Whether `checkpoint` has a value for `channel`: inline, or stored under its version.
async fn has_value(
    conn: &mut PgConnection,
    thread_id: &str,
    ns: &str,
    checkpoint: &StoredCheckpoint,
    channel: &str,
    persistent: bool,
) -> Result<bool> {
    let Some(version) = checkpoint.channel_versions.get(channel) else {
        return Ok(false);
    };
    if checkpoint
        .channel_values
        .get(channel)
        .is_some_and(|v| !v.is_null() && *v != Value::Bool(true))
    {
        return Ok(true);
    }
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM checkpoint_blobs WHERE thread_id = $1 AND checkpoint_ns = $2
            AND channel = $3 AND version = $4 AND type <> 'empty')",
    )
    .persistent(persistent)
    .bind(thread_id)
    .bind(ns)
    .bind(channel)
    .bind(version.as_str())
    .fetch_one(&mut *conn)
    .await
    .map_err(pg_error)
}

/// The newest checkpoint id plus the ancestors its delta channels need back to a seed.
async fn ids_to_keep(
    conn: &mut PgConnection,
    thread_id: &str,
    ns: &str,
    persistent: bool,
) -> Result<BTreeSet<String>> {
    let mut keep = BTreeSet::new();
    let latest: Option<String> = sqlx::query_scalar(
        "SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2",
    )
    .persistent(persistent)
    .bind(thread_id)
    .bind(ns)
    .fetch_one(&mut *conn)
    .await
    .map_err(pg_error)?;
    let Some(latest) = latest else {
        return Ok(keep);
    };
    keep.insert(latest.clone());
    let Some((mut next, cp, meta)) =
        checkpoint_at(conn, thread_id, ns, &latest, persistent).await?
    else {
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
            if !has_value(conn, thread_id, ns, &cp, channel, persistent).await? {
                open.push(channel.clone());
            }
        }
    }
    // A parent link back into the walk (rows stored as their own ancestors) ends it.
    let mut walked = BTreeSet::from([latest]);
    while let (false, Some(id)) = (open.is_empty(), next.take()) {
        if !walked.insert(id.clone()) {
            break;
        }
        let Some((parent, ancestor, _)) =
            checkpoint_at(conn, thread_id, ns, &id, persistent).await?
        else {
            break;
        };
        keep.insert(id);
        let mut still_open = Vec::with_capacity(open.len());
        for channel in open {
            if !has_value(conn, thread_id, ns, &ancestor, &channel, persistent).await? {
                still_open.push(channel);
            }
        }
        open = still_open;
        next = parent;
    }
    Ok(keep)
}

/// Reads every row of a query built without values, waiting at most `timeout` for each.
pub(crate) async fn fetch_heads(
    conn: &mut PgConnection,
    q: Query<'static, Postgres, PgArguments>,
    serde: &Serde,
    timeout: Duration,
) -> Result<Vec<Head>> {
    let mut rows = q.fetch(conn);
    let mut out = Vec::new();
    loop {
        let row = tokio::time::timeout(timeout, rows.try_next())
            .await
            .map_err(|_| waypoint_checkpoint::Error::from_failure(Failure::TimedOut(timeout)))?
            .map_err(pg_error)?;
        match row {
            Some(row) => out.push(Head::from_row(&row, 6, serde)?),
            None => return Ok(out),
        }
    }
}

/// A stored value's key: thread, namespace, channel, version.
pub(crate) type ValueKey = (String, String, String, String);

/// The stored rows (`empty` ones included) of the versions the checkpoints of `heads` name,
/// each read once however many checkpoints share it (one query: a primary-key probe per
/// distinct version); a version without a row has no entry.
pub(crate) async fn fetch_values(
    conn: &mut PgConnection,
    heads: &[Head],
    persistent: bool,
    timeout: Duration,
) -> Result<HashMap<ValueKey, StoredValue>> {
    const SQL: &str = "SELECT k.i, b.type, b.blob
        FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY
            AS k(thread_id, checkpoint_ns, channel, version, i)
        CROSS JOIN LATERAL (
            SELECT v.type, v.blob FROM checkpoint_blobs v
            WHERE v.thread_id = k.thread_id AND v.checkpoint_ns = k.checkpoint_ns
                AND v.channel = k.channel AND v.version = k.version
            LIMIT 1
        ) b";
    let mut keys: Vec<(&str, &str, &str, &str)> = heads
        .iter()
        .flat_map(|h| {
            let (thread, ns) = h.scope();
            h.versions().map(move |(c, v)| (thread, ns, c, v))
        })
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let mut out = HashMap::with_capacity(keys.len());
    if keys.is_empty() {
        return Ok(out);
    }
    let mut columns: [Vec<&str>; 4] = Default::default();
    for (t, n, c, v) in &keys {
        for (column, value) in columns.iter_mut().zip([t, n, c, v]) {
            column.push(value);
        }
    }
    let [threads, namespaces, channels, versions] = columns;
    let mut rows = sqlx::query(SQL)
        .persistent(persistent)
        .bind(threads)
        .bind(namespaces)
        .bind(channels)
        .bind(versions)
        .fetch(conn);
    loop {
        let row = tokio::time::timeout(timeout, rows.try_next())
            .await
            .map_err(|_| waypoint_checkpoint::Error::from_failure(Failure::TimedOut(timeout)))?
            .map_err(pg_error)?;
        let Some(row) = row else {
            return Ok(out);
        };
        let i: i64 = row.try_get(0).map_err(pg_error)?;
        let tag: String = row.try_get(1).map_err(pg_error)?;
        let blob: Option<Vec<u8>> = row.try_get(2).map_err(pg_error)?;
        if let Some(&(t, n, c, v)) = usize::try_from(i - 1).ok().and_then(|i| keys.get(i)) {
            out.insert(
                (t.to_owned(), n.to_owned(), c.to_owned(), v.to_owned()),
                (tag, blob.map(Bytes::from)),
            );
        }
    }
}

/// The delta history of some channels in one statement (one round trip), whatever the
/// chain's length.
///
/// `chain` walks parent links from the target (depth 0; `$3` null: the latest), once per
/// channel (channels end independently), and stops at the first ancestor where `get_tuple`
/// would find a value for the channel (`seeded`), so this agrees with the generic walk: a
/// stored value under the version the checkpoint names (not `empty`), or a value inline in
/// `channel_values` (LangGraph's primitives). Each step is a `LIMIT 1` probe by key: with
/// stale statistics the planner would otherwise hash the thread's rows on every step. The
/// row's JSON (compressed when over 2 kB) is expanded once per step (`|| '{}'`) for both of
/// its lookups, rather than decompressed for each (a quarter of the walk's time). The
/// always-true `$4[i] = channel` tells the planner the channel list is short (it guesses ten
/// entries for an array parameter), so the generic plan costs what custom plans do and is
/// cached, rather than the statement being planned again on every call (about 0.5 ms).
/// `path` holds the checkpoints walked: a parent link back into them (rows another writer
/// stored as their own ancestors) ends the walk there, as the generic walk ends; it costs a
/// comparison per step and ancestor, on this fallback only.
///
/// The result holds the ancestors' writes to each channel (`task_id` not null), oldest
/// ancestor first and by `(task_path, task_id, idx)` within one (byte order), as `get_tuple`
/// orders them, and one row per seed (`task_id` null): its stored value if any (a stored
/// value wins over an inline one, as over LangGraph's `true` marker for a snapshot blob),
/// else its inline JSON, and its version. The last column is only there to sort by.
const DELTA_HISTORY: &str = r#"WITH RECURSIVE chain AS (
    SELECT o.channel, t.checkpoint_id, t.parent_checkpoint_id, 0 AS depth, false AS seeded,
        ARRAY[t.checkpoint_id] AS path
    FROM checkpoints t CROSS JOIN unnest($4::text[]) WITH ORDINALITY o(channel, i)
    WHERE ($4::text[])[o.i] = o.channel AND t.thread_id = $1 AND t.checkpoint_ns = $2 AND t.checkpoint_id = coalesce($3::text,
        (SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2))
    UNION ALL
    SELECT chain.channel, c.checkpoint_id, c.parent_checkpoint_id, chain.depth + 1,
        c.checkpoint -> 'channel_values' ? chain.channel OR (SELECT true FROM checkpoint_blobs b
            WHERE b.thread_id = $1 AND b.checkpoint_ns = $2 AND b.channel = chain.channel
                AND b.version = c.checkpoint -> 'channel_versions' ->> chain.channel
                AND b.type <> 'empty' AND b.blob IS NOT NULL
            LIMIT 1) IS NOT NULL,
        chain.path || c.checkpoint_id
    FROM chain CROSS JOIN LATERAL (
        SELECT checkpoint_id, parent_checkpoint_id, checkpoint || '{}'::jsonb AS checkpoint
        FROM checkpoints
        WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = chain.parent_checkpoint_id
            AND checkpoint_id <> ALL(chain.path)
        LIMIT 1) c
    WHERE NOT chain.seeded
)
SELECT chain.depth, w.channel, w.task_id COLLATE "C", w.idx, w.type, w.blob, chain.checkpoint_id,
    NULL::text, w.task_path COLLATE "C"
FROM chain JOIN checkpoint_writes w ON w.thread_id = $1 AND w.checkpoint_ns = $2
    AND w.checkpoint_id = chain.checkpoint_id AND w.channel = chain.channel
WHERE chain.depth > 0
UNION ALL
SELECT chain.depth, chain.channel, NULL, NULL, b.type, b.blob, c.version, c.inline, NULL
FROM chain CROSS JOIN LATERAL (
    SELECT checkpoint -> 'channel_versions' ->> chain.channel AS version,
        (checkpoint -> 'channel_values' -> chain.channel)::text AS inline
    FROM checkpoints
    WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = chain.checkpoint_id
    LIMIT 1) c
LEFT JOIN LATERAL (
    SELECT type, blob FROM checkpoint_blobs
    WHERE thread_id = $1 AND checkpoint_ns = $2 AND channel = chain.channel
        AND version = c.version AND type <> 'empty' AND blob IS NOT NULL
    LIMIT 1) b ON true
WHERE chain.seeded
ORDER BY 1 DESC, 9, 3, 4"#;

/// The delta history through the seed pointers the puts record ([`DELTA_SEEDS`]), in one
/// statement of range reads, none recursive, returning one row of parallel arrays: the
/// target; each wanted channel's seed entry with the seed's own version, stored value and
/// inline value there (the one checkpoint whose JSON is read); every checkpoint's
/// `(id, parent)` from the oldest seed to the target; and their writes to the channels, in
/// no order (the parallel arrays of one aggregate agree). The parent links are walked, and
/// each checkpoint's writes put in `get_tuple`'s order, here: sorting in the statement cost
/// half its server time. The range's bounds are scalar subqueries, so they bound the index
/// scan whatever the planner knows: joined as rows, a table never analyzed got a plan that
/// read the thread's every checkpoint (a fork's 150 ancestors among 1,100 rows: 0.78 ms of
/// the statement's 1.0). A channel
/// the target holds the value of itself (its entry names the target) has no seed entry here.
const DELTA_FROM_SEEDS: &str = r#"WITH t AS (
    SELECT checkpoint_id, waypoint_delta_seeds AS seeds FROM checkpoints
    WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = coalesce($3::text,
        (SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2))
), s AS (
    SELECT o.channel, t.seeds -> o.channel ->> 0 AS seed, t.seeds -> o.channel ->> 1 AS named
    FROM t CROSS JOIN unnest($4::text[]) WITH ORDINALITY o(channel, i)
    WHERE ($4::text[])[o.i] = o.channel
        AND t.seeds -> o.channel ->> 0 IS DISTINCT FROM t.checkpoint_id
), lo AS (
    SELECT min(seed) AS id FROM s HAVING count(*) = count(seed)
), c AS (
    SELECT c.checkpoint_id, c.parent_checkpoint_id FROM checkpoints c
    WHERE c.thread_id = $1 AND c.checkpoint_ns = $2
        AND c.checkpoint_id >= (SELECT id FROM lo) AND c.checkpoint_id <= (SELECT checkpoint_id FROM t)
), w AS (
    SELECT w.checkpoint_id, w.task_id, w.channel, w.idx, w.type, w.blob, w.task_path
    FROM checkpoint_writes w
    WHERE w.thread_id = $1 AND w.checkpoint_ns = $2 AND w.channel = ANY($4::text[])
        AND w.checkpoint_id >= (SELECT id FROM lo) AND w.checkpoint_id < (SELECT checkpoint_id FROM t)
), seeds AS (
    SELECT s.channel, s.seed, s.named, x.version, b.type, b.blob, x.inline
    FROM s LEFT JOIN LATERAL (
        SELECT j -> 'channel_versions' ->> s.channel AS version,
            (j -> 'channel_values' -> s.channel)::text AS inline
        FROM (SELECT checkpoint || '{}'::jsonb AS j FROM checkpoints
            WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = s.seed LIMIT 1) r
    ) x ON true
    LEFT JOIN LATERAL (
        SELECT type, blob FROM checkpoint_blobs
        WHERE thread_id = $1 AND checkpoint_ns = $2 AND channel = s.channel
            AND version = x.version AND type <> 'empty' AND blob IS NOT NULL
        LIMIT 1) b ON true
)
SELECT t.checkpoint_id,
    (SELECT array_agg(channel) FROM seeds), (SELECT array_agg(seed) FROM seeds),
    (SELECT array_agg(named) FROM seeds), (SELECT array_agg(version) FROM seeds),
    (SELECT array_agg(type) FROM seeds), (SELECT array_agg(blob) FROM seeds),
    (SELECT array_agg(inline) FROM seeds),
    (SELECT array_agg(checkpoint_id) FROM c), (SELECT array_agg(parent_checkpoint_id) FROM c),
    w.ids, w.tasks, w.channels, w.idxs, w.types, w.blobs, w.paths
FROM t CROSS JOIN LATERAL (
    SELECT array_agg(checkpoint_id) AS ids, array_agg(task_id) AS tasks,
        array_agg(channel) AS channels, array_agg(idx) AS idxs,
        array_agg(type) AS types, array_agg(blob) AS blobs, array_agg(task_path) AS paths
    FROM w
) w"#;

/// For each channel, the writes (oldest first) and seed that rebuild it at checkpoint `id`
/// of `(thread_id, ns)` (the latest without one), opened by `serde`: read through the seed
/// pointers ([`DELTA_FROM_SEEDS`]) where every channel has one that holds, else by walking
/// parent links ([`DELTA_HISTORY`]). An unknown target gives every channel an empty history.
pub(crate) async fn delta_history(
    conn: &mut PgConnection,
    serde: &Serde,
    target: (&str, &str, Option<&str>),
    channels: &[String],
    persistent: bool,
) -> Result<BTreeMap<String, DeltaChannelHistory>> {
    let wanted = distinct(channels);
    if let Some(out) = from_seeds(&mut *conn, serde, target, &wanted, persistent).await? {
        return Ok(out);
    }
    walk_history(conn, serde, target, &wanted, persistent).await
}

/// The channel names asked, each once, sorted (the order the history statements bind).
fn distinct(channels: &[String]) -> Vec<&str> {
    let set: BTreeSet<&str> = channels.iter().map(String::as_str).collect();
    set.into_iter().collect()
}

/// The history read through the seed pointers ([`DELTA_FROM_SEEDS`]); `None` when a wanted
/// channel has no entry, or its entry does not hold: the seed is not on the target's chain
/// within the rows read, has no value at the version named, or, named without one, is not
/// its thread's first checkpoint or has a value.
async fn from_seeds(
    conn: &mut PgConnection,
    serde: &Serde,
    (thread_id, ns, id): (&str, &str, Option<&str>),
    wanted: &[&str],
    persistent: bool,
) -> Result<Option<BTreeMap<String, DeltaChannelHistory>>> {
    let row = sqlx::query(DELTA_FROM_SEEDS)
        .persistent(persistent)
        .bind(thread_id)
        .bind(ns)
        .bind(id)
        .bind(wanted)
        .fetch_optional(conn)
        .await
        .map_err(pg_error)?;
    match row {
        Some(row) => seeded_history(&row, 0, serde, (thread_id, ns), wanted),
        // An unknown target: nothing to rebuild from (as the walk finds).
        None => Ok(Some(
            wanted
                .iter()
                .map(|c| ((*c).to_owned(), DeltaChannelHistory::default()))
                .collect(),
        )),
    }
}

/// The history of the `wanted` channels in a [`DELTA_FROM_SEEDS`] row whose columns start at
/// `at` (it may hold other channels); `None` where [`from_seeds`] says.
fn seeded_history(
    row: &PgRow,
    at: usize,
    serde: &Serde,
    (thread_id, ns): (&str, &str),
    wanted: &[&str],
) -> Result<Option<BTreeMap<String, DeltaChannelHistory>>> {
    let mut out: BTreeMap<String, DeltaChannelHistory> = wanted
        .iter()
        .map(|c| ((*c).to_owned(), DeltaChannelHistory::default()))
        .collect();
    let Some(target): Option<String> = row.try_get(at).map_err(pg_error)? else {
        return Ok(None);
    };
    // The arrays, read in place: each seed entry's, the chain's and the writes'.
    let column = |i: usize| Elements::of(row, at + i);
    let (channels, seeds, named, versions) = (column(1)?, column(2)?, column(3)?, column(4)?);
    let (tags, values, inlines) = (column(5)?, column(6)?, column(7)?);
    let (ids, parent_ids) = (column(8)?, column(9)?);
    let mut parents: foldhash::HashMap<&str, Option<&str>> = foldhash::HashMap::default();
    parents.reserve(ids.len());
    for i in 0..ids.len() {
        if let Some(id) = ids.text(i)? {
            parents.insert(id, parent_ids.text(i)?);
        }
    }
    let (w_ids, w_tasks, w_channels) = (column(10)?, column(11)?, column(12)?);
    let w_idxs = column(13)?;
    let w_idxs = (0..w_idxs.len())
        .map(|i| w_idxs.int4(i))
        .collect::<Result<Vec<_>>>()?;
    let (w_tags, w_blobs, w_paths) = (column(14)?, column(15)?, column(16)?);
    // The writes grouped by channel and checkpoint, each group in `get_tuple`'s order: task
    // path, task id (both by bytes, as `COLLATE "C"`), index. One sort and one map of ranges,
    // not a list allocated per checkpoint.
    let group = |w: usize| (w_channels.bytes(w), w_ids.bytes(w));
    let key = |w: usize| (group(w), w_paths.bytes(w), w_tasks.bytes(w), w_idxs.get(w));
    let mut sorted: Vec<usize> = (0..w_ids.len()).collect();
    sorted.sort_unstable_by(|&a, &b| key(a).cmp(&key(b)));
    let mut writes: foldhash::HashMap<(&[u8], &[u8]), std::ops::Range<usize>> =
        foldhash::HashMap::default();
    writes.reserve(sorted.len());
    let mut start = 0;
    for run in sorted.chunk_by(|&a, &b| group(a) == group(b)) {
        if let (Some(channel), Some(id)) = group(run[0]) {
            writes.insert((channel, id), start..start + run.len());
        }
        start += run.len();
    }
    let mut found = 0;
    for i in 0..channels.len() {
        let Some(channel) = channels.text(i)?.filter(|c| wanted.contains(c)) else {
            continue;
        };
        found += 1;
        let Some(seed) = seeds.text(i)? else {
            return Ok(None);
        };
        // The target's chain, nearest ancestor first, down to the seed.
        let mut chain = Vec::new();
        let mut next = parents.get(target.as_str()).copied().flatten();
        loop {
            let Some(id) = next else {
                return Ok(None);
            };
            let Some(&parent) = parents.get(id) else {
                return Ok(None);
            };
            next = parent;
            chain.push(id);
            if id == seed {
                break;
            }
            // Longer than the rows read: the parent links loop; the walk decides.
            if chain.len() > parents.len() {
                return Ok(None);
            }
        }
        let stored = match (tags.text(i)?, values.bytes(i), inlines.text(i)?) {
            (Some(tag), Some(blob), _) => Some(SerializedValue::new(tag.to_owned(), blob.to_vec())),
            (_, _, Some(inline)) => Some(inline_value(inline)?),
            _ => None,
        };
        let version = versions.text(i)?;
        let history = out.entry(channel.to_owned()).or_default();
        match (named.text(i)?, stored) {
            // The seed holds a value at the version its entry names.
            (Some(named), Some(value)) if version == Some(named) => {
                history.seed = Some(open_seed(serde, (thread_id, ns), channel, named, value)?);
            }
            // The history starts empty at the thread's first checkpoint.
            (None, None) if next.is_none() => {}
            _ => return Ok(None),
        }
        for id in chain.iter().rev() {
            let group = writes.get(&(channel.as_bytes(), id.as_bytes())).cloned();
            for &w in &sorted[group.unwrap_or_default()] {
                let task_id = w_tasks.text(w)?.unwrap_or_default().to_owned();
                let idx = w_idxs.get(w).copied().flatten().unwrap_or_default();
                let tag = w_tags.text(w)?.map(str::to_owned);
                let blob = w_blobs.bytes(w).map(<[u8]>::to_vec);
                let write =
                    open_write(serde, (thread_id, ns, id), channel, task_id, idx, tag, blob)?;
                history.writes.push(write);
            }
        }
    }
    // A wanted channel without an entry (or one the target holds the value of itself).
    Ok((found == wanted.len()).then_some(out))
}

/// The columns [`get`] reads (see [`select`]), before [`DELTA_FROM_SEEDS`]'s in
/// [`get_with_history`]'s row.
const GET_COLUMNS: usize = 15;

/// The checkpoint `(thread, ns, id)` (the newest of `(thread, ns)` without an id) with the
/// delta histories of those of `channels` it stores no value for: in one statement, its
/// [`get`] row joined to the [`DELTA_FROM_SEEDS`] row of every channel asked (one snapshot,
/// so both read the same checkpoint), where the seed pointers answer; else the history is
/// walked ([`DELTA_HISTORY`]) in a second statement.
pub(crate) async fn get_with_history(
    conn: &mut PgConnection,
    serde: &Serde,
    (thread_id, ns, id): (&str, &str, Option<&str>),
    channels: &[String],
    persistent: bool,
) -> Result<Option<TupleWithHistory>> {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| {
        let get = select(
            "WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id = coalesce($3::text,
        (SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2))",
            true,
        );
        format!("SELECT g.*, h.* FROM ({get}) g LEFT JOIN ({DELTA_FROM_SEEDS}) h ON true")
    });
    let asked = distinct(channels);
    let row = sqlx::query(sql)
        .persistent(persistent)
        .bind(thread_id)
        .bind(ns)
        .bind(id)
        .bind(&asked)
        .fetch_optional(&mut *conn)
        .await
        .map_err(pg_error)?;
    let Some(row) = row else {
        return Ok(None);
    };
    // Read without an id, the row is its namespace's newest.
    let tuple = tuple_from_row(&row, serde, id.is_none())?;
    let missing = unvalued_channels(&tuple, channels);
    let wanted: Vec<&str> = missing.iter().map(String::as_str).collect();
    let history = match seeded_history(&row, GET_COLUMNS, serde, (thread_id, ns), &wanted)? {
        Some(history) => history,
        None => {
            let at = tuple.config.checkpoint_id.as_deref();
            walk_history(conn, serde, (thread_id, ns, at), &wanted, persistent).await?
        }
    };
    Ok(Some((tuple, history)))
}

/// The delta history by walking parent links on the server ([`DELTA_HISTORY`]).
async fn walk_history(
    conn: &mut PgConnection,
    serde: &Serde,
    (thread_id, ns, id): (&str, &str, Option<&str>),
    wanted: &[&str],
    persistent: bool,
) -> Result<BTreeMap<String, DeltaChannelHistory>> {
    let mut out: BTreeMap<String, DeltaChannelHistory> = wanted
        .iter()
        .map(|c| ((*c).to_owned(), DeltaChannelHistory::default()))
        .collect();
    let rows = sqlx::query(DELTA_HISTORY)
        .persistent(persistent)
        .bind(thread_id)
        .bind(ns)
        .bind(id)
        .bind(wanted)
        .fetch_all(conn)
        .await
        .map_err(pg_error)?;
    for row in rows {
        let channel: String = row.try_get(1).map_err(pg_error)?;
        let Some(history) = out.get_mut(&channel) else {
            continue;
        };
        let task_id: Option<String> = row.try_get(2).map_err(pg_error)?;
        let tag: Option<String> = row.try_get(4).map_err(pg_error)?;
        let blob: Option<Vec<u8>> = row.try_get(5).map_err(pg_error)?;
        let key: Option<String> = row.try_get(6).map_err(pg_error)?;
        match task_id {
            Some(task_id) => {
                let idx: i32 = row.try_get(3).map_err(pg_error)?;
                let checkpoint_id = key.unwrap_or_default();
                let write = open_write(
                    serde,
                    (thread_id, ns, &checkpoint_id),
                    &channel,
                    task_id,
                    idx,
                    tag,
                    blob,
                )?;
                history.writes.push(write);
            }
            None => {
                let version = key.unwrap_or_default();
                let inline: Option<String> = row.try_get(7).map_err(pg_error)?;
                let value = match (tag, blob, inline) {
                    (Some(tag), Some(blob), _) => SerializedValue::new(tag, blob),
                    (_, _, Some(inline)) => inline_value(&inline)?,
                    // The walk closed the channel on one of the two, so both are not missing.
                    _ => continue,
                };
                history.seed = Some(open_seed(
                    serde,
                    (thread_id, ns),
                    &channel,
                    &version,
                    value,
                )?);
            }
        }
    }
    Ok(out)
}

/// A stored write of `channel` on checkpoint `(thread, ns, id)`, opened for its slot.
fn open_write(
    serde: &Serde,
    (thread_id, checkpoint_ns, checkpoint_id): (&str, &str, &str),
    channel: &str,
    task_id: String,
    idx: i32,
    tag: Option<String>,
    blob: Option<Vec<u8>>,
) -> Result<PendingWrite> {
    let slot = Slot::Write {
        thread_id,
        checkpoint_ns,
        checkpoint_id,
        task_id: &task_id,
        channel,
        idx: i64::from(idx),
    };
    let tag = tag.unwrap_or_else(|| TAG_NULL.to_owned());
    let value = serde.open(&SerializedValue::new(tag, blob.unwrap_or_default()), &slot)?;
    Ok(PendingWrite {
        task_id,
        channel: channel.to_owned(),
        value,
    })
}

/// A seed: `channel`'s value stored at `version` in `(thread, ns)`, opened for its slot.
fn open_seed(
    serde: &Serde,
    (thread_id, checkpoint_ns): (&str, &str),
    channel: &str,
    version: &str,
    value: SerializedValue,
) -> Result<SerializedValue> {
    let slot = Slot::Channel {
        thread_id,
        checkpoint_ns,
        channel,
        version,
    };
    serde.open(&value, &slot)
}

/// An inline `channel_values` entry (JSON text) as a value, as `get_tuple` reads it.
fn inline_value(text: &str) -> Result<SerializedValue> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| waypoint_checkpoint::Error::serialization("json", e))?;
    crate::convert::inline_value(&value)
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use waypoint_checkpoint::raw::{unvalued_channels, walk_delta_history};
    use waypoint_checkpoint::{CheckpointConfig, CheckpointSaver, CheckpointSaverExt, Serde};

    use crate::{PostgresConfig, PostgresSaver};

    /// A config for the test server (none without one): a fresh schema, two connections.
    fn test_config() -> Option<PostgresConfig> {
        let url = waypoint_test_kit::postgres_url()?;
        let schema = waypoint_test_kit::fresh_name("wp_test");
        Some(PostgresConfig::new(url).schema(schema).max_connections(2))
    }

    /// Rows as langgraph-checkpoint-postgres writes them (inline primitives, `null`, a `true`
    /// marker whose blob wins, `empty` rows, integer versions) under channel names a JSON
    /// path would need escaped: the one-statement history agrees with the generic walk over
    /// `get_tuple` at every checkpoint.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn delta_history_matches_generic_walk_on_langgraph_rows() {
        let Some(config) = test_config() else {
            return;
        };
        let saver = PostgresSaver::connect(config).await.expect("connect");
        saver.setup().await.expect("setup");
        let pool = saver.pool();
        let serde = Serde::default();
        let ids: Vec<String> = (0..4).map(waypoint_checkpoint::checkpoint_id).collect();
        let values = [
            json!({"flag": true, "nothing": null, "d": true, "text": "hi"}),
            json!({}),
            json!({"a.b": 5}),
            json!({}),
        ];
        for (i, id) in ids.iter().enumerate() {
            let v = i + 1;
            let checkpoint = json!({
                "v": 4, "id": id, "ts": "2026-01-01T00:00:00+00:00",
                "channel_values": values[i],
                "channel_versions": {"flag": v, "nothing": v, "d": v, "text": v, "a.b": v, "q\"x": v},
                "versions_seen": {}
            });
            let parent = i.checked_sub(1).map(|p| ids[p].clone());
            sqlx::query(
                "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
                 VALUES ('t', '', $1, $2, $3::jsonb, '{}'::jsonb)",
            )
            .bind(id)
            .bind(parent)
            .bind(checkpoint.to_string())
            .execute(pool)
            .await
            .expect("checkpoint");
            let config = CheckpointConfig::new("t").with_ns("").with_id(id.clone());
            // Paths order the tasks against their ids.
            for (task, path) in [("t2", "Zed"), ("t1", "alpha")] {
                let writes = ["flag", "nothing", "d", "text", "a.b", "q\"x"]
                    .iter()
                    .map(|c| {
                        (
                            (*c).to_owned(),
                            serde.dumps(&json!(format!("{task} {i}"))).expect("dumps"),
                        )
                    })
                    .collect();
                saver
                    .put_writes(&config, writes, task, path)
                    .await
                    .expect("writes");
            }
        }
        let blob = serde.dumps(&json!([7])).expect("dumps");
        for (channel, version, tag) in [
            ("d", "1", blob.type_tag.as_ref()),
            ("q\"x", "1", "empty"),
            ("q\"x", "2", blob.type_tag.as_ref()),
        ] {
            let bytes = (tag != "empty").then(|| blob.bytes.to_vec());
            sqlx::query("INSERT INTO checkpoint_blobs VALUES ('t', '', $1, $2, $3, $4)")
                .bind(channel)
                .bind(version)
                .bind(tag)
                .bind(bytes)
                .execute(pool)
                .await
                .expect("blob");
        }
        let wanted: Vec<String> = [
            "flag", "nothing", "d", "text", "a.b", "q\"x", "missing", "d",
        ]
        .iter()
        .map(|c| (*c).to_owned())
        .collect();
        let mut targets: Vec<CheckpointConfig> = ids
            .iter()
            .map(|id| CheckpointConfig::new("t").with_ns("").with_id(id.clone()))
            .collect();
        targets.push(CheckpointConfig::new("t").with_ns(""));
        for config in &targets {
            let fast = saver
                .delta_channel_history(config, &wanted)
                .await
                .expect("history");
            let slow = walk_delta_history(&saver, config, &wanted)
                .await
                .expect("walk");
            assert_eq!(fast, slow, "at {config:?}");
        }
        let latest = saver
            .delta_channel_history(&targets[3], &wanted)
            .await
            .expect("history");
        let seed = |c: &str| {
            latest[c]
                .seed
                .as_ref()
                .map(|s| serde.loads::<serde_json::Value>(s).expect("loads"))
        };
        assert_eq!(seed("d"), Some(json!([7])));
        assert_eq!(seed("flag"), Some(json!(true)));
        assert_eq!(seed("a.b"), Some(json!(5)));
        assert_eq!(seed("q\"x"), Some(json!([7])));
        assert_eq!(seed("missing"), None);
        assert_eq!(latest["a.b"].writes.len(), 2);
    }

    /// A put of step `step` under `parent` with, for each `(channel, version, snapshot)`,
    /// the channel counted as a delta channel in the metadata (as the runtime counts them),
    /// its value stored when `snapshot` holds one, and two writes of it on the new checkpoint.
    async fn delta_put(
        saver: &PostgresSaver,
        parent: &CheckpointConfig,
        step: i64,
        channels: &[(&str, &str, Option<i64>)],
    ) -> CheckpointConfig {
        let serde = Serde::default();
        let mut checkpoint = waypoint_checkpoint::Checkpoint::new(step);
        let mut new_versions = waypoint_checkpoint::ChannelVersions::new();
        let mut counters = serde_json::Map::new();
        for (channel, version, snapshot) in channels {
            let version = waypoint_checkpoint::ChannelVersion::from(*version);
            checkpoint
                .channel_versions
                .insert((*channel).to_owned(), version.clone());
            new_versions.insert((*channel).to_owned(), version);
            if let Some(value) = snapshot {
                let value = serde.dumps(&json!([value])).expect("dumps");
                checkpoint
                    .channel_values
                    .insert((*channel).to_owned(), value);
            }
            counters.insert((*channel).to_owned(), json!(step));
        }
        let mut metadata = waypoint_checkpoint::CheckpointMetadata::default();
        if !counters.is_empty() {
            metadata.extra.insert(
                waypoint_checkpoint::metadata::DELTA_COUNTERS.to_owned(),
                serde_json::Value::Object(counters),
            );
        }
        let stored = saver
            .put(parent, checkpoint, metadata, new_versions)
            .await
            .expect("put");
        for (task, path) in [("t2", "b"), ("t1", "a")] {
            let writes = channels
                .iter()
                .map(|(c, _, _)| {
                    let value = serde.dumps(&json!([format!("{task} {step}")]));
                    ((*c).to_owned(), value.expect("dumps"))
                })
                .collect();
            saver
                .put_writes(&stored, writes, task, path)
                .await
                .expect("writes");
        }
        stored
    }

    /// A thread written as the runtime writes one in Waypoint's encoding: delta channels
    /// counted in the metadata and stored as writes, a snapshot now and then, a step handing
    /// the seed's version over again, a fork storing a snapshot, a fork without one, a second
    /// channel that starts later. At every checkpoint the history read through the seed
    /// pointers is the generic walk's, and the pointers answer without a walk where every
    /// wanted channel has one; with the pointers gone (rows written before them) the walk
    /// answers the same.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn delta_history_through_seed_pointers_matches_the_walk() {
        let Some(config) = test_config() else {
            return;
        };
        let config = config.langgraph_values(false);
        let saver = PostgresSaver::connect(config).await.expect("connect");
        let root = delta_put(&saver, &CheckpointConfig::new("t"), -1, &[]).await;
        let mut main = vec![root.clone()];
        for step in 1..=8i64 {
            let m = format!("m{step:03}");
            let mut channels = vec![(
                "m",
                // Step 5 hands over the version step 4 stored a value under.
                if step == 5 { "m004" } else { m.as_str() },
                (step == 4).then_some(step),
            )];
            let n = format!("n{step:03}");
            if step >= 6 {
                channels.push(("n", n.as_str(), (step == 7).then_some(step)));
            }
            let parent = main.last().expect("parent").clone();
            main.push(delta_put(&saver, &parent, step, &channels).await);
        }
        let fork = delta_put(&saver, &main[3], 4, &[("m", "f001", Some(40))]).await;
        let forked = delta_put(&saver, &fork, 5, &[("m", "f002", None)]).await;
        let other = delta_put(&saver, &main[2], 3, &[("m", "g001", None)]).await;
        let strings = |c: &[&str]| c.iter().map(|c| (*c).to_owned()).collect::<Vec<_>>();
        let (m, mn, unknown) = (strings(&["m"]), strings(&["m", "n"]), strings(&["m", "x"]));
        // Every checkpoint reads through them but the root (nothing counted) and those that
        // hold the value themselves (a history of their ancestors: the runtime never asks).
        let holding = [&main[4], &main[5], &fork];
        let mut through: Vec<(CheckpointConfig, Vec<String>)> = main[1..]
            .iter()
            .chain([&forked, &other])
            .filter(|c| !holding.contains(c))
            .map(|c| (c.clone(), m.clone()))
            .collect();
        through.push((main[8].clone(), mn.clone()));
        // The latest: the last fork, which counts `m` only.
        through.push((CheckpointConfig::new("t"), m.clone()));
        let mut walked: Vec<(CheckpointConfig, Vec<String>)> = vec![
            (root.clone(), m.clone()),
            (main[6].clone(), mn.clone()),
            (main[8].clone(), unknown.clone()),
        ];
        walked.extend(holding.iter().map(|c| ((*c).clone(), m.clone())));
        let unknown_target = CheckpointConfig::new("t").with_id("nope");
        let all: Vec<_> = through
            .iter()
            .chain(&walked)
            .cloned()
            .chain([(unknown_target.clone(), m.clone())])
            .collect();
        let serde = Serde::default();
        let mut conn = saver.pool().acquire().await.expect("connection");
        for cleared in [false, true] {
            for (config, channels) in &all {
                let fast = saver
                    .delta_channel_history(config, channels)
                    .await
                    .expect("history");
                let slow = walk_delta_history(&saver, config, channels)
                    .await
                    .expect("walk");
                assert_eq!(fast, slow, "at {config:?} {channels:?}, cleared {cleared}");
                // The checkpoint with its history in one read answers as the two reads.
                let both = saver
                    .get_tuple_with_history(config, channels)
                    .await
                    .expect("read");
                let apart = match saver.get_tuple(config).await.expect("get") {
                    Some(tuple) => {
                        let missing = unvalued_channels(&tuple, channels);
                        let history = walk_delta_history(&saver, &tuple.config, &missing)
                            .await
                            .expect("walk");
                        Some((tuple, history))
                    }
                    None => None,
                };
                assert_eq!(both, apart, "at {config:?} {channels:?}, cleared {cleared}");
            }
            // Through the pointers while they are set; never where the walk must decide.
            let expected = through
                .iter()
                .map(|at| (at, !cleared))
                .chain(walked.iter().map(|at| (at, false)));
            for ((config, channels), found) in expected {
                let wanted: Vec<&str> = channels.iter().map(String::as_str).collect();
                let target = (
                    config.thread_id.as_str(),
                    config.ns(),
                    config.checkpoint_id.as_deref(),
                );
                let read = super::from_seeds(&mut conn, &serde, target, &wanted, true)
                    .await
                    .expect("read");
                assert_eq!(read.is_some(), found, "at {config:?} {channels:?}");
            }
            sqlx::query("UPDATE checkpoints SET waypoint_delta_seeds = NULL")
                .execute(&mut *conn)
                .await
                .expect("clear");
        }
        // The seed of the step that handed the stored version over again is that step.
        let history = saver
            .delta_channel_history(&main[6], &m)
            .await
            .expect("history");
        let seed: serde_json::Value = serde
            .loads(history["m"].seed.as_ref().expect("seed"))
            .expect("loads");
        assert_eq!(seed, json!([4]));
        assert_eq!(history["m"].writes.len(), 2);
    }

    /// Behind a transaction pooler a put is one message with its parameters written as
    /// literals: ids, channel names, metadata and values holding quotes, backslashes, `$n`,
    /// non-ASCII text and every byte value read back as they were put, parent and all.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pooled_put_writes_its_literals_back_exactly() {
        let Some(config) = test_config() else {
            return;
        };
        let direct = PostgresSaver::connect(config.clone())
            .await
            .expect("connect");
        // BEGIN and SET LOCAL work on a direct connection too.
        let pooled = PostgresSaver::connect(config.transaction_pooler(true))
            .await
            .expect("connect pooled");
        let serde = Serde::default();
        let odd = "it's \\ \"q\" $1 $22 E'x' \\x00 ü 😀";
        let bytes: Vec<u8> = (0..=255).collect();
        let value = json!({"text": odd, "bytes": bytes});
        let thread = format!("t {odd}");
        let channel = format!("c {odd}");
        let mut parent = CheckpointConfig::new(thread.as_str()).with_ns(odd);
        for step in 0..2 {
            let mut checkpoint = waypoint_checkpoint::Checkpoint::new(step);
            let version = waypoint_checkpoint::ChannelVersion::from(step as u64 + 1);
            checkpoint
                .channel_versions
                .insert(channel.clone(), version.clone());
            checkpoint
                .channel_values
                .insert(channel.clone(), serde.dumps(&value).expect("dumps"));
            let mut metadata = waypoint_checkpoint::CheckpointMetadata::default();
            metadata.extra.insert(odd.to_owned(), json!(odd));
            parent = pooled
                .put(
                    &parent,
                    checkpoint,
                    metadata,
                    [(channel.clone(), version)].into(),
                )
                .await
                .expect("put");
        }
        let tuple = direct
            .get_tuple(&CheckpointConfig::new(thread.as_str()).with_ns(odd))
            .await
            .expect("get")
            .expect("stored");
        assert_eq!(tuple.config.checkpoint_id, parent.checkpoint_id);
        assert!(tuple.parent_config.is_some());
        let read: serde_json::Value = serde
            .loads(&tuple.checkpoint.channel_values[&channel])
            .expect("loads");
        assert_eq!(read, value);
        assert_eq!(tuple.metadata.extra.get(odd), Some(&json!(odd)));
    }

    /// A checkpoint row as LangGraph writes it (strings, numbers, booleans and null inline,
    /// no blob rows), continued by a Waypoint put that versions one channel anew: the new
    /// row carries the other inline values, so both Waypoint and a Python reader (which
    /// reads the row's JSON) see the thread whole.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_put_carries_the_parents_inline_values_forward() {
        let Some(config) = test_config() else {
            return;
        };
        let saver = PostgresSaver::connect(config).await.expect("connect");
        saver.setup().await.expect("setup");
        let parent = waypoint_checkpoint::checkpoint_id(0);
        let inline =
            json!({"topic": "cats", "count": 3, "ratio": 0.5, "done": false, "nothing": null});
        let row = json!({
            "v": 4, "id": parent, "ts": "2026-01-01T00:00:00+00:00",
            "channel_values": inline,
            "channel_versions": {"topic": "1", "count": "1", "ratio": "1", "done": "1", "nothing": "1"},
            "versions_seen": {}
        });
        sqlx::query(
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
             VALUES ('t', '', $1, NULL, $2::jsonb, '{}'::jsonb)",
        )
        .bind(&parent)
        .bind(row.to_string())
        .execute(saver.pool())
        .await
        .expect("row");
        let serde = Serde::default();
        let mut child = waypoint_checkpoint::Checkpoint::new(1);
        child.channel_versions = [
            ("topic", "1"),
            ("count", "2"),
            ("ratio", "1"),
            ("done", "1"),
            ("nothing", "1"),
        ]
        .into_iter()
        .map(|(c, v)| (c.to_owned(), v.into()))
        .collect();
        child
            .channel_values
            .insert("count".into(), serde.dumps(&4).expect("dumps"));
        let new_versions = [("count".to_owned(), "2".into())].into();
        let stored = saver
            .put(
                &CheckpointConfig::new("t").with_id(parent.clone()),
                child,
                waypoint_checkpoint::CheckpointMetadata::default(),
                new_versions,
            )
            .await
            .expect("put");
        let tuple = saver
            .get_tuple(&stored)
            .await
            .expect("get")
            .expect("stored");
        let values: serde_json::Map<String, serde_json::Value> = tuple
            .checkpoint
            .channel_values
            .iter()
            .map(|(c, v)| (c.clone(), serde.loads(v).expect("loads")))
            .collect();
        assert_eq!(
            serde_json::Value::Object(values),
            json!({"topic": "cats", "count": 4, "ratio": 0.5, "done": false, "nothing": null})
        );
        // What a Python reader sees: the row's own inline values (count is a blob now).
        let carried: String = sqlx::query_scalar(
            "SELECT (checkpoint -> 'channel_values')::text FROM checkpoints WHERE checkpoint_id = $1",
        )
        .bind(stored.checkpoint_id.as_deref())
        .fetch_one(saver.pool())
        .await
        .expect("row");
        let carried: serde_json::Value = serde_json::from_str(&carried).expect("json");
        assert_eq!(
            carried,
            json!({"topic": "cats", "ratio": 0.5, "done": false, "nothing": null})
        );
    }

    /// Rows another writer stored as their own ancestors (a checkpoint its own parent, two
    /// checkpoints each other's): reads, the delta history (as the generic walk answers),
    /// prune and copy finish. The timeout only guards the test against hanging.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn parent_links_that_loop_end_every_walk() {
        let Some(config) = test_config() else {
            return;
        };
        let saver = PostgresSaver::connect(config).await.expect("connect");
        let serde = Serde::default();
        let ids: Vec<String> = (0..3).map(waypoint_checkpoint::checkpoint_id).collect();
        // (thread, id, parent): "self" names itself, "pair" loops through two rows.
        let rows = [
            ("self", &ids[0], &ids[0]),
            ("pair", &ids[1], &ids[2]),
            ("pair", &ids[2], &ids[1]),
        ];
        for (thread, id, parent) in rows {
            let checkpoint = json!({
                "v": 4, "id": id, "ts": "2026-01-01T00:00:00+00:00",
                "channel_values": {}, "channel_versions": {"m": "1"}, "versions_seen": {}
            });
            sqlx::query(
                "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
                 VALUES ($1, '', $2, $3, $4::jsonb, '{\"counters_since_delta_snapshot\": {\"m\": 1}}'::jsonb)",
            )
            .bind(thread)
            .bind(id)
            .bind(parent)
            .bind(checkpoint.to_string())
            .execute(saver.pool())
            .await
            .expect("row");
            let config = CheckpointConfig::new(thread)
                .with_ns("")
                .with_id(id.clone());
            let write = serde.dumps(&json!([id])).expect("dumps");
            saver
                .put_writes(&config, vec![("m".into(), write)], "t", "")
                .await
                .expect("writes");
        }
        let wanted = vec!["m".to_owned()];
        let every_walk = async {
            for (thread, id, _) in rows {
                for config in [
                    CheckpointConfig::new(thread)
                        .with_ns("")
                        .with_id(id.clone()),
                    CheckpointConfig::new(thread).with_ns(""),
                ] {
                    let tuple = saver.get_tuple(&config).await.expect("get");
                    assert!(tuple.is_some(), "{thread} {id}");
                    let history = saver
                        .delta_channel_history(&config, &wanted)
                        .await
                        .expect("history");
                    let walked = walk_delta_history(&saver, &config, &wanted)
                        .await
                        .expect("walk");
                    assert_eq!(history, walked, "{thread} {id}");
                }
                let listed = saver
                    .list(Some(&CheckpointConfig::new(thread)), &Default::default())
                    .await
                    .expect("list");
                assert!(!listed.is_empty());
            }
            saver.copy_thread("pair", "copy").await.expect("copy");
            assert_eq!(saver.list_thread("copy").await.expect("list").len(), 2);
            saver
                .prune(
                    &["self".into(), "pair".into(), "copy".into()],
                    waypoint_checkpoint::PruneStrategy::KeepLatest,
                )
                .await
                .expect("prune");
            // The loop keeps both rows of the pair: each is the other's ancestor.
            assert_eq!(saver.list_thread("pair").await.expect("list").len(), 2);
            assert_eq!(saver.list_thread("self").await.expect("list").len(), 1);
        };
        tokio::time::timeout(std::time::Duration::from_secs(60), every_walk)
            .await
            .expect("a walk looped");
    }
}
