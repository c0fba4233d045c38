//! Field paths for decode errors, the same in every format.
//!
//! [`deserialize_tracking`] wraps a [`Deserializer`] so that, while a value decodes, the
//! wrappers know where they are (`messages[3].content`) and remember the innermost place an
//! error came out of. Self-describing formats (JSON, MessagePack with named fields) visit a
//! struct as a map, so its fields are named by their keys. Compact formats (postcard,
//! bincode) visit a struct as a sequence; the adapter keeps the field names the struct passed
//! to `deserialize_struct` and names element `i` after `fields[i]`, so they report the same
//! path.
//!
//! Paths render as `name` for the first segment and `.name` after it (struct fields, map
//! keys, enum variants), `[i]` for elements of real sequences and tuples, and `?` for a map
//! value whose key was not read as a scalar. An error at the root has no path.
//!
//! The wrappers only keep books: every call reaches the wrapped deserializer, visitor or
//! access with the same arguments, so what decodes, and to what, is unchanged. They cost a
//! little, which is why [`super::Format::decode`] runs them only to explain a failure.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt::{self, Display, Write as _};

use serde::Deserialize;
use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};

/// Decodes a `T` from `de`, tracking where it is; an error comes with the path of the
/// innermost value that failed (`None` when the root itself failed).
pub(crate) fn deserialize_tracking<'de, D, T>(de: D) -> Result<T, (Option<String>, D::Error)>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    let track = Track::default();
    T::deserialize(track.wrap(de, false)).map_err(|e| (track.failed.take(), e))
}

/// One step of a path.
enum Segment {
    /// An element of a sequence or tuple: `[3]`.
    Index(usize),
    /// A struct field, map key or enum variant: `.content`.
    Name(Cow<'static, str>),
}

/// The state one decode's wrappers share.
#[derive(Default)]
struct Track {
    /// Segments from the root to the value being decoded now.
    stack: RefCell<Vec<Segment>>,
    /// The text of the map key or enum variant read last; it names the value that follows.
    key: RefCell<Option<String>>,
    /// The rendered path of the innermost value whose error is still propagating.
    failed: RefCell<Option<String>>,
}

impl Track {
    /// Runs `f`, which decodes the value at `segment`, with `segment` on the path.
    ///
    /// An error keeps the path of the innermost scope it left (the first to record one);
    /// success clears it, so an error that a visitor recovered from is not reported later.
    fn scope<T, E>(&self, segment: Segment, f: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        self.stack.borrow_mut().push(segment);
        let result = f();
        let mut failed = self.failed.borrow_mut();
        if result.is_ok() {
            *failed = None;
        } else if failed.is_none() {
            *failed = Some(render(&self.stack.borrow()));
        }
        self.stack.borrow_mut().pop();
        result
    }

    /// Wraps a deserializer; `key` when it decodes a map key or enum variant.
    fn wrap<D>(&self, de: D, key: bool) -> Tracking<'_, D> {
        let track = self;
        Tracking { de, track, key }
    }

    /// Wraps a seed, so the deserializer it is given is wrapped.
    fn seed<S>(&self, seed: S, key: bool) -> TrackSeed<'_, S> {
        let track = self;
        TrackSeed { seed, track, key }
    }

    /// Wraps a visitor, so what it is shown is tracked.
    fn visitor<V>(&self, inner: V, ctx: Ctx) -> TrackVisitor<'_, V> {
        let track = self;
        TrackVisitor { inner, track, ctx }
    }
}

/// Renders `messages[3].content`.
fn render(stack: &[Segment]) -> String {
    let mut out = String::new();
    for segment in stack {
        match segment {
            Segment::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
            Segment::Name(name) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(name);
            }
        }
    }
    out
}

/// The name of an enum variant read as `text`: its name, or its index for compact formats.
fn variant_name(variants: &'static [&'static str], text: String) -> Cow<'static, str> {
    match text.parse::<usize>().ok().and_then(|i| variants.get(i)) {
        Some(name) if !variants.contains(&text.as_str()) => Cow::Borrowed(name),
        _ => Cow::Owned(text),
    }
}

