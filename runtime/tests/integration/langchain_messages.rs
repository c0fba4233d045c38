//! LangChain messages of every class cross-checked with real Python: Python prints each
//! message's class and `model_dump()`, Waypoint reads it as a `Message` and writes LangGraph's
//! `lc: 2` form, and Python rebuilds the class from Waypoint's kwargs and finds it `==` to
//! the original, of the same type. Then the same list makes the whole trip through msgpack
//! bytes: Python's `JsonPlusSerializer` to Waypoint's `Format::LangGraph` and back.
//!
//! Needs `WAYPOINT_TEST_PYTHON` (a Python with langchain-core, as `scripts/python.sh` makes)
//! and `WAYPOINT_TEST_PYTHON_06` (the venv of the older LangGraph, another langchain-core);
//! without them the tests pass without running, unless `WAYPOINT_REQUIRE_BACKENDS=1`.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use waypoint_checkpoint::{Format, Serde, SerializedValue};
use waypoint_runtime::Message;
use waypoint_test_kit::{python, python_06, run_with_input};

/// Runs `messages.py <mode>` with `input` on stdin; its stdout, or a failure with its output.
fn run(python: &Path, mode: &str, input: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/messages.py");
    run_with_input(Command::new(python).arg(&script).arg(mode), input)
}

/// The whole cross-check with one interpreter.
fn cross_check(python: &Path) {
    let dumped: Vec<Value> =
        serde_json::from_str(&run(python, "dump", "")).expect("dump prints a JSON list");
    assert!(dumped.len() >= 13, "a message of every class");
    let mut back = Vec::new();
    let mut messages = Vec::new();
    for entry in &dumped {
        let (module, class, dump) = (
            entry["module"].as_str().expect("module"),
            entry["class"].as_str().expect("class"),
            &entry["dump"],
        );
        let mut id: Vec<&str> = module.split('.').collect();
        id.push(class);
        // What LangGraph's codec presents for the msgpack extension.
        let form = json!({"lc": 2, "type": "constructor", "id": id, "ext": 5,
                          "method": "model_validate_json", "args": [], "kwargs": dump});
        let message: Message = serde_json::from_value(form.clone())
            .unwrap_or_else(|e| panic!("{class} does not read: {e}\n{dump}"));
        // Through every format Waypoint stores in, then written in LangGraph's form.
        for format in Format::ALL {
            let serde = Serde::new(*format);
            let stored = serde.dumps(&message).expect("encode");
            let again: Message = serde.loads(&stored).expect("decode");
            assert_eq!(again, message, "{class} in {format:?}");
        }
        let written = message.to_langgraph();
        assert_eq!(
            written, form,
            "{class}: what Waypoint writes is what Python dumped"
        );
        // The plain model_dump dict reads as the same message.
        assert_eq!(Message::from_json(dump.clone()).as_ref(), Ok(&message));
        back.push(json!({"module": written["id"].as_array().map(|parts| {
            parts[..parts.len() - 1]
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(".")
        }), "class": message.class_name(), "kwargs": written["kwargs"]}));
        messages.push(message);
    }
    let verdict = run(
        python,
        "check",
        &serde_json::to_string(&back).expect("JSON"),
    );
    assert!(verdict.starts_with("ok"), "{verdict}");

    // Through real msgpack: Python's JsonPlusSerializer writes the list, Waypoint reads it
    // (LangGraph's format, and the msgpack one, which falls back to it), writes it in
    // LangGraph's format, and Python reads back equal objects of the same classes.
    let printed = run(python, "msgpack", "");
    let (tag, data) = printed.trim().split_once(' ').expect("a tag and hex");
    let stored = SerializedValue::new(tag.to_owned(), from_hex(data));
    for format in [Format::LangGraph, Format::MsgPack] {
        let read: Vec<Message> = Serde::new(format)
            .loads(&stored)
            .unwrap_or_else(|e| panic!("{format:?} reads Python's msgpack: {e}"));
        assert_eq!(read, messages, "{format:?}");
    }
    let written = Serde::new(Format::LangGraph)
        .dumps(&messages)
        .expect("encode");
    let verdict = run(
        python,
        "check-msgpack",
        &format!("{} {}", written.type_tag, to_hex(&written.bytes)),
    );
    assert!(verdict.starts_with("ok"), "{verdict}");
}

fn from_hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// With the pinned LangGraph venv (langchain-core 1.7.2).
#[test]
fn every_class_round_trips_through_python() {
    if let Some(python) = python() {
        cross_check(&python);
    }
}

/// With the older LangGraph's venv, whose langchain-core is another version: fields this
/// one adds or drops travel as `extra`.
#[test]
fn every_class_round_trips_through_another_langchain_core() {
    if let Some(python) = python_06() {
        cross_check(&python);
    }
}
