//! AES-256-GCM sealing of stored values, bound to where each value lives.
//!
//! Every sealed value gets a fresh 96-bit random nonce. The associated data names the
//! value's slot (thread, namespace, channel and version for channel values; thread,
//! namespace, checkpoint, task, channel and index for writes) and its inner format tag, so a
//! ciphertext copied to another row, or re-tagged, fails to open. The key id travels in the
//! tag (`msgpack+aes-gcm:k2`): values open with whichever configured key they name and seal
//! with the newest, which is how keys rotate.

use std::fmt;

use base64::Engine;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};

use crate::{Error, Result};

/// Name of the cipher in type tags.
pub const CIPHER_NAME: &str = "aes-gcm";
/// Environment variable read by [`Keyring::from_env`].
pub const KEY_ENV: &str = "WAYPOINT_AES_KEY";

const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;

/// Where a stored value belongs; sealed into its associated data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot<'a> {
    /// A channel value, stored once per `(thread, ns, channel, version)`.
    Channel {
        /// Thread id.
        thread_id: &'a str,
        /// Checkpoint namespace.
        checkpoint_ns: &'a str,
        /// Channel name.
        channel: &'a str,
        /// Channel version the value belongs to.
        version: &'a str,
    },
    /// A pending write of one task against one checkpoint.
    Write {
        /// Thread id.
        thread_id: &'a str,
        /// Checkpoint namespace.
        checkpoint_ns: &'a str,
        /// The checkpoint the write belongs to.
        checkpoint_id: &'a str,
        /// The task that wrote it.
        task_id: &'a str,
        /// Channel name.
        channel: &'a str,
        /// Write index (position, or the reserved channel's fixed index).
        idx: i64,
    },
    /// A checkpoint's record in an authenticated history: what it is and the channel
    /// versions it names (not its thread, so `copy_thread` keeps it valid: its values are
    /// bound to the thread already).
    Record {
        /// Checkpoint namespace.
        checkpoint_ns: &'a str,
        /// The checkpoint.
        checkpoint_id: &'a str,
        /// Its channel versions, canonically encoded (see `serde::record_versions`).
        versions: &'a str,
    },
}

impl Slot<'_> {
    /// The slot in words, for errors.
    pub fn describe(&self) -> String {
        match self {
            Slot::Channel {
                thread_id,
                checkpoint_ns,
                channel,
                version,
            } => format!(
                "channel `{channel}` version `{version}` of thread `{thread_id}` namespace \
                 `{checkpoint_ns}`"
            ),
            Slot::Write {
                thread_id,
                checkpoint_ns,
                checkpoint_id,
                task_id,
                channel,
                idx,
            } => format!(
                "write {idx} of task `{task_id}` to `{channel}` at checkpoint `{checkpoint_id}` \
                 of thread `{thread_id}` namespace `{checkpoint_ns}`"
            ),
            Slot::Record {
                checkpoint_ns,
                checkpoint_id,
                ..
            } => {
                format!("the record of checkpoint `{checkpoint_id}` in namespace `{checkpoint_ns}`")
            }
        }
    }

    /// The associated data: a domain label, then length-prefixed fields, so no two slots
    /// (and no field split) produce the same bytes.
    fn associated_data(&self, inner_tag: &str) -> Vec<u8> {
        fn field(out: &mut Vec<u8>, s: &[u8]) {
            out.extend_from_slice(&(s.len() as u64).to_le_bytes());
            out.extend_from_slice(s);
        }
        let mut out = Vec::with_capacity(128);
        out.extend_from_slice(b"waypoint/v1");
        match self {
            Slot::Channel {
                thread_id,
                checkpoint_ns,
                channel,
                version,
            } => {
                out.push(b'c');
                for f in [thread_id, checkpoint_ns, channel, version] {
                    field(&mut out, f.as_bytes());
                }
            }
            Slot::Write {
                thread_id,
                checkpoint_ns,
                checkpoint_id,
                task_id,
                channel,
                idx,
            } => {
                out.push(b'w');
                for f in [thread_id, checkpoint_ns, checkpoint_id, task_id, channel] {
                    field(&mut out, f.as_bytes());
                }
                field(&mut out, &idx.to_le_bytes());
            }
            Slot::Record {
                checkpoint_ns,
                checkpoint_id,
                versions,
            } => {
                out.push(b'r');
                for f in [checkpoint_ns, checkpoint_id, versions] {
                    field(&mut out, f.as_bytes());
                }
            }
        }
        field(&mut out, inner_tag.as_bytes());
        out
    }
}

/// One or more AES-256 keys by id; the last one added seals, any of them opens.
#[derive(Clone)]
pub struct Keyring {
    keys: Vec<(String, LessSafeKey)>,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|(id, _)| id.as_str()).collect();
        f.debug_struct("Keyring").field("key_ids", &ids).finish()
    }
}

impl Keyring {
    /// A keyring holding one 32-byte key under `id` (letters, digits, `-`, `_`).
    pub fn new(id: &str, key: &[u8; 32]) -> Result<Self> {
        Keyring { keys: Vec::new() }.with_key(id, key)
    }

