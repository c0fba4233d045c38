//! Items: put, get, update, delete; batches; namespace validation.

use serde_json::json;

use super::{StoreFactory, ensure, fresh, obj, open};
use crate::{
    Error, GetOp, ListNamespacesOp, Namespace, Op, OpResult, PutOp, Result, SearchOp, StoreConfig,
    StoreExt,
};

/// A put item comes back with its namespace, key, value and equal timestamps.
pub async fn put_and_get_roundtrip(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&["docs"]);
    let value = json!({"title": "hello", "n": 3, "nested": {"list": [1, 2.5, "x", null, true]}});
    store.put(&ns, "doc1", value.clone()).await?;
    let item = store.get(&ns, "doc1").await?;
    let Some(item) = item else {
        return Err(Error::InvalidConfig("put item not found".into()));
    };
    assert_eq!(item.namespace, ns);
    assert_eq!(item.key, "doc1");
    assert_eq!(
        serde_json::Value::Object(std::sync::Arc::unwrap_or_clone(item.value)),
        value
    );
    assert_eq!(item.created_at, item.updated_at);
    Ok(())
}

/// Reading a key never put gives `None`.
pub async fn get_missing_returns_none(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    assert!(store.get(fresh(&[]), "nope").await?.is_none());
    Ok(())
}

/// An update replaces the value, keeps `created_at` and moves `updated_at` forward.
pub async fn put_update_keeps_created_at(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    store.put(&ns, "k", json!({"v": 1})).await?;
    let first = store.get(&ns, "k").await?;
    store.put(&ns, "k", json!({"v": 2})).await?;
    let second = store.get(&ns, "k").await?;
    let (Some(first), Some(second)) = (first, second) else {
        return Err(Error::InvalidConfig("item missing".into()));
    };
    assert_eq!(second.value["v"], 2);
    assert_eq!(second.created_at, first.created_at);
    assert!(second.updated_at > first.updated_at);
    Ok(())
}

/// A deleted item is gone.
pub async fn delete_removes_item(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    store.put(&ns, "k", json!({"v": 1})).await?;
    store.delete(&ns, "k").await?;
    assert!(store.get(&ns, "k").await?.is_none());
    assert!(store.search(SearchOp::new(&ns)).await?.is_empty());
    Ok(())
}

/// Deleting a missing item succeeds and changes nothing.
pub async fn delete_missing_is_noop(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    store.put(&ns, "keep", json!({"v": 1})).await?;
    store.delete(&ns, "absent").await?;
    assert!(store.get(&ns, "keep").await?.is_some());
    Ok(())
}

/// Values must be JSON objects.
pub async fn put_rejects_non_object_values(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    for value in [
        json!(1),
        json!("text"),
        json!([1, 2]),
        json!(null),
        json!(true),
    ] {
        let err = store.put(&ns, "k", value).await;
        assert!(matches!(err, Err(Error::InvalidValue(_))), "{err:?}");
    }
    assert!(store.get(&ns, "k").await?.is_none());
    Ok(())
}

/// The same key in two namespaces names two items.
pub async fn namespaces_isolate_keys(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let root = fresh(&[]);
    let a = Namespace::new(root.labels().iter().cloned().chain(["a".to_owned()]));
    let b = Namespace::new(root.labels().iter().cloned().chain(["b".to_owned()]));
    store.put(&a, "k", json!({"who": "a"})).await?;
    store.put(&b, "k", json!({"who": "b"})).await?;
    let got_a = store.get(&a, "k").await?.map(|i| i.value["who"].clone());
    let got_b = store.get(&b, "k").await?.map(|i| i.value["who"].clone());
    assert_eq!(got_a, Some(json!("a")));
    assert_eq!(got_b, Some(json!("b")));
    store.delete(&a, "k").await?;
    assert!(store.get(&b, "k").await?.is_some());
    Ok(())
}

