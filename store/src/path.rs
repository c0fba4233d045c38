//! Extracting the texts to embed from a JSON value by path (`$`, `a.b`, `a[0]`, `a[-1]`,
//! `a[*].b`, `*`, `{x,y.z}`).
//!
//! The grammar and the rendering follow LangGraph's `get_text_at_path` / `tokenize_path`
//! (`langgraph/store/base/embed.py`) so that the same `fields` produce the same texts, and so
//! the same vectors, in both implementations:
//!
//! - `""` or `$` is the whole value as `json.dumps(value, sort_keys=True, ensure_ascii=False)`;
//! - `a.b` walks object keys, `[i]` indexes arrays (negative from the end, Python `int()`
//!   syntax), `[*]` and `*` fan out, and `{a,b.c}` collects several object paths at once;
//! - leaves render like Python's `str()`: strings as they are, `True`/`False`, `25`, `0.0`,
//!   `1e+16`; arrays and objects as sorted-keys JSON; `null` gives nothing;
//! - a path that is missing, out of range or malformed gives no text, never an error.
//!
//! LangGraph quirks kept on purpose: `$` is only special as the whole path (`$.a` looks up a
//! key named `$`); an unclosed `[x` or `{x` token is an ordinary key; inside `{...}` every
//! segment is an object key (no indexing, no wildcard), and tokens after a `{...}` are ignored.
//!
//! Deviations that come from `serde_json` rather than from this module: `*` over an object
//! visits values in key order (Python: insertion order), and integers beyond the `i64`/`u64`
//! range are held as floats, so they render as floats.

use serde_json::{Map, Number, Value};

/// The texts an index embeds from `document`, each named by the field it is stored under:
/// `path` when the path yields one text, `path.0`, `path.1`, ... when it yields several.
pub fn index_texts<'a>(
    document: &Value,
    paths: impl IntoIterator<Item = &'a String>,
) -> Vec<(String, String)> {
    let mut texts = Vec::new();
    for path in paths {
        let found = get_text_at_path(document, path);
        let single = found.len() == 1;
        for (i, text) in found.into_iter().enumerate() {
            let field = if single {
                path.clone()
            } else {
                format!("{path}.{i}")
            };
            texts.push((field, text));
        }
    }
    texts
}

/// The texts found at `path` in `value`; missing or malformed paths give none.
pub fn get_text_at_path(value: &Value, path: &str) -> Vec<String> {
    if path.is_empty() || path == "$" {
        return vec![python_json(value)];
    }
    let tokens = tokenize(path);
    let mut texts = Vec::new();
    // Depth-first with an explicit stack (children pushed in reverse) so the output order is
    // that of LangGraph's recursion, and a path with very many segments cannot overflow the
    // call stack.
    let mut stack: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((node, pos)) = stack.pop() {
        let Some(token) = tokens.get(pos) else {
            push_leaf(node, &mut texts);
            continue;
        };
        let next = pos + 1;
        if let Some(index) = enclosed(token, '[', ']') {
            let Value::Array(items) = node else { continue };
            if index == "*" {
                stack.extend(items.iter().rev().map(|item| (item, next)));
            } else if let Some(item) = python_int(index).and_then(|i| at_index(items, i)) {
                stack.push((item, next));
            }
        } else if let Some(fields) = enclosed(token, '{', '}') {
            let Value::Object(object) = node else {
                continue;
            };
            // Every field is looked up right away and the rest of the path is dropped, as in
            // LangGraph.
            for field in fields.split(',') {
                if let Some(found) = walk_keys(object, python_strip(field)) {
                    push_leaf(found, &mut texts);
                }
            }
        } else if token == "*" {
            match node {
                Value::Object(object) => {
                    stack.extend(object.values().rev().map(|item| (item, next)));
                }
                Value::Array(items) => stack.extend(items.iter().rev().map(|item| (item, next))),
                _ => {}
            }
        } else if let Value::Object(object) = node
            && let Some(item) = object.get(token.as_str())
        {
            stack.push((item, next));
        }
    }
    texts
}

