//! A human-readable serde `Serializer` into a [`Node`], turning `lc: 2` constructor maps that
//! carry `ext` back into what the reader shows that way; and [`Node`]'s own `Serialize`.

use serde::ser::{self, Serialize, SerializeMap as _, SerializeSeq as _, Serializer};

use super::codec::{
    DELTA_SNAPSHOT_MODULE, DELTA_SNAPSHOT_NAME, EXT_DELTA_SNAPSHOT, non_finite_text,
};
use super::de::CodecError;
use super::{Node, PyObject, writing_langgraph};

type Result<T> = std::result::Result<T, CodecError>;

fn error(message: impl std::fmt::Display) -> CodecError {
    ser::Error::custom(message)
}

/// Serializes a value into a [`Node`].
pub(super) struct NodeSerializer;

impl Serializer for NodeSerializer {
    type Ok = Node;
    type Error = CodecError;
    type SerializeSeq = SeqNode;
    type SerializeTuple = SeqNode;
    type SerializeTupleStruct = SeqNode;
    type SerializeTupleVariant = VariantSeqNode;
    type SerializeMap = MapNode;
    type SerializeStruct = MapNode;
    type SerializeStructVariant = VariantMapNode;

    fn serialize_bool(self, v: bool) -> Result<Node> {
        Ok(Node::Bool(v))
    }

    fn serialize_i8(self, v: i8) -> Result<Node> {
        Ok(Node::int(v.into()))
    }

    fn serialize_i16(self, v: i16) -> Result<Node> {
        Ok(Node::int(v.into()))
    }

    fn serialize_i32(self, v: i32) -> Result<Node> {
        Ok(Node::int(v.into()))
    }

    fn serialize_i64(self, v: i64) -> Result<Node> {
        Ok(Node::int(v))
    }

    fn serialize_i128(self, v: i128) -> Result<Node> {
        if let Ok(n) = u64::try_from(v) {
            return Ok(Node::UInt(n));
        }
        i64::try_from(v)
            .map(Node::Int)
            .map_err(|_| error(format_args!("{v} does not fit msgpack's 64-bit integers")))
    }

    fn serialize_u8(self, v: u8) -> Result<Node> {
        Ok(Node::UInt(v.into()))
    }

    fn serialize_u16(self, v: u16) -> Result<Node> {
        Ok(Node::UInt(v.into()))
    }

    fn serialize_u32(self, v: u32) -> Result<Node> {
        Ok(Node::UInt(v.into()))
    }

    fn serialize_u64(self, v: u64) -> Result<Node> {
        Ok(Node::UInt(v))
    }

    fn serialize_u128(self, v: u128) -> Result<Node> {
        u64::try_from(v)
            .map(Node::UInt)
            .map_err(|_| error(format_args!("{v} does not fit msgpack's 64-bit integers")))
    }

    fn serialize_f32(self, v: f32) -> Result<Node> {
        Ok(Node::F32(v))
    }

    fn serialize_f64(self, v: f64) -> Result<Node> {
        Ok(Node::F64(v))
    }

    fn serialize_char(self, v: char) -> Result<Node> {
        Ok(Node::Str(v.to_string()))
    }

    fn serialize_str(self, v: &str) -> Result<Node> {
        Ok(Node::Str(v.to_owned()))
    }

    fn serialize_bytes(self, v: &[u8]) -> Result<Node> {
        Ok(Node::Bin(v.to_vec()))
    }

