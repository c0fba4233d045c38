//! Serialization: typed values to [`SerializedValue`] and back, with optional encryption.
//!
//! [`Serde`] encodes with its configured [`Format`] and decodes by the **stored tag**, so data
//! written in one format stays readable after the default changes. Decoding only ever builds
//! the type the caller asks for. With a [`Keyring`], savers seal values at rest
//! ([`Serde::seal`] / [`Serde::open`]) bound to their [`Slot`].
//!
//! `Format::LangGraph` (feature `msgpack`) reads and writes what Python LangGraph's
//! serializer does: msgpack with Python objects as extension types 0-7, decoded straight
//! from the bytes (no `Node` tree is built) and shown to serde as JSON that keeps each
//! object's class. Its values carry the tag `msgpack`, and every serde reads a `msgpack` value
//! both ways (see `Format`).

mod cipher;
mod finite;
mod format;
mod history;
mod langgraph;
mod path;
pub mod record;

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use serde::Serialize;
use serde::de::{DeserializeOwned, IntoDeserializer, value::BytesDeserializer};

pub use cipher::{CIPHER_NAME, KEY_ENV, Keyring, Slot};
pub use format::{
    Format, TAG_BINCODE, TAG_BYTES, TAG_EMPTY, TAG_JSON, TAG_MSGPACK, TAG_NULL, TAG_POSTCARD,
};
pub use history::{CHILD_CHANNEL, RECORD_KEY, child_record_task};
pub use langgraph::writing_langgraph;
#[cfg(feature = "msgpack")]
pub use langgraph::{Node, PyObject};

use crate::{Error, Result, SerializedValue};

/// Encodes and decodes values, and seals them when a keyring is configured.
#[derive(Clone, Debug, Default)]
pub struct Serde {
    format: Format,
    keyring: Option<Arc<Keyring>>,
    accept_plaintext: bool,
    authenticate_history: bool,
}

impl Serde {
    /// A serde writing `format`, without encryption.
    pub fn new(format: Format) -> Self {
        Serde {
            format,
            keyring: None,
            accept_plaintext: false,
            authenticate_history: false,
        }
    }

    /// The same serde (keyring and all) writing `format`.
    pub fn with_format(mut self, format: Format) -> Self {
        self.format = format;
        self
    }

    /// The same serde sealing values with `keyring`; unencrypted values are then refused.
    pub fn with_keyring(mut self, keyring: Keyring) -> Self {
        self.keyring = Some(Arc::new(keyring));
        self
    }

    /// The same serde, with encryption configured from `WAYPOINT_AES_KEY` when it is set.
    pub fn with_env_keyring(self) -> Result<Self> {
        Ok(match Keyring::from_env()? {
            Some(ring) => self.with_keyring(ring),
            None => self,
        })
    }

    /// Whether a keyed serde still opens values stored before encryption was turned on.
    pub fn accept_plaintext(mut self, accept: bool) -> Self {
        self.accept_plaintext = accept;
        self
    }

    /// The format new values are written in.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Whether values are sealed at rest.
    pub fn is_encrypted(&self) -> bool {
        self.keyring.is_some()
    }

    /// Encodes `value` in the configured format.
    pub fn dumps<T: Serialize + ?Sized>(&self, value: &T) -> Result<SerializedValue> {
        let bytes = self.format.encode(value)?;
        Ok(SerializedValue {
            type_tag: Cow::Borrowed(self.format.tag()),
            bytes: Bytes::from(bytes),
        })
    }

    /// Decodes a `T` from a plaintext value, by its stored tag.
    pub fn loads<T: DeserializeOwned>(&self, value: &SerializedValue) -> Result<T> {
        let tag = value.type_tag.as_ref();
        match tag {
            TAG_NULL => T::deserialize(().into_deserializer())
                .map_err(|e: serde::de::value::Error| Error::serialization(tag, e)),
            TAG_BYTES => T::deserialize(BytesDeserializer::<serde::de::value::Error>::new(
                &value.bytes,
            ))
            .map_err(|e| Error::serialization(tag, e)),
            _ if tag.contains('+') => Err(Error::serialization(
                tag,
                "value is sealed; open it with its slot first",
            )),
            // A serde writing LangGraph's encoding reads `msgpack` values with LangGraph's
            // reader first, rmp-serde second; any other reads them with rmp-serde first.
            #[cfg(feature = "msgpack")]
            TAG_MSGPACK if self.format == Format::LangGraph => {
                Format::LangGraph.decode(&value.bytes)
            }
            _ => Format::from_tag(tag)?.decode(&value.bytes),
        }
    }

    /// Encrypts `value` for `slot` when a keyring is configured; otherwise returns it as is.
    pub fn seal(&self, value: &SerializedValue, slot: &Slot<'_>) -> Result<SerializedValue> {
        let Some(ring) = &self.keyring else {
            return Ok(value.clone());
        };
        if value.type_tag.contains('+') {
            return Err(Error::serialization(
                value.type_tag.as_ref(),
                "value is already sealed",
            ));
        }
        let (tag, bytes) = ring.seal(&value.type_tag, &value.bytes, slot)?;
        Ok(SerializedValue {
            type_tag: Cow::Owned(tag),
            bytes: Bytes::from(bytes),
        })
    }

