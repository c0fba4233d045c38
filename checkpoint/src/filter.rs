//! Metadata filters: JSON containment, PostgreSQL `@>` semantics, on every backend.

use serde_json::Value;

/// Whether `doc` contains `pattern`, as PostgreSQL's `jsonb @> jsonb`.
///
/// Objects match when every pattern key is present and its value is contained (nested
/// objects match as subsets); arrays match when every pattern element is contained in some
/// element of the document array; scalars match by equality, numbers numerically, and
/// `null` only matches an explicit `null`.
pub fn json_contains(doc: &Value, pattern: &Value) -> bool {
    match (doc, pattern) {
        (Value::Object(d), Value::Object(p)) => p
            .iter()
            .all(|(k, pv)| d.get(k).is_some_and(|dv| json_contains(dv, pv))),
        (Value::Array(d), Value::Array(p)) => {
            p.iter().all(|pv| d.iter().any(|dv| json_contains(dv, pv)))
        }
        (Value::Number(a), Value::Number(b)) => numbers_equal(a, b),
        (a, b) => !a.is_object() && !a.is_array() && a == b,
    }
}

fn numbers_equal(a: &serde_json::Number, b: &serde_json::Number) -> bool {
    match (a.as_i64(), b.as_i64(), a.as_u64(), b.as_u64()) {
        (Some(x), Some(y), _, _) => x == y,
        (_, _, Some(x), Some(y)) => x == y,
        _ => a.as_f64() == b.as_f64(),
    }
}

#[cfg(test)]
mod tests {
    use super::json_contains;
    use serde_json::json;

    #[test]
    fn containment_cases() {
        let doc = json!({"source": "loop", "step": 2, "writes": {"a": 1, "b": [1, 2]}, "n": null});
        assert!(json_contains(&doc, &json!({})));
        assert!(json_contains(&doc, &json!({"step": 2.0})));
        assert!(json_contains(&doc, &json!({"writes": {"b": [2]}})));
        assert!(json_contains(&doc, &json!({"n": null})));
        assert!(!json_contains(&doc, &json!({"missing": null})));
        assert!(!json_contains(&doc, &json!({"writes": {"a": 1, "c": 0}})));
        assert!(!json_contains(&doc, &json!({"step": "2"})));
        assert!(!json_contains(&doc, &json!({"writes": 1})));
    }
}
