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
//!
//! # What is read
//!
//! Any msgpack value Python's `JsonPlusSerializer` writes under the tag `msgpack`
//! (`ormsgpack` with `OPT_NON_STR_KEYS`) is read: nil, booleans, integers (to 64 bits),
//! floats (32 and 64 bits), strings, bytes, arrays, maps with keys of any type (Python's
//! tuple keys are arrays), Python objects (extension codes 0-6) and LangGraph's
//! `_DeltaSnapshot` (code 7). [`Node::from_msgpack`] reads it into a tree ([`PyObject`],
//! [`Node::DeltaSnapshot`]). [`super::Format::LangGraph`] decodes a `T` straight from the
//! bytes, with a human-readable serde `Deserializer` that hands out strings and bytes as
//! slices of the input (so an owned `T` copies each string once, and no tree is built);
//! [`Node::decode`] does the same from the bytes the tree writes. What each request sees:
//!
//! - a request for any value (`serde_json::Value`, untagged enums) sees a Python object as the
//!   `lc: 2` map above, and a `_DeltaSnapshot` as the value it wraps. Three msgpack values
//!   JSON cannot hold take the same form with `ext: null`: bytes are
//!   `{"lc": 2, "type": "constructor", "id": ["builtins", "bytes"], "ext": null, "method":
//!   "fromhex", "args": ["<hex>"], "kwargs": {}}`, a NaN or infinite float is
//!   `{..., "id": ["builtins", "float"], "ext": null, "method": null, "args": ["nan"],
//!   "kwargs": {}}` (or `"inf"`, `"-inf"`, as Python's `float()` reads them), and a map with
//!   a key that is not a string (or shaped like this form, see below) is
//!   `{..., "id": ["builtins", "dict"], "ext": null, "method": null, "args": [[[key, value],
//!   ...]], "kwargs": {}}`;
//! - typed requests see through objects: a struct or map reads the `kwargs` of codes 2, 4
//!   and 5 (a struct with a field `lc` reads the `lc: 2` map instead); a sequence or tuple
//!   reads the `args` of code 1 or the values of a code-2 object (a namedtuple); everything
//!   requested of a one-argument object (codes 0 and 3: a UUID's hex, a `Decimal`'s text, an
//!   enum's value, the items of a `set`, `frozenset` or `deque`, a datetime's ISO text) reads
//!   that argument, and a string requested of a `datetime.date` is its ISO date; bytes read
//!   as bytes, a sequence of `u8` or (if UTF-8) a string; `None` is nil; newtype structs are
//!   transparent, enums are externally tagged (a string or a one-entry map).
//!
//! # What is written
//!
//! [`super::Format::LangGraph`] serializes a value into the tree with a human-readable
//! `Serializer` while [`writing_langgraph`] is true (so Waypoint's types with a Python
//! counterpart write themselves in the `lc: 2` form), turns every `lc: 2` constructor map
//! carrying `ext` back into what it was read from (the exact inverse of the reading above;
//! `ext: 7` with the id `langgraph.checkpoint.serde.types._DeltaSnapshot` and one argument
//! writes a `_DeltaSnapshot`), and writes msgpack as `ormsgpack` does: the shortest integer
//! form, float64 for `f64` (float32 only for `f32`), str8/16/32, bin8/16/32, fixext when the
//! payload length allows, ext8/16/32 otherwise. A [`Node`] read from Python and written back
//! gives the same bytes.
//!
//! # What is refused
//!
//! With `Error::Serialization`, never a panic: truncated input and bytes after the value,
//! reserved markers, strings that are not UTF-8, lengths beyond the input, nesting deeper
//! than 128 levels (arrays, maps, extensions, and an extension's payload array), unknown
//! extension codes (named), and malformed payloads, named by class (`module.Name`) or code:
//! not an array, the wrong number of items, a module or name that is not a string, `args`
//! or `kwargs` of the wrong shape, and a method other than `datetime.datetime.fromisoformat`
//! (code 3) or `model_validate_json` (code 5). No Python type is ever constructed: objects
//! stay data. On writing, an `lc: 2` constructor map with an `ext` key that does not
//! describe a valid object is an error, as is a value nested deeper than the reader accepts.
//!
//! What a `serde_json::Value` cannot keep: a `_DeltaSnapshot` reads as the value it wraps (and
//! a float32 as the float64 Python reads it as); the [`Node`] keeps both, so a saver that
//! carries values it does not interpret should carry the tree (or the bytes).
//!
//! A plain Python dict that has the shape of an `lc: 2` constructor map with `ext` (keys `lc`
//! equal to 2, `type` equal to `"constructor"`, and `ext`) is shown, to a request for any
//! value or for a map, in the `builtins.dict` form, so that it is written back as the dict it
//! was rather than as an object (a struct still reads its fields). A value of that shape that
//! was not read this way is written as the object it describes.

