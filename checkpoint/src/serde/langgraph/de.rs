//! A human-readable serde `Deserializer` over a [`Node`] (see the module docs for what each
//! request sees).

use std::fmt;
use std::slice;

use serde::de::value::SeqDeserializer;
use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, Expected, MapAccess, SeqAccess, Unexpected,
    VariantAccess, Visitor,
};

use super::codec::{EXT_KW_ARGS, EXT_POS_ARGS};
use super::ser::is_lc2_with_ext;
use super::{Node, PyObject};

/// An error of the tree's deserializer or serializer.
#[derive(Debug)]
pub(crate) struct CodecError(String);

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CodecError {}

impl de::Error for CodecError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        CodecError(msg.to_string())
    }
}

impl serde::ser::Error for CodecError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        CodecError(msg.to_string())
    }
}

type Result<T> = std::result::Result<T, CodecError>;

/// What a deserializer reads: a node, or a part of the `lc: 2` map shown for one.
#[derive(Clone, Copy)]
pub(crate) enum De<'a> {
    /// A value of the tree.
    Node(&'a Node),
    /// A string.
    Str(&'a str),
    /// An unsigned integer.
    U64(u64),
    /// `null`.
    Nil,
    /// An `lc: 2` id: the module's parts, then the class name.
    Id(&'a str, &'a str),
    /// Values of the tree as a sequence.
    Nodes(&'a [Node]),
    /// Keyword arguments as a map.
    Kwargs(&'a [(String, Node)]),
    /// Bytes as hex text.
    Hex(&'a [u8]),
    /// `[hex]`: the arguments of `bytes.fromhex`.
    OneHex(&'a [u8]),
    /// `[[key, value], ...]`: a map's entries as pairs.
    Entries(&'a [(Node, Node)]),
    /// `[[[key, value], ...]]`: the arguments of `dict`.
    OneEntries(&'a [(Node, Node)]),
    /// `[key, value]`.
    Entry(&'a Node, &'a Node),
}

/// What an `lc: 2` map describes.
#[derive(Clone, Copy)]
pub(crate) enum Lc2<'a> {
    Object(&'a PyObject),
    Bytes(&'a [u8]),
    Dict(&'a [(Node, Node)]),
}

impl<'a> Lc2<'a> {
    fn entries(self) -> [(&'static str, De<'a>); 7] {
        let (id, ext, method, args, kwargs) = match self {
            Lc2::Object(o) => (
                De::Id(&o.module, &o.name),
                De::U64(u64::from(o.ext)),
                o.method.as_deref().map_or(De::Nil, De::Str),
                De::Nodes(&o.args),
                De::Kwargs(&o.kwargs),
            ),
            Lc2::Bytes(b) => (
                De::Id("builtins", "bytes"),
                De::Nil,
                De::Str("fromhex"),
                De::OneHex(b),
                De::Kwargs(&[]),
            ),
            Lc2::Dict(entries) => (
                De::Id("builtins", "dict"),
                De::Nil,
                De::Nil,
                De::OneEntries(entries),
                De::Kwargs(&[]),
            ),
        };
        [
            ("lc", De::U64(2)),
            ("type", De::Str("constructor")),
            ("id", id),
            ("ext", ext),
            ("method", method),
            ("args", args),
            ("kwargs", kwargs),
        ]
    }
}

/// The error for a request an object cannot satisfy; it names the class.
fn unexpected_object(o: &PyObject, exp: &dyn Expected) -> CodecError {
    let what = format!("Python object {}", o.describe());
    de::Error::invalid_type(Unexpected::Other(&what), exp)
}

fn unexpected(node: &Node) -> Unexpected<'_> {
    match node {
        Node::Nil => Unexpected::Unit,
        Node::Bool(b) => Unexpected::Bool(*b),
        Node::Int(n) => Unexpected::Signed(*n),
        Node::UInt(n) => Unexpected::Unsigned(*n),
        Node::F32(f) => Unexpected::Float(f64::from(*f)),
        Node::F64(f) => Unexpected::Float(*f),
        Node::Str(s) => Unexpected::Str(s),
        Node::Bin(b) => Unexpected::Bytes(b),
        Node::Array(_) => Unexpected::Seq,
        Node::Map(_) => Unexpected::Map,
        Node::Object(_) | Node::DeltaSnapshot(_) => Unexpected::Other("a Python object"),
    }
}

/// A `datetime.date` (`[year, month, day]`) as ISO text.
fn iso_date(o: &PyObject) -> Option<String> {
    if (o.ext, o.module.as_str(), o.name.as_str()) != (EXT_POS_ARGS, "datetime", "date") {
        return None;
    }
    match o.args.as_slice() {
        [Node::UInt(y), Node::UInt(m), Node::UInt(d)] => Some(format!("{y:04}-{m:02}-{d:02}")),
        _ => None,
    }
}

/// The natural reading of `node` (see the module docs).
fn any<'de, V: Visitor<'de>>(node: &'de Node, visitor: V) -> Result<V::Value> {
    match node {
        Node::Nil => visitor.visit_unit(),
        Node::Bool(b) => visitor.visit_bool(*b),
        Node::Int(n) => visitor.visit_i64(*n),
        Node::UInt(n) => visitor.visit_u64(*n),
        Node::F32(f) => visitor.visit_f32(*f),
        Node::F64(f) => visitor.visit_f64(*f),
        Node::Str(s) => visitor.visit_borrowed_str(s),
        Node::Bin(b) => lc2(Lc2::Bytes(b), visitor),
        Node::Array(items) => visit_seq(visitor, NodeSeq(items.iter())),
        Node::Map(entries)
            if entries.iter().all(|(k, _)| matches!(k, Node::Str(_)))
                && !is_lc2_with_ext(entries) =>
        {
            visit_map(visitor, NodeMap::new(entries))
        }
        Node::Map(entries) => lc2(Lc2::Dict(entries), visitor),
        Node::Object(o) => lc2(Lc2::Object(o), visitor),
        Node::DeltaSnapshot(inner) => any(inner, visitor),
    }
}

fn lc2<'de, V: Visitor<'de>>(lc2: Lc2<'de>, visitor: V) -> Result<V::Value> {
    visit_map(
        visitor,
        FixedMap {
            entries: lc2.entries(),
            index: 0,
        },
    )
}

/// Visits a sequence; elements the visitor left are an error, as in serde_json.
fn visit_seq<'de, V: Visitor<'de>, S: SeqAccess<'de, Error = CodecError> + Rest>(
    visitor: V,
    mut seq: S,
) -> Result<V::Value> {
    let value = visitor.visit_seq(&mut seq)?;
    match seq.rest() {
        0 => Ok(value),
        n => Err(de::Error::custom(format_args!(
            "{n} more elements than expected in a sequence"
        ))),
    }
}

/// Visits a map; entries the visitor left are an error.
fn visit_map<'de, V: Visitor<'de>, M: MapAccess<'de, Error = CodecError> + Rest>(
    visitor: V,
    mut map: M,
) -> Result<V::Value> {
    let value = visitor.visit_map(&mut map)?;
    match map.rest() {
        0 => Ok(value),
        n => Err(de::Error::custom(format_args!(
            "{n} more entries than expected in a map"
        ))),
    }
}

/// How many elements or entries an access has not handed out yet.
trait Rest {
    fn rest(&self) -> usize;
}

/// Forwards a request to the argument of a one-argument object and the value of a
/// `_DeltaSnapshot`; bytes are shown as bytes; other nodes read naturally.
macro_rules! see_through {
    ($($method:ident $(($($arg:ident: $ty:ty),*))?;)*) => {$(
        fn $method<V: Visitor<'de>>(self, $($($arg: $ty,)*)? visitor: V) -> Result<V::Value> {
            match self {
                De::Node(Node::DeltaSnapshot(inner)) => {
                    De::Node(inner).$method($($($arg,)*)? visitor)
                }
                De::Node(Node::Object(o)) => match o.single() {
                    Some(arg) => De::Node(arg).$method($($($arg,)*)? visitor),
                    None => Err(unexpected_object(o, &visitor)),
                },
                De::Node(Node::Bin(b)) => visitor.visit_borrowed_bytes(b),
                _ => self.deserialize_any(visitor),
            }
        }
    )*};
}

impl<'de> Deserializer<'de> for De<'de> {
    type Error = CodecError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self {
            De::Node(node) => any(node, visitor),
            De::Str(s) => visitor.visit_borrowed_str(s),
            De::U64(n) => visitor.visit_u64(n),
            De::Nil => visitor.visit_unit(),
            De::Id(module, name) => visit_seq(
                visitor,
                IdSeq {
                    parts: module.split('.'),
                    name: Some(name),
                    rest: module.split('.').count() + 1,
                },
            ),
            De::Nodes(nodes) => visit_seq(visitor, NodeSeq(nodes.iter())),
            De::Kwargs(kwargs) => visit_map(visitor, KwargsMap::new(kwargs)),
            De::Hex(b) => visitor.visit_string(hex::encode(b)),
            De::OneHex(b) => visit_seq(visitor, Fixed::new([Some(De::Hex(b)), None])),
            De::Entries(entries) => visit_seq(visitor, EntrySeq(entries.iter())),
            De::OneEntries(entries) => {
                visit_seq(visitor, Fixed::new([Some(De::Entries(entries)), None]))
            }
            De::Entry(k, v) => {
                visit_seq(visitor, Fixed::new([Some(De::Node(k)), Some(De::Node(v))]))
            }
        }
    }

    see_through! {
        deserialize_bool; deserialize_i8; deserialize_i16; deserialize_i32; deserialize_i64;
        deserialize_i128; deserialize_u8; deserialize_u16; deserialize_u32; deserialize_u64;
        deserialize_u128; deserialize_f32; deserialize_f64; deserialize_char;
        deserialize_bytes; deserialize_byte_buf; deserialize_unit;
        deserialize_unit_struct(name: &'static str); deserialize_identifier;
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self {
            De::Node(Node::Object(o)) if o.single().is_none() => match iso_date(o) {
                Some(date) => visitor.visit_string(date),
                None => Err(unexpected_object(o, &visitor)),
            },
            De::Node(Node::Object(o)) => match o.single() {
                Some(arg) => De::Node(arg).deserialize_str(visitor),
                None => Err(unexpected_object(o, &visitor)),
            },
            De::Node(Node::DeltaSnapshot(inner)) => De::Node(inner).deserialize_str(visitor),
            De::Node(Node::Bin(b)) => visitor.visit_borrowed_bytes(b),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self {
            De::Nil | De::Node(Node::Nil) => visitor.visit_none(),
            De::Node(Node::DeltaSnapshot(inner)) => De::Node(inner).deserialize_option(visitor),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let De::Node(node) = self else {
            return self.deserialize_any(visitor);
        };
        match node {
            Node::Array(items) => visit_seq(visitor, NodeSeq(items.iter())),
            Node::Bin(b) => SeqDeserializer::new(b.iter().copied()).deserialize_any(visitor),
            Node::Object(o) => match (o.ext, o.single()) {
                (_, Some(arg)) => De::Node(arg).deserialize_seq(visitor),
                (EXT_POS_ARGS, _) => visit_seq(visitor, NodeSeq(o.args.iter())),
                (EXT_KW_ARGS, _) => visit_seq(visitor, ValueSeq(o.kwargs.iter())),
                _ => Err(unexpected_object(o, &visitor)),
            },
            Node::DeltaSnapshot(inner) => De::Node(inner).deserialize_seq(visitor),
            _ => any(node, visitor),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let De::Node(node) = self else {
            return self.deserialize_any(visitor);
        };
        match node {
            // Written back, its entries would make an object: shown as the dict it is.
            Node::Map(entries) if is_lc2_with_ext(entries) => lc2(Lc2::Dict(entries), visitor),
            Node::Map(entries) => visit_map(visitor, NodeMap::new(entries)),
            Node::Object(o) if o.has_kwargs() => visit_map(visitor, KwargsMap::new(&o.kwargs)),
            Node::Object(o) => match o.single() {
                Some(arg) => De::Node(arg).deserialize_map(visitor),
                None => lc2(Lc2::Object(o), visitor),
            },
            Node::DeltaSnapshot(inner) => De::Node(inner).deserialize_map(visitor),
            _ => any(node, visitor),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        let De::Node(node) = self else {
            return self.deserialize_any(visitor);
        };
        if fields.contains(&"lc") {
            // A struct mirroring the `lc: 2` form reads that form.
            return any(node, visitor);
        }
        match node {
            Node::Map(entries) => visit_map(visitor, NodeMap::new(entries)),
            Node::Array(items) => visit_seq(visitor, NodeSeq(items.iter())),
            Node::Object(o) if o.has_kwargs() => visit_map(visitor, KwargsMap::new(&o.kwargs)),
            Node::Object(o) => match o.single() {
                Some(arg) => De::Node(arg).deserialize_struct(name, fields, visitor),
                None => lc2(Lc2::Object(o), visitor),
            },
            Node::DeltaSnapshot(inner) => De::Node(inner).deserialize_struct(name, fields, visitor),
            _ => any(node, visitor),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        let expected = &"an enum: a string or a map of one entry";
        match self {
            De::Str(s) => visitor.visit_enum(EnumDe {
                variant: De::Str(s),
                value: None,
            }),
            De::Node(Node::Str(s)) => visitor.visit_enum(EnumDe {
                variant: De::Str(s),
                value: None,
            }),
            De::Node(Node::Map(entries)) => match entries.as_slice() {
                [(key, value)] => visitor.visit_enum(EnumDe {
                    variant: De::Node(key),
                    value: Some(De::Node(value)),
                }),
                _ => Err(de::Error::invalid_length(entries.len(), expected)),
            },
            De::Node(Node::Object(o)) => match o.single() {
                Some(arg) => De::Node(arg).deserialize_enum(name, variants, visitor),
                None => Err(unexpected_object(o, &visitor)),
            },
            De::Node(Node::DeltaSnapshot(inner)) => {
                De::Node(inner).deserialize_enum(name, variants, visitor)
            }
            De::Node(node) => Err(de::Error::invalid_type(unexpected(node), expected)),
            _ => Err(de::Error::invalid_type(
                Unexpected::Other("a part of a Python object"),
                expected,
            )),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_unit()
    }

    fn is_human_readable(&self) -> bool {
        true
    }
}

/// Elements of the tree.
struct NodeSeq<'a>(slice::Iter<'a, Node>);

impl<'de> SeqAccess<'de> for NodeSeq<'de> {
    type Error = CodecError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        self.0
            .next()
            .map(|n| seed.deserialize(De::Node(n)))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

impl Rest for NodeSeq<'_> {
    fn rest(&self) -> usize {
        self.0.len()
    }
}

/// Keyword arguments' values.
struct ValueSeq<'a>(slice::Iter<'a, (String, Node)>);

impl<'de> SeqAccess<'de> for ValueSeq<'de> {
    type Error = CodecError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        self.0
            .next()
            .map(|(_, v)| seed.deserialize(De::Node(v)))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

impl Rest for ValueSeq<'_> {
    fn rest(&self) -> usize {
        self.0.len()
    }
}

/// A map's entries as `[key, value]` pairs.
struct EntrySeq<'a>(slice::Iter<'a, (Node, Node)>);

impl<'de> SeqAccess<'de> for EntrySeq<'de> {
    type Error = CodecError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        self.0
            .next()
            .map(|(k, v)| seed.deserialize(De::Entry(k, v)))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

impl Rest for EntrySeq<'_> {
    fn rest(&self) -> usize {
        self.0.len()
    }
}

/// One or two parts.
struct Fixed<'a> {
    items: [Option<De<'a>>; 2],
    index: usize,
}

impl<'a> Fixed<'a> {
    fn new(items: [Option<De<'a>>; 2]) -> Self {
        Fixed { items, index: 0 }
    }
}

impl<'de> SeqAccess<'de> for Fixed<'de> {
    type Error = CodecError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        let Some(item) = self.items.get(self.index).copied().flatten() else {
            return Ok(None);
        };
        self.index += 1;
        seed.deserialize(item).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.rest())
    }
}

impl Rest for Fixed<'_> {
    fn rest(&self) -> usize {
        self.items.iter().skip(self.index).flatten().count()
    }
}

/// An `lc: 2` id: the module's parts, then the class name.
struct IdSeq<'a> {
    parts: std::str::Split<'a, char>,
    name: Option<&'a str>,
    rest: usize,
}

