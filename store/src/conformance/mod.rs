//! The store conformance suite: every behaviour of the store contract, specified once.
//!
//! Each case is an async fn taking a [`StoreFactory`], which opens a fresh, empty store with
//! the configuration the case needs (an index, a TTL policy). A factory that returns `None`
//! skips the case (a live server that is absent; the factory fails instead when
//! `WAYPOINT_REQUIRE_BACKENDS` is set). A backend runs the whole list with one macro call:
//!
//! ```ignore
//! waypoint_store::store_conformance!(|config| async move {
//!     Ok(Some(waypoint_store::InMemoryStore::with_config(config)?))
//! });
//! ```
//!
//! A backend whose stores can share a database also passes, after `second =`, how to open a
//! second store on the database of a first; the cases about two stores then run too:
//!
//! ```ignore
//! waypoint_store::store_conformance!(|config| open(config), second = |first: &MyStore, config| {
//!     MyStore::connect(first.config().clone().store(config))
//! });
//! ```

use std::future::Future;

use async_trait::async_trait;

use crate::{Result, Store, StoreConfig};

/// Opens fresh, empty stores for the cases.
#[async_trait]
pub trait StoreFactory: Send + Sync {
    /// A new empty store with `config`, or `None` to skip the case.
    async fn open(&self, config: StoreConfig) -> Result<Option<Box<dyn Store>>>;
}

#[async_trait]
impl<F, Fut, S> StoreFactory for F
where
    F: Fn(StoreConfig) -> Fut + Send + Sync,
    Fut: Future<Output = Result<Option<S>>> + Send,
    S: Store + 'static,
{
    async fn open(&self, config: StoreConfig) -> Result<Option<Box<dyn Store>>> {
        Ok(self(config).await?.map(|s| Box::new(s) as Box<dyn Store>))
    }
}

mod basic;
mod feed;
mod filters;
mod hybrid;
mod namespaces;
mod outage;
mod search;
mod ttl;
mod vectors;

pub use basic::*;
pub use feed::*;
pub use filters::*;
pub use hybrid::*;
pub use namespaces::*;
pub use outage::{Restart, restart_mid_write_loop};
pub use search::*;
pub use ttl::*;
pub use vectors::*;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

use crate::{Distance, Embedder, Error, HashingEmbedder, IndexConfig, Namespace, Object};

/// Runs every case as a `#[tokio::test]` against stores from `factory`.
#[macro_export]
macro_rules! store_conformance {
    ($factory:expr) => {
        $crate::__store_cases!(tests $factory);
    };
    ($factory:expr, second = $second:expr) => {
        $crate::__store_cases!(tests $factory);
        $crate::__store_shared_cases!(tests $factory, $second);
    };
}

/// The cases on two stores sharing one database; `names` gives their names, `tests` the test
/// functions.
#[doc(hidden)]
#[macro_export]
macro_rules! __store_shared_cases {
    ($($mode:tt)*) => {
        $crate::__store_shared_cases_apply! { [$($mode)*]
            feed_second_store_sees_puts_updates_and_deletes hybrid_second_store_follows_lexically
        }
    };
}

/// Expands the shared-database case list into names or tests.
#[doc(hidden)]
#[macro_export]
macro_rules! __store_shared_cases_apply {
    ([names] $($case:ident)*) => {
        &[$(stringify!($case)),*]
    };
    ([tests $factory:expr, $second:expr] $($case:ident)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() -> $crate::Result<()> {
            let factory = $crate::conformance::Shared::new($factory, $second);
            $crate::conformance::$case(&factory).await
        }
    )*};
}

/// The one list of cases; `names` gives their names, `tests` the test functions.
#[doc(hidden)]
#[macro_export]
macro_rules! __store_cases {
    ($($mode:tt)*) => {
        $crate::__store_cases_apply! { [$($mode)*]
            put_and_get_roundtrip get_missing_returns_none put_update_keeps_created_at
            delete_removes_item delete_missing_is_noop put_rejects_non_object_values
            namespaces_isolate_keys non_ascii_roundtrip oversized_value_rejected
            batch_results_follow_op_order batch_reads_before_writes batch_last_put_wins
            batch_put_then_delete_deletes batch_failing_op_writes_nothing empty_batch
            invalid_namespaces_rejected_on_put invalid_namespaces_rejected_everywhere
            list_namespaces_basic list_namespaces_with_wildcards list_namespaces_pagination
            list_namespaces_max_depth_dedupes list_namespaces_empty_store
            list_namespaces_label_wise_order list_namespaces_only_namespaces_with_items
            list_namespaces_segment_boundary
            search_prefix_matches_whole_labels search_empty_prefix_matches_all
            search_metacharacter_labels_are_literal search_is_case_sensitive
            search_orders_by_updated_at
            search_order_spans_namespaces_ties_by_namespace_then_key search_pagination search_limit_zero
            filter_equality filter_comparison_is_numeric filter_ne_matches_missing_key
            filter_missing_key_excluded filter_combined_conditions
            filter_unknown_operator_is_error filter_non_object_is_error
            filter_hostile_keys_are_literal filter_hostile_values_are_data
            filter_extreme_numbers filter_page_is_never_underfilled
            vector_insert_with_auto_embedding vector_update_changes_score
            vector_index_off_excluded_from_semantic_results vector_search_with_filters
            vector_search_pagination vector_search_namespace_prefix vector_embed_with_path
            vector_scores_cosine vector_scores_dot vector_scores_l2 vector_non_ascii
            vector_query_without_index_is_plain_search vector_empty_query_is_plain_search
            vector_deleted_items_not_returned vector_reput_with_index_off_removes_vectors
            vector_filtered_page_is_full vector_wrong_dimensions_rejected
            vector_failing_embedder_writes_nothing vector_one_embedding_call_per_batch
            ttl_expired_items_never_returned ttl_refresh_on_get ttl_refresh_on_search
            ttl_refresh_disabled ttl_sweep_deletes_expired ttl_background_sweeper
            ttl_default_and_override ttl_fractional_minutes ttl_invalid_rejected
            ttl_update_resets
            hybrid_identifier_found_by_lexical_leg hybrid_paraphrase_found_by_vector_leg hybrid_filters_pages_and_updates hybrid_hostile_queries_are_words hybrid_without_lexical_index_is_error
        }
    };
}

