//! The sealed-value paths of `Serde` driven by fuzz input: `seal`, `open`, `open_channel`,
//! `seal_empty`, `reseal`, `dumps_sealed`, `loads_sealed`, and the decoders behind a
//! successful open.
//!
//! Random bytes never authenticate, so most of the input is used to *build* genuine seals
//! (with fixed keys) and then to mutate them; the fuzzer thereby gets past the AES-GCM check
//! into the decoders, and every mutation is checked to fail closed.
//!
//! Input layout: byte 0 picks the [`Mode`]; then the slot (a kind byte, then each field as a
//! length byte `% 17` and that many bytes, lossily UTF-8, and for a write one `idx` byte);
//! then one byte choosing a second slot (the same, a neighbour differing in one field, or one
//! read from the input); the rest is mode-specific (see each mode).
//!
//! Every call must return `Ok` or `Err`, never panic, and:
//! - a keyed serde refuses whatever the input forges (no key: no valid seal);
//! - a genuine seal opens to exactly what was sealed, and `loads_sealed` decodes it exactly
//!   as `loads` decodes the plaintext;
//! - any change to a seal (bytes, tag, key id, inner tag, slot, a missing key, the `empty`
//!   format's length byte or key id) fails with `Error::Decrypt`;
//! - `reseal` moves a value (or an empty seal) to the second slot, where it opens, and from
//!   then on it does not open in the first one.

use std::fmt::Debug;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde::de::DeserializeOwned;
use waypoint_checkpoint::serde::TAG_EMPTY;
use waypoint_checkpoint::{
    Checkpoint, CheckpointMetadata, Error, Format, Keyring, PendingWrite, Serde, SerializedValue,
    Slot,
};

/// The key sealing new values (the newest in the keyring).
const NEW_KEY: [u8; 32] = [9; 32];
/// An older key, still accepted for opening.
const OLD_KEY: [u8; 32] = [7; 32];

/// Inner tags a genuine seal is made with (an arbitrary one is read from the input too).
const INNER_TAGS: [&str; 8] = [
    "json", "msgpack", "postcard", "bincode", "null", "bytes", "empty", "weird",
];

/// Tags tried on forged values besides arbitrary ones.
const FORGED_TAGS: [&str; 10] = [
    "msgpack+aes-gcm:new",
    "json+aes-gcm:old",
    "empty",
    "empty+aes-gcm:new",
    "msgpack+aes-gcm:",
    "msgpack+chacha:new",
    "+aes-gcm:new",
    "msgpack",
    "null",
    "bytes",
];

/// What the first input byte selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Rest: a tag (a byte: one of the forged tags, else a length for an arbitrary tag) and
    /// bytes; given to every serde's `open`, `open_channel`, `reseal`, `loads_sealed`.
    Forged,
    /// Rest: an inner-tag byte (one of [`INNER_TAGS`], else a length for an arbitrary tag)
    /// and the plaintext; sealed, opened, decoded into every type, resealed.
    Genuine,
    /// As [`Mode::Genuine`], then up to four mutations (a kind byte and its operands each).
    Tampered,
    /// Rest: a byte of flags; an `empty` seal made, opened, resealed, and its row removed.
    Empty,
    /// Rest: up to four mutations of an `empty` seal's bytes, or (kind 7) the whole bytes.
    EmptyTampered,
    /// Rest: a step byte, then JSON; the value, a `Checkpoint` with its members as channels
    /// (and the value as a `Checkpoint`, if it is one) are `dumps_sealed` in every format and
    /// `loads_sealed` back.
    Typed,
}

impl Mode {
    /// Every mode, in selector order.
    pub const ALL: [Mode; 6] = [
        Mode::Forged,
        Mode::Genuine,
        Mode::Tampered,
        Mode::Empty,
        Mode::EmptyTampered,
        Mode::Typed,
    ];
}