impl<'de> SeqAccess<'de> for IdSeq<'de> {
    type Error = CodecError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        let Some(part) = self.parts.next().or_else(|| self.name.take()) else {
            return Ok(None);
        };
        self.rest -= 1;
        seed.deserialize(De::Str(part)).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.rest)
    }
}

impl Rest for IdSeq<'_> {
    fn rest(&self) -> usize {
        self.rest
    }
}

/// A map of the tree; keys of any type.
struct NodeMap<'a> {
    entries: slice::Iter<'a, (Node, Node)>,
    value: Option<&'a Node>,
}

impl<'a> NodeMap<'a> {
    fn new(entries: &'a [(Node, Node)]) -> Self {
        NodeMap {
            entries: entries.iter(),
            value: None,
        }
    }
}

impl<'de> MapAccess<'de> for NodeMap<'de> {
    type Error = CodecError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        self.value = Some(value);
        seed.deserialize(De::Node(key)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        match self.value.take() {
            Some(value) => seed.deserialize(De::Node(value)),
            None => Err(de::Error::custom(
                "a map value was asked for before its key",
            )),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

impl Rest for NodeMap<'_> {
    fn rest(&self) -> usize {
        self.entries.len()
    }
}

/// Keyword arguments.
struct KwargsMap<'a> {
    entries: slice::Iter<'a, (String, Node)>,
    value: Option<&'a Node>,
}

