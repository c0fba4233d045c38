//! Serialization throughput: encode and decode per format, plain and sealed with AES-256-GCM,
//! on three seeded payloads (LangChain-shaped records, plain records, and the runtime's
//! `Message` values), beside `memcpy` of the same bytes as the physical limit.

#![allow(missing_docs)] // criterion_group! generates undocumented items.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde::Serialize;
use serde::de::DeserializeOwned;
use waypoint_benches::{SIZES, conversation, plain_conversation, runtime_conversation};
use waypoint_checkpoint::{Format, Keyring, Serde, Slot};

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
        let tag = format.tag();
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
