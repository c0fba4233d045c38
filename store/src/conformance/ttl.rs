//! TTL: expiry, refresh on read, sweeping, defaults and overrides.

use std::time::Duration;

use serde_json::json;

use super::{StoreFactory, fresh, hashing_index, open};
use crate::{
    Error, GetOp, Index, ListNamespacesOp, Op, OpResult, Result, SearchOp, Store, StoreConfig,
    StoreExt, Ttl, TtlConfig,
};

/// Minutes in `seconds`.
fn secs(seconds: f64) -> Ttl {
    Ttl::Minutes(seconds / 60.0)
}

async fn sleep(seconds: f64) {
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
}

fn with_ttl(ttl: TtlConfig) -> StoreConfig {
    StoreConfig::new().ttl(ttl)
}

async fn present(store: &dyn Store, ns: &crate::Namespace, key: &str) -> Result<bool> {
    let op = GetOp {
        refresh_ttl: Some(false),
        ..GetOp::new(ns, key)
    };
    match store.one(Op::Get(op)).await? {
        OpResult::Item(item) => Ok(item.is_some()),
        _ => Ok(false),
    }
}

/// Expired items are invisible to get, search, semantic search and listings, even unswept.
pub async fn ttl_expired_items_never_returned(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new().index(hashing_index()));
    let ns = fresh(&["ttl"]);
    store
        .put_with(
            &ns,
            "short",
            json!({"text": "fleeting"}),
            Index::Default,
            secs(0.4),
        )
        .await?;
    assert!(present(&*store, &ns, "short").await?);
    sleep(0.8).await;
    assert!(store.get(&ns, "short").await?.is_none());
    assert!(store.search(SearchOp::new(&ns)).await?.is_empty());
    assert!(
        store
            .search(SearchOp::new(&ns).query("fleeting"))
            .await?
            .is_empty()
    );
    let listed = store
        .list_namespaces(ListNamespacesOp::new().prefix(ns.labels().to_vec()))
        .await?;
    assert!(listed.is_empty());
    Ok(())
}

/// A get restarts the TTL of what it returns.
pub async fn ttl_refresh_on_get(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, with_ttl(TtlConfig::default()));
    let ns = fresh(&[]);
    store
        .put_with(&ns, "read", json!({"v": 1}), Index::Default, secs(1.0))
        .await?;
    store
        .put_with(&ns, "unread", json!({"v": 1}), Index::Default, secs(1.0))
        .await?;
    sleep(0.6).await;
    assert!(store.get(&ns, "read").await?.is_some());
    sleep(0.7).await;
    assert!(present(&*store, &ns, "read").await?);
    assert!(!present(&*store, &ns, "unread").await?);
    Ok(())
}

/// A search restarts the TTL of the items it returns, and only of those.
pub async fn ttl_refresh_on_search(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, with_ttl(TtlConfig::default()));
    let ns = fresh(&[]);
    store
        .put_with(
            &ns,
            "found",
            json!({"name": "found"}),
            Index::Default,
            secs(1.0),
        )
        .await?;
    store
        .put_with(
            &ns,
            "missed",
            json!({"name": "missed"}),
            Index::Default,
            secs(1.0),
        )
        .await?;
    sleep(0.6).await;
    let got = store
        .search(SearchOp::new(&ns).filter(json!({"name": "found"})))
        .await?;
    assert_eq!(got.len(), 1);
    sleep(0.7).await;
    assert!(present(&*store, &ns, "found").await?);
    assert!(!present(&*store, &ns, "missed").await?);
    Ok(())
}

/// With `refresh_on_read` off, reads leave TTLs alone unless the op asks.
pub async fn ttl_refresh_disabled(f: &dyn StoreFactory) -> Result<()> {
    let config = TtlConfig {
        refresh_on_read: false,
        ..TtlConfig::default()
    };
    let store = open!(f, with_ttl(config));
    let ns = fresh(&[]);
    store
        .put_with(&ns, "plain", json!({"v": 1}), Index::Default, secs(1.0))
        .await?;
    store
        .put_with(&ns, "asked", json!({"v": 1}), Index::Default, secs(1.0))
        .await?;
    sleep(0.6).await;
    assert!(store.get(&ns, "plain").await?.is_some());
    let op = GetOp {
        refresh_ttl: Some(true),
        ..GetOp::new(&ns, "asked")
    };
    store.one(Op::Get(op)).await?;
    sleep(0.7).await;
    assert!(!present(&*store, &ns, "plain").await?);
    assert!(present(&*store, &ns, "asked").await?);
    Ok(())
}

