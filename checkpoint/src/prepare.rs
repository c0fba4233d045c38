//! What every backend does before storing a `put` or a `put_writes`: validate the config,
//! strip metadata NULs, seal values for their slots, and index writes. Backends only store
//! the prepared rows.

use crate::serde::{RECORD_KEY, Serde, Slot};
use crate::version::{ChannelVersion, channels};
use crate::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, Error, Result,
    SerializedValue,
};

/// The longest id a write may carry, in bytes of UTF-8 (thread ids, namespaces, checkpoint
/// and task ids, channel names and versions): four of them always fit one PostgreSQL index
/// entry (about 2.7 KB), so every backend keeps to it and no id is storable on one and not
/// on another.
pub const MAX_ID_BYTES: usize = 512;

/// Refuses an id no backend can store alike: one holding a NUL character (PostgreSQL's text
/// cannot), or one longer than [`MAX_ID_BYTES`].
pub fn check_id(field: &str, value: &str) -> Result<()> {
    if value.contains('\0') {
        return Err(Error::InvalidConfig(format!(
            "{field} contains a NUL character, which ids may not hold"
        )));
    }
    if value.len() > MAX_ID_BYTES {
        return Err(Error::InvalidConfig(format!(
            "{field} is {} bytes, over the limit of {MAX_ID_BYTES} bytes per id",
            value.len()
        )));
    }
    Ok(())
}

/// A channel value a put stores: `None` is a versioned channel without value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewValue {
    /// The channel.
    pub channel: String,
    /// Its new version.
    pub version: ChannelVersion,
    /// The value, sealed for `(thread, ns, channel, version)`; for a channel without value,
    /// `None`, or under a keyring an `empty`-tagged seal ([`Serde::seal_empty`]).
    pub value: Option<SerializedValue>,
}

/// A validated `put`: the checkpoint without its values, and the values to store.
#[derive(Clone, Debug, PartialEq)]
pub struct PreparedPut {
    /// Thread of the checkpoint.
    pub thread_id: String,
    /// Namespace of the checkpoint.
    pub checkpoint_ns: String,
    /// The parent the config named, if any.
    pub parent: Option<String>,
    /// The checkpoint with `channel_values` emptied.
    pub checkpoint: Checkpoint,
    /// The metadata, top-level NULs stripped.
    pub metadata: CheckpointMetadata,
    /// One entry per channel of `new_versions`, then one per value given for a channel
    /// outside `new_versions` (at its current version). Backends store each only where its
    /// `(thread, ns, channel, version)` has no value yet: a stored version is never rewritten,
    /// and a value a caller hands over is never dropped.
    pub values: Vec<NewValue>,
    /// With an authenticated history, the sealed child record to store on the parent in the
    /// same atomic step as the checkpoint.
    pub child: Option<PreparedWrites>,
}

