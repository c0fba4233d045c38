//! The sealed-value paths of `Serde` (`open`, `open_channel`, `seal_empty`, `reseal`,
//! `loads_sealed` and the decoders after a successful open): genuine seals built from the
//! input with fixed keys, then mutated. The harness, its input layout and the invariants it
//! checks are in `src/sealed.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| waypoint_fuzz::sealed::run(data));
