//! A [`Node`] to msgpack bytes, as `ormsgpack` writes them for LangGraph.

use rmp::encode;

use super::codec::{
    EXT_DELTA_SNAPSHOT, EXT_METHOD_SINGLE_ARG, EXT_NUMPY_ARRAY, EXT_POS_ARGS, EXT_SINGLE_ARG,
    MAX_DEPTH,
};
use super::{Node, PyObject};

/// Room kept before an extension's payload for its header (marker, 32-bit length, type).
const EXT_HEADER_ROOM: usize = 6;

type Write<T = ()> = Result<T, String>;

/// Writes `node`; nesting is bounded as the reader bounds it, so what is written reads back.
pub(super) fn write(node: &Node) -> Write<Vec<u8>> {
    let mut out = Vec::new();
    Writer { out: &mut out }.node(node, 0)?;
    Ok(out)
}

fn len32(len: usize, what: &str) -> Write<u32> {
    u32::try_from(len).map_err(|_| format!("{what} of {len} is too long for msgpack"))
}

fn io<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

impl Writer<'_> {
    /// The nesting inside a container at `depth`, as the reader counts it.
    fn enter(depth: usize) -> Write<usize> {
        if depth >= MAX_DEPTH {
            return Err(format!(
                "nested deeper than {MAX_DEPTH} arrays, maps and extensions, which no reader \
                 accepts"
            ));
        }
        Ok(depth + 1)
    }

    fn node(&mut self, node: &Node, depth: usize) -> Write {
        let out = &mut *self.out;
        match node {
            Node::Nil => encode::write_nil(out).map_err(io),
            Node::Bool(b) => encode::write_bool(out, *b).map_err(io),
            Node::Int(n) => encode::write_sint(out, *n).map(drop).map_err(io),
            Node::UInt(n) => encode::write_uint(out, *n).map(drop).map_err(io),
            Node::F32(f) => encode::write_f32(out, *f).map_err(io),
            Node::F64(f) => encode::write_f64(out, *f).map_err(io),
            Node::Str(s) => self.str(s),
            Node::Bin(b) => {
                encode::write_bin_len(out, len32(b.len(), "bytes")?).map_err(io)?;
                out.extend_from_slice(b);
                Ok(())
            }
            Node::Array(items) => {
                let inner = Self::enter(depth)?;
                encode::write_array_len(out, len32(items.len(), "an array")?).map_err(io)?;
                items.iter().try_for_each(|item| self.node(item, inner))
            }
            Node::Map(entries) => {
                let inner = Self::enter(depth)?;
                encode::write_map_len(out, len32(entries.len(), "a map")?).map_err(io)?;
                entries.iter().try_for_each(|(key, value)| {
                    self.node(key, inner)?;
                    self.node(value, inner)
                })
            }
            Node::Object(object) => {
                let inner = Self::enter(depth)?;
                self.ext(object.ext, |w| w.object(object, inner))
            }
            Node::DeltaSnapshot(value) => {
                let inner = Self::enter(depth)?;
                self.ext(EXT_DELTA_SNAPSHOT, |w| w.node(value, inner))
            }
        }
    }

    fn str(&mut self, s: &str) -> Write {
        encode::write_str_len(self.out, len32(s.len(), "a string")?).map_err(io)?;
        self.out.extend_from_slice(s.as_bytes());
        Ok(())
    }

    /// Writes an extension of type `code` whose payload `payload` writes: the payload goes
    /// after room for the longest header, which is then filled in and the payload moved up.
    fn ext(&mut self, code: u8, payload: impl FnOnce(&mut Self) -> Write) -> Write {
        let start = self.out.len();
        self.out.resize(start + EXT_HEADER_ROOM, 0);
        payload(self)?;
        let len = self.out.len() - start - EXT_HEADER_ROOM;
        let mut header = Vec::with_capacity(EXT_HEADER_ROOM);
        let code = i8::try_from(code).map_err(io)?;
        encode::write_ext_meta(&mut header, len32(len, "an extension payload")?, code)
            .map_err(io)?;
        let from = start + EXT_HEADER_ROOM;
        let to = start + header.len();
        self.out.copy_within(from.., to);
        self.out.truncate(to + len);
        self.out[start..to].copy_from_slice(&header);
        Ok(())
    }

    /// A Python object's payload, at nesting `depth` (the payload itself).
    fn object(&mut self, object: &PyObject, depth: usize) -> Write {
        // Every way to build a `PyObject` checks its shape, so it is written as it is.
        let inner = Self::enter(depth)?;
        if object.ext == EXT_NUMPY_ARRAY {
            encode::write_array_len(self.out, 4).map_err(io)?;
            return object.args.iter().try_for_each(|a| self.node(a, inner));
        }
        let arity = if object.method.is_some() { 4 } else { 3 };
        encode::write_array_len(self.out, arity).map_err(io)?;
        self.str(&object.module)?;
        self.str(&object.name)?;
        match object.ext {
            EXT_SINGLE_ARG | EXT_METHOD_SINGLE_ARG => {
                let [arg] = object.args.as_slice() else {
                    return Err(format!("{}: takes one argument", object.describe()));
                };
                self.node(arg, inner)?;
            }
            EXT_POS_ARGS => {
                let args = Self::enter(inner)?;
                encode::write_array_len(self.out, len32(object.args.len(), "arguments")?)
                    .map_err(io)?;
                object.args.iter().try_for_each(|a| self.node(a, args))?;
            }
            _ => {
                let kwargs = Self::enter(inner)?;
                encode::write_map_len(self.out, len32(object.kwargs.len(), "keywords")?)
                    .map_err(io)?;
                for (key, value) in &object.kwargs {
                    self.str(key)?;
                    self.node(value, kwargs)?;
                }
            }
        }
        if let Some(method) = &object.method {
            self.str(method)?;
        }
        Ok(())
    }
}
