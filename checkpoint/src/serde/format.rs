//! The wire formats, dispatched by enum so the hot path has no trait objects.
//!
//! Decoding runs the fast decoder first; only when it fails is the value decoded again
//! through the path-tracking adapter in `path.rs`, so errors name the failing field at no
//! cost to success.
//!
//! Two formats share the tag `msgpack`, because Python must read what either writes:
//! [`Format::MsgPack`], Waypoint's own (rmp-serde, not human-readable, so types may take a
//! compact form), and [`Format::LangGraph`], Python LangGraph's (human-readable, Python
//! objects as extension types; see `langgraph.rs`). A stored `msgpack` value may have been
//! written by either, so each reads both, its own way first:
//!
//! - `MsgPack` decodes with rmp-serde; only if that fails, with LangGraph's reader;
//! - `LangGraph` decodes with LangGraph's reader; only if that fails, with rmp-serde.
//!
//! One exception: a value that holds a NaN or infinite float is read by `MsgPack` as by
//! `LangGraph`. rmp-serde hands such a float to a request for any value, and
//! `serde_json::Value` turns it into `null`; LangGraph's reader shows it in its
//! `builtins.float` form, which writes back as the float (typed requests read a float either
//! way).
//!
//! The first reading that succeeds wins, so the result is deterministic. A value both
//! readings accept but read differently (a type whose compact and human-readable forms
//! overlap) therefore reads as its own format wrote it only when the reader is configured
//! with that format: a [`super::Serde`] writing `LangGraph` reads `msgpack` values with
//! LangGraph's reader first.
//! When both fail, the error reported is LangGraph's reader's if the bytes hold a Python
//! object or the format is `LangGraph`, rmp-serde's (with its path) otherwise. Either way, a
//! value must be all of the bytes: bytes after it are an error.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Error, Result};

/// Tag of values encoded as JSON.
pub const TAG_JSON: &str = "json";
/// Tag of values encoded as MessagePack with named fields.
pub const TAG_MSGPACK: &str = "msgpack";
/// Tag of values encoded with postcard.
pub const TAG_POSTCARD: &str = "postcard";
/// Tag of values encoded with bincode 2 (standard config).
pub const TAG_BINCODE: &str = "bincode";
/// Tag of a null value (no bytes).
pub const TAG_NULL: &str = "null";
/// Tag of raw bytes stored as they are.
pub const TAG_BYTES: &str = "bytes";
/// Tag of a versioned channel without value (LangGraph's `empty` blob type).
pub const TAG_EMPTY: &str = "empty";

/// Deepest nesting a self-describing decoder accepts (serde_json's own limit); deeper input
/// is an error rather than a stack overflow.
#[cfg(feature = "msgpack")]
pub(crate) const MAX_DEPTH: usize = 128;

/// rmp-serde's depth limit that accepts [`MAX_DEPTH`] levels, as LangGraph's reader does: it
/// refuses the container that brings its count to the limit.
#[cfg(feature = "msgpack")]
const RMP_DEPTH: usize = MAX_DEPTH + 1;

/// bincode preallocates strings and byte buffers from their length prefix, so a hostile
/// prefix would abort the process on allocation; claims past this many bytes are errors.
#[cfg(feature = "bincode")]
const BINCODE_LIMIT: usize = 1 << 30;

#[cfg(feature = "bincode")]
fn bincode_config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<BINCODE_LIMIT>()
}

/// Runs `read` on an rmp-serde deserializer over `bytes`; gives what it read and how many
/// bytes were left after it (the value must be all of them).
#[cfg(feature = "msgpack")]
fn rmp_decode<R>(
    bytes: &[u8],
    read: impl FnOnce(
        &mut rmp_serde::Deserializer<rmp_serde::decode::ReadReader<std::io::Cursor<&[u8]>>>,
    ) -> R,
) -> (R, usize) {
    let mut de = rmp_serde::Deserializer::new(std::io::Cursor::new(bytes));
    de.set_max_depth(RMP_DEPTH);
    let value = read(&mut de);
    let read = usize::try_from(de.position()).unwrap_or(usize::MAX);
    (value, bytes.len().saturating_sub(read))
}

