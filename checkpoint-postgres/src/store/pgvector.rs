//! The pgvector mode ([`PostgresConfig::pgvector`](crate::PostgresConfig::pgvector)): vectors
//! in LangGraph's own `store_vectors` table (its schema, its `vector_migrations` numbering,
//! its `store_vectors_embedding_idx` HNSW index per distance), searched inside PostgreSQL, so
//! a Python `PostgresStore` with an index and a Waypoint store share items and vectors, and
//! no vector is held in process memory.
//!
//! The extension's type and operators are named with the schema the extension lives in (it
//! is created in `public` when missing), so a store in any schema finds them.

use std::collections::BTreeMap;

use sqlx::{Connection, PgConnection, Row as _};
use waypoint_store::raw::{FieldVector, Row, VectorQuery};
use waypoint_store::{Distance, Error, ItemKey, Result};

use super::convert::{Timestamp, pg_error, scanned_row};
use super::queries::{self, ITEM_COLUMNS, Prepared, last_of_each_field};

/// Items with their new vectors.
pub(crate) type Owners<'a> = [(&'a ItemKey, &'a [FieldVector])];

/// The statements of one store's pgvector mode, built once for its distance and the schema
/// holding the extension.
pub(crate) struct Pgvector {
    /// Inserts `($1 prefixes, $2 keys, $3 fields, $4 embeddings as text)` at `$5`.
    insert: String,
    /// The nearest rows: `$1` query, `$2` now, `$3` containment, `$4` prefix, `$5` row limit.
    search: String,
}

/// The distance operator (ascending: nearest first), the index's operator class suffix, and
/// the score LangGraph reports for a distance `b.d`.
fn distance_sql(distance: Distance) -> (&'static str, &'static str, &'static str) {
    match distance {
        Distance::Cosine => ("<=>", "cosine_ops", "1 - b.d"),
        Distance::Dot => ("<#>", "ip_ops", "-b.d"),
        Distance::L2 => ("<->", "l2_ops", "-b.d"),
    }
}

/// `name` quoted as a SQL identifier.
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A vector as pgvector's text input reads it.
fn vector_text(vector: &[f32]) -> String {
    let mut text = String::with_capacity(vector.len() * 10 + 2);
    text.push('[');
    for (i, x) in vector.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&x.to_string());
    }
    text.push(']');
    text
}

