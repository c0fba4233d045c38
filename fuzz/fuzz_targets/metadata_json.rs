//! `CheckpointMetadata::from_json` / `to_json` on arbitrary JSON objects.
//!
//! Input: bytes parsed as JSON; non-objects are skipped. `from_json` must not panic, and on
//! success `to_json` followed by `from_json` must give back an equal value.

#![no_main]

use libfuzzer_sys::fuzz_target;
use waypoint_checkpoint::CheckpointMetadata;

fuzz_target!(|data: &[u8]| {
    let Ok(serde_json::Value::Object(map)) = serde_json::from_slice(data) else {
        return;
    };
    let Ok(meta) = CheckpointMetadata::from_json(map) else {
        return;
    };
    let json = meta.to_json();
    let again = CheckpointMetadata::from_json(json.clone())
        .unwrap_or_else(|e| panic!("to_json output rejected: {e}\njson: {json:?}"));
    assert_eq!(meta, again, "metadata changed through to_json/from_json");
});