use std::cell::Cell;

#[cfg(feature = "msgpack")]
mod de;
#[cfg(feature = "msgpack")]
mod read;
#[cfg(feature = "msgpack")]
mod ser;
#[cfg(all(test, feature = "msgpack"))]
mod tests;
#[cfg(feature = "msgpack")]
mod write;

#[cfg(feature = "msgpack")]
pub use self::codec::{Node, PyObject};
#[cfg(feature = "msgpack")]
pub(crate) use self::codec::{decode, encode};
#[cfg(feature = "msgpack")]
pub(crate) use self::read::has_non_finite_float;

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
#[cfg_attr(not(feature = "msgpack"), allow(dead_code))] // Used by the encoder.
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

#[cfg(feature = "msgpack")]
mod codec {
    use serde::de::DeserializeOwned;
    use serde::{Serialize, Serializer};

    use super::{de, read, ser, while_writing_langgraph, write};
    use crate::serde::TAG_MSGPACK;
    use crate::{Error, Result};

    /// Extension code of a Python object built from one argument (`cls(arg)`).
    pub(crate) const EXT_SINGLE_ARG: u8 = 0;
    /// Extension code of a Python object built from positional arguments (`cls(*args)`).
    pub(crate) const EXT_POS_ARGS: u8 = 1;
    /// Extension code of a Python object built from keyword arguments (`cls(**kwargs)`).
    pub(crate) const EXT_KW_ARGS: u8 = 2;
    /// Extension code of a Python object built by a class method from one argument.
    pub(crate) const EXT_METHOD_SINGLE_ARG: u8 = 3;
    /// Extension code of a pydantic v1 model (`cls(**kwargs)`).
    pub(crate) const EXT_PYDANTIC_V1: u8 = 4;
    /// Extension code of a pydantic v2 model (`cls(**kwargs)`).
    pub(crate) const EXT_PYDANTIC_V2: u8 = 5;
    /// Extension code of a NumPy array.
    pub(crate) const EXT_NUMPY_ARRAY: u8 = 6;
    /// Extension code of LangGraph's `_DeltaSnapshot`.
    pub(crate) const EXT_DELTA_SNAPSHOT: u8 = 7;

    /// Module of LangGraph's `_DeltaSnapshot`.
    pub(crate) const DELTA_SNAPSHOT_MODULE: &str = "langgraph.checkpoint.serde.types";
    /// Class name of LangGraph's `_DeltaSnapshot`.
    pub(crate) const DELTA_SNAPSHOT_NAME: &str = "_DeltaSnapshot";
    /// The only method a code-3 object may name (LangGraph's `SAFE_MSGPACK_METHODS`).
    const DATETIME_METHOD: (&str, &str, &str) = ("datetime", "datetime", "fromisoformat");
    /// The method LangGraph writes into every code-5 (pydantic v2) payload.
    const PYDANTIC_V2_METHOD: &str = "model_validate_json";

    /// Deepest nesting of containers (arrays, maps, extensions) read or written, as in
    /// [`crate::Format::MsgPack`].
    pub(crate) use crate::serde::format::MAX_DEPTH;

