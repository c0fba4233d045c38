//! msgpack bytes as LangGraph writes them, read by the reader's rules (strict, bounded by
//! the input, never panicking): [`check`] applies them all, with their errors, and [`read`]
//! reads a [`Node`] tree from bytes that passed.
//!
//! What reads values shares the pieces here: a [`Cursor`] hands out one [`Token`] at a time
//! and knows how deep it is, [`Cursor::open_ext`] opens an extension (a `_DeltaSnapshot`, or
//! a Python object split by [`RawObject::open`] into its class, method and where its
//! arguments are) checking the extension's own rules, and [`Cursor::pass`] moves past a value
//! checking it whole. The deserializer in `de.rs` reads with the same pieces, so what it
//! accepts is what [`check`] accepts; [`Reading`] is what it keeps for a whole input (whether
//! a value was left unread, and how its maps are shown).

use std::cell::{Cell, OnceCell};

use super::codec::{
    DELTA_SNAPSHOT_MODULE, EXT_DELTA_SNAPSHOT, EXT_KW_ARGS, EXT_METHOD_SINGLE_ARG, EXT_NUMPY_ARRAY,
    EXT_POS_ARGS, EXT_PYDANTIC_V1, EXT_PYDANTIC_V2, EXT_SINGLE_ARG, MAX_DEPTH, describe,
    method_problem, numpy_problem,
};
use super::{Node, PyObject};
use crate::Error;
use crate::serde::TAG_MSGPACK;

/// Elements preallocated for a collection at most; the rest grows as elements are read, so a
/// claimed length costs memory only once the input backs it.
const PREALLOCATE: usize = 1024;

/// Checks that `bytes` hold exactly one value the reader accepts. `Ok` says whether it holds
/// a Python object; an error comes with whether one was met before it.
pub(super) fn check(bytes: &[u8]) -> Result<bool, (Error, bool)> {
    let mut cursor = Cursor::new(bytes);
    let mut python = false;
    match cursor.validate(&mut python).and_then(|()| cursor.end()) {
        Ok(()) => Ok(python),
        Err(fail) => Err((fail.into_error(), python)),
    }
}

/// Whether the msgpack value `bytes` begin with holds a NaN or infinite float outside
/// extensions (Python objects, which rmp-serde does not read as data); `false` when the bytes
/// end or break off first. Bytes with no float marker before an exponent of all ones are
/// answered without reading the structure (such bytes inside an integer or `bin` data only
/// make it read; UTF-8 text never holds them).
pub(crate) fn has_non_finite_float(bytes: &[u8]) -> bool {
    let mut rest = bytes;
    let mut marker = false;
    while let Some(at) = memchr::memchr2(0xca, 0xcb, rest) {
        marker = match rest.get(at + 1..at + 3) {
            Some(&[high, low]) if rest[at] == 0xcb => high & 0x7f == 0x7f && low & 0xf0 == 0xf0,
            Some(&[high, low]) => high & 0x7f == 0x7f && low & 0x80 == 0x80,
            _ => false,
        };
        if marker {
            break;
        }
        rest = &rest[at + 1..];
    }
    marker
        && Cursor::new(bytes)
            .skip_until(|token| match *token {
                Token::F32(f) => !f.is_finite(),
                Token::F64(f) => !f.is_finite(),
                _ => false,
            })
            .unwrap_or(false)
}

/// Reads the one value `bytes` hold; an error comes with whether an extension was met.
pub(super) fn read(bytes: &[u8]) -> Result<(Node, bool), (Error, bool)> {
    let python = check(bytes)?;
    Cursor::new(bytes)
        .value()
        .map(|node| (node, python))
        .map_err(|fail| (fail.into_error(), python))
}

/// One step of the path to a failure.
enum Segment {
    Index(usize),
    Key(String),
}

/// A read failure: what went wrong, and where (boxed, so a `Read` stays small on the hot
/// path).
pub(super) struct Fail(Box<Failure>);

/// What went wrong, and where (segments innermost first).
struct Failure {
    message: String,
    path: Vec<Segment>,
}

impl Fail {
    fn new(message: impl Into<String>) -> Fail {
        Fail(Box::new(Failure {
            message: message.into(),
            path: Vec::new(),
        }))
    }

    /// The same failure one level further out, under `segment`.
    fn at(mut self, segment: Segment) -> Fail {
        self.0.path.push(segment);
        self
    }

