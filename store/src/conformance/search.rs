//! Search without a query: prefixes on whole labels, literal labels, order and pages.

use serde_json::json;

use super::{StoreFactory, fresh, obj, open};
use crate::{Namespace, Op, PutOp, Result, SearchOp, StoreConfig, StoreExt};

fn child(root: &Namespace, labels: &[&str]) -> Namespace {
    Namespace::new(
        root.labels()
            .iter()
            .cloned()
            .chain(labels.iter().map(|l| (*l).to_owned())),
    )
}

fn keys(items: &[crate::SearchItem]) -> Vec<String> {
    items.iter().map(|i| i.key.clone()).collect()
}

/// A prefix matches itself and its descendants, never a label that merely starts alike.
pub async fn search_prefix_matches_whole_labels(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let root = fresh(&[]);
    for (labels, key) in [
        (&["foo"][..], "exact"),
        (&["foo", "child", "deep"][..], "deep"),
        (&["foobar"][..], "foobar"),
        (&["foo2"][..], "foo2"),
    ] {
        store
            .put(child(&root, labels), key, json!({"k": key}))
            .await?;
    }
    let mut got = keys(&store.search(SearchOp::new(child(&root, &["foo"]))).await?);
    got.sort();
    assert_eq!(got, ["deep", "exact"]);
    assert!(
        store
            .search(SearchOp::new(child(&root, &["fo"])))
            .await?
            .is_empty()
    );
    Ok(())
}

/// The empty prefix searches the whole store.
pub async fn search_empty_prefix_matches_all(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    store.put(fresh(&["a"]), "one", json!({"v": 1})).await?;
    store
        .put(fresh(&["b", "c"]), "two", json!({"v": 2}))
        .await?;
    let got = store
        .search(SearchOp::new(Namespace::root()).limit(100))
        .await?;
    assert_eq!(got.len(), 2);
    Ok(())
}

/// `_ % * ? [ ]`, `+` and trailing newlines in labels are literal characters.
pub async fn search_metacharacter_labels_are_literal(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let root = fresh(&[]);
    let pairs: &[(&str, &str)] = &[
        ("user_1", "userX1"),
        ("a%b", "aXXb"),
        ("star*", "starry"),
        ("q?", "qq"),
        ("[x]", "x"),
        ("plus+", "plusss"),
        ("line\n", "line"),
    ];
    for (literal, lookalike) in pairs {
        store
            .put(child(&root, &[literal]), "literal", json!({"v": 1}))
            .await?;
        store
            .put(child(&root, &[lookalike]), "lookalike", json!({"v": 2}))
            .await?;
    }
    for (literal, lookalike) in pairs {
        let got = keys(
            &store
                .search(SearchOp::new(child(&root, &[literal])))
                .await?,
        );
        assert_eq!(got, ["literal"], "prefix {literal:?}");
        let got = keys(
            &store
                .search(SearchOp::new(child(&root, &[lookalike])))
                .await?,
        );
        assert_eq!(got, ["lookalike"], "prefix {lookalike:?}");
    }
    Ok(())
}

/// Labels compare case-sensitively.
pub async fn search_is_case_sensitive(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let root = fresh(&[]);
    store
        .put(child(&root, &["Users"]), "upper", json!({"v": 1}))
        .await?;
    store
        .put(child(&root, &["users"]), "lower", json!({"v": 1}))
        .await?;
    let got = keys(
        &store
            .search(SearchOp::new(child(&root, &["users"])))
            .await?,
    );
    assert_eq!(got, ["lower"]);
    Ok(())
}

/// Without a query, the most recently updated item comes first, ties by key.
///
/// This is the order of LangGraph's SQLite and PostgreSQL stores; its `InMemoryStore` returns
/// first-insertion order instead (an update keeps its place), so a guide's `memories[-1]`
/// (the newest there) is `memories[0]` on every Waypoint backend.
pub async fn search_orders_by_updated_at(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    for key in ["a", "b", "c"] {
        store.put(&ns, key, json!({"v": key})).await?;
    }
    assert_eq!(
        keys(&store.search(SearchOp::new(&ns)).await?),
        ["c", "b", "a"]
    );
    store.put(&ns, "a", json!({"v": "again"})).await?;
    let got = store.search(SearchOp::new(&ns)).await?;
    assert_eq!(keys(&got), ["a", "c", "b"]);
    assert!(got.iter().all(|i| i.score.is_none()));
    Ok(())
}

/// The newest-first order spans every namespace under the prefix (not grouped by
/// namespace); puts of one batch share one update time and come in namespace, then key order.
pub async fn search_order_spans_namespaces_ties_by_namespace_then_key(
    f: &dyn StoreFactory,
) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let root = fresh(&[]);
    let (x, y) = (child(&root, &["x"]), child(&root, &["y"]));
    store.put(&x, "a", json!({"v": 1})).await?;
    store.put(&y, "b", json!({"v": 2})).await?;
    store.put(&x, "c", json!({"v": 3})).await?;
    let got = keys(&store.search(SearchOp::new(&root)).await?);
    assert_eq!(got, ["c", "b", "a"]);

    let put = |ns: &Namespace, key: &str| Op::Put(PutOp::new(ns, key, obj(json!({"v": 4}))));
    store
        .batch(vec![put(&y, "a"), put(&x, "z"), put(&x, "b"), put(&y, "0")])
        .await?;
    let got = store.search(SearchOp::new(&root)).await?;
    let order: Vec<String> = got
        .iter()
        .map(|i| {
            format!(
                "{}/{}",
                i.namespace.labels().last().map_or("", |l| l),
                i.key
            )
        })
        .collect();
    assert_eq!(order, ["x/b", "x/z", "y/0", "y/a", "x/c", "y/b", "x/a"]);
    assert!(got[..4].iter().all(|i| i.updated_at == got[0].updated_at));
    Ok(())
}

/// Pages of `limit` after `offset` cover the results without gaps or repeats.
pub async fn search_pagination(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    for i in 0..25 {
        store.put(&ns, &format!("k{i:02}"), json!({"i": i})).await?;
    }
    let mut seen = Vec::new();
    for page in 0..3 {
        let got = store
            .search(SearchOp::new(&ns).limit(10).offset(page * 10))
            .await?;
        seen.extend(keys(&got));
    }
    let expected: Vec<String> = (0..25).rev().map(|i| format!("k{i:02}")).collect();
    assert_eq!(seen, expected);
    Ok(())
}

/// A limit of zero returns nothing.
pub async fn search_limit_zero(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    store.put(&ns, "k", json!({"v": 1})).await?;
    assert!(store.search(SearchOp::new(&ns).limit(0)).await?.is_empty());
    Ok(())
}
