//! The conformance suite: every behaviour of the checkpointer contract, specified once.
//!
//! Each case is an async fn taking `&dyn CheckpointSaver`, named after LangGraph's suites
//! (without `test_`) or after the Waypoint decision it pins. Every case uses fresh uuid
//! thread ids, so cases run in parallel against one shared database. A backend crate runs the
//! whole list with one macro call (it needs `tokio` as a dev-dependency):
//!
//! ```ignore
//! waypoint_checkpoint::checkpoint_conformance!(async { Ok(InMemorySaver::new()) });
//! ```
//!
//! The factory is an async expression returning `Result<S>` where `S` is any saver (including
//! `Arc<dyn CheckpointSaver>`); it runs once per case. For a live server that may be absent,
//! `checkpoint_conformance!(optional factory)` takes a factory returning `Result<Option<S>>`,
//! and a case whose factory gives `None` passes without running (the factory decides, and
//! fails instead when the environment requires the backend). Optional operations are tested only
//! where `capabilities()` declares them, and [`optional_operations_match_capabilities`] tests
//! the declaration itself.

mod decisions;
mod delete;
mod delta;
mod extended;
mod fence;
mod get_tuple;
mod lease;
mod list;
mod put;
mod put_writes;
mod robustness;

use std::collections::BTreeMap;

use serde_json::Value;

use crate::serde::TAG_JSON;
use crate::{
    ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointSaver, CheckpointSource, CheckpointTuple, Result, SerializedValue, channels,
};

pub use decisions::*;
pub use delete::*;
pub use delta::*;
pub use extended::*;
pub use fence::*;
pub use get_tuple::*;
pub use lease::*;
pub use list::*;
pub use put::*;
pub use put_writes::*;
pub use robustness::*;

/// Gives the saver a fixture stands for; every saver (and `Arc<dyn CheckpointSaver>`) is one.
pub trait AsSaver {
    /// The saver under test.
    fn as_saver(&self) -> &dyn CheckpointSaver;
}

impl<S: CheckpointSaver> AsSaver for S {
    fn as_saver(&self) -> &dyn CheckpointSaver {
        self
    }
}

/// Expands to one `#[tokio::test]` per conformance case for a saver factory.
#[macro_export]
macro_rules! checkpoint_conformance {
    (optional $factory:expr) => {
        $crate::__checkpoint_cases!(optional_tests $factory);
    };
    ($factory:expr) => {
        $crate::__checkpoint_cases!(tests $factory);
    };
}

