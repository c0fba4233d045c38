//! The streaming reader (`read.rs`) against [`Message::from_json`]: the same message or the
//! same error for every form, whatever order the keys come in, from JSON text and from
//! LangGraph's msgpack.

use proptest::prelude::*;
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::{Value, json};
use waypoint_checkpoint::{Format, Serde, SerializedValue};

use super::*;

const MODEL_DUMPS: &str = include_str!("testdata/model_dumps.json");

/// `value` written with every object's keys in an order given by `seed`: 0 sorted, 1
/// reversed, any other a shuffle.
struct Ordered<'a> {
    value: &'a Value,
    seed: u64,
}

impl Ordered<'_> {
    fn rank(&self, key: &str) -> u64 {
        // FNV-1a, salted.
        key.bytes().fold(0xcbf2_9ce4_8422_2325 ^ self.seed, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    }
}

impl Serialize for Ordered<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let nested = |value| Ordered {
            value,
            seed: self.seed,
        };
        match self.value {
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                match self.seed {
                    0 => {}
                    1 => entries.reverse(),
                    _ => entries.sort_by_key(|(k, _)| self.rank(k)),
                }
                let mut out = s.serialize_map(Some(entries.len()))?;
                for (key, value) in entries {
                    out.serialize_entry(key, &nested(value))?;
                }
                out.end()
            }
            Value::Array(items) => {
                let mut out = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    out.serialize_element(&nested(item))?;
                }
                out.end()
            }
            other => other.serialize(s),
        }
    }
}

/// `from_json`'s answer for `value`, with errors as text.
fn expected(value: &Value) -> Result<Message, String> {
    Message::from_json(value.clone())
}

/// Checks that JSON text of `value` in the key order of `seed`, and LangGraph's msgpack of
/// it when it has one, read as `from_json` reads `value`.
fn check_agrees(value: &Value, seed: u64) -> Result<(), TestCaseError> {
    let want = expected(value);
    let text = serde_json::to_string(&Ordered { value, seed }).expect("JSON text");
    let got = serde_json::from_str::<Message>(&text).map_err(|e| e.to_string());
    match (&got, &want) {
        (Ok(got), Ok(want)) => prop_assert_eq!(got, want, "{}", text),
        // serde_json adds where it failed.
        (Err(got), Err(want)) => prop_assert!(got.starts_with(want.as_str()), "{text}: {got}"),
        _ => prop_assert!(false, "{text}: read {got:?}, from_json {want:?}"),
    }
    // LangGraph's encoding takes a map shaped like Python's object form as that object and
    // refuses a malformed one; what it writes must read the same.
    let serde = Serde::new(Format::LangGraph);
    if let Ok(stored) = serde.dumps(&Ordered { value, seed }) {
        let stored = SerializedValue::new(stored.type_tag, stored.bytes);
        let seen: Value = serde.loads(&stored).expect("LangGraph bytes read as JSON");
        let want = expected(&seen);
        let got = serde.loads::<Message>(&stored).map_err(|e| e.to_string());
        match (&got, &want) {
            (Ok(got), Ok(want)) => prop_assert_eq!(got, want, "{}", text),
            (Err(got), Err(want)) => prop_assert!(got.contains(want.as_str()), "{text}: {got}"),
            _ => prop_assert!(false, "LangGraph {text}: read {got:?}, from_json {want:?}"),
        }
    }
    Ok(())
}

/// Every fixture in Python's forms (`lc: 2`, `lc: 1`, `model_dump()`) and the dict form,
/// keys in several orders.
#[test]
fn every_fixture_reads_the_same_in_any_key_order() {
    let entries: Vec<Value> = serde_json::from_str(MODEL_DUMPS).expect("fixture JSON");
    for entry in entries {
        let (module, class, dump) = (&entry["module"], &entry["class"], &entry["dump"]);
        let mut id: Vec<Value> = module
            .as_str()
            .expect("module")
            .split('.')
            .map(Value::from)
            .collect();
        id.push(class.clone());
        let lc2 = json!({"lc": 2, "type": "constructor", "id": id, "ext": 5,
                         "method": "model_validate_json", "args": [], "kwargs": dump});
        let lc1 = json!({"lc": 1, "type": "constructor", "id": id, "kwargs": dump});
        let message = Message::from_json(lc2.clone()).expect("fixture reads");
        for form in [
            lc2,
            lc1,
            dump.clone(),
            message.to_json(),
            message.model_dump(),
        ] {
            for seed in [0, 1, 2, 3, 17, 99] {
                check_agrees(&form, seed).unwrap_or_else(|e| panic!("{class}: {e}"));
            }
        }
    }
}

