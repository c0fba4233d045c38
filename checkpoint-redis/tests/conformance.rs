//! The conformance suite on Redis: every case on its own key prefix of one shared server,
//! directly, through `Arc<dyn CheckpointSaver>`, sealing values with AES-256-GCM, with an
//! authenticated history, and with a thread ttl (long enough never to lapse during a case:
//! the renewals run on every call).

mod common;

use std::sync::Arc;
use std::time::Duration;

use waypoint_checkpoint::{CheckpointSaver, Serde};
use waypoint_checkpoint_redis::RedisSaver;

mod direct {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(optional common::saver(Serde::default()));
}

mod dyn_saver {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(optional async {
        Ok::<_, waypoint_checkpoint::Error>(common::saver(Serde::default())
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

mod with_ttl {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(optional async {
        match common::config() {
            Some(config) => RedisSaver::connect(config.ttl(Duration::from_secs(600)))
                .await
                .map(Some),
            None => Ok(None),
        }
    });
}
