//! Opening a checkpointer or a store from a URL: `waypoint_runtime::Connect`, with the
//! command's rules for what an inspector may change. Its errors name the URL (password
//! hidden) and the cause.

use std::sync::Arc;

use anyhow::Result;
use waypoint_checkpoint::CheckpointSaver;
use waypoint_runtime::Connect;
pub(crate) use waypoint_runtime::connect::Backend as Kind;
use waypoint_store::{Store, StoreConfig};

use crate::secrets;

/// How a URL is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Open {
    /// Inspecting: the database must exist already (an inspector does not create one for a
    /// mistyped path), and the checkpointer's tables are not touched (it reads Python
    /// LangGraph's tables as they are).
    Existing,
    /// Create the database and its tables if missing (the demo, the store inspector).
    Create,
}

/// The connect options for `url` opened as `open`.
fn options(url: &str, open: Open) -> Connect {
    secrets::remember(url);
    let existing = open == Open::Existing;
    Connect::new(url).create(!existing).auto_setup(!existing)
}

/// Opens the checkpointer `url` names.
pub(crate) async fn saver(url: &str, open: Open) -> Result<Arc<dyn CheckpointSaver>> {
    Ok(options(url, open).checkpointer().await?)
}

/// Opens the store `url` names. Its tables are created or migrated, as the store needs its
/// change log and vector tables beside LangGraph's `store` table, even to read.
pub(crate) async fn store(url: &str, config: StoreConfig, open: Open) -> Result<Arc<dyn Store>> {
    Ok(options(url, open)
        .auto_setup(true)
        .store_config(config)
        .store()
        .await?)
}