/// A code path a run went through, counted so tests can show what the harness reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// A keyed serde refused forged input.
    ForgedRefused,
    /// A serde without a keyring passed forged plaintext through `open`.
    PlaintextPassed,
    /// A genuine seal opened to its plaintext.
    Opened,
    /// `loads_sealed` decoded an opened value.
    Decoded,
    /// `loads_sealed` opened a value, then its decoder refused the plaintext.
    DecodeRefused,
    /// A mutated seal failed with `Error::Decrypt`.
    TamperRefused,
    /// A reader without the sealing key failed with `Error::Decrypt`.
    MissingKeyRefused,
    /// A value was resealed to another slot and opened there.
    Resealed,
    /// A value (or an empty seal) moved to another slot failed to open there.
    MovedRefused,
    /// A genuine `empty` seal opened as an empty channel.
    EmptyOpened,
    /// A mutated `empty` seal failed with `Error::Decrypt`.
    EmptyTamperRefused,
    /// An `empty` seal was resealed to another slot and opened there.
    EmptyResealed,
    /// A missing row under a keyring failed with `Error::Decrypt`.
    MissingRowRefused,
    /// `seal_empty` refused a key id too long for the format's length byte.
    LongKeyIdRefused,
    /// A typed value went through `dumps_sealed` and `loads_sealed` unchanged.
    TypedRoundTrip,
}

impl Path {
    /// Every path, in counter order.
    pub const ALL: [Path; 15] = [
        Path::ForgedRefused,
        Path::PlaintextPassed,
        Path::Opened,
        Path::Decoded,
        Path::DecodeRefused,
        Path::TamperRefused,
        Path::MissingKeyRefused,
        Path::Resealed,
        Path::MovedRefused,
        Path::EmptyOpened,
        Path::EmptyTamperRefused,
        Path::EmptyResealed,
        Path::MissingRowRefused,
        Path::LongKeyIdRefused,
        Path::TypedRoundTrip,
    ];
}

static REACHED: [AtomicU64; Path::ALL.len()] = [const { AtomicU64::new(0) }; Path::ALL.len()];

fn hit(path: Path) {
    REACHED[path as usize].fetch_add(1, Ordering::Relaxed);
}

/// How many times each path was taken in this process so far.
pub fn reached() -> Vec<(Path, u64)> {
    Path::ALL
        .iter()
        .map(|&p| (p, REACHED[p as usize].load(Ordering::Relaxed)))
        .collect()
}

/// The serdes every run uses, built once.
struct Serdes {
    /// Keys `old` and `new`; seals with `new`; refuses plaintext.
    strict: Serde,
    /// As `strict`, but accepting legacy plaintext.
    legacy: Serde,
    /// Only the `old` key: cannot open what `strict` seals now.
    old_only: Serde,
    /// No keyring at all.
    plain: Serde,
    /// One key whose id (300 bytes) does not fit the `empty` format's length byte.
    long_id: Serde,
}

fn serdes() -> &'static Serdes {
    static SERDES: OnceLock<Serdes> = OnceLock::new();
    SERDES.get_or_init(|| {
        let ring = || {
            Keyring::new("old", &OLD_KEY)
                .and_then(|r| r.with_key("new", &NEW_KEY))
                .expect("valid keys")
        };
        Serdes {
            strict: Serde::default().with_keyring(ring()),
            legacy: Serde::default().with_keyring(ring()).accept_plaintext(true),
            old_only: Serde::default()
                .with_keyring(Keyring::new("old", &OLD_KEY).expect("valid key")),
            plain: Serde::default(),
            long_id: Serde::default()
                .with_keyring(Keyring::new(&"k".repeat(300), &OLD_KEY).expect("valid key")),
        }
    })
}

/// Reads the fuzz input front to back; past its end every read is zero or empty.
struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }

    /// A length byte `% (max + 1)`, then that many bytes as lossy UTF-8.
    fn text(&mut self, max: usize) -> String {
        let n = usize::from(self.byte()) % (max + 1);
        String::from_utf8_lossy(self.bytes(n)).into_owned()
    }

    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }
}

