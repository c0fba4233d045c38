//! For backend authors: the helpers every checkpointer builds its `put`, `put_writes`,
//! pruning and delta history on, so that all backends decide alike. Users of a saver need
//! nothing from here.

pub use crate::filter::json_contains;
pub use crate::prepare::{
    MAX_ID_BYTES, NewValue, PreparedPut, PreparedSave, PreparedWrites, WriteRow, check_id,
    expected_heads_json, head_moved, head_moved_in,
};
pub use crate::redact::redact_url;
pub use crate::saver::{
    check_fenced_saves, ids_to_keep, lease_lost, unvalued_channels, walk_delta_history,
};
pub use crate::trace::{operation_span, record_batch, record_put, record_read, record_writes};
