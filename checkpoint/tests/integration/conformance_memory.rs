//! The conformance suite on `InMemorySaver`: directly, through `Arc<dyn CheckpointSaver>`,
//! sealing values with AES-256-GCM, and with an authenticated history.

use std::sync::Arc;

use waypoint_checkpoint::{CheckpointSaver, InMemorySaver, Keyring, Serde};

mod direct {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(async { Ok(InMemorySaver::new()) });
}

mod dyn_arc {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(async {
        Ok(Arc::new(InMemorySaver::new()) as Arc<dyn CheckpointSaver>)
    });
}

mod encrypted {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(async {
        let keyring = Keyring::new("k1", &[7u8; 32])?;
        Ok(InMemorySaver::with_serde(
            Serde::default().with_keyring(keyring),
        ))
    });
}

mod authenticated {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(async {
        let keyring = Keyring::new("k1", &[7u8; 32])?;
        let serde = Serde::default()
            .with_keyring(keyring)
            .authenticate_history(true);
        Ok(InMemorySaver::with_serde(serde))
    });
}

#[test]
fn the_suite_has_every_case() {
    let names = waypoint_checkpoint::conformance::CASE_NAMES;
    let unique: std::collections::BTreeSet<_> = names.iter().collect();
    assert_eq!(unique.len(), names.len(), "a case is listed twice");
    println!("conformance cases: {}", names.len());
    assert!(names.len() >= 120, "cases went missing: {}", names.len());
}
