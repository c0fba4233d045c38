//! Every compiled-in `Format` decoding arbitrary bytes into every shipped type.
//!
//! Input: first byte selects the format from `Format::ALL`, the rest is decoded.
//! Decoding may fail; it must not panic. A successful decode must re-encode in the same
//! format and decode again to an equal value.

#![no_main]

use std::fmt::Debug;

use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;
use waypoint_checkpoint::{
    Checkpoint, CheckpointMetadata, CheckpointTuple, Format, PendingWrite, SerializedValue,
};

fn round_trip<T>(format: Format, bytes: &[u8])
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let Ok(value) = format.decode::<T>(bytes) else {
        return;
    };
    let encoded = format.encode(&value).unwrap_or_else(|e| {
        panic!(
            "{format:?}: decoded {} but could not re-encode it: {e}\nvalue: {value:?}",
            std::any::type_name::<T>()
        )
    });
    let again = format.decode::<T>(&encoded).unwrap_or_else(|e| {
        panic!(
            "{format:?}: re-encoded {} does not decode: {e}\nvalue: {value:?}\nencoded: {encoded:02x?}",
            std::any::type_name::<T>()
        )
    });
    assert_eq!(
        value,
        again,
        "{format:?}: {} changed on re-encode",
        std::any::type_name::<T>()
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, bytes)) = data.split_first() else {
        return;
    };
    let format = Format::ALL[selector as usize % Format::ALL.len()];
    round_trip::<Checkpoint>(format, bytes);
    round_trip::<CheckpointMetadata>(format, bytes);
    round_trip::<CheckpointTuple>(format, bytes);
    round_trip::<Vec<PendingWrite>>(format, bytes);
    round_trip::<SerializedValue>(format, bytes);
    round_trip::<serde_json::Value>(format, bytes);
});
