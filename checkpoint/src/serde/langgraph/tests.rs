//! LangGraph's msgpack: golden vectors from Python, every extension code, typed and JSON
//! targets, the encoder's inverse mapping, and hostile input.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Node, PyObject, writing_langgraph};
use crate::{Error, Format, Serde, SerializedValue};

fn hex(s: &str) -> Vec<u8> {
    hex::decode(s.replace(' ', "")).expect("test hex")
}

/// Golden vectors: Python's `JsonPlusSerializer().dumps_typed` (langgraph-checkpoint 4.3.2,
/// ormsgpack 1.13.1), the hex of the `msgpack` bytes.
mod golden {
    pub(super) const UUID: &str = "c72d0093a475756964a455554944d920\
        3030303030303030303030303030303030303030303030303030303030303031";
    pub(super) const DATETIME: &str = "c73b0394a86461746574696d65a86461746574696d65b9\
        323032342d30312d30325430333a30343a30352b30303a3030ad66726f6d69736f666f726d6174";
    pub(super) const DATE: &str = "c7150193a86461746574696d65a46461746593cd07e80102";
    pub(super) const SET: &str = "c7110093a86275696c74696e73a3736574920102";
    pub(super) const DECIMAL: &str = "c7150093a7646563696d616ca7446563696d616ca3312e35";
    pub(super) const DELTA_SNAPSHOT: &str = "d5079101";
    pub(super) const HUMAN_MESSAGE: &str = "c7880594bd6c616e67636861696e5f636f72652e6d65737361\
        6765732e68756d616eac48756d616e4d65737361676586a7636f6e74656e74a26869b16164646974696f6e\
        616c5f6b776172677380b1726573706f6e73655f6d6574616461746180a474797065a568756d616ea46e61\
        6d65c0a26964a131b36d6f64656c5f76616c69646174655f6a736f6e";
    pub(super) const TUPLE_KEY: &str = "8192010203";
    pub(super) const TIME: &str = "c7410293a86461746574696d65a474696d6586a4686f757201a66d696e\
        75746502a67365636f6e6403ab6d6963726f7365636f6e6400a6747a696e666fc0a4666f6c6400";
    pub(super) const TIMEDELTA: &str = "c7180193a86461746574696d65a974696d6564656c746193010200";
    pub(super) const FROZENSET: &str = "c7160093a86275696c74696e73a966726f7a656e7365749101";
    pub(super) const PYDANTIC_V1: &str = "c7110493a85f5f6d61696e5f5fa2563181a16101";
    pub(super) const ENUM: &str = "c7140093a85f5f6d61696e5f5fa5436f6c6f72a3726564";
    pub(super) const NAMEDTUPLE: &str = "c7130293a85f5f6d61696e5f5fa15082a17801a17902";
    pub(super) const PATH: &str = "c71a0193a7706174686c6962a9506f7369785061746893a12fa161a162";
    pub(super) const SEND: &str =
        "c71d0193af6c616e6767726170682e7479706573a453656e6492a16e81a16b01";
    pub(super) const BYTES_IN_LIST: &str = "91c4026162";
    /// `[float("nan"), float("inf"), float("-inf"), 1.5]`.
    pub(super) const NON_FINITE_FLOATS: &str =
        "94cb7ff8000000000000cb7ff0000000000000cbfff0000000000000cb3ff8000000000000";
}

/// The `builtins.float` form of a float JSON cannot hold, as `float()` spells it.
fn float_form(text: &str) -> Value {
    json!({"lc": 2, "type": "constructor", "id": ["builtins", "float"], "ext": null,
           "method": null, "args": [text], "kwargs": {}})
}

fn lc2(ext: u64, id: &[&str], method: Value, args: Value, kwargs: Value) -> Value {
    json!({"lc": 2, "type": "constructor", "id": id, "ext": ext, "method": method,
           "args": args, "kwargs": kwargs})
}

fn to_value(bytes: &[u8]) -> Value {
    Format::LangGraph.decode(bytes).expect("decodes to JSON")
}

/// Every golden vector, its JSON reading, and whether that JSON writes the same bytes back
/// (maps written from `serde_json::Value` come out in key order, and `_DeltaSnapshot` reads as
/// the value it wraps).
fn vectors() -> Vec<(&'static str, Value, bool)> {
    let none = json!({});
    vec![
        (
            golden::UUID,
            lc2(
                0,
                &["uuid", "UUID"],
                Value::Null,
                json!([format!("{:032}", 1)]),
                none.clone(),
            ),
            true,
        ),
        (
            golden::DATETIME,
            lc2(
                3,
                &["datetime", "datetime"],
                json!("fromisoformat"),
                json!(["2024-01-02T03:04:05+00:00"]),
                none.clone(),
            ),
            true,
        ),
        (
            golden::DATE,
            lc2(
                1,
                &["datetime", "date"],
                Value::Null,
                json!([2024, 1, 2]),
                none.clone(),
            ),
            true,
        ),
        (
            golden::SET,
            lc2(
                0,
                &["builtins", "set"],
                Value::Null,
                json!([[1, 2]]),
                none.clone(),
            ),
            true,
        ),
        (
            golden::DECIMAL,
            lc2(
                0,
                &["decimal", "Decimal"],
                Value::Null,
                json!(["1.5"]),
                none.clone(),
            ),
            true,
        ),
        (golden::DELTA_SNAPSHOT, json!([1]), false),
        (
            golden::HUMAN_MESSAGE,
            lc2(
                5,
                &["langchain_core", "messages", "human", "HumanMessage"],
                json!("model_validate_json"),
                json!([]),
                json!({"content": "hi", "additional_kwargs": {}, "response_metadata": {},
                       "type": "human", "name": null, "id": "1"}),
            ),
            false,
        ),
        (
            golden::TUPLE_KEY,
            json!({"lc": 2, "type": "constructor", "id": ["builtins", "dict"], "ext": null,
                   "method": null, "args": [[[[1, 2], 3]]], "kwargs": {}}),
            true,
        ),
        (
            golden::TIME,
            lc2(
                2,
                &["datetime", "time"],
                Value::Null,
                json!([]),
                json!({"hour": 1, "minute": 2, "second": 3, "microsecond": 0, "tzinfo": null,
                       "fold": 0}),
            ),
            false,
        ),
        (
            golden::TIMEDELTA,
            lc2(
                1,
                &["datetime", "timedelta"],
                Value::Null,
                json!([1, 2, 0]),
                none.clone(),
            ),
            true,
        ),
        (
            golden::FROZENSET,
            lc2(
                0,
                &["builtins", "frozenset"],
                Value::Null,
                json!([[1]]),
                none.clone(),
            ),
            true,
        ),
        (
            golden::PYDANTIC_V1,
            lc2(
                4,
                &["__main__", "V1"],
                Value::Null,
                json!([]),
                json!({"a": 1}),
            ),
            true,
        ),
        (
            golden::ENUM,
            lc2(
                0,
                &["__main__", "Color"],
                Value::Null,
                json!(["red"]),
                none.clone(),
            ),
            true,
        ),
        (
            golden::NAMEDTUPLE,
            lc2(
                2,
                &["__main__", "P"],
                Value::Null,
                json!([]),
                json!({"x": 1, "y": 2}),
            ),
            true,
        ),
        (
            golden::PATH,
            lc2(
                1,
                &["pathlib", "PosixPath"],
                Value::Null,
                json!(["/", "a", "b"]),
                none.clone(),
            ),
            true,
        ),
        (
            golden::SEND,
            lc2(
                1,
                &["langgraph", "types", "Send"],
                Value::Null,
                json!(["n", {"k": 1}]),
                none,
            ),
            true,
        ),
        (
            golden::BYTES_IN_LIST,
            json!([{"lc": 2, "type": "constructor", "id": ["builtins", "bytes"], "ext": null,
                    "method": "fromhex", "args": ["6162"], "kwargs": {}}]),
            true,
        ),
        (
            golden::NON_FINITE_FLOATS,
            json!([
                float_form("nan"),
                float_form("inf"),
                float_form("-inf"),
                1.5
            ]),
            true,
        ),
    ]
}