/// The one list of cases; `names` gives their names, `tests` the test functions.
#[doc(hidden)]
#[macro_export]
macro_rules! __checkpoint_cases {
    ($($mode:tt)*) => {
        $crate::__checkpoint_cases_apply! { [$($mode)*]
            put_returns_config put_roundtrip put_preserves_channel_values
            put_preserves_channel_versions put_preserves_versions_seen put_preserves_metadata
            put_root_namespace put_child_namespace put_default_namespace
            put_multiple_checkpoints_same_thread put_multiple_threads_isolated put_parent_config
            put_incremental_channel_update put_new_channel_added put_channel_removed
            put_preserves_run_id put_preserves_versions_seen_values
            put_stores_checkpoint_and_metadata_unaltered put_never_drops_a_given_value
            put_refuses_a_value_without_version
            put_rejects_empty_thread_id put_rejects_empty_checkpoint_id
            put_writes_basic put_writes_multiple_writes_same_task put_writes_multiple_tasks
            put_writes_preserves_task_id put_writes_preserves_channel_and_value
            put_writes_task_path put_writes_idempotent put_writes_special_channels
            put_writes_across_namespaces put_writes_cleared_on_next_checkpoint
            put_writes_requires_checkpoint_id put_writes_requires_thread_id
            get_tuple_nonexistent_returns_none get_tuple_latest_when_no_checkpoint_id
            get_tuple_specific_checkpoint_id get_tuple_config_structure
            get_tuple_checkpoint_fields get_tuple_metadata get_tuple_parent_config
            get_tuple_pending_writes get_tuple_respects_namespace
            get_tuple_nonexistent_checkpoint_id get_tuple_channels_from_ancestors
            get_tuple_empty_thread_id_returns_none
            list_all list_by_thread list_by_namespace list_ordering
            list_metadata_filter_single_key list_metadata_filter_step
            list_metadata_filter_multiple_keys list_metadata_filter_no_match
            list_metadata_custom_keys list_before list_limit list_limit_plus_before
            list_combined_thread_and_filter list_empty_result list_includes_pending_writes
            list_multiple_namespaces list_limit_zero_returns_nothing list_by_checkpoint_id
            list_matrix
            delete_thread_removes_checkpoints delete_thread_removes_writes
            delete_thread_removes_all_namespaces delete_thread_preserves_other_threads
            delete_thread_nonexistent_is_noop
            delete_for_runs_single delete_for_runs_multiple delete_for_runs_preserves_other_runs
            delete_for_runs_removes_writes delete_for_runs_empty_list_noop
            delete_for_runs_unknown_ids_noop delete_for_runs_across_namespaces
            copy_thread_basic copy_thread_all_checkpoints copy_thread_metadata
            copy_thread_namespaces copy_thread_pending_writes copy_thread_ordering
            copy_thread_source_unchanged copy_thread_nonexistent_source
            copy_thread_onto_thread_with_checkpoints_conflicts copy_thread_1000_checkpoints_exact
            prune_keep_latest_single_thread prune_keep_latest_multiple_threads
            prune_keep_latest_per_namespace prune_keep_latest_keeps_writes
            prune_delete_removes_all prune_preserves_other_threads prune_empty_list_noop
            prune_unknown_thread_noop prune_keep_latest_is_delta_safe
            optional_operations_match_capabilities
            delta_history_writes_oldest_first delta_history_seed_is_nearest_snapshot
            delta_history_excludes_target_pending_writes delta_history_multi_channel
            delta_history_empty_channels delta_history_walk_to_root_no_seed
            delta_history_plain_value_as_seed delta_history_seed_ancestor_own_writes_replayed
            delta_history_orders_same_step_writes_by_task
            delta_history_orders_same_step_writes_by_task_path delta_history_follows_parents_not_ids
            delta_history_latest_when_no_id delta_history_unknown_target self_parent_is_no_parent
            filter_containment_nested_objects filter_containment_arrays
            filter_null_matches_only_explicit_null filter_keys_are_data
            put_writes_mixed_special_and_regular_first_wins put_writes_all_special_last_wins
            put_writes_before_checkpoint pending_writes_ordered_by_task_and_idx
            pending_writes_ordered_by_task_path_first
            list_orders_globally_across_threads list_before_across_threads
            reput_keeps_parent metadata_nul_stripped empty_version_hides_older_value
            namespaces_never_mix
            write_after_delete_does_not_revive_thread ids_with_nul_or_over_the_limit_are_refused concurrent_puts_lose_nothing
            values_keep_tag_and_bytes large_value_roundtrip save_batch_applies_in_order
            lease_excludes_second_claim lease_release_allows_next lease_expires
            lease_renew_extends lease_renew_after_takeover_conflicts
            release_of_lost_lease_keeps_new_holder leases_are_per_thread
            concurrent_acquires_one_wins lease_rejects_bad_input
            fenced_save_writes_while_held fenced_save_refused_after_takeover
            fenced_save_refused_after_release fenced_save_after_lapse_without_takeover
            fenced_save_rejects_other_thread
            fenced_put_refused_when_another_writer_moved_the_head
            put_unleased_refused_while_leased
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __checkpoint_cases_apply {
    ([names] $($case:ident)*) => {
        &[$(stringify!($case)),*]
    };
    ([tests $factory:expr] $($case:ident)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() -> $crate::Result<()> {
            let fixture = $factory.await?;
            $crate::conformance::$case($crate::conformance::AsSaver::as_saver(&fixture)).await
        }
    )*};
    ([optional_tests $factory:expr] $($case:ident)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() -> $crate::Result<()> {
            let Some(fixture) = $factory.await? else {
                return Ok(());
            };
            $crate::conformance::$case($crate::conformance::AsSaver::as_saver(&fixture)).await
        }
    )*};
}

/// The names of every case, in suite order.
pub const CASE_NAMES: &[&str] = __checkpoint_cases!(names);

// ---- fixtures shared by the cases ----------------------------------------------------------

/// A fresh thread id no other case uses.
pub(crate) fn thread() -> String {
    format!("conformance-{}", uuid::Uuid::new_v4())
}

/// A JSON-tagged value.
pub(crate) fn val(v: Value) -> SerializedValue {
    SerializedValue::new(
        TAG_JSON,
        serde_json::to_vec(&v).expect("JSON values encode"),
    )
}

/// Decodes a JSON-tagged value.
pub(crate) fn json_of(v: &SerializedValue) -> Value {
    assert_eq!(v.type_tag, TAG_JSON, "value came back with another tag");
    serde_json::from_slice(&v.bytes).expect("stored JSON decodes")
}

/// A tuple's channel values, decoded.
pub(crate) fn values_of(t: &CheckpointTuple) -> BTreeMap<String, Value> {
    t.checkpoint
        .channel_values
        .iter()
        .map(|(k, v)| (k.clone(), json_of(v)))
        .collect()
}

/// A tuple's pending writes as `(task, channel, value)`.
pub(crate) fn writes_of(t: &CheckpointTuple) -> Vec<(String, String, Value)> {
    t.pending_writes
        .iter()
        .map(|w| (w.task_id.clone(), w.channel.clone(), json_of(&w.value)))
        .collect()
}

pub(crate) fn versions(pairs: &[(&str, u64)]) -> ChannelVersions {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), ChannelVersion::from(*v)))
        .collect()
}