/// Splits a path into keys, `[...]` and `{...}` tokens (brackets nest; an unclosed one runs
/// to the end of the path).
fn tokenize(path: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut current = String::new();
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '[' | '{' => {
                let close = if c == '[' { ']' } else { '}' };
                if !current.is_empty() {
                    tokens.push(std::mem::take(&mut current));
                }
                let mut group = String::from(c);
                let mut depth = 1usize;
                while depth > 0 {
                    let Some(inner) = chars.next() else { break };
                    if inner == c {
                        depth += 1;
                    } else if inner == close {
                        depth -= 1;
                    }
                    group.push(inner);
                }
                tokens.push(group);
            }
            '.' => {
                if !current.is_empty() {
                    tokens.push(std::mem::take(&mut current));
                }
            }
            _ => current.push(c),
        }
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
}

/// The inside of `token` if it starts with `open` and ends with `close`.
fn enclosed(token: &str, open: char, close: char) -> Option<&str> {
    token.strip_prefix(open)?.strip_suffix(close)
}

/// Follows a `{...}` field (`a.b.c`) through object keys only; `None` if it is empty, missing
/// or `null`.
fn walk_keys<'a>(object: &'a Map<String, Value>, field: &str) -> Option<&'a Value> {
    let keys = tokenize(field);
    let (first, rest) = keys.split_first()?;
    let mut current = object.get(first.as_str())?;
    for key in rest {
        current = current.as_object()?.get(key.as_str())?;
    }
    (!current.is_null()).then_some(current)
}

/// The element at a Python-style index (negative counts from the end).
fn at_index(items: &[Value], index: i128) -> Option<&Value> {
    let len = i128::try_from(items.len()).ok()?;
    let index = if index < 0 { len + index } else { index };
    items.get(usize::try_from(index).ok()?)
}

/// Appends the text of a leaf: strings as they are, scalars like Python's `str()`, containers
/// as sorted-keys JSON, nothing for `null`.
fn push_leaf(value: &Value, texts: &mut Vec<String>) {
    match value {
        Value::Null => {}
        Value::String(s) => texts.push(s.clone()),
        Value::Bool(b) => texts.push(String::from(if *b { "True" } else { "False" })),
        Value::Number(n) => texts.push(python_number(n)),
        Value::Array(_) | Value::Object(_) => texts.push(python_json(value)),
    }
}

/// Parses an index like Python's `int(s)`: surrounding whitespace, one sign, decimal digits of
/// any script, single `_` between digits. Values too large for `i128` saturate (they are out
/// of range of any array anyway).
fn python_int(s: &str) -> Option<i128> {
    let s = python_strip(s);
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut value: i128 = 0;
    let mut seen_digit = false;
    let mut after_underscore = false;
    for c in digits.chars() {
        if c == '_' {
            if !seen_digit || after_underscore {
                return None;
            }
            after_underscore = true;
            continue;
        }
        let digit = decimal_digit(c)?;
        value = value.saturating_mul(10).saturating_add(i128::from(digit));
        seen_digit = true;
        after_underscore = false;
    }
    if !seen_digit || after_underscore {
        return None;
    }
    Some(if negative { -value } else { value })
}

/// The value of a Unicode decimal digit (general category Nd), as Python's `int()` accepts.
fn decimal_digit(c: char) -> Option<u8> {
    // The code point of the digit zero of every Nd run (each run is ten contiguous digits),
    // from Unicode 14.0, the version of Python 3.11.
    const ZEROS: [u32; 66] = [
        0x30, 0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6, 0xD66,
        0xDE6, 0xE50, 0xED0, 0xF20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90,
        0x1B50, 0x1BB0, 0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0,
        0xFF10, 0x104A0, 0x10D30, 0x11066, 0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0,
        0x11650, 0x116C0, 0x11730, 0x118E0, 0x11950, 0x11C50, 0x11D50, 0x11DA0, 0x16A60, 0x16AC0,
        0x16B50, 0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E950, 0x1FBF0,
    ];
    let code = u32::from(c);
    if c.is_ascii() {
        return c.is_ascii_digit().then(|| (code - 0x30) as u8);
    }
    let run = ZEROS.partition_point(|&zero| zero <= code).checked_sub(1)?;
    let offset = code - ZEROS[run];
    (offset < 10).then_some(offset as u8)
}

/// `s` without the leading and trailing characters Python's `str.strip()` removes.
fn python_strip(s: &str) -> &str {
    s.trim_matches(is_python_space)
}

