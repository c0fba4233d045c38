//! A human-readable serde `Deserializer` over LangGraph msgpack bytes (see the module docs for
//! what each request sees), reading strings and bytes in place.
//!
//! It checks the reader's rules as it goes, with the pieces of `read.rs`: every value is
//! either read (its head, its strings as UTF-8, its nesting, an extension's own rules) or,
//! when its visitor ignores it, moved past with [`Cursor::pass`], which checks it whole. A
//! value a visitor leaves or fails on (and carries on) is moved past following its structure
//! only, and then the input is checked whole at the end. So a decode that succeeds read input
//! `read::check` accepts; a failure says nothing more: the caller asks `read::check` for the
//! reader's error. A map's keys are looked at before it is shown to a request for any value
//! or a map, to tell a plain dict from one shown in its `builtins.dict` form
//! ([`Cursor::map_shape`]).

use std::fmt;

use serde::de::value::SeqDeserializer;
use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, Expected, MapAccess, SeqAccess, Unexpected,
    VariantAccess, Visitor,
};
use serde::forward_to_deserialize_any;

use super::codec::{EXT_KW_ARGS, EXT_POS_ARGS, describe, non_finite_text};
use super::read::{self, Cursor, Ext, Fail, MapShape, RawArgs, RawObject, Reading, Token, utf8};
use crate::serde::path::deserialize_tracking;

/// An error of the deserializer or of the tree's serializer.
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

impl From<Fail> for CodecError {
    fn from(fail: Fail) -> Self {
        CodecError(fail.message().to_owned())
    }
}

type Result<T> = std::result::Result<T, CodecError>;

/// Decodes a `T` from the one value `bytes` hold.
pub(super) fn from_slice<T: de::DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    let reading = Reading::new(bytes);
    let mut cursor = reading.cursor();
    let value = T::deserialize(Next::new(&mut cursor))?;
    cursor.end()?;
    checked_if_unread(&reading)?;
    Ok(value)
}

/// [`from_slice`], tracking the path: an error comes with the path of the field that failed.
pub(super) fn from_slice_tracking<T: de::DeserializeOwned>(
    bytes: &[u8],
) -> std::result::Result<T, (Option<String>, String)> {
    let reading = Reading::new(bytes);
    let mut cursor = reading.cursor();
    let value =
        deserialize_tracking(Next::new(&mut cursor)).map_err(|(path, e)| (path, e.to_string()))?;
    cursor
        .end()
        .map_err(|fail| (None, fail.message().to_owned()))?;
    checked_if_unread(&reading).map_err(|e| (None, e.to_string()))?;
    Ok(value)
}

/// If a value was moved past unread (its visitor left it, or failed on it and carried on),
/// the reader's rules on the whole input: what was not read must pass them too.
fn checked_if_unread(reading: &Reading<'_>) -> Result<()> {
    match reading.left_unread() {
        true => read::check(reading.input())
            .map(drop)
            .map_err(|(error, _)| de::Error::custom(error)),
        false => Ok(()),
    }
}

/// The next value of a cursor. Once used, failed or dropped, the cursor is past the value.
pub(super) struct Next<'a, 'r> {
    cursor: &'r mut Cursor<'a>,
    /// Whether a `deserialize_*` method took the value (and so moves past it).
    taken: bool,
}

impl Drop for Next<'_, '_> {
    fn drop(&mut self) {
        if !self.taken {
            // Left by its visitor: moved past all the same.
            self.cursor.skip_unread();
        }
    }
}

impl<'a, 'r> Next<'a, 'r> {
    fn new(cursor: &'r mut Cursor<'a>) -> Self {
        Next {
            cursor,
            taken: false,
        }
    }