    fn serialize_none(self) -> Result<Node> {
        Ok(Node::Nil)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Node> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<Node> {
        Ok(Node::Nil)
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<Node> {
        Ok(Node::Nil)
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<Node> {
        Ok(Node::Str(variant.to_owned()))
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<Node> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Node> {
        Ok(Node::Map(vec![(
            Node::Str(variant.to_owned()),
            value.serialize(self)?,
        )]))
    }

    fn serialize_seq(self, len: Option<usize>) -> Result<SeqNode> {
        Ok(SeqNode(Vec::with_capacity(len.unwrap_or(0).min(1024))))
    }

    fn serialize_tuple(self, len: usize) -> Result<SeqNode> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<SeqNode> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<VariantSeqNode> {
        Ok(VariantSeqNode(variant, self.serialize_seq(Some(len))?))
    }

    fn serialize_map(self, len: Option<usize>) -> Result<MapNode> {
        Ok(MapNode {
            entries: Vec::with_capacity(len.unwrap_or(0).min(1024)),
            key: None,
        })
    }

    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<MapNode> {
        self.serialize_map(Some(len))
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<VariantMapNode> {
        Ok(VariantMapNode(variant, self.serialize_map(Some(len))?))
    }

    fn is_human_readable(&self) -> bool {
        true
    }
}

/// A sequence being serialized.
pub(super) struct SeqNode(Vec<Node>);

impl ser::SerializeSeq for SeqNode {
    type Ok = Node;
    type Error = CodecError;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.0.push(value.serialize(NodeSerializer)?);
        Ok(())
    }

    fn end(self) -> Result<Node> {
        Ok(Node::Array(self.0))
    }
}

impl ser::SerializeTuple for SeqNode {
    type Ok = Node;
    type Error = CodecError;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        ser::SerializeSeq::serialize_element(self, value)
    }

    fn end(self) -> Result<Node> {
        ser::SerializeSeq::end(self)
    }
}

impl ser::SerializeTupleStruct for SeqNode {
    type Ok = Node;
    type Error = CodecError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        ser::SerializeSeq::serialize_element(self, value)
    }

    fn end(self) -> Result<Node> {
        ser::SerializeSeq::end(self)
    }
}

/// A tuple variant being serialized: `{variant: [...]}`.
pub(super) struct VariantSeqNode(&'static str, SeqNode);

impl ser::SerializeTupleVariant for VariantSeqNode {
    type Ok = Node;
    type Error = CodecError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        ser::SerializeSeq::serialize_element(&mut self.1, value)
    }

    fn end(self) -> Result<Node> {
        let items = ser::SerializeSeq::end(self.1)?;
        Ok(Node::Map(vec![(Node::Str(self.0.to_owned()), items)]))
    }
}

/// A map or struct being serialized.
pub(super) struct MapNode {
    entries: Vec<(Node, Node)>,
    key: Option<Node>,
}

impl ser::SerializeMap for MapNode {
    type Ok = Node;
    type Error = CodecError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        self.key = Some(key.serialize(NodeSerializer)?);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let key = self
            .key
            .take()
            .ok_or_else(|| error("a map value was serialized before its key"))?;
        self.entries.push((key, value.serialize(NodeSerializer)?));
        Ok(())
    }

    fn end(self) -> Result<Node> {
        lift(self.entries)
    }
}

impl ser::SerializeStruct for MapNode {
    type Ok = Node;
    type Error = CodecError;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<()> {
        self.entries
            .push((Node::Str(key.to_owned()), value.serialize(NodeSerializer)?));
        Ok(())
    }

    fn end(self) -> Result<Node> {
        lift(self.entries)
    }
}

/// A struct variant being serialized: `{variant: {...}}`.
pub(super) struct VariantMapNode(&'static str, MapNode);

impl ser::SerializeStructVariant for VariantMapNode {
    type Ok = Node;
    type Error = CodecError;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<()> {
        ser::SerializeStruct::serialize_field(&mut self.1, key, value)
    }

    fn end(self) -> Result<Node> {
        let fields = ser::SerializeStruct::end(self.1)?;
        Ok(Node::Map(vec![(Node::Str(self.0.to_owned()), fields)]))
    }
}

/// The value of `key` in a map, if present: the last one, as in a Python dict or a
/// `serde_json::Value` read from it.
fn get<'a>(entries: &'a [(Node, Node)], key: &str) -> Option<&'a Node> {
    entries.iter().rev().find_map(|(k, v)| match k {
        Node::Str(k) if k == key => Some(v),
        _ => None,
    })
}

