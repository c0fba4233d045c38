//! Streaming a graph with its subgraphs (LangGraph's `stream(..., subgraphs=True)`): every
//! item says where it came from, `()` for the graph itself and `("writer:<task id>",)` for
//! the subgraph its `writer` node runs; `messages` mode carries the tokens the subgraph's
//! node streams, then the node's update follows.
//!
//! `cargo run -p waypoint-runtime --example subgraph_stream`

use std::sync::Arc;

use futures::StreamExt;
use waypoint_checkpoint::InMemorySaver;
use waypoint_runtime::messages::AiMessageChunk;
use waypoint_runtime::{
    BoxError, CompileOptions, Context, Message, MessagesState, MessagesStateUpdate, RunConfig,
    START, StateGraph, StreamMode,
};

/// Streams a reply token by token, then returns it whole under the same id.
async fn draft(_: Arc<MessagesState>, ctx: Context) -> Result<MessagesStateUpdate, BoxError> {
    let words = ["Roses ", "are ", "red."];
    for word in words {
        ctx.stream_message(AiMessageChunk::new(word).with_id("draft-1"));
    }
    let reply = Message::ai(words.concat()).with_id("draft-1");
    Ok(MessagesStateUpdate::default().messages(vec![reply]))
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut writer = StateGraph::<MessagesState>::new();
    writer.add_node("draft", draft).add_edge(START, "draft");
    let writer = writer.compile(CompileOptions::default())?;

    let mut graph = StateGraph::<MessagesState>::new();
    graph
        .add_subgraph("writer", writer)
        .add_edge(START, "writer");
    let graph = graph.compile(CompileOptions::with_checkpointer(InMemorySaver::new()))?;

    let input = MessagesStateUpdate::default().messages(vec![Message::human("a poem?")]);
    let modes = [StreamMode::Updates, StreamMode::Messages];
    let mut stream = Box::pin(graph.stream_subgraphs(Some(input), &RunConfig::thread("t"), &modes));
    let mut printed = Vec::new();
    while let Some(part) = stream.next().await {
        let part = part?;
        let data = serde_json::to_value(&part)?["data"].clone();
        let line = format!(
            "({:?}, {:?}, {data})",
            part.namespace(),
            part.mode().as_str()
        );
        println!("{line}");
        printed.push((part.namespace().len(), part.mode()));
    }
    assert_eq!(
        printed,
        [
            (1, StreamMode::Messages),
            (1, StreamMode::Messages),
            (1, StreamMode::Messages),
            (1, StreamMode::Updates),
            (0, StreamMode::Updates),
        ]
    );
    Ok(())
}