/// What the value a visitor is shown means to the path.
#[derive(Clone, Copy)]
enum Ctx {
    /// A plain value.
    Value,
    /// A map key or enum variant: scalars it is shown are recorded as [`Track::key`].
    Key,
    /// A struct with these fields: a sequence it is shown names elements after them.
    Struct(&'static [&'static str]),
    /// An enum with these variants: a variant read by index is named after them.
    Enum(&'static [&'static str]),
}

/// A [`Deserializer`] that forwards to `de` and tracks what it decodes.
struct Tracking<'a, D> {
    de: D,
    track: &'a Track,
    /// Whether this decodes a map key or enum variant.
    key: bool,
}

impl<D> Tracking<'_, D> {
    fn ctx(&self) -> Ctx {
        if self.key { Ctx::Key } else { Ctx::Value }
    }
}

/// Forwards `Deserializer` methods, wrapping the visitor.
macro_rules! forward_deserialize {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {$(
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
            let ctx = self.ctx();
            self.de.$method($($arg,)* self.track.visitor(visitor, ctx))
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Tracking<'_, D> {
    type Error = D::Error;

    forward_deserialize! {
        deserialize_any(); deserialize_bool(); deserialize_i8(); deserialize_i16();
        deserialize_i32(); deserialize_i64(); deserialize_i128(); deserialize_u8();
        deserialize_u16(); deserialize_u32(); deserialize_u64(); deserialize_u128();
        deserialize_f32(); deserialize_f64(); deserialize_char(); deserialize_str();
        deserialize_string(); deserialize_bytes(); deserialize_byte_buf(); deserialize_option();
        deserialize_unit(); deserialize_unit_struct(name: &'static str);
        deserialize_newtype_struct(name: &'static str); deserialize_seq();
        deserialize_tuple(len: usize); deserialize_tuple_struct(name: &'static str, len: usize);
        deserialize_map(); deserialize_identifier(); deserialize_ignored_any();
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let visitor = self.track.visitor(visitor, Ctx::Struct(fields));
        self.de.deserialize_struct(name, fields, visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let visitor = self.track.visitor(visitor, Ctx::Enum(variants));
        self.de.deserialize_enum(name, variants, visitor)
    }

    fn is_human_readable(&self) -> bool {
        self.de.is_human_readable()
    }
}

/// A [`Visitor`] that forwards to `inner` and wraps what it is handed to decode further.
struct TrackVisitor<'a, V> {
    inner: V,
    track: &'a Track,
    ctx: Ctx,
}

impl<V> TrackVisitor<'_, V> {
    /// Records a scalar's text when it is a map key or enum variant.
    fn note(&self, text: impl FnOnce() -> String) {
        if let Ctx::Key = self.ctx {
            *self.track.key.borrow_mut() = Some(text());
        }
    }

    fn is_key(&self) -> bool {
        matches!(self.ctx, Ctx::Key)
    }
}

fn text<T: Display + ?Sized>(v: &T) -> String {
    v.to_string()
}

fn utf8(v: &[u8]) -> String {
    String::from_utf8_lossy(v).into_owned()
}

/// Forwards `Visitor` methods for scalars, noting their text (via `$show`) as a key.
macro_rules! forward_visit {
    ($($method:ident($ty:ty) as $show:ident;)*) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
            self.note(|| $show(&v));
            self.inner.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for TrackVisitor<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    forward_visit! {
        visit_bool(bool) as text; visit_i8(i8) as text; visit_i16(i16) as text;
        visit_i32(i32) as text; visit_i64(i64) as text; visit_i128(i128) as text;
        visit_u8(u8) as text; visit_u16(u16) as text; visit_u32(u32) as text;
        visit_u64(u64) as text; visit_u128(u128) as text; visit_f32(f32) as text;
        visit_f64(f64) as text; visit_char(char) as text; visit_str(&str) as text;
        visit_borrowed_str(&'de str) as text; visit_string(String) as text;
        visit_bytes(&[u8]) as utf8; visit_borrowed_bytes(&'de [u8]) as utf8;
        visit_byte_buf(Vec<u8>) as utf8;
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        let de = self.track.wrap(de, self.is_key());
        self.inner.visit_some(de)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        let de = self.track.wrap(de, self.is_key());
        self.inner.visit_newtype_struct(de)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        let fields = match self.ctx {
            Ctx::Struct(fields) => fields,
            _ => &[],
        };
        self.inner.visit_seq(TrackSeq {
            inner: seq,
            track: self.track,
            fields,
            index: 0,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.inner.visit_map(TrackMap {
            inner: map,
            track: self.track,
        })
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        let variants = match self.ctx {
            Ctx::Enum(variants) => variants,
            _ => &[],
        };
        self.inner.visit_enum(TrackEnum {
            inner: data,
            track: self.track,
            variants,
        })
    }
}

/// A [`DeserializeSeed`] that decodes through [`Tracking`].
struct TrackSeed<'a, S> {
    seed: S,
    track: &'a Track,
    key: bool,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for TrackSeed<'_, S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<S::Value, D::Error> {
        self.seed.deserialize(self.track.wrap(de, self.key))
    }
}

/// A sequence's elements, each on the path as `[i]`, or as `fields[i]` for a struct.
struct TrackSeq<'a, A> {
    inner: A,
    track: &'a Track,
    fields: &'static [&'static str],
    index: usize,
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for TrackSeq<'_, A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        let segment = match self.fields.get(self.index) {
            Some(field) => Segment::Name(Cow::Borrowed(field)),
            None => Segment::Index(self.index),
        };
        self.index = self.index.saturating_add(1);
        let (seed, inner) = (self.track.seed(seed, false), &mut self.inner);
        self.track.scope(segment, || inner.next_element_seed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// A map's entries, each value on the path as `.key`.
struct TrackMap<'a, A> {
    inner: A,
    track: &'a Track,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for TrackMap<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.track.key.take();
        self.inner.next_key_seed(self.track.seed(seed, true))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        let key = self.track.key.take();
        let segment = Segment::Name(key.map_or(Cow::Borrowed("?"), Cow::Owned));
        let (seed, inner) = (self.track.seed(seed, false), &mut self.inner);
        self.track.scope(segment, || inner.next_value_seed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// An enum's variant tag; its name then names the payload on the path.
struct TrackEnum<'a, A> {
    inner: A,
    track: &'a Track,
    variants: &'static [&'static str],
}

impl<'de, 'a, A: EnumAccess<'de>> EnumAccess<'de> for TrackEnum<'a, A> {
    type Error = A::Error;
    type Variant = TrackVariant<'a, A::Variant>;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Self::Variant), A::Error> {
        let track = self.track;
        track.key.take();
        let (value, inner) = self.inner.variant_seed(track.seed(seed, true))?;
        let name = track.key.take().map(|t| variant_name(self.variants, t));
        // An enum used as a map key names the value by its variant.
        *track.key.borrow_mut() = name.as_deref().map(str::to_owned);
        Ok((value, TrackVariant { inner, track, name }))
    }
}

/// An enum's payload, on the path under its variant's name when that was read.
struct TrackVariant<'a, A> {
    inner: A,
    track: &'a Track,
    name: Option<Cow<'static, str>>,
}

impl<'a, A> TrackVariant<'a, A> {
    /// Runs `f`, which decodes the payload, under the variant's name.
    fn payload<T, E>(self, f: impl FnOnce(A, &'a Track) -> Result<T, E>) -> Result<T, E> {
        let (inner, track) = (self.inner, self.track);
        match self.name {
            Some(name) => track.scope(Segment::Name(name), || f(inner, track)),
            None => f(inner, track),
        }
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for TrackVariant<'_, A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.inner.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.payload(|inner, track| inner.newtype_variant_seed(track.seed(seed, false)))
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.payload(|inner, track| inner.tuple_variant(len, track.visitor(visitor, Ctx::Value)))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.payload(|inner, track| {
            inner.struct_variant(fields, track.visitor(visitor, Ctx::Struct(fields)))
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::de::DeserializeOwned;
    use serde::{Deserialize, Serialize};

    use crate::{Checkpoint, Error, Format, Serde};

    // Each type has a flag `F`: `bool` to read, `Raw` to write a flag that is not a bool.
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Msg<F> {
        role: String,
        flag: F,
    }

    /// A flag as written: a bool, or a number where a bool is expected.
    #[derive(Serialize, Debug, Clone, Copy)]
    #[serde(untagged)]
    enum Raw {
        Good(bool),
        Bad(u8),
    }

    const OK: Raw = Raw::Good(true);
    const BAD: Raw = Raw::Bad(7);

    fn msg<F>(flag: F) -> Msg<F> {
        Msg {
            role: "user".into(),
            flag,
        }
    }

    /// The path `format` reports for decoding `raw` (written with `Raw` flags) as `T`.
    fn path_of<T: DeserializeOwned + std::fmt::Debug>(
        format: Format,
        raw: &impl Serialize,
    ) -> String {
        let bytes = format.encode(raw).unwrap();
        match format.decode::<T>(&bytes) {
            Err(Error::Serialization {
                path: Some(path), ..
            }) => path,
            other => panic!("{format:?}: {other:?}"),
        }
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Conversation<F> {
        messages: Vec<Msg<F>>,
        pairs: Vec<(u8, F)>,
    }

    #[test]
    fn a_struct_in_a_vec_is_named_in_every_format() {
        let bad_message = Conversation {
            messages: vec![msg(OK), msg(OK), msg(OK), msg(BAD)],
            pairs: vec![],
        };
        let bad_pair = Conversation {
            messages: vec![msg(OK)],
            pairs: vec![(1, OK), (2, BAD)],
        };
        #[cfg(feature = "postcard")]
        assert_eq!(
            path_of::<Conversation<bool>>(Format::Postcard, &bad_message),
            "messages[3].flag"
        );
        for &format in Format::ALL {
            let path = path_of::<Conversation<bool>>(format, &bad_message);
            assert_eq!(path, "messages[3].flag", "{format:?}");
            let path = path_of::<Conversation<bool>>(format, &bad_pair);
            assert_eq!(path, "pairs[1][1]", "{format:?}");
        }
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Index<F> {
        by_id: BTreeMap<String, Msg<F>>,
    }

    #[test]
    fn map_keys_are_named() {
        let text =
            br#"{"by_id": {"a": {"role": "x", "flag": true}, "b": {"role": "x", "flag": 7}}}"#;
        let path = |r: Result<Index<bool>, Error>| match r {
            Err(Error::Serialization { path, .. }) => path,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            path(Format::Json.decode(text)).as_deref(),
            Some("by_id.b.flag")
        );
        let root = Format::Json
            .decode::<BTreeMap<String, Msg<bool>>>(br#"{"b": {"role": "x", "flag": 7}}"#);
        assert!(matches!(root, Err(Error::Serialization { path: Some(p), .. }) if p == "b.flag"));
        // A missing field fails at the struct that lacks it.
        let missing = br#"{"by_id": {"a": {"role": "x"}}}"#;
        assert_eq!(
            path(Format::Json.decode(missing)).as_deref(),
            Some("by_id.a")
        );
        // An error at the root has no path.
        assert!(matches!(
            Format::Json.decode::<Index<bool>>(b"7"),
            Err(Error::Serialization { path: None, .. })
        ));
        let raw = Index {
            by_id: [("a".to_owned(), msg(OK)), ("b".to_owned(), msg(BAD))].into(),
        };
        for &format in Format::ALL {
            assert_eq!(
                path_of::<Index<bool>>(format, &raw),
                "by_id.b.flag",
                "{format:?}"
            );
        }
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Reply<F> {
        id: u32,
        quoted: Option<Msg<F>>,
    }

    #[test]
    fn an_option_of_a_struct_is_transparent() {
        let raw = Reply {
            id: 1,
            quoted: Some(msg(BAD)),
        };
        for &format in Format::ALL {
            assert_eq!(
                path_of::<Reply<bool>>(format, &raw),
                "quoted.flag",
                "{format:?}"
            );
        }
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    enum Event<F> {
        Ping,
        Said(Msg<F>),
        Pair(u8, F),
        Moved { to: u32, flag: F },
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Log<F> {
        events: Vec<Event<F>>,
        by_kind: BTreeMap<Kind, F>,
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq, PartialOrd, Eq, Ord)]
    enum Kind {
        Start,
        Stop,
    }

    #[test]
    fn enum_payloads_are_named_by_variant() {
        let log = |events: Vec<Event<Raw>>, stop: Raw| Log {
            events,
            by_kind: [(Kind::Start, OK), (Kind::Stop, stop)].into(),
        };
        let cases = [
            (
                log(vec![Event::Ping, Event::Moved { to: 1, flag: BAD }], OK),
                "events[1].Moved.flag",
            ),
            (log(vec![Event::Said(msg(BAD))], OK), "events[0].Said.flag"),
            (
                log(vec![Event::Ping, Event::Ping, Event::Pair(1, BAD)], OK),
                "events[2].Pair[1]",
            ),
            (log(vec![Event::Ping], BAD), "by_kind.Stop"),
        ];
        for &format in Format::ALL {
            for (raw, want) in &cases {
                assert_eq!(path_of::<Log<bool>>(format, raw), *want, "{format:?}");
            }
        }
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Unit;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Meters(f64);

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Everything {
        checkpoint: Checkpoint,
        conversation: Conversation<bool>,
        index: Index<bool>,
        replies: Vec<Reply<bool>>,
        log: Log<bool>,
        tuple: (i64, char, String, Option<u64>),
        #[serde(with = "serde_bytes")]
        blob: Vec<u8>,
        unit: (),
        unit_struct: Unit,
        meters: Meters,
        nested: Vec<Vec<BTreeMap<String, Vec<u16>>>>,
    }

    #[test]
    fn success_decodes_the_same_value() {
        let serde = Serde::default();
        let mut checkpoint = Checkpoint::new(4);
        checkpoint
            .channel_values
            .insert("messages".into(), serde.dumps(&["hi", "there"]).unwrap());
        checkpoint.channel_versions.insert(
            "messages".into(),
            "00000000000000000000000000000002.0.5".into(),
        );
        checkpoint
            .versions_seen
            .insert("agent".into(), checkpoint.channel_versions.clone());
        checkpoint.updated_channels = Some(vec!["messages".into()]);
        let value = Everything {
            checkpoint,
            conversation: Conversation {
                messages: vec![msg(true), msg(false)],
                pairs: vec![(0, true), (255, false)],
            },
            index: Index {
                by_id: [
                    ("a\u{0}é".to_owned(), msg(true)),
                    (String::new(), msg(false)),
                ]
                .into(),
            },
            replies: vec![
                Reply {
                    id: 0,
                    quoted: None,
                },
                Reply {
                    id: u32::MAX,
                    quoted: Some(msg(true)),
                },
            ],
            log: Log {
                events: vec![
                    Event::Ping,
                    Event::Said(msg(true)),
                    Event::Pair(3, false),
                    Event::Moved { to: 9, flag: true },
                ],
                by_kind: [(Kind::Stop, true)].into(),
            },
            tuple: (
                i64::MIN,
                '\u{10FFFF}',
                "\"quoted\"\n".into(),
                Some(u64::MAX),
            ),
            blob: vec![0, 255, 128],
            unit: (),
            unit_struct: Unit,
            meters: Meters(-0.5),
            nested: vec![
                vec![],
                vec![[("k".to_owned(), vec![1, 65535])].into(), BTreeMap::new()],
            ],
        };
        for &format in Format::ALL {
            let bytes = format.encode(&value).unwrap();
            let plain: Everything = format.decode(&bytes).unwrap();
            let tracked: Everything = format.decode_tracking(&bytes).unwrap();
            assert_eq!(plain, value, "{format:?}");
            assert_eq!(tracked, value, "{format:?}");
        }
        // Self-describing formats also go through `deserialize_any`.
        let json: serde_json::Value = serde_json::to_value(&value).unwrap();
        for &format in Format::ALL
            .iter()
            .filter(|f| matches!(f.tag(), "json" | "msgpack"))
        {
            let bytes = format.encode(&json).unwrap();
            let tracked: serde_json::Value = format.decode_tracking(&bytes).unwrap();
            assert_eq!(tracked, json, "{format:?}");
        }
    }
}