    /// A msgpack value as LangGraph's serializer writes it: what [`crate::Format::LangGraph`]
    /// reads bytes into and writes bytes from.
    #[derive(Clone, Debug, PartialEq)]
    pub enum Node {
        /// `nil` (Python `None`).
        Nil,
        /// A boolean.
        Bool(bool),
        /// A negative integer (non-negative ones are read as [`Node::UInt`]).
        Int(i64),
        /// A non-negative integer.
        UInt(u64),
        /// A 32-bit float (Python never writes one, but reads it).
        F32(f32),
        /// A 64-bit float (Python's `float`).
        F64(f64),
        /// A UTF-8 string.
        Str(String),
        /// Bytes (Python's `bytes`).
        Bin(Vec<u8>),
        /// An array (Python's `list` and `tuple`).
        Array(Vec<Node>),
        /// A map in stored order; keys may be of any type (Python's tuple keys are arrays).
        Map(Vec<(Node, Node)>),
        /// A Python object (extension codes 0-6).
        Object(Box<PyObject>),
        /// LangGraph's `_DeltaSnapshot` (extension code 7) around the value it holds.
        DeltaSnapshot(Box<Node>),
    }

    impl Node {
        /// Reads the one msgpack value `bytes` hold.
        pub fn from_msgpack(bytes: &[u8]) -> Result<Node> {
            read::read(bytes).map(|(node, _)| node).map_err(|(e, _)| e)
        }

        /// Writes this value as msgpack, as Python's serializer would.
        pub fn to_msgpack(&self) -> Result<Vec<u8>> {
            write::write(self).map_err(|e| Error::serialization(TAG_MSGPACK, e))
        }

        /// The tree `value` serializes to in LangGraph's encoding (see the module docs).
        pub fn from_value<T: Serialize + ?Sized>(value: &T) -> Result<Node> {
            while_writing_langgraph(|| value.serialize(ser::NodeSerializer))
                .map_err(|e| Error::serialization(TAG_MSGPACK, e))
        }

        /// Decodes a `T` from this tree as from the bytes it writes ([`Node::to_msgpack`]);
        /// an error names the field that failed.
        pub fn decode<T: DeserializeOwned>(&self) -> Result<T> {
            decode(&self.to_msgpack()?).map_err(|refusal| refusal.error)
        }

        /// Whether a Python object or `_DeltaSnapshot` appears anywhere in this value.
        pub fn has_python_objects(&self) -> bool {
            match self {
                Node::Object(_) | Node::DeltaSnapshot(_) => true,
                Node::Array(items) => items.iter().any(Node::has_python_objects),
                Node::Map(entries) => entries
                    .iter()
                    .any(|(k, v)| k.has_python_objects() || v.has_python_objects()),
                _ => false,
            }
        }
    }

    /// A Python object as LangGraph's serializer stores it: its extension code, class and
    /// constructor arguments. It is only ever data; no Python type is constructed.
    #[derive(Clone, Debug, PartialEq)]
    pub struct PyObject {
        pub(in crate::serde::langgraph) ext: u8,
        pub(in crate::serde::langgraph) module: String,
        pub(in crate::serde::langgraph) name: String,
        pub(in crate::serde::langgraph) method: Option<String>,
        pub(in crate::serde::langgraph) args: Vec<Node>,
        pub(in crate::serde::langgraph) kwargs: Vec<(String, Node)>,
    }

