//! Authenticated history (opt-in, keyed savers only): sealing protects the values, this
//! protects the thread's history around them.
//!
//! Each checkpoint's metadata carries a seal of its record (namespace, id and the channel
//! versions it names), so a checkpoint re-pointed at another (older) sealed version fails
//! to verify. Each put also stores a sealed *child
//! record* on its parent (a pending write of the reserved channel [`CHILD_CHANNEL`]), in the
//! same atomic step: when the latest checkpoint of a namespace has a child record, a newer
//! checkpoint existed and is gone (deleted, or the thread rolled back), and the read fails.
//!
//! What it cannot see: an attacker with write access who removes a checkpoint *and* its
//! child record rolls the thread back to an earlier consistent state; only an anchor kept
//! outside the database (the latest id the application saw) detects that.

use crate::raw::PreparedWrites;
use base64::Engine;
use serde_json::Value;

use super::cipher::Slot;
use super::{Serde, TAG_BYTES};
use crate::{ChannelVersions, CheckpointConfig, CheckpointTuple, Error, Result, SerializedValue};

/// Metadata key of a checkpoint's record seal.
pub const RECORD_KEY: &str = "waypoint_record_seal";
/// Reserved channel of the child records stored on a parent checkpoint.
pub const CHILD_CHANNEL: &str = "__waypoint_child__";
/// Task ids of child records: this prefix, then the child's checkpoint id.
const CHILD_TASK: &str = "__waypoint_child__:";

/// The task id of the child record a put of `checkpoint_id` stores on its parent; a
/// backend deleting checkpoints deliberately (`delete_for_runs`) deletes these with them.
pub fn child_record_task(checkpoint_id: &str) -> String {
    format!("{CHILD_TASK}{checkpoint_id}")
}

/// The canonical encoding of channel versions sealed into a record.
fn record_versions(versions: &ChannelVersions) -> String {
    let mut out = String::new();
    for (channel, version) in versions {
        let version = version.as_str();
        out.push_str(&format!(
            "{}:{channel}{}:{version}",
            channel.len(),
            version.len()
        ));
    }
    out
}

impl Serde {
    /// The same serde keeping an authenticated history (see the module docs); it needs a
    /// keyring, and `put` fails without one.
    pub fn authenticate_history(mut self, on: bool) -> Self {
        self.authenticate_history = on;
        self
    }

    /// Whether checkpoints carry sealed records and child records.
    pub fn authenticates_history(&self) -> bool {
        self.authenticate_history
    }

    /// The record seal and the child record a put stores with an authenticated history;
    /// `None` without one.
    pub(crate) fn seal_record(
        &self,
        config: &CheckpointConfig,
        checkpoint_id: &str,
        versions: &ChannelVersions,
    ) -> Result<Option<(Value, Option<PreparedWrites>)>> {
        if !self.authenticate_history {
            return Ok(None);
        }
        let Some(ring) = &self.keyring else {
            return Err(Error::InvalidConfig(
                "an authenticated history needs a keyring".into(),
            ));
        };
        let versions = record_versions(versions);
        let slot = Slot::Record {
            checkpoint_ns: config.ns(),
            checkpoint_id,
            versions: &versions,
        };
        let (_, sealed) = ring.seal("record", &[], &slot)?;
        let engine = base64::engine::general_purpose::STANDARD;
        let seal = format!("{}:{}", ring.current_id(), engine.encode(sealed));
        let child = match config.checkpoint_id.as_deref().unwrap_or("") {
            // A re-put naming itself as parent is no child of itself.
            "" => None,
            parent if parent == checkpoint_id => None,
            parent => PreparedWrites::new(
                self,
                &CheckpointConfig::of(&config.thread_id, config.ns(), parent),
                vec![(
                    CHILD_CHANNEL.to_owned(),
                    SerializedValue::new(TAG_BYTES, checkpoint_id.as_bytes().to_vec()),
                )],
                &child_record_task(checkpoint_id),
                "",
            )?,
        };
        Ok(Some((Value::String(seal), child)))
    }

    /// Checks a tuple a backend read (its values and writes already opened) and takes the
    /// history's bookkeeping out of it: the record seal from the metadata, child records
    /// from the pending writes. `latest`: the tuple is its namespace's newest checkpoint (as
    /// when read without an id).
    ///
    /// With an authenticated history, a missing or wrong record seal, or (on a latest read)
    /// a child record, is `Error::Decrypt`. Every backend calls it on every tuple it returns.
    pub fn verify_tuple(&self, tuple: &mut CheckpointTuple, latest: bool) -> Result<()> {
        let children: Vec<String> = tuple
            .pending_writes
            .iter()
            .filter(|w| w.channel == CHILD_CHANNEL)
            .filter_map(|w| w.task_id.strip_prefix(CHILD_TASK).map(str::to_owned))
            .collect();
        if !children.is_empty() {
            tuple.pending_writes.retain(|w| w.channel != CHILD_CHANNEL);
        }
        let seal = tuple.metadata.extra.remove(RECORD_KEY);
        if !self.authenticate_history {
            return Ok(());
        }
        let id = tuple.config.checkpoint_id.as_deref().unwrap_or("");
        let what = format!(
            "checkpoint `{id}` of thread `{}` namespace `{}`",
            tuple.config.thread_id,
            tuple.config.ns()
        );
        let refuse = |why: &str| Err(Error::Decrypt(format!("{what}: {why}")));
        let (key_id, sealed) = match &seal {
            Some(Value::String(seal)) => match seal.split_once(':') {
                Some(parts) => parts,
                None => return refuse("its history seal is malformed"),
            },
            Some(_) => return refuse("its history seal is malformed"),
            None if self.accept_plaintext => return Ok(()),
            None => return refuse("it carries no history seal"),
        };
        let Ok(sealed) = base64::engine::general_purpose::STANDARD.decode(sealed) else {
            return refuse("its history seal is malformed");
        };
        let versions = record_versions(&tuple.checkpoint.channel_versions);
        let slot = Slot::Record {
            checkpoint_ns: tuple.config.ns(),
            checkpoint_id: id,
            versions: &versions,
        };
        let ring = self.keyring.as_ref().ok_or_else(|| {
            Error::InvalidConfig("an authenticated history needs a keyring".into())
        })?;
        if ring.open("record", key_id, &sealed, &slot).is_err() {
            return refuse(
                "its record does not match its seal (its channel versions were changed)",
            );
        }
        if let (true, Some(child)) = (latest, children.first()) {
            return refuse(&format!(
                "it is the latest, yet its sealed child `{child}` is missing: the history \
                 was deleted or rolled back"
            ));
        }
        Ok(())
    }
}