    /// Adds a newer key; from now on values are sealed with it.
    pub fn with_key(mut self, id: &str, key: &[u8; 32]) -> Result<Self> {
        let valid = !id.is_empty()
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !valid {
            return Err(Error::InvalidConfig(format!(
                "key id `{id}` must be non-empty letters, digits, `-` or `_`"
            )));
        }
        if self.keys.iter().any(|(k, _)| k == id) {
            return Err(Error::InvalidConfig(format!("key id `{id}` given twice")));
        }
        let key = UnboundKey::new(&AES_256_GCM, key)
            .map_err(|_| Error::InvalidConfig("AES-256 needs a 32-byte key".into()))?;
        self.keys.push((id.to_owned(), LessSafeKey::new(key)));
        Ok(self)
    }

    /// Parses `[id:]key[,[id:]key...]`, keys as 64 hex digits or base64 of 32 bytes,
    /// oldest first; unnamed keys get ids `k1`, `k2`, ...
    pub fn parse(spec: &str) -> Result<Self> {
        let mut ring = Keyring { keys: Vec::new() };
        for (i, entry) in spec.split(',').map(str::trim).enumerate() {
            let (id, material) = match entry.split_once(':') {
                Some((id, m)) => (id.to_owned(), m),
                None => (format!("k{}", i + 1), entry),
            };
            ring = ring.with_key(&id, &decode_key(material)?)?;
        }
        if ring.keys.is_empty() {
            return Err(Error::InvalidConfig("no key given".into()));
        }
        Ok(ring)
    }

    /// The keyring in `WAYPOINT_AES_KEY`, or `None` when it is unset.
    pub fn from_env() -> Result<Option<Self>> {
        match std::env::var(KEY_ENV) {
            Ok(spec) => Keyring::parse(&spec).map(Some),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(e) => Err(Error::InvalidConfig(format!("{KEY_ENV}: {e}"))),
        }
    }

    /// The id of the key that seals new values.
    pub fn current_id(&self) -> &str {
        self.keys.last().map(|(id, _)| id.as_str()).unwrap_or("")
    }

    /// Encrypts `plaintext` (tagged `inner_tag`) for `slot`; returns the sealed tag and
    /// `nonce || ciphertext || tag`.
    pub(crate) fn seal(
        &self,
        inner_tag: &str,
        plaintext: &[u8],
        slot: &Slot<'_>,
    ) -> Result<(String, Vec<u8>)> {
        let (id, key) = self
            .keys
            .last()
            .ok_or_else(|| Error::InvalidConfig("empty keyring".into()))?;
        let nonce: [u8; NONCE_LEN] = rand::random();
        let aad = slot.associated_data(inner_tag);
        let mut out = Vec::with_capacity(NONCE_LEN + plaintext.len() + TAG_LEN);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(plaintext);
        let tag = key
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&aad),
                &mut out[NONCE_LEN..],
            )
            .map_err(|_| Error::Decrypt("value too large to encrypt".into()))?;
        out.extend_from_slice(tag.as_ref());
        Ok((format!("{inner_tag}+{CIPHER_NAME}:{id}"), out))
    }

    /// Decrypts `nonce || ciphertext || tag` sealed with key `key_id` for `slot`.
    pub(crate) fn open(
        &self,
        inner_tag: &str,
        key_id: &str,
        sealed: &[u8],
        slot: &Slot<'_>,
    ) -> Result<Vec<u8>> {
        let (_, key) = self
            .keys
            .iter()
            .find(|(id, _)| id == key_id)
            .ok_or_else(|| Error::Decrypt(format!("no configured key has id `{key_id}`")))?;
        if sealed.len() < NONCE_LEN + TAG_LEN {
            return Err(Error::Decrypt("sealed value is truncated".into()));
        }
        let (nonce, body) = sealed.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce)
            .map_err(|_| Error::Decrypt("bad nonce".into()))?;
        let aad = slot.associated_data(inner_tag);
        let mut buf = body.to_vec();
        let plain_len = key
            .open_in_place(nonce, Aad::from(&aad), &mut buf)
            .map_err(|_| {
                Error::Decrypt(
                    "authentication failed: wrong key, tampered bytes, or a value moved from another slot"
                        .into(),
                )
            })?
            .len();
        buf.truncate(plain_len);
        Ok(buf)
    }
}

fn decode_key(material: &str) -> Result<[u8; 32]> {
    let bytes = if material.len() == 64 && material.bytes().all(|b| b.is_ascii_hexdigit()) {
        hex::decode(material).map_err(|e| Error::InvalidConfig(format!("key: {e}")))?
    } else {
        base64::engine::general_purpose::STANDARD
            .decode(material)
            .map_err(|_| Error::InvalidConfig("key must be 64 hex digits or base64".into()))?
    };
    bytes.try_into().map_err(|b: Vec<u8>| {
        Error::InvalidConfig(format!("key must be 32 bytes, got {}", b.len()))
    })
}

/// Splits a sealed tag `inner+aes-gcm:id` into `(inner, id)`; `None` for plaintext tags.
pub(crate) fn split_sealed_tag(tag: &str) -> Result<Option<(&str, &str)>> {
    let Some((inner, cipher)) = tag.split_once('+') else {
        return Ok(None);
    };
    match cipher.split_once(':') {
        Some((CIPHER_NAME, id)) if !id.is_empty() => Ok(Some((inner, id))),
        _ => Err(Error::Decrypt(format!("unknown cipher in tag `{tag}`"))),
    }
}
