//! Every LangChain message class read from Python's forms (`lc: 2`, `model_dump()`) and
//! written back equal; the positional layout still reading what earlier versions wrote.
//!
//! `testdata/model_dumps.json` is `python tests/interop/messages.py dump` run with
//! langchain-core 1.7.2: the class and `model_dump()` of one or more messages of each class
//! (tests/integration/langchain_messages.rs checks the same list against live Python).

use proptest::prelude::*;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value, json};
use waypoint_checkpoint::{Format, Serde, SerializedValue};

use super::*;

const MODEL_DUMPS: &str = include_str!("testdata/model_dumps.json");

/// `(module, class, model_dump())` of each fixture message.
fn fixtures() -> Vec<(String, String, Value)> {
    let entries: Vec<Value> = serde_json::from_str(MODEL_DUMPS).expect("fixture JSON");
    entries
        .into_iter()
        .map(|e| {
            (
                e["module"].as_str().expect("module").to_owned(),
                e["class"].as_str().expect("class").to_owned(),
                e["dump"].clone(),
            )
        })
        .collect()
}

/// The `lc: 2` map LangGraph's codec presents for a Python message.
fn lc2(module: &str, class: &str, dump: &Value) -> Value {
    let mut id: Vec<&str> = module.split('.').collect();
    id.push(class);
    json!({"lc": 2, "type": "constructor", "id": id, "ext": 5,
           "method": "model_validate_json", "args": [], "kwargs": dump})
}

fn fixture_messages() -> Vec<Message> {
    fixtures()
        .iter()
        .map(|(module, class, dump)| {
            serde_json::from_value(lc2(module, class, dump)).expect("fixture reads")
        })
        .collect()
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// A JSON object's keys in the order written.
struct OrderedKeys(Vec<String>);

impl<'de> Deserialize<'de> for OrderedKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> Visitor<'de> for Keys {
            type Value = OrderedKeys;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OrderedKeys, A::Error> {
                let mut keys = Vec::new();
                while let Some((key, IgnoredAny)) = map.next_entry::<String, IgnoredAny>()? {
                    keys.push(key);
                }
                Ok(OrderedKeys(keys))
            }
        }
        d.deserialize_map(Keys)
    }
}

/// Each fixture's `model_dump()` keys in Python's order.
fn python_key_orders() -> Vec<Vec<String>> {
    #[derive(Deserialize)]
    struct Entry {
        dump: OrderedKeys,
    }
    let entries: Vec<Entry> = serde_json::from_str(MODEL_DUMPS).expect("fixture JSON");
    entries.into_iter().map(|e| e.dump.0).collect()
}

/// Every class of langchain_core.messages that can sit in a conversation.
const CLASSES: [&str; 13] = [
    "HumanMessage",
    "HumanMessageChunk",
    "AIMessage",
    "AIMessageChunk",
    "SystemMessage",
    "SystemMessageChunk",
    "ToolMessage",
    "ToolMessageChunk",
    "ChatMessage",
    "ChatMessageChunk",
    "FunctionMessage",
    "FunctionMessageChunk",
    "RemoveMessage",
];

/// Each Python message read from its `lc: 2` map is written back as the same map: same
/// class, same module, kwargs equal to `model_dump()`, keys in Python's order.
#[test]
fn every_class_reads_from_lc2_and_writes_back_equal() {
    let fixtures = fixtures();
    for class in CLASSES {
        assert!(
            fixtures.iter().any(|(_, c, _)| c == class),
            "no fixture of {class}"
        );
    }
    for ((module, class, dump), keys) in fixtures.iter().zip(python_key_orders()) {
        let form = lc2(module, class, dump);
        let message: Message = serde_json::from_value(form.clone()).expect("reads");
        assert_eq!(message.class_name(), class);
        assert_eq!(message.module(), module);
        assert_eq!(message.lc_type(), dump["type"], "{class}");
        assert_eq!(message.to_langgraph(), form, "{class}");
        assert_eq!(&message.model_dump(), dump, "{class}");
        let written = serde_json::to_string(&langchain::Dict(&message, langchain::Mode::Full))
            .expect("writes");
        let written: OrderedKeys = serde_json::from_str(&written).expect("an object");
        assert_eq!(written.0, keys, "{class}: key order");
    }
}