/// A checkpoint for `step` with the given values and integer versions.
pub(crate) fn checkpoint(step: i64, values: &[(&str, Value)], vers: &[(&str, u64)]) -> Checkpoint {
    let mut cp = Checkpoint::new(step);
    for (k, v) in values {
        cp.channel_values.insert((*k).to_owned(), val(v.clone()));
    }
    cp.channel_versions = versions(vers);
    cp
}

pub(crate) fn meta(source: CheckpointSource, step: i64) -> CheckpointMetadata {
    CheckpointMetadata::new(source, step)
}

pub(crate) fn cfg(thread_id: &str, ns: &str) -> CheckpointConfig {
    CheckpointConfig::new(thread_id).with_ns(ns)
}

/// Puts an empty checkpoint as a child of `parent` and returns its config.
pub(crate) async fn put_empty(
    saver: &dyn CheckpointSaver,
    parent: &CheckpointConfig,
    metadata: CheckpointMetadata,
) -> Result<CheckpointConfig> {
    let step = metadata.step.unwrap_or(0);
    saver
        .put(
            parent,
            Checkpoint::new(step),
            metadata,
            ChannelVersions::new(),
        )
        .await
}

/// Puts `n` chained checkpoints (`source` loop, steps 0..n) and returns their configs.
pub(crate) async fn chain(
    saver: &dyn CheckpointSaver,
    thread_id: &str,
    ns: &str,
    n: usize,
) -> Result<Vec<CheckpointConfig>> {
    let mut parent = cfg(thread_id, ns);
    let mut out = Vec::with_capacity(n);
    for step in 0..n as i64 {
        parent = put_empty(saver, &parent, meta(CheckpointSource::Loop, step)).await?;
        out.push(parent.clone());
    }
    Ok(out)
}

pub(crate) fn id_of(c: &CheckpointConfig) -> &str {
    c.checkpoint_id
        .as_deref()
        .expect("stored configs carry an id")
}

pub(crate) fn ids(tuples: &[CheckpointTuple]) -> Vec<String> {
    tuples.iter().map(|t| id_of(&t.config).to_owned()).collect()
}

pub(crate) fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// Metadata `{"source": "loop", "step": step, "run_id": run}`.
pub(crate) fn run_meta(step: i64, run: &str) -> CheckpointMetadata {
    meta(CheckpointSource::Loop, step).with_run_id(run)
}
