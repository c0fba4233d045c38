//! The conformance suite on SQLite: a file database and an in-memory one, directly, through
//! `Arc<dyn CheckpointSaver>`, sealing values with AES-256-GCM, and with an authenticated
//! history.

use std::sync::Arc;

use waypoint_checkpoint::{CheckpointSaver, Keyring, Result, Serde};
use waypoint_checkpoint_sqlite::{SqliteConfig, SqliteSaver};

/// A fresh database file in a per-test temporary directory, kept alive with the saver.
async fn file_saver(serde: Serde) -> Result<SqliteSaver> {
    let dir = tempfile::tempdir().map_err(|e| waypoint_checkpoint::Error::backend("test", e))?;
    // The directory lives as long as the test process; TMPDIR is removed by scripts/test.sh.
    let path = dir.keep().join("checkpoints.db");
    SqliteSaver::open(SqliteConfig::file(path).serde(serde)).await
}

fn keyed() -> Result<Serde> {
    Ok(Serde::default().with_keyring(Keyring::new("k1", &[9u8; 32])?))
}

mod file {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(file_saver(Serde::default()));
}

mod memory {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(SqliteSaver::open(SqliteConfig::memory()));
}

mod file_dyn {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(async {
        Ok(Arc::new(file_saver(Serde::default()).await?) as Arc<dyn CheckpointSaver>)
    });
}

mod memory_dyn {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(async {
        Ok(Arc::new(SqliteSaver::open(SqliteConfig::memory()).await?) as Arc<dyn CheckpointSaver>)
    });
}

mod file_encrypted {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(async { file_saver(keyed()?).await });
}

mod memory_encrypted {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(SqliteSaver::open(
        SqliteConfig::memory().serde(keyed()?)
    ));
}

mod file_authenticated {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(async {
        file_saver(keyed()?.authenticate_history(true)).await
    });
}