/// Whether `de` has read all its input: reading one more marker finds none.
#[cfg(feature = "msgpack")]
fn rmp_at_end<'de, R: rmp_serde::decode::ReadSlice<'de>>(
    de: &mut rmp_serde::Deserializer<R>,
) -> bool {
    matches!(
        <serde::de::IgnoredAny as serde::Deserialize>::deserialize(de),
        Err(rmp_serde::decode::Error::InvalidMarkerRead(e))
            if e.kind() == std::io::ErrorKind::UnexpectedEof
    )
}

/// A serialization format; which ones exist depends on cargo features.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// JSON (serde_json); always available, readable by anything.
    Json,
    /// MessagePack with named fields (rmp-serde); feature `msgpack`.
    #[cfg(feature = "msgpack")]
    MsgPack,
    /// postcard, compact varints; feature `postcard`.
    #[cfg(feature = "postcard")]
    Postcard,
    /// bincode 2, standard config; feature `bincode`.
    #[cfg(feature = "bincode")]
    Bincode,
    /// Python LangGraph's msgpack (tag `msgpack`, Python objects as extension types 0-7),
    /// written so that Python's `JsonPlusSerializer` reads it; feature `msgpack`.
    #[cfg(feature = "msgpack")]
    LangGraph,
}

impl Default for Format {
    /// MessagePack when compiled in (LangGraph's default), JSON otherwise.
    fn default() -> Self {
        #[cfg(feature = "msgpack")]
        return Format::MsgPack;
        #[cfg(not(feature = "msgpack"))]
        return Format::Json;
    }
}