/// The plain `model_dump()` dict (no constructor wrapper) reads as the same message, and
/// the sparse dict form Waypoint writes to JSON reads back equal.
#[test]
fn model_dump_and_dict_forms_read_the_same_message() {
    for ((_, class, dump), message) in fixtures().into_iter().zip(fixture_messages()) {
        assert_eq!(Message::from_json(dump), Ok(message.clone()), "{class}");
        assert_eq!(
            Message::from_json(message.to_json()),
            Ok(message.clone()),
            "{class}"
        );
    }
}

/// Every fixture message survives every shipped format, the positional layout included.
#[test]
fn every_class_round_trips_in_every_format() {
    let messages = fixture_messages();
    for format in Format::ALL {
        let serde = Serde::new(*format);
        let stored = serde.dumps(&messages).expect("encode");
        let back: Vec<Message> = serde.loads(&stored).expect("decode");
        assert_eq!(back, messages, "{format:?}");
    }
}

/// Chunks are their plain class's kind with `chunk: true`; ChatMessage and FunctionMessage
/// have kinds of their own; the fields land in their types.
#[test]
fn classes_map_onto_kinds_and_fields_onto_types() {
    let messages = fixture_messages();
    let find = |class: &str| {
        messages
            .iter()
            .find(|m| m.class_name() == class)
            .unwrap_or_else(|| panic!("no {class}"))
    };
    let Message::Ai(ai) = find("AIMessage") else {
        panic!("AIMessage is not Message::Ai");
    };
    assert!(!ai.chunk);
    assert_eq!(
        ai.tool_calls[0],
        ToolCall::new(
            "call_1",
            "search",
            json!({"query": "weather in SF", "n": 3})
        )
    );
    assert_eq!(ai.tool_calls[1].id, None);
    assert_eq!(ai.invalid_tool_calls[0].error.as_deref(), Some("bad JSON"));
    assert_eq!(ai.invalid_tool_calls[0].args.as_deref(), Some("{\"x\": "));
    let usage = ai.usage_metadata.as_ref().expect("usage");
    assert_eq!(
        (usage.input_tokens, usage.output_tokens, usage.total_tokens),
        (350, 240, 590)
    );
    assert_eq!(
        usage
            .output_token_details()
            .map(|d| d["provider_specific"].clone()),
        Some(json!(3))
    );
    assert_eq!(ai.response_metadata["finish_reason"], "tool_calls");
    assert_eq!(ai.additional_kwargs["refusal"], Value::Null);
    assert!(ai.extra.is_empty());

    let Message::Ai(chunk) = find("AIMessageChunk") else {
        panic!("AIMessageChunk is not Message::Ai");
    };
    assert!(chunk.chunk);
    assert_eq!(chunk.chunk_position.as_deref(), Some("last"));
    assert_eq!(
        chunk.tool_call_chunks[0].args.as_deref(),
        Some("{\"q\": \"ru")
    );
    assert_eq!(find("AIMessageChunk").kind(), "ai");
    assert_eq!(find("AIMessageChunk").lc_type(), "AIMessageChunk");
    assert!(find("AIMessageChunk").is_chunk());
    assert!(!find("AIMessage").is_chunk());

    for (class, kind) in [
        ("HumanMessageChunk", "human"),
        ("SystemMessageChunk", "system"),
        ("ToolMessageChunk", "tool"),
        ("ChatMessageChunk", "chat"),
        ("FunctionMessageChunk", "function"),
        ("RemoveMessage", "remove"),
    ] {
        assert_eq!(find(class).kind(), kind, "{class}");
    }
    let Message::Chat(chat) = find("ChatMessage") else {
        panic!("ChatMessage is not Message::Chat");
    };
    assert_eq!(
        (chat.role.as_str(), chat.name.as_deref()),
        ("critic", Some("carl"))
    );
    let Message::Function(function) = find("FunctionMessage") else {
        panic!("FunctionMessage is not Message::Function");
    };
    assert_eq!(function.name, "calculator");
    assert_eq!(find("FunctionMessage").name(), Some("calculator"));

    let tools: Vec<&ToolMessage> = messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool(t) => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(
        tools[0].artifact,
        Some(json!({"raw": [{"temp": 21.5}], "source": "api"}))
    );
    assert_eq!(tools[1].status, ToolStatus::Error);
    assert_eq!(tools[1].additional_kwargs["trace"], "x");

    let own = messages
        .iter()
        .find(|m| m.id() == Some("h3"))
        .expect("the message with an attribute of its own");
    assert_eq!(own.extra(), &object(json!({"custom_field": {"a": [1, 2]}})));
}

