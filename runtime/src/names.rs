//! The reserved names of a graph: the virtual nodes every graph has, and the separator of
//! checkpoint namespace levels. A leaf: the builder, the run loop, streams and drawings all
//! name these without importing each other.

/// The virtual node a graph starts from.
pub const START: &str = "__start__";
/// The virtual node that ends a branch.
pub const END: &str = "__end__";
/// LangGraph's separator of namespace levels.
pub(crate) const NS_SEP: &str = "|";
