//! LangGraph's msgpack codec (`Format::LangGraph`, `Node`) driven by fuzz input.
//!
//! Input layout: byte 0 picks a [`Mode`]; the rest is msgpack bytes, used as they are
//! ([`Mode::Raw`]) or wrapped first in an extension of the code byte 1 picks
//! ([`Mode::Wrapped`]), so that the fuzzer reaches the object payload checks without having
//! to find an extension header.
//!
//! Every call must return `Ok` or `Err`, never panic, and:
//! - bytes that read as a [`Node`] write back (`to_msgpack`), and what is written reads as
//!   the same tree and writes the same bytes again; they also read as `serde_json::Value`
//!   (the `lc: 2` view), unless the view would nest deeper than readers accept (it shows
//!   each dict with keys that are not strings four levels deep), which is refused;
//! - the `Value` a tree reads as writes back, and reads again as the same `Value` (the
//!   `lc: 2` view is the exact inverse of the encoder, even for a Python dict shaped like an
//!   `lc: 2` map);
//! - `Format::MsgPack`, `Format::LangGraph` and `Serde` decode the bytes into the shipped
//!   types without panicking.

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use waypoint_checkpoint::serde::Node;
use waypoint_checkpoint::{
    Checkpoint, CheckpointMetadata, Format, PendingWrite, Serde, SerializedValue,
};

/// What the first input byte selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Rest: msgpack bytes, decoded as they are.
    Raw,
    /// Rest: an extension code byte, then the payload of an extension of that code.
    Wrapped,
}

impl Mode {
    /// Every mode, in selector order.
    pub const ALL: [Mode; 2] = [Mode::Raw, Mode::Wrapped];
}

/// A code path a run went through, counted so tests can show what the harness reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// The bytes read as a tree and round-tripped.
    Read,
    /// The tree held a Python object or `_DeltaSnapshot`.
    PythonObject,
    /// The reader refused the bytes.
    Refused,
    /// The JSON view was written back and read again unchanged.
    JsonRoundTrip,
    /// The tree read, and its JSON view was refused as too deep.
    ViewTooDeep,
    /// A `Checkpoint`, metadata, writes or a stored value decoded from the bytes and
    /// round-tripped.
    Typed,
}

impl Path {
    /// Every path, in counter order.
    pub const ALL: [Path; 6] = [
        Path::Read,
        Path::PythonObject,
        Path::Refused,
        Path::JsonRoundTrip,
        Path::ViewTooDeep,
        Path::Typed,
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

/// An ext8/16/32 extension of type `code` around `payload` (empty if it cannot hold it).
fn wrap(code: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 6);
    match (u8::try_from(payload.len()), u16::try_from(payload.len())) {
        (Ok(n), _) => out.extend([0xc7, n]),
        (_, Ok(n)) => {
            out.push(0xc8);
            out.extend(n.to_be_bytes());
        }
        _ => {
            let Ok(n) = u32::try_from(payload.len()) else {
                return Vec::new();
            };
            out.push(0xc9);
            out.extend(n.to_be_bytes());
        }
    }
    out.push(code);
    out.extend_from_slice(payload);
    out
}

/// Runs one input (see the module docs for the layout and the invariants).
pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let wrapped;
    let bytes = match Mode::ALL[usize::from(mode) % Mode::ALL.len()] {
        Mode::Raw => rest,
        Mode::Wrapped => {
            let Some((&code, payload)) = rest.split_first() else {
                return;
            };
            wrapped = wrap(code % 9, payload);
            &wrapped
        }
    };
    check_tree(bytes);
    check_typed(bytes);
}

fn check_tree(bytes: &[u8]) {
    let node = match Node::from_msgpack(bytes) {
        Ok(node) => node,
        Err(_) => {
            hit(Path::Refused);
            // The formats refuse or read it their own way, without panicking.
            let _ = Format::LangGraph.decode::<Value>(bytes);
            return;
        }
    };
    hit(Path::Read);
    if node.has_python_objects() {
        hit(Path::PythonObject);
    }
    let written = node
        .to_msgpack()
        .unwrap_or_else(|e| panic!("a tree read from {bytes:02x?} does not write: {e}"));
    let again = Node::from_msgpack(&written)
        .unwrap_or_else(|e| panic!("written {written:02x?} does not read: {e}"));
    assert_eq!(
        again.to_msgpack().expect("writes"),
        written,
        "the tree does not write the same bytes twice"
    );
    let value: Value = match node.decode() {
        Ok(value) => value,
        // The view nests dicts and bytes deeper than the tree; where that passes what
        // readers accept, it is refused, by the format too.
        Err(e) if e.to_string().contains("nested deeper than") => {
            hit(Path::ViewTooDeep);
            assert!(Format::LangGraph.decode::<Value>(bytes).is_err());
            return;
        }
        Err(e) => panic!("a tree read from {bytes:02x?} has no JSON view: {e}"),
    };
    let via_format: Value = Format::LangGraph
        .decode(bytes)
        .expect("the format reads it too");
    assert_eq!(via_format, value);
    let written = Format::LangGraph
        .encode(&value)
        .unwrap_or_else(|e| panic!("the JSON view of {bytes:02x?} does not write: {e}\n{value}"));
    let back: Value = Format::LangGraph
        .decode(&written)
        .unwrap_or_else(|e| panic!("the encoder wrote {written:02x?}, which does not read: {e}"));
    assert_eq!(back, value, "the JSON view changed on a round trip");
    hit(Path::JsonRoundTrip);
}

