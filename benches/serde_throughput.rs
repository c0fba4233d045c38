//! Serialization throughput: encode and decode per format, plain and sealed with AES-256-GCM,
//! on three seeded payloads (LangChain-shaped records, plain records, and the runtime's
//! `Message` values), beside `memcpy` of the same bytes as the physical limit.
//!
//! Then the cost of LangGraph's encoding against Waypoint's positional msgpack on a 200-message
//! conversation (`serde/langgraph-vs-positional/200`): the runtime's `Message` in each format,
//! the same messages as the `lc: 2` JSON Python's objects read as, and the `msgpack` reader's
//! path for Python's bytes (rmp-serde first, then LangGraph's reader).

#![allow(missing_docs)] // criterion_group! generates undocumented items.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use waypoint_checkpoint::{Format, Keyring, Serde, SerializedValue, Slot};
use waypoint_runtime::Message;
use waypoint_workloads::payload::{
    MEDIUM, MessageKind, SIZES, conversation, plain_conversation, runtime_conversation,
};

const SLOT: Slot<'static> = Slot::Channel {
    thread_id: "bench-thread",
    checkpoint_ns: "",
    channel: "messages",
    version: "00000000000000000000000000000001.0.5",
};

fn bench_shape<T: Serialize + DeserializeOwned>(
    c: &mut Criterion,
    shape: &str,
    size: &str,
    value: &T,
) {
    let mut group = c.benchmark_group(format!("serde/{shape}/{size}"));
    let keyring = Keyring::new("k1", &[7; 32]).expect("key");
    for format in Format::ALL {
        let plain = Serde::new(*format);
        let sealed = plain.clone().with_keyring(keyring.clone());
        let encoded = plain.dumps(value).expect("encode");
        group.throughput(Throughput::Bytes(encoded.bytes.len() as u64));
        // Two formats share the tag `msgpack`; the name tells them apart.
        let tag = format.name();
        group.bench_function(BenchmarkId::new("encode", tag), |b| {
            b.iter(|| plain.dumps(black_box(value)).expect("encode"))
        });
        group.bench_function(BenchmarkId::new("decode", tag), |b| {
            b.iter(|| plain.loads::<T>(black_box(&encoded)).expect("decode"))
        });
        let stored = sealed.dumps_sealed(value, &SLOT).expect("seal");
        group.bench_function(BenchmarkId::new("encode+aes-gcm", tag), |b| {
            b.iter(|| sealed.dumps_sealed(black_box(value), &SLOT).expect("seal"))
        });
        group.bench_function(BenchmarkId::new("decode+aes-gcm", tag), |b| {
            b.iter(|| {
                sealed
                    .loads_sealed::<T>(black_box(&stored), &SLOT)
                    .expect("open")
            })
        });
        if *format == Format::ALL[Format::ALL.len() - 1] {
            let mut dst = vec![0u8; encoded.bytes.len()];
            group.bench_function(BenchmarkId::new("memcpy", tag), |b| {
                b.iter(|| dst.copy_from_slice(black_box(&encoded.bytes)))
            });
        }
    }
    group.finish();
}

fn serde_throughput(c: &mut Criterion) {
    for size in SIZES {
        bench_shape(c, "messages", size.name, &conversation(size));
        bench_shape(c, "plain", size.name, &plain_conversation(size));
        bench_shape(c, "message", size.name, &runtime_conversation(size));
    }
    langgraph_vs_positional(c);
}

/// The 200 medium messages as the `lc: 2` JSON LangGraph's reader shows for Python's
/// `HumanMessage` / `AIMessage` objects (pydantic v2, `model_dump()` keyword arguments).
fn lc2_conversation() -> Vec<Value> {
    conversation(MEDIUM)
        .messages
        .into_iter()
        .map(|m| {
            let (module, class, kind) = match m.kind {
                MessageKind::Human => ("human", "HumanMessage", "human"),
                MessageKind::Ai => ("ai", "AIMessage", "ai"),
            };
            let mut kwargs = json!({
                "content": m.content, "additional_kwargs": {}, "response_metadata": {},
                "type": kind, "name": null, "id": m.id,
            });
            if m.kind == MessageKind::Ai {
                kwargs["tool_calls"] = json!([]);
                kwargs["invalid_tool_calls"] = json!([]);
                kwargs["usage_metadata"] = Value::Null;
            }
            json!({"lc": 2, "type": "constructor",
                   "id": ["langchain_core", "messages", module, class], "ext": 5,
                   "method": "model_validate_json", "args": [], "kwargs": kwargs})
        })
        .collect()
}

/// Encode and decode of 200 LangChain-shaped messages in LangGraph's encoding against
/// Waypoint's positional msgpack (see the module docs).
fn langgraph_vs_positional(c: &mut Criterion) {
    let messages = runtime_conversation(MEDIUM);
    let lc2 = lc2_conversation();
    let positional = Serde::new(Format::MsgPack);
    let langgraph = Serde::new(Format::LangGraph);
    let name = format!("serde/langgraph-vs-positional/{}", messages.len());
    let mut group = c.benchmark_group(name);
    let dumps_messages = |s: &Serde| s.dumps(&messages).expect("encode");
    let loads_messages = |s: &Serde, v: &SerializedValue| {
        s.loads::<Vec<Message>>(v).expect("decode");
    };
    let dumps_lc2 = |s: &Serde| s.dumps(&lc2).expect("encode");
    let loads_lc2 = |s: &Serde, v: &SerializedValue| {
        s.loads::<Vec<Value>>(v).expect("decode");
    };
    // (name, serde, encode, decode); the last case only reads differently: its bytes are
    // LangGraph's (as Python writes them), read by the default serde, whose rmp-serde fails on
    // the first extension before LangGraph's reader decodes them.
    type Encode<'a> = &'a dyn Fn(&Serde) -> SerializedValue;
    type Decode<'a> = &'a dyn Fn(&Serde, &SerializedValue);
    let python_bytes = |_: &Serde| langgraph.dumps(&lc2).expect("encode");
    let cases: [(&str, &Serde, Encode, Decode); 4] = [
        (
            "positional-message",
            &positional,
            &dumps_messages,
            &loads_messages,
        ),
        (
            "langgraph-message",
            &langgraph,
            &dumps_messages,
            &loads_messages,
        ),
        ("langgraph-lc2-json", &langgraph, &dumps_lc2, &loads_lc2),
        (
            "msgpack-reader-lc2-json",
            &positional,
            &python_bytes,
            &loads_lc2,
        ),
    ];
    for (i, (name, serde, encode, decode)) in cases.into_iter().enumerate() {
        let stored = encode(serde);
        group.throughput(Throughput::Bytes(stored.bytes.len() as u64));
        if i < 3 {
            group.bench_function(BenchmarkId::new("encode", name), |b| {
                b.iter(|| encode(black_box(serde)))
            });
        }
        group.bench_function(BenchmarkId::new("decode", name), |b| {
            b.iter(|| decode(serde, black_box(&stored)))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(30);
    targets = serde_throughput
}
criterion_main!(benches);
