//! Bad input never panics: truncated, random, mis-tagged, hostile, tampered, moved and
//! wrong-key bytes give `Error::Serialization` or `Error::Decrypt`.

use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::json;
use waypoint_checkpoint::{
    Checkpoint, CheckpointMetadata, CheckpointSource, CheckpointTuple, Error, Format, Keyring,
    Serde, SerializedValue, Slot,
};

fn sample() -> Checkpoint {
    let serde = Serde::default();
    let mut cp = Checkpoint::new(3);
    cp.channel_values.insert(
        "messages".into(),
        serde.dumps(&vec!["hi", "there"]).unwrap(),
    );
    cp.channel_versions.insert(
        "messages".into(),
        "00000000000000000000000000000002.0.5".into(),
    );
    cp.versions_seen
        .insert("agent".into(), cp.channel_versions.clone());
    cp
}

const SLOT: Slot<'static> = Slot::Channel {
    thread_id: "thread-1",
    checkpoint_ns: "",
    channel: "messages",
    version: "00000000000000000000000000000002.0.5",
};

fn keyed(id: &str, key: u8) -> Serde {
    Serde::default().with_keyring(Keyring::new(id, &[key; 32]).unwrap())
}

#[test]
fn every_truncation_is_an_error() {
    let cp = sample();
    for format in Format::ALL {
        let bytes = format.encode(&cp).unwrap();
        for len in 0..bytes.len() {
            let r = format.decode::<Checkpoint>(&bytes[..len]);
            assert!(
                matches!(r, Err(Error::Serialization { .. })),
                "{format:?} prefix {len} decoded"
            );
        }
        assert_eq!(format.decode::<Checkpoint>(&bytes).unwrap(), cp);
    }
}

#[test]
fn trailing_garbage_is_an_error() {
    let cp = sample();
    for format in Format::ALL.iter().filter(|f| f.tag() != "msgpack") {
        let mut bytes = format.encode(&cp).unwrap();
        bytes.extend_from_slice(b"\x00junk");
        assert!(format.decode::<Checkpoint>(&bytes).is_err(), "{format:?}");
    }
}

#[test]
fn mis_tagged_bytes_never_decode_to_a_different_value() {
    let cp = sample();
    for written in Format::ALL {
        let bytes = written.encode(&cp).unwrap();
        for read in Format::ALL.iter().filter(|f| *f != written) {
            match read.decode::<Checkpoint>(&bytes) {
                Err(Error::Serialization { .. }) => {}
                Ok(v) => assert_eq!(v, cp, "{written:?} read as {read:?} gave another value"),
                Err(e) => panic!("unexpected error kind {e:?}"),
            }
            // JSON and the binary formats never mistake each other.
            if *read == Format::Json || *written == Format::Json {
                assert!(read.decode::<Checkpoint>(&bytes).is_err());
            }
        }
    }
}

#[test]
fn unknown_and_sealed_tags_are_errors() {
    let serde = Serde::default();
    for tag in ["pickle", "", "MSGPACK", "json ", "ext:7"] {
        let v = SerializedValue::new(tag.to_owned(), b"\x01".to_vec());
        assert!(
            matches!(serde.loads::<i32>(&v), Err(Error::Serialization { .. })),
            "{tag}"
        );
    }
    let sealed = keyed("k1", 1).dumps_sealed(&1, &SLOT).unwrap();
    assert!(matches!(
        serde.loads::<i32>(&sealed),
        Err(Error::Serialization { .. })
    ));
}