/// The error cases of every form read with the same error.
#[test]
fn errors_are_those_of_from_json() {
    let wrap = |id: Value, kwargs: Value| {
        json!({"lc": 2, "type": "constructor", "id": id, "ext": 5,
               "method": "model_validate_json", "args": [], "kwargs": kwargs})
    };
    let human = json!(["langchain_core", "messages", "human", "HumanMessage"]);
    for bad in [
        wrap(
            json!(["langchain_core", "documents", "Document"]),
            json!({}),
        ),
        wrap(json!(["evil", "HumanMessage"]), json!({})),
        wrap(json!(["langchain_core", 3, "HumanMessage"]), json!({})),
        wrap(json!([]), json!({})),
        wrap(json!("HumanMessage"), json!({})),
        wrap(human.clone(), json!([1])),
        wrap(human.clone(), json!({"content": 5})),
        wrap(human.clone(), json!({"content": "x", "id": 3})),
        wrap(human.clone(), json!({"content": "x", "name": ["n"]})),
        wrap(
            human.clone(),
            json!({"content": "x", "additional_kwargs": [1]}),
        ),
        wrap(
            human.clone(),
            json!({"content": "x", "response_metadata": 2}),
        ),
        json!({"lc": 1, "type": "constructor", "kwargs": {}}),
        json!({"type": "constructor", "content": "x"}),
        json!({"type": "bogus", "content": "x"}),
        json!({"type": 3, "content": "x"}),
        json!({"content": "x"}),
        json!({"role": "critic", "content": "x"}),
        json!({"role": 3, "content": "x"}),
        json!({"role": null, "content": "x"}),
        json!({"type": "ai", "tool_calls": "x"}),
        json!({"type": "ai", "tool_calls": [5]}),
        json!({"type": "ai", "tool_calls": [{"args": {}}]}),
        json!({"type": "ai", "tool_calls": [{"id": 3, "name": "f"}]}),
        json!({"type": "ai", "tool_calls": [{"function": {"arguments": "{}"}}]}),
        json!({"type": "ai", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]}),
        json!({"type": "ai", "invalid_tool_calls": [{"args": {}}]}),
        json!({"type": "ai", "usage_metadata": {"input_tokens": 1}}),
        json!({"type": "ai", "usage_metadata": {"input_tokens": 1, "output_tokens": -2,
                                                "total_tokens": 3}}),
        json!({"type": "ai", "usage_metadata": {"input_tokens": 1.5, "output_tokens": 2,
                                                "total_tokens": 3}}),
        json!({"type": "ai", "usage_metadata": "many"}),
        json!({"type": "ai", "usage_metadata": [1, 2, 3]}),
        json!({"type": "AIMessageChunk", "tool_call_chunks": [{"index": "x"}]}),
        json!({"type": "tool", "content": "x"}),
        json!({"type": "tool", "tool_call_id": [1]}),
        json!({"type": "tool", "tool_call_id": "c", "status": "meh"}),
        json!({"type": "tool", "tool_call_id": "c", "status": 1}),
        json!({"type": "chat", "content": "x"}),
        json!({"type": "function", "content": "x"}),
        json!({"type": "remove", "content": "x", "id": "1"}),
        json!({"type": "remove"}),
        json!(3),
        json!(null),
        json!(["user"]),
        json!([3, "x"]),
    ] {
        assert!(expected(&bad).is_err(), "{bad} reads");
        for seed in [0, 1, 5] {
            check_agrees(&bad, seed).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

/// A map naming two different types is refused (JSON text is the only way to write one).
#[test]
fn two_different_types_are_an_error() {
    let err = serde_json::from_str::<Message>(r#"{"type": "human", "content": "x", "type": "ai"}"#)
        .expect_err("two types");
    assert!(err.to_string().contains("two different `type`s"), "{err}");
    let same = serde_json::from_str::<Message>(r#"{"type": "ai", "content": "x", "type": "ai"}"#);
    assert_eq!(same.ok(), Some(Message::ai("x")));
}

/// A value picked from `pool`.
fn one_of(pool: Vec<Value>) -> BoxedStrategy<Value> {
    proptest::sample::select(pool).boxed()
}

/// A tool call: mostly well-formed in either form, sometimes not.
fn arb_tool_call() -> BoxedStrategy<Value> {
    let valid = one_of(vec![
        json!({"name": "f", "args": {"a": 1}, "id": "c", "type": "tool_call"}),
        json!({"name": "f"}),
        json!({"id": null, "name": "f", "args": [1], "x_k": {"y": 2}}),
        json!({"id": "c", "function": {"name": "g", "arguments": "{\"x\": 1}"}, "x_k": 1}),
        json!({"function": {"name": "g", "arguments": " "}}),
        json!({"function": "str", "name": "h", "x": 1}),
    ]);
    let invalid = one_of(vec![
        json!({"args": {}}),
        json!({"id": 3, "name": "f"}),
        json!({"function": {"name": "g", "arguments": "{bad"}}),
        json!(5),
    ]);
    prop_oneof![4 => valid, 1 => invalid].boxed()
}

/// A message field's key and a value for it: mostly one its class takes, sometimes a
/// malformed one (or the field of another class).
fn arb_field() -> BoxedStrategy<(String, Value)> {
    let tool_calls = prop_oneof![
        one_of(vec![json!([]), json!(null)]),
        prop::collection::vec(arb_tool_call(), 1..3).prop_map(Value::Array),
    ];
    // (key, values read, values refused)
    let fields: Vec<(&str, BoxedStrategy<Value>, Vec<Value>)> = vec![
        (
            "content",
            one_of(vec![
                json!("hi"),
                json!(""),
                json!(null),
                json!([{"type": "text", "text": "a"}, "b"]),
            ]),
            vec![json!(5), json!({"a": 1})],
        ),
        ("id", one_of(vec![json!("m1"), json!(null)]), vec![json!(5)]),
        (
            "name",
            one_of(vec![json!("n"), json!(null)]),
            vec![json!(3)],
        ),
        (
            "additional_kwargs",
            one_of(vec![json!({}), json!({"k": [1, {"z": null}]}), json!(null)]),
            vec![json!([1])],
        ),
        (
            "response_metadata",
            one_of(vec![json!({}), json!({"model_name": "m", "n": 1.5})]),
            vec![json!("x")],
        ),
        ("tool_calls", tool_calls.boxed(), vec![json!("x")]),
        (
            "invalid_tool_calls",
            one_of(vec![
                json!([]),
                json!(null),
                json!([{"id": "i", "args": "{", "error": "bad", "type": "invalid_tool_call"}]),
            ]),
            vec![json!([{"args": {}}]), json!(3)],
        ),
        (
            "usage_metadata",
            one_of(vec![
                json!(null),
                json!({"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}),
                json!({"input_tokens": 1, "output_tokens": 2, "total_tokens": 3,
                       "input_token_details": {"audio": 0}, "x": "y"}),
            ]),
            vec![
                json!({"input_tokens": 1}),
                json!({"input_tokens": -1, "output_tokens": 2, "total_tokens": 3}),
                json!({"input_tokens": 1.5, "output_tokens": 2, "total_tokens": 3}),
                json!({"input_tokens": "a", "output_tokens": null, "total_tokens": 3}),
                json!("x"),
                json!([1]),
            ],
        ),
        (
            "tool_call_id",
            one_of(vec![json!("c"), json!(7)]),
            vec![json!(null), json!([1])],
        ),
        (
            "status",
            one_of(vec![json!("success"), json!("error"), json!(null)]),
            vec![json!("meh"), json!(1)],
        ),
        (
            "artifact",
            one_of(vec![json!(null), json!({"a": 1}), json!(2)]),
            vec![],
        ),
        (
            "role",
            one_of(vec![
                json!("user"),
                json!("assistant"),
                json!("developer"),
                json!("tool"),
                json!("function"),
                json!("ai"),
                json!("critic"),
            ]),
            vec![json!(null), json!(3)],
        ),
        (
            "tool_call_chunks",
            one_of(vec![
                json!([]),
                json!([{"name": "f", "args": "{}", "id": "c", "index": 0,
                        "type": "tool_call_chunk"}]),
                json!(null),
            ]),
            vec![json!([{"index": "x"}])],
        ),
        (
            "chunk_position",
            one_of(vec![json!("last"), json!(null)]),
            vec![json!(3)],
        ),
        ("lc", one_of(vec![json!(1), json!(2), json!(null)]), vec![]),
        ("ext", one_of(vec![json!(5), json!(null)]), vec![]),
        (
            "method",
            one_of(vec![json!("model_validate_json"), json!(null)]),
            vec![],
        ),
        ("args", one_of(vec![json!([]), json!([1])]), vec![]),
        (
            "x_other",
            one_of(vec![json!(1), json!({"a": [true]}), json!("s")]),
            vec![],
        ),
    ];
    let strategies: Vec<BoxedStrategy<(String, Value)>> = fields
        .into_iter()
        .map(|(key, valid, invalid)| {
            let values = if invalid.is_empty() {
                valid
            } else {
                prop_oneof![6 => valid, 1 => one_of(invalid)].boxed()
            };
            values.prop_map(move |v| (key.to_owned(), v)).boxed()
        })
        .collect();
    proptest::strategy::Union::new(strategies).boxed()
}

/// A `type` value: mostly a class's, sometimes `constructor`, unknown text or not text.
fn arb_type() -> BoxedStrategy<Value> {
    let other = one_of(vec![json!("constructor"), json!("bogus"), json!(3)]);
    let class = one_of(vec![
        json!("human"),
        json!("ai"),
        json!("AIMessageChunk"),
        json!("system"),
        json!("tool"),
        json!("ToolMessageChunk"),
        json!("chat"),
        json!("function"),
        json!("remove"),
    ]);
    prop_oneof![6 => class, 1 => other].boxed()
}

/// A constructor id: message classes under each prefix, other classes, malformed ones.
fn arb_class_id() -> BoxedStrategy<Value> {
    one_of(vec![
        json!(["langchain_core", "messages", "ai", "AIMessage"]),
        json!(["langchain_core", "messages", "AIMessageChunk"]),
        json!(["langchain_core", "messages", "human", "HumanMessage"]),
        json!(["langchain", "schema", "messages", "ToolMessage"]),
        json!(["langchain_core", "messages", "ChatMessage"]),
        json!(["langchain_core", "messages", "modifier", "RemoveMessage"]),
        json!(["langchain_core", "documents", "Document"]),
        json!(["evil", "HumanMessage"]),
        json!(["HumanMessage"]),
        json!(["langchain_core", 3]),
        json!([]),
        json!("HumanMessage"),
        json!(null),
    ])
}

/// A message map: fields in any combination, with or without a `type`, maybe in a
/// constructor form around them.
fn arb_message_map() -> impl Strategy<Value = Value> {
    let fields = prop::collection::vec(arb_field(), 0..7);
    let dict =
        (prop::option::weighted(0.85, arb_type()), fields.clone()).prop_map(|(ty, fields)| {
            let mut map: serde_json::Map<String, Value> = fields.into_iter().collect();
            if let Some(ty) = ty {
                map.insert("type".into(), ty);
            }
            Value::Object(map)
        });
    let constructor = (
        prop::option::of(arb_class_id()),
        prop_oneof![
            4 => dict.clone(),
            1 => one_of(vec![json!(null), json!([1]), json!("x")]),
        ],
        fields,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(id, kwargs, fields, lc, has_kwargs)| {
            let mut map: serde_json::Map<String, Value> = fields.into_iter().collect();
            map.insert("type".into(), json!("constructor"));
            if lc {
                map.insert("lc".into(), json!(2));
            }
            if let Some(id) = id {
                map.insert("id".into(), id);
            }
            if has_kwargs {
                map.insert("kwargs".into(), kwargs);
            }
            Value::Object(map)
        });
    prop_oneof![dict, constructor]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// Any map of message fields, well-formed or not, in any key order, reads as
    /// `from_json` reads it: the same message or the same error.
    #[test]
    fn any_message_map_reads_as_from_json(value in arb_message_map(), seed in any::<u64>()) {
        check_agrees(&value, seed)?;
    }
}