impl PreparedPut {
    /// Validates a put and seals its values: those of the channels in `new_versions` (a
    /// channel there without value is empty), then any other value given, at its version.
    pub fn new(
        serde: &Serde,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<Self> {
        Self::from_owned(serde, config.clone(), checkpoint, metadata, new_versions)
    }

    /// [`PreparedPut::new`] of a config the caller gives up: its strings are kept, not
    /// copied.
    pub fn from_owned(
        serde: &Serde,
        mut config: CheckpointConfig,
        mut checkpoint: Checkpoint,
        mut metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<Self> {
        // A checkpoint is never its own parent (every walk over parent links would loop):
        // naming itself names none, and a re-put keeps the parent it was first stored with.
        if config.checkpoint_id.as_deref() == Some(checkpoint.id.as_str()) {
            config.checkpoint_id = None;
        }
        let thread_id = config.require_thread("put")?;
        let checkpoint_ns = config.ns();
        if checkpoint.id.is_empty() {
            return Err(Error::InvalidConfig("checkpoint id is empty".into()));
        }
        check_id("thread_id", thread_id)?;
        check_id("checkpoint_ns", checkpoint_ns)?;
        check_id("checkpoint id", &checkpoint.id)?;
        check_id(
            "parent checkpoint_id",
            config.checkpoint_id.as_deref().unwrap_or(""),
        )?;
        for (channel, version) in checkpoint.channel_versions.iter().chain(&new_versions) {
            check_id("channel name", channel)?;
            // A version made from its parts renders as digits, dots and a sign, under 400
            // bytes (an f64's longest text is ~330): its text need not be made to be checked.
            if version.known_parts().is_none() {
                check_id("channel version", version.as_str())?;
            }
        }
        metadata.strip_nul();
        let mut values = Vec::with_capacity(new_versions.len());
        for (channel, version) in new_versions {
            let value = checkpoint.channel_values.remove(&channel);
            // Without a keyring nothing is sealed: the slot (and the version's text) is
            // needed only to seal.
            let value = if serde.is_encrypted() {
                let slot = Slot::Channel {
                    thread_id,
                    checkpoint_ns,
                    channel: &channel,
                    version: version.as_str(),
                };
                match value {
                    Some(value) => Some(serde.seal(&value, &slot)?),
                    None => serde.seal_empty(&slot)?,
                }
            } else {
                value
            };
            values.push(NewValue {
                channel,
                version,
                value,
            });
        }
        // Values of channels the put does not version anew (e.g. LangGraph's inline
        // primitives of a checkpoint this one continues) are kept at their current version.
        for (channel, value) in std::mem::take(&mut checkpoint.channel_values) {
            let Some(version) = checkpoint.channel_versions.get(&channel).cloned() else {
                return Err(Error::InvalidConfig(format!(
                    "channel `{channel}` has a value but no version in channel_versions"
                )));
            };
            let slot = Slot::Channel {
                thread_id,
                checkpoint_ns,
                channel: &channel,
                version: version.as_str(),
            };
            let value = Some(serde.seal(&value, &slot)?);
            values.push(NewValue {
                channel,
                version,
                value,
            });
        }
        // The config as given: an empty parent id is no parent there either.
        let record = serde.seal_record(&config, &checkpoint.id, &checkpoint.channel_versions)?;
        let child = match record {
            Some((seal, child)) => {
                metadata.extra.insert(RECORD_KEY.to_owned(), seal);
                child
            }
            None => None,
        };
        let CheckpointConfig {
            thread_id,
            checkpoint_ns,
            checkpoint_id,
        } = config;
        Ok(PreparedPut {
            child,
            parent: checkpoint_id.filter(|p| !p.is_empty()),
            thread_id,
            checkpoint_ns: checkpoint_ns.unwrap_or_default(),
            checkpoint,
            metadata,
            values,
        })
    }

    /// The parent a fenced put must find as its namespace's newest checkpoint, if any.
    ///
    /// A fenced put continuing a thread (it has a parent, and it is not an explicit branch:
    /// `source` `fork` or `update`) is refused with [`head_moved`] when another checkpoint
    /// (other than its own id, re-put) is newer than that parent: another writer, one that
    /// takes no lease (a Python LangGraph process), continued the thread meanwhile, and
    /// storing this one would fork it silently. Backends check it in the fenced save's
    /// atomic step.
    pub fn expected_head(&self) -> Option<&str> {
        use crate::CheckpointSource::{Fork, Update};
        match self.metadata.source {
            Some(Fork | Update) => None,
            _ => self.parent.as_deref(),
        }
    }

    /// The exact config `put` returns.
    pub fn config(&self) -> CheckpointConfig {
        CheckpointConfig::of(&self.thread_id, &self.checkpoint_ns, &self.checkpoint.id)
    }
}

/// The `Conflict` of a fenced put whose parent is no longer its namespace's newest
/// checkpoint ([`PreparedPut::expected_head`]): `newest` got there first.
pub fn head_moved(put: &PreparedPut, newest: &str) -> Error {
    Error::Conflict(format!(
        "checkpoint `{newest}` of thread `{}` (namespace `{}`) is newer than `{}`, the parent \
         of this put: another writer (one without a lease, such as a Python LangGraph \
         process) continued the thread meanwhile, so nothing was written; read the thread \
         again and retry",
        put.thread_id,
        put.checkpoint_ns,
        put.parent.as_deref().unwrap_or(""),
    ))
}

/// The `Conflict` of a fenced batch a backend refused because checkpoint `newest` is newer
/// than the expected head of one of its puts ([`head_moved`] of that put).
pub fn head_moved_in(saves: &[PreparedSave], newest: &str) -> Error {
    let moved = saves.iter().find_map(|s| match s {
        PreparedSave::Put(put) => put
            .expected_head()
            .is_some_and(|parent| newest > parent)
            .then_some(put),
        PreparedSave::Writes(_) => None,
    });
    match moved {
        Some(put) => head_moved(put, newest),
        None => Error::Conflict(format!(
            "checkpoint `{newest}` is newer than the parent of a fenced put: another writer \
             continued the thread meanwhile, so nothing was written"
        )),
    }
}

/// The expected heads of a batch's fenced puts, as JSON text mapping each put's checkpoint
/// id to the parent it expects to be newest (`{}` when none expects one).
pub fn expected_heads_json(saves: &[PreparedSave]) -> String {
    let heads: serde_json::Map<String, serde_json::Value> = saves
        .iter()
        .filter_map(|s| match s {
            PreparedSave::Put(put) => put
                .expected_head()
                .map(|p| (put.checkpoint.id.clone(), p.into())),
            PreparedSave::Writes(_) => None,
        })
        .collect();
    serde_json::Value::Object(heads).to_string()
}

/// One pending write to store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteRow {
    /// Position in the call, or the reserved channel's fixed index.
    pub idx: i64,
    /// The channel written.
    pub channel: String,
    /// The value, sealed for its write slot.
    pub value: SerializedValue,
}

/// A validated `put_writes` call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedWrites {
    /// Thread of the checkpoint.
    pub thread_id: String,
    /// Namespace of the checkpoint.
    pub checkpoint_ns: String,
    /// The checkpoint the writes belong to.
    pub checkpoint_id: String,
    /// The task that wrote them.
    pub task_id: String,
    /// The task's path (stored, not interpreted).
    pub task_path: String,
    /// Replace existing rows (every write targets a reserved channel: last wins), or insert
    /// only absent ones (first wins, so retried tasks are idempotent).
    pub replace: bool,
    /// The rows, in call order.
    pub rows: Vec<WriteRow>,
}

