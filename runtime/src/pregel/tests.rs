//! Task ids, task paths, namespaces, interrupt ids and the stored shapes of `Interrupt` and
//! `Send`, pinned against LangGraph: literal values, and values computed by real Python
//! LangGraph (`WAYPOINT_TEST_PYTHON`, and `WAYPOINT_TEST_PYTHON_06` for langgraph 0.6; the
//! test kit's rule: without them those tests pass without running, unless
//! `WAYPOINT_REQUIRE_BACKENDS=1`).

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use waypoint_checkpoint::{Format, Serde, SerializedValue};
use waypoint_test_kit::run_with_input;

use crate::interrupt::{Interrupt, interrupt_id, xxh3_hex};
use crate::pregel::codec::{SendPacket, SendRef};
use crate::pregel::graph::{BRANCH_PREFIX, INPUT, START};
use crate::pregel::step::{PULL, PUSH, TaskKind, checkpoint_id_bytes, task_id, task_ns, task_path};

/// Runs `tests/interop/{script}` with `args` and `input` on stdin; its stdout as JSON (or
/// the line it printed), or a failure with its output.
fn run(python: &Path, script: &str, args: &[&str], input: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/interop")
        .join(script);
    run_with_input(Command::new(python).arg(&path).args(args), input)
}

fn text(value: &Value, key: &str) -> String {
    value[key]
        .as_str()
        .unwrap_or_else(|| panic!("`{key}` in {value}"))
        .to_owned()
}

/// Every check of `ids.py`'s output: each task's id, path and namespace from what it derives
/// from, the namespaces subgraphs wrote, and each interrupt's id.
fn check_ids(out: &Value, counts_answers: bool) {
    let tasks = out["tasks"].as_array().expect("tasks");
    assert!(tasks.len() >= 10, "{} tasks", tasks.len());
    let mut own_ns = Vec::new();
    for task in tasks {
        let name = text(task, "name");
        let path = task["path"].as_array().expect("path");
        let kind = match path[0].as_str() {
            Some(PULL) => TaskKind::Pull,
            Some(PUSH) => TaskKind::Push(path[1].as_u64().expect("index") as usize),
            other => panic!("path {other:?}"),
        };
        let trigger = if name == START {
            INPUT.to_owned()
        } else {
            format!("{BRANCH_PREFIX}{name}")
        };
        let ns = text(task, "ns");
        let id = task_id(
            &checkpoint_id_bytes(&text(task, "checkpoint_id")),
            task["v"].as_u64() == Some(1),
            &ns,
            task["step"].as_i64().expect("step"),
            &name,
            &kind,
            &trigger,
        );
        assert_eq!(id, text(task, "id"), "task {task}");
        assert_eq!(task_path(&name, &kind), text(task, "path_str"), "{task}");
        if let Some(stored) = out["stored_paths"].get(&id) {
            assert_eq!(Some(task_path(&name, &kind).as_str()), stored.as_str());
        }
        own_ns.push(task_ns(&ns, &name, &id));
    }
    // Every subgraph checkpointed in its calling task's namespace (`|1` for a second call).
    let namespaces: Vec<&str> = out["namespaces"]
        .as_array()
        .expect("namespaces")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(namespaces.len() >= 4, "{namespaces:?}");
    for ns in namespaces.iter().filter(|ns| !ns.is_empty()) {
        let base = ns.strip_suffix("|1").unwrap_or(ns);
        assert!(own_ns.iter().any(|o| o == base), "namespace {ns}");
    }
    let interrupts = out["interrupts"].as_array().expect("interrupts");
    assert!(interrupts.len() >= 3);
    for interrupt in interrupts {
        let answered = interrupt["answered"].as_u64().expect("answered") as usize;
        let expected = text(interrupt, "expected");
        if counts_answers || answered == 0 {
            assert_eq!(
                interrupt_id(&text(interrupt, "task_ns"), answered),
                expected,
                "{interrupt}"
            );
        }
        if let Some(id) = interrupt["id"].as_str() {
            assert_eq!(id, expected, "{interrupt}");
        }
    }
    for case in out["direct"].as_array().expect("direct") {
        let kind = match case["kind"].as_str() {
            Some(PUSH) => TaskKind::Push(text(case, "last").parse().expect("index")),
            _ => TaskKind::Pull,
        };
        let bytes = checkpoint_id_bytes(&text(case, "checkpoint_id"));
        let (ns, name, last) = (text(case, "ns"), text(case, "name"), text(case, "last"));
        let step = case["step"].as_i64().expect("step");
        for (legacy, key) in [(false, "xxh3"), (true, "sha1")] {
            let id = task_id(&bytes, legacy, &ns, step, &name, &kind, &last);
            assert_eq!(id, text(case, key), "{key} of {case}");
        }
    }
    for (input, hash) in out["hashes"].as_object().expect("hashes") {
        assert_eq!(&xxh3_hex(input), hash.as_str().expect("hash"));
    }
}