/// Python's `str.isspace()` for one character (Unicode 14.0).
fn is_python_space(c: char) -> bool {
    matches!(
        c,
        '\t'..='\r'
            | '\u{1c}'..='\u{20}'
            | '\u{85}'
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
    )
}

/// A number as Python's `str()` prints it: integers plainly, floats with `repr` (`0.0`,
/// `1e+16`, `1.5e-07`).
fn python_number(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    n.as_f64().map_or_else(|| n.to_string(), python_float)
}

/// Python's `float.__repr__` of a finite float: the shortest round-trip digits, positional
/// when the decimal exponent is in [-4, 16), scientific otherwise.
fn python_float(x: f64) -> String {
    if !x.is_finite() {
        // JSON numbers are finite; these only keep the function total.
        return String::from(if x.is_nan() {
            "nan"
        } else if x > 0.0 {
            "inf"
        } else {
            "-inf"
        });
    }
    // `{:e}` prints the same shortest round-trip digits as Python's repr, as `d.ddde±x`.
    let sci = format!("{:e}", x.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let mut digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    break_tie_to_even(x.abs(), exponent, &mut digits);
    let sign = if x.is_sign_negative() { "-" } else { "" };
    // Python's rule on `decpt` (the exponent of 0.ddd): scientific when decpt <= -4 or > 16.
    let decpt = exponent + 1;
    if decpt <= -4 || decpt > 16 {
        let (first, rest) = digits.split_at(1);
        let dot = if rest.is_empty() { "" } else { "." };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        return format!(
            "{sign}{first}{dot}{rest}e{exp_sign}{:02}",
            exponent.unsigned_abs()
        );
    }
    let body = if decpt <= 0 {
        format!("0.{}{digits}", "0".repeat(decpt.unsigned_abs() as usize))
    } else {
        let decpt = decpt as usize;
        if digits.len() > decpt {
            format!("{}.{}", &digits[..decpt], &digits[decpt..])
        } else {
            format!("{digits}{}.0", "0".repeat(decpt - digits.len()))
        }
    };
    format!("{sign}{body}")
}

/// Python and Rust agree on the shortest round-trip digits except when `x` lies exactly
/// halfway between two shortest candidates (1696282451989086.25 prints as `...086.2` in
/// Python, `...086.3` in Rust): Python then keeps the even last digit. Rewrites `digits` (the
/// shortest digits of `x`, whose scientific exponent is `exponent`) to Python's choice.
fn break_tie_to_even(x: f64, exponent: i32, digits: &mut String) {
    // A tie needs an exact decimal expansion one digit longer than the shortest form, so at
    // most 18 significant digits; with 16 or fewer shortest digits, or a lowest set bit below
    // 2^-25 (whose expansion has more than 18 digits), there is none. This keeps the costly
    // exact formatting below off the common paths.
    if digits.len() < 16 || lowest_bit_exponent(x) < -25 {
        return;
    }
    // Exact: 767 digits after the point hold every f64's full decimal expansion.
    let exact = format!("{x:.767e}");
    let Some((exact_mantissa, exact_exponent)) = exact.split_once('e') else {
        return;
    };
    if exact_exponent.parse::<i32>().ok() != Some(exponent) {
        return;
    }
    let exact_digits: String = exact_mantissa
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    let exact_digits = exact_digits.trim_end_matches('0');
    if exact_digits.len() != digits.len() + 1 || !exact_digits.ends_with('5') {
        return;
    }
    let lower = &exact_digits[..digits.len()];
    let Some(last) = lower.bytes().last().filter(|b| (b'0'..=b'8').contains(b)) else {
        return;
    };
    *digits = if last % 2 == 0 {
        lower.to_owned()
    } else {
        format!("{}{}", &lower[..lower.len() - 1], char::from(last + 1))
    };
}

/// The exponent of the lowest set bit of a finite nonzero float (`x = odd * 2^exponent`).
fn lowest_bit_exponent(x: f64) -> i32 {
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1u64 << 52) - 1);
    let (mantissa, exponent) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1u64 << 52), biased - 1075)
    };
    if mantissa == 0 {
        return i32::MIN;
    }
    exponent + mantissa.trailing_zeros() as i32
}