    /// Runs `read` on the cursor at the value; on failure, moves past the value, for a
    /// visitor that carries on.
    fn take<R>(mut self, read: impl FnOnce(&mut Cursor<'a>) -> Result<R>) -> Result<R> {
        self.taken = true;
        let start = self.cursor.mark();
        let result = read(&mut *self.cursor);
        if result.is_err() {
            self.cursor.reset(start);
            self.cursor.skip_unread();
        }
        result
    }
}

/// Runs `read` one level deeper (in a container).
fn inside<'a, R>(
    cursor: &mut Cursor<'a>,
    read: impl FnOnce(&mut Cursor<'a>) -> Result<R>,
) -> Result<R> {
    cursor.enter()?;
    let result = read(cursor);
    cursor.leave();
    result
}

/// The natural reading of the value whose head `token` was just read from `cursor`.
fn any<'a, V: Visitor<'a>>(
    token: Token<'a>,
    cursor: &mut Cursor<'a>,
    visitor: V,
) -> Result<V::Value> {
    match token {
        Token::Nil => visitor.visit_unit(),
        Token::Bool(b) => visitor.visit_bool(b),
        Token::Int(n) => visitor.visit_i64(n),
        Token::UInt(n) => visitor.visit_u64(n),
        Token::F32(f) => match non_finite_text(f64::from(f)) {
            None => visitor.visit_f32(f),
            Some(text) => float_form(cursor, text, visitor),
        },
        Token::F64(f) => match non_finite_text(f) {
            None => visitor.visit_f64(f),
            Some(text) => float_form(cursor, text, visitor),
        },
        Token::Str(bytes) => visitor.visit_borrowed_str(utf8(bytes)?),
        Token::Bin(b) => {
            view_levels(*cursor, ONE_ARG_LEVELS)?;
            lc2(Lc2::Bytes(b), visitor)
        }
        Token::Array(n) => inside(cursor, |c| visit_seq(visitor, Items::new(c, n))),
        Token::Map(n) if cursor.map_shape(n)? == MapShape::PLAIN => {
            inside(cursor, |c| visit_map(visitor, Entries::new(c, n)))
        }
        Token::Map(n) => dict(cursor, n, visitor),
        Token::Ext(len) => match cursor.open_ext(len, None)? {
            Ext::Snapshot(mut inner) => {
                let token = inner.head()?;
                any(token, &mut inner, visitor)
            }
            Ext::Object(o) => lc2(Lc2::Object(o), visitor),
        },
    }
}

/// How many containers deep bytes or a float at a cursor sit in their one-argument `lc: 2`
/// form: the object and its `args`.
const ONE_ARG_LEVELS: usize = 2;
/// How many containers deep a map's entries sit in its `builtins.dict` form: the object, its
/// `args`, the list of pairs and a pair (one more than the map itself).
const DICT_LEVELS: usize = 4;

/// `cursor`, `levels` containers deeper: refused where the `lc: 2` form of a value there
/// would nest deeper than the reader accepts (that form, written back, must read again).
fn view_levels<'a>(mut cursor: Cursor<'a>, levels: usize) -> Result<Cursor<'a>> {
    for _ in 0..levels {
        cursor.enter()?;
    }
    Ok(cursor)
}

/// A NaN or infinite float, which JSON cannot hold, in its `builtins.float` form.
fn float_form<'a, V: Visitor<'a>>(
    cursor: &Cursor<'a>,
    text: &'static str,
    visitor: V,
) -> Result<V::Value> {
    view_levels(*cursor, ONE_ARG_LEVELS)?;
    lc2(Lc2::Float(text), visitor)
}

/// A map of `n` entries at `cursor` in its `builtins.dict` form; the cursor moves past it.
/// The entries' nesting counts from where that form puts them.
fn dict<'a, V: Visitor<'a>>(cursor: &mut Cursor<'a>, n: usize, visitor: V) -> Result<V::Value> {
    let entries = inside(cursor, |c| {
        let entries = *c;
        for _ in 0..n.saturating_mul(2) {
            c.pass()?;
        }
        Ok(entries)
    })?;
    // Inside the map: three more levels to where the form puts the entries.
    let entries = view_levels(entries, DICT_LEVELS - 1)?;
    lc2(Lc2::Dict(entries, n), visitor)
}

/// A `datetime.date` (`[year, month, day]`) as ISO text.
fn iso_date(o: &RawObject<'_>) -> Option<String> {
    if (o.ext, o.module, o.name) != (EXT_POS_ARGS, "datetime", "date") {
        return None;
    }
    let RawArgs::Values(mut args, 3) = o.args else {
        return None;
    };
    let mut part = || match args.token() {
        Ok(Token::UInt(n)) => Some(n),
        _ => None,
    };
    let (y, m, d) = (part()?, part()?, part()?);
    Some(format!("{y:04}-{m:02}-{d:02}"))
}

