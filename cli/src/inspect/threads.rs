//! `waypoint threads`: list, show, history, fork, copy, prune and delete threads.

use std::collections::BTreeMap;
use std::sync::Arc;
use waypoint_checkpoint::metadata;

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};
use waypoint_checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource,
    CheckpointTuple, ListOptions, PruneStrategy, checkpoint_id, now_rfc3339,
};

use super::{Target, parse_filters, print_json};
use crate::backend::{self, Open};
use crate::table::{Table, ellipsize};
use waypoint_runtime::stored::{
    Decoded, changed_channels, channel_values, interrupts, is_internal, metadata_of, next_nodes,
};

/// The runtime's companion of LangGraph's delta counters.
/// Widest value cell in tables; `--json` has the whole value.
const VALUE_WIDTH: usize = 100;

/// `waypoint threads` subcommands.
#[derive(clap::Subcommand)]
pub(crate) enum ThreadsCommand {
    /// Lists every thread, most recently updated first.
    ///
    /// --json prints {"threads": [{"thread_id", "checkpoints", "namespaces": [..],
    /// "latest_checkpoint_id", "latest_step", "updated_at"}]}; the latest checkpoint is the
    /// root namespace's.
    List {
        #[command(flatten)]
        target: Target,
        /// Show at most this many threads.
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Shows a checkpoint (the latest by default): state, next nodes, pending writes,
    /// interrupts.
    ///
    /// --json prints {"thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id",
    /// "step", "source", "created_at", "metadata", "values": {channel: value},
    /// "internal_channels": [..], "next": [..], "pending_writes": [{"task_id", "channel",
    /// "value"}], "interrupts": [{"task_id", "id", "value"}]}, with --internal also
    /// "internal_values": {channel: value}. A value that cannot be read is {"undecodable":
    /// REASON, "type": TAG, "bytes": N}.
    Show {
        #[command(flatten)]
        target: Target,
        /// The thread.
        thread_id: String,
        /// The checkpoint namespace (a subgraph's); the root by default.
        #[arg(long, default_value = "")]
        ns: String,
        /// A checkpoint id instead of the latest.
        #[arg(long)]
        checkpoint: Option<String>,
        /// Also show the bookkeeping channels' values: triggers, sends, and the state of a
        /// LangGraph functional API (`@entrypoint`) thread, its `__end__` and `__previous__`.
        #[arg(long)]
        internal: bool,
    },
    /// Lists a thread's checkpoints, newest first.
    ///
    /// --json prints {"thread_id", "checkpoint_ns", "checkpoints": [{"checkpoint_id",
    /// "parent_checkpoint_id", "step", "source", "created_at", "next": [..],
    /// "changed_channels": [..] or null, "pending_writes": N}]}.
    History {
        #[command(flatten)]
        target: Target,
        /// The thread.
        thread_id: String,
        /// The checkpoint namespace; the root by default.
        #[arg(long, default_value = "")]
        ns: String,
        /// Metadata filter KEY=VALUE (VALUE is JSON when it parses); repeatable.
        #[arg(long = "filter", value_name = "KEY=VALUE")]
        filters: Vec<String>,
        /// Only checkpoints older than this checkpoint id.
        #[arg(long)]
        before: Option<String>,
        /// At most this many checkpoints.
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Forks a thread at a checkpoint: a copy of it becomes the thread's latest, so a
    /// resumed run continues from there. Prints the new checkpoint id.
    ///
    /// The copy is LangGraph's (`update_state` as `__copy__`): same values and parent,
    /// metadata {"source": "fork", "step": step + 1, "parents", "forked_from"}. --json
    /// prints {"thread_id", "checkpoint_ns", "checkpoint_id", "forked_from"}.
    Fork {
        #[command(flatten)]
        target: Target,
        /// The thread.
        thread_id: String,
        /// The checkpoint to fork at.
        #[arg(long = "at", value_name = "CHECKPOINT")]
        at: String,
        /// Copy the thread to this new thread first and fork the copy (ID stays as it is).
        #[arg(long, value_name = "NEW_THREAD")]
        into: Option<String>,
        /// The checkpoint namespace; the root by default.
        #[arg(long, default_value = "")]
        ns: String,
    },
    /// Copies a whole thread to a new, empty thread.
    ///
    /// --json prints {"source", "target", "checkpoints"}.
    Copy {
        #[command(flatten)]
        target: Target,
        /// The thread to copy.
        source: String,
        /// The new thread; it must have no checkpoints.
        destination: String,
    },
    /// Prunes threads: keeps each namespace's latest checkpoint, or deletes everything.
    ///
    /// --json prints {"pruned": [..], "keep": "latest" | "none"}.
    Prune {
        #[command(flatten)]
        target: Target,
        /// The threads.
        #[arg(required = true)]
        thread_ids: Vec<String>,
        /// What to keep.
        #[arg(long, value_enum, default_value_t = Keep::Latest)]
        keep: Keep,
    },
    /// Deletes threads with all their checkpoints and writes.
    ///
    /// --json prints {"deleted": [..]}.
    Delete {
        #[command(flatten)]
        target: Target,
        /// The threads.
        #[arg(required = true)]
        thread_ids: Vec<String>,
    },
}

/// What `threads prune` keeps.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Keep {
    /// The latest checkpoint of each namespace.
    Latest,
    /// Nothing: the threads are deleted.
    None,
}

/// Runs a `threads` subcommand.
pub(crate) async fn threads(command: ThreadsCommand) -> Result<()> {
    match command {
        ThreadsCommand::List { target, limit } => list(&target, limit).await,
        ThreadsCommand::Show {
            target,
            thread_id,
            ns,
            checkpoint,
            internal,
        } => show(&target, &thread_id, &ns, checkpoint.as_deref(), internal).await,
        ThreadsCommand::History {
            target,
            thread_id,
            ns,
            filters,
            before,
            limit,
        } => {
            let mut options = ListOptions {
                before,
                limit,
                ..ListOptions::default()
            };
            if let Some(filter) = parse_filters(&filters)? {
                options = options.filter(Value::Object(filter));
            }
            history(&target, &thread_id, &ns, &options).await
        }
        ThreadsCommand::Fork {
            target,
            thread_id,
            at,
            into,
            ns,
        } => fork(&target, &thread_id, &ns, &at, into.as_deref()).await,
        ThreadsCommand::Copy {
            target,
            source,
            destination,
        } => copy(&target, &source, &destination).await,
        ThreadsCommand::Prune {
            target,
            thread_ids,
            keep,
        } => prune(&target, &thread_ids, keep).await,
        ThreadsCommand::Delete { target, thread_ids } => delete(&target, &thread_ids).await,
    }
}

/// Opens the checkpointer of an existing database.
async fn open(target: &Target) -> Result<Arc<dyn CheckpointSaver>> {
    backend::saver(&target.url, Open::Existing).await
}

/// Every checkpoint of `thread_id` in all namespaces (fails when there is none).
async fn require_thread(saver: &dyn CheckpointSaver, thread_id: &str) -> Result<usize> {
    let all = CheckpointConfig::new(thread_id);
    let config = CheckpointConfig {
        checkpoint_ns: None,
        ..all
    };
    let count = saver
        .list(Some(&config), &ListOptions::default())
        .await
        .with_context(|| format!("cannot read thread `{thread_id}`"))?
        .len();
    if count == 0 {
        bail!("unknown thread `{thread_id}`: it has no checkpoints");
    }
    Ok(count)
}

/// `threads list`.
async fn list(target: &Target, limit: Option<usize>) -> Result<()> {
    let saver = open(target).await?;
    let tuples = saver
        .list(None, &ListOptions::default())
        .await
        .context("cannot list checkpoints")?;
    // Newest first, so the first tuple seen of a thread is its latest.
    let mut order: Vec<String> = Vec::new();
    let mut threads: BTreeMap<String, ThreadSummary> = BTreeMap::new();
    for tuple in &tuples {
        let thread = &tuple.config.thread_id;
        let summary = threads.entry(thread.clone()).or_insert_with(|| {
            order.push(thread.clone());
            ThreadSummary::default()
        });
        summary.checkpoints += 1;
        let ns = tuple.config.ns();
        if !summary.namespaces.iter().any(|n| n == ns) {
            summary.namespaces.push(ns.to_owned());
        }
        if summary.updated_at.as_str() < tuple.checkpoint.ts.as_str() {
            summary.updated_at = tuple.checkpoint.ts.clone();
        }
        if ns.is_empty() && summary.latest.is_none() {
            summary.latest = Some((tuple.checkpoint.id.clone(), tuple.metadata.step));
        }
    }
    order.truncate(limit.unwrap_or(usize::MAX));
    let rows: Vec<(&String, &ThreadSummary)> = order
        .iter()
        .filter_map(|t| threads.get(t).map(|s| (t, s)))
        .collect();
    if target.json {
        let threads: Vec<Value> = rows
            .iter()
            .map(|(thread, s)| {
                json!({
                    "thread_id": thread,
                    "checkpoints": s.checkpoints,
                    "namespaces": s.namespaces,
                    "latest_checkpoint_id": s.latest.as_ref().map(|l| &l.0),
                    "latest_step": s.latest.as_ref().and_then(|l| l.1),
                    "updated_at": s.updated_at,
                })
            })
            .collect();
        return print_json(&json!({ "threads": threads }));
    }
    if rows.is_empty() {
        println!("no threads");
        return Ok(());
    }
    let mut table = Table::new(&[
        "THREAD",
        "CHECKPOINTS",
        "NAMESPACES",
        "LATEST CHECKPOINT",
        "STEP",
        "UPDATED",
    ]);
    for (thread, s) in rows {
        let namespaces: Vec<String> = s.namespaces.iter().map(|n| ns_label(n)).collect();
        table.row([
            thread.clone(),
            s.checkpoints.to_string(),
            namespaces.join(","),
            s.latest
                .as_ref()
                .map_or_else(|| "-".into(), |l| l.0.clone()),
            step_label(s.latest.as_ref().and_then(|l| l.1)),
            s.updated_at.clone(),
        ]);
    }
    print!("{}", table.render());
    Ok(())
}

/// What `threads list` shows of one thread.
#[derive(Default)]
struct ThreadSummary {
    checkpoints: usize,
    namespaces: Vec<String>,
    latest: Option<(String, Option<i64>)>,
    updated_at: String,
}

/// A namespace for tables: the root shows as `(root)`.
fn ns_label(ns: &str) -> String {
    if ns.is_empty() {
        "(root)".to_owned()
    } else {
        ns.to_owned()
    }
}

fn step_label(step: Option<i64>) -> String {
    step.map_or_else(|| "-".into(), |s| s.to_string())
}

fn source_label(metadata: &CheckpointMetadata) -> String {
    metadata
        .to_json()
        .get("source")
        .and_then(Value::as_str)
        .unwrap_or("-")
        .to_owned()
}

/// The checkpoint `id` (or the latest) of a thread's namespace, or a one-line error.
async fn get_checkpoint(
    saver: &dyn CheckpointSaver,
    thread_id: &str,
    ns: &str,
    id: Option<&str>,
) -> Result<CheckpointTuple> {
    let mut config = CheckpointConfig::new(thread_id).with_ns(ns);
    if let Some(id) = id {
        config = config.with_id(id);
    }
    if let Some(tuple) = saver
        .get_tuple(&config)
        .await
        .with_context(|| format!("cannot read thread `{thread_id}`"))?
    {
        return Ok(tuple);
    }
    require_thread(saver, thread_id).await?;
    match id {
        Some(id) => bail!(
            "thread `{thread_id}` has no checkpoint `{id}` in namespace {}",
            ns_label(ns)
        ),
        None => bail!(
            "thread `{thread_id}` has no checkpoints in namespace {}",
            ns_label(ns)
        ),
    }
}

/// `threads show`; `show_internal` adds the bookkeeping channels' values.
async fn show(
    target: &Target,
    thread_id: &str,
    ns: &str,
    id: Option<&str>,
    show_internal: bool,
) -> Result<()> {
    let saver = open(target).await?;
    let tuple = get_checkpoint(saver.as_ref(), thread_id, ns, id).await?;
    let values = channel_values(saver.as_ref(), &tuple).await?;
    let (internal, visible): (Vec<_>, Vec<_>) =
        values.iter().partition(|(name, _)| is_internal(name));
    let next = next_nodes(&tuple);
    // A thread's current checkpoint shows only interrupts still waiting (LangGraph's
    // live view); a past one shows every interrupt its step raised.
    let interrupts = interrupts(&tuple, id.is_none());
    let writes: Vec<(&str, &str, Decoded)> = tuple
        .pending_writes
        .iter()
        .map(|w| {
            (
                w.task_id.as_str(),
                w.channel.as_str(),
                Decoded::of(&w.value),
            )
        })
        .collect();
    let parent = tuple
        .parent_config
        .as_ref()
        .and_then(|p| p.checkpoint_id.clone());
    // As snapshots show it: no bookkeeping keys, `writes` rebuilt where the parent holds it.
    let metadata = Value::Object(metadata_of(saver.as_ref(), &tuple).await?.to_json());
    let to_json = |channels: &[(&String, &Decoded)]| -> serde_json::Map<String, Value> {
        channels
            .iter()
            .map(|(name, value)| ((*name).clone(), value.to_json()))
            .collect()
    };
    if target.json {
        let mut shown = json!({
            "thread_id": tuple.config.thread_id,
            "checkpoint_ns": tuple.config.ns(),
            "checkpoint_id": tuple.checkpoint.id,
            "parent_checkpoint_id": parent,
            "step": tuple.metadata.step,
            "source": metadata.get("source"),
            "created_at": tuple.checkpoint.ts,
            "metadata": metadata,
            "values": to_json(&visible),
            "internal_channels": internal.iter().map(|(name, _)| *name).collect::<Vec<_>>(),
            "next": next,
            "pending_writes": writes
                .iter()
                .map(|(task, channel, value)| {
                    json!({"task_id": task, "channel": channel, "value": value.to_json()})
                })
                .collect::<Vec<_>>(),
            "interrupts": interrupts,
        });
        if show_internal {
            shown["internal_values"] = Value::Object(to_json(&internal));
        }
        return print_json(&shown);
    }
    let mut head = Table::new(&[]);
    head.row(["checkpoint", tuple.checkpoint.id.as_str()])
        .row(["parent", parent.as_deref().unwrap_or("-")])
        .row([
            "thread".to_owned(),
            format!("{} (namespace {})", tuple.config.thread_id, ns_label(ns)),
        ])
        .row(["step".to_owned(), step_label(tuple.metadata.step)])
        .row(["source".to_owned(), source_label(&tuple.metadata)])
        .row(["created", tuple.checkpoint.ts.as_str()])
        .row(["metadata".to_owned(), metadata.to_string()])
        .row([
            "next".to_owned(),
            if next.is_empty() {
                "(nothing: the run is done)".to_owned()
            } else {
                next.join(", ")
            },
        ]);
    print!("{}", head.render());
    let hidden = match (internal.len(), show_internal) {
        (0, _) => String::new(),
        (n, true) => format!("; then {n} internal"),
        (n, false) => format!("; {n} internal not shown, --internal shows them"),
    };
    println!("\nvalues ({} channels{hidden})", visible.len());
    let shown: Vec<&(&String, &Decoded)> = if show_internal {
        visible.iter().chain(&internal).collect()
    } else {
        visible.iter().collect()
    };
    let mut table = Table::new(&["CHANNEL", "VALUE"]);
    for (name, value) in shown {
        table.row([(*name).clone(), cell(value)]);
    }
    if !table.is_empty() {
        print!("{}", table.render());
    }
    println!("\npending writes ({})", writes.len());
    let mut table = Table::new(&["TASK", "CHANNEL", "VALUE"]);
    for (task, channel, value) in &writes {
        table.row([(*task).to_owned(), (*channel).to_owned(), cell(value)]);
    }
    if !table.is_empty() {
        print!("{}", table.render());
    }
    println!("\ninterrupts ({})", interrupts.len());
    let mut table = Table::new(&["TASK", "ID", "VALUE"]);
    for interrupt in &interrupts {
        table.row([
            interrupt["task_id"].as_str().unwrap_or("-").to_owned(),
            interrupt["id"].as_str().unwrap_or("-").to_owned(),
            ellipsize(&interrupt["value"].to_string(), VALUE_WIDTH),
        ]);
    }
    if !table.is_empty() {
        print!("{}", table.render());
    }
    Ok(())
}

/// A value for a table cell: cut to [`VALUE_WIDTH`], except the undecodable marker, which
/// is short and whose reason matters.
fn cell(value: &Decoded) -> String {
    match value {
        Decoded::Value(_) => ellipsize(&value.display(), VALUE_WIDTH),
        Decoded::Undecodable { .. } => value.display(),
    }
}

/// `threads history`.
async fn history(target: &Target, thread_id: &str, ns: &str, options: &ListOptions) -> Result<()> {
    let saver = open(target).await?;
    require_thread(saver.as_ref(), thread_id).await?;
    let config = CheckpointConfig::new(thread_id).with_ns(ns);
    let tuples = waypoint_runtime::stored::list(saver.as_ref(), Some(&config), options)
        .await
        .with_context(|| format!("cannot list the checkpoints of thread `{thread_id}`"))?;
    let by_id: BTreeMap<&str, &CheckpointTuple> = tuples
        .iter()
        .map(|t| (t.checkpoint.id.as_str(), t))
        .collect();
    let rows: Vec<Value> = tuples
        .iter()
        .map(|t| {
            let parent = t
                .parent_config
                .as_ref()
                .and_then(|p| p.checkpoint_id.as_deref());
            let changed = changed_channels(t, parent.and_then(|p| by_id.get(p).copied()));
            json!({
                "checkpoint_id": t.checkpoint.id,
                "parent_checkpoint_id": parent,
                "step": t.metadata.step,
                "source": t.metadata.to_json().get("source"),
                "created_at": t.checkpoint.ts,
                "next": next_nodes(t),
                "changed_channels": changed,
                "pending_writes": t.pending_writes.len(),
            })
        })
        .collect();
    if target.json {
        return print_json(&json!({
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoints": rows,
        }));
    }
    if rows.is_empty() {
        println!("no checkpoints match");
        return Ok(());
    }
    let mut table = Table::new(&["CHECKPOINT", "STEP", "SOURCE", "NEXT", "CHANGED", "WRITES"]);
    let join = |v: &Value| match v.as_array() {
        Some(items) if items.is_empty() => "-".to_owned(),
        Some(items) => items
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(","),
        None => "?".to_owned(),
    };
    for row in &rows {
        table.row([
            row["checkpoint_id"].as_str().unwrap_or("-").to_owned(),
            step_label(row["step"].as_i64()),
            row["source"].as_str().unwrap_or("-").to_owned(),
            join(&row["next"]),
            join(&row["changed_channels"]),
            row["pending_writes"].to_string(),
        ]);
    }
    print!("{}", table.render());
    Ok(())
}

/// `threads fork`.
async fn fork(
    target: &Target,
    thread_id: &str,
    ns: &str,
    at: &str,
    into: Option<&str>,
) -> Result<()> {
    let saver = open(target).await?;
    // Check the checkpoint before copying anything.
    get_checkpoint(saver.as_ref(), thread_id, ns, Some(at)).await?;
    let thread = match into {
        Some(new) => {
            copy_checked(saver.as_ref(), thread_id, new).await?;
            new
        }
        None => thread_id,
    };
    let base = get_checkpoint(saver.as_ref(), thread, ns, Some(at)).await?;
    let stored = put_fork(saver.as_ref(), &base).await?;
    let id = stored.checkpoint_id.unwrap_or_default();
    if target.json {
        return print_json(&json!({
            "thread_id": thread,
            "checkpoint_ns": ns,
            "checkpoint_id": id,
            "forked_from": at,
        }));
    }
    println!("{id}");
    Ok(())
}

/// Stores a copy of `base` as its thread's newest checkpoint, as LangGraph's `__copy__`
/// update does: the same values and the same parent, so channels stored as deltas rebuild
/// through the same history; `step + 1`; `source: fork`. `forked_from` names `base`, from
/// which the runtime derives the task ids of what runs next.
async fn put_fork(saver: &dyn CheckpointSaver, base: &CheckpointTuple) -> Result<CheckpointConfig> {
    let step = base.metadata.step.unwrap_or(-1) + 1;
    let checkpoint = Checkpoint {
        id: checkpoint_id(step),
        ts: now_rfc3339(),
        updated_channels: Some(Vec::new()),
        ..base.checkpoint.clone()
    };
    let mut metadata = CheckpointMetadata::new(CheckpointSource::Fork, step);
    metadata.parents = Some(base.metadata.parents.clone().unwrap_or_default());
    for key in [metadata::DELTA_COUNTERS, metadata::DELTA_BYTES] {
        if let Some(value) = base.metadata.extra.get(key) {
            metadata.extra.insert(key.to_owned(), value.clone());
        }
    }
    metadata = metadata.with(metadata::FORKED_FROM, base.checkpoint.id.clone());
    let parent = match &base.parent_config {
        Some(parent) => parent.clone(),
        None => CheckpointConfig::new(&base.config.thread_id).with_ns(base.config.ns()),
    };
    // No new versions: every value is already stored under its version in this thread.
    saver
        .put(&parent, checkpoint, metadata, Default::default())
        .await
        .context("cannot store the fork")
}

/// Copies `source` to `destination` after checking both.
async fn copy_checked(
    saver: &dyn CheckpointSaver,
    source: &str,
    destination: &str,
) -> Result<usize> {
    let count = require_thread(saver, source).await?;
    let taken = CheckpointConfig {
        checkpoint_ns: None,
        ..CheckpointConfig::new(destination)
    };
    if !saver
        .list(Some(&taken), &ListOptions::default().limit(1))
        .await
        .with_context(|| format!("cannot read thread `{destination}`"))?
        .is_empty()
    {
        bail!("thread `{destination}` already has checkpoints; copy into a new thread");
    }
    saver
        .copy_thread(source, destination)
        .await
        .with_context(|| format!("cannot copy thread `{source}` to `{destination}`"))?;
    Ok(count)
}

/// `threads copy`.
async fn copy(target: &Target, source: &str, destination: &str) -> Result<()> {
    let saver = open(target).await?;
    let count = copy_checked(saver.as_ref(), source, destination).await?;
    if target.json {
        return print_json(&json!({
            "source": source,
            "target": destination,
            "checkpoints": count,
        }));
    }
    println!("copied thread `{source}` to `{destination}` ({count} checkpoints)");
    Ok(())
}

/// Fails unless every thread exists, so nothing is changed for a mistyped id.
async fn require_threads(saver: &dyn CheckpointSaver, thread_ids: &[String]) -> Result<()> {
    for thread in thread_ids {
        require_thread(saver, thread).await?;
    }
    Ok(())
}

/// `threads prune`.
async fn prune(target: &Target, thread_ids: &[String], keep: Keep) -> Result<()> {
    let saver = open(target).await?;
    require_threads(saver.as_ref(), thread_ids).await?;
    let strategy = match keep {
        Keep::Latest => PruneStrategy::KeepLatest,
        Keep::None => PruneStrategy::Delete,
    };
    saver
        .prune(thread_ids, strategy)
        .await
        .context("cannot prune")?;
    let keep = match keep {
        Keep::Latest => "latest",
        Keep::None => "none",
    };
    if target.json {
        return print_json(&json!({"pruned": thread_ids, "keep": keep}));
    }
    println!(
        "pruned {} thread(s), keeping {}: {}",
        thread_ids.len(),
        if keep == "latest" {
            "the latest checkpoint of each namespace"
        } else {
            "nothing"
        },
        thread_ids.join(", ")
    );
    Ok(())
}

/// `threads delete`.
async fn delete(target: &Target, thread_ids: &[String]) -> Result<()> {
    let saver = open(target).await?;
    require_threads(saver.as_ref(), thread_ids).await?;
    for thread in thread_ids {
        saver
            .delete_thread(thread)
            .await
            .with_context(|| format!("cannot delete thread `{thread}`"))?;
    }
    if target.json {
        return print_json(&json!({ "deleted": thread_ids }));
    }
    println!(
        "deleted {} thread(s): {}",
        thread_ids.len(),
        thread_ids.join(", ")
    );
    Ok(())
}