#[test]
fn null_and_bytes_tags_read() {
    let serde = Serde::default();
    let none: Option<String> = serde
        .loads(&SerializedValue::new("null", Vec::<u8>::new()))
        .unwrap();
    assert_eq!(none, None);
    let raw: serde_bytes::ByteBuf = serde
        .loads(&SerializedValue::new("bytes", vec![0u8, 255]))
        .unwrap();
    assert_eq!(raw.into_vec(), vec![0u8, 255]);
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Message {
    role: String,
    content: String,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Conversation {
    messages: Vec<Message>,
}

#[derive(Serialize)]
struct RawMessage {
    role: String,
    #[serde(with = "serde_bytes")]
    content: Vec<u8>,
}

#[derive(Serialize)]
struct RawConversation {
    messages: Vec<RawMessage>,
}

#[test]
fn errors_name_the_failing_field() {
    // Message 3 carries bytes that are not UTF-8; every binary format must point at it.
    let raw = RawConversation {
        messages: (0..5)
            .map(|i| RawMessage {
                role: "user".into(),
                content: if i == 3 {
                    vec![0xff, 0xfe]
                } else {
                    b"fine".to_vec()
                },
            })
            .collect(),
    };
    for format in Format::ALL.iter().filter(|f| **f != Format::Json) {
        let bytes = format.encode(&raw).unwrap();
        match format.decode::<Conversation>(&bytes) {
            Err(Error::Serialization { path, .. }) => {
                assert_eq!(path.as_deref(), Some("messages[3].content"), "{format:?}")
            }
            other => panic!("{format:?}: {other:?}"),
        }
    }
    let text = br#"{"messages":[{"role":"a","content":"x"},{"role":"a","content":"x"},{"role":"a","content":"x"},{"role":"a","content":7}]}"#;
    match Format::Json.decode::<Conversation>(text) {
        Err(Error::Serialization { path, .. }) => {
            assert_eq!(path.as_deref(), Some("messages[3].content"))
        }
        other => panic!("json: {other:?}"),
    }
}

#[test]
fn hostile_lengths_do_not_allocate_or_panic() {
    // A collection claiming ~2^60 (postcard/bincode varints) or 2^32-1 (msgpack) elements.
    let hostile: [(&str, Vec<u8>); 3] = [
        (
            "postcard",
            vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f],
        ),
        (
            "bincode",
            vec![253, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f],
        ),
        ("msgpack", vec![0xdd, 0xff, 0xff, 0xff, 0xff]),
    ];
    for (tag, bytes) in hostile {
        let Ok(format) = Format::from_tag(tag) else {
            continue;
        };
        assert!(format.decode::<Vec<String>>(&bytes).is_err(), "{tag}");
        assert!(format.decode::<Vec<u8>>(&bytes).is_err(), "{tag}");
        assert!(format.decode::<String>(&bytes).is_err(), "{tag}");
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let depth = 100_000;
    let json = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    assert!(
        Format::Json
            .decode::<serde_json::Value>(json.as_bytes())
            .is_err()
    );
    if let Ok(msgpack) = Format::from_tag("msgpack") {
        let bytes = vec![0x91u8; depth]; // fixarray of one element, nested
        assert!(msgpack.decode::<serde_json::Value>(&bytes).is_err());
    }
}

#[test]
fn metadata_with_known_keys_of_the_wrong_type_is_an_error() {
    for bad in [
        json!({"step": "one"}),
        json!({"source": "elsewhere"}),
        json!({"parents": [1]}),
        json!({"run_id": 5}),
    ] {
        let serde_json::Value::Object(map) = bad else {
            unreachable!()
        };
        assert!(matches!(
            CheckpointMetadata::from_json(map),
            Err(Error::Serialization { .. })
        ));
    }
    let ok = CheckpointMetadata::new(CheckpointSource::Loop, 1).with("x", json!({"deep": [null]}));
    assert_eq!(CheckpointMetadata::from_json(ok.to_json()).unwrap(), ok);
}

#[test]
fn every_tampered_byte_fails_to_open() {
    let serde = keyed("k1", 1);
    let original = sample();
    let sealed = serde.dumps_sealed(&original, &SLOT).unwrap();
    for i in 0..sealed.bytes.len() {
        let mut bytes = sealed.bytes.to_vec();
        bytes[i] ^= 0x01;
        let tampered = SerializedValue::new(sealed.type_tag.clone(), bytes);
        assert!(
            matches!(serde.open(&tampered, &SLOT), Err(Error::Decrypt(_))),
            "byte {i}"
        );
    }
    for len in 0..sealed.bytes.len() {
        let cut = SerializedValue::new(sealed.type_tag.clone(), sealed.bytes.slice(..len));
        assert!(
            matches!(serde.open(&cut, &SLOT), Err(Error::Decrypt(_))),
            "length {len}"
        );
    }
    let back: Checkpoint = serde.loads_sealed(&sealed, &SLOT).unwrap();
    assert_eq!(back, original);
}

#[test]
fn a_value_moved_to_another_slot_fails_to_open() {
    let serde = keyed("k1", 1);
    let write = write_slot("cp-1", "task-1", 0);
    let elsewhere = [
        Slot::Channel {
            thread_id: "thread-2",
            checkpoint_ns: "",
            channel: "messages",
            version: "00000000000000000000000000000002.0.5",
        },
        Slot::Channel {
            thread_id: "thread-1",
            checkpoint_ns: "child",
            channel: "messages",
            version: "00000000000000000000000000000002.0.5",
        },
        Slot::Channel {
            thread_id: "thread-1",
            checkpoint_ns: "",
            channel: "other",
            version: "00000000000000000000000000000002.0.5",
        },
        Slot::Channel {
            thread_id: "thread-1",
            checkpoint_ns: "",
            channel: "messages",
            version: "00000000000000000000000000000003.0.5",
        },
        // Field boundaries are length-prefixed: moving a character across them is detected.
        Slot::Channel {
            thread_id: "thread-",
            checkpoint_ns: "1",
            channel: "messages",
            version: "00000000000000000000000000000002.0.5",
        },
        write,
    ];
    let sealed = serde.dumps_sealed(&"secret", &SLOT).unwrap();
    for slot in elsewhere {
        assert!(
            matches!(serde.open(&sealed, &slot), Err(Error::Decrypt(_))),
            "{slot:?}"
        );
    }
    let sealed_write = serde.dumps_sealed(&"secret", &write).unwrap();
    for other in [
        write_slot("cp-2", "task-1", 0),
        write_slot("cp-1", "task-2", 0),
        write_slot("cp-1", "task-1", 1),
        SLOT,
    ] {
        assert!(
            matches!(serde.open(&sealed_write, &other), Err(Error::Decrypt(_))),
            "{other:?}"
        );
    }
    // Re-tagging the inner format is detected too.
    let retagged = SerializedValue::new(
        sealed.type_tag.replace("msgpack", "json"),
        sealed.bytes.clone(),
    );
    assert!(matches!(
        serde.open(&retagged, &SLOT),
        Err(Error::Decrypt(_))
    ));
}

fn write_slot(checkpoint_id: &'static str, task_id: &'static str, idx: i64) -> Slot<'static> {
    Slot::Write {
        thread_id: "thread-1",
        checkpoint_ns: "",
        checkpoint_id,
        task_id,
        channel: "messages",
        idx,
    }
}

#[test]
fn wrong_and_unknown_keys_fail_to_open() {
    let sealed = keyed("k1", 1).dumps_sealed(&"secret", &SLOT).unwrap();
    assert!(matches!(
        keyed("k1", 2).open(&sealed, &SLOT),
        Err(Error::Decrypt(_))
    ));
    assert!(matches!(
        keyed("k9", 1).open(&sealed, &SLOT),
        Err(Error::Decrypt(_))
    ));
    assert!(matches!(
        Serde::default().open(&sealed, &SLOT),
        Err(Error::Decrypt(_))
    ));
    let bogus_cipher = SerializedValue::new("msgpack+rot13:k1", sealed.bytes.clone());
    assert!(matches!(
        keyed("k1", 1).open(&bogus_cipher, &SLOT),
        Err(Error::Decrypt(_))
    ));
}

#[test]
fn keys_rotate() {
    let old = keyed("k1", 1);
    let sealed_old = old.dumps_sealed(&"old", &SLOT).unwrap();
    let ring = Keyring::new("k1", &[1; 32])
        .unwrap()
        .with_key("k2", &[2; 32])
        .unwrap();
    let rotated = Serde::default().with_keyring(ring);
    assert_eq!(
        rotated.loads_sealed::<String>(&sealed_old, &SLOT).unwrap(),
        "old"
    );
    let sealed_new = rotated.dumps_sealed(&"new", &SLOT).unwrap();
    assert!(
        sealed_new.type_tag.ends_with(":k2"),
        "{}",
        sealed_new.type_tag
    );
    let only_new = keyed("k2", 2);
    assert_eq!(
        only_new.loads_sealed::<String>(&sealed_new, &SLOT).unwrap(),
        "new"
    );
    assert!(matches!(
        only_new.open(&sealed_old, &SLOT),
        Err(Error::Decrypt(_))
    ));
}

#[test]
fn a_keyed_serde_refuses_plaintext_unless_told() {
    let plain = Serde::default().dumps(&"legacy").unwrap();
    assert!(matches!(
        keyed("k1", 1).open(&plain, &SLOT),
        Err(Error::Decrypt(_))
    ));
    let lenient = keyed("k1", 1).accept_plaintext(true);
    assert_eq!(
        lenient.loads_sealed::<String>(&plain, &SLOT).unwrap(),
        "legacy"
    );
}

#[test]
fn nonces_are_fresh() {
    let serde = keyed("k1", 1);
    let a = serde.dumps_sealed(&"same", &SLOT).unwrap();
    let b = serde.dumps_sealed(&"same", &SLOT).unwrap();
    assert_ne!(a.bytes, b.bytes);
}

#[test]
fn key_specs_parse_or_fail_clearly() {
    let hex_key = "00".repeat(32);
    let b64_key = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
    let ring = Keyring::parse(&format!("old:{hex_key},{b64_key}")).unwrap();
    assert_eq!(ring.current_id(), "k2");
    for bad in [
        "",
        "zz",
        "k1:abcd",
        &"00".repeat(31),
        "bad id:AAAA",
        &format!("a:{hex_key},a:{hex_key}"),
    ] {
        assert!(
            matches!(Keyring::parse(bad), Err(Error::InvalidConfig(_))),
            "{bad:?}"
        );
    }
}

proptest! {
    #[test]
    fn random_bytes_never_panic(tag in prop::sample::select(vec!["json", "msgpack", "postcard", "bincode", "null", "bytes", "msgpack+aes-gcm:k1", "x"]), bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let value = SerializedValue::new(tag, bytes);
        let _ = Serde::default().loads::<Checkpoint>(&value);
        let _ = Serde::default().loads::<CheckpointTuple>(&value);
        let _ = Serde::default().loads::<CheckpointMetadata>(&value);
        let _ = Serde::default().loads::<serde_json::Value>(&value);
        let opened = keyed("k1", 1).open(&value, &SLOT);
        prop_assert!(opened.is_err() || !value.type_tag.contains('+'));
    }
}