impl Format {
    /// Every format compiled into this build (`LangGraph` last: it shares its tag).
    pub const ALL: &'static [Format] = &[
        Format::Json,
        #[cfg(feature = "msgpack")]
        Format::MsgPack,
        #[cfg(feature = "postcard")]
        Format::Postcard,
        #[cfg(feature = "bincode")]
        Format::Bincode,
        #[cfg(feature = "msgpack")]
        Format::LangGraph,
    ];

    /// A name unique to this format (its tag, except `langgraph`), for labels.
    pub fn name(self) -> &'static str {
        match self {
            #[cfg(feature = "msgpack")]
            Format::LangGraph => "langgraph",
            other => other.tag(),
        }
    }

    /// The tag stored beside values in this format.
    pub fn tag(self) -> &'static str {
        match self {
            Format::Json => TAG_JSON,
            #[cfg(feature = "msgpack")]
            Format::MsgPack | Format::LangGraph => TAG_MSGPACK,
            #[cfg(feature = "postcard")]
            Format::Postcard => TAG_POSTCARD,
            #[cfg(feature = "bincode")]
            Format::Bincode => TAG_BINCODE,
        }
    }

    /// The format a stored tag names (`msgpack`: [`Format::MsgPack`], which also reads
    /// LangGraph's), or an error saying which feature would read it.
    pub fn from_tag(tag: &str) -> Result<Format> {
        match tag {
            TAG_JSON => Ok(Format::Json),
            #[cfg(feature = "msgpack")]
            TAG_MSGPACK => Ok(Format::MsgPack),
            #[cfg(feature = "postcard")]
            TAG_POSTCARD => Ok(Format::Postcard),
            #[cfg(feature = "bincode")]
            TAG_BINCODE => Ok(Format::Bincode),
            #[allow(unreachable_patterns)] // Reached only for formats compiled out.
            TAG_MSGPACK | TAG_POSTCARD | TAG_BINCODE => Err(Error::serialization(
                tag,
                format!("format not compiled in; enable the `{tag}` feature"),
            )),
            _ => Err(Error::serialization(tag, "unknown type tag")),
        }
    }

    /// Encodes `value` in this format; JSON refuses a NaN or infinite float (it has no
    /// number for one).
    pub fn encode<T: Serialize + ?Sized>(self, value: &T) -> Result<Vec<u8>> {
        let fail = |e: &dyn std::fmt::Display| Error::serialization(self.tag(), e);
        match self {
            Format::Json => {
                let bytes = serde_json::to_vec(value).map_err(|e| fail(&e))?;
                // serde_json writes a NaN or infinite float as `null`: refused, not lost. Only
                // output with a `null` can hide one.
                if memchr::memmem::find(&bytes, b"null").is_some()
                    && super::finite::has_non_finite_float(value)
                {
                    return Err(fail(
                        &"the value holds a NaN or infinite float, which JSON has no number for \
                          (it would read back as null); MessagePack keeps it",
                    ));
                }
                Ok(bytes)
            }
            #[cfg(feature = "msgpack")]
            Format::MsgPack => rmp_serde::to_vec_named(value).map_err(|e| fail(&e)),
            #[cfg(feature = "msgpack")]
            Format::LangGraph => super::langgraph::encode(value),
            #[cfg(feature = "postcard")]
            Format::Postcard => postcard::to_stdvec(value).map_err(|e| fail(&e)),
            #[cfg(feature = "bincode")]
            Format::Bincode => {
                bincode::serde::encode_to_vec(value, bincode_config()).map_err(|e| fail(&e))
            }
        }
    }

    /// Decodes a `T` from `bytes`; on failure the error names the field path.
    pub fn decode<T: DeserializeOwned>(self, bytes: &[u8]) -> Result<T> {
        match self {
            // Waypoint's own first, then LangGraph's (see the module docs).
            #[cfg(feature = "msgpack")]
            Format::MsgPack if super::langgraph::has_non_finite_float(bytes) => {
                Format::LangGraph.decode(bytes)
            }
            #[cfg(feature = "msgpack")]
            Format::MsgPack => self.decode_fast(bytes).or_else(|fast| {
                super::langgraph::decode(bytes).map_err(|refusal| match refusal.python {
                    true => refusal.error,
                    false => self.decode_with_path::<T>(bytes).unwrap_or(fast),
                })
            }),
            // LangGraph's first, then Waypoint's.
            #[cfg(feature = "msgpack")]
            Format::LangGraph => super::langgraph::decode(bytes).or_else(|refusal| {
                Format::MsgPack
                    .decode_fast(bytes)
                    .map_err(|_| refusal.error)
            }),
            _ => self
                .decode_fast(bytes)
                .map_err(|fast| self.decode_with_path::<T>(bytes).unwrap_or(fast)),
        }
    }

    fn decode_fast<T: DeserializeOwned>(self, bytes: &[u8]) -> Result<T> {
        let fail = |e: &dyn std::fmt::Display| Error::serialization(self.tag(), e);
        match self {
            Format::Json => serde_json::from_slice(bytes).map_err(|e| fail(&e)),
            #[cfg(feature = "msgpack")]
            Format::MsgPack => {
                // Over the slice itself, which reads strings in place (the reader of
                // `rmp_decode` copies each into a buffer first); that one only counts the
                // bytes after a value, when there are some.
                let mut de = rmp_serde::Deserializer::from_read_ref(bytes);
                de.set_max_depth(RMP_DEPTH);
                match T::deserialize(&mut de) {
                    Ok(value) if rmp_at_end(&mut de) => Ok(value),
                    Ok(_) => match rmp_decode(bytes, |de| T::deserialize(de)) {
                        (Ok(_), n) => Err(fail(&format_args!("{n} bytes after the value"))),
                        (Err(e), _) => Err(fail(&e)),
                    },
                    Err(e) => Err(fail(&e)),
                }
            }
            #[cfg(feature = "msgpack")]
            Format::LangGraph => super::langgraph::decode(bytes).map_err(|r| r.error),
            #[cfg(feature = "postcard")]
            Format::Postcard => match postcard::take_from_bytes(bytes) {
                Ok((v, [])) => Ok(v),
                Ok((_, rest)) => Err(fail(&format_args!("{} trailing bytes", rest.len()))),
                Err(e) => Err(fail(&e)),
            },
            #[cfg(feature = "bincode")]
            Format::Bincode => match bincode::serde::decode_from_slice(bytes, bincode_config()) {
                Ok((v, n)) if n == bytes.len() => Ok(v),
                Ok((_, n)) => Err(fail(&format_args!("{} trailing bytes", bytes.len() - n))),
                Err(e) => Err(fail(&e)),
            },
        }
    }

    /// Decodes again, tracking the path, to explain a failure. `None` if it then succeeds.
    fn decode_with_path<T: DeserializeOwned>(self, bytes: &[u8]) -> Option<Error> {
        let (path, message) = self.decode_tracking::<T>(bytes).err()?;
        Some(Error::Serialization {
            tag: self.tag().to_owned(),
            path,
            message,
        })
    }

    /// Decodes through [`super::path::deserialize_tracking`]; an error carries the path of
    /// the field that failed (`None` at the root) and the decoder's message.
    pub(super) fn decode_tracking<T: DeserializeOwned>(
        self,
        bytes: &[u8],
    ) -> Result<T, (Option<String>, String)> {
        use super::path::deserialize_tracking;
        fn message<T, E: std::fmt::Display>(
            r: Result<T, (Option<String>, E)>,
        ) -> Result<T, (Option<String>, String)> {
            r.map_err(|(path, e)| (path, e.to_string()))
        }
        match self {
            Format::Json => {
                let mut de = serde_json::Deserializer::from_slice(bytes);
                message(deserialize_tracking(&mut de))
            }
            #[cfg(feature = "msgpack")]
            Format::MsgPack => match rmp_decode(bytes, |de| deserialize_tracking(de)) {
                (Ok(value), 0) => Ok(value),
                (Ok(_), n) => Err((None, format!("{n} bytes after the value"))),
                (Err((path, e)), _) => Err((path, e.to_string())),
            },
            #[cfg(feature = "msgpack")]
            Format::LangGraph => match super::langgraph::decode(bytes) {
                Ok(value) => Ok(value),
                Err(refusal) => match refusal.error {
                    Error::Serialization { path, message, .. } => Err((path, message)),
                    other => Err((None, other.to_string())),
                },
            },
            #[cfg(feature = "postcard")]
            Format::Postcard => {
                let mut de = postcard::Deserializer::from_bytes(bytes);
                message(deserialize_tracking(&mut de))
            }
            #[cfg(feature = "bincode")]
            Format::Bincode => {
                let mut de =
                    bincode::serde::BorrowedSerdeDecoder::from_slice(bytes, bincode_config(), ());
                message(deserialize_tracking(de.as_deserializer()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Format;

    /// JSON has no number for NaN or the infinities: a value holding one is refused rather
    /// than written as `null`, in every build; nulls and finite floats are written as before.
    #[test]
    fn json_refuses_a_float_it_would_write_as_null() {
        #[derive(serde::Serialize)]
        struct Reading {
            label: Option<String>,
            value: f64,
        }
        let refused = |value: f64| Reading { label: None, value };
        for value in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let error = Format::Json.encode(&refused(value)).unwrap_err();
            assert!(error.to_string().contains("NaN or infinite"), "{error}");
            #[cfg(feature = "msgpack")]
            assert!(Format::MsgPack.encode(&refused(value)).is_ok());
        }
        assert!(Format::Json.encode(&[f32::NAN]).is_err());
        assert_eq!(
            Format::Json.encode(&refused(1.5)).unwrap(),
            br#"{"label":null,"value":1.5}"#
        );
        assert_eq!(
            Format::Json.encode(&f64::MAX).unwrap(),
            b"1.7976931348623157e+308"
        );
    }

    #[cfg(feature = "msgpack")]
    #[test]
    fn msgpack_refuses_bytes_after_the_value() {
        // `01 02`: the value 1, then a byte too many, refused by both readings of the tag.
        for format in [Format::MsgPack, Format::LangGraph] {
            let error = format.decode::<u8>(&[0x01, 0x02]).unwrap_err();
            assert!(
                error.to_string().contains("1 bytes after the value"),
                "{format:?}: {error}"
            );
            assert_eq!(format.decode::<u8>(&[0x01]).unwrap(), 1);
        }
        assert!(Format::MsgPack.decode_fast::<u8>(&[0x01, 0x02]).is_err());
        assert!(
            Format::MsgPack
                .decode_tracking::<u8>(&[0x01, 0x02])
                .is_err()
        );
        // A value rmp-serde writes, with junk after it.
        let mut bytes = Format::MsgPack.encode(&("a", [1u32, 2])).unwrap();
        assert_eq!(
            Format::MsgPack
                .decode::<(String, Vec<u32>)>(&bytes)
                .unwrap()
                .1,
            [1, 2]
        );
        bytes.extend_from_slice(b"\x00junk");
        for format in [Format::MsgPack, Format::LangGraph] {
            assert!(
                format.decode::<(String, Vec<u32>)>(&bytes).is_err(),
                "{format:?}"
            );
        }
    }
}
