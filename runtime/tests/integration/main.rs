//! The runtime's integration tests, in one binary: as fourteen binaries, each compiled and
//! linked against the whole dependency tree, they took ~92 s of compile time (the sum over
//! rustc processes) in a clean build; as one, ~38 s.

mod add_messages_format;
mod compile;
mod compile_goto;
#[cfg(all(feature = "sqlite", feature = "postgres", feature = "redis"))]
mod connect;
mod derive;
mod draw;
mod events;
mod interrupt_fields;
mod langchain_messages;
mod langgraph_writes;
mod panics;
mod prebuilt;
mod schemas;
mod summarize;
