//! The checkpoint crate's integration tests, in one binary (each test binary is compiled and
//! linked against the whole dependency tree once).

mod conformance_memory;
mod langgraph_interop;
mod memory_delta_history;
mod serde_bad_input;
mod serde_roundtrip;
