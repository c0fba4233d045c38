//! The spans runs, savers and stores emit: names, fields and nesting, and that no field ever
//! holds a value, metadata, query text or password.
//!
//! A global subscriber (this binary's alone) collects every closed span and every event,
//! from whichever thread made it; each case finds its own by a fresh thread id or namespace.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context as LayerContext, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use waypoint_checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource,
    InMemorySaver,
};
use waypoint_checkpoint_sqlite::{SqliteSaver, SqliteStore};
use waypoint_runtime::{
    CompileOptions, CompiledGraph, Context, Durability, END, NodeResult, RunConfig, START, State,
    StateGraph, StreamMode,
};
use waypoint_store::{InMemoryStore, IndexConfig, SearchOp, Store, StoreConfig, StoreExt};
use waypoint_test_kit::{fresh_name, kept_temp_dir, postgres_url};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// Planted in state, metadata, store values, queries, filters and a URL's password: no span
/// field or event may ever contain it.
const SECRET: &str = "s3cr3t-TRACING-canary";

/// A closed span or an event.
#[derive(Clone, Debug)]
struct Captured {
    name: String,
    /// The enclosing span's name, if any.
    parent: Option<String>,
    /// The `thread_id` of the span or of its nearest ancestor that has one.
    thread: Option<String>,
    fields: BTreeMap<String, String>,
}

