//! The conformance suite on PostgreSQL: every case on its own schema of one shared
//! database, directly, through `Arc<dyn CheckpointSaver>`, sealing values with AES-256-GCM,
//! and with an authenticated history.

mod common;

use std::sync::Arc;

use waypoint_checkpoint::{CheckpointSaver, Serde};

mod direct {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(optional common::saver(Serde::default()));
}

mod dyn_saver {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(optional async {
        Ok(common::saver(Serde::default())
            .await?
            .map(|s| Arc::new(s) as Arc<dyn CheckpointSaver>))
    });
}

mod encrypted {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(optional common::saver(common::keyed()?));
}

mod authenticated {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(optional common::saver(
        common::keyed()?.authenticate_history(true)
    ));
}