/// NaN and the infinities, which `serde_json::Value` has no number for, are never read as
/// `null`: a request for any value sees them in their `builtins.float` form, whichever msgpack
/// reader runs, and that form writes back as the float; typed requests read the float.
#[test]
fn non_finite_floats_are_never_read_as_null() {
    let bytes = hex(golden::NON_FINITE_FLOATS);
    // Typed, through both readers.
    for format in [Format::LangGraph, Format::MsgPack] {
        let floats: Vec<f64> = format.decode(&bytes).expect("typed floats");
        assert!(floats[0].is_nan(), "{format:?}");
        assert_eq!(
            &floats[1..],
            [f64::INFINITY, f64::NEG_INFINITY, 1.5],
            "{format:?}"
        );
        let narrow: Vec<f32> = format.decode(&bytes).expect("typed f32");
        assert_eq!(narrow[1], f32::INFINITY, "{format:?}");
    }
    // Waypoint's own bytes (rmp-serde) of a typed NaN, read as any value: the form too.
    let own = Format::MsgPack
        .encode(&BTreeMap::from([("x", f64::NEG_INFINITY), ("y", 0.25)]))
        .unwrap();
    let view: Value = Format::MsgPack.decode(&own).unwrap();
    assert_eq!(view, json!({"x": float_form("-inf"), "y": 0.25}));
    // float32 too, written back as the float64 Python reads it as.
    let narrow = [
        0x92, 0xca, 0x7f, 0x80, 0x00, 0x00, 0xca, 0x3f, 0xc0, 0x00, 0x00,
    ];
    let view = to_value(&narrow);
    assert_eq!(view, json!([float_form("inf"), 1.5]));
    let written = Format::LangGraph.encode(&view).unwrap();
    let back: Vec<f64> = Format::LangGraph.decode(&written).unwrap();
    assert_eq!(back, [f64::INFINITY, 1.5]);
    // The tree keeps the float; shown as JSON, it is the form.
    let node = Node::from_msgpack(&bytes).unwrap();
    assert_eq!(
        serde_json::to_value(&node).unwrap(),
        json!([
            float_form("nan"),
            float_form("inf"),
            float_form("-inf"),
            1.5
        ])
    );
    // Bytes that only look like such a float (inside an integer: `ce 00 cb 7f f0`; UTF-8
    // text never has them) are read by rmp-serde as before: a dict shaped like an `lc: 2`
    // map, which Waypoint's own format stores as it is, stays as it is (LangGraph's reader
    // would show it in its `builtins.dict` form).
    let shaped = json!({"lc": 2, "type": "constructor", "id": ["m", "C"], "ext": 0,
                        "method": null, "args": [0x00cb_7ff0], "kwargs": {}});
    let lookalike = Format::MsgPack.encode(&shaped).unwrap();
    assert!(lookalike.windows(3).any(|w| w == [0xcb, 0x7f, 0xf0]));
    assert!(!super::has_non_finite_float(&lookalike));
    assert!(super::has_non_finite_float(&hex(golden::NON_FINITE_FLOATS)));
    assert_eq!(Format::MsgPack.decode::<Value>(&lookalike).unwrap(), shaped);
}

#[test]
fn golden_vectors_round_trip_byte_for_byte_through_the_tree() {
    for (vector, _, _) in vectors() {
        let bytes = hex(vector);
        let node = Node::from_msgpack(&bytes).expect(vector);
        assert_eq!(node.to_msgpack().expect(vector), bytes, "{vector}");
        // Serialized as a value (what a saver carrying it unchanged does), the same bytes.
        assert_eq!(
            Format::LangGraph.encode(&node).expect(vector),
            bytes,
            "{vector}"
        );
    }
}

#[test]
fn golden_vectors_read_as_lc2_json_and_write_back() {
    for (vector, want, exact) in vectors() {
        let bytes = hex(vector);
        let got = to_value(&bytes);
        assert_eq!(got, want, "{vector}");
        // Through `Format::MsgPack` too: rmp-serde refuses, the tree reads.
        let via_msgpack: Value = Format::MsgPack.decode(&bytes).expect(vector);
        assert_eq!(via_msgpack, want, "{vector}");
        let written = Format::LangGraph.encode(&got).expect(vector);
        if exact {
            assert_eq!(hex::encode(&written), hex::encode(&bytes), "{vector}");
        }
        // Whatever the key order, the value written reads back the same.
        assert_eq!(to_value(&written), want, "{vector}");
    }
}

#[test]
fn a_delta_snapshot_is_transparent_to_readers_and_kept_by_the_tree() {
    let bytes = hex(golden::DELTA_SNAPSHOT);
    let node = Node::from_msgpack(&bytes).unwrap();
    assert_eq!(
        node,
        Node::DeltaSnapshot(Box::new(Node::Array(vec![Node::UInt(1)])))
    );
    assert_eq!(Format::LangGraph.decode::<Vec<u8>>(&bytes).unwrap(), [1]);
    assert_eq!(node.decode::<Option<Vec<u64>>>().unwrap(), Some(vec![1]));
    // As JSON outside the encoder, a snapshot is its `lc: 2` form (ext 7), which the
    // encoder writes back as the snapshot.
    let json = serde_json::to_value(&node).unwrap();
    assert_eq!(
        json,
        lc2(
            7,
            &[
                "langgraph",
                "checkpoint",
                "serde",
                "types",
                "_DeltaSnapshot"
            ],
            Value::Null,
            json!([[1]]),
            json!({})
        )
    );
    assert_eq!(Format::LangGraph.encode(&json).unwrap(), bytes);
}

