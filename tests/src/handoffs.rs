//! Handoffs between agents built as subgraphs (guide "Multi-agent Systems", Handoffs): a
//! node inside a subgraph returns `Command.PARENT`, the subgraph stops and the parent
//! applies the update and goes to `goto`.

use std::sync::Arc;

use futures::StreamExt;
use waypoint_checkpoint::CheckpointSaver;
use waypoint_runtime::{
    Command, CompileOptions, CompiledGraph, Context, Error, Message, MessagesState,
    MessagesStateUpdate, RunConfig, START, StateGraph, StreamMode, StreamPart,
};

use crate::{TestResult, thread};

type Saver = Arc<dyn CheckpointSaver>;

/// An agent subgraph with one node, `name`: it answers, then hands off to `next` in the
/// parent graph with its answer as the update (or ends when `next` is `None`).
fn agent(
    name: &'static str,
    next: Option<&'static str>,
) -> waypoint_runtime::Result<CompiledGraph<MessagesState>> {
    let mut graph = StateGraph::<MessagesState>::new();
    graph.add_node(
        name,
        move |state: Arc<MessagesState>, _ctx: Context| async move {
            let heard = state.messages.len();
            let reply = Message::ai(format!("{name} heard {heard}")).with_name(name);
            let update = MessagesStateUpdate::default().messages(vec![reply]);
            Ok::<_, waypoint_runtime::BoxError>(match next {
                Some(next) => Command::to_parent(next).with_update(update),
                None => Command::update(update),
            })
        },
    );
    graph.add_edge(START, name);
    graph.compile(CompileOptions::default())
}

/// The parent: `alice` and `bob` as subgraph nodes, `alice` first, handing off to `to`.
fn team(saver: &Saver, to: &'static str) -> waypoint_runtime::Result<CompiledGraph<MessagesState>> {
    let mut graph = StateGraph::<MessagesState>::new();
    graph
        .add_subgraph("alice", agent("alice", Some(to))?)
        .add_subgraph("bob", agent("bob", None)?)
        .add_destinations("alice", ["bob"])
        .add_edge(START, "alice");
    graph.compile(CompileOptions::default().checkpointer(Arc::clone(saver)))
}

fn ask() -> Option<MessagesStateUpdate> {
    Some(MessagesStateUpdate::default().messages(vec![Message::human("what is 6 x 7?")]))
}

/// Alice hands off to Bob with `Command.PARENT`: the parent applies her update (through
/// its `add_messages`) as the `alice` node's, runs `bob` next, and Bob sees her answer; the
/// thread's checkpoints say so, and a second run on the thread hands off again.
pub async fn subgraph_hands_off_to_parent_node(saver: Saver) -> TestResult {
    let graph = team(&saver, "bob")?;
    let config = RunConfig::thread(thread());
    let parts: Vec<_> = graph
        .stream(ask(), &config, &[StreamMode::Updates])
        .collect()
        .await;
    let mut updates = Vec::new();
    for part in parts {
        if let StreamPart::Updates { node, update } = part? {
            let texts: Vec<String> = update
                .iter()
                .flat_map(|u| u.messages.iter().flatten())
                .map(Message::text)
                .collect();
            updates.push((node, texts));
        }
    }
    assert_eq!(
        updates,
        [
            ("alice".to_owned(), vec!["alice heard 1".to_owned()]),
            (
                "bob".to_owned(),
                vec![
                    "what is 6 x 7?".to_owned(),
                    "alice heard 1".to_owned(),
                    "bob heard 2".to_owned()
                ]
            ),
        ]
    );
    let state = graph.get_state(&config).await?;
    let texts: Vec<String> = state.values.messages.iter().map(Message::text).collect();
    assert_eq!(texts, ["what is 6 x 7?", "alice heard 1", "bob heard 2"]);
    assert!(state.next.is_empty());
    let history = graph
        .get_state_history(&config, &waypoint_checkpoint::ListOptions::default())
        .await?;
    let nexts: Vec<Vec<String>> = history.iter().rev().map(|s| s.next.clone()).collect();
    assert_eq!(
        nexts,
        [
            vec!["__start__".to_owned()],
            vec!["alice".to_owned()],
            vec!["bob".to_owned()],
            vec![]
        ]
    );

    let again = graph
        .invoke(
            Some(MessagesStateUpdate::default().messages(vec![Message::human("and 7 x 8?")])),
            &config,
        )
        .await?;
    let texts: Vec<String> = again.values.messages.iter().map(Message::text).collect();
    assert_eq!(texts[3..], ["and 7 x 8?", "alice heard 4", "bob heard 5"]);
    Ok(())
}

/// Bad input: `Command.PARENT` from a root graph and a handoff to a node the parent does
/// not have are clear errors, and the run stops there.
pub async fn bad_handoffs_are_clear_errors(saver: Saver) -> TestResult {
    // A root graph has no parent.
    let mut root = StateGraph::<MessagesState>::new();
    root.add_node(
        "alice",
        |_s: Arc<MessagesState>, _ctx: Context| async move {
            Ok::<_, waypoint_runtime::BoxError>(Command::<MessagesState>::to_parent("bob"))
        },
    );
    root.add_edge(START, "alice");
    let root = root.compile(CompileOptions::default().checkpointer(Arc::clone(&saver)))?;
    let err = root
        .invoke(ask(), &RunConfig::thread(thread()))
        .await
        .expect_err("no parent to go to");
    assert!(
        matches!(&err, Error::InvalidUpdate(m)
            if m.contains("node `alice` returned a Command for the parent graph")
                && m.contains("has no parent")),
        "{err}"
    );

    // The parent has no `carol`.
    let graph = team(&saver, "carol")?;
    let config = RunConfig::thread(thread());
    let err = graph
        .invoke(ask(), &config)
        .await
        .expect_err("carol is not a node");
    assert!(
        matches!(&err, Error::InvalidUpdate(m)
            if m.contains("`alice` routed to `carol`, which is not a node of this graph")),
        "{err}"
    );
    let state = graph.get_state(&config).await?;
    assert_eq!(state.next, ["alice"], "the failed step is not committed");
    Ok(())
}