/// LangChain's own serialized form (`lc: 1`, what `dumpd` writes) reads too, chunks
/// included; the class, not a `type` among the kwargs, decides.
#[test]
fn lc1_constructor_form_reads() {
    let chunk = json!({
        "lc": 1, "type": "constructor",
        "id": ["langchain_core", "messages", "AIMessageChunk"],
        "kwargs": {"content": "x", "type": "ai", "tool_call_chunks": [
            {"name": "f", "args": "{}", "id": "c", "index": 0, "type": "tool_call_chunk"}
        ]}
    });
    let message = Message::from_json(chunk).expect("reads");
    assert_eq!(message.class_name(), "AIMessageChunk");
    let chat = json!({"lc": 1, "type": "constructor",
        "id": ["langchain", "schema", "messages", "ChatMessage"],
        "kwargs": {"content": "hey", "role": "critic"}});
    assert_eq!(Message::from_json(chat), Ok(Message::chat("critic", "hey")));
}

/// Bad input is an error naming the problem, never a panic.
#[test]
fn malformed_langchain_forms_are_errors() {
    let wrap = |class: &str, kwargs: Value| {
        json!({"lc": 2, "type": "constructor", "id": ["langchain_core", "messages", class],
               "ext": 5, "method": "model_validate_json", "args": [], "kwargs": kwargs})
    };
    for (bad, says) in [
        (wrap("Document", json!({})), "not a LangChain message class"),
        (
            json!({"lc": 2, "type": "constructor", "id": ["evil", "HumanMessage"], "kwargs": {}}),
            "evil.HumanMessage",
        ),
        (
            json!({"lc": 2, "type": "constructor", "id": "HumanMessage"}),
            "`id` list",
        ),
        (wrap("HumanMessage", json!([1])), "kwargs"),
        (
            wrap("RemoveMessage", json!({"content": "x", "id": "1"})),
            "no content",
        ),
        (
            wrap("RemoveMessage", json!({"content": ""})),
            "needs an `id`",
        ),
        (wrap("ChatMessage", json!({"content": "x"})), "`role`"),
        (wrap("FunctionMessage", json!({"content": "x"})), "`name`"),
        (
            wrap(
                "ToolMessage",
                json!({"content": "x", "tool_call_id": "c", "status": "meh"}),
            ),
            "status",
        ),
        (wrap("ToolMessage", json!({"content": "x"})), "tool_call_id"),
        (
            wrap(
                "AIMessage",
                json!({"content": "", "invalid_tool_calls": [{"args": {}}]}),
            ),
            "invalid tool call",
        ),
        (
            wrap(
                "AIMessage",
                json!({"content": "", "tool_calls": [{"args": {}}]}),
            ),
            "name",
        ),
        (
            wrap(
                "AIMessage",
                json!({"content": "", "usage_metadata": {"input_tokens": 1}}),
            ),
            "usage",
        ),
        (
            wrap(
                "AIMessageChunk",
                json!({"content": "", "tool_call_chunks": [{"index": "x"}]}),
            ),
            "tool_call_chunks",
        ),
        (
            wrap(
                "HumanMessage",
                json!({"content": "", "additional_kwargs": [1]}),
            ),
            "additional_kwargs",
        ),
        (
            json!({"type": "AIMessageChunkz", "content": ""}),
            "unknown message type",
        ),
        (json!({"type": 3, "content": ""}), "type"),
    ] {
        let err = Message::from_json(bad.clone()).expect_err(&bad.to_string());
        assert!(err.contains(says), "{bad}: {err}");
    }
}