impl PreparedWrites {
    /// Validates a call and seals its writes; `None` when there is nothing to write.
    pub fn new(
        serde: &Serde,
        config: &CheckpointConfig,
        writes: Vec<(String, SerializedValue)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<Option<Self>> {
        let (task_id, task_path) = (task_id.to_owned(), task_path.to_owned());
        Self::from_owned(serde, config.clone(), writes, task_id, task_path)
    }

    /// [`PreparedWrites::new`] of a config, task id and path the caller gives up: their
    /// strings are kept, not copied.
    pub fn from_owned(
        serde: &Serde,
        config: CheckpointConfig,
        writes: Vec<(String, SerializedValue)>,
        task_id: String,
        task_path: String,
    ) -> Result<Option<Self>> {
        let thread_id = config.require_thread("put_writes")?;
        let checkpoint_id = config.require_id("put_writes")?;
        let checkpoint_ns = config.ns();
        if writes.is_empty() {
            return Ok(None);
        }
        check_id("thread_id", thread_id)?;
        check_id("checkpoint_ns", checkpoint_ns)?;
        check_id("checkpoint_id", checkpoint_id)?;
        check_id("task_id", &task_id)?;
        if task_path.contains('\0') {
            return Err(Error::InvalidConfig(
                "task_path contains a NUL character, which ids may not hold".into(),
            ));
        }
        for (channel, _) in &writes {
            check_id("channel name", channel)?;
        }
        let replace = writes
            .iter()
            .all(|(channel, _)| channels::special_index(channel).is_some());
        let mut rows = Vec::with_capacity(writes.len());
        for (position, (channel, value)) in writes.into_iter().enumerate() {
            let idx = channels::write_index(&channel, position);
            let slot = Slot::Write {
                thread_id,
                checkpoint_ns,
                checkpoint_id,
                task_id: &task_id,
                channel: &channel,
                idx,
            };
            let value = serde.seal(&value, &slot)?;
            rows.push(WriteRow {
                idx,
                channel,
                value,
            });
        }
        let CheckpointConfig {
            thread_id,
            checkpoint_ns,
            checkpoint_id,
        } = config;
        Ok(Some(PreparedWrites {
            thread_id,
            checkpoint_ns: checkpoint_ns.unwrap_or_default(),
            checkpoint_id: checkpoint_id.unwrap_or_default(),
            task_id,
            task_path,
            replace,
            rows,
        }))
    }
}

/// One save of a [`crate::CheckpointSaver::save_batch`], validated and sealed.
#[derive(Debug)]
pub enum PreparedSave {
    /// A prepared `put`.
    Put(Box<PreparedPut>),
    /// A prepared `put_writes`.
    Writes(PreparedWrites),
}

impl PreparedSave {
    /// Prepares every save of a batch, in order; write calls with nothing to write drop out.
    pub fn batch(serde: &Serde, saves: Vec<crate::Save>) -> Result<Vec<PreparedSave>> {
        let mut out = Vec::with_capacity(saves.len());
        for save in saves {
            match save {
                crate::Save::Put {
                    config,
                    checkpoint,
                    metadata,
                    new_versions,
                } => out.push(PreparedSave::Put(Box::new(PreparedPut::from_owned(
                    serde,
                    config,
                    checkpoint,
                    metadata,
                    new_versions,
                )?))),
                crate::Save::Writes {
                    config,
                    writes,
                    task_id,
                    task_path,
                } => {
                    if let Some(w) =
                        PreparedWrites::from_owned(serde, config, writes, task_id, task_path)?
                    {
                        out.push(PreparedSave::Writes(w));
                    }
                }
            }
        }
        Ok(out)
    }
}