#[test]
fn ids_match_real_langgraph() {
    let Some(python) = waypoint_test_kit::python() else {
        return;
    };
    let out: Value = serde_json::from_str(&run(&python, "ids.py", &[], "")).expect("JSON");
    check_ids(&out, true);
}

#[test]
fn ids_match_langgraph_0_6() {
    let Some(python) = waypoint_test_kit::python_06() else {
        return;
    };
    let out: Value = serde_json::from_str(&run(&python, "ids.py", &[], "")).expect("JSON");
    // 0.6 gives every interrupt of a task the first one's id.
    check_ids(&out, false);
}

/// Waypoint reads the `Interrupt`s and `Send`s Python writes, and Python reads the ones
/// Waypoint writes in LangGraph's encoding as objects of the same classes.
fn check_objects(python: &Path) {
    let serde = Serde::new(Format::LangGraph);
    let dumped: Value =
        serde_json::from_str(&run(python, "objects.py", &["dump"], "")).expect("JSON");
    let bytes = |key: &str| SerializedValue::new("msgpack", hex_decode(&text(&dumped, key)));

    let interrupts: Vec<Interrupt> = serde.loads(&bytes("interrupts")).expect("interrupts");
    assert_eq!(interrupts.len(), 1);
    assert_eq!(interrupts[0].value, json!({"question": "name?"}));
    assert_eq!(interrupts[0].id, "0123456789abcdef0123456789abcdef");
    let old: Vec<Interrupt> = serde.loads(&bytes("old")).expect("old interrupt");
    assert_eq!(old[0].value, json!("old?"));
    assert_eq!(
        old[0].id,
        xxh3_hex("gate:abc"),
        "0.4 derived the id from `ns`"
    );
    assert_eq!(old[0].extra["when"], json!("during"));

    let SendPacket(node, arg) = serde
        .loads::<SendPacket<Value>>(&bytes("send"))
        .expect("send");
    assert_eq!((node.as_str(), arg), ("work", json!({"item": "x", "n": 1})));
    let sends: Vec<SendPacket<Value>> = serde.loads(&bytes("sends")).expect("sends");
    let sends: Vec<(String, Value)> = sends.into_iter().map(|p| (p.0, p.1)).collect();
    assert_eq!(
        sends,
        vec![
            ("work".to_owned(), json!({"item": "x"})),
            ("work".to_owned(), json!({"item": "y"}))
        ]
    );

    let hex = |value: SerializedValue| {
        assert_eq!(value.type_tag, "msgpack");
        hex_encode(&value.bytes)
    };
    let interrupt = Interrupt::new(
        json!({"question": "name?"}),
        "0123456789abcdef0123456789abcdef",
    );
    let arg = json!({"item": "x", "n": 1});
    let pairs = [
        ("work".to_owned(), json!({"item": "x"})),
        ("work".to_owned(), json!({"item": "y"})),
    ];
    let sends: Vec<SendRef<'_, Value>> = pairs.iter().map(|(n, a)| SendRef(n, a)).collect();
    let written = json!({
        "interrupts": hex(serde.dumps(&vec![interrupt]).expect("dump")),
        "send": hex(serde.dumps(&SendRef("work", &arg)).expect("dump")),
        "sends": hex(serde.dumps(&sends).expect("dump")),
    });
    let answer = run(python, "objects.py", &["check"], &written.to_string());
    assert_eq!(answer.trim(), "ok");
}

