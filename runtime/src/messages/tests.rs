//! Messages in every serde format, the accepted input forms, and `add_messages` on the
//! examples LangGraph documents.

use proptest::prelude::*;
use serde_json::json;
use waypoint_checkpoint::{Format, Serde};

use super::*;

pub(super) fn rich_messages() -> Vec<Message> {
    vec![
        Message::system("be brief").with_id("s1"),
        Message::human("hi, I'm Bob").with_id("h1").with_name("bob"),
        Message::Ai(AiMessage {
            content: Content::Blocks(vec![
                json!({"type": "text", "text": "let me look"}),
                json!({"type": "thinking", "thinking": "...", "extra": [1, 2.5, null, {"k": true}]}),
            ]),
            id: Some("a1".into()),
            name: None,
            tool_calls: vec![ToolCall::new(
                "call_1",
                "search",
                json!({"query": "weather in SF", "nested": {"n": [1, 2, 3], "f": 0.5, "z": null}}),
            )],
            usage_metadata: Some(UsageMetadata::new(12, 7, 19)),
            ..AiMessage::default()
        }),
        Message::Tool(ToolMessage {
            content: "sunny".into(),
            id: Some("t1".into()),
            name: Some("search".into()),
            tool_call_id: "call_1".into(),
            artifact: Some(json!({"raw": [{"temp": 21}], "source": "api"})),
            ..ToolMessage::default()
        }),
        Message::ai("It's sunny."),
        Message::remove("h1"),
        Message::remove_all(),
    ]
}

/// Every shipped format round-trips every kind of message, free JSON included.
#[test]
fn every_format_round_trips_every_kind() {
    for format in Format::ALL {
        let serde = Serde::new(*format);
        let messages = rich_messages();
        let stored = serde.dumps(&messages).expect("encode");
        let back: Vec<Message> = serde.loads(&stored).expect("decode");
        assert_eq!(back, messages, "{format:?}");
    }
}