/// Whether a map is an `lc: 2` constructor map carrying `ext`, which the encoder turns into
/// what it describes: a map read with this shape is therefore shown (and serialized) in the
/// `builtins.dict` form, so that it is written back as the map it was.
pub(super) fn is_lc2_with_ext(entries: &[(Node, Node)]) -> bool {
    entries.len() >= 3
        && get(entries, "ext").is_some()
        && matches!(get(entries, "lc"), Some(Node::UInt(2)))
        && matches!(get(entries, "type"), Some(Node::Str(t)) if t == "constructor")
}

/// A map, or what it describes when it is an `lc: 2` constructor map carrying `ext`.
fn lift(entries: Vec<(Node, Node)>) -> Result<Node> {
    if !is_lc2_with_ext(&entries) {
        return Ok(Node::Map(entries));
    }
    Constructor::parse(entries)?.build()
}

/// The parts of an `lc: 2` constructor map.
struct Constructor {
    id: Vec<String>,
    ext: Option<u8>,
    method: Option<String>,
    args: Vec<Node>,
    kwargs: Vec<(String, Node)>,
}

impl Constructor {
    fn parse(entries: Vec<(Node, Node)>) -> Result<Constructor> {
        let mut id = None;
        let mut ext = None;
        let mut method = None;
        let mut args = None;
        let mut kwargs = None;
        let malformed = |what: &dyn std::fmt::Display| {
            error(format_args!(
                "a LangGraph constructor map (`lc: 2` with `ext`) {what}"
            ))
        };
        for (key, value) in entries {
            let Node::Str(key) = key else {
                return Err(malformed(&"has a key that is not a string"));
            };
            let slot = match key.as_str() {
                "lc" | "type" => continue,
                "id" => &mut id,
                "ext" => &mut ext,
                "method" => &mut method,
                "args" => &mut args,
                "kwargs" => &mut kwargs,
                other => return Err(malformed(&format_args!("has an unknown key `{other}`"))),
            };
            if slot.replace(value).is_some() {
                return Err(malformed(&format_args!("has the key `{key}` twice")));
            }
        }
        let id = match id {
            Some(Node::Array(parts)) if parts.len() >= 2 => parts
                .into_iter()
                .map(|p| match p {
                    Node::Str(s) => Ok(s),
                    _ => Err(malformed(&"has an `id` part that is not a string")),
                })
                .collect::<Result<Vec<_>>>()?,
            _ => {
                return Err(malformed(
                    &"needs an `id`: the module's parts, then the class",
                ));
            }
        };
        let class = id.join(".");
        let malformed = |what: &dyn std::fmt::Display| {
            error(format_args!(
                "the LangGraph constructor map of `{class}` {what}"
            ))
        };
        let ext = match ext {
            Some(Node::Nil) => None,
            Some(Node::UInt(n)) if n <= u64::from(EXT_DELTA_SNAPSHOT) => Some(n as u8),
            _ => return Err(malformed(&"has an `ext` that is not 0-7 or null")),
        };
        let method = match method {
            None | Some(Node::Nil) => None,
            Some(Node::Str(m)) => Some(m),
            Some(_) => return Err(malformed(&"has a `method` that is not a string")),
        };
        let args = match args {
            None => Vec::new(),
            Some(Node::Array(args)) => args,
            Some(_) => return Err(malformed(&"has `args` that are not an array")),
        };
        let kwargs = match kwargs {
            None => Vec::new(),
            Some(Node::Map(entries)) => entries
                .into_iter()
                .map(|(k, v)| match k {
                    Node::Str(k) => Ok((k, v)),
                    _ => Err(malformed(&"has a keyword that is not a string")),
                })
                .collect::<Result<Vec<_>>>()?,
            Some(_) => return Err(malformed(&"has `kwargs` that are not a map")),
        };
        Ok(Constructor {
            id,
            ext,
            method,
            args,
            kwargs,
        })
    }