    impl PyObject {
        /// An object of class `module.name` stored with extension code `ext` (0-6), checked
        /// as the reader checks it: codes 0 and 3 take one argument, code 1 positional
        /// arguments, codes 2, 4 and 5 keyword arguments only; code 3 names the method
        /// `fromisoformat` of `datetime.datetime`, code 5 `model_validate_json` (the default
        /// when `method` is `None`), the others none; code 6 is a `numpy.ndarray` with
        /// `[dtype, shape, order, buffer]` as arguments.
        pub fn new(
            ext: u8,
            module: impl Into<String>,
            name: impl Into<String>,
            method: Option<String>,
            args: Vec<Node>,
            kwargs: Vec<(String, Node)>,
        ) -> Result<PyObject> {
            let mut object = PyObject {
                ext,
                module: module.into(),
                name: name.into(),
                method,
                args,
                kwargs,
            };
            object
                .check()
                .map_err(|e| Error::serialization(TAG_MSGPACK, e))?;
            Ok(object)
        }

        /// Fills in the default method and checks the shape; the message names the class.
        pub(crate) fn check(&mut self) -> std::result::Result<(), String> {
            let class = (self.module.as_str(), self.name.as_str());
            match self.ext {
                EXT_METHOD_SINGLE_ARG if class == (DATETIME_METHOD.0, DATETIME_METHOD.1) => {
                    self.method.get_or_insert_with(|| DATETIME_METHOD.2.into());
                }
                EXT_PYDANTIC_V2 => {
                    self.method.get_or_insert_with(|| PYDANTIC_V2_METHOD.into());
                }
                _ => {}
            }
            self.shape()
                .map_err(|what| format!("{}: {what}", self.describe()))
        }

        /// What is wrong with the object's arguments or method, if anything.
        fn shape(&self) -> std::result::Result<(), String> {
            let single = matches!(self.ext, EXT_SINGLE_ARG | EXT_METHOD_SINGLE_ARG);
            let keywords = self.has_kwargs();
            if self.ext > EXT_NUMPY_ARRAY {
                return Err("not a Python object extension code (0-6)".into());
            }
            if single && self.args.len() != 1 {
                return Err(format!("takes one argument, not {}", self.args.len()));
            }
            if keywords && !self.args.is_empty() {
                return Err("takes keyword arguments only".into());
            }
            if !keywords && !self.kwargs.is_empty() {
                return Err("takes no keyword arguments".into());
            }
            let class = (self.module.as_str(), self.name.as_str());
            let arg_is_str = || matches!(self.args.first(), Some(Node::Str(_)));
            if let Some(problem) =
                method_problem(self.ext, class, self.method.as_deref(), arg_is_str)
            {
                return Err(problem);
            }
            if self.ext == EXT_NUMPY_ARRAY {
                if class != ("numpy", "ndarray") {
                    return Err("code 6 is only for numpy.ndarray".into());
                }
                if let Some(problem) = numpy_problem(&self.args) {
                    return Err(problem);
                }
            }
            Ok(())
        }

        /// `` `module.Name` (msgpack extension type N) ``, for messages.
        pub(crate) fn describe(&self) -> String {
            describe(&self.module, &self.name, self.ext)
        }

        /// The extension code (0-6).
        pub fn ext(&self) -> u8 {
            self.ext
        }

        /// The module the class is in, such as `langchain_core.messages.human`.
        pub fn module(&self) -> &str {
            &self.module
        }

        /// The class name, such as `HumanMessage`.
        pub fn name(&self) -> &str {
            &self.name
        }

        /// `module.Name`.
        pub fn class(&self) -> String {
            format!("{}.{}", self.module, self.name)
        }

        /// The class method that builds the object (codes 3 and 5), if any.
        pub fn method(&self) -> Option<&str> {
            self.method.as_deref()
        }

        /// The positional arguments (one for codes 0 and 3; four for code 6).
        pub fn args(&self) -> &[Node] {
            &self.args
        }

        /// The keyword arguments (codes 2, 4 and 5), in stored order.
        pub fn kwargs(&self) -> &[(String, Node)] {
            &self.kwargs
        }

        /// Whether the object is built from keyword arguments (codes 2, 4, 5).
        pub(crate) fn has_kwargs(&self) -> bool {
            matches!(self.ext, EXT_KW_ARGS | EXT_PYDANTIC_V1 | EXT_PYDANTIC_V2)
        }
    }

