//! msgpack bytes to a [`Node`]: strict, bounded by the input, never panicking.

use rmp::Marker;

use super::codec::{
    DELTA_SNAPSHOT_MODULE, EXT_DELTA_SNAPSHOT, EXT_KW_ARGS, EXT_METHOD_SINGLE_ARG, EXT_NUMPY_ARRAY,
    EXT_POS_ARGS, EXT_PYDANTIC_V1, EXT_PYDANTIC_V2, EXT_SINGLE_ARG, MAX_DEPTH,
};
use super::{Node, PyObject};
use crate::Error;
use crate::serde::TAG_MSGPACK;

/// Elements preallocated for a collection at most; the rest grows as elements are read, so a
/// claimed length costs memory only once the input backs it.
const PREALLOCATE: usize = 1024;

/// Reads the one value `bytes` hold; an error comes with whether an extension was met.
pub(super) fn read(bytes: &[u8]) -> Result<(Node, bool), (Error, bool)> {
    let mut reader = Reader {
        input: bytes,
        pos: 0,
        python: false,
    };
    let result = reader
        .value(0)
        .and_then(|node| match bytes.len() - reader.pos {
            0 => Ok(node),
            n => Err(Fail::new(format!("{n} bytes after the value"))),
        });
    match result {
        Ok(node) => Ok((node, reader.python)),
        Err(fail) => Err((fail.into_error(), reader.python)),
    }
}

/// One step of the path to a failure.
enum Segment {
    Index(usize),
    Key(String),
}

/// A read failure: what went wrong, and where (segments innermost first).
struct Fail {
    message: String,
    path: Vec<Segment>,
}

impl Fail {
    fn new(message: impl Into<String>) -> Fail {
        Fail {
            message: message.into(),
            path: Vec::new(),
        }
    }

    /// The same failure one level further out, under `segment`.
    fn at(mut self, segment: Segment) -> Fail {
        self.path.push(segment);
        self
    }

    fn into_error(self) -> Error {
        let mut path = String::new();
        for segment in self.path.iter().rev() {
            match segment {
                Segment::Index(i) => path.push_str(&format!("[{i}]")),
                Segment::Key(key) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(key);
                }
            }
        }
        Error::Serialization {
            tag: TAG_MSGPACK.to_owned(),
            path: (!path.is_empty()).then_some(path),
            message: self.message,
        }
    }
}

type Read<T> = Result<T, Fail>;

/// The text naming a map key on a path.
fn key_text(key: &Node) -> String {
    match key {
        Node::Str(s) => s.clone(),
        Node::UInt(n) => n.to_string(),
        Node::Int(n) => n.to_string(),
        _ => "?".to_owned(),
    }
}

