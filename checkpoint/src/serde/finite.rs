//! Finds a NaN or infinite float in any serializable value, in every build.
//!
//! JSON has no number for these floats, and serde_json writes them as `null`, so
//! [`super::Format::Json`] asks this walk before it keeps bytes holding a `null`. The walk is a
//! serde `Serializer` that writes nothing and stops at the first such float: it builds no
//! tree and needs no other format compiled in.

use std::fmt;

use serde::Serialize;
use serde::ser::{self, Serializer};

/// Whether serializing `value` (as a human-readable format would) meets a NaN or infinite
/// float. A value whose own `Serialize` fails before one is met has none this walk can see.
pub(crate) fn has_non_finite_float<T: Serialize + ?Sized>(value: &T) -> bool {
    matches!(value.serialize(Walk), Err(Stop::NonFinite))
}

/// Why the walk stopped early.
#[derive(Debug)]
enum Stop {
    /// It met a NaN or infinite float.
    NonFinite,
    /// The value's own `Serialize` failed.
    Failed,
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stop::NonFinite => "a NaN or infinite float",
            Stop::Failed => "the value failed to serialize",
        })
    }
}

impl std::error::Error for Stop {}

impl ser::Error for Stop {
    fn custom<M: fmt::Display>(_: M) -> Self {
        Stop::Failed
    }
}

/// The walk: every value is visited, nothing is written.
struct Walk;

/// Checks one float.
fn float(finite: bool) -> Result<(), Stop> {
    if finite { Ok(()) } else { Err(Stop::NonFinite) }
}

/// The scalars the walk passes over.
macro_rules! pass {
    ($($method:ident: $ty:ty),* $(,)?) => {
        $(fn $method(self, _: $ty) -> Result<(), Stop> {
            Ok(())
        })*
    };
}

impl Serializer for Walk {
    type Ok = ();
    type Error = Stop;
    type SerializeSeq = Walk;
    type SerializeTuple = Walk;
    type SerializeTupleStruct = Walk;
    type SerializeTupleVariant = Walk;
    type SerializeMap = Walk;
    type SerializeStruct = Walk;
    type SerializeStructVariant = Walk;

    pass!(
        serialize_bool: bool,
        serialize_i8: i8,
        serialize_i16: i16,
        serialize_i32: i32,
        serialize_i64: i64,
        serialize_i128: i128,
        serialize_u8: u8,
        serialize_u16: u16,
        serialize_u32: u32,
        serialize_u64: u64,
        serialize_u128: u128,
        serialize_char: char,
        serialize_str: &str,
        serialize_bytes: &[u8],
        serialize_unit_struct: &'static str,
    );

    fn serialize_f32(self, v: f32) -> Result<(), Stop> {
        float(v.is_finite())
    }

    fn serialize_f64(self, v: f64) -> Result<(), Stop> {
        float(v.is_finite())
    }

    fn serialize_none(self) -> Result<(), Stop> {
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Stop> {
        value.serialize(Walk)
    }

    fn serialize_unit(self) -> Result<(), Stop> {
        Ok(())
    }

    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<(), Stop> {
        Ok(())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Stop> {
        value.serialize(Walk)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        value: &T,
    ) -> Result<(), Stop> {
        value.serialize(Walk)
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Walk, Stop> {
        Ok(Walk)
    }

    fn serialize_tuple(self, _: usize) -> Result<Walk, Stop> {
        Ok(Walk)
    }

    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Walk, Stop> {
        Ok(Walk)
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Walk, Stop> {
        Ok(Walk)
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Walk, Stop> {
        Ok(Walk)
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Walk, Stop> {
        Ok(Walk)
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Walk, Stop> {
        Ok(Walk)
    }
}

/// The compound forms: each element, key, value and field is walked in turn.
macro_rules! compound {
    ($($trait:ident :: $method:ident $(($key:ty))?),* $(,)?) => {
        $(impl ser::$trait for Walk {
            type Ok = ();
            type Error = Stop;

            fn $method<T: Serialize + ?Sized>(&mut self, $(_: $key,)? value: &T) -> Result<(), Stop> {
                value.serialize(Walk)
            }

            fn end(self) -> Result<(), Stop> {
                Ok(())
            }
        })*
    };
}

compound!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field,
    SerializeStruct::serialize_field(&'static str),
    SerializeStructVariant::serialize_field(&'static str),
);

impl ser::SerializeMap for Walk {
    type Ok = ();
    type Error = Stop;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Stop> {
        key.serialize(Walk)
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
        value.serialize(Walk)
    }

    fn end(self) -> Result<(), Stop> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::has_non_finite_float;

    /// Every place a float can sit in a value is walked: fields, elements, map keys and
    /// values, options, newtypes and enum variants.
    #[test]
    fn finds_a_non_finite_float_wherever_it_sits() {
        #[derive(serde::Serialize)]
        struct Wrap(f64);
        #[derive(serde::Serialize)]
        enum Shape {
            Tuple(u8, f32),
            Struct { x: f64 },
            New(Wrap),
        }
        #[derive(serde::Serialize)]
        struct Deep {
            name: &'static str,
            items: Vec<Option<Shape>>,
        }
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(has_non_finite_float(&bad));
            assert!(has_non_finite_float(&Wrap(bad)));
            assert!(has_non_finite_float(&Shape::Struct { x: bad }));
            assert!(has_non_finite_float(&Shape::New(Wrap(bad))));
            assert!(has_non_finite_float(&Deep {
                name: "d",
                items: vec![
                    None,
                    Some(Shape::Struct { x: 1.0 }),
                    Some(Shape::Struct { x: bad })
                ],
            }));
            assert!(has_non_finite_float(&BTreeMap::from([("k", (1, bad))])));
        }
        assert!(has_non_finite_float(&Shape::Tuple(1, f32::NAN)));
        // A float key, which JSON writes as text, is still a float to the walk.
        let keyed: Vec<(f64, u8)> = vec![(f64::NAN, 1)];
        assert!(has_non_finite_float(&keyed));
        for fine in [0.0, -0.0, 1.5, f64::MAX, f64::MIN_POSITIVE] {
            assert!(!has_non_finite_float(&Deep {
                name: "d",
                items: vec![
                    Some(Shape::Struct { x: fine }),
                    Some(Shape::New(Wrap(fine)))
                ],
            }));
        }
        assert!(!has_non_finite_float(&(
            None::<f64>,
            (),
            "text",
            b"bytes".as_slice()
        )));
    }
}