/// An `extra` key that names a field of the class is not written a second time.
#[test]
fn extra_keys_never_shadow_fields() {
    let mut message = Message::human("hi").with_id("1");
    if let Message::Human(h) = &mut message {
        h.extra = object(json!({"content": "shadow", "type": "ai", "mine": 1}));
    }
    for text in [
        serde_json::to_string(&message.to_langgraph()).expect("lc2"),
        serde_json::to_string(&message).expect("dict"),
    ] {
        assert_eq!(text.matches("\"content\"").count(), 1, "{text}");
        assert!(text.contains("\"mine\":1"), "{text}");
    }
    assert_eq!(message.model_dump()["content"], "hi");
    assert_eq!(message.model_dump()["type"], "human");
}

fn hex(text: &str) -> Vec<u8> {
    let text = text.trim();
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

/// `rich_messages()` (in tests.rs) as the encoder before the extension element wrote it.
fn captured(tag: &str) -> Vec<u8> {
    hex(match tag {
        "json" => include_str!("testdata/rich_v1.json.hex"),
        "msgpack" => include_str!("testdata/rich_v1.msgpack.hex"),
        "postcard" => include_str!("testdata/rich_v1.postcard.hex"),
        "bincode" => include_str!("testdata/rich_v1.bincode.hex"),
        other => panic!("no capture for {other}"),
    })
}

/// Bytes written before messages had more than nine positional fields decode unchanged
/// (LangGraph's format reads Waypoint's msgpack too), and a message with nothing more is
/// still written in those very bytes.
#[test]
fn bytes_of_the_earlier_layout_still_decode() {
    let rich = super::tests::rich_messages();
    for format in Format::ALL {
        let serde = Serde::new(*format);
        let old = SerializedValue::new(format.tag(), captured(format.tag()));
        let back: Vec<Message> = serde.loads(&old).expect("old bytes decode");
        assert_eq!(back, rich, "{format:?}");
        let now = serde.dumps(&rich).expect("encode");
        match format {
            // Only the order of a tool call's keys moved.
            Format::Json => {
                let now: Value = serde_json::from_slice(&now.bytes).expect("JSON");
                let old: Value = serde_json::from_slice(&old.bytes).expect("JSON");
                assert_eq!(now, old);
            }
            // Python's objects, not the positional layout (see below).
            Format::LangGraph => assert_ne!(now.bytes, old.bytes),
            _ => assert_eq!(now.bytes.to_vec(), old.bytes.to_vec(), "{format:?}"),
        }
    }
}

/// In LangGraph's format a message is the msgpack extension Python's JsonPlusSerializer
/// writes for it, byte for byte (bytes from langgraph-checkpoint 4.3.2, langchain-core
/// 1.7.2; nested dicts here have their keys in sorted order, as Waypoint writes them).
#[test]
fn langgraph_format_writes_what_python_writes() {
    let serde = Serde::new(Format::LangGraph);
    let human = serde
        .dumps(&Message::human("hi").with_id("1"))
        .expect("encode");
    assert_eq!(
        human.bytes.to_vec(),
        hex(include_str!("testdata/human_hi.langgraph.hex"))
    );
    let three = vec![
        Message::Ai(AiMessage {
            id: Some("a".into()),
            tool_calls: vec![ToolCall::new("c", "f", json!({"a": 1}))],
            usage_metadata: Some(UsageMetadata::new(1, 2, 3)),
            ..AiMessage::default()
        }),
        Message::Tool(ToolMessage {
            content: "r".into(),
            tool_call_id: "c".into(),
            status: ToolStatus::Error,
            ..ToolMessage::default()
        }),
        Message::remove("a"),
    ];
    let stored = serde.dumps(&three).expect("encode");
    assert_eq!(
        stored.bytes.to_vec(),
        hex(include_str!("testdata/ai_tool_remove.langgraph.hex"))
    );
    assert_eq!(stored.type_tag, "msgpack");
    let back: Vec<Message> = serde.loads(&stored).expect("decode");
    assert_eq!(back, three);
}

/// A positional message that claims an extension but lacks it, whose extension names no
/// class or another kind's, or that has no place for its fields, is an error.
#[test]
fn broken_positional_messages_are_errors() {
    let serde = Serde::new(Format::Postcard);
    let stored = serde
        .dumps(&vec![Message::chat("critic", "x")])
        .expect("encode");
    let mut cut = stored.bytes.to_vec();
    cut.pop();
    let cut = SerializedValue::new(stored.type_tag.clone(), cut);
    assert!(serde.loads::<Vec<Message>>(&cut).is_err());

    type Nine = (
        u8,
        &'static str,
        bool,
        Option<&'static str>,
        Option<&'static str>,
        Vec<(Option<String>, String, String)>,
        Option<(u64, u64, u64)>,
        Option<&'static str>,
        Option<&'static str>,
    );
    let nine = |kind: u8| -> Nine { (kind, "x", false, None, None, Vec::new(), None, None, None) };
    let ten = |kind: u8, extension: &'static str| {
        let n = nine(kind);
        (n.0, n.1, n.2, n.3, n.4, n.5, n.6, n.7, n.8, extension)
    };
    let positional = Format::ALL
        .iter()
        .filter(|f| !matches!(f, Format::Json | Format::LangGraph));
    for format in positional {
        let serde = Serde::new(*format);
        let loads =
            |value: &SerializedValue| serde.loads::<Message>(value).map_err(|e| e.to_string());
        for (stored, says) in [
            (serde.dumps(&nine(5)).expect("encode"), "extension"),
            (
                serde.dumps(&nine(9)).expect("encode"),
                "unknown message kind",
            ),
            (
                serde
                    .dumps(&ten(0x12, r#"{"type": "HumanMessageChunk"}"#))
                    .expect("encode"),
                "HumanMessageChunk",
            ),
            (
                serde
                    .dumps(&ten(0x10, r#"{"type": "SysteMessageChunk"}"#))
                    .expect("encode"),
                "SysteMessageChunk",
            ),
            (
                serde.dumps(&ten(0x10, "[1]")).expect("encode"),
                "JSON object",
            ),
            (serde.dumps(&ten(0x10, "{")).expect("encode"), "EOF"),
            (serde.dumps(&ten(0x15, "{}")).expect("encode"), "`role`"),
        ] {
            let err = loads(&stored).expect_err(says);
            // postcard reports every custom error as one fixed text.
            let says = if *format == Format::Postcard {
                "Deserialization"
            } else {
                says
            };
            assert!(err.contains(says), "{format:?}: {err}");
        }
        assert_eq!(
            loads(
                &serde
                    .dumps(&ten(0x15, r#"{"role": "critic"}"#))
                    .expect("encode")
            ),
            Ok(Message::chat("critic", "x"))
        );
    }
}

/// `add_messages` works on every class: ids, replacement and removal.
#[test]
fn add_messages_folds_every_class() {
    let conversation: Vec<Message> = fixture_messages()
        .into_iter()
        .filter(|m| !matches!(m, Message::Remove(_)))
        .collect();
    let mut current = Vec::new();
    add_messages(&mut current, conversation.clone()).expect("add");
    assert_eq!(current.len(), conversation.len());
    assert!(current.iter().all(|m| m.id().is_some()));
    // Classes and fields are kept; only missing ids were filled.
    for (kept, given) in current.iter().zip(&conversation) {
        let mut given = given.clone();
        if given.id().is_none() {
            given.set_id(kept.id().map(str::to_owned));
        }
        assert_eq!(kept, &given);
    }
    add_messages(
        &mut current,
        vec![
            Message::remove("c1"),
            Message::chat("critic", "I agree.").with_id("f1"),
        ],
    )
    .expect("remove and replace");
    assert!(current.iter().all(|m| m.id() != Some("c1")));
    let replaced = current.iter().find(|m| m.id() == Some("f1")).expect("f1");
    assert_eq!(replaced.class_name(), "ChatMessage");
}

/// Usage reports add up as LangChain's `add_usage`: counts and breakdowns key by key.
#[test]
fn usage_adds_up_with_details() {
    let left: UsageMetadata = serde_json::from_value(json!({
        "input_tokens": 5, "output_tokens": 0, "total_tokens": 5,
        "input_token_details": {"cache_read": 3}, "custom": 1
    }))
    .expect("usage");
    let right: UsageMetadata = serde_json::from_value(json!({
        "input_tokens": 1, "output_tokens": 10, "total_tokens": 11,
        "input_token_details": {"cache_read": 1, "audio": 2},
        "output_token_details": {"reasoning": 4}, "custom": 2, "note": "x"
    }))
    .expect("usage");
    assert_eq!(
        serde_json::to_value(left.add(&right)).expect("JSON"),
        json!({
            "input_tokens": 6, "output_tokens": 10, "total_tokens": 16,
            "input_token_details": {"cache_read": 4, "audio": 2},
            "output_token_details": {"reasoning": 4}, "custom": 3, "note": "x"
        })
    );
}

/// Conversions take the roles of chat and function messages.
#[test]
fn chat_and_function_messages_convert_by_role() {
    let messages = [
        Message::chat("system", "be brief"),
        Message::chat("user", "hi"),
        Message::chat("assistant", "hello"),
        Message::function("calc", "42"),
    ];
    assert_eq!(
        to_openai(&messages).expect("openai"),
        vec![
            json!({"role": "system", "content": "be brief"}),
            json!({"role": "user", "content": "hi"}),
            json!({"role": "assistant", "content": "hello"}),
            json!({"role": "function", "content": "42", "name": "calc"}),
        ]
    );
    let anthropic = to_anthropic(&messages[..3]).expect("anthropic");
    assert_eq!(anthropic.system.as_deref(), Some("be brief"));
    assert_eq!(
        anthropic.messages,
        vec![
            json!({"role": "user", "content": "hi"}),
            json!({"role": "assistant", "content": "hello"}),
        ]
    );
    assert!(to_anthropic(&messages[3..]).is_err());
    assert!(to_anthropic(&[Message::chat("critic", "no")]).is_err());
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e9f64..1e9).prop_map(Value::from),
        ".{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map(".{0,5}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A map whose keys are no field of any class.
fn arb_map() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map("x_[a-z]{0,4}", arb_json(), 0..3)
        .prop_map(|m| m.into_iter().collect())
}

fn arb_content() -> impl Strategy<Value = Content> {
    prop_oneof![
        ".{0,20}".prop_map(Content::Text),
        prop::collection::vec(arb_json(), 0..3).prop_map(Content::Blocks),
    ]
}

fn arb_message() -> impl Strategy<Value = Message> {
    let common = (
        arb_content(),
        prop::option::of(".{0,6}"),
        prop::option::of(".{0,6}"),
        arb_map(),
        arb_map(),
        arb_map(),
        any::<bool>(),
    );
    let ai = (
        prop::collection::vec(
            (
                prop::option::of("[a-z]{1,3}"),
                "[a-z]{1,5}",
                arb_json(),
                arb_map(),
            ),
            0..3,
        ),
        prop::collection::vec(
            (
                prop::option::of("[a-z]{1,3}"),
                prop::option::of(".{0,4}"),
                prop::option::of(".{0,6}"),
                prop::option::of(".{0,6}"),
            ),
            0..2,
        ),
        prop::option::of((
            any::<u32>(),
            any::<u32>(),
            prop::option::of(arb_map()),
            arb_map(),
        )),
        prop::collection::vec(
            (
                prop::option::of("[a-z]{1,3}"),
                prop::option::of(".{0,6}"),
                prop::option::of(0usize..4),
            ),
            0..2,
        ),
        prop::option::of(Just("last".to_owned())),
    );
    (0u8..7, common, ai, ".{0,6}", arb_json(), any::<bool>()).prop_map(
        |(
            kind,
            (content, id, name, additional_kwargs, response_metadata, extra, chunk),
            ai,
            word,
            artifact,
            flag,
        )| {
            match kind {
                0 => Message::Human(HumanMessage {
                    content,
                    id,
                    name,
                    additional_kwargs,
                    response_metadata,
                    extra,
                    chunk,
                }),
                1 => {
                    let (calls, invalid, usage, chunks, position) = ai;
                    Message::Ai(AiMessage {
                        content,
                        id,
                        name,
                        tool_calls: calls
                            .into_iter()
                            .map(|(id, name, args, extra)| ToolCall {
                                id,
                                name,
                                args,
                                extra,
                            })
                            .collect(),
                        invalid_tool_calls: invalid
                            .into_iter()
                            .map(|(id, name, args, error)| InvalidToolCall {
                                id,
                                name,
                                args,
                                error,
                                extra: Map::new(),
                            })
                            .collect(),
                        usage_metadata: usage.map(|(i, o, input, mut details)| {
                            if let Some(input) = input {
                                details.insert("input_token_details".into(), Value::Object(input));
                            }
                            UsageMetadata {
                                details,
                                ..UsageMetadata::new(
                                    u64::from(i),
                                    u64::from(o),
                                    u64::from(i) + u64::from(o),
                                )
                            }
                        }),
                        additional_kwargs,
                        response_metadata,
                        extra,
                        chunk,
                        tool_call_chunks: chunks
                            .into_iter()
                            .map(|(id, args, index)| ToolCallChunk {
                                name: None,
                                args,
                                id,
                                index,
                            })
                            .collect(),
                        chunk_position: position,
                    })
                }
                2 => Message::System(SystemMessage {
                    content,
                    id,
                    name,
                    additional_kwargs,
                    response_metadata,
                    extra,
                    chunk,
                }),
                3 => Message::Tool(ToolMessage {
                    content,
                    id,
                    name,
                    tool_call_id: word,
                    artifact: Some(artifact).filter(|a| !a.is_null()),
                    status: if flag {
                        ToolStatus::Error
                    } else {
                        ToolStatus::Success
                    },
                    additional_kwargs,
                    response_metadata,
                    extra,
                    chunk,
                }),
                4 => Message::Chat(ChatMessage {
                    content,
                    id,
                    name,
                    role: word,
                    additional_kwargs,
                    response_metadata,
                    extra,
                    chunk,
                }),
                5 => Message::Function(FunctionMessage {
                    content,
                    id,
                    name: word,
                    additional_kwargs,
                    response_metadata,
                    extra,
                    chunk,
                }),
                _ => Message::Remove(RemoveMessage {
                    id: word,
                    name,
                    additional_kwargs,
                    response_metadata,
                    extra,
                }),
            }
        },
    )
}

proptest! {
    /// Any message of any class, with any extra data, survives every format and Python's
    /// forms: `lc: 2`, `model_dump()` and the dict form.
    #[test]
    fn any_message_round_trips_everywhere(messages in prop::collection::vec(arb_message(), 0..5)) {
        for format in Format::ALL {
            let serde = Serde::new(*format);
            let stored = serde.dumps(&messages).expect("encode");
            let back: Vec<Message> = serde.loads(&stored).expect("decode");
            prop_assert_eq!(&back, &messages, "{:?}", format);
        }
        for message in &messages {
            prop_assert_eq!(&Message::from_json(message.to_langgraph()), &Ok(message.clone()));
            prop_assert_eq!(&Message::from_json(message.model_dump()), &Ok(message.clone()));
            prop_assert_eq!(&Message::from_json(message.to_json()), &Ok(message.clone()));
        }
    }
}