    /// Decrypts a value sealed for `slot`; plaintext passes only without a keyring or when
    /// legacy plaintext is accepted.
    pub fn open(&self, value: &SerializedValue, slot: &Slot<'_>) -> Result<SerializedValue> {
        match (cipher::split_sealed_tag(&value.type_tag)?, &self.keyring) {
            (None, None) => Ok(value.clone()),
            (None, Some(_)) if self.accept_plaintext => Ok(value.clone()),
            (None, Some(_)) => Err(Error::Decrypt(format!(
                "refusing unencrypted `{}` value; enable accept_plaintext to read legacy data",
                value.type_tag
            ))),
            (Some(_), None) => Err(Error::Decrypt(format!(
                "value is encrypted (`{}`) but no key is configured",
                value.type_tag
            ))),
            (Some((inner, key_id)), Some(ring)) => {
                let plain = ring.open(inner, key_id, &value.bytes, slot)?;
                Ok(SerializedValue {
                    type_tag: Cow::Owned(inner.to_owned()),
                    bytes: Bytes::from(plain),
                })
            }
        }
    }

    /// The stored form of a versioned channel without value: `None` (LangGraph's NULL blob)
    /// without a keyring; with one, an `empty`-tagged seal of nothing bound to `slot`, so a
    /// row whose ciphertext was nulled or deleted cannot pass for an empty channel.
    pub fn seal_empty(&self, slot: &Slot<'_>) -> Result<Option<SerializedValue>> {
        let Some(ring) = &self.keyring else {
            return Ok(None);
        };
        let (tag, sealed) = ring.seal(TAG_EMPTY, &[], slot)?;
        let key_id = cipher::split_sealed_tag(&tag)?.map_or("", |(_, id)| id);
        let id_len = u8::try_from(key_id.len())
            .map_err(|_| Error::InvalidConfig("a key id is longer than 255 bytes".into()))?;
        // The row keeps LangGraph's `empty` type; its blob names the key, then the seal.
        let mut bytes = Vec::with_capacity(1 + key_id.len() + sealed.len());
        bytes.push(id_len);
        bytes.extend_from_slice(key_id.as_bytes());
        bytes.extend_from_slice(&sealed);
        Ok(Some(SerializedValue::new(TAG_EMPTY, bytes)))
    }

    /// Opens the row a backend found for a channel version a checkpoint names (`None`: no
    /// row at all; an `empty`-tagged value: an empty channel, its bytes the seal or nothing).
    ///
    /// Returns `None` for an empty channel. Under a keyring this fails closed: a missing row,
    /// or an empty one without a valid seal for `slot`, is `Error::Decrypt` (unless legacy
    /// plaintext is accepted), never an absent channel.
    pub fn open_channel(
        &self,
        found: Option<&SerializedValue>,
        slot: &Slot<'_>,
    ) -> Result<Option<SerializedValue>> {
        let refuse = |what: &str| {
            Err(Error::Decrypt(format!(
                "{what} for {}; refusing to read it as an absent channel",
                slot.describe()
            )))
        };
        match (found, &self.keyring) {
            (Some(v), _) if v.type_tag != TAG_EMPTY => self.open(v, slot).map(Some),
            (_, None) => Ok(None),
            (_, Some(_)) if self.accept_plaintext => Ok(None),
            (None, Some(_)) => refuse("no stored value"),
            (Some(v), Some(_)) if v.bytes.is_empty() => refuse("no ciphertext"),
            (Some(v), Some(ring)) => {
                let bytes = &v.bytes[..];
                let id_len = usize::from(bytes[0]);
                let Some((key_id, sealed)) = bytes[1..]
                    .split_at_checked(id_len)
                    .and_then(|(id, sealed)| Some((std::str::from_utf8(id).ok()?, sealed)))
                else {
                    return refuse("a malformed empty-value seal");
                };
                ring.open(TAG_EMPTY, key_id, sealed, slot)?;
                Ok(None)
            }
        }
    }

    /// Moves a stored channel value or write (an `empty` row included) from slot `from` to
    /// slot `to`: opened (or its empty seal checked) for the one, sealed for the other.
    pub fn reseal(
        &self,
        stored: &SerializedValue,
        from: &Slot<'_>,
        to: &Slot<'_>,
    ) -> Result<SerializedValue> {
        if stored.type_tag != TAG_EMPTY {
            return self.seal(&self.open(stored, from)?, to);
        }
        self.open_channel(Some(stored), from)?;
        Ok(self
            .seal_empty(to)?
            .unwrap_or_else(|| SerializedValue::new(TAG_EMPTY, Bytes::new())))
    }

    /// Encodes `value` and seals it for `slot`.
    pub fn dumps_sealed<T: Serialize + ?Sized>(
        &self,
        value: &T,
        slot: &Slot<'_>,
    ) -> Result<SerializedValue> {
        self.seal(&self.dumps(value)?, slot)
    }

    /// Opens a value stored in `slot` and decodes it.
    pub fn loads_sealed<T: DeserializeOwned>(
        &self,
        value: &SerializedValue,
        slot: &Slot<'_>,
    ) -> Result<T> {
        self.loads(&self.open(value, slot)?)
    }
}