/// An owned slot, so one can be read from the input and changed.
#[derive(Clone, Debug, PartialEq, Eq)]
enum OwnedSlot {
    Channel([String; 4]),
    Write([String; 5], i64),
    Record([String; 3]),
}

impl OwnedSlot {
    /// A kind byte (channel, write, record), then the kind's fields (and a write's `idx`).
    fn read(input: &mut Input<'_>) -> OwnedSlot {
        match input.byte() % 3 {
            0 => OwnedSlot::Channel(std::array::from_fn(|_| input.text(16))),
            1 => {
                let fields = std::array::from_fn(|_| input.text(16));
                OwnedSlot::Write(fields, i64::from(input.byte() as i8))
            }
            _ => OwnedSlot::Record(std::array::from_fn(|_| input.text(16))),
        }
    }

    /// The same slot with one field changed (so never equal to `self`).
    fn neighbour(&self, which: u8) -> OwnedSlot {
        let mut other = self.clone();
        let fields: &mut [String] = match &mut other {
            OwnedSlot::Channel(f) => f,
            OwnedSlot::Write(f, idx) => {
                if which % 6 == 5 {
                    *idx = idx.wrapping_add(1);
                    return other;
                }
                f
            }
            OwnedSlot::Record(f) => f,
        };
        let i = usize::from(which) % fields.len();
        fields[i].push('x');
        other
    }

    fn slot(&self) -> Slot<'_> {
        match self {
            OwnedSlot::Channel([thread_id, checkpoint_ns, channel, version]) => Slot::Channel {
                thread_id,
                checkpoint_ns,
                channel,
                version,
            },
            OwnedSlot::Write([thread_id, checkpoint_ns, checkpoint_id, task_id, channel], idx) => {
                Slot::Write {
                    thread_id,
                    checkpoint_ns,
                    checkpoint_id,
                    task_id,
                    channel,
                    idx: *idx,
                }
            }
            OwnedSlot::Record([checkpoint_ns, checkpoint_id, versions]) => Slot::Record {
                checkpoint_ns,
                checkpoint_id,
                versions,
            },
        }
    }
}

/// The slot and the second slot the input names.
fn read_slots(input: &mut Input<'_>) -> (OwnedSlot, OwnedSlot) {
    let first = OwnedSlot::read(input);
    let choice = input.byte();
    let second = match choice % 3 {
        0 => first.clone(),
        1 => first.neighbour(choice / 3),
        _ => OwnedSlot::read(input),
    };
    (first, second)
}

/// Runs one input through the sealed-value paths; panics only on a broken invariant.
pub fn run(data: &[u8]) {
    let mut input = Input { data };
    let mode = Mode::ALL[usize::from(input.byte()) % Mode::ALL.len()];
    let (slot, other) = read_slots(&mut input);
    let (slot, other) = (slot.slot(), other.slot());
    match mode {
        Mode::Forged => forged(&mut input, &slot, &other),
        Mode::Genuine => {
            if let Some((plain, sealed)) = genuine(&mut input, &slot) {
                opens(&plain, &sealed, &slot, &other);
            }
        }
        Mode::Tampered => {
            if let Some((plain, sealed)) = genuine(&mut input, &slot) {
                tampered(&mut input, &plain, &sealed, &slot, &other);
            }
        }
        Mode::Empty => empty(&mut input, &slot, &other),
        Mode::EmptyTampered => empty_tampered(&mut input, &slot, &other),
        Mode::Typed => typed(&mut input, &slot),
    }
}