    /// The same failure, its message prefixed with `context` unless it already names an
    /// extension type (the innermost context is the useful one).
    fn context(mut self, context: &str) -> Fail {
        if !self.0.message.contains("msgpack extension type") {
            self.0.message = format!("{context}: {}", self.0.message);
        }
        self
    }

    /// What went wrong, without the path.
    pub(super) fn message(&self) -> &str {
        &self.0.message
    }

    fn into_error(self) -> Error {
        let Failure {
            message,
            path: segments,
        } = *self.0;
        let mut path = String::new();
        for segment in segments.iter().rev() {
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
            message,
        }
    }
}

pub(super) type Read<T> = Result<T, Fail>;

/// The head of a msgpack value: a scalar whole, or what a container holds.
#[derive(Clone, Copy, Debug)]
pub(super) enum Token<'a> {
    Nil,
    Bool(bool),
    /// A negative integer (non-negative ones are [`Token::UInt`], however written).
    Int(i64),
    UInt(u64),
    F32(f32),
    F64(f64),
    /// A string's bytes, not yet checked to be UTF-8 (see [`utf8`]).
    Str(&'a [u8]),
    Bin(&'a [u8]),
    /// An array of this many values, which follow.
    Array(usize),
    /// A map of this many entries, which follow (key, value, key, ...).
    Map(usize),
    /// An extension with a payload of this many bytes: its type byte and the payload follow.
    Ext(usize),
}

/// A string's bytes as `&str`, or the reader's error.
#[inline]
pub(super) fn utf8(bytes: &[u8]) -> Read<&str> {
    std::str::from_utf8(bytes).map_err(not_utf8)
}

#[cold]
fn not_utf8(e: std::str::Utf8Error) -> Fail {
    Fail::new(format!("a string is not UTF-8: {e}"))
}

/// A position in msgpack input (or in an extension's payload inside it), and the nesting of
/// the values read from there.
#[derive(Clone, Copy)]
pub(super) struct Cursor<'a> {
    input: &'a [u8],
    pos: usize,
    /// The offset of `input` in the whole input.
    base: usize,
    /// Arrays, maps, extensions and extension payloads around the next value.
    depth: usize,
    /// What the deserializer keeps for the whole input, if this cursor is one of its.
    reading: Option<&'a Reading<'a>>,
}

/// What the deserializer keeps for the whole input while it reads it.
pub(super) struct Reading<'a> {
    /// The whole input.
    input: &'a [u8],
    /// Set when a value is moved past unread (see [`Cursor::skip_unread`]).
    unread: Cell<bool>,
    /// Bytes gone over so far to work out maps' shapes one by one.
    scanned: Cell<usize>,
    /// The maps that are not plain, by the offset of their entries, worked out in one pass
    /// over the input once working them out one by one has gone over more than
    /// [`SCAN_BUDGET`] times the input (which nested maps make quadratic); `None` if the input
    /// is broken.
    maps: OnceCell<Option<Vec<(usize, MapShape)>>>,
}

/// How many times its length a decode goes over the input to work out maps' shapes one by
/// one, before it works them all out in one pass.
const SCAN_BUDGET: usize = 4;

impl<'a> Reading<'a> {
    /// Nothing read of `input` yet.
    pub(super) fn new(input: &'a [u8]) -> Self {
        Reading {
            input,
            unread: Cell::new(false),
            scanned: Cell::new(0),
            maps: OnceCell::new(),
        }
    }

    /// A cursor at the start.
    pub(super) fn cursor(&'a self) -> Cursor<'a> {
        Cursor {
            reading: Some(self),
            ..Cursor::new(self.input)
        }
    }

    /// Whether a value was moved past unread.
    pub(super) fn left_unread(&self) -> bool {
        self.unread.get()
    }

    /// The whole input.
    pub(super) fn input(&self) -> &'a [u8] {
        self.input
    }
}

/// What the keys of a map say about how it is shown to a request for any value or a map.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct MapShape {
    /// Whether every key is a string.
    pub(super) string_keys: bool,
    /// Whether the map has the shape of an `lc: 2` constructor map carrying `ext`: keys `lc`
    /// equal to 2, `type` equal to `"constructor"` (the last of each wins, as in a Python
    /// dict), and `ext`.
    pub(super) lc2_with_ext: bool,
}

