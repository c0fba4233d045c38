//! The lexical leg of hybrid search inside SQLite: an FTS5 table ranked by its `bm25()`.
//!
//! `waypoint_store_lexical` (contentless, deletable) holds each embedded item's texts as the
//! engine's tokens separated by spaces ([`token_text`]), at the rowid its
//! `waypoint_store_lexical_keys` row gives the item; both are written in the transaction of
//! the item's put, delete or sweep (a put without texts, made while the store has no lexical
//! index, removes them). An item with stored vectors but no key row gets its texts at the next
//! open with a lexical index ([`backfill`]). A query is the engine's tokens, each an FTS5 string, OR-ed:
//! query text never reaches FTS5's syntax.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use waypoint_store::lexical::{stored_texts, token_text};
use waypoint_store::{ItemKey, Namespace, Result};

use super::convert::Scope;
use crate::error::store_error;

const KEY_ID: &str = "SELECT id FROM waypoint_store_lexical_keys WHERE prefix = ?1 AND key = ?2";
const DELETE_TEXT: &str = "DELETE FROM waypoint_store_lexical WHERE rowid = ?1";
const DELETE_KEY: &str = "DELETE FROM waypoint_store_lexical_keys WHERE id = ?1";
const INSERT_KEY: &str = "INSERT INTO waypoint_store_lexical_keys (prefix, key) VALUES (?1, ?2)";
const INSERT_TEXT: &str = "INSERT INTO waypoint_store_lexical (rowid, body) VALUES (?1, ?2)";
/// Items with stored vectors but no key row, with their vectors' field names (a JSON array).
const MISSING: &str = "SELECT s.prefix, s.key, s.value,
        (SELECT json_group_array(v.field_name) FROM waypoint_store_vectors v
         WHERE v.prefix = s.prefix AND v.key = s.key)
    FROM store s
    WHERE EXISTS (SELECT 1 FROM waypoint_store_vectors v WHERE v.prefix = s.prefix AND v.key = s.key)
      AND NOT EXISTS (SELECT 1 FROM waypoint_store_lexical_keys k
                      WHERE k.prefix = s.prefix AND k.key = s.key)
    LIMIT ?1";
/// How many items [`backfill`] writes per transaction.
const BACKFILL_BATCH: usize = 500;

/// Ranked matches of live rows; `bm25()` is lower for better matches.
macro_rules! search {
    ($scope:literal) => {
        concat!(
            "SELECT k.prefix, k.key, -bm25(waypoint_store_lexical) AS score
             FROM waypoint_store_lexical
             JOIN waypoint_store_lexical_keys k ON k.id = waypoint_store_lexical.rowid
             JOIN store s ON s.prefix = k.prefix AND s.key = k.key
             WHERE waypoint_store_lexical MATCH ?1
               AND (s.expires_at IS NULL OR s.expires_at > ?2) ",
            $scope,
            " ORDER BY score DESC, k.prefix, k.key LIMIT ?3"
        )
    };
}
const SEARCH_ALL: &str = search!("");
const SEARCH_UNDER: &str = search!("AND (k.prefix = ?4 OR (k.prefix >= ?5 AND k.prefix < ?6))");

/// Replaces the indexed texts of the item `prefix`/`key` with `texts` (its key row is kept
/// even for no texts, so that [`backfill`] counts the item as done).
pub(crate) fn set_texts(
    conn: &Connection,
    prefix: &str,
    key: &str,
    texts: &[String],
) -> Result<()> {
    remove(conn, prefix, key)?;
    let id = conn
        .prepare_cached(INSERT_KEY)
        .and_then(|mut s| s.insert(params![prefix, key]))
        .map_err(store_error)?;
    let body = token_text(texts);
    if !body.is_empty() {
        conn.prepare_cached(INSERT_TEXT)
            .and_then(|mut s| s.execute(params![id, body]))
            .map_err(store_error)?;
    }
    Ok(())
}