/// Arbitrary tag and bytes: a keyed serde refuses them, whatever they are.
fn forged(input: &mut Input<'_>, slot: &Slot<'_>, other: &Slot<'_>) {
    let choice = input.byte();
    let tag = match FORGED_TAGS.get(usize::from(choice)) {
        Some(tag) => (*tag).to_owned(),
        None => input.text(usize::from(choice)),
    };
    let value = SerializedValue::new(tag, input.rest().to_vec());
    let s = serdes();
    for serde in [&s.strict, &s.old_only] {
        let opened = serde.open(&value, slot);
        assert!(opened.is_err(), "forged {value:?} opened: {opened:?}");
        let channel = serde.open_channel(Some(&value), slot);
        assert!(channel.is_err(), "forged {value:?} opened: {channel:?}");
        let moved = serde.reseal(&value, slot, other);
        assert!(moved.is_err(), "forged {value:?} resealed: {moved:?}");
        assert!(
            serde
                .loads_sealed::<serde_json::Value>(&value, slot)
                .is_err()
        );
        hit(Path::ForgedRefused);
    }
    // Legacy and keyless readers pass plaintext through, and decode it as `loads` does.
    for serde in [&s.legacy, &s.plain] {
        if let Ok(opened) = serde.open(&value, slot) {
            assert_eq!(opened, value, "plaintext changed by open");
            hit(Path::PlaintextPassed);
            decodes_alike(serde, &value, &opened, slot);
        }
        let _ = serde.open_channel(Some(&value), slot);
        let _ = serde.reseal(&value, slot, other);
    }
}

/// A plaintext value read from the input and its genuine seal for `slot`; `None` when the
/// inner tag cannot be sealed (it holds `+`), which `seal` must refuse.
fn genuine(input: &mut Input<'_>, slot: &Slot<'_>) -> Option<(SerializedValue, SerializedValue)> {
    let choice = input.byte();
    let tag = match INNER_TAGS.get(usize::from(choice)) {
        Some(tag) => (*tag).to_owned(),
        None => input.text(usize::from(choice) % 32),
    };
    let len = usize::from(input.byte()) * 4;
    let plain = SerializedValue::new(tag, input.bytes(len).to_vec());
    let sealed = serdes().strict.seal(&plain, slot);
    if plain.type_tag.contains('+') {
        assert!(sealed.is_err(), "sealed an already sealed tag: {sealed:?}");
        return None;
    }
    let sealed = sealed.unwrap_or_else(|e| panic!("cannot seal {plain:?}: {e}"));
    assert_ne!(
        sealed.bytes, plain.bytes,
        "sealing left the bytes as they were"
    );
    Some((plain, sealed))
}

/// `loads_sealed` decodes `sealed` into `T` exactly as `loads` decodes `plain`.
fn decode_as<T: DeserializeOwned + PartialEq + Debug>(
    serde: &Serde,
    plain: &SerializedValue,
    sealed: &SerializedValue,
    slot: &Slot<'_>,
) {
    let direct = serde.loads::<T>(plain);
    let through = serde.loads_sealed::<T>(sealed, slot);
    match (&direct, &through) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a, b, "loads_sealed and loads disagree");
            hit(Path::Decoded);
        }
        (Err(a), Err(b)) => {
            assert_eq!(
                a.to_string(),
                b.to_string(),
                "loads_sealed and loads fail apart"
            );
            hit(Path::DecodeRefused);
        }
        _ => panic!(
            "loads and loads_sealed disagree on {plain:?}: {:?} / {:?}",
            direct.map(|_| ()),
            through.map(|_| ())
        ),
    }
}

/// Every decoder behind `loads_sealed`, on `sealed` (whose plaintext is `plain`).
fn decodes_alike(
    serde: &Serde,
    plain: &SerializedValue,
    sealed: &SerializedValue,
    slot: &Slot<'_>,
) {
    decode_as::<serde_json::Value>(serde, plain, sealed, slot);
    decode_as::<Checkpoint>(serde, plain, sealed, slot);
    decode_as::<CheckpointMetadata>(serde, plain, sealed, slot);
    decode_as::<Vec<PendingWrite>>(serde, plain, sealed, slot);
    decode_as::<String>(serde, plain, sealed, slot);
    decode_as::<Option<Vec<u8>>>(serde, plain, sealed, slot);
}

