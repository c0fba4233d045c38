//! `Serde::open` with a fixed keyring and slot.
//!
//! 1. Arbitrary tag and bytes: `open` must not panic (it is expected to fail, since random
//!    bytes are not a genuine ciphertext).
//! 2. A value sealed once per process, with the byte the input selects flipped (in the
//!    sealed bytes or in the tag's inner part): `open` must fail with `Error::Decrypt`.
//!
//! Input: byte 0 chooses how the tag is built, byte 1 is the tag length for an arbitrary
//! tag; the first 3 bytes also pick the flipped position and mask for part 2.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use waypoint_checkpoint::{Error, Keyring, Serde, SerializedValue, Slot};

const SLOT: Slot<'static> = Slot::Channel {
    thread_id: "thread-1",
    checkpoint_ns: "",
    channel: "messages",
    version: "00000000000000000000000000000001.0.5",
};

/// Tags worth trying besides fully arbitrary ones.
const TAGS: [&str; 8] = [
    "msgpack+aes-gcm:k1",
    "json+aes-gcm:k1",
    "postcard+aes-gcm:k1",
    "msgpack+aes-gcm:k2",
    "msgpack+aes-gcm:",
    "msgpack+chacha:k1",
    "+aes-gcm:k1",
    "msgpack",
];

fn serde() -> &'static Serde {
    static SERDE: OnceLock<Serde> = OnceLock::new();
    SERDE.get_or_init(|| {
        let ring = Keyring::new("k1", &[7u8; 32]).expect("valid key id");
        Serde::default().with_keyring(ring)
    })
}

/// A fixed value, sealed once so every run sees the same nonce.
fn sealed() -> &'static SerializedValue {
    static SEALED: OnceLock<SerializedValue> = OnceLock::new();
    SEALED.get_or_init(|| {
        let value = serde_json::json!({"messages": ["hi", "there"], "n": 3});
        let sealed = serde().dumps_sealed(&value, &SLOT).expect("seal");
        let opened: serde_json::Value = serde().loads_sealed(&sealed, &SLOT).expect("open");
        assert_eq!(opened, value, "sealed value does not open to itself");
        sealed
    })
}

fuzz_target!(|data: &[u8]| {
    let serde = serde();

    // 1. Arbitrary tag + bytes.
    let (tag, bytes): (String, &[u8]) = match data {
        [] => (String::new(), &[]),
        [choice, rest @ ..] if (*choice as usize) < TAGS.len() => {
            (TAGS[*choice as usize].to_owned(), rest)
        }
        [_, len, rest @ ..] => {
            let (tag, bytes) = rest.split_at((*len as usize).min(rest.len()));
            (String::from_utf8_lossy(tag).into_owned(), bytes)
        }
        [_] => (String::new(), &[]),
    };
    let _ = serde.open(&SerializedValue::new(tag, bytes.to_vec()), &SLOT);

    // 2. One flipped byte in a genuine sealed value.
    let original = sealed();
    let pick = u16::from_le_bytes([
        data.first().copied().unwrap_or(0),
        data.get(1).copied().unwrap_or(0),
    ]) as usize;
    let mask = match data.get(2).copied().unwrap_or(1) {
        0 => 1,
        m => m,
    };
    let inner_len = original.type_tag.find('+').expect("sealed tag");
    let mut tampered = original.clone();
    let total = original.bytes.len() + inner_len;
    let at = pick % total;
    if at < original.bytes.len() {
        let mut bytes = original.bytes.to_vec();
        bytes[at] ^= mask;
        tampered.bytes = bytes.into();
    } else {
        // Flip a byte of the inner tag (the part that is bound into the associated data),
        // keeping it valid UTF-8 and free of `+`.
        let mut tag = original.type_tag.as_bytes().to_vec();
        let i = at - original.bytes.len();
        tag[i] = match tag[i] ^ (mask & 0x3f) {
            b if b == tag[i] || b == b'+' || !b.is_ascii() => b'_',
            b => b,
        };
        tampered.type_tag = String::from_utf8(tag).expect("ascii tag").into();
    }
    if tampered == *original {
        return;
    }
    match serde.open(&tampered, &SLOT) {
        Err(Error::Decrypt(_)) => {}
        Err(other) => panic!("tampered value failed with a non-Decrypt error: {other}"),
        Ok(v) => panic!("tampered value opened: {v:?}"),
    }
});