/// Removes the indexed texts of the item `prefix`/`key`, if it has any.
pub(crate) fn remove(conn: &Connection, prefix: &str, key: &str) -> Result<()> {
    let old: Option<i64> = conn
        .prepare_cached(KEY_ID)
        .and_then(|mut s| s.query_row(params![prefix, key], |r| r.get(0)).optional())
        .map_err(store_error)?;
    if let Some(id) = old {
        conn.prepare_cached(DELETE_TEXT)
            .and_then(|mut s| s.execute(params![id]))
            .and_then(|_| conn.prepare_cached(DELETE_KEY))
            .and_then(|mut s| s.execute(params![id]))
            .map_err(store_error)?;
    }
    Ok(())
}

/// Writes the texts of every item with stored vectors but no key row, from its stored value
/// and its vectors' field names, [`BACKFILL_BATCH`] items per transaction; returns how many.
/// One query when none is missing.
pub(crate) fn backfill(conn: &mut Connection) -> Result<usize> {
    let mut done = 0;
    loop {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(store_error)?;
        let missing: Vec<(String, String, String, String)> = tx
            .prepare_cached(MISSING)
            .and_then(|mut s| {
                s.query_map(params![BACKFILL_BATCH as i64], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })?
                .collect()
            })
            .map_err(store_error)?;
        for (prefix, key, value, fields) in &missing {
            // A value or field list that does not parse indexes no texts (and is not retried).
            let value = serde_json::from_str(value).unwrap_or_default();
            let fields: Vec<String> = serde_json::from_str(fields).unwrap_or_default();
            set_texts(&tx, prefix, key, &stored_texts(&value, &fields))?;
        }
        tx.commit().map_err(store_error)?;
        done += missing.len();
        if missing.len() < BACKFILL_BATCH {
            return Ok(done);
        }
    }
}

/// The `limit` live items under `prefix` best ranked by `bm25()` for any of `terms`.
pub(crate) fn search(
    conn: &Connection,
    terms: &[String],
    prefix: &Namespace,
    limit: usize,
    now: &str,
) -> Result<Vec<(ItemKey, f32)>> {
    let expression = match_expression(terms);
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut stmt;
    let mut rows = match Scope::new(prefix) {
        Scope::All => {
            stmt = conn.prepare_cached(SEARCH_ALL).map_err(store_error)?;
            stmt.query(params![expression, now, limit])
        }
        Scope::Under { exact, from, to } => {
            stmt = conn.prepare_cached(SEARCH_UNDER).map_err(store_error)?;
            stmt.query(params![expression, now, limit, exact, from, to])
        }
    }
    .map_err(store_error)?;
    let mut hits = Vec::new();
    while let Some(r) = rows.next().map_err(store_error)? {
        let prefix: String = r.get(0).map_err(store_error)?;
        let key: String = r.get(1).map_err(store_error)?;
        let score: f64 = r.get(2).map_err(store_error)?;
        hits.push((
            ItemKey::new(Namespace::from_joined(&prefix), key),
            score as f32,
        ));
    }
    Ok(hits)
}

/// `"t1" OR "t2" ...`: each term an FTS5 string (a `"` inside doubled), so no term is syntax.
fn match_expression(terms: &[String]) -> String {
    let quoted: Vec<String> = terms
        .iter()
        .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
        .collect();
    quoted.join(" OR ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_are_quoted_strings() {
        let terms = [String::from("a\"b"), String::from("near")];
        assert_eq!(match_expression(&terms), "\"a\"\"b\" OR \"near\"");
    }

    #[test]
    fn a_query_of_many_distinct_words_is_answered() {
        let mut conn = Connection::open_in_memory().unwrap();
        super::super::schema::migrate(&mut conn).unwrap();
        conn.execute(
            "INSERT INTO store (prefix, key, value) VALUES ('ns', 'k', '{}')",
            [],
        )
        .unwrap();
        set_texts(&conn, "ns", "k", &[String::from("w19999 and more")]).unwrap();
        let terms: Vec<String> = (0..20_000).map(|i| format!("w{i}")).collect();
        let hits = search(&conn, &terms, &Namespace::from_joined("ns"), 10, "").unwrap();
        assert_eq!(hits.len(), 1);
        assert!(hits[0].1 > 0.0);
    }
}