/// Expands the case list into names or tests.
#[doc(hidden)]
#[macro_export]
macro_rules! __store_cases_apply {
    ([names] $($case:ident)*) => {
        &[$(stringify!($case)),*]
    };
    ([tests $factory:expr] $($case:ident)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() -> $crate::Result<()> {
            let factory = $factory;
            $crate::conformance::$case(&factory).await
        }
    )*};
}

/// The names of every case, in suite order.
pub const CASE_NAMES: &[&str] = __store_cases!(names);

/// The names of the cases on two stores sharing a database, in suite order.
pub const SHARED_CASE_NAMES: &[&str] = __store_shared_cases!(names);

// ---- fixtures shared by the cases ----------------------------------------------------------

/// Opens a store or skips the case.
macro_rules! open {
    ($factory:expr, $config:expr) => {
        match $factory.open($config).await? {
            Some(store) => store,
            None => return Ok(()),
        }
    };
}
pub(crate) use open;

/// Fails the case with a message (cases return `Result`, so no panics outside asserts).
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err($crate::Error::InvalidConfig(format!(
                "conformance check failed: {}", format!($($msg)+)
            )));
        }
    };
}
pub(crate) use ensure;

/// A JSON object from a `json!` literal.
pub(crate) fn obj(value: Value) -> Object {
    match value {
        Value::Object(map) => map,
        other => Object::from_iter([(String::from("value"), other)]),
    }
}

/// A namespace under a fresh uuid root, so cases never see each other's items.
pub(crate) fn fresh(labels: &[&str]) -> Namespace {
    let root = uuid::Uuid::new_v4().simple().to_string();
    Namespace::new(std::iter::once(root.as_str()).chain(labels.iter().copied()))
}

/// Dimensions of the embedders the vector cases use.
pub const DIMS: usize = 64;

/// An index on the hashing embedder over the whole value.
pub(crate) fn hashing_index() -> IndexConfig {
    IndexConfig::hashing(DIMS)
}

/// Wraps an embedder to count calls and optionally fail or return bad vectors.
#[derive(Debug)]
pub struct ProbeEmbedder {
    inner: HashingEmbedder,
    calls: AtomicUsize,
    mode: ProbeMode,
}

/// What a [`ProbeEmbedder`] does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeMode {
    /// Embeds like the hashing embedder.
    Pass,
    /// Every call fails.
    Fail,
    /// Returns vectors one dimension short.
    WrongDims,
}

impl ProbeEmbedder {
    /// A probe of `DIMS` dimensions.
    pub fn new(mode: ProbeMode) -> Arc<Self> {
        Arc::new(ProbeEmbedder {
            inner: HashingEmbedder::new(DIMS),
            calls: AtomicUsize::new(0),
            mode,
        })
    }

    /// How many embedding calls it received.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Embedder for ProbeEmbedder {
    fn dims(&self) -> usize {
        DIMS
    }

    async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match self.mode {
            ProbeMode::Pass => self.inner.embed_documents(texts).await,
            ProbeMode::Fail => Err(Error::Embedding(String::from("probe: embedder down"))),
            ProbeMode::WrongDims => Ok(texts.iter().map(|_| vec![0.5; DIMS - 1]).collect()),
        }
    }
}

/// The unit vector of `seed`, clustered like text embeddings: one of 200 centres plus noise
/// (benchmarks' data: uniform random vectors are the worst case of every ANN index and look
/// like no real embedding).
pub fn clustered_vector(seed: u64, dims: usize) -> Vec<f32> {
    // A splitmix64 stream.
    fn next(x: &mut u64) -> u64 {
        *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    // A value in [-1, 1).
    fn uniform(x: &mut u64) -> f32 {
        (next(x) >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    let mut s = seed.wrapping_mul(31).wrapping_add(7);
    let mut c = next(&mut s) % 200 + 1_000_000_007;
    let mut v: Vec<f32> = (0..dims)
        .map(|_| uniform(&mut c) + 0.6 * uniform(&mut s))
        .collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

/// The reference similarity a store's score must equal (to 1e-3).
pub fn similarity(distance: Distance, a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    match distance {
        Distance::Dot => dot,
        Distance::Cosine => {
            let na = a.iter().map(|x| x * x).sum::<f32>().sqrt();
            let nb = b.iter().map(|x| x * x).sum::<f32>().sqrt();
            if na == 0.0 || nb == 0.0 {
                0.0
            } else {
                dot / (na * nb)
            }
        }
        Distance::L2 => -a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y) * (x - y))
            .sum::<f32>()
            .sqrt(),
    }
}
