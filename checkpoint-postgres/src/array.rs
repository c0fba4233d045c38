//! One-dimensional array columns read in place: one allocation per array, not per element.
//!
//! A fork's history arrives as parallel arrays of a few hundred entries each; decoding them
//! into `Vec<Option<String>>` allocated (and freed) one string per entry, a quarter of the
//! client's time in a PostgreSQL fork.

use sqlx::postgres::{PgRow, PgValueFormat};
use sqlx::{Row, ValueRef};
use waypoint_checkpoint::Result;

use crate::error::pg_error;

/// An array column's elements: `None` for NULL, else the element's bytes as PostgreSQL sends
/// them in binary (a text's UTF-8, a bytea's bytes, an int4's four bytes, big-endian). A NULL
/// or dimensionless array has none.
pub(crate) struct Elements<'r>(Vec<Option<&'r [u8]>>);

impl<'r> Elements<'r> {
    /// Column `i` of `row`, an array of any element type.
    pub(crate) fn of(row: &'r PgRow, i: usize) -> Result<Self> {
        let value = row.try_get_raw(i).map_err(pg_error)?;
        if value.is_null() {
            return Ok(Elements(Vec::new()));
        }
        let decode = |source: String| {
            pg_error(sqlx::Error::ColumnDecode {
                index: i.to_string(),
                source: source.into(),
            })
        };
        // Only a simple-protocol read sends text, and the statements read this way are bound.
        if value.format() == PgValueFormat::Text {
            return Err(decode(
                "an array in text format where binary was asked".into(),
            ));
        }
        let bytes = value.as_bytes().map_err(|e| decode(e.to_string()))?;
        parse(bytes).map(Elements).map_err(decode)
    }

    /// The number of elements.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Element `i` as text (`None`: NULL or past the end).
    pub(crate) fn text(&self, i: usize) -> Result<Option<&str>> {
        match self.0.get(i) {
            Some(Some(bytes)) => std::str::from_utf8(bytes)
                .map(Some)
                .map_err(|e| pg_error(sqlx::Error::Decode(e.into()))),
            _ => Ok(None),
        }
    }

    /// Element `i` as bytes (`None`: NULL or past the end).
    pub(crate) fn bytes(&self, i: usize) -> Option<&[u8]> {
        self.0.get(i).copied().flatten()
    }

    /// Element `i` as an int4 (`None`: NULL or past the end).
    pub(crate) fn int4(&self, i: usize) -> Result<Option<i32>> {
        let Some(bytes) = self.bytes(i) else {
            return Ok(None);
        };
        let four = <[u8; 4]>::try_from(bytes).map_err(|_| {
            pg_error(sqlx::Error::Decode(
                format!("an int4 of {} bytes", bytes.len()).into(),
            ))
        })?;
        Ok(Some(i32::from_be_bytes(four)))
    }
}

/// Splits `array_send`'s output: dimensions, a flag, the element type, each dimension's
/// length and lower bound, then each element as its length (-1: NULL) and bytes.
fn parse(bytes: &[u8]) -> std::result::Result<Vec<Option<&[u8]>>, String> {
    let mut at = 0;
    let dimensions = word(bytes, &mut at)?;
    let _has_nulls = word(bytes, &mut at)?;
    let _element_type = word(bytes, &mut at)?;
    match dimensions {
        0 => return Ok(Vec::new()),
        1 => {}
        n => return Err(format!("an array of {n} dimensions where one was expected")),
    }
    let len = usize::try_from(word(bytes, &mut at)?).map_err(|_| "an array of negative length")?;
    let _lower_bound = word(bytes, &mut at)?;
    // Each element takes at least its four length bytes.
    if len > bytes.len() / 4 {
        return Err(format!(
            "an array of {len} elements in {} bytes",
            bytes.len()
        ));
    }
    let mut out = Vec::with_capacity(len);
    for _ in 0..len {
        let n = match word(bytes, &mut at)? {
            -1 => {
                out.push(None);
                continue;
            }
            n => usize::try_from(n).map_err(|_| format!("an array element of length {n}"))?,
        };
        let end = at
            .checked_add(n)
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| format!("an array element of {n} bytes past the end"))?;
        out.push(Some(&bytes[at..end]));
        at = end;
    }
    Ok(out)
}

