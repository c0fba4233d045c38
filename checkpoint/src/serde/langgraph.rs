//! LangGraph's msgpack encoding: Python objects (msgpack extension types 0-7) read and written.
//!
//! A Python object Waypoint has no type for becomes a JSON value that keeps its class, in the
//! form LangGraph's JSON serializer uses (`lc: 2`), plus the extension code it came from so
//! that writing it back unchanged gives Python an equal object of the same class:
//!
//! ```json
//! {"lc": 2, "type": "constructor", "id": ["decimal", "Decimal"], "ext": 0,
//!  "method": null, "args": ["1.5"], "kwargs": {}}
//! ```
//!
//! `id` is the module path split on `.` followed by the class name; `ext` is the extension
//! code (0: one constructor argument in `args`, 1: positional `args`, 2: keyword `kwargs`,
//! 3: one argument in `args` and a `method`, 4: pydantic v1 `kwargs`, 5: pydantic v2 `kwargs`
//! with `method` `model_validate_json`, 6: a NumPy array).

use std::cell::Cell;

thread_local! {
    static WRITING: Cell<bool> = const { Cell::new(false) };
}

/// Whether the value being serialized right now is written in LangGraph's encoding, so a
/// type with a Python counterpart (a message, an interrupt, a `Send`) writes itself in the
/// `lc: 2` form above instead of its own.
pub fn writing_langgraph() -> bool {
    WRITING.with(Cell::get)
}

/// Runs `f` with [`writing_langgraph`] true on this thread.
#[allow(dead_code)] // Used by the encoder.
pub(crate) fn while_writing_langgraph<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            WRITING.with(|w| w.set(self.0));
        }
    }
    let _reset = Reset(WRITING.with(|w| w.replace(true)));
    f()
}
