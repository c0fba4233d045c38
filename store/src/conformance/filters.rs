//! Search filters: equality, comparisons, missing keys, hostile input.

use serde_json::{Value, json};

use super::{StoreFactory, fresh, open};
use crate::{Error, Namespace, Result, SearchOp, Store, StoreConfig, StoreExt};

async fn matching(store: &dyn Store, ns: &Namespace, filter: Value) -> Result<Vec<String>> {
    let items = store
        .search(SearchOp::new(ns).filter(filter).limit(1000))
        .await?;
    let mut keys: Vec<String> = items.into_iter().map(|i| i.item.key).collect();
    keys.sort();
    Ok(keys)
}

async fn fill(store: &dyn Store, ns: &Namespace) -> Result<()> {
    let docs = [
        (
            "a",
            json!({"color": "red", "score": 4.5, "n": 10, "tags": ["x", "y"], "ok": true}),
        ),
        (
            "b",
            json!({"color": "blue", "score": 3.0, "n": 9, "tags": ["x"], "ok": false}),
        ),
        (
            "c",
            json!({"color": "red", "score": 5, "n": -2, "meta": {"k": 1}, "none": null}),
        ),
        ("d", json!({"title": "no color here"})),
    ];
    for (key, value) in docs {
        store.put(ns, key, value).await?;
    }
    Ok(())
}

/// Plain values and `$eq` match equal values; numbers compare by value, lists and objects whole.
pub async fn filter_equality(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    fill(&*store, &ns).await?;
    assert_eq!(
        matching(&*store, &ns, json!({"color": "red"})).await?,
        ["a", "c"]
    );
    assert_eq!(
        matching(&*store, &ns, json!({"color": {"$eq": "blue"}})).await?,
        ["b"]
    );
    assert_eq!(matching(&*store, &ns, json!({"score": 5.0})).await?, ["c"]);
    assert_eq!(matching(&*store, &ns, json!({"score": 3})).await?, ["b"]);
    assert_eq!(matching(&*store, &ns, json!({"ok": true})).await?, ["a"]);
    assert_eq!(matching(&*store, &ns, json!({"tags": ["x"]})).await?, ["b"]);
    assert_eq!(
        matching(&*store, &ns, json!({"meta": {"k": 1}})).await?,
        ["c"]
    );
    assert_eq!(matching(&*store, &ns, json!({"none": null})).await?, ["c"]);
    assert_eq!(
        matching(&*store, &ns, json!({})).await?,
        ["a", "b", "c", "d"]
    );
    Ok(())
}

/// `$gt $gte $lt $lte` compare numbers as numbers (10 > 9) and strings by code point.
pub async fn filter_comparison_is_numeric(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    fill(&*store, &ns).await?;
    assert_eq!(
        matching(&*store, &ns, json!({"n": {"$gt": 9}})).await?,
        ["a"]
    );
    assert_eq!(
        matching(&*store, &ns, json!({"n": {"$gte": 9}})).await?,
        ["a", "b"]
    );
    assert_eq!(
        matching(&*store, &ns, json!({"n": {"$lt": 9.5}})).await?,
        ["b", "c"]
    );
    assert_eq!(
        matching(&*store, &ns, json!({"n": {"$lte": -2}})).await?,
        ["c"]
    );
    assert_eq!(
        matching(&*store, &ns, json!({"score": {"$gt": 4}})).await?,
        ["a", "c"]
    );
    assert_eq!(
        matching(&*store, &ns, json!({"color": {"$gt": "blue"}})).await?,
        ["a", "c"]
    );
    // A string never orders against a number.
    assert!(
        matching(&*store, &ns, json!({"color": {"$gt": 1}}))
            .await?
            .is_empty()
    );
    Ok(())
}

/// `$ne` matches items that lack the key.
pub async fn filter_ne_matches_missing_key(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    fill(&*store, &ns).await?;
    assert_eq!(
        matching(&*store, &ns, json!({"color": {"$ne": "red"}})).await?,
        ["b", "d"]
    );
    Ok(())
}

/// Every operator other than `$ne` excludes items that lack the key.
pub async fn filter_missing_key_excluded(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    fill(&*store, &ns).await?;
    assert_eq!(
        matching(&*store, &ns, json!({"title": {"$gte": ""}})).await?,
        ["d"]
    );
    assert!(
        matching(&*store, &ns, json!({"absent": null}))
            .await?
            .is_empty()
    );
    assert!(
        matching(&*store, &ns, json!({"absent": {"$lt": 100}}))
            .await?
            .is_empty()
    );
    Ok(())
}

/// Conditions combine with AND, also several operators on one key.
pub async fn filter_combined_conditions(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    fill(&*store, &ns).await?;
    let filter = json!({"color": "red", "score": {"$gte": 4.5, "$lt": 5}});
    assert_eq!(matching(&*store, &ns, filter).await?, ["a"]);
    Ok(())
}