/// `json.dumps(value, sort_keys=True, ensure_ascii=False)`: `", "` and `": "` separators,
/// Python number rendering, only `"`, `\` and control characters escaped.
fn python_json(value: &Value) -> String {
    enum Step<'a> {
        Value(&'a Value),
        Key(&'a str),
        Text(&'static str),
    }
    let mut out = String::new();
    // An explicit stack rather than recursion so a deeply nested value cannot overflow.
    let mut steps = vec![Step::Value(value)];
    while let Some(step) = steps.pop() {
        match step {
            Step::Text(text) => out.push_str(text),
            Step::Key(key) => push_json_string(&mut out, key),
            Step::Value(value) => match value {
                Value::Null => out.push_str("null"),
                Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
                Value::Number(n) => out.push_str(&python_number(n)),
                Value::String(s) => push_json_string(&mut out, s),
                Value::Array(items) => {
                    out.push('[');
                    steps.push(Step::Text("]"));
                    for (i, item) in items.iter().enumerate().rev() {
                        steps.push(Step::Value(item));
                        if i > 0 {
                            steps.push(Step::Text(", "));
                        }
                    }
                }
                Value::Object(object) => {
                    out.push('{');
                    steps.push(Step::Text("}"));
                    // Sorted here rather than trusting the map's order, which depends on
                    // serde_json's `preserve_order` feature anywhere in the build.
                    let mut entries: Vec<(&String, &Value)> = object.iter().collect();
                    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                    for (i, (key, item)) in entries.into_iter().enumerate().rev() {
                        steps.push(Step::Value(item));
                        steps.push(Step::Text(": "));
                        steps.push(Step::Key(key));
                        if i > 0 {
                            steps.push(Step::Text(", "));
                        }
                    }
                }
            },
        }
    }
    out
}

/// Appends `s` as a JSON string literal the way Python's encoder writes it with
/// `ensure_ascii=False`.
fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn nested_data() -> Value {
        json!({
            "name": "test",
            "info": {
                "age": 25,
                "tags": ["a", "b", "c"],
                "metadata": {"created": "2024-01-01", "updated": "2024-01-02"},
            },
            "items": [
                {"id": 1, "value": "first", "tags": ["x", "y"]},
                {"id": 2, "value": "second", "tags": ["y", "z"]},
                {"id": 3, "value": "third", "tags": ["z", "w"]},
            ],
            "empty": null,
            "zeros": [0, 0.0, "0"],
            "empty_list": [],
            "empty_dict": {},
        })
    }

    fn texts(value: &Value, path: &str) -> Vec<String> {
        get_text_at_path(value, path)
    }

    fn sorted(mut texts: Vec<String>) -> Vec<String> {
        texts.sort();
        texts
    }

    /// `json.dumps(nested_data, sort_keys=True, ensure_ascii=False)` as printed by Python.
    const NESTED_DATA_JSON: &str = r#"{"empty": null, "empty_dict": {}, "empty_list": [], "info": {"age": 25, "metadata": {"created": "2024-01-01", "updated": "2024-01-02"}, "tags": ["a", "b", "c"]}, "items": [{"id": 1, "tags": ["x", "y"], "value": "first"}, {"id": 2, "tags": ["y", "z"], "value": "second"}, {"id": 3, "tags": ["z", "w"], "value": "third"}], "name": "test", "zeros": [0, 0.0, "0"]}"#;

    // Every assertion of LangGraph's `test_get_text_at_path`, in its order.
    #[test]
    fn whole_value_is_sorted_keys_python_json() {
        let data = nested_data();
        assert_eq!(texts(&data, "$"), [NESTED_DATA_JSON]);
        assert_eq!(texts(&data, ""), [NESTED_DATA_JSON]);
    }

    #[test]
    fn dotted_paths_reach_nested_scalars() {
        let data = nested_data();
        assert_eq!(texts(&data, "name"), ["test"]);
        assert_eq!(texts(&data, "info.age"), ["25"]);
        assert_eq!(texts(&data, "info.metadata.created"), ["2024-01-01"]);
    }

    #[test]
    fn indexes_count_from_either_end() {
        let data = nested_data();
        assert_eq!(texts(&data, "items[0].value"), ["first"]);
        assert_eq!(texts(&data, "items[-1].value"), ["third"]);
        assert_eq!(texts(&data, "items[1].tags[0]"), ["y"]);
    }

    #[test]
    fn wildcards_fan_out_in_order() {
        let data = nested_data();
        assert_eq!(texts(&data, "items[*].value"), ["first", "second", "third"]);
        assert_eq!(
            texts(&data, "info.metadata.*"),
            ["2024-01-01", "2024-01-02"]
        );
        assert_eq!(
            texts(&data, "items[*].tags[*]"),
            ["x", "y", "y", "z", "z", "w"]
        );
    }

    #[test]
    fn multi_field_selection_collects_each_field() {
        let data = nested_data();
        assert_eq!(texts(&data, "{name,info.age}"), ["test", "25"]);
        assert_eq!(
            texts(&data, "items[*].{id,value}"),
            ["1", "first", "2", "second", "3", "third"]
        );
    }

    #[test]
    fn missing_values_give_no_text() {
        let data = nested_data();
        assert!(texts(&Value::Null, "any.path").is_empty());
        assert!(texts(&json!({}), "any.path").is_empty());
        assert!(texts(&data, "nonexistent").is_empty());
        assert!(texts(&data, "items[99].value").is_empty());
        assert!(texts(&data, "items[*].nonexistent").is_empty());
        assert!(texts(&data, "empty").is_empty());
    }

    #[test]
    fn empty_containers_render_as_json() {
        let data = nested_data();
        assert_eq!(texts(&data, "empty_list"), ["[]"]);
        assert_eq!(texts(&data, "empty_dict"), ["{}"]);
    }

    #[test]
    fn zeros_keep_python_int_and_float_forms() {
        let data = nested_data();
        assert_eq!(texts(&data, "zeros[*]"), ["0", "0.0", "0"]);
        assert_eq!(sorted(texts(&data, "zeros[*]")), ["0", "0", "0.0"]);
    }

    #[test]
    fn malformed_paths_give_no_text() {
        let data = nested_data();
        assert!(texts(&data, "items[].value").is_empty());
        assert!(texts(&data, "items[abc].value").is_empty());
        assert!(texts(&data, "{unclosed").is_empty());
        assert!(texts(&data, "nested[{invalid}]").is_empty());
    }

    // Beyond LangGraph's test: expected values printed by Python 3.11 with langgraph-checkpoint
    // 4.3.2 (which also agreed on 50,000 random value/path pairs and 60,000 random floats).
    #[test]
    fn leaves_render_like_python_str() {
        let data = json!({
            "t": true, "f": false, "i": -7, "u": 18446744073709551615u64,
            "floats": [1.0, -0.0, 0.1, 1e16, 1.5e16, 1e15, 123456.789, 1e-4, 1e-5, 1.5e-7,
                       2.5e-300, 1.7976931348623157e308, -3.25, 5e-324, 1e22],
            "list": [1, "é", null, {"b": 2, "a": [true]}],
        });
        assert_eq!(
            texts(&data, "{t,f,i,u}"),
            ["True", "False", "-7", "18446744073709551615"]
        );
        assert_eq!(
            texts(&data, "floats[*]"),
            [
                "1.0",
                "-0.0",
                "0.1",
                "1e+16",
                "1.5e+16",
                "1000000000000000.0",
                "123456.789",
                "0.0001",
                "1e-05",
                "1.5e-07",
                "2.5e-300",
                "1.7976931348623157e+308",
                "-3.25",
                "5e-324",
                "1e+22"
            ]
        );
        // Exact halfway cases, where Python keeps the even last digit.
        let ties: Value = serde_json::from_str(
            "[1696282451989086.25, 1696282451989086.75, -1696282451989086.25]",
        )
        .unwrap();
        assert_eq!(
            texts(&ties, "[*]"),
            [
                "1696282451989086.2",
                "1696282451989086.8",
                "-1696282451989086.2"
            ]
        );
        assert_eq!(
            texts(&data, "list"),
            [r#"[1, "é", null, {"a": [true], "b": 2}]"#]
        );
    }

    #[test]
    fn json_strings_escape_like_python_without_ascii() {
        let data = json!({"s": "q\"b\\n\n\r\t\u{8}\u{c}\u{1}\u{1f}\u{7f} 日本 💡"});
        assert_eq!(
            texts(&data, "$"),
            [r#"{"s": "q\"b\\n\n\r\t\b\f\u0001\u001f"#.to_owned() + "\u{7f} 日本 💡\"}"]
        );
    }

    #[test]
    fn indexes_parse_like_python_int() {
        let data = json!({"a": [10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21]});
        assert_eq!(texts(&data, "a[ 1 ]"), ["11"]);
        assert_eq!(texts(&data, "a[+2]"), ["12"]);
        assert_eq!(texts(&data, "a[-0]"), ["10"]);
        assert_eq!(texts(&data, "a[1_0]"), ["20"]);
        assert_eq!(texts(&data, "a[007]"), ["17"]);
        assert_eq!(texts(&data, "a[٣]"), ["13"]);
        assert_eq!(texts(&data, "a[１]"), ["11"]);
        assert_eq!(texts(&data, "a[-12]"), ["10"]);
        for bad in [
            "a[-13]",
            "a[12]",
            "a[_1]",
            "a[1_]",
            "a[1__0]",
            "a[- 1]",
            "a[--1]",
            "a[1.0]",
            "a[0x1]",
            "a[ * ]",
            "a[[0]]",
            "a[]",
            "a[99999999999999999999999999999999999999999]",
        ] {
            assert!(texts(&data, bad).is_empty(), "{bad}");
        }
    }

    #[test]
    fn langgraph_tokenizer_quirks_are_kept() {
        let data = json!({
            "$": {"a": "dollar"}, "[x": "bracket key", "{y": "brace key", "a": {"b": "ab"},
            "l": [{"k": "v"}], "*": "star key", " sp ": "spaced",
        });
        assert_eq!(texts(&data, "$.a"), ["dollar"]);
        assert_eq!(texts(&data, "[x"), ["bracket key"]);
        assert_eq!(texts(&data, "{y"), ["brace key"]);
        assert_eq!(texts(&data, "..a..b.."), ["ab"]);
        // Tokens after a multi-field selection are ignored.
        assert_eq!(texts(&data, "{a}.b"), [r#"{"b": "ab"}"#]);
        // Inside `{...}` segments are plain keys: no indexing, `*` is a key.
        assert!(texts(&data, "{l[0].k}").is_empty());
        assert_eq!(texts(&data, "{*, a.b ,,missing}"), ["star key", "ab"]);
        // Fields are stripped, plain keys are not.
        assert_eq!(texts(&data, " sp "), ["spaced"]);
        assert!(texts(&data, "{ sp }").is_empty());
        // Wildcards and indexes on the wrong kind of value give nothing.
        assert!(texts(&data, "a[0]").is_empty());
        assert!(texts(&data, "a.b.*").is_empty());
        assert!(texts(&data, "l.k").is_empty());
        assert_eq!(texts(&json!([[1, 2], {"z": null}]), "*.*"), ["1", "2"]);
        assert_eq!(texts(&Value::Null, "$"), ["null"]);
        assert_eq!(texts(&json!("s"), "[0]"), Vec::<String>::new());
    }

    #[test]
    fn deep_values_and_long_paths_do_not_overflow() {
        let mut value = json!("leaf");
        for _ in 0..50_000 {
            value = Value::Array(vec![value]);
        }
        let text = texts(&value, "$");
        assert_eq!(text[0].len(), 100_000 + "\"leaf\"".len());
        let path = "[0]".repeat(50_000);
        assert_eq!(texts(&value, &path), ["leaf"]);
        assert!(texts(&value, &"a.".repeat(100_000)).is_empty());
        // Dropping a deeply nested Value recurses inside serde_json; leak it instead.
        std::mem::forget(value);
    }

    #[test]
    fn random_garbage_paths_never_panic() {
        // A tiny deterministic xorshift so the test needs no extra dependency.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let alphabet: Vec<char> = "ab.[]{},*$-+_0123456789 \t٣é日💡\u{0}\\\""
            .chars()
            .collect();
        let data = json!({
            "a": [{"b": 1}, {"a": [1.5, "x", null]}, []],
            "b": {"a": {"b": true}, "*": "s"},
            "": "empty key", "0": [0],
        });
        for _ in 0..20_000 {
            let len = (next() % 24) as usize;
            let path: String = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            std::hint::black_box(texts(&data, &path));
        }
    }
}
