//! The fields savers record on their operations' spans, computed once for every backend.
//!
//! Each saver operation runs in a span named after it (`put`, `put_writes`, `get_tuple`,
//! `list`, `save_batch`, `save_fenced`, `delete_thread`, `acquire_lease`, ...) with fields
//! `backend`, `thread_id`, `checkpoint_ns`, `checkpoint_id`, `rows` and `bytes` where they
//! apply. These helpers fill the late ones (`rows`, `bytes`, and the ids a batch or a read
//! resolves) on the operation's own span ([`operation_span`]); they do nothing when no
//! subscriber wants it. They record counts and ids only, never a value or metadata.

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

    /// The namespace and checkpoint the save writes to.
    fn target(&self) -> (&str, &str) {
        match self {
            PreparedSave::Put(p) => (&p.checkpoint_ns, &p.checkpoint.id),
            PreparedSave::Writes(w) => (&w.checkpoint_ns, &w.checkpoint_id),
        }
    }
}

/// The current span when it is one named in `names`, the operation's own. With that span
/// filtered out (a subscriber's level or target filter), the current span is the caller's,
/// which must not receive the operation's fields.
pub fn operation_span(names: &[&str]) -> Option<Span> {
    // Operation spans are info or debug: below info nothing can record (one atomic load,
    // where asking for the current span costs a subscriber lookup on every call).
    if !tracing::level_enabled!(tracing::Level::INFO) {
        return None;
    }
    let span = Span::current();
    names.contains(&span.metadata()?.name()).then_some(span)
}

/// Records a put's `bytes` on its `put` span.
pub fn record_put(put: &PreparedPut) {
    if let Some(span) = operation_span(&["put"]) {
        span.record("bytes", put.value_bytes());
    }
}

/// Records a `put_writes` call's `rows` and `bytes` on its span.
pub fn record_writes(writes: &PreparedWrites) {
    if let Some(span) = operation_span(&["put_writes"]) {
        span.record("rows", writes.rows.len());
        span.record("bytes", writes.value_bytes());
    }
}

/// Records on a `save_batch` or `save_fenced` span the batch's `rows` (saves), `bytes`, and
/// the `checkpoint_ns` and `checkpoint_id` of its last save (a run's batch ends with its
/// step's checkpoint); the span names the thread itself.
pub fn record_batch(saves: &[PreparedSave]) {
    let Some(span) = operation_span(&["save_batch", "save_fenced"]) else {
        return;
    };
    span.record("rows", saves.len());
    let bytes: usize = saves.iter().map(PreparedSave::value_bytes).sum();
    span.record("bytes", bytes);
    if let Some((checkpoint_ns, checkpoint_id)) = saves.last().map(PreparedSave::target) {
        span.record("checkpoint_ns", checkpoint_ns);
        span.record("checkpoint_id", checkpoint_id);
    }
}

/// Records what a read returned: `rows` (tuples), `bytes` (channel values and pending
/// writes, as stored), and with a single tuple its `checkpoint_id` (a read of the latest
/// resolves it only now).
pub fn record_read<'a>(tuples: impl IntoIterator<Item = &'a CheckpointTuple>) {
    let Some(span) = operation_span(&["get_tuple", "list"]) else {
        return;
    };
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
