//! The fuzz targets' harnesses, as plain functions: libFuzzer calls them from
//! `fuzz_targets/`, and this crate's tests run them over generated inputs on stable Rust.

pub mod langgraph;
pub mod sealed;