/// A genuine seal opens to its plaintext with every reader holding its key, decodes like
/// it, and moves to `other` with `reseal`; readers without the key refuse it.
fn opens(plain: &SerializedValue, sealed: &SerializedValue, slot: &Slot<'_>, other: &Slot<'_>) {
    let s = serdes();
    for serde in [&s.strict, &s.legacy] {
        let opened = serde
            .open(sealed, slot)
            .unwrap_or_else(|e| panic!("a genuine seal of {plain:?} does not open: {e}"));
        assert_eq!(&opened, plain, "open changed the value");
        let channel = serde.open_channel(Some(sealed), slot);
        assert_eq!(channel.ok().flatten().as_ref(), Some(plain), "open_channel");
        hit(Path::Opened);
    }
    decodes_alike(&s.strict, plain, sealed, slot);
    for serde in [&s.old_only, &s.plain] {
        assert!(
            matches!(serde.open(sealed, slot), Err(Error::Decrypt(_))),
            "opened without the key"
        );
        assert!(
            serde
                .loads_sealed::<serde_json::Value>(sealed, slot)
                .is_err()
        );
        hit(Path::MissingKeyRefused);
    }
    let moved = s
        .strict
        .reseal(sealed, slot, other)
        .unwrap_or_else(|e| panic!("cannot reseal {plain:?}: {e}"));
    assert_eq!(
        s.strict.open(&moved, other).ok().as_ref(),
        Some(plain),
        "reseal"
    );
    hit(Path::Resealed);
    if slot != other {
        for (value, at) in [(sealed, other), (&moved, slot)] {
            assert!(
                matches!(s.strict.open(value, at), Err(Error::Decrypt(_))),
                "a value opened in a slot it was not sealed for"
            );
            assert!(s.strict.reseal(value, at, slot).is_err());
        }
        hit(Path::MovedRefused);
    }
}

/// One mutation of a sealed value, chosen and parametrised by the input.
fn mutate(input: &mut Input<'_>, value: &mut SerializedValue) {
    let kind = input.byte();
    let at = usize::from(u16::from_le_bytes([input.byte(), input.byte()]));
    let mut bytes = value.bytes.to_vec();
    let tag = value.type_tag.to_string();
    let (inner, rest) = tag.split_once('+').unwrap_or((tag.as_str(), ""));
    let (cipher, key_id) = rest.split_once(':').unwrap_or((rest, ""));
    let new_tag = |inner: &str, cipher: &str, key_id: &str| format!("{inner}+{cipher}:{key_id}");
    match kind % 8 {
        // A byte of the nonce, ciphertext or GCM tag flipped.
        0 if !bytes.is_empty() => {
            let i = at % bytes.len();
            bytes[i] ^= input.byte().max(1);
        }
        // Cut short (past the nonce and tag lengths too).
        1 => bytes.truncate(at % (bytes.len() + 1)),
        // Trailing bytes.
        2 => bytes.extend_from_slice(input.bytes(1 + at % 16)),
        // Another key id: the other key, an unknown one, none, or arbitrary.
        3 => {
            let id = match at % 4 {
                0 => "old".to_owned(),
                1 => "nope".to_owned(),
                2 => String::new(),
                _ => input.text(16),
            };
            value.type_tag = new_tag(inner, cipher, &id).into();
        }
        // Another inner tag (bound into the associated data).
        4 => {
            let other = match INNER_TAGS.get(at % 12) {
                Some(t) => (*t).to_owned(),
                None => input.text(16),
            };
            value.type_tag = new_tag(&other, cipher, key_id).into();
        }
        // Another cipher name.
        5 => {
            let other = ["aes-gcm", "aes-gcm-siv", "", "chacha20"][at % 4];
            value.type_tag = new_tag(inner, other, key_id).into();
        }
        // The tag made plaintext (no cipher part at all).
        6 => value.type_tag = inner.to_owned().into(),
        // Bytes replaced by the input's.
        _ => bytes = input.bytes(at % 128).to_vec(),
    }
    value.bytes = bytes.into();
}

