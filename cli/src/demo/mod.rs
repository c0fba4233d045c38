//! `waypoint demo`: a scripted conversation with the demo agent that shows memory across
//! threads, an interrupt a human resumes, and time travel, on any backend.
//!
//! Every run has a short random id in its thread ids and memory namespaces, so running the
//! demo again on the same database starts afresh and leaves earlier runs for inspection.

mod agent;

use std::io::Write;
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};
use waypoint_runtime::{
    Command, CompiledGraph, InMemorySaver, InMemoryStore, Input, ListOptions, Message,
    MessagesState, MessagesStateUpdate, Outcome, RunConfig, StateSnapshot,
};
use waypoint_store::{Namespace, SearchOp, Store, StoreExt};

use crate::backend::{self, Kind, Open};

/// The database the demo uses unless `--url` says otherwise: a file in the current folder.
const DEFAULT_URL: &str = "sqlite:waypoint-demo.db";

/// Widest last message shown in a history table, in characters.
const MESSAGE_WIDTH: usize = 62;

/// What Alice says on her first thread.
const INTRODUCTION: &str = "Hi! I'm Alice. I love hiking in the Alps.";
/// The question Alice, then Bob, asks on a new thread.
const QUESTION: &str = "Where do I love to go hiking?";
/// Alice's request that needs a human's approval.
const REQUEST: &str = "Great, book me a hut there for next weekend.";
/// The answer the fork puts in place of the agent's recollection.
const REWRITTEN: &str = "You told me: \"I love hiking in the Dolomites\".";

/// Options of `waypoint demo`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Where threads and memories are kept: sqlite:PATH, postgres://..., redis://... or memory:.
    #[arg(long, default_value = DEFAULT_URL)]
    url: String,
    /// Print the demo agent's graph as Mermaid text (LangGraph's `draw_mermaid`) and an ASCII
    /// drawing, and exit without running the story or opening the database.
    #[arg(long)]
    draw: bool,
    /// The memories' embedder: `hashing:DIMS` (offline, no model) or `minilm:DIR`
    /// (all-MiniLM-L6-v2 run locally from DIR; needs the `minilm` feature).
    #[arg(
        long,
        value_name = "hashing:DIMS|minilm:DIR",
        default_value = "hashing:256"
    )]
    embed: String,
}

/// Prints one line to stdout (without any secret of the URL given), as an error (not a panic)
/// when stdout is gone.
macro_rules! say {
    ($($arg:tt)*) => {
        writeln!(std::io::stdout(), "{}", crate::secrets::scrub(&format!($($arg)*)))
            .context("cannot write to stdout")?
    };
}

/// Runs the demo.
pub(crate) async fn run(args: Args) -> Result<()> {
    if args.draw {
        say!("{}", drawing()?);
        return Ok(());
    }
    let url = args.url;
    let index = crate::inspect::store::parse_embed(&args.embed)?;
    let saver = backend::saver(&url, Open::Create).await?;
    let config = agent::store_config(index);
    let store: Arc<dyn Store> = backend::store(&url, config, Open::Create).await?;
    let graph = agent::build(saver, Arc::clone(&store)).context("cannot build the demo agent")?;
    let id: String = uuid::Uuid::new_v4()
        .simple()
        .to_string()
        .chars()
        .take(8)
        .collect();
    let demo = Demo {
        graph,
        store,
        embed: args.embed,
        alice_1: format!("demo-{id}-alice-1"),
        alice_2: format!("demo-{id}-alice-2"),
        bob_1: format!("demo-{id}-bob-1"),
        id,
    };
    let shown = crate::secrets::redact(&url);
    say!("Waypoint demo (run {}) on {shown}", demo.id);
    say!("A trip assistant built with waypoint-runtime. Its model is a stand-in: a few rules,");
    say!("no network, so every run tells the same story (only ids differ).");
    demo.memory().await.context("memory across threads")?;
    demo.approval().await.context("human in the loop")?;
    demo.time_travel().await.context("time travel")?;
    say!("");
    if is_persistent(&url) {
        say!("Everything above is kept in {shown}. Look around with:");
        if shown != url {
            say!("  (with the URL's password in place of ***)");
        }
        say!("  waypoint threads list --url {shown}");
        say!("  waypoint threads history {} --url {shown}", demo.alice_2);
        say!(
            "  waypoint store search demo.{}.alice \"hiking\" --embed {} --url {shown}",
            demo.id,
            demo.embed
        );
    } else {
        say!("Nothing was kept: {shown} lives as long as the process.");
    }
    Ok(())
}

