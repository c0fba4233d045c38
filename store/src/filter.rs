//! Search filters: conditions on top-level keys of an item's value.
//!
//! `{"k": v}` and `{"k": {"$eq": v}}` match equal values, numbers compared as numbers
//! (`1 == 1.0`); `$ne` also matches items without the key; `$gt $gte $lt $lte` compare
//! numbers numerically and strings by code point, and never match values of another type.
//! Keys are literal (a key `a.b` is the top-level key `a.b`, not a path), so a filter is data,
//! never query text, on every backend. A key starting with `$` is an operator, never a field:
//! at the top level (`$or`, `$and`, ...) none is supported, and inside a field's condition only
//! the six above are; every other is refused rather than matched as a field name.

use std::cmp::Ordering;

use serde_json::Value;

use crate::store::json_kind;
use crate::{Error, Object, Result};

/// A parsed filter: every condition must hold.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Filter {
    conditions: Vec<Condition>,
}

#[derive(Clone, Debug, PartialEq)]
struct Condition {
    key: String,
    op: Operator,
    operand: Value,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operator {
    Eq,
    Ne,
    Gt,
    Gte,
    Lt,
    Lte,
}

impl Filter {
    /// Parses a filter object; unknown operators and unusable operands are errors.
    pub(crate) fn parse(filter: &Object) -> Result<Self> {
        let mut conditions = Vec::with_capacity(filter.len());
        for (key, spec) in filter {
            if key == "$invalid" {
                return Err(Error::InvalidFilter(format!(
                    "a filter must be a JSON object, got {}",
                    json_kind(spec)
                )));
            }
            if key.starts_with('$') {
                return Err(Error::InvalidFilter(format!(
                    "`{key}` at the top of a filter: keys there name fields, and no operator \
                     (such as $or or $and) is supported there; use {{\"field\": {{\"$eq\": ...}}}}"
                )));
            }
            match spec {
                Value::Object(ops) if ops.keys().any(|k| k.starts_with('$')) => {
                    for (name, operand) in ops {
                        let op = Operator::parse(key, name)?;
                        op.check(key, operand)?;
                        conditions.push(Condition {
                            key: key.clone(),
                            op,
                            operand: operand.clone(),
                        });
                    }
                }
                _ => conditions.push(Condition {
                    key: key.clone(),
                    op: Operator::Eq,
                    operand: spec.clone(),
                }),
            }
        }
        Ok(Filter { conditions })
    }

    /// Whether the filter has no conditions (matches everything).
    pub(crate) fn is_empty(&self) -> bool {
        self.conditions.is_empty()
    }

    /// What every matching value contains (its equality conditions), as a JSON object for
    /// backends that can skip non-matching rows early; `None` when there is no equality.
    pub(crate) fn contained(&self) -> Option<Object> {
        let equalities: Object = self
            .conditions
            .iter()
            .filter(|c| c.op == Operator::Eq)
            .map(|c| (c.key.clone(), c.operand.clone()))
            .collect();
        (!equalities.is_empty()).then_some(equalities)
    }

    /// Whether `value` satisfies every condition.
    pub(crate) fn matches(&self, value: &Object) -> bool {
        self.conditions.iter().all(|c| c.matches(value.get(&c.key)))
    }
}

impl Operator {
    fn parse(key: &str, name: &str) -> Result<Self> {
        Ok(match name {
            "$eq" => Operator::Eq,
            "$ne" => Operator::Ne,
            "$gt" => Operator::Gt,
            "$gte" => Operator::Gte,
            "$lt" => Operator::Lt,
            "$lte" => Operator::Lte,
            other => {
                return Err(Error::InvalidFilter(format!(
                    "`{key}`: unknown operator `{other}` (use $eq, $ne, $gt, $gte, $lt or $lte, \
                     and no plain key beside them)"
                )));
            }
        })
    }

