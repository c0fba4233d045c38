//! LangChain messages of every class cross-checked with real Python: Python prints each
//! message's class and `model_dump()`, Waypoint reads it as a `Message` and writes LangGraph's
//! `lc: 2` form, and Python rebuilds the class from Waypoint's kwargs and finds it `==` to
//! the original, of the same type. Then the same list makes the whole trip through msgpack
//! bytes: Python's `JsonPlusSerializer` to Waypoint's `Format::LangGraph` and back.
//!
//! Needs `WAYPOINT_TEST_PYTHON` (a Python with langchain-core, as `scripts/python.sh` makes);
//! without it the tests pass without running, unless `WAYPOINT_REQUIRE_BACKENDS=1`.
//! `WAYPOINT_TEST_PYTHON_06` (the venv of the older LangGraph, another langchain-core) is
//! checked too when set.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use waypoint_checkpoint::{Format, Serde, SerializedValue};
use waypoint_runtime::Message;

/// The interpreter named by `var`; `None` (with the reason printed) when unset, a failure
/// when `WAYPOINT_REQUIRE_BACKENDS=1` and `required`.
fn python(var: &str, required: bool) -> Option<PathBuf> {
    match std::env::var(var) {
        Ok(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ if required && std::env::var("WAYPOINT_REQUIRE_BACKENDS").as_deref() == Ok("1") => {
            panic!("{var} is not set but WAYPOINT_REQUIRE_BACKENDS=1: run scripts/test.sh")
        }
        _ => {
            eprintln!("skipped: {var} is not set (scripts/python.sh makes the venv)");
            None
        }
    }
}

/// Runs `messages.py <mode>` with `input` on stdin; its stdout, or a failure with its output.
fn run(python: &Path, mode: &str, input: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/messages.py");
    let mut child = Command::new(python)
        .arg(&script)
        .arg(mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write stdin");
    let output = child.wait_with_output().expect("python output");
    assert!(
        output.status.success(),
        "messages.py {mode} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
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
    if let Some(python) = python("WAYPOINT_TEST_PYTHON", true) {
        cross_check(&python);
    }
}

/// With the older LangGraph's venv, whose langchain-core is another version: fields this
/// one adds or drops travel as `extra`.
#[test]
fn every_class_round_trips_through_another_langchain_core() {
    if let Some(python) = python("WAYPOINT_TEST_PYTHON_06", false) {
        cross_check(&python);
    }
}