fn check_typed(bytes: &[u8]) {
    let stored = SerializedValue::new("msgpack", bytes.to_vec());
    for serde in [Serde::default(), Serde::new(Format::LangGraph)] {
        let _ = serde.loads::<Value>(&stored);
    }
    // As `decode_formats` checks every format: what decodes re-encodes and decodes the same.
    let typed = [
        round_trip::<Checkpoint>(bytes),
        round_trip::<CheckpointMetadata>(bytes),
        round_trip::<Vec<PendingWrite>>(bytes),
        round_trip::<SerializedValue>(bytes),
    ];
    if typed.contains(&true) {
        hit(Path::Typed);
    }
}

/// Whether `bytes` decode as a `T` in LangGraph's format; if so, it must re-encode and
/// decode to an equal value.
fn round_trip<T>(bytes: &[u8]) -> bool
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let Ok(value) = Format::LangGraph.decode::<T>(bytes) else {
        return false;
    };
    let name = std::any::type_name::<T>();
    let encoded = Format::LangGraph
        .encode(&value)
        .unwrap_or_else(|e| panic!("decoded {name} does not re-encode: {e}\n{value:?}"));
    let again = Format::LangGraph
        .decode::<T>(&encoded)
        .unwrap_or_else(|e| panic!("re-encoded {name} does not decode: {e}\n{value:?}"));
    assert_eq!(again, value, "{name} changed on re-encode");
    true
}

#[cfg(test)]
mod tests {
    use serde_json::json;

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

    /// Python's bytes for a UUID, a datetime, a set, a HumanMessage, a snapshot, a tuple key.
    const PYTHON: [&str; 6] = [
        "c72d0093a475756964a455554944d9203030303030303030303030303030303030303030303030303030303030303031",
        "c73b0394a86461746574696d65a86461746574696d65b9323032342d30312d30325430333a30343a30352b30303a3030ad66726f6d69736f666f726d6174",
        "c7110093a86275696c74696e73a3736574920102",
        "c7880594bd6c616e67636861696e5f636f72652e6d657373616765732e68756d616eac48756d616e4d65737361676586a7636f6e74656e74a26869b16164646974696f6e616c5f6b776172677380b1726573706f6e73655f6d6574616461746180a474797065a568756d616ea46e616d65c0a26964a131b36d6f64656c5f76616c69646174655f6a736f6e",
        "d5079101",
        "8192010203",
    ];

    /// Inputs the reader accepts: Python's bytes, Waypoint's encodings and lookalikes.
    fn seeds() -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = PYTHON
            .iter()
            .map(|h| {
                (0..h.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
                    .collect()
            })
            .collect();
        let lookalike = json!({"lc": 2, "type": "constructor", "id": ["m", "V2"], "ext": 5,
                               "kwargs": {"a": [1, {"b": null}]}});
        let malformed = json!({"lc": 2, "type": "constructor", "ext": "x"});
        let checkpoint = serde_json::to_value(Checkpoint::new(3)).unwrap();
        for value in [
            lookalike,
            checkpoint,
            json!({"state": [1, -2, 2.5, "s", true]}),
        ] {
            out.push(Format::LangGraph.encode(&value).unwrap());
            out.push(Format::MsgPack.encode(&value).unwrap());
        }
        out.push(Format::MsgPack.encode(&malformed).unwrap());
        out.push(Format::LangGraph.encode(&Checkpoint::new(3)).unwrap());
        // Dicts with int keys, 33 deep: a tree, whose view nests too deep.
        let mut deep_dicts = [0x81, 0x01].repeat(33);
        deep_dicts.push(0xc0);
        out.push(deep_dicts);
        out
    }

    #[test]
    fn generated_inputs_reach_every_path_without_a_panic() {
        let mut rng = Rng(0x1a6_6a9f_5eed_0007);
        let seeds = seeds();
        for seed in &seeds {
            run(&[0].iter().chain(seed).copied().collect::<Vec<_>>());
        }
        for i in 0..20_000u32 {
            let mut bytes = seeds[rng.next() as usize % seeds.len()].clone();
            // A few mutations: flip, cut, insert.
            for _ in 0..(rng.next() % 4) {
                if bytes.is_empty() {
                    break;
                }
                let at = rng.next() as usize % bytes.len();
                match rng.next() % 3 {
                    0 => bytes[at] ^= 1 << (rng.next() % 8),
                    1 => bytes.truncate(at),
                    _ => bytes.insert(at, rng.next() as u8),
                }
            }
            let mut data = vec![0u8];
            if i % 5 == 0 {
                // An extension around an existing value, of any code.
                data = vec![1, (rng.next() % 9) as u8];
            }
            data.extend(bytes);
            run(&data);
            let n = (rng.next() % 64) as usize;
            run(&rng.bytes(n));
        }
        run(&[]);
        run(&[1]);
        let reached = reached();
        eprintln!("paths reached: {reached:?}");
        for (path, count) in reached {
            assert!(count > 0, "{path:?} never reached");
        }
    }
}