/// Up to four mutations of a genuine seal: whatever changed fails with `Error::Decrypt`.
fn tampered(
    input: &mut Input<'_>,
    plain: &SerializedValue,
    sealed: &SerializedValue,
    slot: &Slot<'_>,
    other: &Slot<'_>,
) {
    let mut value = sealed.clone();
    let rounds = 1 + input.byte() % 4;
    for _ in 0..rounds {
        mutate(input, &mut value);
    }
    // Opened in `other`: a slot change is a mutation too.
    let s = serdes();
    if value == *sealed && slot == other {
        assert_eq!(s.strict.open(&value, other).ok().as_ref(), Some(plain));
        return;
    }
    let opened = s.strict.open(&value, other);
    assert!(
        matches!(opened, Err(Error::Decrypt(_))),
        "a changed seal did not fail with Decrypt: {value:?}: {opened:?}"
    );
    assert!(
        s.strict
            .loads_sealed::<serde_json::Value>(&value, other)
            .is_err()
    );
    assert!(s.strict.open_channel(Some(&value), other).is_err());
    assert!(s.strict.reseal(&value, other, slot).is_err());
    hit(Path::TamperRefused);
}

/// A genuine `empty` seal: it opens as an empty channel where it was made, moves with
/// `reseal`, and its absence (a missing row) is refused.
fn empty(input: &mut Input<'_>, slot: &Slot<'_>, other: &Slot<'_>) {
    let s = serdes();
    let flags = input.byte();
    let sealed = s
        .strict
        .seal_empty(slot)
        .unwrap_or_else(|e| panic!("cannot seal an empty channel: {e}"))
        .expect("a keyed serde seals empty channels");
    assert_eq!(sealed.type_tag, TAG_EMPTY);
    assert_eq!(usize::from(sealed.bytes[0]), "new".len());
    for serde in [&s.strict, &s.legacy, &s.plain] {
        let opened = serde.open_channel(Some(&sealed), slot);
        assert!(matches!(opened, Ok(None)), "empty seal: {opened:?}");
    }
    hit(Path::EmptyOpened);
    assert!(matches!(
        s.old_only.open_channel(Some(&sealed), slot),
        Err(Error::Decrypt(_))
    ));
    // A missing row, or an empty one with no ciphertext: refused unless legacy.
    let bare = SerializedValue::new(TAG_EMPTY, Vec::new());
    for row in [None, Some(&bare)] {
        assert!(matches!(
            s.strict.open_channel(row, slot),
            Err(Error::Decrypt(_))
        ));
        assert!(matches!(s.legacy.open_channel(row, slot), Ok(None)));
        assert!(matches!(s.plain.open_channel(row, slot), Ok(None)));
    }
    hit(Path::MissingRowRefused);
    assert!(s.strict.reseal(&bare, slot, other).is_err());
    let moved = s
        .strict
        .reseal(&sealed, slot, other)
        .unwrap_or_else(|e| panic!("cannot reseal an empty seal: {e}"));
    assert!(matches!(
        s.strict.open_channel(Some(&moved), other),
        Ok(None)
    ));
    hit(Path::EmptyResealed);
    if slot != other {
        for (value, at) in [(&sealed, other), (&moved, slot)] {
            assert!(matches!(
                s.strict.open_channel(Some(value), at),
                Err(Error::Decrypt(_))
            ));
        }
        hit(Path::MovedRefused);
    }
    // Keyless: no seal, and `reseal` of a bare empty row keeps it bare.
    assert!(matches!(s.plain.seal_empty(slot), Ok(None)));
    let kept = s.plain.reseal(&bare, slot, other);
    assert_eq!(kept.ok().as_ref(), Some(&bare));
    if flags & 1 == 1 {
        assert!(matches!(
            s.long_id.seal_empty(slot),
            Err(Error::InvalidConfig(_))
        ));
        hit(Path::LongKeyIdRefused);
    }
}

