//! The store conformance suite against `InMemoryStore`.

use waypoint_store::{InMemoryStore, Result, StoreConfig};

waypoint_store::store_conformance!(|config: StoreConfig| async move {
    Result::Ok(Some(InMemoryStore::with_config(config)?))
});
