//! Serialization: typed values to [`SerializedValue`] and back, with optional encryption.
//!
//! [`Serde`] encodes with its configured [`Format`] and decodes by the **stored tag**, so data
//! written in one format stays readable after the default changes. Decoding only ever builds
//! the type the caller asks for. With a [`Keyring`], savers seal values at rest
//! ([`Serde::seal`] / [`Serde::open`]) bound to their [`Slot`].

mod cipher;
mod format;
mod path;

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use serde::Serialize;
use serde::de::{DeserializeOwned, IntoDeserializer, value::BytesDeserializer};

pub use cipher::{CIPHER_NAME, KEY_ENV, Keyring, Slot};
pub use format::{Format, TAG_BINCODE, TAG_BYTES, TAG_JSON, TAG_MSGPACK, TAG_NULL, TAG_POSTCARD};

use crate::{Error, Result, SerializedValue};

/// Encodes and decodes values, and seals them when a keyring is configured.
#[derive(Clone, Debug, Default)]
pub struct Serde {
    format: Format,
    keyring: Option<Arc<Keyring>>,
    accept_plaintext: bool,
}

impl Serde {
    /// A serde writing `format`, without encryption.
    pub fn new(format: Format) -> Self {
        Serde {
            format,
            keyring: None,
            accept_plaintext: false,
        }
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