impl MapShape {
    /// String keys only, not shaped like an `lc: 2` map.
    pub(super) const PLAIN: MapShape = MapShape {
        string_keys: true,
        lc2_with_ext: false,
    };

    /// The shape of the `n` entries at `cursor` (a copy: it does not move), following only
    /// their structure; and how many bytes they take.
    fn scan(mut cursor: Cursor<'_>, n: usize) -> Read<(MapShape, usize)> {
        let start = cursor.pos;
        let mut shape = ShapeOf::default();
        for _ in 0..n {
            let key = cursor.token()?;
            let seen = cursor.seen_through(key);
            cursor.skip_rest(key)?;
            let value = cursor.token()?;
            shape.entry(seen, cursor.seen_through(value));
            cursor.skip_rest(value)?;
        }
        Ok((shape.finish(n), cursor.pos - start))
    }
}

/// Works out a map's [`MapShape`] from the heads of its keys and values.
#[derive(Default)]
struct ShapeOf {
    other_keys: bool,
    ext: bool,
    lc2: bool,
    constructor: bool,
}

impl ShapeOf {
    fn entry(&mut self, key: Token<'_>, value: Token<'_>) {
        match key {
            Token::Str(b"ext") => self.ext = true,
            Token::Str(b"lc") => self.lc2 = matches!(value, Token::UInt(2)),
            Token::Str(b"type") => {
                self.constructor = matches!(value, Token::Str(b"constructor"));
            }
            Token::Str(_) => {}
            _ => self.other_keys = true,
        }
    }

    fn finish(self, n: usize) -> MapShape {
        MapShape {
            string_keys: !self.other_keys,
            lc2_with_ext: n >= 3 && self.ext && self.lc2 && self.constructor,
        }
    }
}

/// The maps of `input` that are not plain, by the offset of their entries (in one pass,
/// following the structure into extensions' payloads); `None` if the input is broken or
/// nested deeper than the reader accepts, which the reader refuses.
fn maps_of(input: &[u8]) -> Option<Vec<(usize, MapShape)>> {
    fn walk(
        cursor: &mut Cursor<'_>,
        token: Token<'_>,
        depth: usize,
        out: &mut Vec<(usize, MapShape)>,
    ) -> Read<()> {
        match token {
            Token::Array(n) => {
                let inner = Cursor::deeper(depth)?;
                for _ in 0..n {
                    let item = cursor.token()?;
                    walk(cursor, item, inner, out)?;
                }
            }
            Token::Map(n) => {
                let inner = Cursor::deeper(depth)?;
                let at = cursor.offset();
                let mut shape = ShapeOf::default();
                for _ in 0..n {
                    let key = cursor.token()?;
                    let seen = cursor.seen_through(key);
                    walk(cursor, key, inner, out)?;
                    let value = cursor.token()?;
                    shape.entry(seen, cursor.seen_through(value));
                    walk(cursor, value, inner, out)?;
                }
                let shape = shape.finish(n);
                if shape != MapShape::PLAIN {
                    out.push((at, shape));
                }
            }
            Token::Ext(len) => {
                let inner = Cursor::deeper(depth)?;
                let (_, mut payload) = cursor.ext_payload(len)?;
                while payload.remaining() > 0 {
                    let value = payload.token()?;
                    walk(&mut payload, value, inner, out)?;
                }
            }
            _ => {}
        }
        Ok(())
    }
    let mut cursor = Cursor::new(input);
    let mut out = Vec::new();
    let token = cursor.token().ok()?;
    walk(&mut cursor, token, 0, &mut out).ok()?;
    // Pushed as each map ended: inner ones first.
    out.sort_unstable_by_key(|&(at, _)| at);
    Some(out)
}