impl Pgvector {
    /// With `migrate`, creates the extension (in `public`) if the server has it but the
    /// database does not, then runs LangGraph's vector migrations for `dims` and `distance`;
    /// returns the statements. A server without pgvector, a database without the extension
    /// (not `migrate`), or a `store_vectors` of other dimensions, is [`Error::InvalidConfig`].
    pub(crate) async fn setup(
        conn: &mut PgConnection,
        (dims, distance): (usize, Distance),
        lock: i64,
        migrate: bool,
    ) -> Result<Self> {
        let dims_sql = i32::try_from(dims)
            .ok()
            .filter(|&d| d <= 16_000)
            .ok_or_else(|| {
                Error::InvalidConfig(format!(
                    "pgvector stores at most 16000 dimensions, the index has {dims}"
                ))
            })?;
        let mut tx = conn.begin().await.map_err(pg_error)?;
        // One process at a time: CREATE EXTENSION and CREATE TABLE race otherwise.
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(lock ^ 0x7067_7665_6374)
            .execute(&mut *tx)
            .await
            .map_err(pg_error)?;
        let available: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')",
        )
        .fetch_one(&mut *tx)
        .await
        .map_err(pg_error)?;
        if !available {
            return Err(Error::InvalidConfig(String::from(
                "the store's pgvector mode needs the `vector` extension (pgvector), which this \
                 PostgreSQL server does not have: install it, or leave pgvector mode off for the \
                 in-process index",
            )));
        }
        let created: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')",
        )
        .fetch_one(&mut *tx)
        .await
        .map_err(pg_error)?;
        if !migrate {
            if !created {
                return Err(Error::InvalidConfig(String::from(
                    "the store's pgvector mode needs the `vector` extension in this database: \
                     run setup (or open the store with auto_setup on) first",
                )));
            }
            let home = extension_schema(&mut tx).await?;
            tx.commit().await.map_err(pg_error)?;
            let (op, _, score) = distance_sql(distance);
            return Ok(Self::statements(&home, op, score));
        }
        sqlx::query("CREATE TABLE IF NOT EXISTS vector_migrations (v INTEGER PRIMARY KEY)")
            .execute(&mut *tx)
            .await
            .map_err(pg_error)?;
        let version: i32 = sqlx::query_scalar("SELECT coalesce(max(v), -1) FROM vector_migrations")
            .fetch_one(&mut *tx)
            .await
            .map_err(pg_error)?;
        if !created {
            sqlx::query("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
                .execute(&mut *tx)
                .await
                .map_err(pg_error)?;
        }
        let home = extension_schema(&mut tx).await?;
        let (op, ops, score) = distance_sql(distance);
        // LangGraph's numbering: 0 the extension, 1 the table, 2 the HNSW index.
        let steps = [
            String::new(),
            format!(
                "CREATE TABLE IF NOT EXISTS store_vectors (
                    prefix text NOT NULL,
                    key text NOT NULL,
                    field_name text NOT NULL,
                    embedding {home}.vector({dims_sql}),
                    created_at TIMESTAMP WITH TIME ZONE DEFAULT CURRENT_TIMESTAMP,
                    updated_at TIMESTAMP WITH TIME ZONE DEFAULT CURRENT_TIMESTAMP,
                    PRIMARY KEY (prefix, key, field_name),
                    FOREIGN KEY (prefix, key) REFERENCES store(prefix, key) ON DELETE CASCADE
                )"
            ),
            format!(
                "CREATE INDEX IF NOT EXISTS store_vectors_embedding_idx ON store_vectors
                USING hnsw (embedding {home}.vector_{ops})"
            ),
        ];
        for (v, step) in steps
            .iter()
            .enumerate()
            .skip(usize::try_from(version + 1).unwrap_or(0))
        {
            if !step.is_empty() {
                sqlx::query(step)
                    .execute(&mut *tx)
                    .await
                    .map_err(pg_error)?;
            }
            sqlx::query("INSERT INTO vector_migrations (v) VALUES ($1)")
                .bind(i32::try_from(v).unwrap_or(i32::MAX))
                .execute(&mut *tx)
                .await
                .map_err(pg_error)?;
        }
        let stored: Option<i32> = sqlx::query_scalar(
            "SELECT a.atttypmod FROM pg_attribute a
            WHERE a.attrelid = 'store_vectors'::regclass AND a.attname = 'embedding'",
        )
        .fetch_optional(&mut *tx)
        .await
        .map_err(pg_error)?;
        if let Some(stored) = stored.filter(|&d| d > 0 && d != dims_sql) {
            return Err(Error::InvalidConfig(format!(
                "store_vectors holds vectors of {stored} dimensions, the index has {dims}"
            )));
        }
        tx.commit().await.map_err(pg_error)?;
        Ok(Self::statements(&home, op, score))
    }

    /// The statements for the extension in schema `home` (quoted), distance operator `op` and
    /// its `score`. The search's item conditions are a subquery per vector row, which the
    /// planner cannot turn into a join: the HNSW index scan drives, the conditions filter
    /// what it yields (a join let the planner sort every vector of the prefix instead).
    fn statements(home: &str, op: &str, score: &str) -> Self {
        let op = format!("OPERATOR({home}.{op})");
        let insert = format!(
            "INSERT INTO store_vectors (prefix, key, field_name, embedding, created_at, updated_at)
            SELECT n.prefix, n.key, n.field, n.embedding::{home}.vector, $5, $5
            FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS n(prefix, key, field, embedding)"
        );
        let search = format!(
            "WITH hits AS MATERIALIZED (
                SELECT sv.prefix, sv.key, sv.embedding {op} $1::{home}.vector AS d
                FROM store_vectors sv
                WHERE (SELECT (s.expires_at IS NULL OR s.expires_at > $2) AND s.value @> $3::jsonb
                    FROM store s WHERE s.prefix = sv.prefix AND s.key = sv.key)
                    AND ($4 = '' OR sv.prefix = $4
                        OR (sv.prefix ~>=~ ($4 || '.') AND sv.prefix ~<~ ($4 || '/')))
                ORDER BY sv.embedding {op} $1::{home}.vector
                LIMIT $5
            ), best AS (
                SELECT DISTINCT ON (prefix, key) prefix, key, d FROM hits ORDER BY prefix, key, d
            )
            SELECT s.prefix, s.key, {ITEM_COLUMNS}, ({score})::float8, (SELECT count(*) FROM hits)
            FROM best b JOIN store s ON s.prefix = b.prefix AND s.key = b.key
            ORDER BY b.d, s.prefix COLLATE \"C\", s.key COLLATE \"C\""
        );
        Pgvector { insert, search }
    }

    /// Replaces the vectors of the items `owners` with `vectors` (whose items are among them),
    /// on `conn`, inside the caller's transaction.
    pub(crate) async fn replace(
        &self,
        conn: &mut PgConnection,
        owners: &Owners<'_>,
        now: Timestamp,
    ) -> Result<()> {
        let (mut own_p, mut own_k) = (Vec::new(), Vec::new());
        let (mut vec_p, mut vec_k, mut vec_f, mut vec_e) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (key, vectors) in owners {
            let prefix = key.namespace.joined();
            for field in last_of_each_field(vectors) {
                vec_p.push(prefix.clone());
                vec_k.push(key.key.as_str());
                vec_f.push(field.field.as_str());
                vec_e.push(vector_text(&field.vector));
            }
            own_p.push(prefix);
            own_k.push(key.key.as_str());
        }
        sqlx::query(
            "DELETE FROM store_vectors v USING unnest($1::text[], $2::text[]) AS o(prefix, key)
            WHERE v.prefix = o.prefix AND v.key = o.key",
        )
        .bind(own_p)
        .bind(own_k)
        .execute(&mut *conn)
        .await
        .map_err(pg_error)?;
        if vec_p.is_empty() {
            return Ok(());
        }
        sqlx::query(&self.insert)
            .bind(vec_p)
            .bind(vec_k)
            .bind(vec_f)
            .bind(vec_e)
            .bind(now)
            .execute(conn)
            .await
            .map_err(pg_error)
            .map(drop)
    }

    /// The `query.limit` live items nearest to `query.vector`, each scored by its best field,
    /// best first. The HNSW scan is iterative (`relaxed_order`), so rows the filters reject
    /// do not shorten the answer; rows are fetched twice as many as items, more while items
    /// with several fields leave it short. `hnsw.ef_search` is the rows wanted, at least
    /// `ef_search` (at most pgvector's 1000).
    pub(crate) async fn search(
        &self,
        conn: &mut PgConnection,
        query: VectorQuery<'_>,
        now: Timestamp,
        ef_search: u32,
    ) -> Result<Vec<(Row, f32)>> {
        let vector = vector_text(query.vector);
        let contains = serde_json::Value::Object(query.contains.cloned().unwrap_or_default());
        let prefix = query.prefix.joined();
        let mut rows_wanted = query.limit.saturating_mul(2).saturating_add(1);
        loop {
            let limit = i64::try_from(rows_wanted).unwrap_or(i64::MAX);
            let mut tx = conn.begin().await.map_err(pg_error)?;
            sqlx::query(
                "SELECT set_config('hnsw.ef_search', $1, true),
                    set_config('hnsw.iterative_scan', 'relaxed_order', true)",
            )
            .bind(limit.max(i64::from(ef_search)).clamp(1, 1000).to_string())
            .execute(&mut *tx)
            .await
            .map_err(pg_error)?;
            let rows = sqlx::query(&self.search)
                .bind(&vector)
                .bind(now)
                .bind(&contains)
                .bind(&prefix)
                .bind(limit)
                .fetch_all(&mut *tx)
                .await
                .map_err(pg_error)?;
            tx.commit().await.map_err(pg_error)?;
            let fetched: i64 = match rows.first() {
                Some(row) => row.try_get(7).map_err(pg_error)?,
                None => 0,
            };
            if rows.len() < query.limit && fetched >= limit {
                rows_wanted = rows_wanted.saturating_mul(2);
                continue;
            }
            let mut hits = Vec::with_capacity(rows.len().min(query.limit));
            for row in rows.iter().take(query.limit) {
                let score: f64 = row.try_get(6).map_err(pg_error)?;
                #[allow(clippy::cast_possible_truncation)]
                hits.push((scanned_row(row)?, score as f32));
            }
            return Ok(hits);
        }
    }
}

/// Applies `prepared` (whose puts carry no vectors) and replaces the vectors of `owners`, in
/// one transaction.
pub(crate) async fn write(
    conn: &mut PgConnection,
    pgvector: &Pgvector,
    prepared: &BTreeMap<&ItemKey, Prepared<'_>>,
    owners: &Owners<'_>,
    now: Timestamp,
    persistent: bool,
) -> Result<()> {
    let mut tx = conn.begin().await.map_err(pg_error)?;
    queries::write(&mut tx, prepared, now, persistent).await?;
    if !owners.is_empty() {
        pgvector.replace(&mut tx, owners, now).await?;
    }
    tx.commit().await.map_err(pg_error)
}

/// The schema holding the extension, quoted.
async fn extension_schema(conn: &mut PgConnection) -> Result<String> {
    let home: String = sqlx::query_scalar(
        "SELECT n.nspname::text FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
        WHERE e.extname = 'vector'",
    )
    .fetch_one(conn)
    .await
    .map_err(pg_error)?;
    Ok(ident(&home))
}
