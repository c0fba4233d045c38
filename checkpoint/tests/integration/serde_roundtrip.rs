//! Property tests: every shipped type round-trips in every compiled format, including
//! unicode, NUL, empty strings and maps, and extreme integers and floats.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use waypoint_checkpoint::{
    ChannelVersion, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSource,
    CheckpointTuple, Format, PendingWrite, Serde, SerializedValue,
};

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("\u{0}".to_owned()),
        Just("a\u{0}b\u{feff}\u{10FFFF}".to_owned()),
        ".*",
        "[a-z]{1,8}",
    ]
}

fn float() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(-0.0),
        Just(f64::MAX),
        Just(f64::MIN),
        Just(f64::MIN_POSITIVE),
        Just(f64::EPSILON),
        Just(5e-324),
        any::<f64>().prop_filter("JSON has no NaN or infinity", |f| f.is_finite()),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        prop_oneof![Just(i64::MIN), Just(i64::MAX), any::<i64>()].prop_map(Value::from),
        prop_oneof![Just(u64::MAX), any::<u64>()].prop_map(Value::from),
        float().prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(text(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn version() -> impl Strategy<Value = ChannelVersion> {
    prop_oneof![
        any::<u64>().prop_map(ChannelVersion::from),
        Just(ChannelVersion::next(None).expect("first version")),
        text().prop_map(ChannelVersion::new),
    ]
}

fn value() -> impl Strategy<Value = SerializedValue> {
    (text(), prop::collection::vec(any::<u8>(), 0..64))
        .prop_map(|(tag, bytes)| SerializedValue::new(tag, bytes))
}

fn checkpoint() -> impl Strategy<Value = Checkpoint> {
    (
        any::<u32>(),
        text(),
        text(),
        prop::collection::btree_map(text(), value(), 0..4),
        prop::collection::btree_map(text(), version(), 0..4),
        prop::collection::btree_map(
            text(),
            prop::collection::btree_map(text(), version(), 0..3),
            0..3,
        ),
        prop::option::of(prop::collection::vec(text(), 0..3)),
    )
        .prop_map(
            |(v, id, ts, channel_values, channel_versions, versions_seen, updated_channels)| {
                Checkpoint {
                    v,
                    id,
                    ts,
                    channel_values,
                    channel_versions,
                    versions_seen,
                    updated_channels,
                }
            },
        )
}

fn metadata() -> impl Strategy<Value = CheckpointMetadata> {
    let source = prop::option::of(prop_oneof![
        Just(CheckpointSource::Input),
        Just(CheckpointSource::Loop),
        Just(CheckpointSource::Update),
        Just(CheckpointSource::Fork),
    ]);
    let extra = prop::collection::btree_map(text(), json_value(), 0..4).prop_map(|m| {
        m.into_iter()
            .filter(|(k, _)| !["source", "step", "parents", "run_id"].contains(&k.as_str()))
            .collect::<Map<String, Value>>()
    });
    (
        source,
        prop::option::of(prop_oneof![Just(i64::MIN), Just(-1i64), any::<i64>()]),
        prop::option::of(prop::collection::btree_map(text(), text(), 0..3)),
        prop::option::of(text()),
        extra,
    )
        .prop_map(
            |(source, step, parents, run_id, extra)| CheckpointMetadata {
                source,
                step,
                parents,
                run_id,
                extra,
            },
        )
}

fn config() -> impl Strategy<Value = CheckpointConfig> {
    (text(), prop::option::of(text()), prop::option::of(text())).prop_map(|(t, ns, id)| {
        CheckpointConfig {
            thread_id: t,
            checkpoint_ns: ns,
            checkpoint_id: id,
        }
    })
}

fn write() -> impl Strategy<Value = PendingWrite> {
    (text(), text(), value()).prop_map(|(task_id, channel, value)| PendingWrite {
        task_id,
        channel,
        value,
    })
}

fn tuple() -> impl Strategy<Value = CheckpointTuple> {
    (
        config(),
        checkpoint(),
        metadata(),
        prop::option::of(config()),
        prop::collection::vec(write(), 0..3),
    )
        .prop_map(
            |(config, checkpoint, metadata, parent_config, pending_writes)| CheckpointTuple {
                config,
                checkpoint,
                metadata,
                parent_config,
                pending_writes,
            },
        )
}

/// Encodes in every format through `Serde` and decodes by the stored tag.
fn roundtrips<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(
    value: &T,
) -> Result<(), TestCaseError> {
    for format in Format::ALL {
        let serde = Serde::new(*format);
        let stored = serde
            .dumps(value)
            .map_err(|e| TestCaseError::fail(format!("{format:?} encode: {e}")))?;
        prop_assert_eq!(stored.type_tag.as_ref(), format.tag());
        // Read back through a serde configured for another format: the tag decides.
        let back: T = Serde::new(Format::Json)
            .loads(&stored)
            .map_err(|e| TestCaseError::fail(format!("{format:?} decode: {e}")))?;
        prop_assert_eq!(&back, value, "{:?}", format);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn checkpoints_roundtrip(v in checkpoint()) { roundtrips(&v)?; }

    #[test]
    fn metadata_roundtrips(v in metadata()) { roundtrips(&v)?; }

    #[test]
    fn tuples_roundtrip(v in tuple()) { roundtrips(&v)?; }

    #[test]
    fn writes_roundtrip(v in prop::collection::vec(write(), 0..5)) { roundtrips(&v)?; }

    #[test]
    fn json_values_roundtrip(v in json_value()) {
        // Free-form JSON needs a self-describing format.
        for format in Format::ALL.iter().filter(|f| ["json", "msgpack"].contains(&f.tag())) {
            let serde = Serde::new(*format);
            let back: Value = serde.loads(&serde.dumps(&v).expect("encode")).expect("decode");
            prop_assert_eq!(&back, &v);
        }
    }

    #[test]
    fn metadata_json_roundtrips(v in metadata()) {
        prop_assert_eq!(CheckpointMetadata::from_json(v.to_json()).expect("from_json"), v);
    }

    #[test]
    fn version_order_follows_counters(a in any::<u32>(), b in any::<u32>()) {
        let va = ChannelVersion::new(format!("{a:032}.0.5"));
        let vb = ChannelVersion::new(format!("{b:032}.0.25"));
        let expected = a.cmp(&b).then_with(|| va.as_str().cmp(vb.as_str()));
        prop_assert_eq!(va.cmp(&vb), expected);
    }
}

#[test]
fn maps_and_strings_at_the_edges() {
    let mut cp = Checkpoint::new(-1);
    cp.channel_values
        .insert(String::new(), SerializedValue::new("", Vec::<u8>::new()));
    cp.versions_seen.insert("\u{0}".into(), BTreeMap::new());
    roundtrips(&cp).expect("edge checkpoint round-trips");
}