impl<'a> KwargsMap<'a> {
    fn new(entries: &'a [(String, Node)]) -> Self {
        KwargsMap {
            entries: entries.iter(),
            value: None,
        }
    }
}

impl<'de> MapAccess<'de> for KwargsMap<'de> {
    type Error = CodecError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        self.value = Some(value);
        seed.deserialize(De::Str(key)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        match self.value.take() {
            Some(value) => seed.deserialize(De::Node(value)),
            None => Err(de::Error::custom(
                "a map value was asked for before its key",
            )),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

impl Rest for KwargsMap<'_> {
    fn rest(&self) -> usize {
        self.entries.len()
    }
}

/// The seven entries of an `lc: 2` map.
struct FixedMap<'a> {
    entries: [(&'static str, De<'a>); 7],
    index: usize,
}

impl<'de> MapAccess<'de> for FixedMap<'de> {
    type Error = CodecError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        match self.entries.get(self.index) {
            Some((key, _)) => seed.deserialize(De::Str(key)).map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        let Some((_, value)) = self.entries.get(self.index).copied() else {
            return Err(de::Error::custom(
                "a map value was asked for after the last key",
            ));
        };
        self.index += 1;
        seed.deserialize(value)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.rest())
    }
}

impl Rest for FixedMap<'_> {
    fn rest(&self) -> usize {
        self.entries.len() - self.index
    }
}