    fn build(mut self) -> Result<Node> {
        let class = self.id.join(".");
        let malformed = |what: &str| {
            error(format_args!(
                "the LangGraph constructor map of `{class}` {what}"
            ))
        };
        let name = self.id.pop().unwrap_or_default();
        let module = self.id.join(".");
        let no_extra = self.kwargs.is_empty();
        match self.ext {
            None => match (
                class.as_str(),
                self.method.as_deref(),
                self.args.as_mut_slice(),
            ) {
                ("builtins.bytes", Some("fromhex"), [Node::Str(hex)]) if no_extra => {
                    hex::decode(hex)
                        .map(Node::Bin)
                        .map_err(|e| malformed(&format!("has bad hex: {e}")))
                }
                ("builtins.float", None, [Node::Str(text)]) if no_extra => match text.as_str() {
                    "nan" => Ok(Node::F64(f64::NAN)),
                    "inf" => Ok(Node::F64(f64::INFINITY)),
                    "-inf" => Ok(Node::F64(f64::NEG_INFINITY)),
                    _ => Err(malformed(
                        "has an argument other than `nan`, `inf` or `-inf`",
                    )),
                },
                ("builtins.dict", None, [Node::Array(pairs)]) if no_extra => std::mem::take(pairs)
                    .into_iter()
                    .map(|pair| match pair {
                        Node::Array(kv) => match <[Node; 2]>::try_from(kv) {
                            Ok([k, v]) => Ok((k, v)),
                            Err(_) => Err(malformed("has an entry that is not [key, value]")),
                        },
                        _ => Err(malformed("has an entry that is not [key, value]")),
                    })
                    .collect::<Result<Vec<_>>>()
                    .map(Node::Map),
                _ => Err(malformed(
                    "has `ext: null` but is neither `builtins.bytes` from hex, a \
                     `builtins.float` from text nor a `builtins.dict` of pairs",
                )),
            },
            Some(EXT_DELTA_SNAPSHOT) => {
                let ok = module == DELTA_SNAPSHOT_MODULE
                    && name == DELTA_SNAPSHOT_NAME
                    && self.method.is_none()
                    && no_extra
                    && self.args.len() == 1;
                match self.args.pop() {
                    Some(value) if ok => Ok(Node::DeltaSnapshot(Box::new(value))),
                    _ => Err(malformed(&format!(
                        "has `ext: 7`, which is only for `{DELTA_SNAPSHOT_MODULE}.\
                         {DELTA_SNAPSHOT_NAME}` with one argument"
                    ))),
                }
            }
            Some(ext) => {
                let mut object = PyObject {
                    ext,
                    module,
                    name,
                    method: self.method,
                    args: self.args,
                    kwargs: self.kwargs,
                };
                object.check().map_err(error)?;
                Ok(Node::Object(Box::new(object)))
            }
        }
    }
}

/// [`Node`]'s `Serialize`: see its documentation. A map shaped like an `lc: 2` constructor
/// map with `ext` is written in its `builtins.dict` form, so the encoder keeps it a map.
pub(super) fn serialize_node<S: Serializer>(
    node: &Node,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match node {
        Node::Nil => s.serialize_unit(),
        Node::Bool(b) => s.serialize_bool(*b),
        Node::Int(n) => s.serialize_i64(*n),
        Node::UInt(n) => s.serialize_u64(*n),
        Node::F32(f) => match non_finite_text(f64::from(*f)) {
            Some(text) if !writing_langgraph() => Lc2Out::Float(text).serialize(s),
            _ => s.serialize_f32(*f),
        },
        Node::F64(f) => match non_finite_text(*f) {
            Some(text) if !writing_langgraph() => Lc2Out::Float(text).serialize(s),
            _ => s.serialize_f64(*f),
        },
        Node::Str(v) => s.serialize_str(v),
        Node::Bin(b) if writing_langgraph() => s.serialize_bytes(b),
        Node::Bin(b) => Lc2Out::Bytes(b).serialize(s),
        Node::Array(items) => {
            let mut seq = s.serialize_seq(Some(items.len()))?;
            for item in items {
                seq.serialize_element(item)?;
            }
            seq.end()
        }
        Node::Map(entries)
            if !is_lc2_with_ext(entries)
                && (writing_langgraph()
                    || entries.iter().all(|(k, _)| matches!(k, Node::Str(_)))) =>
        {
            let mut map = s.serialize_map(Some(entries.len()))?;
            for (key, value) in entries {
                map.serialize_entry(key, value)?;
            }
            map.end()
        }
        Node::Map(entries) => Lc2Out::Dict(entries).serialize(s),
        Node::Object(object) => Lc2Out::Object(object).serialize(s),
        Node::DeltaSnapshot(value) => Lc2Out::Snapshot(value).serialize(s),
    }
}

