//! The lexical leg of hybrid search inside PostgreSQL: full-text search on
//! `waypoint_store_lexical`, ranked by `ts_rank_cd` (cover density: not BM25, so its scores
//! differ from the in-process index's, its rankings mostly agree).
//!
//! Each embedded item's texts are kept as one `tsvector` of the engine's tokens
//! ([`token_text`], `simple` configuration: no stemming, no stop words), written in the
//! statement that writes the item (and by the catch-up that embeds other writers' items, in
//! the statement that stores their vectors); a delete or sweep of the item cascades to it. A
//! row counts only while it was made from the item's current value (`made_at = updated_at`):
//! an item another writer (Python LangGraph) changed is found again once the catch-up embeds
//! it; in pgvector mode (no catch-up: Python writes its own vectors) once Waypoint rewrites
//! it, and meanwhile only by the vector leg. Items with current vectors but no current row
//! (written before this table, or while the store had no lexical index) get theirs at the
//! next open with a lexical index ([`backfill`]). Queries are built from the
//! engine's tokens, each a quoted lexeme, OR-ed: query text never reaches tsquery syntax.

use std::collections::HashMap;

use sqlx::PgConnection;
use waypoint_store::lexical::{stored_texts, token_text};
use waypoint_store::{ItemKey, Namespace, Result};

use super::convert::{Timestamp, pg_error};
use super::embed::Embedded;
use super::queries::Unembedded;

/// The most bytes of tokens indexed per item: PostgreSQL refuses a `tsvector` over 1 MB, and
/// a put must not fail for its text's length. Tokens past it are not indexed.
const MAX_BODY_BYTES: usize = 256 * 1024;

/// The text an item's `tsvector` is made from: its tokens, cut at [`MAX_BODY_BYTES`] on a
/// token boundary.
pub(crate) fn body(texts: &[String]) -> String {
    let mut body = token_text(texts);
    if body.len() > MAX_BODY_BYTES {
        let cut = body[..=MAX_BODY_BYTES].rfind(' ').unwrap_or(0);
        body.truncate(cut);
    }
    body
}

/// The `tsvector` texts of items the catch-up embedded (`ready`), from the values it read
/// (`unembedded`) and the fields it embedded.
pub(crate) fn bodies(
    unembedded: &[Unembedded],
    ready: &[Embedded],
) -> Vec<(ItemKey, Timestamp, String)> {
    let values: HashMap<&ItemKey, &str> = unembedded
        .iter()
        .map(|u| (&u.key, u.value.as_str()))
        .collect();
    ready
        .iter()
        .filter_map(|(key, at, vectors)| {
            let value: serde_json::Value = serde_json::from_str(values.get(key)?).ok()?;
            let fields: Vec<String> = vectors.iter().map(|f| f.field.clone()).collect();
            Some((key.clone(), *at, body(&stored_texts(&value, &fields))))
        })
        .collect()
}

