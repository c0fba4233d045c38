//! Opening a store by URL, choosing the backend at run time.

use crate::{Error, InMemoryStore, Result, Store, StoreConfig};

/// Opens the store a URL names: `memory:`, `sqlite:PATH`, `sqlite::memory:`,
/// `postgres://...` (whose tables are created or migrated first) or `redis://...` (keys under
/// the default prefix). A backend that was not compiled in is an [`Error::InvalidConfig`]
/// naming the feature to enable.
pub async fn connect(url: &str, config: StoreConfig) -> Result<Box<dyn Store>> {
    let scheme = url.split(':').next().unwrap_or_default();
    match scheme {
        "memory" => Ok(Box::new(InMemoryStore::with_config(config)?)),
        "sqlite" => open_sqlite(url, config).await,
        "postgres" | "postgresql" => open_postgres(url, config).await,
        "redis" | "rediss" | "redis+unix" => open_redis(url, config).await,
        _ => Err(Error::InvalidConfig(format!(
            "unknown store URL `{url}`: use memory:, sqlite:PATH, postgres://... or redis://..."
        ))),
    }
}

#[cfg(feature = "sqlite")]
async fn open_sqlite(url: &str, config: StoreConfig) -> Result<Box<dyn Store>> {
    Ok(Box::new(crate::SqliteStore::from_url(url, config).await?))
}

#[cfg(not(feature = "sqlite"))]
async fn open_sqlite(_url: &str, _config: StoreConfig) -> Result<Box<dyn Store>> {
    Err(missing("sqlite"))
}

#[cfg(feature = "postgres")]
async fn open_postgres(url: &str, config: StoreConfig) -> Result<Box<dyn Store>> {
    let store = crate::PostgresStore::from_url(url, config).await?;
    store.setup().await?;
    Ok(Box::new(store))
}

#[cfg(not(feature = "postgres"))]
async fn open_postgres(_url: &str, _config: StoreConfig) -> Result<Box<dyn Store>> {
    Err(missing("postgres"))
}

#[cfg(feature = "redis")]
async fn open_redis(url: &str, config: StoreConfig) -> Result<Box<dyn Store>> {
    Ok(Box::new(crate::RedisStore::from_url(url, config).await?))
}

#[cfg(not(feature = "redis"))]
async fn open_redis(_url: &str, _config: StoreConfig) -> Result<Box<dyn Store>> {
    Err(missing("redis"))
}

#[cfg(not(all(feature = "sqlite", feature = "postgres", feature = "redis")))]
fn missing(feature: &str) -> Error {
    Error::InvalidConfig(format!(
        "this build has no {feature} store: enable the `{feature}` feature of waypoint-store"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unknown_schemes_are_refused_with_a_clear_error() {
        for url in ["mysql://x", "", "redis"] {
            assert!(matches!(
                connect(url, StoreConfig::new()).await.map(drop),
                Err(Error::InvalidConfig(_))
            ));
        }
    }

    #[cfg(not(feature = "redis"))]
    #[tokio::test]
    async fn redis_urls_name_the_feature_to_enable() {
        let err = connect("redis://127.0.0.1:6379/", StoreConfig::new())
            .await
            .map(drop);
        assert!(
            matches!(&err, Err(Error::InvalidConfig(m)) if m.contains("`redis` feature")),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn memory_url_opens_a_memory_store() -> Result<()> {
        let store = connect("memory:", StoreConfig::new()).await?;
        assert!(store.batch(Vec::new()).await?.is_empty());
        Ok(())
    }
}
