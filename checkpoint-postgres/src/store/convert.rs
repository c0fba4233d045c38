//! Rows to store types and back.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::types::Oid;
use sqlx::postgres::{PgArgumentBuffer, PgRow, PgTypeInfo, PgValueFormat, PgValueRef};
use sqlx::{Decode, Encode, Postgres, Row as _};

use waypoint_store::raw::{FieldVector, Row, decode_vector};
use waypoint_store::{Error, Item, ItemKey, Namespace, Object, Result};

use crate::error::{DbError, Failure};

/// Microseconds from the Unix epoch to PostgreSQL's (2000-01-01).
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;

/// A `timestamptz` in PostgreSQL's binary format (microseconds since 2000-01-01): exact to
/// the microsecond both ways, without sqlx's `chrono` feature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Timestamp(i64);

impl Timestamp {
    /// The timestamp of `at`, exact (the engine's clock ticks in whole microseconds).
    pub(crate) fn new(at: DateTime<Utc>) -> Self {
        // Out of PostgreSQL's range only for dates chrono itself cannot build from a clock.
        Timestamp(at.timestamp_micros().saturating_sub(PG_EPOCH_MICROS))
    }

    /// The time it names, `None` outside chrono's range (`infinity`).
    fn to_datetime(self) -> Option<DateTime<Utc>> {
        DateTime::from_timestamp_micros(self.0.checked_add(PG_EPOCH_MICROS)?)
    }
}

impl sqlx::Type<Postgres> for Timestamp {
    fn type_info() -> PgTypeInfo {
        // The built-in `timestamptz`.
        PgTypeInfo::with_oid(Oid(1184))
    }
}

impl sqlx::postgres::PgHasArrayType for Timestamp {
    fn array_type_info() -> PgTypeInfo {
        // The built-in `timestamptz[]`.
        PgTypeInfo::with_oid(Oid(1185))
    }
}

impl Encode<'_, Postgres> for Timestamp {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        buf.extend_from_slice(&self.0.to_be_bytes());
        Ok(IsNull::No)
    }

    fn size_hint(&self) -> usize {
        8
    }
}

impl Decode<'_, Postgres> for Timestamp {
    fn decode(value: PgValueRef<'_>) -> Result<Self, BoxDynError> {
        match value.format() {
            PgValueFormat::Binary => {
                let bytes: [u8; 8] = value
                    .as_bytes()?
                    .try_into()
                    .map_err(|_| "a binary timestamptz is 8 bytes")?;
                Ok(Timestamp(i64::from_be_bytes(bytes)))
            }
            PgValueFormat::Text => Err("timestamptz columns are read in binary".into()),
        }
    }
}

/// Maps a driver error for the store.
pub(crate) fn pg_error(e: sqlx::Error) -> Error {
    Error::from_failure(Failure::Driver(e))
}

/// A column of a row, or the driver's error naming it.
fn column<'r, T>(row: &'r PgRow, i: usize) -> Result<T>
where
    T: Decode<'r, Postgres> + sqlx::Type<Postgres>,
{
    row.try_get(i).map_err(pg_error)
}

/// Decodes a stored timestamp of `key`.
fn timestamp(row: &PgRow, i: usize, key: &ItemKey, what: &str) -> Result<DateTime<Utc>> {
    let stored: Option<Timestamp> = column(row, i)?;
    stored.and_then(Timestamp::to_datetime).ok_or_else(|| {
        Error::Corrupt(format!(
            "{what} of `{}` in {:?} is missing or out of range",
            key.key,
            key.namespace.labels()
        ))
    })
}

/// A row read with the columns `value::text, created_at, updated_at, ttl_minutes` starting at
/// `first`, for the item `key`.
pub(crate) fn row_at(row: &PgRow, first: usize, key: ItemKey) -> Result<Row> {
    let text: String = column(row, first)?;
    let value = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => map,
        Ok(other) => {
            return Err(Error::Corrupt(format!(
                "the value of `{}` in {:?} is not a JSON object but {}",
                key.key,
                key.namespace.labels(),
                waypoint_store::raw::json_kind(&other)
            )));
        }
        Err(e) => {
            return Err(Error::Corrupt(format!(
                "the value of `{}` in {:?} is not JSON: {e}",
                key.key,
                key.namespace.labels()
            )));
        }
    };
    let created_at = timestamp(row, first + 1, &key, "created_at")?;
    let updated_at = timestamp(row, first + 2, &key, "updated_at")?;
    let ttl_minutes: Option<f64> = column(row, first + 3)?;
    Ok(Row {
        item: Item {
            namespace: key.namespace,
            key: key.key,
            value: std::sync::Arc::new(value),
            created_at,
            updated_at,
        },
        ttl_minutes,
    })
}

/// A row of `prefix, key, value::text, created_at, updated_at, ttl_minutes`.
pub(crate) fn scanned_row(row: &PgRow) -> Result<Row> {
    let prefix: String = column(row, 0)?;
    let key: String = column(row, 1)?;
    row_at(row, 2, ItemKey::new(Namespace::from_joined(&prefix), key))
}

