//! LangGraph's msgpack codec (`Format::LangGraph` and its value tree): raw or extension-
//! wrapped input must read or fail cleanly, and what reads must write back and read again the
//! same. The harness, its input layout and the invariants it checks are in `src/langgraph.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| waypoint_fuzz::langgraph::run(data));