/// Sweeping deletes expired items and reports how many.
pub async fn ttl_sweep_deletes_expired(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new().index(hashing_index()));
    let ns = fresh(&[]);
    for key in ["a", "b", "c"] {
        store
            .put_with(&ns, key, json!({"text": key}), Index::Default, secs(0.3))
            .await?;
    }
    store
        .put(&ns, "forever", json!({"text": "forever"}))
        .await?;
    sleep(0.6).await;
    assert_eq!(store.sweep_expired().await?, 3);
    assert_eq!(store.sweep_expired().await?, 0);
    assert!(present(&*store, &ns, "forever").await?);
    let got = store.search(SearchOp::new(&ns).query("a")).await?;
    assert_eq!(got.len(), 1);
    Ok(())
}

/// The background sweeper deletes expired items on its own.
pub async fn ttl_background_sweeper(f: &dyn StoreFactory) -> Result<()> {
    let config = TtlConfig {
        sweep_interval: Duration::from_millis(100),
        ..TtlConfig::default()
    };
    let store = open!(f, with_ttl(config));
    let sweeper = store.start_sweeper();
    assert!(sweeper.is_running());
    let ns = fresh(&[]);
    store
        .put_with(&ns, "k", json!({"v": 1}), Index::Default, secs(0.2))
        .await?;
    sleep(1.0).await;
    // Nothing left for a manual sweep: the background one got there first.
    assert_eq!(store.sweep_expired().await?, 0);
    sweeper.stop();
    Ok(())
}

/// `default_ttl` applies to puts without a TTL; `Ttl::Never` and explicit TTLs override it.
pub async fn ttl_default_and_override(f: &dyn StoreFactory) -> Result<()> {
    let config = TtlConfig {
        default_ttl: Some(0.4 / 60.0),
        ..TtlConfig::default()
    };
    let store = open!(f, with_ttl(config));
    let ns = fresh(&[]);
    store.put(&ns, "default", json!({"v": 1})).await?;
    store
        .put_with(&ns, "never", json!({"v": 1}), Index::Default, Ttl::Never)
        .await?;
    store
        .put_with(&ns, "longer", json!({"v": 1}), Index::Default, secs(5.0))
        .await?;
    sleep(0.8).await;
    assert!(!present(&*store, &ns, "default").await?);
    assert!(present(&*store, &ns, "never").await?);
    assert!(present(&*store, &ns, "longer").await?);
    Ok(())
}

/// Fractional minutes are kept exactly (0.02 minutes is 1.2 seconds, not 0 or 1 minute).
pub async fn ttl_fractional_minutes(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    store
        .put_with(
            &ns,
            "k",
            json!({"v": 1}),
            Index::Default,
            Ttl::Minutes(0.02),
        )
        .await?;
    sleep(0.6).await;
    assert!(present(&*store, &ns, "k").await?);
    sleep(1.0).await;
    assert!(!present(&*store, &ns, "k").await?);
    Ok(())
}

/// Zero, negative and non-finite TTLs are refused.
pub async fn ttl_invalid_rejected(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    for minutes in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let err = store
            .put_with(
                &ns,
                "k",
                json!({"v": 1}),
                Index::Default,
                Ttl::Minutes(minutes),
            )
            .await;
        assert!(
            matches!(err, Err(Error::InvalidValue(_))),
            "{minutes}: {err:?}"
        );
    }
    assert!(store.get(&ns, "k").await?.is_none());
    let bad = TtlConfig {
        default_ttl: Some(-5.0),
        ..TtlConfig::default()
    };
    let err = f.open(with_ttl(bad)).await.map(drop);
    assert!(matches!(err, Err(Error::InvalidValue(_))), "{err:?}");
    Ok(())
}

/// A re-put replaces the TTL: without one, the item no longer expires.
pub async fn ttl_update_resets(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    store
        .put_with(&ns, "k", json!({"v": 1}), Index::Default, secs(0.4))
        .await?;
    store.put(&ns, "k", json!({"v": 2})).await?;
    sleep(0.8).await;
    assert!(present(&*store, &ns, "k").await?);
    Ok(())
}