/// A stored vector of `key`'s field `field`.
pub(crate) fn field_vector(key: &ItemKey, field: String, bytes: &[u8]) -> Result<FieldVector> {
    let Some(vector) = decode_vector(bytes) else {
        return Err(Error::Corrupt(format!(
            "the stored vector of field `{field}` of `{}` in {:?} is {} bytes, not a whole number of f32s",
            key.key,
            key.namespace.labels(),
            bytes.len()
        )));
    };
    Ok(FieldVector { field, vector })
}

/// The JSON text of `value`, refusing NUL characters, which `jsonb` cannot hold: stripping
/// them would store something other than what was put.
pub(crate) fn value_text(key: &ItemKey, value: &Object) -> Result<String> {
    let text = serde_json::to_string(value).map_err(|e| {
        Error::InvalidValue(format!("the value of `{}` cannot be encoded: {e}", key.key))
    })?;
    // serde_json writes NUL as this escape; the walk rules out an escaped backslash before it.
    if text.contains("\\u0000") && value.iter().any(|(k, v)| k.contains('\0') || has_nul(v)) {
        return Err(Error::InvalidValue(format!(
            "the value of `{}` in {:?} contains a NUL character (\\u0000), which PostgreSQL's jsonb cannot store",
            key.key,
            key.namespace.labels()
        )));
    }
    Ok(text)
}

fn has_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(has_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        _ => false,
    }
}

/// Refuses namespaces and keys PostgreSQL's `text` cannot hold (NUL characters).
pub(crate) fn check_text(key: &ItemKey) -> Result<()> {
    if key.namespace.labels().iter().any(|l| l.contains('\0')) {
        return Err(Error::InvalidNamespace {
            namespace: key.namespace.labels().to_vec(),
            reason: "labels cannot contain NUL characters on PostgreSQL",
        });
    }
    if key.key.contains('\0') {
        return Err(Error::InvalidValue(format!(
            "the key {:?} contains a NUL character, which PostgreSQL's text cannot store",
            key.key
        )));
    }
    Ok(())
}

/// The longest key, namespace (its labels joined by `.`) and index path, in bytes of UTF-8,
/// the PostgreSQL store writes. A B-tree index entry holds at most about 2.7 KB (a third of a
/// page), and the widest key here holds all three (`waypoint_store_vectors`' primary key):
/// within this limit they always fit, whatever their content. Reads are not limited.
pub(crate) const MAX_ID_BYTES: usize = 512;

/// Refuses a key or namespace too long to index (see [`MAX_ID_BYTES`]).
pub(crate) fn check_size(key: &ItemKey) -> Result<()> {
    let prefix: usize = key.namespace.labels().iter().map(|l| l.len() + 1).sum();
    if prefix.saturating_sub(1) > MAX_ID_BYTES {
        return Err(Error::InvalidNamespace {
            namespace: key.namespace.labels().to_vec(),
            // Keep in step with MAX_ID_BYTES.
            reason: "its labels joined by `.` are over the PostgreSQL store's limit of 512 bytes",
        });
    }
    if key.key.len() > MAX_ID_BYTES {
        return Err(Error::InvalidValue(format!(
            "the key is {} bytes, over the PostgreSQL store's limit of {MAX_ID_BYTES} bytes",
            key.key.len()
        )));
    }
    Ok(())
}

/// Whether `key` could be stored at all (reads of one that could not simply find nothing).
pub(crate) fn storable(key: &ItemKey) -> bool {
    check_text(key).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_exact_to_the_microsecond() {
        let at = DateTime::from_timestamp_micros(1_700_000_000_123_457).expect("in range");
        assert_eq!(Timestamp::new(at).to_datetime(), Some(at));
        assert_eq!(Timestamp(i64::MAX).to_datetime(), None);
    }

    #[test]
    fn nul_characters_are_refused_not_stripped() {
        let key = ItemKey::new(["a"], "k");
        let nul = serde_json::json!({"a": ["x\u{0}y"]});
        let Value::Object(nul) = nul else { panic!() };
        assert!(matches!(
            value_text(&key, &nul),
            Err(Error::InvalidValue(_))
        ));
        let escaped = serde_json::json!({"a": "\\u0000"});
        let Value::Object(escaped) = escaped else {
            panic!()
        };
        assert!(value_text(&key, &escaped).is_ok());
    }

    #[test]
    fn vectors_roundtrip_and_bad_lengths_are_corrupt() -> Result<()> {
        let key = ItemKey::new(["a"], "k");
        let v = vec![1.5f32, -0.25, 3.0];
        let bytes = waypoint_store::raw::encode_vector(&v);
        assert_eq!(field_vector(&key, "$".into(), &bytes)?.vector, v);
        assert!(matches!(
            field_vector(&key, "$".into(), &[0, 0, 0]),
            Err(Error::Corrupt(_))
        ));
        Ok(())
    }
}