    /// How Python's `float()` spells a float JSON cannot hold (`nan`, `inf`, `-inf`), the
    /// argument of its `builtins.float` form; `None` for a finite float.
    pub(crate) fn non_finite_text(f: f64) -> Option<&'static str> {
        match f {
            f if f.is_nan() => Some("nan"),
            f64::INFINITY => Some("inf"),
            f64::NEG_INFINITY => Some("-inf"),
            _ => None,
        }
    }

    /// `` `module.Name` (msgpack extension type N) ``, for messages.
    pub(crate) fn describe(module: &str, name: &str, ext: u8) -> String {
        format!("`{module}.{name}` (msgpack extension type {ext})")
    }

    /// What is wrong with the method of an object of code `ext` and class `class`, if
    /// anything: code 3 names `datetime.datetime.fromisoformat` and its one argument is a
    /// string (`arg_is_str`), code 5 names `model_validate_json`, the others none.
    pub(crate) fn method_problem(
        ext: u8,
        class: (&str, &str),
        method: Option<&str>,
        arg_is_str: impl FnOnce() -> bool,
    ) -> Option<String> {
        match (ext, method) {
            (EXT_METHOD_SINGLE_ARG, Some(method))
                if (class.0, class.1, method) == DATETIME_METHOD =>
            {
                (!arg_is_str()).then(|| "the ISO datetime is not a string".into())
            }
            (EXT_PYDANTIC_V2, Some(PYDANTIC_V2_METHOD)) | (_, None)
                if ext != EXT_METHOD_SINGLE_ARG =>
            {
                None
            }
            (_, Some(method)) => Some(format!("method `{method}` is not allowed")),
            (_, None) => Some("needs a method".into()),
        }
    }

    /// What is wrong with the arguments of a `numpy.ndarray`, if anything.
    pub(crate) fn numpy_problem(args: &[Node]) -> Option<String> {
        let shape_ok = |shape: &[Node]| shape.iter().all(|d| matches!(d, Node::UInt(_)));
        match args {
            [
                Node::Str(_),
                Node::Array(shape),
                Node::Str(order),
                Node::Bin(_),
            ] if shape_ok(shape) && matches!(order.as_str(), "C" | "F") => None,
            _ => Some("expected [dtype, shape, order (C or F), buffer bytes]".into()),
        }
    }

    impl Serialize for Node {
        /// Writes the value so that LangGraph's encoder gives it back unchanged: objects and
        /// snapshots as `lc: 2` maps; bytes and maps with keys that are not strings natively
        /// while [`super::writing_langgraph`], as their `ext: null` forms otherwise (the
        /// same JSON the reader shows for them); a map shaped like an `lc: 2` map with `ext`
        /// in its `builtins.dict` form always.
        fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
            ser::serialize_node(self, s)
        }
    }

    /// Why a decode of LangGraph msgpack failed, and whether the bytes held Python objects
    /// (which makes this the error worth reporting).
    pub(crate) struct Refusal {
        /// The error, with its path.
        pub(crate) error: Error,
        /// Whether an extension value was met.
        pub(crate) python: bool,
    }

    /// Decodes a `T` from LangGraph msgpack `bytes` with the deserializer over the bytes,
    /// which checks the reader's rules as it reads. Only a failure is looked at again, to
    /// explain it: the reader's error if the bytes break its rules (whatever `T` reads), the
    /// deserializer's, with the path of the field that failed, otherwise.
    pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> std::result::Result<T, Refusal> {
        de::from_slice(bytes).or_else(|_| {
            let python = read::check(bytes).map_err(|(error, python)| Refusal { error, python })?;
            de::from_slice_tracking(bytes).map_err(|(path, message)| Refusal {
                error: Error::Serialization {
                    tag: TAG_MSGPACK.to_owned(),
                    path,
                    message,
                },
                python,
            })
        })
    }

    /// Encodes `value` in LangGraph's encoding.
    pub(crate) fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>> {
        Node::from_value(value)?.to_msgpack()
    }
}
