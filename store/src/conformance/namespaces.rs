//! `list_namespaces`: prefixes, suffixes, wildcards, depth, order and pages.
//!
//! These cases rely on the factory's promise of an empty store.

use serde_json::json;

use super::{StoreFactory, open};
use crate::{ListNamespacesOp, Namespace, Result, Store, StoreConfig, StoreExt};

const TREE: &[&[&str]] = &[
    &["a", "b", "c"],
    &["a", "b", "d", "e"],
    &["a", "b", "d", "i"],
    &["a", "b", "f"],
    &["a", "c", "f"],
    &["b", "a", "f"],
    &["users", "123"],
    &["users", "456", "settings"],
    &["admin", "users", "789"],
];

async fn fill(store: &dyn Store, namespaces: &[&[&str]]) -> Result<()> {
    for labels in namespaces {
        store.put(labels.to_vec(), "k", json!({"v": 1})).await?;
    }
    Ok(())
}

fn list(namespaces: &[&[&str]]) -> Vec<Namespace> {
    namespaces
        .iter()
        .map(|l| Namespace::new(l.iter().copied()))
        .collect()
}

/// Prefix, suffix, both, depth, wildcards, a missing prefix and an exact full namespace.
pub async fn list_namespaces_basic(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    fill(&*store, TREE).await?;
    let by = |op: ListNamespacesOp| {
        let store = &store;
        async move { store.list_namespaces(op).await }
    };
    assert_eq!(
        by(ListNamespacesOp::new().prefix(["a", "b"])).await?,
        list(&[
            &["a", "b", "c"],
            &["a", "b", "d", "e"],
            &["a", "b", "d", "i"],
            &["a", "b", "f"]
        ])
    );
    assert_eq!(
        by(ListNamespacesOp::new().suffix(["f"])).await?,
        list(&[&["a", "b", "f"], &["a", "c", "f"], &["b", "a", "f"]])
    );
    assert_eq!(
        by(ListNamespacesOp::new().prefix(["a"]).suffix(["f"])).await?,
        list(&[&["a", "b", "f"], &["a", "c", "f"]])
    );
    assert_eq!(
        by(ListNamespacesOp::new().prefix(["a", "b"]).max_depth(3)).await?,
        list(&[&["a", "b", "c"], &["a", "b", "d"], &["a", "b", "f"]])
    );
    assert_eq!(
        by(ListNamespacesOp::new().prefix(["a", "*", "f"])).await?,
        list(&[&["a", "b", "f"], &["a", "c", "f"]])
    );
    assert_eq!(
        by(ListNamespacesOp::new().suffix(["*", "f"])).await?,
        list(&[&["a", "b", "f"], &["a", "c", "f"], &["b", "a", "f"]])
    );
    assert!(
        by(ListNamespacesOp::new().prefix(["nonexistent"]))
            .await?
            .is_empty()
    );
    assert_eq!(
        by(ListNamespacesOp::new().prefix(["users", "123"])).await?,
        list(&[&["users", "123"]])
    );
    assert_eq!(by(ListNamespacesOp::new()).await?.len(), TREE.len());
    Ok(())
}

/// `*` stands for exactly one label, in prefixes and suffixes.
pub async fn list_namespaces_with_wildcards(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    fill(
        &*store,
        &[
            &["users", "123", "preferences"],
            &["users", "456", "preferences"],
            &["users", "789", "settings"],
            &["admin", "preferences"],
        ],
    )
    .await?;
    let users = store
        .list_namespaces(ListNamespacesOp::new().prefix(["users", "*"]))
        .await?;
    assert_eq!(users.len(), 3);
    let prefs = store
        .list_namespaces(ListNamespacesOp::new().suffix(["*", "preferences"]))
        .await?;
    assert_eq!(
        prefs,
        list(&[
            &["admin", "preferences"],
            &["users", "123", "preferences"],
            &["users", "456", "preferences"]
        ])
    );
    let none = store
        .list_namespaces(
            ListNamespacesOp::new()
                .prefix(["*", "users"])
                .suffix(["*", "settings"]),
        )
        .await?;
    assert!(none.is_empty());
    Ok(())
}