#[test]
fn interrupts_and_sends_cross_with_real_langgraph() {
    if let Some(python) = waypoint_test_kit::python() {
        check_objects(&python);
    }
}

#[test]
fn interrupts_and_sends_cross_with_langgraph_0_6() {
    if let Some(python) = waypoint_test_kit::python_06() {
        check_objects(&python);
    }
}

fn hex_encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hex_decode(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn task_ids_are_pinned() {
    // Values of LangGraph 1.2.22's `_xxhash_str` and `_uuid5_str` for these inputs.
    let checkpoint = checkpoint_id_bytes("1f0b2c3d-4e5f-6789-8abc-def012345678");
    assert_eq!(checkpoint.len(), 16);
    assert_eq!(checkpoint[..4], [0x1f, 0x0b, 0x2c, 0x3d]);
    let id = task_id(
        &checkpoint,
        false,
        "",
        3,
        "agent",
        &TaskKind::Pull,
        "branch:to:agent",
    );
    assert_eq!(id.len(), 36);
    assert_eq!(id.matches('-').count(), 4);
    // A different trigger, step, namespace or kind gives a different id.
    let others = [
        task_id(
            &checkpoint,
            false,
            "",
            3,
            "agent",
            &TaskKind::Pull,
            "__start__",
        ),
        task_id(
            &checkpoint,
            false,
            "",
            4,
            "agent",
            &TaskKind::Pull,
            "branch:to:agent",
        ),
        task_id(
            &checkpoint,
            false,
            "x:1",
            3,
            "agent",
            &TaskKind::Pull,
            "branch:to:agent",
        ),
        task_id(&checkpoint, false, "", 3, "agent", &TaskKind::Push(0), ""),
        task_id(
            &checkpoint,
            true,
            "",
            3,
            "agent",
            &TaskKind::Pull,
            "branch:to:agent",
        ),
    ];
    for other in others {
        assert_ne!(id, other);
    }
    // An id that is not a uuid is hashed as its text, without failing.
    assert_eq!(checkpoint_id_bytes("not-hex!"), b"not-hex!".to_vec());
    assert_eq!(checkpoint_id_bytes("abc"), b"abc".to_vec());
}

#[test]
fn task_paths_and_namespaces_have_langgraph_shapes() {
    assert_eq!(task_path("agent", &TaskKind::Pull), "~__pregel_pull, agent");
    assert_eq!(
        task_path("work", &TaskKind::Push(12)),
        "~__pregel_push, 0000000012, 0000000000"
    );
    // Triggered nodes fold before sends, and sends by index.
    assert!(task_path("zeta", &TaskKind::Pull) < task_path("alpha", &TaskKind::Push(0)));
    assert!(task_path("w", &TaskKind::Push(2)) < task_path("w", &TaskKind::Push(10)));
    assert_eq!(task_ns("", "sub", "1234"), "sub:1234");
    assert_eq!(task_ns("sub:1234", "ask", "5678"), "sub:1234|ask:5678");
}

#[test]
fn interrupt_ids_are_pinned() {
    // xxh3_128_hexdigest of the empty string, as Python's xxhash gives it.
    assert_eq!(xxh3_hex(""), "99aa06d3014798d86001c324468d497f");
    assert_eq!(interrupt_id("a:b", 0), xxh3_hex("a:b"));
    assert_eq!(interrupt_id("a:b", 2), xxh3_hex("a:b|2"));
}

#[test]
fn sends_read_every_stored_form() {
    let json = Serde::new(Format::Json);
    let read = |value: Value| -> waypoint_checkpoint::Result<(String, Value)> {
        let stored = json.dumps(&value)?;
        json.loads::<SendPacket<Value>>(&stored).map(|p| (p.0, p.1))
    };
    let expected = ("work".to_owned(), json!({"item": "x"}));
    assert_eq!(read(json!(["work", {"item": "x"}])).unwrap(), expected);
    assert_eq!(
        read(json!({"node": "work", "arg": {"item": "x"}})).unwrap(),
        expected
    );
    let lc2 = json!({"lc": 2, "type": "constructor", "id": ["langgraph", "types", "Send"],
        "ext": 1, "method": null, "args": ["work", {"item": "x"}, null], "kwargs": {}});
    assert_eq!(read(lc2).unwrap(), expected);
    let other = json!({"lc": 2, "type": "constructor", "id": ["decimal", "Decimal"],
        "ext": 0, "method": null, "args": ["1.5"], "kwargs": {}});
    let err = read(other).unwrap_err().to_string();
    assert!(err.contains("decimal.Decimal"), "{err}");
    assert!(read(json!(["work"])).is_err());
    assert!(read(json!("work")).is_err());

    // Waypoint's own formats keep their pair.
    for format in [Format::Json, Format::MsgPack] {
        let serde = Serde::new(format);
        let arg = json!({"item": "x"});
        let stored = serde.dumps(&SendRef("work", &arg)).unwrap();
        let SendPacket(node, back) = serde.loads::<SendPacket<Value>>(&stored).unwrap();
        assert_eq!((node.as_str(), back), ("work", arg));
    }
    assert_eq!(
        serde_json::to_value(SendRef("work", &json!(1))).unwrap(),
        json!(["work", 1])
    );
}

#[test]
fn interrupts_read_every_stored_form() {
    let expected = Interrupt::new(json!({"q": 1}), "abc");
    let read = |value: Value| Interrupt::from_value(value);
    assert_eq!(
        read(json!({"value": {"q": 1}, "id": "abc"})).unwrap(),
        expected
    );
    assert_eq!(read(json!([{"q": 1}, "abc"])).unwrap(), expected);
    let lc2 = json!({"lc": 2, "type": "constructor", "id": ["langgraph", "types", "Interrupt"],
        "ext": 2, "method": null, "args": [],
        "kwargs": {"value": {"q": 1}, "id": "abc", "response_schema": null}});
    let read_back = read(lc2).unwrap();
    assert_eq!(
        (read_back.value.clone(), read_back.id.as_str()),
        (json!({"q": 1}), "abc")
    );
    assert_eq!(
        read_back.extra,
        json!({"response_schema": null})
            .as_object()
            .unwrap()
            .clone()
    );
    let positional = json!({"lc": 2, "type": "constructor", "id": ["langgraph", "types", "Interrupt"],
        "ext": 1, "method": null, "args": [{"q": 1}, "abc"], "kwargs": {}});
    assert_eq!(read(positional).unwrap(), expected);
    let old = read(json!({"value": "v", "ns": ["a:1", "b:2"], "when": "during"})).unwrap();
    assert_eq!(old.id, xxh3_hex("a:1|b:2"));
    assert!(read(json!({"lc": 2, "id": ["langgraph", "types", "Send"], "args": []})).is_err());
    assert!(read(json!({"value": 1, "id": 7})).is_err());
    assert!(read(json!("plain")).is_err());

    // Waypoint's formats round-trip, extra fields included.
    let mut with_extra = expected.clone();
    with_extra.extra.insert("when".into(), json!("during"));
    for format in [Format::Json, Format::MsgPack, Format::LangGraph] {
        let serde = Serde::new(format);
        for interrupt in [&expected, &with_extra] {
            let stored = serde.dumps(&vec![interrupt.clone()]).unwrap();
            let back: Vec<Interrupt> = serde.loads(&stored).unwrap();
            assert_eq!(&back[0], interrupt, "{format:?}");
        }
    }
    assert_eq!(
        serde_json::to_value(&expected).unwrap(),
        json!({"value": {"q": 1}, "id": "abc"})
    );
}