/// What an extension holds.
pub(super) enum Ext<'a> {
    /// A `_DeltaSnapshot`: the cursor is at the value it wraps.
    Snapshot(Cursor<'a>),
    /// A Python object.
    Object(RawObject<'a>),
}

impl<'a> Cursor<'a> {
    /// The start of `input`, at the top level.
    pub(super) fn new(input: &'a [u8]) -> Cursor<'a> {
        Cursor {
            input,
            pos: 0,
            base: 0,
            depth: 0,
            reading: None,
        }
    }

    /// Where the cursor is, to come back to with [`Cursor::reset`].
    pub(super) fn mark(&self) -> (usize, usize) {
        (self.pos, self.depth)
    }

    /// Back to a [`Cursor::mark`] of this cursor.
    pub(super) fn reset(&mut self, (pos, depth): (usize, usize)) {
        (self.pos, self.depth) = (pos, depth);
    }

    /// The offset of the position in the whole input.
    fn offset(&self) -> usize {
        self.base + self.pos
    }

    /// After the head `token`: what readers see of that value's head. They see through a
    /// `_DeltaSnapshot` to the value it wraps, so a map's shape is worked out from that.
    fn seen_through(&self, token: Token<'a>) -> Token<'a> {
        let Token::Ext(len) = token else {
            return token;
        };
        let mut ahead = *self;
        match ahead.ext_payload(len) {
            Ok((code, mut payload)) if u8::try_from(code) == Ok(EXT_DELTA_SNAPSHOT) => {
                match payload.token() {
                    Ok(inner) => payload.seen_through(inner),
                    Err(_) => token,
                }
            }
            _ => token,
        }
    }

    /// After [`Token::Map`]: the shape of that map of `n` entries.
    pub(super) fn map_shape(&self, n: usize) -> Read<MapShape> {
        if n == 0 {
            return Ok(MapShape::PLAIN);
        }
        let Some(reading) = self.reading else {
            return Ok(MapShape::scan(*self, n)?.0);
        };
        let budget = reading.input.len().saturating_mul(SCAN_BUDGET);
        if reading.maps.get().is_none() && reading.scanned.get() < budget {
            let (shape, scanned) = MapShape::scan(*self, n)?;
            reading.scanned.set(reading.scanned.get() + scanned);
            return Ok(shape);
        }
        match reading.maps.get_or_init(|| maps_of(reading.input)) {
            Some(maps) => Ok(
                match maps.binary_search_by_key(&self.offset(), |&(at, _)| at) {
                    Ok(i) => maps[i].1,
                    Err(_) => MapShape::PLAIN,
                },
            ),
            None => Err(Fail::new("the input is broken or nested too deep")),
        }
    }

    /// Bytes left after the position.
    pub(super) fn remaining(&self) -> usize {
        self.input.len() - self.pos
    }

    /// The next `n` bytes.
    #[inline]
    fn take(&mut self, n: usize) -> Read<&'a [u8]> {
        let end = self.pos.saturating_add(n);
        match self.input.get(self.pos..end) {
            Some(bytes) => {
                self.pos = end;
                Ok(bytes)
            }
            None => Err(self.end_of_input(n)),
        }
    }

    #[cold]
    fn end_of_input(&self, n: usize) -> Fail {
        Fail::new(format!(
            "unexpected end of input: {n} bytes needed, {} left",
            self.remaining()
        ))
    }

    fn array<const N: usize>(&mut self) -> Read<[u8; N]> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    #[inline]
    fn u8(&mut self) -> Read<u8> {
        match self.input.get(self.pos) {
            Some(&byte) => {
                self.pos += 1;
                Ok(byte)
            }
            None => Err(self.end_of_input(1)),
        }
    }

    fn u16(&mut self) -> Read<usize> {
        Ok(usize::from(u16::from_be_bytes(self.array()?)))
    }

    fn u32(&mut self) -> Read<usize> {
        let n = u32::from_be_bytes(self.array()?);
        usize::try_from(n).map_err(|_| Fail::new("length beyond this platform"))
    }

    /// Reads the next value's head; a string's or bytes' content is taken with it.
    #[inline(always)]
    pub(super) fn token(&mut self) -> Read<Token<'a>> {
        let marker = self.u8()?;
        Ok(match marker {
            0x00..=0x7f => Token::UInt(u64::from(marker)),
            0x80..=0x8f => Token::Map(usize::from(marker & 0x0f)),
            0x90..=0x9f => Token::Array(usize::from(marker & 0x0f)),
            0xa0..=0xbf => Token::Str(self.take(usize::from(marker & 0x1f))?),
            0xc0 => Token::Nil,
            0xc1 => return Err(Fail::new("reserved marker 0xc1")),
            0xc2 => Token::Bool(false),
            0xc3 => Token::Bool(true),
            0xc4 => {
                let n = usize::from(self.u8()?);
                Token::Bin(self.take(n)?)
            }
            0xc5 => {
                let n = self.u16()?;
                Token::Bin(self.take(n)?)
            }
            0xc6 => {
                let n = self.u32()?;
                Token::Bin(self.take(n)?)
            }
            0xc7 => Token::Ext(usize::from(self.u8()?)),
            0xc8 => Token::Ext(self.u16()?),
            0xc9 => Token::Ext(self.u32()?),
            0xca => Token::F32(f32::from_be_bytes(self.array()?)),
            0xcb => Token::F64(f64::from_be_bytes(self.array()?)),
            0xcc => Token::UInt(u64::from(self.u8()?)),
            0xcd => Token::UInt(u64::from(u16::from_be_bytes(self.array()?))),
            0xce => Token::UInt(u64::from(u32::from_be_bytes(self.array()?))),
            0xcf => Token::UInt(u64::from_be_bytes(self.array()?)),
            0xd0 => int(i64::from(i8::from_be_bytes(self.array()?))),
            0xd1 => int(i64::from(i16::from_be_bytes(self.array()?))),
            0xd2 => int(i64::from(i32::from_be_bytes(self.array()?))),
            0xd3 => int(i64::from_be_bytes(self.array()?)),
            // fixext 1, 2, 4, 8, 16.
            0xd4..=0xd8 => Token::Ext(1 << (marker - 0xd4)),
            0xd9 => {
                let n = usize::from(self.u8()?);
                Token::Str(self.take(n)?)
            }
            0xda => {
                let n = self.u16()?;
                Token::Str(self.take(n)?)
            }
            0xdb => {
                let n = self.u32()?;
                Token::Str(self.take(n)?)
            }
            0xdc => Token::Array(self.u16()?),
            0xdd => Token::Array(self.u32()?),
            0xde => Token::Map(self.u16()?),
            0xdf => Token::Map(self.u32()?),
            0xe0..=0xff => Token::Int(i64::from(marker as i8)),
        })
    }

    /// After a value's head: moves past the rest of it (what a container or extension
    /// holds), following only its structure.
    pub(super) fn skip_rest(&mut self, token: Token<'_>) -> Read<()> {
        let values = match token {
            Token::Array(n) => n,
            Token::Map(n) => n.saturating_mul(2),
            Token::Ext(len) => {
                // The type byte, then the payload.
                self.take(len.saturating_add(1))?;
                0
            }
            _ => 0,
        };
        for _ in 0..values {
            self.skip()?;
        }
        Ok(())
    }

    /// Moves past the next value, following only its structure (lengths), not checking it.
    pub(super) fn skip(&mut self) -> Read<()> {
        self.skip_until(|_| false).map(|_| ())
    }

    /// [`Cursor::skip`], stopping early at the first token (outside extensions) `stop`
    /// accepts; whether it stopped.
    fn skip_until(&mut self, mut stop: impl FnMut(&Token<'a>) -> bool) -> Read<bool> {
        let mut left: usize = 1;
        while left > 0 {
            left -= 1;
            let token = self.token()?;
            if stop(&token) {
                return Ok(true);
            }
            let values = match token {
                Token::Array(n) => n,
                Token::Map(n) => n.saturating_mul(2),
                Token::Ext(len) => {
                    self.take(len.saturating_add(1))?;
                    0
                }
                _ => 0,
            };
            left = left
                .checked_add(values)
                .filter(|&left| left <= self.remaining())
                .ok_or_else(|| Fail::new("a length beyond the input"))?;
        }
        Ok(false)
    }

    /// [`Cursor::token`], refusing a container that claims more items than the input left
    /// can hold.
    #[inline(always)]
    pub(super) fn head(&mut self) -> Read<Token<'a>> {
        let token = self.token()?;
        match token {
            Token::Array(n) => self.count(n, 1, "an array")?,
            Token::Map(n) => self.count(n, 2, "a map")?,
            _ => 0,
        };
        Ok(token)
    }

    /// Moves past the next value, checking it with every rule of the reader.
    pub(super) fn pass(&mut self) -> Read<()> {
        self.validate(&mut false)
    }

    /// Moves past a value its reader left or failed on, following its structure only (as far
    /// as it goes), and says so to the deserializer, which then checks the input whole.
    pub(super) fn skip_unread(&mut self) {
        self.mark_unread();
        let _ = self.skip();
    }

    /// Says to the deserializer that values were left unread.
    pub(super) fn mark_unread(&self) {
        if let Some(reading) = self.reading {
            reading.unread.set(true);
        }
    }

    /// Nothing may follow the value: the input ends here.
    pub(super) fn end(&self) -> Read<()> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(Fail::new(format!("{n} bytes after the value"))),
        }
    }

    /// Goes one level deeper, into a container or extension at this cursor's depth.
    pub(super) fn enter(&mut self) -> Read<()> {
        self.depth = Self::deeper(self.depth)?;
        Ok(())
    }

    /// The depth inside a container or extension at `depth`, if the reader goes there.
    fn deeper(depth: usize) -> Read<usize> {
        if depth >= MAX_DEPTH {
            return Err(Fail::new(format!(
                "nested deeper than {MAX_DEPTH} arrays, maps and extensions"
            )));
        }
        Ok(depth + 1)
    }

    /// After [`Token::Ext`]: the extension's type byte and a cursor over its `len` bytes of
    /// payload (one level deeper).
    fn ext_payload(&mut self, len: usize) -> Read<(i8, Cursor<'a>)> {
        let mut payload = *self;
        payload.enter()?;
        let code = self.u8()? as i8;
        payload.base = self.offset();
        payload.input = self.take(len)?;
        payload.pos = 0;
        Ok((code, payload))
    }

    /// Comes back from [`Cursor::enter`].
    pub(super) fn leave(&mut self) {
        self.depth -= 1;
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

    /// Moves past one value, checking it with every rule of the reader; `python` is set if an
    /// extension is met.
    fn validate(&mut self, python: &mut bool) -> Read<()> {
        match self.token()? {
            Token::Str(bytes) => {
                utf8(bytes)?;
            }
            Token::Array(n) => {
                self.enter()?;
                let n = self.count(n, 1, "an array")?;
                for i in 0..n {
                    self.validate(python).map_err(|f| f.at(Segment::Index(i)))?;
                }
                self.leave();
            }
            Token::Map(n) => {
                self.enter()?;
                let n = self.count(n, 2, "a map")?;
                for _ in 0..n {
                    let key = *self;
                    self.validate(python)?;
                    self.validate(python)
                        .map_err(|f| f.at(Segment::Key(key_text(key))))?;
                }
                self.leave();
            }
            Token::Ext(len) => {
                *python = true;
                self.open_ext(len, Some(python))?;
            }
            _ => {}
        }
        Ok(())
    }

    /// After [`Token::Ext`]: opens the extension of `len` payload bytes, checking its own
    /// rules (a known code, a Python object's payload, nothing after the payload). With
    /// `python`, the values in it are checked whole too; without, they are left to whoever
    /// reads them.
    pub(super) fn open_ext(&mut self, len: usize, python: Option<&mut bool>) -> Read<Ext<'a>> {
        let (code, mut payload) = self.ext_payload(len)?;
        let ext = match u8::try_from(code) {
            Ok(EXT_DELTA_SNAPSHOT) => {
                let value = payload;
                match python {
                    Some(python) => payload.validate(python).map_err(|f| {
                        f.context(&format!(
                            "in a `{DELTA_SNAPSHOT_MODULE}._DeltaSnapshot` (msgpack extension \
                             type 7)"
                        ))
                    })?,
                    None => payload.skip()?,
                }
                Ext::Snapshot(value)
            }
            Ok(code @ EXT_SINGLE_ARG..=EXT_NUMPY_ARRAY) => {
                Ext::Object(RawObject::open(code, &mut payload, python)?)
            }
            _ => return Err(Fail::new(format!("unknown msgpack extension type {code}"))),
        };
        if payload.remaining() > 0 {
            return Err(Fail::new(format!(
                "msgpack extension type {code}: {} bytes after its payload",
                payload.remaining()
            )));
        }
        Ok(ext)
    }

    /// Reads the next value as a tree (from input that passed [`check`]).
    fn value(&mut self) -> Read<Node> {
        Ok(match self.token()? {
            Token::Nil => Node::Nil,
            Token::Bool(b) => Node::Bool(b),
            Token::Int(n) => Node::Int(n),
            Token::UInt(n) => Node::UInt(n),
            Token::F32(f) => Node::F32(f),
            Token::F64(f) => Node::F64(f),
            Token::Str(bytes) => Node::Str(utf8(bytes)?.to_owned()),
            Token::Bin(bytes) => Node::Bin(bytes.to_vec()),
            Token::Array(n) => {
                let mut items = Vec::with_capacity(n.min(PREALLOCATE));
                for _ in 0..n {
                    items.push(self.value()?);
                }
                Node::Array(items)
            }
            Token::Map(n) => {
                let mut entries = Vec::with_capacity(n.min(PREALLOCATE));
                for _ in 0..n {
                    entries.push((self.value()?, self.value()?));
                }
                Node::Map(entries)
            }
            Token::Ext(len) => match self.open_ext(len, None)? {
                Ext::Snapshot(mut value) => Node::DeltaSnapshot(Box::new(value.value()?)),
                Ext::Object(object) => Node::Object(Box::new(object.to_object()?)),
            },
        })
    }
}