/// Non-ASCII labels, keys and values round-trip exactly.
pub async fn non_ascii_roundtrip(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = Namespace::new(fresh(&[]).labels().iter().cloned().chain([
        "用户".to_owned(),
        "пользователь".to_owned(),
        "emoji 🎉".to_owned(),
    ]));
    let value = json!({"名前": "山田", "текст": "привет мир", "हिंदी": "नमस्ते", "e": "👍🏽"});
    store.put(&ns, "ключ-鍵", value.clone()).await?;
    let item = store.get(&ns, "ключ-鍵").await?;
    assert_eq!(
        item.map(|i| serde_json::Value::Object(std::sync::Arc::unwrap_or_clone(i.value))),
        Some(value)
    );
    Ok(())
}

/// A value over `max_value_bytes` is refused and not written.
pub async fn oversized_value_rejected(f: &dyn StoreFactory) -> Result<()> {
    let config = StoreConfig {
        max_value_bytes: 1024,
        ..StoreConfig::new()
    };
    let store = open!(f, config);
    let ns = fresh(&[]);
    let big = json!({"blob": "x".repeat(2048)});
    let err = store.put(&ns, "big", big).await;
    assert!(matches!(err, Err(Error::InvalidValue(_))), "{err:?}");
    assert!(store.get(&ns, "big").await?.is_none());
    store.put(&ns, "small", json!({"blob": "x"})).await?;
    Ok(())
}

/// Results come back one per op, in op order, whatever the mix.
pub async fn batch_results_follow_op_order(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&["test"]);
    store.put(&ns, "key1", json!({"data": "value1"})).await?;
    store.put(&ns, "key2", json!({"data": "value2"})).await?;
    let results = store
        .batch(vec![
            Op::Get(GetOp::new(&ns, "key1")),
            Op::Put(PutOp::new(&ns, "key3", obj(json!({"data": "value3"})))),
            Op::Search(SearchOp::new(&ns).limit(5)),
            Op::ListNamespaces(ListNamespacesOp::new().prefix(ns.labels().to_vec())),
            Op::Get(GetOp::new(&ns, "key2")),
            Op::Get(GetOp::new(&ns, "missing")),
        ])
        .await?;
    assert_eq!(results.len(), 6);
    ensure!(
        matches!(&results[0], OpResult::Item(Some(i)) if i.key == "key1"),
        "op 0: {:?}",
        results[0]
    );
    ensure!(
        matches!(results[1], OpResult::Done),
        "op 1: {:?}",
        results[1]
    );
    ensure!(
        matches!(&results[2], OpResult::Items(items) if items.len() == 2),
        "op 2: {:?}",
        results[2]
    );
    ensure!(
        matches!(&results[3], OpResult::Namespaces(list) if list == std::slice::from_ref(&ns)),
        "op 3: {:?}",
        results[3]
    );
    ensure!(
        matches!(&results[4], OpResult::Item(Some(i)) if i.key == "key2"),
        "op 4: {:?}",
        results[4]
    );
    ensure!(
        matches!(results[5], OpResult::Item(None)),
        "op 5: {:?}",
        results[5]
    );
    assert!(store.get(&ns, "key3").await?.is_some());
    Ok(())
}

/// Reads in a batch see the store as it was before the batch's puts.
pub async fn batch_reads_before_writes(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    store.put(&ns, "k", json!({"v": "old"})).await?;
    let results = store
        .batch(vec![
            Op::Put(PutOp::new(&ns, "k", obj(json!({"v": "new"})))),
            Op::Put(PutOp::new(&ns, "fresh", obj(json!({"v": 1})))),
            Op::Get(GetOp::new(&ns, "k")),
            Op::Get(GetOp::new(&ns, "fresh")),
            Op::Search(SearchOp::new(&ns)),
        ])
        .await?;
    ensure!(
        matches!(&results[2], OpResult::Item(Some(i)) if i.value["v"] == "old"),
        "{:?}",
        results[2]
    );
    ensure!(
        matches!(results[3], OpResult::Item(None)),
        "{:?}",
        results[3]
    );
    ensure!(
        matches!(&results[4], OpResult::Items(items) if items.len() == 1),
        "{:?}",
        results[4]
    );
    let after = store.get(&ns, "k").await?.map(|i| i.value["v"].clone());
    assert_eq!(after, Some(json!("new")));
    Ok(())
}