/// HumanMessage in Python's field order, as the runtime's `Message` writes it.
#[derive(Serialize)]
struct Lc2Human {
    lc: u8,
    r#type: &'static str,
    id: [&'static str; 4],
    ext: u8,
    method: &'static str,
    args: [u8; 0],
    kwargs: HumanKwargs,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct HumanKwargs {
    content: String,
    additional_kwargs: BTreeMap<String, Value>,
    response_metadata: BTreeMap<String, Value>,
    r#type: String,
    name: Option<String>,
    id: Option<String>,
}

#[test]
fn a_human_message_written_as_lc2_is_pythons_bytes() {
    let kwargs = HumanKwargs {
        content: "hi".into(),
        additional_kwargs: BTreeMap::new(),
        response_metadata: BTreeMap::new(),
        r#type: "human".into(),
        name: None,
        id: Some("1".into()),
    };
    let message = Lc2Human {
        lc: 2,
        r#type: "constructor",
        id: ["langchain_core", "messages", "human", "HumanMessage"],
        ext: 5,
        method: "model_validate_json",
        args: [],
        kwargs,
    };
    let bytes = Format::LangGraph.encode(&message).unwrap();
    assert_eq!(hex::encode(&bytes), hex::encode(hex(golden::HUMAN_MESSAGE)));
    // A struct reads the object's keyword arguments.
    let back: HumanKwargs = Format::LangGraph.decode(&bytes).unwrap();
    assert_eq!(back, message.kwargs);
}

#[test]
fn the_encoder_runs_with_the_writing_flag() {
    struct Probe;
    impl Serialize for Probe {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let readable = s.is_human_readable();
            s.serialize_bool(writing_langgraph() && readable)
        }
    }
    assert!(!writing_langgraph());
    assert_eq!(Format::LangGraph.encode(&Probe).unwrap(), [0xc3]);
    assert_eq!(Format::MsgPack.encode(&Probe).unwrap(), [0xc2]);
    assert!(!writing_langgraph());
}

#[derive(Deserialize, Debug, PartialEq)]
struct Time {
    hour: u8,
    minute: u8,
    second: u8,
    microsecond: u32,
    tzinfo: Option<Value>,
    fold: u8,
}

#[derive(Deserialize, Debug, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Color {
    Red,
    Green,
}

#[derive(Deserialize, Debug, PartialEq)]
struct Lc2Mirror {
    lc: u8,
    id: Vec<String>,
    ext: Option<u8>,
    args: Vec<Value>,
}

#[test]
fn typed_targets_see_through_objects() {
    let decode = |v: &str| Node::from_msgpack(&hex(v)).unwrap();
    // One-argument objects read as their argument.
    assert_eq!(
        decode(golden::UUID).decode::<String>().unwrap(),
        format!("{:032}", 1)
    );
    assert_eq!(decode(golden::DECIMAL).decode::<String>().unwrap(), "1.5");
    assert_eq!(
        decode(golden::DATETIME).decode::<String>().unwrap(),
        "2024-01-02T03:04:05+00:00"
    );
    assert_eq!(
        decode(golden::SET).decode::<BTreeSet<u8>>().unwrap(),
        BTreeSet::from([1, 2])
    );
    assert_eq!(decode(golden::FROZENSET).decode::<(u8,)>().unwrap(), (1,));
    assert_eq!(decode(golden::ENUM).decode::<Color>().unwrap(), Color::Red);
    // A date asked for as a string is its ISO date; its arguments as a tuple.
    assert_eq!(
        decode(golden::DATE).decode::<String>().unwrap(),
        "2024-01-02"
    );
    assert_eq!(
        decode(golden::DATE).decode::<(u16, u8, u8)>().unwrap(),
        (2024, 1, 2)
    );
    assert_eq!(
        decode(golden::TIMEDELTA).decode::<Vec<i64>>().unwrap(),
        [1, 2, 0]
    );
    assert_eq!(
        decode(golden::PATH).decode::<Vec<String>>().unwrap(),
        ["/", "a", "b"]
    );
    // Keyword objects read as structs and maps; a namedtuple as a tuple too.
    assert_eq!(
        decode(golden::TIME).decode::<Time>().unwrap(),
        Time {
            hour: 1,
            minute: 2,
            second: 3,
            microsecond: 0,
            tzinfo: None,
            fold: 0
        }
    );
    assert_eq!(
        decode(golden::NAMEDTUPLE)
            .decode::<BTreeMap<String, i32>>()
            .unwrap(),
        BTreeMap::from([("x".into(), 1), ("y".into(), 2)])
    );
    assert_eq!(
        decode(golden::NAMEDTUPLE).decode::<(i32, i32)>().unwrap(),
        (1, 2)
    );
    assert_eq!(
        decode(golden::PYDANTIC_V1)
            .decode::<BTreeMap<String, u8>>()
            .unwrap(),
        BTreeMap::from([("a".into(), 1)])
    );
    // A struct with an `lc` field reads the `lc: 2` form.
    let mirror: Lc2Mirror = decode(golden::DECIMAL).decode().unwrap();
    assert_eq!(
        mirror,
        Lc2Mirror {
            lc: 2,
            id: vec!["decimal".into(), "Decimal".into()],
            ext: Some(0),
            args: vec![json!("1.5")],
        }
    );
    // Tuple keys, bytes, options, enums.
    assert_eq!(
        decode(golden::TUPLE_KEY)
            .decode::<BTreeMap<(u8, u8), u8>>()
            .unwrap(),
        BTreeMap::from([((1, 2), 3)])
    );
    let bytes = decode(golden::BYTES_IN_LIST);
    assert_eq!(
        bytes.decode::<Vec<serde_bytes::ByteBuf>>().unwrap()[0].as_ref(),
        b"ab"
    );
    assert_eq!(bytes.decode::<Vec<Vec<u8>>>().unwrap(), [b"ab".to_vec()]);
    assert_eq!(bytes.decode::<Vec<String>>().unwrap(), ["ab"]);
    assert_eq!(Node::Nil.decode::<Option<u8>>().unwrap(), None);
    #[derive(Deserialize, Debug, PartialEq)]
    enum Shape {
        Dot,
        Circle(f64),
        Rect { w: u8, h: u8 },
        Pair(u8, u8),
    }
    let shapes = Node::from_value(&json!(["Dot", {"Circle": 1.5}, {"Rect": {"w": 1, "h": 2}},
                                        {"Pair": [3, 4]}]))
    .unwrap();
    assert_eq!(
        shapes.decode::<Vec<Shape>>().unwrap(),
        [
            Shape::Dot,
            Shape::Circle(1.5),
            Shape::Rect { w: 1, h: 2 },
            Shape::Pair(3, 4)
        ]
    );
    // A request an object cannot satisfy names its class.
    let err = decode(golden::TIME).decode::<String>().unwrap_err();
    assert!(err.to_string().contains("`datetime.time`"), "{err}");
    let err = decode(golden::HUMAN_MESSAGE)
        .decode::<Vec<u8>>()
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("`langchain_core.messages.human.HumanMessage` (msgpack extension type 5)"),
        "{err}"
    );
}

#[derive(Deserialize, Debug)]
#[allow(dead_code)] // Read to fail.
struct Chat {
    messages: Vec<Turn>,
}

#[derive(Deserialize, Debug)]
#[allow(dead_code)] // Read to fail.
struct Turn {
    content: String,
    id: u32,
}