/// The text naming the map key at `key` on a path.
fn key_text(mut key: Cursor<'_>) -> String {
    match key.token() {
        Ok(Token::Str(bytes)) => String::from_utf8_lossy(bytes).into_owned(),
        Ok(Token::UInt(n)) => n.to_string(),
        Ok(Token::Int(n)) => n.to_string(),
        _ => "?".to_owned(),
    }
}

/// A signed integer, non-negative ones as [`Token::UInt`].
fn int<'a>(n: i64) -> Token<'a> {
    match u64::try_from(n) {
        Ok(n) => Token::UInt(n),
        Err(_) => Token::Int(n),
    }
}

/// A Python object's payload (extension codes 0-6), split: its class, its method, and where
/// its arguments are.
#[derive(Clone, Copy)]
pub(super) struct RawObject<'a> {
    pub(super) ext: u8,
    pub(super) module: &'a str,
    pub(super) name: &'a str,
    pub(super) method: Option<&'a str>,
    pub(super) args: RawArgs<'a>,
}

/// Where a Python object's arguments are.
#[derive(Clone, Copy)]
pub(super) enum RawArgs<'a> {
    /// This many values from the cursor: one for codes 0 and 3, the positional arguments of
    /// code 1, `[dtype, shape, order, buffer]` for code 6.
    Values(Cursor<'a>, usize),
    /// This many keyword arguments from the cursor, each a string key then its value (codes
    /// 2, 4 and 5).
    Keywords(Cursor<'a>, usize),
}

/// Moves past one value: checked whole with `python`, its structure followed otherwise.
fn pass(cursor: &mut Cursor<'_>, python: &mut Option<&mut bool>) -> Read<()> {
    match python {
        Some(python) => cursor.validate(python),
        None => cursor.skip(),
    }
}

impl<'a> RawObject<'a> {
    /// Opens the payload at `payload` of an object of extension code `code` (0-6), checking
    /// the rules of [`PyObject::new`] and its shape, and moves past it. With `python`, the
    /// values in it are checked whole too, with the reader's errors in the reader's order.
    fn open(code: u8, payload: &mut Cursor<'a>, mut python: Option<&mut bool>) -> Read<Self> {
        let of_code = |what: &str| Fail::new(format!("msgpack extension type {code}: {what}"));
        let len = match payload.u8().map_err(|_| of_code("empty payload"))? {
            marker @ 0x90..=0x9f => usize::from(marker & 0x0f),
            0xdc => payload.u16()?,
            0xdd => payload.u32()?,
            _ => return Err(of_code("the payload is not an array")),
        };
        payload.enter()?;
        if code == EXT_NUMPY_ARRAY {
            if len != 4 {
                return Err(of_code(&format!(
                    "expected [dtype, shape, order, buffer], got {len} items"
                )));
            }
            let mut args = *payload;
            for i in 0..4 {
                pass(payload, &mut python).map_err(|f| f.at(Segment::Index(i)))?;
            }
            let args_at = args;
            let nodes = (0..4).map(|_| args.value()).collect::<Read<Vec<_>>>()?;
            if let Some(what) = numpy_problem(&nodes) {
                return Err(Fail::new(format!(
                    "{}: {what}",
                    describe("numpy", "ndarray", code)
                )));
            }
            return Ok(RawObject {
                ext: code,
                module: "numpy",
                name: "ndarray",
                method: None,
                args: RawArgs::Values(args_at, 4),
            });
        }
        if len < 2 {
            return Err(of_code(&format!(
                "expected [module, name, ...], got {len} items"
            )));
        }
        // A string, or `not_string` once the value in its place has passed.
        let string = |cursor: &mut Cursor<'a>,
                      python: &mut Option<&mut bool>,
                      not_string: &dyn Fn() -> Fail| {
            let start = *cursor;
            if let Token::Str(bytes) = cursor.token()? {
                return utf8(bytes);
            }
            *cursor = start;
            pass(cursor, python)?;
            Err(not_string())
        };
        let module = string(payload, &mut python, &|| {
            of_code("the module is not a string")
        })?;
        let name = string(payload, &mut python, &|| {
            of_code("the class name is not a string")
        })?;
        let describe = || describe(module, name, code);
        let fail = |what: &str| Fail::new(format!("{}: {what}", describe()));
        let arity = match code {
            EXT_METHOD_SINGLE_ARG | EXT_PYDANTIC_V2 => 4,
            _ => 3,
        };
        if len != arity {
            return Err(fail(&format!(
                "expected {arity} items in its payload, got {len}"
            )));
        }
        let arg = *payload;
        if let Some(python) = python.as_deref_mut() {
            payload
                .validate(python)
                .map_err(|f| f.context(&format!("in {}", describe())))?;
        }
        // The argument's structure, and past it.
        let mut after = arg;
        let token = after.token()?;
        let (args, arg_is_str) = match (code, token) {
            (EXT_SINGLE_ARG | EXT_METHOD_SINGLE_ARG, token) => {
                after.skip_rest(token)?;
                (RawArgs::Values(arg, 1), matches!(token, Token::Str(_)))
            }
            (EXT_POS_ARGS, Token::Array(n)) => {
                after.enter()?;
                let items = after;
                for _ in 0..n {
                    after.skip()?;
                }
                after.leave();
                (RawArgs::Values(items, n), false)
            }
            (EXT_KW_ARGS | EXT_PYDANTIC_V1 | EXT_PYDANTIC_V2, Token::Map(n)) => {
                after.enter()?;
                let entries = after;
                for _ in 0..n {
                    let Token::Str(_) = after.token()? else {
                        return Err(fail("a keyword argument's name is not a string"));
                    };
                    after.skip()?;
                }
                after.leave();
                (RawArgs::Keywords(entries, n), false)
            }
            (EXT_POS_ARGS, _) => return Err(fail("the arguments are not an array")),
            _ => return Err(fail("the keyword arguments are not a map")),
        };
        *payload = after;
        let method = match arity {
            4 => Some(string(payload, &mut python, &|| {
                fail("the method is not a string")
            })?),
            _ => None,
        };
        if let Some(what) = method_problem(code, (module, name), method, || arg_is_str) {
            return Err(fail(&what));
        }
        Ok(RawObject {
            ext: code,
            module,
            name,
            method,
            args,
        })
    }

    /// The one argument of a code-0 or code-3 object.
    pub(super) fn single(&self) -> Option<Cursor<'a>> {
        match (self.ext, self.args) {
            (EXT_SINGLE_ARG | EXT_METHOD_SINGLE_ARG, RawArgs::Values(arg, 1)) => Some(arg),
            _ => None,
        }
    }

    /// The object as a tree.
    fn to_object(self) -> Read<PyObject> {
        let mut args = Vec::new();
        let mut kwargs = Vec::new();
        match self.args {
            RawArgs::Values(mut at, n) => {
                args.reserve(n.min(PREALLOCATE));
                for _ in 0..n {
                    args.push(at.value()?);
                }
            }
            RawArgs::Keywords(mut at, n) => {
                kwargs.reserve(n.min(PREALLOCATE));
                for _ in 0..n {
                    let Token::Str(key) = at.token()? else {
                        return Err(Fail::new("a keyword argument's name is not a string"));
                    };
                    kwargs.push((utf8(key)?.to_owned(), at.value()?));
                }
            }
        }
        Ok(PyObject {
            ext: self.ext,
            module: self.module.to_owned(),
            name: self.name.to_owned(),
            method: self.method.map(str::to_owned),
            args,
            kwargs,
        })
    }
}

impl Node {
    /// A signed integer as the reader stores it (non-negative ones as [`Node::UInt`]).
    pub(crate) fn int(n: i64) -> Node {
        match u64::try_from(n) {
            Ok(n) => Node::UInt(n),
            Err(_) => Node::Int(n),
        }
    }
}
