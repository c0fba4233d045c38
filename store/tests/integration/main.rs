//! The store's integration tests, in one binary. The store is optimised in test builds (its
//! MiniLM and HNSW loops), and so is each test binary of this package: as six binaries they
//! took ~115 s of compile time (the sum over rustc processes) in a clean build, mostly
//! optimising the same generic store code six times; as one, ~52 s.

mod embed;
#[cfg(feature = "minilm")]
mod hybrid_minilm;
mod index;
mod memory;
#[cfg(feature = "minilm")]
mod minilm;
mod recall;
