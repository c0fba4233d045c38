//! Hashes to store types and back: times as integer microseconds in decimal text, values as
//! JSON text, vectors as little-endian `f32`s.

use chrono::{DateTime, Utc};

use waypoint_store::raw::{FieldVector, Row, decode_vector};
use waypoint_store::{Error, Item, ItemKey, Namespace, Object, Result};

/// The latest expiry stored, in microseconds since the epoch (2^53 - 1, in the year 2255):
/// Lua's doubles hold every integer up to it, so scripts compare expiries exactly. A TTL
/// reaching past it means "practically never" anyway.
pub(crate) const LAST_EXPIRY: i64 = (1 << 53) - 1;

/// The item hash fields a row is read from, in [`row`]'s order.
pub(crate) const FIELDS: [&str; 7] = ["ns", "key", "value", "created", "updated", "ttl", "expires"];

/// A time as stored: integer microseconds since the epoch.
pub(crate) fn micros(at: DateTime<Utc>) -> i64 {
    at.timestamp_micros()
}

/// `now + minutes` as stored, clamped to [`LAST_EXPIRY`].
pub(crate) fn expires_at(now: DateTime<Utc>, minutes: f64) -> i64 {
    micros(waypoint_store::raw::expiry(now, minutes)).min(LAST_EXPIRY)
}

/// The vectors of one item from its vector hash, by field path.
pub(crate) fn field_vectors(
    key: &ItemKey,
    fields: Vec<(String, Vec<u8>)>,
) -> Result<Vec<FieldVector>> {
    fields
        .into_iter()
        .map(|(field, bytes)| {
            let vector = decode_vector(&bytes).ok_or_else(|| {
                corrupt(
                    &key.namespace.joined(),
                    &key.key,
                    &format!(
                        "the vector of field `{field}` has {} bytes, not a whole number of f32s",
                        bytes.len()
                    ),
                )
            })?;
            Ok(FieldVector { field, vector })
        })
        .collect()
}

/// Decodes the [`FIELDS`] of an item hash: `None` when the item is missing or expired.
pub(crate) fn row(fields: Vec<Option<Vec<u8>>>, now: i64) -> Result<Option<Row>> {
    let [ns, key, value, created, updated, ttl, expires]: [Option<Vec<u8>>; 7] =
        match fields.try_into() {
            Ok(fields) => fields,
            Err(fields) => {
                return Err(Error::Corrupt(format!(
                    "an item read returned {} fields, not 7",
                    fields.len()
                )));
            }
        };
    let (Some(ns), Some(key)) = (ns, key) else {
        return match value.or(created).or(updated) {
            // An item hash without its names was not written by this store.
            Some(_) => Err(Error::Corrupt(String::from(
                "an item hash lacks its namespace or key",
            ))),
            None => Ok(None),
        };
    };
    let ns = String::from_utf8(ns)
        .map_err(|_| Error::Corrupt(String::from("an item's namespace is not UTF-8")))?;
    let key = String::from_utf8(key).map_err(|_| corrupt(&ns, "?", "its key is not UTF-8"))?;
    let expires = match expires {
        Some(text) => Some(
            integer(&text)
                .ok_or_else(|| corrupt(&ns, &key, "its expires field is not an integer"))?,
        ),
        None => None,
    };
    if expires.is_some_and(|at| at <= now) {
        return Ok(None);
    }
    let value = value.ok_or_else(|| corrupt(&ns, &key, "it has no value"))?;
    let value = serde_json::from_slice::<Object>(&value)
        .map_err(|e| corrupt(&ns, &key, &format!("its value is not a JSON object ({e})")))?;
    let created_at = stamp(created.as_deref(), "created", &ns, &key)?;
    let updated_at = stamp(updated.as_deref(), "updated", &ns, &key)?;
    let ttl_minutes = match ttl {
        Some(text) => Some(
            std::str::from_utf8(&text)
                .ok()
                .and_then(|t| t.parse::<f64>().ok())
                .ok_or_else(|| corrupt(&ns, &key, "its ttl field is not a number"))?,
        ),
        None => None,
    };
    Ok(Some(Row {
        item: Item {
            namespace: Namespace::from_joined(&ns),
            key,
            value: std::sync::Arc::new(value),
            created_at,
            updated_at,
        },
        ttl_minutes,
    }))
}

fn integer(text: &[u8]) -> Option<i64> {
    std::str::from_utf8(text).ok()?.parse().ok()
}

fn stamp(text: Option<&[u8]>, field: &str, ns: &str, key: &str) -> Result<DateTime<Utc>> {
    text.and_then(integer)
        .and_then(DateTime::from_timestamp_micros)
        .ok_or_else(|| corrupt(ns, key, &format!("its {field} field is not a time")))
}

/// A corrupt-data error naming the item.
pub(crate) fn corrupt(ns: &str, key: &str, what: &str) -> Error {
    Error::Corrupt(format!("item `{key}` in `{ns}`: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Option<Vec<u8>> {
        Some(s.as_bytes().to_vec())
    }

    #[test]
    fn rows_decode_and_expire() {
        let fields = |expires: Option<Vec<u8>>| {
            vec![
                text("a.b"),
                text("k"),
                text(r#"{"x":1}"#),
                text("1700000000000000"),
                text("1700000000000001"),
                text("0.5"),
                expires,
            ]
        };
        let row = row(fields(text("1700000000000100")), 1700000000000099)
            .unwrap()
            .unwrap();
        assert_eq!(row.item.namespace, Namespace::from(["a", "b"]));
        assert_eq!(row.ttl_minutes, Some(0.5));
        assert_eq!(row.item.updated_at.timestamp_micros(), 1700000000000001);
        assert_eq!(
            super::row(fields(text("1700000000000100")), 1700000000000100).unwrap(),
            None
        );
        assert_eq!(super::row(vec![None; 7], 0).unwrap(), None);
        let mut bad = fields(None);
        bad[2] = text("[1]");
        assert!(matches!(super::row(bad, 0), Err(Error::Corrupt(_))));
    }

    #[test]
    fn absurd_ttls_are_clamped() {
        let now = Utc::now();
        assert_eq!(expires_at(now, 1e300), LAST_EXPIRY);
        assert_eq!(expires_at(now, 1.0), micros(now) + 60_000_000);
    }
}