/// Items with vectors in `$table` (and `$current`) but no lexical row made from their current
/// value: prefix, key, value, `updated_at` and their vectors' field names.
macro_rules! missing {
    ($table:literal, $current:literal) => {
        concat!(
            "SELECT s.prefix, s.key, s.value::text, s.updated_at,
                ARRAY(SELECT v.field_name FROM ",
            $table,
            " v
                      WHERE v.prefix = s.prefix AND v.key = s.key)
            FROM store s
            WHERE s.updated_at IS NOT NULL ",
            $current,
            "
                AND EXISTS (SELECT 1 FROM ",
            $table,
            " v WHERE v.prefix = s.prefix AND v.key = s.key)
                AND NOT EXISTS (SELECT 1 FROM waypoint_store_lexical l
                    WHERE l.prefix = s.prefix AND l.key = s.key AND l.made_at = s.updated_at)
            LIMIT $1"
        )
    };
}

/// How many items one [`backfill`] call writes.
pub(crate) const BACKFILL_BATCH: usize = 500;

/// Writes the `tsvector`s of up to [`BACKFILL_BATCH`] items with current vectors (in
/// `store_vectors` in pgvector mode, else in `waypoint_store_vectors` made from the item's
/// `updated_at`) but no row made from their current value, from their stored value and their
/// vectors' field names; returns how many. One query when none is missing.
pub(crate) async fn backfill(
    conn: &mut PgConnection,
    pgvector: bool,
    persistent: bool,
) -> Result<usize> {
    const MISSING: [&str; 2] = [
        missing!(
            "waypoint_store_vectors",
            "AND s.waypoint_embedded_at = s.updated_at"
        ),
        missing!("store_vectors", ""),
    ];
    static WRITE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let write = WRITE.get_or_init(|| {
        let cte = super::queries::upsert_cte(
            "lex",
            "unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[])
                AS t(prefix, key, body, made_at)",
            "t.made_at",
        );
        format!("WITH {cte} SELECT 1")
    });
    let rows: Vec<(String, String, String, Timestamp, Vec<String>)> =
        sqlx::query_as(MISSING[usize::from(pgvector)])
            .persistent(persistent)
            .bind(i64::try_from(BACKFILL_BATCH).unwrap_or(i64::MAX))
            .fetch_all(&mut *conn)
            .await
            .map_err(pg_error)?;
    if rows.is_empty() {
        return Ok(0);
    }
    let (mut prefixes, mut keys, mut bodies, mut made) = (vec![], vec![], vec![], vec![]);
    for (prefix, key, value, at, fields) in rows {
        // A value that does not parse indexes no texts (and is not retried).
        let value = serde_json::from_str(&value).unwrap_or_default();
        bodies.push(body(&stored_texts(&value, &fields)));
        prefixes.push(prefix);
        keys.push(key);
        made.push(at);
    }
    sqlx::query(write)
        .persistent(persistent)
        .bind(&prefixes)
        .bind(&keys)
        .bind(&bodies)
        .bind(&made)
        .execute(conn)
        .await
        .map_err(pg_error)?;
    Ok(prefixes.len())
}

/// The `limit` live, currently embedded items under `prefix` best ranked for any of `terms`.
pub(crate) async fn search(
    conn: &mut PgConnection,
    terms: &[String],
    prefix: &Namespace,
    limit: usize,
    now: Timestamp,
    persistent: bool,
) -> Result<Vec<(ItemKey, f32)>> {
    const SQL: &str = "SELECT l.prefix, l.key, ts_rank_cd(l.tsv, q.q)::float8 AS score
        FROM to_tsquery('simple', $1) AS q(q), waypoint_store_lexical l
        JOIN store s ON s.prefix = l.prefix AND s.key = l.key
        WHERE l.tsv @@ q.q AND (s.expires_at IS NULL OR s.expires_at > $2)
            AND l.made_at = s.updated_at
            AND ($4 = '' OR l.prefix = $4 OR (l.prefix ~>=~ ($4 || '.') AND l.prefix ~<~ ($4 || '/')))
        ORDER BY score DESC, l.prefix COLLATE \"C\", l.key COLLATE \"C\" LIMIT $3";
    let rows: Vec<(String, String, f64)> = sqlx::query_as(SQL)
        .persistent(persistent)
        .bind(tsquery(terms))
        .bind(now)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .bind(prefix.joined())
        .fetch_all(conn)
        .await
        .map_err(pg_error)?;
    Ok(rows
        .into_iter()
        .map(|(prefix, key, score)| {
            (
                ItemKey::new(Namespace::from_joined(&prefix), key),
                score as f32,
            )
        })
        .collect())
}

/// `'t1' | 't2' ...`: each term a quoted lexeme (quote and backslash escaped), so no term is
/// syntax.
fn tsquery(terms: &[String]) -> String {
    let quoted: Vec<String> = terms
        .iter()
        .map(|t| format!("'{}'", t.replace('\\', "\\\\").replace('\'', "''")))
        .collect();
    quoted.join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_are_quoted_lexemes_and_bodies_are_bounded() {
        let terms = [String::from("a'b\\"), String::from("or")];
        assert_eq!(tsquery(&terms), "'a''b\\\\' | 'or'");
        let long = vec!["word ".repeat(100_000)];
        let cut = body(&long);
        assert!(cut.len() <= MAX_BODY_BYTES && cut.ends_with("word"));
    }
}