/// Mutations of a genuine `empty` seal (its length byte, key id, nonce and tag are all
/// in the bytes): whatever changed fails with `Error::Decrypt`.
fn empty_tampered(input: &mut Input<'_>, slot: &Slot<'_>, other: &Slot<'_>) {
    let s = serdes();
    let sealed = s
        .strict
        .seal_empty(slot)
        .ok()
        .flatten()
        .expect("a keyed serde seals empty channels");
    let mut bytes = sealed.bytes.to_vec();
    let rounds = 1 + input.byte() % 4;
    for _ in 0..rounds {
        let kind = input.byte();
        let at = usize::from(input.byte());
        match kind % 8 {
            0 if !bytes.is_empty() => {
                let i = at % bytes.len();
                bytes[i] ^= input.byte().max(1);
            }
            1 => bytes.truncate(at % (bytes.len() + 1)),
            2 => bytes.extend_from_slice(input.bytes(1 + at % 16)),
            // The length byte set to anything.
            3 if !bytes.is_empty() => bytes[0] = input.byte(),
            // Another key id in place of `new`, its length byte to match.
            4 if bytes.len() > 4 => {
                let id = match at % 4 {
                    0 => b"old".to_vec(),
                    1 => Vec::new(),
                    2 => vec![0xff, 0xfe],
                    _ => input.bytes(at % 8).to_vec(),
                };
                let mut changed = vec![u8::try_from(id.len()).unwrap_or(u8::MAX)];
                changed.extend_from_slice(&id);
                changed.extend_from_slice(&bytes[4..]);
                bytes = changed;
            }
            // A genuine seal of something else (another tag's ciphertext) in the format.
            5 => {
                let inner = SerializedValue::new("msgpack", input.bytes(at % 8).to_vec());
                if let Ok(v) = s.strict.seal(&inner, slot) {
                    bytes = vec![3];
                    bytes.extend_from_slice(b"new");
                    bytes.extend_from_slice(&v.bytes);
                }
            }
            // Nothing at all.
            6 => bytes.clear(),
            _ => bytes = input.bytes(at % 64).to_vec(),
        }
    }
    let value = SerializedValue::new(TAG_EMPTY, bytes);
    if value == sealed && slot == other {
        assert!(matches!(
            s.strict.open_channel(Some(&value), other),
            Ok(None)
        ));
        return;
    }
    let opened = s.strict.open_channel(Some(&value), other);
    assert!(
        matches!(opened, Err(Error::Decrypt(_))),
        "a changed empty seal did not fail with Decrypt: {value:?}: {opened:?}"
    );
    assert!(s.strict.reseal(&value, other, slot).is_err());
    hit(Path::EmptyTamperRefused);
}

/// `dumps_sealed` then `loads_sealed` of `value` in `format` matches `dumps` then `loads`.
fn typed_in<T: Serialize + DeserializeOwned + PartialEq + Debug>(
    format: Format,
    value: &T,
    slot: &Slot<'_>,
) {
    let ring = Keyring::new("new", &NEW_KEY).expect("valid key");
    let serde = Serde::new(format).with_keyring(ring);
    let direct = serde.dumps(value).and_then(|v| serde.loads::<T>(&v));
    let through = serde
        .dumps_sealed(value, slot)
        .and_then(|v| serde.loads_sealed::<T>(&v, slot));
    match (direct, through) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a, b, "{format:?}: sealing changed the value");
            hit(Path::TypedRoundTrip);
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        (a, b) => panic!("{format:?}: sealed and plain paths disagree: {a:?} / {b:?}"),
    }
}