/// The big-endian int4 at `at`, which it moves past.
fn word(bytes: &[u8], at: &mut usize) -> std::result::Result<i32, String> {
    let four = bytes
        .get(*at..*at + 4)
        .and_then(|w| <[u8; 4]>::try_from(w).ok())
        .ok_or_else(|| format!("an array cut short at byte {at}"))?;
    *at += 4;
    Ok(i32::from_be_bytes(four))
}

#[cfg(test)]
mod tests {
    use super::{Elements, parse};
    use sqlx::{Connection, PgConnection};

    /// Arrays as the server sends them: text with NULLs and empty strings, empty and NULL
    /// arrays, int4 and bytea.
    #[tokio::test]
    async fn a_servers_arrays_read_in_place() {
        let Some(url) = waypoint_test_kit::postgres_url() else {
            return;
        };
        let mut conn = PgConnection::connect(&url).await.expect("connect");
        let row = sqlx::query(
            "SELECT ARRAY['a', NULL, '', 'é']::text[], '{}'::text[], NULL::text[],
                ARRAY[1, -2, NULL]::int4[], ARRAY['\\x00ff'::bytea, NULL]",
        )
        .fetch_one(&mut conn)
        .await
        .expect("row");
        let texts = Elements::of(&row, 0).expect("texts");
        let got: Vec<Option<&str>> = (0..texts.len()).map(|i| texts.text(i).unwrap()).collect();
        assert_eq!(got, [Some("a"), None, Some(""), Some("é")]);
        assert_eq!(texts.text(9).unwrap(), None);
        for empty in [1, 2] {
            assert_eq!(Elements::of(&row, empty).expect("empty").len(), 0);
        }
        let ints = Elements::of(&row, 3).expect("ints");
        let got: Vec<Option<i32>> = (0..ints.len()).map(|i| ints.int4(i).unwrap()).collect();
        assert_eq!(got, [Some(1), Some(-2), None]);
        let blobs = Elements::of(&row, 4).expect("blobs");
        assert_eq!(
            (blobs.bytes(0), blobs.bytes(1)),
            (Some(&[0u8, 255][..]), None)
        );
    }

    /// `array_send`'s layout of a one-dimensional array of `elements`.
    fn send(elements: &[Option<&[u8]>]) -> Vec<u8> {
        let mut out = Vec::new();
        for word in [1, 1, 25, elements.len() as i32, 1] {
            out.extend_from_slice(&i32::to_be_bytes(word));
        }
        for element in elements {
            match element {
                Some(bytes) => {
                    out.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
                    out.extend_from_slice(bytes);
                }
                None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        out
    }

    #[test]
    fn elements_and_nulls_read_in_place() {
        let bytes = send(&[Some(b"ab"), None, Some(b""), Some(b"xyz")]);
        let got = parse(&bytes).unwrap();
        assert_eq!(
            got,
            [Some(&b"ab"[..]), None, Some(&b""[..]), Some(&b"xyz"[..])]
        );
        let empty = [0i32, 0, 25].map(i32::to_be_bytes).concat();
        assert!(parse(&empty).unwrap().is_empty());
    }

    #[test]
    fn malformed_arrays_are_errors() {
        let bytes = send(&[Some(b"ab"), Some(b"cd")]);
        // Cut anywhere inside: an error, never a panic or a short read taken as whole.
        for cut in 0..bytes.len() {
            assert!(parse(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut two_d = bytes.clone();
        two_d[3] = 2;
        assert!(parse(&two_d).unwrap_err().contains("2 dimensions"));
        let mut long = bytes.clone();
        long[15] = 200; // more elements than bytes
        assert!(parse(&long).is_err());
        let mut past = bytes;
        past[23] = 100; // an element longer than what follows
        assert!(parse(&past).unwrap_err().contains("past the end"));
    }
}