/// Pages of a sorted listing follow each other without gaps or repeats.
pub async fn list_namespaces_pagination(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    for i in 0..20 {
        let labels = ["namespace".to_owned(), format!("sub_{i:02}")];
        store.put(labels.to_vec(), "k", json!({"v": i})).await?;
    }
    let mut seen = Vec::new();
    for page in 0..4 {
        let got = store
            .list_namespaces(
                ListNamespacesOp::new()
                    .prefix(["namespace"])
                    .limit(5)
                    .offset(page * 5),
            )
            .await?;
        assert_eq!(got.len(), 5);
        seen.extend(got);
    }
    let expected: Vec<Namespace> = (0..20)
        .map(|i| Namespace::new(["namespace".to_owned(), format!("sub_{i:02}")]))
        .collect();
    assert_eq!(seen, expected);
    let past = store
        .list_namespaces(ListNamespacesOp::new().offset(20))
        .await?;
    assert!(past.is_empty());
    Ok(())
}

/// `max_depth` cuts namespaces, then removes duplicates.
pub async fn list_namespaces_max_depth_dedupes(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    fill(&*store, TREE).await?;
    let got = store
        .list_namespaces(ListNamespacesOp::new().max_depth(1))
        .await?;
    assert_eq!(got, list(&[&["a"], &["admin"], &["b"], &["users"]]));
    let got = store
        .list_namespaces(ListNamespacesOp::new().max_depth(2).limit(3))
        .await?;
    assert_eq!(got, list(&[&["a", "b"], &["a", "c"], &["admin", "users"]]));
    Ok(())
}

/// An empty store lists nothing.
pub async fn list_namespaces_empty_store(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    assert!(
        store
            .list_namespaces(ListNamespacesOp::new())
            .await?
            .is_empty()
    );
    Ok(())
}

/// Order is label by label (`("a","b")` before `("a-b",)`), not by the dot-joined text.
pub async fn list_namespaces_label_wise_order(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    fill(&*store, &[&["a-b"], &["a", "b"], &["a"]]).await?;
    let got = store.list_namespaces(ListNamespacesOp::new()).await?;
    assert_eq!(got, list(&[&["a"], &["a", "b"], &["a-b"]]));
    Ok(())
}

/// Only namespaces holding items are listed: not emptied ones, not ones merely read.
pub async fn list_namespaces_only_namespaces_with_items(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    store.put(["kept"], "k", json!({"v": 1})).await?;
    store.put(["emptied"], "k", json!({"v": 1})).await?;
    store.delete(["emptied"], "k").await?;
    assert!(store.get(["only", "read"], "k").await?.is_none());
    let got = store.list_namespaces(ListNamespacesOp::new()).await?;
    assert_eq!(got, list(&[&["kept"]]));
    Ok(())
}

/// Prefixes and suffixes match whole labels: `alice` is not `malice`.
pub async fn list_namespaces_segment_boundary(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    fill(
        &*store,
        &[
            &["users", "alice"],
            &["users", "malice"],
            &["users", "alice2", "x"],
            &["alice"],
        ],
    )
    .await?;
    let got = store
        .list_namespaces(ListNamespacesOp::new().suffix(["alice"]))
        .await?;
    assert_eq!(got, list(&[&["alice"], &["users", "alice"]]));
    let got = store
        .list_namespaces(ListNamespacesOp::new().prefix(["users", "alice"]))
        .await?;
    assert_eq!(got, list(&[&["users", "alice"]]));
    let got = store
        .list_namespaces(ListNamespacesOp::new().prefix(["*", "alice2"]))
        .await?;
    assert_eq!(got, list(&[&["users", "alice2", "x"]]));
    let got = store
        .list_namespaces(ListNamespacesOp::new().prefix(["user"]))
        .await?;
    assert!(got.is_empty());
    Ok(())
}
