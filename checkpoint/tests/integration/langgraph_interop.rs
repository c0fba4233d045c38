//! LangGraph's msgpack cross-checked with real Python: `JsonPlusSerializer().dumps_typed`
//! writes values of every kind (pydantic v1 and v2 models, a dataclass, a namedtuple,
//! datetimes, UUIDs, Decimals, sets, enums, paths, addresses, zones, tuple-keyed dicts, bytes,
//! LangChain messages with tool calls and usage), Waypoint reads each as `serde_json::Value`
//! and writes it back with `Format::LangGraph`, and Python's `loads_typed` of Waypoint's bytes
//! is `==` to the original and of the same type, all the way down.
//!
//! Needs `WAYPOINT_TEST_PYTHON` and `WAYPOINT_TEST_PYTHON_06` (the pinned venvs of the current
//! LangGraph and of langgraph 0.6 that `scripts/python.sh` makes); without one the test checks
//! the other only, unless `WAYPOINT_REQUIRE_BACKENDS=1` makes that a failure.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use waypoint_checkpoint::serde::Node;
use waypoint_checkpoint::{Format, Serde, SerializedValue};
use waypoint_test_kit::{python, python_06, run_with_input};

/// Runs `jsonplus_roundtrip.py <mode>` with `input` on stdin (the script's directory is on
/// `sys.path`, so its value classes import); its stdout, or a failure with its output.
fn run(python: &Path, mode: &str, input: &str) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop");
    run_with_input(
        Command::new(python)
            .arg(dir.join("jsonplus_roundtrip.py"))
            .arg(mode)
            .env("PYTHONPATH", &dir)
            .env_remove("LANGGRAPH_STRICT_MSGPACK"),
        input,
    )
}

/// The whole cross-check with one interpreter.
fn cross_check(python: &Path) {
    let dumped: Vec<Value> =
        serde_json::from_str(&run(python, "dump", "")).expect("dump prints a JSON list");
    assert!(dumped.len() >= 30, "values of every kind");
    let waypoint = Serde::default();
    let langgraph = Serde::new(Format::LangGraph);
    let mut back = Vec::new();
    for entry in &dumped {
        let name = entry["name"].as_str().expect("name");
        let tag = entry["tag"].as_str().expect("tag");
        let bytes = hex::decode(entry["hex"].as_str().expect("hex")).expect("hex");
        assert_eq!(tag, "msgpack", "{name}");
        let stored = SerializedValue::new(tag.to_owned(), bytes.clone());
        // Read as JSON by a LangGraph serde (the tree first) and by the default one (rmp-serde
        // first, the tree when it fails): the same, except for a Python dict shaped like an
        // object, which rmp-serde reads as the plain map it is and the tree shows in the
        // `builtins.dict` form that writes it back as a dict.
        let value: Value = langgraph
            .loads(&stored)
            .unwrap_or_else(|e| panic!("{name} does not read: {e}"));
        let default: Value = waypoint.loads(&stored).expect("the default serde reads it");
        if name == "object_lookalike" {
            assert_eq!(value["id"], json!(["builtins", "dict"]));
        } else {
            assert_eq!(default, value, "{name}");
        }
        // The tree writes Python's bytes back exactly.
        let node = Node::from_msgpack(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            hex::encode(node.to_msgpack().expect("writes")),
            hex::encode(&bytes),
            "{name}: the tree does not write Python's bytes back"
        );
        let written = langgraph
            .dumps(&value)
            .unwrap_or_else(|e| panic!("{name} does not write: {e}\n{value}"));
        assert_eq!(written.type_tag, "msgpack");
        back.push(json!({"name": name, "tag": written.type_tag,
                         "hex": hex::encode(&written.bytes)}));
    }
    let report = run(python, "check", &Value::Array(back).to_string());
    assert!(report.contains(" 0 failures"), "{report}");
}

#[test]
fn python_reads_back_what_waypoint_writes_of_every_value_it_reads() {
    if let Some(python) = python() {
        cross_check(&python);
    }
    if let Some(python) = python_06() {
        cross_check(&python);
    }
}