impl Captured {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

static CAPTURED: LazyLock<Mutex<Vec<Captured>>> = LazyLock::new(|| {
    let subscriber = tracing_subscriber::registry().with(Collector);
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
    Mutex::default()
});

/// Everything captured so far (installs the subscriber on first use).
fn captured() -> MutexGuard<'static, Vec<Captured>> {
    CAPTURED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Installs the subscriber, before a case does anything.
fn capture() {
    LazyLock::force(&CAPTURED);
}

/// The fields of a span being built.
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

/// Keeps each span's fields in the registry, and the span itself once it closes.
struct Collector;

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Collector {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: LayerContext<'_, S>) {
        let mut fields = Fields(BTreeMap::new());
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: LayerContext<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<Fields>()
        {
            values.record(fields);
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: LayerContext<'_, S>) {
        let mut fields = Fields(BTreeMap::new());
        event.record(&mut fields);
        let parent = ctx.event_span(event).map(|s| s.name().to_owned());
        let thread = ctx.event_scope(event).and_then(|scope| thread_of(scope));
        captured().push(Captured {
            name: event.metadata().name().to_owned(),
            parent,
            thread,
            fields: fields.0,
        });
    }

    fn on_close(&self, id: Id, ctx: LayerContext<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let thread = thread_of(span.scope());
        let fields = span
            .extensions_mut()
            .remove::<Fields>()
            .map(|f| f.0)
            .unwrap_or_default();
        captured().push(Captured {
            name: span.name().to_owned(),
            parent: span.parent().map(|p| p.name().to_owned()),
            thread,
            fields,
        });
    }
}

/// The first `thread_id` of spans from the innermost out (ancestors are still open).
fn thread_of<'a, R: LookupSpan<'a>>(
    scope: tracing_subscriber::registry::Scope<'a, R>,
) -> Option<String> {
    scope.into_iter().find_map(|span| {
        let extensions = span.extensions();
        extensions.get::<Fields>()?.0.get("thread_id").cloned()
    })
}

/// Captured spans named `name` inside the run on `thread`.
fn in_thread(name: &str, thread: &str) -> Vec<Captured> {
    captured()
        .iter()
        .filter(|c| c.name == name && c.thread.as_deref() == Some(thread))
        .cloned()
        .collect()
}

/// Captured spans named `name` whose `field` is `value`.
fn spans(name: &str, field: &str, value: &str) -> Vec<Captured> {
    captured()
        .iter()
        .filter(|c| c.name == name && c.field(field) == Some(value))
        .cloned()
        .collect()
}

/// Fails if any captured span or event holds [`SECRET`] in a field.
fn assert_no_secret() {
    for c in captured().iter() {
        for (field, value) in &c.fields {
            assert!(
                !value.contains(SECRET),
                "`{}` field `{field}` leaks the secret: {value}",
                c.name
            );
        }
    }
}

#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
struct Notes {
    secret: String,
    #[reducer(append)]
    seen: Vec<String>,
}

async fn first(state: Notes, _: Context) -> NodeResult<NotesUpdate> {
    Ok(NotesUpdate::default().seen(vec![format!("first saw {}", state.secret)]))
}

async fn second(_: Notes, _: Context) -> NodeResult<NotesUpdate> {
    Ok(NotesUpdate::default().seen(vec!["second".into()]))
}

fn graph(saver: Arc<dyn CheckpointSaver>) -> waypoint_runtime::Result<CompiledGraph<Notes>> {
    let mut graph = StateGraph::<Notes>::new();
    graph.add_node("first", first).add_node("second", second);
    graph
        .add_edge(START, "first")
        .add_edge("first", "second")
        .add_edge("second", END);
    graph.compile(CompileOptions::with_checkpointer(saver))
}

/// Runs the graph on `saver` with the secret in the state, and a direct put with the secret
/// in metadata, then checks the spans of both.
async fn run_is_traced(saver: Arc<dyn CheckpointSaver>) -> TestResult {
    capture();
    let backend = saver.backend();
    let thread = fresh_name("trace");
    let graph = graph(Arc::clone(&saver))?;
    let input = NotesUpdate::default().secret(SECRET.to_string());
    let done = graph
        .invoke(Some(input), &RunConfig::thread(&thread))
        .await?;
    assert_eq!(done.values.seen.len(), 2);

    let invoke = spans("invoke", "thread_id", &thread);
    assert_eq!(invoke.len(), 1, "one invoke span: {invoke:?}");
    assert_eq!(invoke[0].field("durability"), Some("sync"));
    assert_eq!(invoke[0].field("checkpoint_ns"), Some(""));

    let lease = spans("lease", "thread_id", &thread);
    assert_eq!(lease.len(), 1, "the run's lease: {lease:?}");
    assert_eq!(lease[0].parent.as_deref(), Some("invoke"));

    // The invoke span's children: one superstep per step (start, first, second).
    let steps = in_thread("superstep", &thread);
    assert!(steps.iter().all(|s| s.parent.as_deref() == Some("invoke")));
    for step in ["0", "1", "2"] {
        assert!(
            steps
                .iter()
                .any(|s| s.field("step") == Some(step) && s.field("tasks") == Some("1")),
            "superstep {step}: {steps:?}"
        );
    }
    for (node, step) in [("first", "1"), ("second", "2")] {
        let found = in_thread("node", &thread);
        assert!(
            found.iter().any(|n| n.field("node") == Some(node)
                && n.field("step") == Some(step)
                && n.parent.as_deref() == Some("superstep")
                && n.field("task_id").is_some_and(|id| !id.is_empty())),
            "node {node} at step {step}: {found:?}"
        );
    }

    // The saver's spans, inside the run: the load, and fenced saves of its checkpoints.
    let reads = spans("get_tuple", "thread_id", &thread);
    assert!(
        reads
            .iter()
            .any(|r| r.field("backend") == Some(backend) && r.parent.as_deref() == Some("invoke")),
        "the run's load: {reads:?}"
    );
    let saves = spans("save_fenced", "thread_id", &thread);
    assert!(!saves.is_empty(), "fenced saves: {saves:?}");
    for save in &saves {
        assert_eq!(save.field("backend"), Some(backend));
        assert_eq!(save.parent.as_deref(), Some("save_checkpoint"));
        assert!(save.field("checkpoint_id").is_some_and(|id| id.len() == 36));
        assert!(save.field("rows").is_some_and(|n| n != "0"));
        assert!(save.field("bytes").is_some());
    }
    let outer = spans("save_checkpoint", "thread_id", &thread);
    assert!(
        outer.iter().any(|s| s.field("step") == Some("2")),
        "{outer:?}"
    );

    // Direct calls: a put with the secret in its metadata, then a read of it.
    let other = fresh_name("trace");
    let metadata = CheckpointMetadata::new(CheckpointSource::Input, -1).with("note", SECRET);
    let checkpoint = Checkpoint::new(-1);
    let id = checkpoint.id.clone();
    let config = CheckpointConfig::new(&other);
    saver
        .put(&config, checkpoint, metadata, Default::default())
        .await?;
    let put = spans("put", "thread_id", &other);
    assert_eq!(put.len(), 1, "{put:?}");
    assert_eq!(put[0].field("backend"), Some(backend));
    assert_eq!(put[0].field("checkpoint_id"), Some(id.as_str()));
    assert_eq!(put[0].field("checkpoint_ns"), Some(""));
    assert_eq!(put[0].field("bytes"), Some("0"));
    assert!(saver.get_tuple(&config).await?.is_some());
    let read = spans("get_tuple", "thread_id", &other);
    assert_eq!(read.len(), 1, "{read:?}");
    assert_eq!(read[0].field("checkpoint_id"), Some(id.as_str()));
    assert_eq!(read[0].field("rows"), Some("1"));
    assert_no_secret();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_the_memory_saver_is_traced() -> TestResult {
    run_is_traced(Arc::new(InMemorySaver::new())).await
}

/// A streamed run is one `stream` span (the spawned run's), with its super-steps inside, and
/// its async saves in a span of their own (on SQLite: the in-memory saver saves in line).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_run_is_traced() -> TestResult {
    use futures::StreamExt;
    capture();
    let thread = fresh_name("trace");
    let config = RunConfig::thread(&thread).durability(Durability::Async);
    let input = NotesUpdate::default().secret(SECRET.to_string());
    let path = kept_temp_dir()?.join("stream.db");
    let graph = graph(Arc::new(SqliteSaver::from_path(&path).await?))?;
    let parts: Vec<_> = graph
        .stream(Some(input), &config, &[StreamMode::Values])
        .collect()
        .await;
    assert!(parts.iter().all(Result::is_ok));
    // The stream ends when the run drops its sender, just before its span closes.
    for _ in 0..200 {
        if !spans("stream", "thread_id", &thread).is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let stream = spans("stream", "thread_id", &thread);
    assert_eq!(stream.len(), 1, "{stream:?}");
    assert_eq!(stream[0].field("durability"), Some("async"));
    let steps = in_thread("superstep", &thread);
    assert!(steps.iter().all(|s| s.parent.as_deref() == Some("stream")));
    assert_eq!(steps.len(), 3, "{steps:?}");
    assert!(!in_thread("async_saves", &thread).is_empty());
    assert_no_secret();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_sqlite_is_traced() -> TestResult {
    let path = kept_temp_dir()?.join("trace.db");
    run_is_traced(Arc::new(SqliteSaver::from_path(&path).await?)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_postgres_is_traced() -> TestResult {
    match waypoint_tests::savers::postgres().await? {
        Some(saver) => run_is_traced(saver).await,
        None => Ok(()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_redis_is_traced() -> TestResult {
    match waypoint_tests::savers::redis().await? {
        Some(saver) => run_is_traced(saver).await,
        None => Ok(()),
    }
}

/// A put and two searches (one by query, with the secret as query and filter value) give
/// `store.batch` and `store.search` spans with the backend, namespace and rows.
async fn store_is_traced(store: &dyn Store, backend: &str) -> TestResult {
    capture();
    let label = fresh_name("trace");
    let namespace = ["users", label.as_str()];
    store
        .put(namespace, "a", json!({"text": SECRET, "kind": SECRET}))
        .await?;
    let found = store.search(SearchOp::new(namespace)).await?;
    assert_eq!(found.len(), 1);
    let by_query = SearchOp::new(namespace)
        .query(SECRET)
        .filter(json!({"kind": SECRET}));
    assert_eq!(store.search(by_query).await?.len(), 1);

    let joined = format!("users.{label}");
    let batches = spans("store.batch", "namespace", &joined);
    assert_eq!(batches.len(), 3, "{batches:?}");
    assert!(batches.iter().all(|b| b.field("backend") == Some(backend)));
    assert!(
        batches
            .iter()
            .any(|b| b.field("rows") == Some("1") && b.field("ops") == Some("1")),
        "the put's batch wrote one row: {batches:?}"
    );
    let searches = spans("store.search", "namespace", &joined);
    assert_eq!(searches.len(), 2, "{searches:?}");
    for search in &searches {
        assert_eq!(search.field("backend"), Some(backend));
        assert_eq!(search.field("rows"), Some("1"));
        assert_eq!(search.parent.as_deref(), Some("store.batch"));
    }
    assert!(searches.iter().any(|s| s.field("query") == Some("false")));
    assert!(
        searches
            .iter()
            .any(|s| s.field("query") == Some("true") && s.field("filter") == Some("true"))
    );
    assert_no_secret();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_store_is_traced() -> TestResult {
    let store = InMemoryStore::with_config(StoreConfig::new().index(IndexConfig::hashing(16)))?;
    store_is_traced(&store, "memory").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_store_is_traced() -> TestResult {
    let path = kept_temp_dir()?.join("store.db");
    let config = StoreConfig::new().index(IndexConfig::hashing(16));
    let store = SqliteStore::from_path(&path, config).await?;
    store_is_traced(&store, "sqlite").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postgres_store_is_traced() -> TestResult {
    use waypoint_checkpoint_postgres::{PostgresConfig, PostgresStore};
    let Some(url) = postgres_url() else {
        return Ok(());
    };
    let config = PostgresConfig::new(url).schema(fresh_name("wp_trace"));
    let store =
        PostgresStore::connect(config, StoreConfig::new().index(IndexConfig::hashing(16))).await?;
    store_is_traced(&store, "postgres").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_store_is_traced() -> TestResult {
    use waypoint_checkpoint_redis::{RedisConfig, RedisStore};
    let Some(url) = waypoint_test_kit::redis_url() else {
        return Ok(());
    };
    let config = RedisConfig::new(url).prefix(fresh_name("wp_trace"));
    let store =
        RedisStore::connect(config, StoreConfig::new().index(IndexConfig::hashing(16))).await?;
    store_is_traced(&store, "redis").await
}

/// A saver, a run and a store on a PostgreSQL URL holding a password: the password shows in
/// no span or event (the test server trusts loopback, so any password connects).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_password_is_never_traced() -> TestResult {
    use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver};
    capture();
    let Some(url) = postgres_url() else {
        return Ok(());
    };
    let url = waypoint_test_kit::with_password(&url, SECRET);
    let config = PostgresConfig::new(url)
        .schema(fresh_name("wp_trace"))
        .max_connections(2);
    let saver = PostgresSaver::connect(config).await?;
    saver.setup().await?;
    let store = saver.store(StoreConfig::default()).await?;
    let saver: Arc<dyn CheckpointSaver> = Arc::new(saver);
    let thread = fresh_name("trace");
    graph(saver)?
        .invoke(
            Some(NotesUpdate::default().secret("x".to_string())),
            &RunConfig::thread(&thread),
        )
        .await?;
    store.put(["users", "pg"], "a", json!({"v": 1})).await?;
    assert_eq!(spans("invoke", "thread_id", &thread).len(), 1);
    assert_no_secret();
    Ok(())
}
