//! End-to-end behaviour of the runtime, written once and run on every checkpointer.
//!
//! [`cases`] holds one async fn per behaviour, taking the saver to run on;
//! [`runtime_suite!`] expands the whole list into one `#[tokio::test]` per case for a saver
//! factory, so a new case reaches every backend the day it is written. The factories in
//! [`savers`] open the real backends (PostgreSQL from `WAYPOINT_TEST_POSTGRES_URL`).

pub mod agent_more;
pub mod cases;
pub mod events;
pub mod graph_api;
pub mod graphs;
pub mod handoffs;
pub mod hitl;
pub mod interop;
pub mod messages;
pub mod messages_mode_all;
pub mod metadata;
pub mod nested;
pub mod nested_stream;
pub mod panics;
pub mod paused;
pub mod prebuilt;
pub mod savers;
pub mod schemas;
pub mod streaming;
pub mod subgraphs;
pub mod typed_schemas;

use std::sync::Arc;

use serde_json::{Map, Value};
use waypoint_checkpoint::CheckpointSaver;

/// What a case returns.
pub type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// A saver for one case, or `None` when its backend is not available here.
pub type MaybeSaver = waypoint_checkpoint::Result<Option<Arc<dyn CheckpointSaver>>>;

/// The object inside a `json!({...})` literal (an empty object for anything else).
pub fn obj(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// A fresh thread id, so cases never share state on one database.
pub fn thread() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Expands every case of [`cases`] into a `#[tokio::test]` running on the savers `factory`
/// (an expression giving a future of [`MaybeSaver`]) opens.
#[macro_export]
macro_rules! runtime_suite {
    ($factory:expr) => {
        $crate::runtime_suite!(@cases $factory;
            documented_example_json,
            documented_example_typed,
            history_filter_before_limit,
            update_state_applies_reducers,
            update_state_as_node_decides_next,
            update_state_infers_last_writer,
            fork_from_past_checkpoint,
            replay_reruns_only_later_steps,
            failed_node_resumes_alone,
            recursion_limit_stops_run,
            stream_modes,
            durability_exit_writes_once,
            durability_async_saves_every_step,
            durability_exit_failure_is_resumable,
            send_map_reduce,
            command_update_and_goto,
            conditional_edges_with_map,
            conditional_entry_point,
            concurrent_last_value_writes_fail,
            nodes_share_store_across_threads,
            new_input_starts_next_run,
            unknown_channels_are_carried_forward,
            corrupt_channel_value_is_an_error,
            thread_id_required,
            one_writer_per_thread,
            a_run_longer_than_its_lease_keeps_the_thread,
            delta_history_matches_full_values,
            delta_history_keeps_a_parallel_step_in_order,
        );
        $crate::runtime_suite!(@module hitl $factory;
            interrupt_pauses_and_resumes,
            interrupt_is_streamed,
            interrupts_match_resume_values_by_index,
            validation_loop_asks_until_valid,
            resume_with_update_applies_it_first,
            static_breakpoints_pause_and_continue,
            update_state_skips_interrupted_node,
            parallel_interrupts_resume_by_id,
        );
        $crate::runtime_suite!(@module messages $factory;
            add_messages_history_matches_full_values,
            streamed_replies_rebuild_by_id,
            human_review_edits_the_last_message_by_id,
        );
        $crate::runtime_suite!(@module handoffs $factory; subgraph_hands_off_to_parent_node, bad_handoffs_are_clear_errors);
        $crate::runtime_suite!(@module streaming $factory; seed_001_flat_graph_streams_with_empty_namespace, subgraph_parts_carry_their_namespace, whole_ai_message_is_one_messages_part);
        $crate::runtime_suite!(@module metadata $factory; bookkeeping_keys_are_hidden, guide_metadata_has_writes, writes_list_sends_and_stay_sealed, writes_stored_once_show_as_recorded, history_filters_on_shown_writes, prune_keeps_where_writes_come_from);
        $crate::runtime_suite!(@module events $factory; graph_nodes_and_subgraph_events_nest);
        $crate::runtime_suite!(@module messages_mode_all $factory; tool_and_human_messages_are_streamed, agent_events_show_model_calls_and_custom_events, custom_events_stay_out_of_other_modes, subgraph_agent_events_nest_in_its_tasks);
        $crate::runtime_suite!(@module graph_api $factory; goto_only_node_pauses_and_resumes, json_messages_fold_by_id_across_runs);
        $crate::runtime_suite!(@module agent_more $factory; agent_stops_before_the_recursion_limit, return_direct_tool_ends_the_run, response_format_stores_structured_response, agent_runs_over_json_state);
        $crate::runtime_suite!(@module prebuilt $factory; agent_parallel_tool_calls_are_checkpointed, agent_human_review_edits_the_tool_call);
        $crate::runtime_suite!(@module nested $factory; node_invokes_subgraph_and_resumes, node_streams_subgraph_and_resumes, invoke_on_another_thread_is_a_root_run, get_state_subgraphs_shows_the_paused_subgraph, tool_invokes_subgraph_and_resumes);
        $crate::runtime_suite!(@module nested_stream $factory; node_streams_child_to_the_root, get_state_subgraphs_has_the_child_snapshot);
        $crate::runtime_suite!(@module panics $factory; panicking_node_resumes_alone, panic_after_await_ends_the_stream, panicking_router_is_a_node_error, panicking_reducer_keeps_the_step_writes, panic_inside_subgraph_resumes);
        $crate::runtime_suite!(@module schemas $factory; guide_example_returns_only_output);
        $crate::runtime_suite!(@module typed_schemas $factory; typed_guide_example_returns_only_output, typed_input_and_output_errors_name_the_key, node_input_of_undeclared_channel_fails_compile, json_node_reads_private_key_as_typed_input);
        $crate::runtime_suite!(@module subgraphs $factory;
            subgraph_as_node_shares_keys,
            node_calls_subgraph_with_own_schema,
            subgraph_interrupt_documented_counts,
            time_travel_into_subgraph_resumes_there,
            resume_with_checkpoint_id_is_a_resume,
            replaying_parent_reruns_subgraph,
            time_travel_to_interrupt_then_resume,
        );
    };
    (@module $module:ident $factory:expr; $($case:ident),* $(,)?) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() -> $crate::TestResult {
                    let Some(saver) = ($factory).await? else {
                        return Ok(());
                    };
                    $crate::$module::$case(saver).await
                }
            )*
        }
    };
    (@cases $factory:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() -> $crate::TestResult {
                let Some(saver) = ($factory).await? else {
                    return Ok(());
                };
                $crate::cases::$case(saver).await
            }
        )*
    };
}