/// An unknown operator (`$or` and any other `$` key at the top, or one inside a field), or an
/// ordering operator on a non-scalar, is an error: never taken as a field name.
pub async fn filter_unknown_operator_is_error(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    fill(&*store, &ns).await?;
    for filter in [
        json!({"color": {"$regex": "r.*"}}),
        json!({"color": {"$in": ["red"]}}),
        json!({"n": {"$gt": [1]}}),
        json!({"n": {"$lt": null}}),
        // Keys starting with `$` at the top are operators, none supported: never field names.
        json!({"$or": [{"color": "red"}, {"color": "blue"}]}),
        json!({"$and": [{"color": "red"}]}),
        json!({"$not": {"color": "red"}}),
        json!({"color": "red", "$where": "1"}),
        json!({"$.color": "red"}),
        // Inside a field: an operator beside a plain key, or an unknown one.
        json!({"color": {"$eq": "red", "shade": "dark"}}),
        json!({"color": {"$exists": true}}),
    ] {
        let err = store
            .search(SearchOp::new(&ns).filter(filter.clone()))
            .await;
        assert!(
            matches!(err, Err(Error::InvalidFilter(_))),
            "{filter}: {err:?}"
        );
    }
    Ok(())
}

/// A filter that is not an object is an error.
pub async fn filter_non_object_is_error(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let err = store
        .search(SearchOp::new(fresh(&[])).filter(json!(["color"])))
        .await;
    assert!(matches!(err, Err(Error::InvalidFilter(_))), "{err:?}");
    Ok(())
}

/// Keys are literal top-level keys, whatever characters they hold (no injection, no paths).
pub async fn filter_hostile_keys_are_literal(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    let hostile = [
        "'; DROP TABLE store; --",
        "a') OR 1=1 --",
        "a$b",
        "a.b",
        "x\"y",
        "key with spaces",
        "-dash",
        "0",
    ];
    for (i, key) in hostile.iter().enumerate() {
        let mut value = serde_json::Map::new();
        value.insert((*key).to_owned(), json!(i));
        store
            .put(&ns, &format!("k{i}"), Value::Object(value))
            .await?;
    }
    store
        .put(&ns, "nested", json!({"a": {"b": 0}, "color": "red"}))
        .await?;
    for (i, key) in hostile.iter().enumerate() {
        let mut filter = serde_json::Map::new();
        filter.insert((*key).to_owned(), json!(i));
        let got = matching(&*store, &ns, Value::Object(filter)).await?;
        assert_eq!(got, [format!("k{i}")], "key {key:?}");
    }
    assert_eq!(
        matching(&*store, &ns, json!({})).await?.len(),
        hostile.len() + 1
    );
    Ok(())
}

/// Values are data: quotes, comments, UNIONs and NUL characters match only themselves.
pub async fn filter_hostile_values_are_data(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    store
        .put(&ns, "obrien", json!({"name": "O'Brien's"}))
        .await?;
    store.put(&ns, "plain", json!({"name": "plain"})).await?;
    assert_eq!(
        matching(&*store, &ns, json!({"name": "O'Brien's"})).await?,
        ["obrien"]
    );
    for value in [
        "' OR '1'='1",
        "plain' --",
        "x' UNION SELECT * FROM store --",
        "/* comment */",
        "名前",
        "\\",
        "nul\u{0}byte",
    ] {
        assert!(
            matching(&*store, &ns, json!({"name": value}))
                .await?
                .is_empty(),
            "{value}"
        );
    }
    Ok(())
}

/// Huge, tiny, negative and big-integer numbers compare exactly.
pub async fn filter_extreme_numbers(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    store.put(&ns, "huge", json!({"x": 1e300})).await?;
    store.put(&ns, "neg", json!({"x": -1e300})).await?;
    store.put(&ns, "big", json!({"x": u64::MAX})).await?;
    store.put(&ns, "tiny", json!({"x": 5e-324})).await?;
    assert_eq!(
        matching(&*store, &ns, json!({"x": {"$gt": 1e299}})).await?,
        ["huge"]
    );
    assert_eq!(
        matching(&*store, &ns, json!({"x": {"$lt": 0}})).await?,
        ["neg"]
    );
    assert_eq!(
        matching(&*store, &ns, json!({"x": u64::MAX})).await?,
        ["big"]
    );
    assert_eq!(
        matching(&*store, &ns, json!({"x": {"$gt": i64::MAX, "$lt": 1e100}})).await?,
        ["big"]
    );
    assert_eq!(
        matching(&*store, &ns, json!({"x": {"$gt": 0, "$lt": 1}})).await?,
        ["tiny"]
    );
    Ok(())
}

/// Filtered pages are full: the filter applies before `offset` and `limit`.
pub async fn filter_page_is_never_underfilled(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    for i in 0..100 {
        store
            .put(
                &ns,
                &format!("k{i:03}"),
                json!({"even": i % 10 == 0, "i": i}),
            )
            .await?;
    }
    let page = store
        .search(
            SearchOp::new(&ns)
                .filter(json!({"even": true}))
                .limit(4)
                .offset(3),
        )
        .await?;
    let got: Vec<String> = page.iter().map(|i| i.key.clone()).collect();
    assert_eq!(got, ["k060", "k050", "k040", "k030"]);
    Ok(())
}