#[test]
fn decode_errors_name_the_field_inside_objects() {
    let human = hex(golden::HUMAN_MESSAGE);
    let mut bytes = vec![0x81, 0xa8];
    bytes.extend_from_slice(b"messages");
    bytes.push(0x92);
    bytes.extend_from_slice(&human);
    bytes.extend_from_slice(&human);
    for format in [Format::LangGraph, Format::MsgPack] {
        match format.decode::<Chat>(&bytes) {
            Err(Error::Serialization { tag, path, message }) => {
                assert_eq!(tag, "msgpack");
                assert_eq!(path.as_deref(), Some("messages[0].id"), "{message}");
            }
            other => panic!("{format:?}: {other:?}"),
        }
    }
}

#[test]
fn serde_loads_reads_python_values_whatever_its_format() {
    let stored = SerializedValue::new("msgpack", hex(golden::HUMAN_MESSAGE));
    for serde in [
        Serde::default(),
        Serde::new(Format::LangGraph),
        Serde::new(Format::Json),
    ] {
        let value: Value = serde.loads(&stored).unwrap();
        assert_eq!(value["kwargs"]["content"], "hi");
    }
    let lg = Serde::new(Format::LangGraph);
    let written = lg.dumps(&json!({"a": [1, 2.5, "x", null, true]})).unwrap();
    assert_eq!(written.type_tag, "msgpack");
    assert_eq!(Format::from_tag("msgpack").unwrap(), Format::MsgPack);
    assert_eq!(Format::LangGraph.name(), "langgraph");
}

/// A type whose compact form is a number and whose human-readable form is a string: the
/// two readings of the same bytes differ, and the configured format decides.
#[derive(Debug, PartialEq)]
enum Either {
    Compact(u8),
    Readable(String),
}

impl<'de> Deserialize<'de> for Either {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            Value::deserialize(d).map(|v| Either::Readable(v.to_string()))
        } else {
            u8::deserialize(d).map(Either::Compact)
        }
    }
}

#[test]
fn a_value_both_readings_accept_reads_as_the_configured_format_wrote_it() {
    let stored = SerializedValue::new("msgpack", vec![0x07]);
    let compact: Either = Serde::default().loads(&stored).unwrap();
    assert_eq!(compact, Either::Compact(7));
    let readable: Either = Serde::new(Format::LangGraph).loads(&stored).unwrap();
    assert_eq!(readable, Either::Readable("7".into()));
    // Each falls back to the other when its own reading fails.
    let text = SerializedValue::new("msgpack", vec![0xa1, b'x']);
    let readable: Either = Serde::default().loads(&text).unwrap();
    assert_eq!(readable, Either::Readable("\"x\"".into()));
}

#[test]
fn every_extension_code_reads_and_writes() {
    let object = |ext, module: &str, name: &str, method: Option<&str>, args, kwargs| {
        Node::Object(Box::new(
            PyObject::new(ext, module, name, method.map(str::to_owned), args, kwargs)
                .expect("valid object"),
        ))
    };
    let numpy = object(
        6,
        "numpy",
        "ndarray",
        None,
        vec![
            Node::Str("<i8".into()),
            Node::Array(vec![Node::UInt(2)]),
            Node::Str("C".into()),
            Node::Bin(vec![1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0]),
        ],
        vec![],
    );
    let nodes = [
        object(
            0,
            "uuid",
            "UUID",
            None,
            vec![Node::Str("ab".into())],
            vec![],
        ),
        object(1, "datetime", "date", None, vec![Node::UInt(2024)], vec![]),
        object(
            2,
            "m",
            "Point",
            None,
            vec![],
            vec![("x".into(), Node::Int(-1))],
        ),
        object(
            3,
            "datetime",
            "datetime",
            None,
            vec![Node::Str("2024-01-02T00:00:00".into())],
            vec![],
        ),
        object(
            4,
            "m",
            "V1",
            None,
            vec![],
            vec![("a".into(), Node::F64(0.5))],
        ),
        object(5, "m", "V2", None, vec![], vec![("b".into(), Node::Nil)]),
        numpy,
        Node::DeltaSnapshot(Box::new(Node::Str("s".into()))),
    ];
    for (code, node) in nodes.iter().enumerate() {
        let bytes = node.to_msgpack().unwrap();
        // fixext for payloads of 1, 2, 4, 8 or 16 bytes, ext8 otherwise; then the code.
        let type_at = if [0xd4, 0xd5, 0xd6, 0xd7, 0xd8].contains(&bytes[0]) {
            1
        } else {
            2
        };
        assert_eq!(usize::from(bytes[type_at]), code, "{node:?}");
        let back = Node::from_msgpack(&bytes).unwrap();
        assert_eq!(&back, node);
        // The JSON reading writes the same object back.
        let json: Value = back.decode().unwrap();
        let again = Node::from_msgpack(&Format::LangGraph.encode(&json).unwrap()).unwrap();
        if code == 7 {
            assert_eq!(
                again,
                Node::Str("s".into()),
                "a snapshot reads as its value"
            );
        } else {
            assert_eq!(&again, node, "{json}");
        }
    }
    // The method defaults to the one each code allows.
    let Node::Object(v2) = &nodes[5] else {
        unreachable!()
    };
    assert_eq!(v2.method(), Some("model_validate_json"));
    assert_eq!(v2.class(), "m.V2");
}

#[test]
fn extension_headers_are_the_shortest_ormsgpack_writes() {
    let snapshot = |payload: Node| Node::DeltaSnapshot(Box::new(payload));
    let header = |node: &Node| node.to_msgpack().unwrap()[..3].to_vec();
    // 2-byte payload: fixext2; 3 bytes: ext8; 256 bytes: ext16; 65536: ext32.
    assert_eq!(
        header(&snapshot(Node::Array(vec![Node::UInt(1)])))[..2],
        [0xd5, 7]
    );
    assert_eq!(header(&snapshot(Node::Str("ab".into()))), [0xc7, 3, 7]);
    let long = |n| snapshot(Node::Bin(vec![0; n]));
    assert_eq!(header(&long(254))[..3], [0xc8, 0x01, 0x00]);
    assert_eq!(header(&long(65533))[..3], [0xc9, 0x00, 0x01]);
    // Integers and strings in their shortest forms; floats as float64.
    let scalars = Node::from_value(&json!([-1, -33, 200, 70000, 1.0, "x".repeat(32)])).unwrap();
    let bytes = scalars.to_msgpack().unwrap();
    assert_eq!(
        hex::encode(&bytes[..20]),
        "96ffd0dfccc8ce00011170cb3ff0000000000000"
    );
    assert_eq!(bytes[20..22], [0xd9, 32]);
}

fn refused(bytes: &[u8]) -> String {
    match Format::LangGraph.decode::<Value>(bytes) {
        Err(Error::Serialization { message, .. }) => message,
        other => panic!("{}: {other:?}", hex::encode(bytes)),
    }
}

/// An extension of type `code` with `payload`, as ext8.
fn ext(code: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0xc7, u8::try_from(payload.len()).unwrap(), code];
    out.extend_from_slice(payload);
    out
}

fn packed(value: &Value) -> Vec<u8> {
    Format::LangGraph.encode(value).unwrap()
}