/// The demo agent's graph as Mermaid text, then as ASCII (built on in-memory backends:
/// drawing needs no database).
fn drawing() -> Result<String> {
    let graph = agent::build(
        Arc::new(InMemorySaver::new()),
        Arc::new(InMemoryStore::new()),
    )
    .context("cannot build the demo agent")?;
    Ok(format!(
        "{}\n{}",
        graph.draw_mermaid(),
        graph.draw_ascii().trim_end()
    ))
}

/// Whether `url` names a database that outlives the process.
fn is_persistent(url: &str) -> bool {
    Kind::of(url).is_ok_and(|kind| kind != Kind::Memory) && url != "sqlite::memory:"
}

/// The agent, its store, and this run's id and thread ids.
struct Demo {
    graph: CompiledGraph<MessagesState>,
    store: Arc<dyn Store>,
    /// The `--embed` spec of the memories' embedder.
    embed: String,
    /// The run's id, part of every thread id and memory namespace.
    id: String,
    /// Alice introduces herself.
    alice_1: String,
    /// Alice asks, books a hut, and travels in time.
    alice_2: String,
    /// Bob asks what Alice asked.
    bob_1: String,
}

impl Demo {
    /// Section 1: a fact stated on one thread is recalled on another by semantic search, and
    /// only for its user.
    async fn memory(&self) -> Result<()> {
        section("1. Memory across threads")?;
        say!("Facts go to the long-term store, one namespace per user; a thread keeps only its");
        say!("own conversation.");
        say!("");
        say!("  thread {} (user alice)", self.alice_1);
        self.chat(&self.alice_1, "alice", INTRODUCTION).await?;
        let alice = agent::memories(&self.id, "alice");
        let mut kept = self.store.search(SearchOp::new(alice.clone())).await?;
        kept.sort_by(|a, b| a.key.cmp(&b.key));
        say!("  the store now holds, under {}:", joined(&alice));
        say!("    {:<28} value", "key");
        for item in &kept {
            say!(
                "    {:<28} {}",
                item.key,
                Value::Object((*item.value).clone())
            );
        }

        say!("");
        say!(
            "  thread {} (user alice, a new thread with no messages yet)",
            self.alice_2
        );
        self.chat(&self.alice_2, "alice", QUESTION).await?;
        let hits = self
            .store
            .search(SearchOp::new(alice.clone()).query(QUESTION))
            .await?;
        say!(
            "  the agent found it by semantic search (embedder {}):",
            self.embed
        );
        say!("    score  memory");
        for hit in &hits {
            let text = hit.value.get("text").and_then(Value::as_str).unwrap_or("");
            say!("    {:>5.2}  {text}", hit.score.unwrap_or_default());
        }

        say!("");
        say!("  thread {} (user bob)", self.bob_1);
        self.chat(&self.bob_1, "bob", QUESTION).await?;
        let bob = agent::memories(&self.id, "bob");
        let seen = self.store.search(SearchOp::new(bob.clone())).await?.len();
        say!(
            "  {} holds {seen} memories: Alice's facts stay hers.",
            joined(&bob)
        );
        Ok(())
    }

    /// Section 2: the agent proposes a booking and pauses; a scripted human edits it and
    /// resumes the run.
    async fn approval(&self) -> Result<()> {
        section("2. A human approves the booking")?;
        say!("The `book` node calls interrupt() before it runs the tool: the run stops, the");
        say!("thread keeps what is pending, and a Command::resume carries the answer back.");
        say!("");
        say!("  thread {} (user alice)", self.alice_2);
        self.chat(&self.alice_2, "alice", REQUEST).await?;
        self.pending(&self.alice_2).await?;
        say!("  the scripted human asks for two nights instead of one:");
        let decision = json!({"action": "edit", "args": {"nights": 2}});
        self.resume(&self.alice_2, "alice", decision).await
    }

