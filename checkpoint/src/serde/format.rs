//! The wire formats, dispatched by enum so the hot path has no trait objects.
//!
//! Decoding runs the fast decoder first; only when it fails is the value decoded again
//! through `serde_path_to_error`, so errors name the failing field at no cost to success.

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
    /// Every format compiled into this build.
    pub const ALL: &'static [Format] = &[
        Format::Json,
        #[cfg(feature = "msgpack")]
        Format::MsgPack,
        #[cfg(feature = "postcard")]
        Format::Postcard,
        #[cfg(feature = "bincode")]
        Format::Bincode,
    ];

    /// The tag stored beside values in this format.
    pub fn tag(self) -> &'static str {
        match self {
            Format::Json => TAG_JSON,
            #[cfg(feature = "msgpack")]
            Format::MsgPack => TAG_MSGPACK,
            #[cfg(feature = "postcard")]
            Format::Postcard => TAG_POSTCARD,
            #[cfg(feature = "bincode")]
            Format::Bincode => TAG_BINCODE,
        }
    }

    /// The format a stored tag names, or an error saying which feature would read it.
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
            #[cfg(feature = "postcard")]
            Format::Postcard => postcard::to_stdvec(value).map_err(|e| fail(&e)),
            #[cfg(feature = "bincode")]
            Format::Bincode => bincode::serde::encode_to_vec(value, bincode::config::standard())
                .map_err(|e| fail(&e)),
        }
    }

    /// Decodes a `T` from `bytes`; on failure the error names the field path.
    pub fn decode<T: DeserializeOwned>(self, bytes: &[u8]) -> Result<T> {
        self.decode_fast(bytes)
            .map_err(|fast| self.decode_with_path::<T>(bytes).unwrap_or(fast))
    }

    fn decode_fast<T: DeserializeOwned>(self, bytes: &[u8]) -> Result<T> {
        let fail = |e: &dyn std::fmt::Display| Error::serialization(self.tag(), e);
        match self {
            Format::Json => serde_json::from_slice(bytes).map_err(|e| fail(&e)),
            #[cfg(feature = "msgpack")]
            Format::MsgPack => rmp_serde::from_slice(bytes).map_err(|e| fail(&e)),
            #[cfg(feature = "postcard")]
            Format::Postcard => match postcard::take_from_bytes(bytes) {
                Ok((v, [])) => Ok(v),
                Ok((_, rest)) => Err(fail(&format_args!("{} trailing bytes", rest.len()))),
                Err(e) => Err(fail(&e)),
            },
            #[cfg(feature = "bincode")]
            Format::Bincode => {
                match bincode::serde::decode_from_slice(bytes, bincode::config::standard()) {
                    Ok((v, n)) if n == bytes.len() => Ok(v),
                    Ok((_, n)) => Err(fail(&format_args!("{} trailing bytes", bytes.len() - n))),
                    Err(e) => Err(fail(&e)),
                }
            }
        }
    }

    /// Decodes again, tracking the path, to explain a failure. `None` if it then succeeds.
    fn decode_with_path<T: DeserializeOwned>(self, bytes: &[u8]) -> Option<Error> {
        fn explain<T, E: std::fmt::Display>(
            tag: &str,
            r: Result<T, serde_path_to_error::Error<E>>,
        ) -> Option<Error> {
            let e = r.err()?;
            let path = e.path().to_string();
            Some(Error::Serialization {
                tag: tag.to_owned(),
                path: (path != ".").then_some(path),
                message: e.into_inner().to_string(),
            })
        }
        let tag = self.tag();
        match self {
            Format::Json => {
                let mut de = serde_json::Deserializer::from_slice(bytes);
                explain(tag, serde_path_to_error::deserialize::<_, T>(&mut de))
            }
            #[cfg(feature = "msgpack")]
            Format::MsgPack => {
                let mut de = rmp_serde::Deserializer::from_read_ref(bytes);
                explain(tag, serde_path_to_error::deserialize::<_, T>(&mut de))
            }
            #[cfg(feature = "postcard")]
            Format::Postcard => {
                let mut de = postcard::Deserializer::from_bytes(bytes);
                explain(tag, serde_path_to_error::deserialize::<_, T>(&mut de))
            }
            #[cfg(feature = "bincode")]
            Format::Bincode => {
                let mut de = bincode::serde::BorrowedSerdeDecoder::from_slice(
                    bytes,
                    bincode::config::standard(),
                    (),
                );
                explain(
                    tag,
                    serde_path_to_error::deserialize::<_, T>(de.as_deserializer()),
                )
            }
        }
    }
}
