//! `Serde::loads` dispatching on a stored type tag, fed arbitrary bytes.
//!
//! Input: first byte selects the tag (including a sealed tag and an unknown one), the rest
//! are the stored bytes. `loads` must return `Ok` or `Err`, never panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use waypoint_checkpoint::{Checkpoint, Serde, SerializedValue};

const TAGS: [&str; 8] = [
    "json",
    "msgpack",
    "postcard",
    "bincode",
    "null",
    "bytes",
    "msgpack+aes-gcm:k1",
    "weird",
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, bytes)) = data.split_first() else {
        return;
    };
    let tag = TAGS[selector as usize % TAGS.len()];
    let value = SerializedValue::new(tag, bytes.to_vec());
    let serde = Serde::default();
    let _ = serde.loads::<Checkpoint>(&value);
    let _ = serde.loads::<serde_json::Value>(&value);
});
