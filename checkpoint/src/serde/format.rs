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
//! - `MsgPack` decodes with rmp-serde; only if that fails, through LangGraph's tree;
//! - `LangGraph` decodes through the tree; only if that fails, with rmp-serde.
//!
//! The first reading that succeeds wins, so the result is deterministic. A value both
//! readings accept but read differently (a type whose compact and human-readable forms
//! overlap) therefore reads as its own format wrote it only when the reader is configured
//! with that format: a [`super::Serde`] writing `LangGraph` reads `msgpack` values tree first.
//! When both fail, the error reported is the tree's if the bytes hold a Python object or the
//! format is `LangGraph`, rmp-serde's (with its path) otherwise.

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

/// bincode preallocates strings and byte buffers from their length prefix, so a hostile
/// prefix would abort the process on allocation; claims past this many bytes are errors.
#[cfg(feature = "bincode")]
const BINCODE_LIMIT: usize = 1 << 30;

#[cfg(feature = "bincode")]
fn bincode_config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<BINCODE_LIMIT>()
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

    /// Encodes `value` in this format.
    pub fn encode<T: Serialize + ?Sized>(self, value: &T) -> Result<Vec<u8>> {
        let fail = |e: &dyn std::fmt::Display| Error::serialization(self.tag(), e);
        match self {
            Format::Json => serde_json::to_vec(value).map_err(|e| fail(&e)),
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
            Format::MsgPack => self.decode_fast(bytes).or_else(|fast| {
                super::langgraph::decode(bytes).map_err(|tree| match tree.python {
                    true => tree.error,
                    false => self.decode_with_path::<T>(bytes).unwrap_or(fast),
                })
            }),
            // LangGraph's first, then Waypoint's.
            #[cfg(feature = "msgpack")]
            Format::LangGraph => super::langgraph::decode(bytes)
                .or_else(|tree| Format::MsgPack.decode_fast(bytes).map_err(|_| tree.error)),
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
                let mut de = rmp_serde::Deserializer::from_read_ref(bytes);
                de.set_max_depth(MAX_DEPTH);
                T::deserialize(&mut de).map_err(|e| fail(&e))
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
            Format::MsgPack => {
                let mut de = rmp_serde::Deserializer::from_read_ref(bytes);
                de.set_max_depth(MAX_DEPTH);
                message(deserialize_tracking(&mut de))
            }
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