/// The `lc: 2` map written for what has one.
enum Lc2Out<'a> {
    Object(&'a PyObject),
    Snapshot(&'a Node),
    Bytes(&'a [u8]),
    Float(&'static str),
    Dict(&'a [(Node, Node)]),
}

/// `[x]`.
struct One<T>(T);

impl<T: Serialize> Serialize for One<T> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(1))?;
        seq.serialize_element(&self.0)?;
        seq.end()
    }
}

/// A class id: the module's parts, then the name.
struct Id<'a>(&'a str, &'a str);

impl Serialize for Id<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        for part in self.0.split('.') {
            seq.serialize_element(part)?;
        }
        seq.serialize_element(self.1)?;
        seq.end()
    }
}

/// Keyword arguments as a map.
struct Kwargs<'a>(&'a [(String, Node)]);

impl Serialize for Kwargs<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (key, value) in self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// A map's entries as `[key, value]` pairs.
struct Pairs<'a>(&'a [(Node, Node)]);

impl Serialize for Pairs<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for (key, value) in self.0 {
            seq.serialize_element(&(key, value))?;
        }
        seq.end()
    }
}

impl Serialize for Lc2Out<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(7))?;
        map.serialize_entry("lc", &2u8)?;
        map.serialize_entry("type", "constructor")?;
        match self {
            Lc2Out::Object(o) => {
                map.serialize_entry("id", &Id(&o.module, &o.name))?;
                map.serialize_entry("ext", &o.ext)?;
                map.serialize_entry("method", &o.method)?;
                map.serialize_entry("args", &o.args)?;
                map.serialize_entry("kwargs", &Kwargs(&o.kwargs))?;
            }
            Lc2Out::Snapshot(value) => {
                map.serialize_entry("id", &Id(DELTA_SNAPSHOT_MODULE, DELTA_SNAPSHOT_NAME))?;
                map.serialize_entry("ext", &EXT_DELTA_SNAPSHOT)?;
                map.serialize_entry("method", &None::<&str>)?;
                map.serialize_entry("args", &One(value))?;
                map.serialize_entry("kwargs", &Kwargs(&[]))?;
            }
            Lc2Out::Bytes(b) => {
                map.serialize_entry("id", &Id("builtins", "bytes"))?;
                map.serialize_entry("ext", &None::<u8>)?;
                map.serialize_entry("method", "fromhex")?;
                map.serialize_entry("args", &One(hex::encode(b)))?;
                map.serialize_entry("kwargs", &Kwargs(&[]))?;
            }
            Lc2Out::Float(text) => {
                map.serialize_entry("id", &Id("builtins", "float"))?;
                map.serialize_entry("ext", &None::<u8>)?;
                map.serialize_entry("method", &None::<&str>)?;
                map.serialize_entry("args", &One(text))?;
                map.serialize_entry("kwargs", &Kwargs(&[]))?;
            }
            Lc2Out::Dict(entries) => {
                map.serialize_entry("id", &Id("builtins", "dict"))?;
                map.serialize_entry("ext", &None::<u8>)?;
                map.serialize_entry("method", &None::<&str>)?;
                map.serialize_entry("args", &One(Pairs(entries)))?;
                map.serialize_entry("kwargs", &Kwargs(&[]))?;
            }
        }
        map.end()
    }
}