    /// Section 3: the thread's history, a replay from a past checkpoint, and a fork that
    /// rewrites an earlier answer and so changes the outcome.
    async fn time_travel(&self) -> Result<()> {
        section("3. Time travel")?;
        say!("Every super-step is a checkpoint; any of them can be replayed or forked.");
        say!("");
        let history = self.history(&self.alice_2).await?;
        say!("  history of {}, newest first:", self.alice_2);
        say!(
            "    {:>4}  {:<6}  {:<9}  last message",
            "step",
            "source",
            "next"
        );
        for snapshot in &history {
            say!(
                "    {:>4}  {:<6}  {:<9}  {}",
                step(snapshot),
                source(snapshot),
                next(snapshot),
                clip(&last_message(snapshot, "alice"), MESSAGE_WIDTH)
            );
        }
        let Some(original) = history.first() else {
            bail!("thread {} has no history", self.alice_2);
        };

        // The checkpoint after the booking, where only the agent's summary is left to run.
        let booked = find(&history, |s| {
            s.next == ["agent"] && s.values.messages.last().is_some_and(|m| m.kind() == "tool")
        })?;
        say!("");
        say!(
            "  replay from step {}, checkpoint {}:",
            step(booked),
            checkpoint(booked)
        );
        say!("  the hut is booked already, so only `agent` runs again");
        let replayed = self
            .graph
            .invoke(None, &self.at("alice", booked))
            .await
            .context("the replay failed")?;
        if let Some(message) = replayed.messages.last() {
            self.print(message, "alice")?;
        }

        // The checkpoint that ended the first turn, holding the agent's recollection.
        let recalled = find(&history, |s| {
            s.next.is_empty() && s.values.messages.len() == 2
        })?;
        let Some(answer) = recalled.values.messages.last() else {
            bail!("the first turn of {} has no answer", self.alice_2);
        };
        say!("");
        say!(
            "  fork: update_state at step {}, checkpoint {},",
            step(recalled),
            checkpoint(recalled)
        );
        say!("  as `agent`, rewriting the answer it gave:");
        say!("    was    {}", answer.text());
        say!("    now    {REWRITTEN}");
        let mut rewritten = Message::ai(REWRITTEN);
        rewritten.set_id(answer.id().map(str::to_owned));
        let update = MessagesStateUpdate::default().messages(vec![rewritten]);
        self.graph
            .update_state(&self.at("alice", recalled), Some(update), Some("agent"))
            .await
            .context("the fork failed")?;
        say!("  the same request, continued from the fork:");
        self.chat(&self.alice_2, "alice", REQUEST).await?;
        self.pending(&self.alice_2).await?;
        say!("  the scripted human approves:");
        self.resume(&self.alice_2, "alice", json!({"action": "approve"}))
            .await?;

        let fork = self
            .graph
            .get_state(&self.config(&self.alice_2, "alice"))
            .await?;
        let kept = self.graph.get_state(&self.at("alice", original)).await?;
        say!("");
        say!("  two branches of one thread, both kept:");
        for (name, snapshot) in [("original", &kept), ("fork", &fork)] {
            say!(
                "    {name:<8}  step {:>2}  {}",
                step(snapshot),
                last_message(snapshot, "alice")
            );
        }
        let total = self.history(&self.alice_2).await?.len();
        say!("  {} now holds {total} checkpoints.", self.alice_2);
        Ok(())
    }

    /// The config of `user`'s runs on `thread`.
    fn config(&self, thread: &str, user: &str) -> RunConfig {
        RunConfig::thread(thread)
            .with(agent::USER, user)
            .with(agent::RUN, self.id.as_str())
    }

    /// The config of `user`'s runs at the checkpoint of `snapshot`.
    fn at(&self, user: &str, snapshot: &StateSnapshot<MessagesState>) -> RunConfig {
        let thread = snapshot.config.thread_id.as_deref().unwrap_or_default();
        let config = self.config(thread, user);
        match &snapshot.config.checkpoint_id {
            Some(id) => config.at(id.as_str()),
            None => config,
        }
    }

    /// `user` says `text` on `thread`; prints the conversation it adds.
    async fn chat(&self, thread: &str, user: &str, text: &str) -> Result<Outcome<MessagesState>> {
        let update = MessagesStateUpdate::default().messages(vec![Message::human(text)]);
        self.turn(thread, user, Some(update)).await
    }

    /// Resumes the pending interrupt of `thread` with `decision`; prints what follows.
    async fn resume(&self, thread: &str, user: &str, decision: Value) -> Result<()> {
        say!("    Command::resume({decision})");
        let outcome = self.turn(thread, user, Command::resume(decision)).await?;
        if outcome.interrupted {
            bail!("thread {thread} paused again after its resume");
        }
        Ok(())
    }

    /// Runs `input` on `thread` and prints the messages the run added.
    async fn turn(
        &self,
        thread: &str,
        user: &str,
        input: impl Into<Input<MessagesState>>,
    ) -> Result<Outcome<MessagesState>> {
        let config = self.config(thread, user);
        let before = self.graph.get_state(&config).await?.values.messages.len();
        let outcome = self
            .graph
            .invoke(input, &config)
            .await
            .with_context(|| format!("the run on thread {thread} failed"))?;
        for message in outcome.messages.iter().skip(before) {
            self.print(message, user)?;
        }
        Ok(outcome)
    }

    /// Prints what `thread` is paused on, as its latest checkpoint records it.
    async fn pending(&self, thread: &str) -> Result<()> {
        let snapshot = self.graph.get_state(&RunConfig::thread(thread)).await?;
        let Some(interrupt) = snapshot.interrupts.first() else {
            bail!("thread {thread} did not pause for approval");
        };
        say!("  paused, waiting for a human:");
        say!("    next       {}", next(&snapshot));
        say!("    interrupt  {}", interrupt.id);
        match &interrupt.value {
            Value::Object(fields) => {
                let mut label = "value";
                for (key, value) in fields {
                    say!("    {label:<10} {key:<11}  {value}");
                    label = "";
                }
            }
            value => say!("    value      {value}"),
        }
        Ok(())
    }