/// An externally tagged enum: the variant, and the payload unless it is a unit variant.
struct EnumDe<'a> {
    variant: De<'a>,
    value: Option<De<'a>>,
}

impl<'de> EnumAccess<'de> for EnumDe<'de> {
    type Error = CodecError;
    type Variant = VariantDe<'de>;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, VariantDe<'de>)> {
        let variant = seed.deserialize(self.variant)?;
        Ok((variant, VariantDe(self.value)))
    }
}

/// An enum variant's payload.
struct VariantDe<'a>(Option<De<'a>>);

impl<'de> VariantAccess<'de> for VariantDe<'de> {
    type Error = CodecError;

    fn unit_variant(self) -> Result<()> {
        match self.0 {
            None | Some(De::Node(Node::Nil)) => Ok(()),
            Some(De::Node(node)) => Err(de::Error::invalid_type(unexpected(node), &"unit variant")),
            Some(_) => Err(de::Error::custom("expected a unit variant")),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value> {
        match self.0 {
            Some(value) => seed.deserialize(value),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"newtype variant",
            )),
        }
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value> {
        match self.0 {
            Some(value) => value.deserialize_seq(visitor),
            None => Err(de::Error::invalid_type(Unexpected::UnitVariant, &visitor)),
        }
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        match self.0 {
            Some(value) => value.deserialize_struct("", fields, visitor),
            None => Err(de::Error::invalid_type(Unexpected::UnitVariant, &visitor)),
        }
    }
}