/// A JSON value from the input, a `Checkpoint` holding each of its members as a channel
/// (and the value itself as a `Checkpoint`, if it is one), in every format.
fn typed(input: &mut Input<'_>, slot: &Slot<'_>) {
    let step = input.byte();
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(input.rest()) else {
        return;
    };
    let mut built = Checkpoint {
        v: u32::from(step),
        id: format!("00000000-0000-6000-8000-{step:012}"),
        ts: "2026-01-01T00:00:00.000000+00:00".to_owned(),
        channel_values: Default::default(),
        channel_versions: Default::default(),
        versions_seen: Default::default(),
        updated_channels: (step % 2 == 1).then(Vec::new),
    };
    if let serde_json::Value::Object(members) = &value {
        for (name, member) in members {
            let bytes = serde_json::to_vec(member).unwrap_or_default();
            built
                .channel_values
                .insert(name.clone(), SerializedValue::new("json", bytes));
            if let Some(updated) = &mut built.updated_channels {
                updated.push(name.clone());
            }
        }
    }
    let parsed = serde_json::from_value::<Checkpoint>(value.clone()).ok();
    for &format in Format::ALL {
        typed_in(format, &value, slot);
        typed_in(format, &built, slot);
        if let Some(checkpoint) = &parsed {
            typed_in(format, checkpoint, slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift64*), so the test needs no crate.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn bytes(&mut self, n: usize) -> Vec<u8> {
            (0..n).map(|_| self.next() as u8).collect()
        }
    }

    /// Plaintexts the decoders accept: encodings of real values.
    fn encodings() -> Vec<(u8, Vec<u8>)> {
        let value = serde_json::json!({"messages": ["hi", {"role": "ai"}], "n": 3});
        let checkpoint = Checkpoint::new(3);
        let mut out = Vec::new();
        for (i, format) in Format::ALL.iter().enumerate() {
            out.push((i as u8, format.encode(&value).expect("encodes")));
            out.push((i as u8, format.encode(&checkpoint).expect("encodes")));
        }
        out
    }

    #[test]
    fn generated_inputs_reach_every_sealed_path_without_a_panic() {
        let mut rng = Rng(0x5eed_1234_abcd_ef01);
        let encodings = encodings();
        let checkpoint = serde_json::to_vec(&Checkpoint::new(3)).expect("json");
        for i in 0..6000u32 {
            let mode = (i % 6) as u8;
            // Slot: kind, its fields (short, so the mode's bytes follow soon), then the second
            // slot: the same or a neighbour (one read from the input comes from `rng.bytes`).
            let kind = (rng.next() % 3) as u8;
            let mut data = vec![mode, kind];
            for _ in 0..[4, 5, 3][usize::from(kind)] {
                let len = (rng.next() % 4) as u8;
                data.push(len);
                data.extend(rng.bytes(usize::from(len)));
            }
            if kind == 1 {
                data.push(rng.next() as u8);
            }
            data.push(((rng.next() % 2) + 3 * (rng.next() % 80)) as u8);
            match mode {
                // Genuine and tampered seals of plaintexts that decode.
                1 | 2 if i % 4 == 1 => {
                    let (tag, plain) = &encodings[rng.next() as usize % encodings.len()];
                    data.extend([*tag, (plain.len() / 4 + 1) as u8]);
                    data.extend(plain);
                    let n = (rng.next() % 64) as usize;
                    data.extend(rng.bytes(n));
                }
                5 => {
                    data.push(rng.next() as u8);
                    let doc = if i % 2 == 0 {
                        checkpoint.clone()
                    } else {
                        format!("{{\"k\":[{},\"v\",null,{{}}]}}", rng.next() % 1000).into_bytes()
                    };
                    data.extend(doc);
                }
                _ => {
                    let n = (rng.next() % 160) as usize;
                    data.extend(rng.bytes(n));
                }
            }
            run(&data);
            // Unstructured bytes too.
            let n = (rng.next() % 96) as usize;
            run(&rng.bytes(n));
        }
        run(&[]);
        let reached = reached();
        eprintln!("paths reached: {reached:?}");
        for (path, count) in reached {
            assert!(count > 0, "{path:?} never reached");
        }
    }
}