/// LangChain's dict, OpenAI's dict, the serialized constructor form, a pair and a string.
#[test]
fn json_accepts_langchain_openai_pairs_and_strings() {
    let forms = json!([
        {"type": "human", "content": "a", "id": "1"},
        {"role": "user", "content": "b"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
        {"role": "system", "content": "rules"},
        ["user", "c"],
        ["assistant", "d"],
        "e",
        {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"],
         "kwargs": {"content": "f", "id": "x9", "type": "ai", "tool_calls": []}}
    ]);
    let messages: Vec<Message> = serde_json::from_value(forms).expect("every form reads");
    let kinds: Vec<&str> = messages.iter().map(Message::kind).collect();
    assert_eq!(
        kinds,
        [
            "human", "human", "ai", "tool", "system", "human", "ai", "human", "ai"
        ]
    );
    assert_eq!(messages[2].tool_calls()[0].args, json!({"x": 1}));
    assert_eq!(messages[8].id(), Some("x9"));
    // Written back, a message is LangChain's dict form.
    assert_eq!(
        serde_json::to_value(&messages[3]).expect("encode"),
        json!({"type": "tool", "content": "done", "tool_call_id": "c1"})
    );
}

/// Bad input is an error naming the problem, never a panic.
#[test]
fn malformed_messages_are_errors() {
    for bad in [
        json!({"role": "wizard", "content": "x"}),
        json!({"content": "no kind"}),
        json!({"type": "tool", "content": "no call id"}),
        json!({"type": "remove"}),
        json!({"type": "human", "content": 5}),
        json!({"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}),
        json!(["user"]),
        json!(42),
    ] {
        assert!(
            serde_json::from_value::<Message>(bad.clone()).is_err(),
            "{bad}"
        );
    }
    for format in Format::ALL {
        let serde = Serde::new(*format);
        let stored = serde.dumps(&rich_messages()).expect("encode");
        let mut bytes = stored.bytes.to_vec();
        bytes.truncate(bytes.len() / 2);
        let cut = waypoint_checkpoint::SerializedValue::new(stored.type_tag.clone(), bytes);
        assert!(serde.loads::<Vec<Message>>(&cut).is_err(), "{format:?}");
    }
}

fn ids(messages: &[Message]) -> Vec<&str> {
    messages.iter().filter_map(Message::id).collect()
}

/// The documented examples: different ids append, an equal id replaces.
#[test]
fn add_messages_appends_new_ids_and_replaces_equal_ones() {
    let mut current = vec![Message::human("Hello").with_id("1")];
    add_messages(&mut current, vec![Message::ai("Hi there!").with_id("2")]).expect("append");
    assert_eq!(ids(&current), ["1", "2"]);
    assert_eq!(current[1], Message::ai("Hi there!").with_id("2"));

    let mut current = vec![Message::human("Hello").with_id("1")];
    add_messages(
        &mut current,
        vec![Message::human("Hello again").with_id("1")],
    )
    .expect("replace");
    assert_eq!(current, [Message::human("Hello again").with_id("1")]);
}

/// The documented example: remove id 1, then add id 3, gives `[2, 3]`.
#[test]
fn add_messages_removes_by_id() {
    let mut current = vec![
        Message::human("a").with_id("1"),
        Message::ai("b").with_id("2"),
    ];
    add_messages(
        &mut current,
        vec![Message::remove("1"), Message::human("c").with_id("3")],
    )
    .expect("remove then add");
    assert_eq!(ids(&current), ["2", "3"]);

    let err = add_messages(&mut current, vec![Message::remove("nope")]).expect_err("unknown id");
    assert!(err.to_string().contains("nope"), "{err}");
    assert_eq!(
        ids(&current),
        ["2", "3"],
        "a refused update changes nothing"
    );
}

/// Remove-all clears the list and the update's messages before it.
#[test]
fn add_messages_remove_all_clears_everything_before_it() {
    let mut current = vec![Message::human("a").with_id("1")];
    add_messages(
        &mut current,
        vec![
            Message::ai("dropped").with_id("2"),
            Message::remove_all(),
            Message::human("fresh").with_id("3"),
        ],
    )
    .expect("remove all");
    assert_eq!(ids(&current), ["3"]);
}

/// Missing ids are filled, and folding the same writes again gives the same ids.
#[test]
fn add_messages_gives_missing_ids_deterministically() {
    let fold = || {
        let mut current = vec![Message::human("hi")];
        add_messages(
            &mut current,
            vec![Message::ai("hello"), Message::ai("hello")],
        )
        .expect("fold");
        current
    };
    let (a, b) = (fold(), fold());
    assert_eq!(a, b);
    let got = ids(&a);
    assert_eq!(got.len(), 3);
    assert!(got.iter().all(|id| uuid::Uuid::parse_str(id).is_ok()));
    assert_ne!(
        got[1], got[2],
        "equal messages at two positions are two messages"
    );
}

/// The human-review pattern: a node edits the last AI message by reusing its id.
#[test]
fn add_messages_edits_a_message_in_place_by_id() {
    let mut current = vec![
        Message::human("book a flight").with_id("h"),
        Message::Ai(AiMessage {
            content: "".into(),
            id: Some("ai-1".into()),
            tool_calls: vec![ToolCall::new("c", "book", json!({"to": "SFO"}))],
            ..AiMessage::default()
        }),
    ];
    let mut edited = current[1].clone();
    if let Message::Ai(ai) = &mut edited {
        ai.tool_calls[0].args = json!({"to": "LAX"});
    }
    add_messages(&mut current, vec![edited]).expect("edit");
    assert_eq!(current.len(), 2);
    assert_eq!(current[1].tool_calls()[0].args, json!({"to": "LAX"}));
}

fn arb_json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        (-1e9f64..1e9).prop_map(serde_json::Value::from),
        ".{0,12}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            prop::collection::btree_map(".{0,6}", inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

fn arb_message() -> impl Strategy<Value = Message> {
    let id = proptest::option::of(".{0,10}");
    (
        0u8..5,
        ".{0,40}",
        id.clone(),
        proptest::option::of(".{0,8}"),
        arb_json(),
        proptest::option::of(arb_json()),
    )
        .prop_map(|(kind, text, id, name, args, artifact)| {
            let message = match kind {
                0 => Message::human(text),
                1 => Message::Ai(AiMessage {
                    content: Content::Blocks(vec![json!({"type": "text", "text": text})]),
                    tool_calls: vec![ToolCall::new("c", "tool", args)],
                    ..AiMessage::default()
                }),
                2 => Message::system(text),
                3 => Message::Tool(ToolMessage {
                    content: text.into(),
                    tool_call_id: "c".into(),
                    artifact: artifact.filter(|a| !a.is_null()),
                    ..ToolMessage::default()
                }),
                _ => Message::remove(text),
            };
            let message = match id {
                Some(id) if !matches!(message, Message::Remove(_)) => message.with_id(id),
                _ => message,
            };
            match name {
                Some(name) => message.with_name(name),
                None => message,
            }
        })
}

proptest! {
    /// Any message, free JSON included, survives every format.
    #[test]
    fn any_message_round_trips_in_every_format(messages in prop::collection::vec(arb_message(), 0..6)) {
        for format in Format::ALL {
            let serde = Serde::new(*format);
            let stored = serde.dumps(&messages).expect("encode");
            let back: Vec<Message> = serde.loads(&stored).expect("decode");
            prop_assert_eq!(&back, &messages);
        }
    }
}