/// Several puts to one key in a batch: the last one wins.
pub async fn batch_last_put_wins(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    let ops = (0..5)
        .map(|i| Op::Put(PutOp::new(&ns, "k", obj(json!({"v": i})))))
        .collect();
    store.batch(ops).await?;
    let value = store.get(&ns, "k").await?.map(|i| i.value["v"].clone());
    assert_eq!(value, Some(json!(4)));
    Ok(())
}

/// A put followed by a delete of the same key in one batch leaves nothing.
pub async fn batch_put_then_delete_deletes(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    store
        .batch(vec![
            Op::Put(PutOp::new(&ns, "k", obj(json!({"v": 1})))),
            Op::Put(PutOp::delete(&ns, "k")),
        ])
        .await?;
    assert!(store.get(&ns, "k").await?.is_none());
    Ok(())
}

/// One bad op fails the whole batch before anything is written.
pub async fn batch_failing_op_writes_nothing(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    let err = store
        .batch(vec![
            Op::Put(PutOp::new(&ns, "a", obj(json!({"v": 1})))),
            Op::Put(PutOp::new(["bad.label"], "b", obj(json!({"v": 2})))),
            Op::Put(PutOp::new(&ns, "c", obj(json!({"v": 3})))),
        ])
        .await;
    assert!(
        matches!(err, Err(Error::InvalidNamespace { .. })),
        "{err:?}"
    );
    assert!(store.get(&ns, "a").await?.is_none());
    assert!(store.get(&ns, "c").await?.is_none());
    Ok(())
}

/// An empty batch returns no results.
pub async fn empty_batch(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    assert!(store.batch(Vec::new()).await?.is_empty());
    Ok(())
}

/// Puts refuse an empty namespace, empty labels, labels with `.`, and the `langgraph` root.
pub async fn invalid_namespaces_rejected_on_put(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let bad: [Vec<&str>; 5] = [
        vec![],
        vec!["the", "thing.about"],
        vec!["some", "", "empty"],
        vec!["langgraph", "foo"],
        vec!["langgraph"],
    ];
    for labels in bad {
        let err = store.put(labels.clone(), "k", json!({"v": 1})).await;
        assert!(
            matches!(err, Err(Error::InvalidNamespace { .. })),
            "{labels:?}: {err:?}"
        );
    }
    let fine = Namespace::new(["foo", "langgraph", "foo"]);
    store.put(&fine, "k", json!({"v": 1})).await?;
    assert!(store.get(&fine, "k").await?.is_some());
    store.delete(&fine, "k").await?;
    Ok(())
}

/// Gets, deletes, searches and listings validate namespaces too.
pub async fn invalid_namespaces_rejected_everywhere(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let dotted = Namespace::new(["a.b"]);
    let checks = [
        store.get(&dotted, "k").await.map(drop),
        store.get(Namespace::root(), "k").await.map(drop),
        store.delete(&dotted, "k").await,
        store.search(SearchOp::new(&dotted)).await.map(drop),
        store.search(SearchOp::new(["a", ""])).await.map(drop),
        store
            .list_namespaces(ListNamespacesOp::new().prefix(["a.b"]))
            .await
            .map(drop),
        store
            .list_namespaces(ListNamespacesOp::new().suffix([""]))
            .await
            .map(drop),
    ];
    for (i, result) in checks.into_iter().enumerate() {
        assert!(
            matches!(result, Err(Error::InvalidNamespace { .. })),
            "check {i}: {result:?}"
        );
    }
    // The empty prefix is valid for search and means everything.
    store.search(SearchOp::new(Namespace::root())).await?;
    Ok(())
}