    /// Prints one message of the conversation, named after its speaker.
    fn print(&self, message: &Message, user: &str) -> Result<()> {
        say!("    {:<6} {}", speaker(message, user), message.text());
        for call in message.tool_calls() {
            say!("    {:<6} calls {} {}", "", call.name, call.args);
        }
        Ok(())
    }

    /// Every checkpoint of `thread`, newest first.
    async fn history(&self, thread: &str) -> Result<Vec<StateSnapshot<MessagesState>>> {
        Ok(self
            .graph
            .get_state_history(&RunConfig::thread(thread), &ListOptions::default())
            .await?)
    }
}

/// Prints a section heading.
fn section(title: &str) -> Result<()> {
    say!("");
    say!("{title}");
    say!("{}", "-".repeat(title.len()));
    Ok(())
}

/// Who said `message`: the user, the agent or the tool.
fn speaker<'a>(message: &Message, user: &'a str) -> &'a str {
    match message.kind() {
        "human" => user,
        "ai" => "agent",
        "tool" => "tool",
        _ => "other",
    }
}

/// The first snapshot of `history` that `wanted` accepts.
fn find(
    history: &[StateSnapshot<MessagesState>],
    wanted: impl Fn(&StateSnapshot<MessagesState>) -> bool,
) -> Result<&StateSnapshot<MessagesState>> {
    history
        .iter()
        .find(|s| wanted(s))
        .context("the thread's history lacks a checkpoint the demo expects")
}

/// A namespace as stored: its labels joined by dots.
fn joined(labels: &[String]) -> String {
    Namespace::new(labels.iter().cloned()).joined()
}

/// The step of a snapshot.
fn step(snapshot: &StateSnapshot<MessagesState>) -> i64 {
    snapshot.metadata.step.unwrap_or_default()
}

/// The checkpoint id of a snapshot.
fn checkpoint(snapshot: &StateSnapshot<MessagesState>) -> &str {
    snapshot.config.checkpoint_id.as_deref().unwrap_or("-")
}

/// Why a snapshot's checkpoint was written: input, loop, update or fork.
fn source(snapshot: &StateSnapshot<MessagesState>) -> String {
    snapshot
        .metadata
        .source
        .map(|s| format!("{s:?}").to_lowercase())
        .unwrap_or_else(|| "-".into())
}

/// The nodes a snapshot runs next, or `-` when its run is done.
fn next(snapshot: &StateSnapshot<MessagesState>) -> String {
    if snapshot.next.is_empty() {
        return "-".into();
    }
    snapshot.next.join(",")
}

/// The last message of a snapshot and who said it.
fn last_message(snapshot: &StateSnapshot<MessagesState>, user: &str) -> String {
    match snapshot.values.messages.last() {
        Some(message) => format!("{}: {}", speaker(message, user), message.text()),
        None => "-".into(),
    }
}

/// `text` cut to `width` characters, marked with `...` when cut.
fn clip(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut short: String = text.chars().take(width.saturating_sub(3)).collect();
    short.push_str("...");
    short
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_databases_outliving_the_process_get_the_inspection_hint() {
        assert!(is_persistent("sqlite:waypoint-demo.db"));
        assert!(is_persistent("postgres://h/db"));
        assert!(!is_persistent("memory:"));
        assert!(!is_persistent("sqlite::memory:"));
    }

    #[test]
    fn the_agent_draws_as_langgraph_would() -> Result<()> {
        let drawing = drawing()?;
        let (mermaid, ascii) = drawing.split_once("\n\n").context("two drawings")?;
        assert_eq!(
            mermaid,
            "---\nconfig:\n  flowchart:\n    curve: linear\n---\ngraph TD;\n\
             \t__start__([<p>__start__</p>]):::first\n\
             \tremember(remember)\n\
             \tagent(agent)\n\
             \tbook(book)\n\
             \t__end__([<p>__end__</p>]):::last\n\
             \t__start__ --> remember;\n\
             \tagent -.-> __end__;\n\
             \tagent -.-> book;\n\
             \tbook --> agent;\n\
             \tremember --> agent;\n\
             \tclassDef default fill:#f2f0ff,line-height:1.2\n\
             \tclassDef first fill-opacity:0\n\
             \tclassDef last fill:#bfb6fc"
        );
        assert!(ascii.contains("| remember |") && ascii.ends_with("    book --> agent"));
        Ok(())
    }
}