struct Reader<'a> {
    input: &'a [u8],
    pos: usize,
    /// Whether an extension value was met.
    python: bool,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.input.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Read<&'a [u8]> {
        let Some(bytes) = self.input.get(self.pos..).and_then(|rest| rest.get(..n)) else {
            return Err(Fail::new(format!(
                "unexpected end of input: {n} bytes needed, {} left",
                self.remaining()
            )));
        };
        self.pos += n;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self) -> Read<[u8; N]> {
        let bytes = self.take(N)?;
        let mut out = [0; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    fn u8(&mut self) -> Read<u8> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Read<usize> {
        Ok(usize::from(u16::from_be_bytes(self.array()?)))
    }

    fn u32(&mut self) -> Read<usize> {
        let n = u32::from_be_bytes(self.array()?);
        usize::try_from(n).map_err(|_| Fail::new("length beyond this platform"))
    }

    /// A collection's length, refused when the input left cannot hold `per_item` bytes for
    /// each of its items.
    fn count(&self, len: usize, per_item: usize, what: &str) -> Read<usize> {
        match len.checked_mul(per_item) {
            Some(need) if need <= self.remaining() => Ok(len),
            _ => Err(Fail::new(format!(
                "{what} of {len} items claimed, only {} bytes left",
                self.remaining()
            ))),
        }
    }

    fn enter(depth: usize) -> Read<usize> {
        if depth >= MAX_DEPTH {
            return Err(Fail::new(format!(
                "nested deeper than {MAX_DEPTH} arrays, maps and extensions"
            )));
        }
        Ok(depth + 1)
    }

    /// Reads one value at nesting `depth`.
    fn value(&mut self, depth: usize) -> Read<Node> {
        let marker = Marker::from_u8(self.u8()?);
        Ok(match marker {
            Marker::Null => Node::Nil,
            Marker::True => Node::Bool(true),
            Marker::False => Node::Bool(false),
            Marker::FixPos(n) => Node::UInt(u64::from(n)),
            Marker::FixNeg(n) => Node::Int(i64::from(n)),
            Marker::U8 => Node::UInt(u64::from(self.u8()?)),
            Marker::U16 => Node::UInt(u64::from(u16::from_be_bytes(self.array()?))),
            Marker::U32 => Node::UInt(u64::from(u32::from_be_bytes(self.array()?))),
            Marker::U64 => Node::UInt(u64::from_be_bytes(self.array()?)),
            Marker::I8 => int(i64::from(i8::from_be_bytes(self.array()?))),
            Marker::I16 => int(i64::from(i16::from_be_bytes(self.array()?))),
            Marker::I32 => int(i64::from(i32::from_be_bytes(self.array()?))),
            Marker::I64 => int(i64::from_be_bytes(self.array()?)),
            Marker::F32 => Node::F32(f32::from_be_bytes(self.array()?)),
            Marker::F64 => Node::F64(f64::from_be_bytes(self.array()?)),
            Marker::FixStr(n) => self.str(usize::from(n))?,
            Marker::Str8 => {
                let n = usize::from(self.u8()?);
                self.str(n)?
            }
            Marker::Str16 => {
                let n = self.u16()?;
                self.str(n)?
            }
            Marker::Str32 => {
                let n = self.u32()?;
                self.str(n)?
            }
            Marker::Bin8 => {
                let n = usize::from(self.u8()?);
                Node::Bin(self.take(n)?.to_vec())
            }
            Marker::Bin16 => {
                let n = self.u16()?;
                Node::Bin(self.take(n)?.to_vec())
            }
            Marker::Bin32 => {
                let n = self.u32()?;
                Node::Bin(self.take(n)?.to_vec())
            }
            Marker::FixArray(n) => self.items(usize::from(n), depth)?,
            Marker::Array16 => {
                let n = self.u16()?;
                self.items(n, depth)?
            }
            Marker::Array32 => {
                let n = self.u32()?;
                self.items(n, depth)?
            }
            Marker::FixMap(n) => self.entries(usize::from(n), depth)?,
            Marker::Map16 => {
                let n = self.u16()?;
                self.entries(n, depth)?
            }
            Marker::Map32 => {
                let n = self.u32()?;
                self.entries(n, depth)?
            }
            Marker::FixExt1 => self.ext(1, depth)?,
            Marker::FixExt2 => self.ext(2, depth)?,
            Marker::FixExt4 => self.ext(4, depth)?,
            Marker::FixExt8 => self.ext(8, depth)?,
            Marker::FixExt16 => self.ext(16, depth)?,
            Marker::Ext8 => {
                let n = usize::from(self.u8()?);
                self.ext(n, depth)?
            }
            Marker::Ext16 => {
                let n = self.u16()?;
                self.ext(n, depth)?
            }
            Marker::Ext32 => {
                let n = self.u32()?;
                self.ext(n, depth)?
            }
            Marker::Reserved => return Err(Fail::new("reserved marker 0xc1")),
        })
    }

    fn str(&mut self, n: usize) -> Read<Node> {
        let bytes = self.take(n)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(Node::Str(s.to_owned())),
            Err(e) => Err(Fail::new(format!("a string is not UTF-8: {e}"))),
        }
    }

    fn items(&mut self, n: usize, depth: usize) -> Read<Node> {
        let inner = Self::enter(depth)?;
        let n = self.count(n, 1, "an array")?;
        let mut items = Vec::with_capacity(n.min(PREALLOCATE));
        for i in 0..n {
            items.push(self.value(inner).map_err(|f| f.at(Segment::Index(i)))?);
        }
        Ok(Node::Array(items))
    }

    fn entries(&mut self, n: usize, depth: usize) -> Read<Node> {
        let inner = Self::enter(depth)?;
        let n = self.count(n, 2, "a map")?;
        let mut entries = Vec::with_capacity(n.min(PREALLOCATE));
        for _ in 0..n {
            let key = self.value(inner)?;
            let value = self
                .value(inner)
                .map_err(|f| f.at(Segment::Key(key_text(&key))))?;
            entries.push((key, value));
        }
        Ok(Node::Map(entries))
    }

    /// An extension value: its type byte, then `len` bytes of payload.
    fn ext(&mut self, len: usize, depth: usize) -> Read<Node> {
        self.python = true;
        let inner = Self::enter(depth)?;
        let code = self.u8()? as i8;
        let payload = self.take(len)?;
        let mut sub = Reader {
            input: payload,
            pos: 0,
            python: true,
        };
        let node = match u8::try_from(code) {
            Ok(EXT_DELTA_SNAPSHOT) => {
                let value = sub.value(inner).map_err(|f| {
                    f.context(&format!(
                        "in a `{DELTA_SNAPSHOT_MODULE}._DeltaSnapshot` (msgpack extension type 7)"
                    ))
                })?;
                Node::DeltaSnapshot(Box::new(value))
            }
            Ok(code @ EXT_SINGLE_ARG..=EXT_NUMPY_ARRAY) => sub.object(code, inner)?,
            _ => return Err(Fail::new(format!("unknown msgpack extension type {code}"))),
        };
        if sub.remaining() > 0 {
            return Err(Fail::new(format!(
                "msgpack extension type {code}: {} bytes after its payload",
                sub.remaining()
            )));
        }
        Ok(node)
    }

    /// A Python object's payload, at nesting `depth` (the payload itself).
    fn object(&mut self, code: u8, depth: usize) -> Read<Node> {
        let of_code = |what: &str| Fail::new(format!("msgpack extension type {code}: {what}"));
        let len = match Marker::from_u8(self.u8().map_err(|_| of_code("empty payload"))?) {
            Marker::FixArray(n) => usize::from(n),
            Marker::Array16 => self.u16()?,
            Marker::Array32 => self.u32()?,
            _ => return Err(of_code("the payload is not an array")),
        };
        let inner = Self::enter(depth)?;
        if code == EXT_NUMPY_ARRAY {
            if len != 4 {
                return Err(of_code(&format!(
                    "expected [dtype, shape, order, buffer], got {len} items"
                )));
            }
            let args = (0..4)
                .map(|i| self.value(inner).map_err(|f| f.at(Segment::Index(i))))
                .collect::<Read<Vec<_>>>()?;
            let mut object = PyObject {
                ext: code,
                module: "numpy".into(),
                name: "ndarray".into(),
                method: None,
                args,
                kwargs: Vec::new(),
            };
            object.check().map_err(Fail::new)?;
            return Ok(Node::Object(Box::new(object)));
        }
        if len < 2 {
            return Err(of_code(&format!(
                "expected [module, name, ...], got {len} items"
            )));
        }
        let Node::Str(module) = self.value(inner)? else {
            return Err(of_code("the module is not a string"));
        };
        let Node::Str(name) = self.value(inner)? else {
            return Err(of_code("the class name is not a string"));
        };
        let mut object = PyObject {
            ext: code,
            module,
            name,
            method: None,
            args: Vec::new(),
            kwargs: Vec::new(),
        };
        let describe = object.describe();
        let fail = |what: &str| Fail::new(format!("{describe}: {what}"));
        let arity = match code {
            EXT_METHOD_SINGLE_ARG | EXT_PYDANTIC_V2 => 4,
            _ => 3,
        };
        if len != arity {
            return Err(fail(&format!(
                "expected {arity} items in its payload, got {len}"
            )));
        }
        let arg = self
            .value(inner)
            .map_err(|f| f.context(&format!("in {describe}")))?;
        match (code, arg) {
            (EXT_SINGLE_ARG | EXT_METHOD_SINGLE_ARG, arg) => object.args = vec![arg],
            (EXT_POS_ARGS, Node::Array(args)) => object.args = args,
            (EXT_KW_ARGS | EXT_PYDANTIC_V1 | EXT_PYDANTIC_V2, Node::Map(entries)) => {
                let mut kwargs = Vec::with_capacity(entries.len());
                for (key, value) in entries {
                    let Node::Str(key) = key else {
                        return Err(fail("a keyword argument's name is not a string"));
                    };
                    kwargs.push((key, value));
                }
                object.kwargs = kwargs;
            }
            (EXT_POS_ARGS, _) => return Err(fail("the arguments are not an array")),
            _ => return Err(fail("the keyword arguments are not a map")),
        }
        if arity == 4 {
            match self.value(inner)? {
                Node::Str(method) => object.method = Some(method),
                _ => return Err(fail("the method is not a string")),
            }
        }
        object.check().map_err(Fail::new)?;
        Ok(Node::Object(Box::new(object)))
    }
}

impl Fail {
    /// The same failure, its message prefixed with `context` unless it already names an
    /// extension type (the innermost context is the useful one).
    fn context(mut self, context: &str) -> Fail {
        if !self.message.contains("msgpack extension type") {
            self.message = format!("{context}: {}", self.message);
        }
        self
    }
}

/// A signed integer, non-negative ones as [`Node::UInt`].
fn int(n: i64) -> Node {
    match u64::try_from(n) {
        Ok(n) => Node::UInt(n),
        Err(_) => Node::Int(n),
    }
}

impl Node {
    /// A signed integer as the reader stores it (non-negative ones as [`Node::UInt`]).
    pub(crate) fn int(n: i64) -> Node {
        int(n)
    }
}
