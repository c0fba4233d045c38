//! Rows to store types and back: timestamps as sortable text, values as JSON text, vectors as
//! little-endian `f32` BLOBs.

use std::fmt::Write as _;

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, Timelike, Utc};
use rusqlite::types::ValueRef;

use waypoint_store::raw::Row;
use waypoint_store::{Error, Item, Namespace, Object, Result};

use crate::error::store_error;

/// Length of a timestamp as written: `YYYY-MM-DD HH:MM:SS.ffffff+00:00`.
const STAMP_LEN: usize = 32;

/// A timestamp as stored: UTC, microseconds, fixed width so text order is time order.
///
/// Instants past year 9999 (an absurd TTL) are written as the last microsecond of 9999: a
/// five-digit year would sort before every four-digit one and expire at once.
pub(crate) fn timestamp(at: DateTime<Utc>) -> String {
    let at = at.clamp(first_stamp(), last_stamp());
    let mut text = String::with_capacity(STAMP_LEN);
    // Writing to a String cannot fail.
    let _ = write!(
        text,
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:06}+00:00",
        at.year(),
        at.month(),
        at.day(),
        at.hour(),
        at.minute(),
        at.second(),
        // A leap second carries past 999_999 us; it still sorts within its second.
        (at.nanosecond() / 1000).min(999_999),
    );
    text
}

fn first_stamp() -> DateTime<Utc> {
    NaiveDate::from_ymd_opt(0, 1, 1)
        .and_then(|d| d.and_hms_micro_opt(0, 0, 0, 0))
        .map_or(DateTime::<Utc>::MIN_UTC, |t| t.and_utc())
}

fn last_stamp() -> DateTime<Utc> {
    NaiveDate::from_ymd_opt(9999, 12, 31)
        .and_then(|d| d.and_hms_micro_opt(23, 59, 59, 999_999))
        .map_or(DateTime::<Utc>::MAX_UTC, |t| t.and_utc())
}

/// Reads a stored timestamp: ours, or the naive `YYYY-MM-DD HH:MM:SS` (UTC) that LangGraph's
/// `CURRENT_TIMESTAMP` defaults write.
pub(crate) fn parse_timestamp(text: &str) -> Option<DateTime<Utc>> {
    if let Some(at) = parse_fixed(text.as_bytes()) {
        return Some(at);
    }
    DateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f%:z")
        .or_else(|_| DateTime::parse_from_rfc3339(text))
        .map(|at| at.to_utc())
        .ok()
        .or_else(|| {
            NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f")
                .ok()
                .map(|at| at.and_utc())
        })
}

/// The exact format [`timestamp`] writes, without chrono's format parser (hot on scans).
fn parse_fixed(b: &[u8]) -> Option<DateTime<Utc>> {
    if b.len() != STAMP_LEN
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b' '
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'.'
        || &b[26..] != b"+00:00"
    {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<u32> {
        b[from..to].iter().try_fold(0u32, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
        })
    };
    let date = NaiveDate::from_ymd_opt(num(0, 4)? as i32, num(5, 7)?, num(8, 10)?)?;
    let time = date.and_hms_micro_opt(num(11, 13)?, num(14, 16)?, num(17, 19)?, num(20, 26)?)?;
    Some(time.and_utc())
}

/// Decodes a row of `prefix, key, value, created_at, updated_at, ttl_minutes`.
pub(crate) fn row(r: &rusqlite::Row<'_>) -> Result<Row> {
    let prefix: String = r.get(0).map_err(store_error)?;
    let key: String = r.get(1).map_err(store_error)?;
    let value = match r.get_ref(2).map_err(store_error)? {
        ValueRef::Text(bytes) | ValueRef::Blob(bytes) => serde_json::from_slice::<Object>(bytes)
            .map_err(|e| {
                corrupt(
                    &prefix,
                    &key,
                    &format!("its value is not a JSON object ({e})"),
                )
            })?,
        other => {
            return Err(corrupt(
                &prefix,
                &key,
                &format!("its value is {:?}, not JSON text", other.data_type()),
            ));
        }
    };
    let created_at = stamp_column(r, 3, "created_at", &prefix, &key)?;
    let updated_at = stamp_column(r, 4, "updated_at", &prefix, &key)?;
    let ttl_minutes = match r.get_ref(5).map_err(store_error)? {
        ValueRef::Null => None,
        ValueRef::Real(minutes) => Some(minutes),
        ValueRef::Integer(minutes) => Some(minutes as f64),
        other => {
            return Err(corrupt(
                &prefix,
                &key,
                &format!("its ttl_minutes is {:?}, not a number", other.data_type()),
            ));
        }
    };
    Ok(Row {
        item: Item {
            namespace: Namespace::from_joined(&prefix),
            key,
            value: std::sync::Arc::new(value),
            created_at,
            updated_at,
        },
        ttl_minutes,
    })
}

fn stamp_column(
    r: &rusqlite::Row<'_>,
    index: usize,
    column: &str,
    prefix: &str,
    key: &str,
) -> Result<DateTime<Utc>> {
    let parsed = match r.get_ref(index).map_err(store_error)? {
        ValueRef::Text(bytes) => std::str::from_utf8(bytes).ok().and_then(parse_timestamp),
        _ => None,
    };
    parsed.ok_or_else(|| corrupt(prefix, key, &format!("its {column} is not a timestamp")))
}

/// A corrupt-data error naming the item.
pub(crate) fn corrupt(prefix: &str, key: &str, what: &str) -> Error {
    Error::Corrupt(format!("item `{key}` in `{prefix}`: {what}"))
}

/// The rows a scan covers.
pub(crate) enum Scope {
    /// Every row.
    All,
    /// A namespace and its descendants: `prefix = exact` or `from <= prefix < to`.
    Under {
        exact: String,
        from: String,
        to: String,
    },
}

impl Scope {
    /// The rows under `prefix` on whole labels (the empty prefix covers all).
    pub(crate) fn new(prefix: &Namespace) -> Self {
        if prefix.is_empty() {
            return Scope::All;
        }
        let exact = prefix.joined();
        Scope::Under {
            from: format!("{exact}."),
            to: format!("{exact}/"),
            exact,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_and_sort_as_text() {
        let a = DateTime::parse_from_rfc3339("2024-02-29T23:59:59.000001Z")
            .unwrap()
            .to_utc();
        let b = a + chrono::Duration::microseconds(1);
        let (ta, tb) = (timestamp(a), timestamp(b));
        assert_eq!(ta, "2024-02-29 23:59:59.000001+00:00");
        assert!(ta < tb);
        assert_eq!(parse_timestamp(&ta), Some(a));
        assert_eq!(parse_timestamp(&tb), Some(b));
    }

    #[test]
    fn far_future_is_clamped_to_year_9999() {
        let text = timestamp(DateTime::<Utc>::MAX_UTC);
        assert_eq!(text, "9999-12-31 23:59:59.999999+00:00");
        assert!(text > timestamp(Utc::now()));
    }

    #[test]
    fn langgraph_timestamps_parse_as_utc() {
        let at = parse_timestamp("2024-05-01 10:20:30").unwrap();
        assert_eq!(at.to_rfc3339(), "2024-05-01T10:20:30+00:00");
        let at = parse_timestamp("2024-05-01 10:20:30.5+02:00").unwrap();
        assert_eq!(at.to_rfc3339(), "2024-05-01T08:20:30.500+00:00");
        assert_eq!(parse_timestamp("yesterday"), None);
        assert_eq!(parse_timestamp("2024-13-01 10:20:30.000000+00:00"), None);
    }
}