#[test]
fn malformed_extensions_are_errors_naming_the_class_or_code() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (ext(9, &[0x90]), "unknown msgpack extension type 9"),
        (ext(0xff, &[0x90]), "unknown msgpack extension type -1"),
        (
            ext(0, &[0x01]),
            "msgpack extension type 0: the payload is not an array",
        ),
        (ext(0, &[]), "msgpack extension type 0: empty payload"),
        (
            ext(0, &packed(&json!(["uuid"]))),
            "expected [module, name, ...], got 1 items",
        ),
        (
            ext(0, &packed(&json!([1, "UUID", "x"]))),
            "type 0: the module is not a string",
        ),
        (
            ext(2, &packed(&json!(["m", 7, {}]))),
            "type 2: the class name is not a string",
        ),
        (
            ext(0, &packed(&json!(["uuid", "UUID", "a", "b"]))),
            "`uuid.UUID` (msgpack extension type 0): expected 3 items in its payload, got 4",
        ),
        (
            ext(5, &packed(&json!(["m", "M", {}]))),
            "`m.M` (msgpack extension type 5): expected 4 items",
        ),
        (
            ext(1, &packed(&json!(["datetime", "date", "2024"]))),
            "`datetime.date` (msgpack extension type 1): the arguments are not an array",
        ),
        (
            ext(2, &packed(&json!(["m", "P", [1]]))),
            "`m.P` (msgpack extension type 2): the keyword arguments are not a map",
        ),
        (
            ext(
                3,
                &packed(&json!(["pathlib", "Path", "/etc/passwd", "read_text"])),
            ),
            "`pathlib.Path` (msgpack extension type 3): method `read_text` is not allowed",
        ),
        (
            ext(5, &packed(&json!(["m", "M", {}, "model_construct"]))),
            "method `model_construct` is not allowed",
        ),
        (
            ext(
                3,
                &packed(&json!(["datetime", "datetime", 5, "fromisoformat"])),
            ),
            "the ISO datetime is not a string",
        ),
        (
            ext(6, &packed(&json!(["<i8", [2], "X", 1]))),
            "`numpy.ndarray` (msgpack extension type 6): expected [dtype, shape",
        ),
        (
            ext(6, &packed(&json!(["<i8", [2]]))),
            "expected [dtype, shape, order, buffer], got 2 items",
        ),
        (
            {
                let mut payload = packed(&json!(["uuid", "UUID", "a"]));
                payload.push(0xc0);
                ext(0, &payload)
            },
            "msgpack extension type 0: 1 bytes after its payload",
        ),
        (ext(7, &[]), "unexpected end of input"),
        (ext(7, &[0xc1]), "reserved marker"),
    ];
    for (bytes, want) in cases {
        let message = refused(&bytes);
        assert!(message.contains(want), "{}: {message}", hex::encode(&bytes));
        // Inside a map too, with the path to it.
        let mut nested = vec![0x81, 0xa1, b'k'];
        nested.extend_from_slice(&bytes);
        match Format::MsgPack.decode::<Value>(&nested) {
            Err(Error::Serialization { path, message, .. }) => {
                assert_eq!(path.as_deref(), Some("k"), "{message}");
                assert!(message.contains(want), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
    // An error inside an object's arguments names the field.
    let mut bad_utf8 = packed(&json!(["m", "M", {"content": "x"}, "model_validate_json"]));
    let at = bad_utf8.iter().position(|&b| b == b'x').unwrap();
    bad_utf8[at] = 0xff;
    match Format::LangGraph.decode::<Value>(&ext(5, &bad_utf8)) {
        Err(Error::Serialization { path, message, .. }) => {
            assert_eq!(path.as_deref(), Some("content"));
            assert!(message.contains("not UTF-8"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn hostile_input_is_an_error_never_a_panic() {
    // Every prefix of every golden vector.
    for (vector, _, _) in vectors() {
        let bytes = hex(vector);
        for len in 0..bytes.len() {
            assert!(
                Node::from_msgpack(&bytes[..len]).is_err(),
                "{vector} prefix {len}"
            );
            assert!(Format::LangGraph.decode::<Value>(&bytes[..len]).is_err());
        }
        let mut long = bytes.clone();
        long.push(0xc0);
        assert!(
            Node::from_msgpack(&long).is_err(),
            "trailing byte after {vector}"
        );
    }
    // Huge claimed lengths: arrays, maps, strings, bytes, extensions.
    for bytes in [
        &[0xdd, 0xff, 0xff, 0xff, 0xff][..],
        &[0xdf, 0xff, 0xff, 0xff, 0xff],
        &[0xdb, 0xff, 0xff, 0xff, 0xff, b'a'],
        &[0xc6, 0xff, 0xff, 0xff, 0xff, 0],
        &[0xc9, 0xff, 0xff, 0xff, 0xff, 0, 0x90],
        &[0xdc, 0xff, 0xff, 0xdc, 0xff, 0xff, 0xdc, 0xff, 0xff],
    ] {
        assert!(Node::from_msgpack(bytes).is_err(), "{}", hex::encode(bytes));
    }
    // Deep nesting, of arrays and of extensions.
    let deep = vec![0x91u8; 100_000];
    let message = refused(&deep);
    assert!(message.contains("nested deeper than 128"), "{message}");
    let mut snapshots = vec![0xc0];
    for _ in 0..130 {
        let mut outer = vec![0xc9];
        outer.extend_from_slice(&u32::try_from(snapshots.len()).unwrap().to_be_bytes());
        outer.push(7);
        outer.extend_from_slice(&snapshots);
        snapshots = outer;
    }
    assert!(refused(&snapshots).contains("nested deeper than 128"));
    let mut nested = Node::Nil;
    for _ in 0..200 {
        nested = Node::DeltaSnapshot(Box::new(nested));
    }
    assert!(
        nested
            .to_msgpack()
            .unwrap_err()
            .to_string()
            .contains("deeper than 128")
    );
    // The deepest value the writer accepts reads back.
    let mut deepest = Node::Nil;
    for _ in 0..128 {
        deepest = Node::Array(vec![deepest]);
    }
    let bytes = deepest.to_msgpack().unwrap();
    assert_eq!(Node::from_msgpack(&bytes).unwrap(), deepest);
    let too_deep = Node::Array(vec![deepest]);
    assert!(too_deep.to_msgpack().is_err());
    // Objects count as one level and their payload arrays as one more, on both sides.
    let mut objects = Node::Nil;
    for _ in 0..42 {
        let set = PyObject::new(
            0,
            "builtins",
            "set",
            None,
            vec![Node::Array(vec![objects])],
            vec![],
        );
        objects = Node::Object(Box::new(set.unwrap()));
    }
    let bytes = objects.to_msgpack().unwrap();
    assert_eq!(Node::from_msgpack(&bytes).unwrap(), objects);
    // Reserved marker, bad UTF-8.
    assert!(refused(&[0xc1]).contains("reserved"));
    assert!(refused(&[0xa2, 0xc3, 0x28]).contains("not UTF-8"));
}

#[test]
fn malformed_lc2_maps_are_errors_when_writing() {
    let base = || lc2(0, &["uuid", "UUID"], Value::Null, json!(["ab"]), json!({}));
    let with = |key: &str, value: Value| {
        let mut v = base();
        v[key] = value;
        v
    };
    let without = |key: &str| {
        let mut v = base();
        v.as_object_mut().unwrap().remove(key);
        v
    };
    let cases = [
        (with("ext", json!(8)), "`ext` that is not 0-7 or null"),
        (with("ext", json!("0")), "`ext` that is not 0-7 or null"),
        (with("id", json!(["UUID"])), "needs an `id`"),
        (
            with("id", json!(["uuid", 1])),
            "`id` part that is not a string",
        ),
        (without("id"), "needs an `id`"),
        (with("extra", json!(1)), "unknown key `extra`"),
        (with("args", json!("ab")), "`args` that are not an array"),
        (with("args", json!(["a", "b"])), "takes one argument, not 2"),
        (
            with("kwargs", json!({"x": 1})),
            "takes no keyword arguments",
        ),
        (with("kwargs", json!([])), "`kwargs` that are not a map"),
        (
            with("method", json!("read_text")),
            "method `read_text` is not allowed",
        ),
        (with("method", json!(1)), "`method` that is not a string"),
        (
            with("ext", json!(7)),
            "only for `langgraph.checkpoint.serde.types._DeltaSnapshot`",
        ),
        (with("ext", Value::Null), "neither `builtins.bytes`"),
        (
            json!({"lc": 2, "type": "constructor", "id": ["builtins", "float"], "ext": null,
                   "method": null, "args": ["1e999"], "kwargs": {}}),
            "other than `nan`, `inf` or `-inf`",
        ),
        (
            json!({"lc": 2, "type": "constructor", "id": ["builtins", "float"], "ext": null,
                   "method": null, "args": [1.0], "kwargs": {}}),
            "neither `builtins.bytes`",
        ),
        (
            lc2(2, &["m", "P"], Value::Null, json!([1]), json!({})),
            "takes keyword arguments only",
        ),
        (
            lc2(3, &["m", "Path"], Value::Null, json!(["x"]), json!({})),
            "needs a method",
        ),
        (
            lc2(6, &["m", "Arr"], Value::Null, json!([]), json!({})),
            "only for numpy.ndarray",
        ),
        (
            json!({"lc": 2, "type": "constructor", "id": ["builtins", "bytes"], "ext": null,
                   "method": "fromhex", "args": ["zz"], "kwargs": {}}),
            "bad hex",
        ),
        (
            json!({"lc": 2, "type": "constructor", "id": ["builtins", "dict"], "ext": null,
                   "method": null, "args": [[[1]]], "kwargs": {}}),
            "not [key, value]",
        ),
    ];
    for (value, want) in cases {
        let err = Format::LangGraph.encode(&value).unwrap_err().to_string();
        assert!(err.contains(want), "{value}: {err}");
    }
    // Without `ext`, an `lc: 2` map is plain data (LangGraph's JSON form), written as a map.
    let plain = json!({"lc": 2, "type": "constructor", "id": ["a", "B"], "kwargs": {}});
    let node = Node::from_msgpack(&packed(&plain)).unwrap();
    assert!(matches!(node, Node::Map(_)));
    assert!(!node.has_python_objects());
    // Absent `method`, `args` and `kwargs` take their defaults.
    let short = json!({"lc": 2, "type": "constructor", "id": ["m", "V2"], "ext": 5,
                       "kwargs": {"a": 1}});
    assert_eq!(
        Node::from_msgpack(&packed(&short)).unwrap(),
        Node::Object(Box::new(
            PyObject::new(
                5,
                "m",
                "V2",
                None,
                vec![],
                vec![("a".into(), Node::UInt(1))]
            )
            .unwrap()
        ))
    );
}

#[test]
fn json_and_the_tree_agree() {
    // A tree serialized as JSON outside the encoder is the JSON the reader shows.
    for (vector, want, _) in vectors() {
        let node = Node::from_msgpack(&hex(vector)).unwrap();
        if !matches!(node, Node::DeltaSnapshot(_)) {
            assert_eq!(serde_json::to_value(&node).unwrap(), want, "{vector}");
        }
    }
    // Free JSON round-trips unchanged, floats and integers kept apart.
    let value = json!({"a": [1, -2, 2.0, -0.5, "s", null, true, {"b": []}], "": {}});
    let bytes = packed(&value);
    assert_eq!(to_value(&bytes), value);
    assert!(!Node::from_msgpack(&bytes).unwrap().has_python_objects());
}

#[test]
fn a_python_dict_shaped_like_an_object_stays_a_dict() {
    // Python's `{"lc": 2, "type": "constructor", "id": ["m", "V2"], "ext": 5}`: a plain map.
    let dict = json!({"lc": 2, "type": "constructor", "id": ["m", "V2"], "ext": 5});
    let bytes = Format::MsgPack.encode(&dict).unwrap();
    let node = Node::from_msgpack(&bytes).unwrap();
    assert!(matches!(node, Node::Map(_)));
    // Shown in the dict form, so that writing it back gives the map, not an object.
    let value = to_value(&bytes);
    assert_eq!(value["id"], json!(["builtins", "dict"]));
    assert_eq!(value["ext"], Value::Null);
    let written = Format::LangGraph.encode(&value).unwrap();
    assert_eq!(Node::from_msgpack(&written).unwrap(), node);
    assert_eq!(to_value(&written), value);
    // The tree written as a value keeps it a map too, byte for byte.
    assert_eq!(Format::LangGraph.encode(&node).unwrap(), bytes);
    // A map target sees the dict form too (its entries, written back, would be an object);
    // a struct sees the fields.
    let map: BTreeMap<String, Value> = node.decode().unwrap();
    assert_eq!(map["id"], json!(["builtins", "dict"]));
    assert_eq!(Format::LangGraph.encode(&map).unwrap(), bytes);
    #[derive(Deserialize)]
    struct Fields {
        ext: u8,
    }
    assert_eq!(node.decode::<Fields>().unwrap().ext, 5);
    // The same JSON written by Waypoint (not read from Python) is the object it describes.
    let object = Node::from_msgpack(&Format::LangGraph.encode(&dict).unwrap()).unwrap();
    assert!(matches!(object, Node::Object(_)));
}

/// Inputs for the differential test below: the golden vectors and values that exercise
/// every branch of the reader (objects of each code, nesting, dicts shown in their
/// `builtins.dict` form, bytes, non-string keys).
fn corpus() -> Vec<Vec<u8>> {
    let mut corpus: Vec<Vec<u8>> = vectors().iter().map(|(v, _, _)| hex(v)).collect();
    let numpy = PyObject::new(
        6,
        "numpy",
        "ndarray",
        None,
        vec![
            Node::Str("<i1".into()),
            Node::Array(vec![Node::UInt(2)]),
            Node::Str("C".into()),
            Node::Bin(vec![1, 2]),
        ],
        vec![],
    )
    .unwrap();
    corpus.push(Node::Object(Box::new(numpy)).to_msgpack().unwrap());
    corpus.push(packed(&lc2(
        5,
        &["langchain_core", "messages", "ai", "AIMessage"],
        json!("model_validate_json"),
        json!([]),
        json!({"content": "hi", "response_metadata": {"usage": {"in": 1, "out": [2, 3.5]}},
               "tool_calls": [{"name": "t", "args": {"q": "x"}, "id": "c1"}], "id": null}),
    )));
    corpus.push(
        Format::MsgPack
            .encode(&json!({"lc": 2, "type": "constructor", "id": ["m", "V2"], "ext": 5}))
            .unwrap(),
    );
    corpus.push(hex("92 81 01 a1 61 82 c4 01 ff 93 c0 c3 d0 fe a1 62"));
    corpus.push(dicts_in_an_object().to_msgpack().unwrap());
    corpus
}

/// A pydantic v2 object whose keyword arguments hold a dict shaped like an `lc: 2` map and
/// a dict with an integer key (keys in order, so that its JSON view writes the same bytes).
fn dicts_in_an_object() -> Node {
    let str = |s: &str| Node::Str(s.into());
    let lc2_shaped = Node::Map(vec![
        (str("lc"), Node::UInt(2)),
        (str("type"), str("constructor")),
        (str("id"), Node::Array(vec![str("m"), str("V")])),
        (str("ext"), Node::UInt(5)),
    ]);
    let int_key = Node::Map(vec![(Node::UInt(1), str("one"))]);
    let object = PyObject::new(
        5,
        "m",
        "M",
        None,
        vec![],
        vec![
            ("a".into(), str("x")),
            ("d".into(), Node::Array(vec![lc2_shaped, int_key])),
        ],
    );
    Node::Array(vec![str("before"), Node::Object(Box::new(object.unwrap()))])
}

#[test]
fn dicts_inside_objects_keep_their_form() {
    let bytes = dicts_in_an_object().to_msgpack().unwrap();
    let value = to_value(&bytes);
    let dicts = &value[1]["kwargs"]["d"];
    for (dict, args) in [
        (
            &dicts[0],
            json!([[
                ["lc", 2],
                ["type", "constructor"],
                ["id", ["m", "V"]],
                ["ext", 5]
            ]]),
        ),
        (&dicts[1], json!([[[1, "one"]]])),
    ] {
        assert_eq!(dict["id"], json!(["builtins", "dict"]), "{value}");
        assert_eq!(dict["args"], args, "{value}");
    }
    // Written back, the same bytes: the dicts stay dicts.
    assert_eq!(Format::LangGraph.encode(&value).unwrap(), bytes);
}

/// Every mutation of every corpus input: each prefix, each byte replaced by a few others or
/// removed, and a byte inserted everywhere.
fn mutations(input: &[u8]) -> Vec<Vec<u8>> {
    let mut out = vec![input.to_vec()];
    for at in 0..input.len() {
        out.push(input[..at].to_vec());
        let mut removed = input.to_vec();
        removed.remove(at);
        out.push(removed);
        let mut inserted = input.to_vec();
        inserted.insert(at, 0xc0);
        out.push(inserted);
        for byte in [
            0x00,
            0x01,
            0x7f,
            0x80,
            0x81,
            0x91,
            0xa1,
            0xc0,
            0xc1,
            0xc4,
            0xc7,
            0xd4,
            0xd9,
            0xdc,
            0xde,
            0xff,
            input[at] ^ 1,
        ] {
            let mut replaced = input.to_vec();
            replaced[at] = byte;
            out.push(replaced);
        }
    }
    out
}

/// Whether a `_DeltaSnapshot` is anywhere in `node` (its JSON view is the value it wraps,
/// where the tree serializes the snapshot itself).
fn has_snapshot(node: &Node) -> bool {
    match node {
        Node::DeltaSnapshot(_) => true,
        Node::Array(items) => items.iter().any(has_snapshot),
        Node::Map(entries) => entries
            .iter()
            .any(|(k, v)| has_snapshot(k) || has_snapshot(v)),
        Node::Object(o) => {
            o.args().iter().any(has_snapshot) || o.kwargs().iter().any(|(_, v)| has_snapshot(v))
        }
        _ => false,
    }
}

#[test]
fn deeply_nested_maps_keep_their_form() {
    // Maps in maps, 60 deep, around dicts that are not plain (inside an object too): past
    // some depth the shapes of maps are worked out in one pass rather than one by one.
    let mut node = dicts_in_an_object();
    for i in 0..60u64 {
        node = Node::Map(vec![
            (Node::Str("k".into()), node),
            (Node::Str("i".into()), Node::UInt(i)),
        ]);
    }
    let bytes = node.to_msgpack().unwrap();
    let value = to_value(&bytes);
    assert_eq!(value, serde_json::to_value(&node).unwrap());
    let mut inner = &value;
    for _ in 0..60 {
        inner = &inner["k"];
    }
    assert_eq!(
        inner[1]["kwargs"]["d"][1]["id"],
        json!(["builtins", "dict"])
    );
    // A map target sees a nested dict shaped like an `lc: 2` map in its dict form too.
    let map: BTreeMap<String, Value> = Format::LangGraph.decode(&bytes).unwrap();
    assert_eq!(map["k"], value["k"]);
}

#[test]
fn a_map_is_shown_by_the_keys_readers_see_through_snapshots() {
    // Readers see through a `_DeltaSnapshot`, keys included: a map whose key is a snapshot of
    // a string is a plain dict, and one whose keys and values are snapshots of an `lc: 2`
    // map's is shown in its dict form. Either view writes back and reads again as itself.
    let snapshot =
        |inner: &[u8]| [&[0xc7, u8::try_from(inner.len()).unwrap(), 7][..], inner].concat();
    let plain = [&[0x81][..], &snapshot(&[0xa0]), &[0x00]].concat();
    assert_eq!(to_value(&plain), json!({"": 0}));
    let lookalike = [
        &[0x83][..],
        &snapshot(b"\xa2lc"),
        &snapshot(&[0x02]),
        &[0xa4],
        b"type",
        &snapshot(b"\xabconstructor"),
        &[0xa3],
        b"ext",
        &[0xc0],
    ]
    .concat();
    let view = to_value(&lookalike);
    assert_eq!(view["id"], json!(["builtins", "dict"]), "{view}");
    for (bytes, view) in [(&plain, json!({"": 0})), (&lookalike, view)] {
        assert_eq!(to_value(&packed(&view)), view, "{}", hex::encode(bytes));
    }
}

#[test]
fn the_dict_form_of_a_map_nests_no_deeper_than_readers_accept() {
    // Python dicts with int keys, `depth` deep, around bytes: the JSON view shows each as
    // `{"args": [[[key, value]]], ..}`, four levels, and the bytes as an object holding a list.
    let nested = |depth: usize| {
        let mut node = Node::Bin(vec![1, 2]);
        for _ in 0..depth {
            node = Node::Map(vec![(Node::UInt(1), node)]);
        }
        node.to_msgpack().unwrap()
    };
    let reads_back = |view: &Value| {
        for format in [Format::MsgPack, Format::LangGraph] {
            let written = format.encode(view).unwrap();
            assert_eq!(
                &format.decode::<Value>(&written).unwrap(),
                view,
                "{format:?}"
            );
        }
    };
    // 31 dicts put the bytes 124 levels down in the view, and their object 126: the view
    // reads, and written back in either msgpack reads again as itself.
    let bytes = nested(31);
    reads_back(&to_value(&bytes));
    // A dict whose key is 124 lists deep: its view is 128 levels deep, the most readers
    // accept, and reads again from either msgpack.
    let mut key = Node::UInt(7);
    for _ in 0..124 {
        key = Node::Array(vec![key]);
    }
    let bytes = Node::Map(vec![(key, Node::Nil)]).to_msgpack().unwrap();
    reads_back(&to_value(&bytes));
    // 32 put the bytes' object past 128; 33 put the innermost entries there. The tree still
    // reads and writes them, byte for byte; the view is refused, not written back unreadable.
    for depth in [32, 33] {
        let bytes = nested(depth);
        let message = refused(&bytes);
        assert!(
            message.contains("nested deeper than 128"),
            "{depth}: {message}"
        );
        let tree = Node::from_msgpack(&bytes).unwrap();
        assert_eq!(tree.to_msgpack().unwrap(), bytes);
    }
}

#[test]
fn the_deserializer_accepts_exactly_what_the_reader_accepts() {
    use serde::de::IgnoredAny;

    use super::codec::decode;
    use super::read::check;

    #[derive(Deserialize)]
    #[allow(dead_code)] // Read to exercise typed requests, not looked at.
    struct Typed {
        content: Option<String>,
        id: Option<Value>,
        #[serde(default)]
        tool_calls: Vec<BTreeMap<String, Value>>,
    }

    // Nested to the limit and one level past it: arrays, and 42 sets (an extension, its
    // payload array and its argument array: three levels each) in two or three arrays.
    let mut deep = Vec::new();
    for levels in [128, 129] {
        let mut bytes = vec![0x91; levels];
        bytes.push(0xc0);
        deep.push(bytes);
    }
    let mut sets = Node::Nil;
    for _ in 0..42 {
        let set = PyObject::new(
            0,
            "builtins",
            "set",
            None,
            vec![Node::Array(vec![sets])],
            vec![],
        );
        sets = Node::Object(Box::new(set.unwrap()));
    }
    let sets = sets.to_msgpack().unwrap();
    for arrays in [2, 3] {
        let mut bytes = vec![0x91; arrays];
        bytes.extend_from_slice(&sets);
        deep.push(bytes);
    }
    let inputs = corpus()
        .into_iter()
        .flat_map(|input| mutations(&input))
        .chain(deep);
    let mut accepted = 0;
    for bytes in inputs {
        let reader = check(&bytes);
        let value = decode::<Value>(&bytes);
        let ignored = decode::<IgnoredAny>(&bytes);
        let hex = hex::encode(&bytes);
        assert_eq!(ignored.is_ok(), reader.is_ok(), "{hex}");
        match &reader {
            Ok(python) => {
                accepted += 1;
                let value = value.unwrap_or_else(|r| panic!("{hex}: {}", r.error));
                let node = Node::from_msgpack(&bytes).unwrap();
                assert_eq!(node.has_python_objects(), *python, "{hex}");
                assert_eq!(node.decode::<Value>().unwrap(), value, "{hex}");
                // The tree's own JSON (its `Serialize`) is the same view, snapshots aside.
                if !has_snapshot(&node) {
                    assert_eq!(serde_json::to_value(&node).unwrap(), value, "{hex}");
                }
            }
            Err((error, python)) => {
                // The error is the reader's, whatever was asked for.
                let refusal = value.err().unwrap();
                assert_eq!(refusal.error.to_string(), error.to_string(), "{hex}");
                assert_eq!(refusal.python, *python, "{hex}");
            }
        }
        // Typed targets may fail on what the reader accepts, never accept what it refuses.
        let typed = [
            decode::<Typed>(&bytes).is_ok(),
            decode::<Vec<Value>>(&bytes).is_ok(),
            decode::<BTreeMap<String, Value>>(&bytes).is_ok(),
            decode::<Option<String>>(&bytes).is_ok(),
            decode::<crate::Checkpoint>(&bytes).is_ok(),
        ];
        if typed.contains(&true) {
            assert!(reader.is_ok(), "{hex}");
        }
    }
    assert!(accepted > 1000, "only {accepted} accepted inputs");
}

#[test]
fn a_value_its_visitor_fails_on_or_leaves_is_moved_past() {
    use std::fmt;

    use serde::de::{Deserializer, SeqAccess, Visitor};

    // Takes nothing from its deserializer.
    struct Leaves;

    impl<'de> Deserialize<'de> for Leaves {
        fn deserialize<D: Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
            Ok(Leaves)
        }
    }

    // Reads a sequence asking for a number each time, keeping the strings of the elements
    // that are not numbers (asked for again as strings after the failure).
    struct Tolerant(Vec<String>);

    impl<'de> Deserialize<'de> for Tolerant {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Tolerant;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a sequence")
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tolerant, A::Error> {
                    let mut kept = Vec::new();
                    loop {
                        match seq.next_element::<u64>() {
                            Ok(Some(_)) => {}
                            Ok(None) => return Ok(Tolerant(kept)),
                            Err(_) => kept.push(seq.next_element::<String>()?.unwrap_or_default()),
                        }
                    }
                }
            }
            d.deserialize_seq(V)
        }
    }

    let bytes = packed(&json!([[1, {"a": [2, "x"]}], "after"]));
    let (Leaves, after): (Leaves, String) = Format::LangGraph.decode(&bytes).unwrap();
    assert_eq!(after, "after");
    // `[1, {"k": "v"}, "b", 2, "c"]`: the map fails as a number and is moved past, so the
    // string asked for next is "b"; "c" fails as a number too and the sequence ends.
    let bytes = packed(&json!([1, {"k": "v"}, "b", 2, "c"]));
    let Tolerant(kept) = Format::LangGraph.decode(&bytes).unwrap();
    assert_eq!(kept, ["b", ""]);
    // What they leave or fail on is checked all the same: a string that is not UTF-8 in it
    // fails the decode, with the reader's error.
    let not_utf8 = |value: &Value| {
        let mut bytes = packed(value);
        let at = bytes.iter().position(|&b| b == b'x').unwrap();
        bytes[at] = 0xff;
        bytes
    };
    for refused in [
        super::codec::decode::<(Leaves, String)>(&not_utf8(&json!([[{"a": "x"}], "after"])))
            .map(drop),
        super::codec::decode::<Tolerant>(&not_utf8(&json!([1, {"k": "x"}, "b"]))).map(drop),
    ] {
        let error = refused.err().unwrap().error.to_string();
        assert!(error.contains("not UTF-8"), "{error}");
    }
    // Left inside an object's keyword arguments too.
    #[derive(Deserialize)]
    struct Content {
        content: String,
    }
    let message = hex(golden::HUMAN_MESSAGE);
    let read: Content = Format::LangGraph.decode(&message).unwrap();
    assert_eq!(read.content, "hi");
}