/// The error for a request an object cannot satisfy; it names the class.
fn unexpected_object(o: &RawObject<'_>, exp: &dyn Expected) -> CodecError {
    let what = format!("Python object {}", describe(o.module, o.name, o.ext));
    de::Error::invalid_type(Unexpected::Other(&what), exp)
}

fn unexpected<'a>(token: &Token<'a>) -> Unexpected<'a> {
    match *token {
        Token::Nil => Unexpected::Unit,
        Token::Bool(b) => Unexpected::Bool(b),
        Token::Int(n) => Unexpected::Signed(n),
        Token::UInt(n) => Unexpected::Unsigned(n),
        Token::F32(f) => Unexpected::Float(f64::from(f)),
        Token::F64(f) => Unexpected::Float(f),
        Token::Str(s) => std::str::from_utf8(s).map_or(Unexpected::Bytes(s), Unexpected::Str),
        Token::Bin(b) => Unexpected::Bytes(b),
        Token::Array(_) => Unexpected::Seq,
        Token::Map(_) => Unexpected::Map,
        Token::Ext(_) => Unexpected::Other("a Python object"),
    }
}

/// What an `lc: 2` map describes.
#[derive(Clone, Copy)]
enum Lc2<'a> {
    Object(RawObject<'a>),
    Bytes(&'a [u8]),
    /// A NaN or infinite float, as `float()` spells it.
    Float(&'static str),
    /// A map's `n` entries at the cursor.
    Dict(Cursor<'a>, usize),
}

impl<'a> Lc2<'a> {
    fn entries(self) -> [(&'static str, Part<'a>); 7] {
        let none = || Part::Values(Cursor::new(&[]), 0);
        let no_kwargs = || Part::Kwargs(Cursor::new(&[]), 0);
        let (id, ext, method, args, kwargs) = match self {
            Lc2::Object(o) => (
                Part::Id(o.module, o.name),
                Part::U64(u64::from(o.ext)),
                o.method.map_or(Part::Nil, Part::Str),
                match o.args {
                    RawArgs::Values(at, n) => Part::Values(at, n),
                    RawArgs::Keywords(..) => none(),
                },
                match o.args {
                    RawArgs::Keywords(at, n) => Part::Kwargs(at, n),
                    RawArgs::Values(..) => no_kwargs(),
                },
            ),
            Lc2::Bytes(b) => (
                Part::Id("builtins", "bytes"),
                Part::Nil,
                Part::Str("fromhex"),
                Part::OneHex(b),
                no_kwargs(),
            ),
            Lc2::Float(text) => (
                Part::Id("builtins", "float"),
                Part::Nil,
                Part::Nil,
                Part::OneStr(text),
                no_kwargs(),
            ),
            Lc2::Dict(at, n) => (
                Part::Id("builtins", "dict"),
                Part::Nil,
                Part::Nil,
                Part::OneEntries(at, n),
                no_kwargs(),
            ),
        };
        [
            ("lc", Part::U64(2)),
            ("type", Part::Str("constructor")),
            ("id", id),
            ("ext", ext),
            ("method", method),
            ("args", args),
            ("kwargs", kwargs),
        ]
    }
}

fn lc2<'a, V: Visitor<'a>>(lc2: Lc2<'a>, visitor: V) -> Result<V::Value> {
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
/// `_DeltaSnapshot`; bytes are shown as bytes and floats as floats; other values read
/// naturally.
macro_rules! see_through {
    ($($method:ident $(($($arg:ident: $ty:ty),*))?;)*) => {$(
        fn $method<V: Visitor<'a>>(self, $($($arg: $ty,)*)? visitor: V) -> Result<V::Value> {
            self.take(|cursor| match cursor.head()? {
                Token::Ext(len) => match cursor.open_ext(len, None)? {
                    Ext::Snapshot(mut inner) => {
                        Next::new(&mut inner).$method($($($arg,)*)? visitor)
                    }
                    Ext::Object(o) => match o.single() {
                        Some(mut arg) => Next::new(&mut arg).$method($($($arg,)*)? visitor),
                        None => Err(unexpected_object(&o, &visitor)),
                    },
                },
                Token::Bin(b) => visitor.visit_borrowed_bytes(b),
                // A typed request reads any float as a float (only a request for any value
                // sees a NaN or an infinity in its `builtins.float` form).
                Token::F32(f) => visitor.visit_f32(f),
                Token::F64(f) => visitor.visit_f64(f),
                token => any(token, cursor, visitor),
            })
        }
    )*};
}

impl<'a> Deserializer<'a> for Next<'a, '_> {
    type Error = CodecError;

    fn deserialize_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value> {
        self.take(|cursor| {
            let token = cursor.head()?;
            any(token, cursor, visitor)
        })
    }

    see_through! {
        deserialize_bool; deserialize_i8; deserialize_i16; deserialize_i32; deserialize_i64;
        deserialize_i128; deserialize_u8; deserialize_u16; deserialize_u32; deserialize_u64;
        deserialize_u128; deserialize_f32; deserialize_f64; deserialize_char;
        deserialize_bytes; deserialize_byte_buf; deserialize_unit;
        deserialize_unit_struct(name: &'static str); deserialize_identifier;
    }

    fn deserialize_str<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value> {
        self.take(|cursor| match cursor.head()? {
            Token::Str(bytes) => visitor.visit_borrowed_str(utf8(bytes)?),
            Token::Ext(len) => match cursor.open_ext(len, None)? {
                Ext::Snapshot(mut inner) => Next::new(&mut inner).deserialize_str(visitor),
                Ext::Object(o) => match o.single() {
                    Some(mut arg) => Next::new(&mut arg).deserialize_str(visitor),
                    None => match iso_date(&o) {
                        Some(date) => visitor.visit_string(date),
                        None => Err(unexpected_object(&o, &visitor)),
                    },
                },
            },
            Token::Bin(b) => visitor.visit_borrowed_bytes(b),
            token => any(token, cursor, visitor),
        })
    }

    fn deserialize_string<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value> {
        let mut ahead = *self.cursor;
        match ahead.head()? {
            Token::Nil => self.take(|cursor| {
                *cursor = ahead;
                visitor.visit_none()
            }),
            Token::Ext(len) => match ahead.open_ext(len, None) {
                Ok(Ext::Snapshot(mut inner)) => self.take(|cursor| {
                    *cursor = ahead;
                    Next::new(&mut inner).deserialize_option(visitor)
                }),
                // An object (or a bad extension, which reading it refuses).
                _ => visitor.visit_some(self),
            },
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value> {
        self.take(|cursor| match cursor.head()? {
            Token::Array(n) => inside(cursor, |c| visit_seq(visitor, Items::new(c, n))),
            Token::Bin(b) => SeqDeserializer::new(b.iter().copied()).deserialize_any(visitor),
            Token::Ext(len) => match cursor.open_ext(len, None)? {
                Ext::Snapshot(mut inner) => Next::new(&mut inner).deserialize_seq(visitor),
                Ext::Object(o) => match (o.ext, o.single(), o.args) {
                    (_, Some(mut arg), _) => Next::new(&mut arg).deserialize_seq(visitor),
                    (EXT_POS_ARGS, _, RawArgs::Values(mut at, n)) => {
                        visit_seq(visitor, Items::new(&mut at, n))
                    }
                    (EXT_KW_ARGS, _, RawArgs::Keywords(mut at, n)) => {
                        visit_seq(visitor, KwargValues::new(&mut at, n))
                    }
                    _ => Err(unexpected_object(&o, &visitor)),
                },
            },
            token => any(token, cursor, visitor),
        })
    }

    fn deserialize_tuple<V: Visitor<'a>>(self, _len: usize, visitor: V) -> Result<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value> {
        self.take(|cursor| match cursor.head()? {
            // Written back, its entries would make an object: shown as the dict it is.
            Token::Map(n) if cursor.map_shape(n)?.lc2_with_ext => dict(cursor, n, visitor),
            Token::Map(n) => inside(cursor, |c| visit_map(visitor, Entries::new(c, n))),
            Token::Ext(len) => match cursor.open_ext(len, None)? {
                Ext::Snapshot(mut inner) => Next::new(&mut inner).deserialize_map(visitor),
                Ext::Object(o) => match (o.single(), o.args) {
                    (_, RawArgs::Keywords(mut at, n)) => {
                        visit_map(visitor, Kwargs::new(&mut at, n))
                    }
                    (Some(mut arg), _) => Next::new(&mut arg).deserialize_map(visitor),
                    (None, _) => lc2(Lc2::Object(o), visitor),
                },
            },
            token => any(token, cursor, visitor),
        })
    }

    fn deserialize_struct<V: Visitor<'a>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        if fields.contains(&"lc") {
            // A struct mirroring the `lc: 2` form reads that form.
            return self.deserialize_any(visitor);
        }
        self.take(|cursor| match cursor.head()? {
            Token::Map(n) => inside(cursor, |c| visit_map(visitor, Entries::new(c, n))),
            Token::Array(n) => inside(cursor, |c| visit_seq(visitor, Items::new(c, n))),
            Token::Ext(len) => match cursor.open_ext(len, None)? {
                Ext::Snapshot(mut inner) => {
                    Next::new(&mut inner).deserialize_struct(name, fields, visitor)
                }
                Ext::Object(o) => match (o.single(), o.args) {
                    (_, RawArgs::Keywords(mut at, n)) => {
                        visit_map(visitor, Kwargs::new(&mut at, n))
                    }
                    (Some(mut arg), _) => {
                        Next::new(&mut arg).deserialize_struct(name, fields, visitor)
                    }
                    (None, _) => lc2(Lc2::Object(o), visitor),
                },
            },
            token => any(token, cursor, visitor),
        })
    }

    fn deserialize_enum<V: Visitor<'a>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        let expected = &"an enum: a string or a map of one entry";
        self.take(|cursor| match cursor.head()? {
            Token::Str(bytes) => visitor.visit_enum(EnumDe::Unit(utf8(bytes)?)),
            Token::Map(1) => inside(cursor, |c| visitor.visit_enum(EnumDe::Entry(c))),
            Token::Map(n) => Err(de::Error::invalid_length(n, expected)),
            Token::Ext(len) => match cursor.open_ext(len, None)? {
                Ext::Snapshot(mut inner) => {
                    Next::new(&mut inner).deserialize_enum(name, variants, visitor)
                }
                Ext::Object(o) => match o.single() {
                    Some(mut arg) => Next::new(&mut arg).deserialize_enum(name, variants, visitor),
                    None => Err(unexpected_object(&o, &visitor)),
                },
            },
            token => Err(de::Error::invalid_type(unexpected(&token), expected)),
        })
    }

    fn deserialize_ignored_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value> {
        self.take(|cursor| {
            cursor.pass()?;
            visitor.visit_unit()
        })
    }

    fn is_human_readable(&self) -> bool {
        true
    }
}

/// A part of the `lc: 2` map shown for an object, bytes or a dict.
#[derive(Clone, Copy)]
enum Part<'a> {
    /// A string.
    Str(&'a str),
    /// An unsigned integer.
    U64(u64),
    /// `null`.
    Nil,
    /// An `lc: 2` id: the module's parts, then the class name.
    Id(&'a str, &'a str),
    /// This many values from the cursor, as a sequence.
    Values(Cursor<'a>, usize),
    /// This many keyword arguments from the cursor, as a map.
    Kwargs(Cursor<'a>, usize),
    /// Bytes as hex text.
    Hex(&'a [u8]),
    /// `[hex]`: the arguments of `bytes.fromhex`.
    OneHex(&'a [u8]),
    /// `[text]`: the arguments of `float`.
    OneStr(&'a str),
    /// `[[key, value], ...]`: this many map entries from the cursor, as pairs.
    Entries(Cursor<'a>, usize),
    /// `[[[key, value], ...]]`: the arguments of `dict`.
    OneEntries(Cursor<'a>, usize),
}

impl<'a> Part<'a> {
    /// Where the values the part holds in the input are, and how many there are.
    fn values(self) -> (Cursor<'a>, usize) {
        match self {
            Part::Values(at, n) => (at, n),
            Part::Kwargs(at, n) | Part::Entries(at, n) | Part::OneEntries(at, n) => {
                (at, n.saturating_mul(2))
            }
            _ => (Cursor::new(&[]), 0),
        }
    }
}

/// A part handed to a visitor: the values it holds in the input are read, or marked unread
/// if the visitor fails on the part or leaves it.
struct PartDe<'a> {
    part: Part<'a>,
    /// Whether a `deserialize_*` method took the part.
    taken: bool,
}

impl Drop for PartDe<'_> {
    fn drop(&mut self) {
        if !self.taken {
            self.part.values().0.mark_unread();
        }
    }
}

impl<'a> PartDe<'a> {
    fn new(part: Part<'a>) -> Self {
        PartDe { part, taken: false }
    }

    /// Runs `read` on the part; on failure, marks the values it holds unread.
    fn take<R>(mut self, read: impl FnOnce(Part<'a>) -> Result<R>) -> Result<R> {
        self.taken = true;
        let result = read(self.part);
        if result.is_err() {
            self.part.values().0.mark_unread();
        }
        result
    }
}

impl<'a> Deserializer<'a> for PartDe<'a> {
    type Error = CodecError;

    fn deserialize_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value> {
        self.take(|part| match part {
            Part::Str(s) => visitor.visit_borrowed_str(s),
            Part::U64(n) => visitor.visit_u64(n),
            Part::Nil => visitor.visit_unit(),
            Part::Id(module, name) => visit_seq(
                visitor,
                IdSeq {
                    parts: module.split('.'),
                    name: Some(name),
                    rest: module.split('.').count() + 1,
                },
            ),
            Part::Values(mut at, n) => visit_seq(visitor, Items::new(&mut at, n)),
            Part::Kwargs(mut at, n) => visit_map(visitor, Kwargs::new(&mut at, n)),
            Part::Hex(b) => visitor.visit_string(hex::encode(b)),
            Part::OneHex(b) => visit_seq(visitor, Fixed::new([Some(Part::Hex(b)), None])),
            Part::OneStr(s) => visit_seq(visitor, Fixed::new([Some(Part::Str(s)), None])),
            Part::Entries(mut at, n) => visit_seq(visitor, Pairs::new(&mut at, n)),
            Part::OneEntries(at, n) => {
                visit_seq(visitor, Fixed::new([Some(Part::Entries(at, n)), None]))
            }
        })
    }

    fn deserialize_option<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value> {
        match self.part {
            Part::Nil => self.take(|_| visitor.visit_none()),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        self.take(|part| match part {
            Part::Str(s) => visitor.visit_enum(EnumDe::Unit(s)),
            _ => Err(de::Error::invalid_type(
                Unexpected::Other("a part of a Python object"),
                &"an enum: a string or a map of one entry",
            )),
        })
    }

    fn deserialize_ignored_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value> {
        self.take(|part| {
            let (mut at, n) = part.values();
            for _ in 0..n {
                at.pass()?;
            }
            visitor.visit_unit()
        })
    }

    fn is_human_readable(&self) -> bool {
        true
    }

    forward_to_deserialize_any! {
        <W: Visitor<'a>>
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct identifier
    }
}

/// A map entry at a cursor as a `[key, value]` pair.
struct Pair<'a, 'r> {
    cursor: &'r mut Cursor<'a>,
    taken: bool,
}

impl Drop for Pair<'_, '_> {
    fn drop(&mut self) {
        if !self.taken {
            self.cursor.skip_unread();
            self.cursor.skip_unread();
        }
    }
}

impl<'a> Deserializer<'a> for Pair<'a, '_> {
    type Error = CodecError;

    fn deserialize_any<V: Visitor<'a>>(mut self, visitor: V) -> Result<V::Value> {
        self.taken = true;
        let start = self.cursor.mark();
        let result = visit_seq(visitor, Items::new(&mut *self.cursor, 2));
        if result.is_err() {
            self.cursor.reset(start);
            self.cursor.skip_unread();
            self.cursor.skip_unread();
        }
        result
    }

    fn deserialize_option<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value> {
        Err(de::Error::invalid_type(
            Unexpected::Other("a part of a Python object"),
            &"an enum: a string or a map of one entry",
        ))
    }

    fn is_human_readable(&self) -> bool {
        true
    }

    forward_to_deserialize_any! {
        <W: Visitor<'a>>
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

/// `n` values at a cursor.
struct Items<'a, 'r> {
    cursor: &'r mut Cursor<'a>,
    left: usize,
}

impl<'a, 'r> Items<'a, 'r> {
    fn new(cursor: &'r mut Cursor<'a>, n: usize) -> Self {
        Items { cursor, left: n }
    }
}

impl<'a> SeqAccess<'a> for Items<'a, '_> {
    type Error = CodecError;

    fn next_element_seed<T: DeserializeSeed<'a>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(Next::new(self.cursor)).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.left)
    }
}

impl Rest for Items<'_, '_> {
    fn rest(&self) -> usize {
        self.left
    }
}

/// The values of `n` keyword arguments at a cursor.
struct KwargValues<'a, 'r>(Items<'a, 'r>);

impl<'a, 'r> KwargValues<'a, 'r> {
    fn new(cursor: &'r mut Cursor<'a>, n: usize) -> Self {
        KwargValues(Items::new(cursor, n))
    }
}

impl<'a> SeqAccess<'a> for KwargValues<'a, '_> {
    type Error = CodecError;

    fn next_element_seed<T: DeserializeSeed<'a>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        if self.0.left > 0 {
            // The key.
            self.0.cursor.pass()?;
        }
        self.0.next_element_seed(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl Rest for KwargValues<'_, '_> {
    fn rest(&self) -> usize {
        self.0.left
    }
}

/// `n` map entries at a cursor as `[key, value]` pairs.
struct Pairs<'a, 'r>(Items<'a, 'r>);

impl<'a, 'r> Pairs<'a, 'r> {
    fn new(cursor: &'r mut Cursor<'a>, n: usize) -> Self {
        Pairs(Items::new(cursor, n))
    }
}

impl<'a> SeqAccess<'a> for Pairs<'a, '_> {
    type Error = CodecError;

    fn next_element_seed<T: DeserializeSeed<'a>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        if self.0.left == 0 {
            return Ok(None);
        }
        self.0.left -= 1;
        let pair = Pair {
            cursor: self.0.cursor,
            taken: false,
        };
        seed.deserialize(pair).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl Rest for Pairs<'_, '_> {
    fn rest(&self) -> usize {
        self.0.left
    }
}

/// One or two parts.
struct Fixed<'a> {
    items: [Option<Part<'a>>; 2],
    index: usize,
}

impl<'a> Fixed<'a> {
    fn new(items: [Option<Part<'a>>; 2]) -> Self {
        Fixed { items, index: 0 }
    }
}

impl<'a> SeqAccess<'a> for Fixed<'a> {
    type Error = CodecError;

    fn next_element_seed<T: DeserializeSeed<'a>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        let Some(item) = self.items.get(self.index).copied().flatten() else {
            return Ok(None);
        };
        self.index += 1;
        seed.deserialize(PartDe::new(item)).map(Some)
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

impl<'a> SeqAccess<'a> for IdSeq<'a> {
    type Error = CodecError;

    fn next_element_seed<T: DeserializeSeed<'a>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        let Some(part) = self.parts.next().or_else(|| self.name.take()) else {
            return Ok(None);
        };
        self.rest -= 1;
        seed.deserialize(PartDe::new(Part::Str(part))).map(Some)
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

/// `n` map entries at a cursor; keys of any type.
struct Entries<'a, 'r> {
    cursor: &'r mut Cursor<'a>,
    left: usize,
    /// Whether a key was handed out and its value not yet.
    value: bool,
}

impl<'a, 'r> Entries<'a, 'r> {
    fn new(cursor: &'r mut Cursor<'a>, n: usize) -> Self {
        Entries {
            cursor,
            left: n,
            value: false,
        }
    }
}

impl<'a> MapAccess<'a> for Entries<'a, '_> {
    type Error = CodecError;

    fn next_key_seed<K: DeserializeSeed<'a>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        if std::mem::take(&mut self.value) {
            // The value of the key before, never asked for.
            self.cursor.pass()?;
        }
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        self.value = true;
        seed.deserialize(Next::new(self.cursor)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'a>>(&mut self, seed: V) -> Result<V::Value> {
        if !std::mem::take(&mut self.value) {
            return Err(de::Error::custom(
                "a map value was asked for before its key",
            ));
        }
        seed.deserialize(Next::new(self.cursor))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.left)
    }
}

impl Drop for Entries<'_, '_> {
    fn drop(&mut self) {
        if self.value {
            // The value of the last key handed out, never asked for.
            self.cursor.skip_unread();
        }
    }
}

impl Rest for Entries<'_, '_> {
    fn rest(&self) -> usize {
        self.left
    }
}

/// `n` keyword arguments at a cursor: string keys.
struct Kwargs<'a, 'r>(Entries<'a, 'r>);

impl<'a, 'r> Kwargs<'a, 'r> {
    fn new(cursor: &'r mut Cursor<'a>, n: usize) -> Self {
        Kwargs(Entries::new(cursor, n))
    }
}

impl<'a> MapAccess<'a> for Kwargs<'a, '_> {
    type Error = CodecError;

    fn next_key_seed<K: DeserializeSeed<'a>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        let map = &mut self.0;
        if std::mem::take(&mut map.value) {
            map.cursor.pass()?;
        }
        if map.left == 0 {
            return Ok(None);
        }
        map.left -= 1;
        let Token::Str(key) = map.cursor.head()? else {
            return Err(de::Error::custom(
                "a keyword argument's name is not a string",
            ));
        };
        map.value = true;
        seed.deserialize(PartDe::new(Part::Str(utf8(key)?)))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'a>>(&mut self, seed: V) -> Result<V::Value> {
        self.0.next_value_seed(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl Rest for Kwargs<'_, '_> {
    fn rest(&self) -> usize {
        self.0.left
    }
}

/// The seven entries of an `lc: 2` map.
struct FixedMap<'a> {
    entries: [(&'static str, Part<'a>); 7],
    index: usize,
}

impl<'a> MapAccess<'a> for FixedMap<'a> {
    type Error = CodecError;

    fn next_key_seed<K: DeserializeSeed<'a>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        match self.entries.get(self.index) {
            Some((key, _)) => seed.deserialize(PartDe::new(Part::Str(key))).map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'a>>(&mut self, seed: V) -> Result<V::Value> {
        let Some((_, value)) = self.entries.get(self.index).copied() else {
            return Err(de::Error::custom(
                "a map value was asked for after the last key",
            ));
        };
        self.index += 1;
        seed.deserialize(PartDe::new(value))
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

/// An externally tagged enum: a string (a unit variant), or the one entry of a map at a
/// cursor (the variant, then its payload).
enum EnumDe<'a, 'r> {
    Unit(&'a str),
    Entry(&'r mut Cursor<'a>),
}

impl<'a, 'r> EnumAccess<'a> for EnumDe<'a, 'r> {
    type Error = CodecError;
    type Variant = VariantDe<'a, 'r>;

    fn variant_seed<V: DeserializeSeed<'a>>(self, seed: V) -> Result<(V::Value, Self::Variant)> {
        match self {
            EnumDe::Unit(s) => Ok((
                seed.deserialize(PartDe::new(Part::Str(s)))?,
                VariantDe(None),
            )),
            EnumDe::Entry(cursor) => {
                let variant = seed.deserialize(Next::new(&mut *cursor))?;
                Ok((variant, VariantDe(Some(Next::new(cursor)))))
            }
        }
    }
}

/// An enum variant's payload, if it has one.
struct VariantDe<'a, 'r>(Option<Next<'a, 'r>>);

impl<'a> VariantAccess<'a> for VariantDe<'a, '_> {
    type Error = CodecError;

    fn unit_variant(self) -> Result<()> {
        let Some(value) = self.0 else {
            return Ok(());
        };
        value.take(|cursor| match cursor.head()? {
            Token::Nil => Ok(()),
            token => Err(de::Error::invalid_type(unexpected(&token), &"unit variant")),
        })
    }

    fn newtype_variant_seed<T: DeserializeSeed<'a>>(self, seed: T) -> Result<T::Value> {
        match self.0 {
            Some(value) => seed.deserialize(value),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"newtype variant",
            )),
        }
    }

    fn tuple_variant<V: Visitor<'a>>(self, _len: usize, visitor: V) -> Result<V::Value> {
        match self.0 {
            Some(value) => value.deserialize_seq(visitor),
            None => Err(de::Error::invalid_type(Unexpected::UnitVariant, &visitor)),
        }
    }

    fn struct_variant<V: Visitor<'a>>(
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
