//! The fields savers record on their operations' spans, computed once for every backend.
//!
//! Each saver operation runs in a span named after it (`put`, `put_writes`, `get_tuple`,
//! `list`, `save_batch`, `save_fenced`, `delete_thread`, `acquire_lease`, ...) with fields
//! `backend`, `thread_id`, `checkpoint_ns`, `checkpoint_id`, `rows` and `bytes` where they
//! apply. These helpers fill the late ones (`rows`, `bytes`, and the ids a batch or a read
//! resolves) on the current span; they do nothing when no subscriber wants it. They record
//! counts and ids only, never a value or metadata.

use tracing::Span;

use crate::CheckpointTuple;
use crate::prepare::{PreparedPut, PreparedSave, PreparedWrites};

impl PreparedPut {
    /// The bytes of the (sealed) values this put stores, its child record's included.
    pub fn value_bytes(&self) -> usize {
        let values: usize = self
            .values
            .iter()
            .filter_map(|v| v.value.as_ref())
            .map(|v| v.bytes.len())
            .sum();
        values + self.child.as_ref().map_or(0, PreparedWrites::value_bytes)
    }
}

impl PreparedWrites {
    /// The bytes of the (sealed) values these writes store.
    pub fn value_bytes(&self) -> usize {
        self.rows.iter().map(|r| r.value.bytes.len()).sum()
    }
}

impl PreparedSave {
    /// The bytes of the (sealed) values this save stores.
    pub fn value_bytes(&self) -> usize {
        match self {
            PreparedSave::Put(put) => put.value_bytes(),
            PreparedSave::Writes(w) => w.value_bytes(),
        }
    }

    /// The thread, namespace and checkpoint the save writes to.
    fn target(&self) -> (&str, &str, &str) {
        match self {
            PreparedSave::Put(p) => (&p.thread_id, &p.checkpoint_ns, &p.checkpoint.id),
            PreparedSave::Writes(w) => (&w.thread_id, &w.checkpoint_ns, &w.checkpoint_id),
        }
    }
}

/// Records a put's `bytes` on the current span.
pub fn record_put(put: &PreparedPut) {
    let span = Span::current();
    if !span.is_disabled() {
        span.record("bytes", put.value_bytes());
    }
}

/// Records a `put_writes` call's `rows` and `bytes` on the current span.
pub fn record_writes(writes: &PreparedWrites) {
    let span = Span::current();
    if !span.is_disabled() {
        span.record("rows", writes.rows.len());
        span.record("bytes", writes.value_bytes());
    }
}

/// Records a batch's `rows` (saves), `bytes`, and the `thread_id`, `checkpoint_ns` and
/// `checkpoint_id` of its last save (a run's batch ends with its step's checkpoint).
pub fn record_batch(saves: &[PreparedSave]) {
    let span = Span::current();
    if span.is_disabled() {
        return;
    }
    span.record("rows", saves.len());
    span.record(
        "bytes",
        saves.iter().map(PreparedSave::value_bytes).sum::<usize>(),
    );
    if let Some((thread_id, checkpoint_ns, checkpoint_id)) = saves.last().map(PreparedSave::target)
    {
        span.record("thread_id", thread_id);
        span.record("checkpoint_ns", checkpoint_ns);
        span.record("checkpoint_id", checkpoint_id);
    }
}

/// Records what a read returned: `rows` (tuples), `bytes` (channel values and pending
/// writes, as stored), and with a single tuple its `checkpoint_id` (a read of the latest
/// resolves it only now).
pub fn record_read<'a>(tuples: impl IntoIterator<Item = &'a CheckpointTuple>) {
    let span = Span::current();
    if span.is_disabled() {
        return;
    }
    let (mut rows, mut bytes, mut id) = (0usize, 0usize, None);
    for tuple in tuples {
        rows += 1;
        bytes += tuple_bytes(tuple);
        id = Some(tuple.config.checkpoint_id.as_deref().unwrap_or(""));
    }
    span.record("rows", rows);
    span.record("bytes", bytes);
    if let (1, Some(id)) = (rows, id) {
        span.record("checkpoint_id", id);
    }
}

/// The bytes of a tuple's channel values and pending writes.
fn tuple_bytes(tuple: &CheckpointTuple) -> usize {
    let values: usize = tuple
        .checkpoint
        .channel_values
        .values()
        .map(|v| v.bytes.len())
        .sum();
    let writes: usize = tuple
        .pending_writes
        .iter()
        .map(|w| w.value.bytes.len())
        .sum();
    values + writes
}