    fn check(self, key: &str, operand: &Value) -> Result<()> {
        let ordered = matches!(
            self,
            Operator::Gt | Operator::Gte | Operator::Lt | Operator::Lte
        );
        if ordered && !matches!(operand, Value::Number(_) | Value::String(_)) {
            return Err(Error::InvalidFilter(format!(
                "`{key}`: ordering operators compare numbers or strings, got {}",
                json_kind(operand)
            )));
        }
        Ok(())
    }
}

impl Condition {
    fn matches(&self, value: Option<&Value>) -> bool {
        match (self.op, value) {
            (Operator::Ne, None) => true,
            (_, None) => false,
            (Operator::Eq, Some(v)) => json_eq(v, &self.operand),
            (Operator::Ne, Some(v)) => !json_eq(v, &self.operand),
            (op, Some(v)) => match compare(v, &self.operand) {
                Some(ord) => match op {
                    Operator::Gt => ord == Ordering::Greater,
                    Operator::Gte => ord != Ordering::Less,
                    Operator::Lt => ord == Ordering::Less,
                    _ => ord != Ordering::Greater,
                },
                None => false,
            },
        }
    }
}

/// JSON equality with numbers compared by value (`1 == 1.0`).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(_), Value::Number(_)) => compare(a, b) == Some(Ordering::Equal),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Orders two numbers (exactly for integers) or two strings; other pairs are unordered.
fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                return Some(x.cmp(&y));
            }
            if let (Some(x), Some(y)) = (x.as_u64(), y.as_u64()) {
                return Some(x.cmp(&y));
            }
            x.as_f64()?.partial_cmp(&y.as_f64()?)
        }
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn filter(spec: Value) -> Result<Filter> {
        match spec {
            Value::Object(map) => Filter::parse(&map),
            _ => unreachable!("tests pass objects"),
        }
    }

    fn object(value: Value) -> Object {
        match value {
            Value::Object(map) => map,
            _ => Object::new(),
        }
    }

    #[test]
    fn numbers_compare_by_value_not_text() -> Result<()> {
        let item = object(json!({"n": 10, "f": 2.5, "big": u64::MAX}));
        assert!(filter(json!({"n": {"$gt": 9}}))?.matches(&item));
        assert!(filter(json!({"n": 10.0}))?.matches(&item));
        assert!(!filter(json!({"n": {"$lt": 9}}))?.matches(&item));
        assert!(filter(json!({"f": {"$gte": 2.5, "$lt": 3}}))?.matches(&item));
        assert!(filter(json!({"big": {"$gt": i64::MAX}}))?.matches(&item));
        assert!(filter(json!({"n": {"$lt": 1e300}}))?.matches(&item));
        Ok(())
    }

    #[test]
    fn ne_matches_missing_keys_and_others_do_not() -> Result<()> {
        let item = object(json!({"a": 1}));
        assert!(filter(json!({"b": {"$ne": 1}}))?.matches(&item));
        assert!(!filter(json!({"b": {"$gt": 0}}))?.matches(&item));
        assert!(!filter(json!({"b": null}))?.matches(&item));
        Ok(())
    }

    #[test]
    fn mismatched_types_never_match_ordering() -> Result<()> {
        let item = object(json!({"a": "10"}));
        assert!(!filter(json!({"a": {"$gt": 9}}))?.matches(&item));
        assert!(filter(json!({"a": {"$gt": "09"}}))?.matches(&item));
        Ok(())
    }

    #[test]
    fn unknown_operators_and_bad_operands_are_errors() {
        assert!(matches!(
            filter(json!({"a": {"$regex": "x"}})),
            Err(Error::InvalidFilter(_))
        ));
        assert!(matches!(
            filter(json!({"a": {"$gt": [1]}})),
            Err(Error::InvalidFilter(_))
        ));
        assert!(matches!(
            filter(json!({"a": {"$gt": null}})),
            Err(Error::InvalidFilter(_))
        ));
        for top in [
            json!({"$or": [{"a": 1}, {"a": 2}]}),
            json!({"$and": [{"a": 1}]}),
            json!({"a": 1, "$eq": 1}),
            json!({"$": 1}),
        ] {
            assert!(
                matches!(filter(top.clone()), Err(Error::InvalidFilter(_))),
                "{top}"
            );
        }
        // A field condition mixing an operator with a plain key is refused too.
        assert!(matches!(
            filter(json!({"a": {"$eq": 1, "b": 2}})),
            Err(Error::InvalidFilter(_))
        ));
    }

    #[test]
    fn objects_and_arrays_compare_structurally() -> Result<()> {
        let item = object(json!({"tags": ["a", 1], "o": {"x": 1, "y": [2.0]}}));
        assert!(filter(json!({"tags": ["a", 1.0]}))?.matches(&item));
        assert!(filter(json!({"o": {"y": [2], "x": 1}}))?.matches(&item));
        assert!(!filter(json!({"o": {"x": 1}}))?.matches(&item));
        Ok(())
    }
}
