//! Human in the loop: `interrupt()`, resuming with `Command::resume`, static breakpoints.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Map, Value, json};
use waypoint_checkpoint::CheckpointSaver;
use waypoint_runtime::{
    Command, CompileOptions, CompiledGraph, Context, END, Error, JsonSchema, JsonState, NodeResult,
    RunConfig, START, StateGraph, StreamMode, StreamPart,
};

use crate::graphs::{Calls, logging_node};
use crate::{TestResult, obj, thread};

type Saver = Arc<dyn CheckpointSaver>;

/// `ask` interrupts with a question and stores the answer; `after` logs that it ran.
fn ask_graph(
    saver: Saver,
    calls: &Calls,
    options: CompileOptions,
) -> waypoint_runtime::Result<CompiledGraph<JsonState>> {
    let mut graph = StateGraph::json(
        JsonSchema::new()
            .last_value("answer")
            .append("log")
            .last_value("last")
            .last_value("note"),
    );
    graph.add_node("ask", {
        let calls = calls.clone();
        move |state: JsonState, ctx: Context| {
            calls.hit("ask");
            async move {
                let question = match state.get("note") {
                    Some(note) => json!({"question": "name?", "note": note}),
                    None => json!({"question": "name?"}),
                };
                let answer = ctx.interrupt(question)?;
                Ok(obj(json!({"answer": answer, "log": ["ask"]})))
            }
        }
    });
    graph.add_node("after", logging_node(calls));
    graph
        .add_edge(START, "ask")
        .add_edge("ask", "after")
        .add_edge("after", END);
    graph.compile(options.checkpointer(saver))
}

/// An interrupt pauses the run (an outcome, not an error) and shows in `get_state`; resuming
/// re-runs the node from its start, where `interrupt` returns the resume value.
pub async fn interrupt_pauses_and_resumes(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let graph = ask_graph(saver, &calls, CompileOptions::default())?;
    let config = RunConfig::thread(thread());
    let out = graph.invoke(Some(obj(json!({"log": []}))), &config).await?;
    assert!(out.interrupted);
    assert_eq!(out.interrupts.len(), 1);
    assert_eq!(out.interrupts[0].value, json!({"question": "name?"}));
    assert!(out.get("answer").is_none());

    let snap = graph.get_state(&config).await?;
    assert_eq!(snap.next, vec!["ask"]);
    assert_eq!(snap.tasks[0].interrupts, out.interrupts);
    assert_eq!(snap.interrupts, out.interrupts);
    assert_eq!(calls.get("ask"), 1);

    let out = graph.invoke(Command::resume("Ada"), &config).await?;
    assert!(!out.interrupted);
    assert_eq!(out.get("answer"), Some(&json!("Ada")));
    assert_eq!(out.get("log"), Some(&json!(["ask", "after"])));
    assert_eq!(calls.get("ask"), 2, "the node restarts from its beginning");
    assert_eq!(calls.get("after"), 1);
    assert!(graph.get_state(&config).await?.interrupts.is_empty());
    Ok(())
}

/// The interrupt reaches the stream as an `__interrupt__` event.
pub async fn interrupt_is_streamed(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let graph = ask_graph(saver, &calls, CompileOptions::default())?;
    let config = RunConfig::thread(thread());
    let parts: Vec<_> = graph
        .stream(Some(obj(json!({}))), &config, &[StreamMode::Updates])
        .collect()
        .await;
    let interrupts: Vec<_> = parts
        .iter()
        .filter_map(|p| match p {
            Ok(StreamPart::Interrupt(i)) => Some(i.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(interrupts.len(), 1);
    assert_eq!(interrupts[0][0].value, json!({"question": "name?"}));
    let parts: Vec<_> = graph
        .stream(Command::resume("Bo"), &config, &[StreamMode::Updates])
        .collect()
        .await;
    let nodes: Vec<String> = parts
        .iter()
        .filter_map(|p| match p {
            Ok(StreamPart::Updates { node, .. }) => Some(node.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(nodes, vec!["ask", "after"]);
    Ok(())
}

/// Several interrupts in one node are answered in order: the k-th call gets the k-th value.
pub async fn interrupts_match_resume_values_by_index(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let mut graph = StateGraph::json(JsonSchema::new().last_value("answers"));
    graph.add_node("form", {
        let calls = calls.clone();
        move |_s: JsonState, ctx: Context| {
            calls.hit("form");
            async move {
                let first = ctx.interrupt("first?")?;
                let second = ctx.interrupt("second?")?;
                let third = ctx.interrupt("third?")?;
                Ok(obj(json!({"answers": [first, second, third]})))
            }
        }
    });
    graph.add_edge(START, "form");
    let graph = graph.compile(CompileOptions::default().checkpointer(saver))?;
    let config = RunConfig::thread(thread());
    let out = graph.invoke(Some(obj(json!({}))), &config).await?;
    assert_eq!(out.interrupts[0].value, json!("first?"));
    let out = graph.invoke(Command::resume(1), &config).await?;
    assert_eq!(out.interrupts[0].value, json!("second?"));
    let out = graph.invoke(Command::resume(2), &config).await?;
    assert_eq!(out.interrupts[0].value, json!("third?"));
    let out = graph.invoke(Command::resume(3), &config).await?;
    assert!(!out.interrupted);
    assert_eq!(out.get("answers"), Some(&json!([1, 2, 3])));
    assert_eq!(calls.get("form"), 4);
    Ok(())
}

/// The validation loop: ask again until the answer is valid.
pub async fn validation_loop_asks_until_valid(saver: Saver) -> TestResult {
    let mut graph = StateGraph::json(JsonSchema::new().last_value("age"));
    graph.add_node("age", |_s: JsonState, ctx: Context| async move {
        let mut question = "How old are you?".to_owned();
        let age = loop {
            let answer = ctx.interrupt(&question)?;
            match answer.as_u64() {
                Some(age) if age > 0 => break age,
                _ => question = format!("'{answer}' is not a valid age. How old are you?"),
            }
        };
        Ok(obj(json!({"age": age})))
    });
    graph.add_edge(START, "age");
    let graph = graph.compile(CompileOptions::default().checkpointer(saver))?;
    let config = RunConfig::thread(thread());
    let out = graph.invoke(Some(obj(json!({}))), &config).await?;
    assert_eq!(out.interrupts[0].value, json!("How old are you?"));
    let out = graph.invoke(Command::resume("thirty"), &config).await?;
    assert_eq!(
        out.interrupts[0].value,
        json!("'\"thirty\"' is not a valid age. How old are you?")
    );
    let out = graph.invoke(Command::resume(-1), &config).await?;
    assert!(out.interrupted);
    let out = graph.invoke(Command::resume(30), &config).await?;
    assert!(!out.interrupted);
    assert_eq!(out.get("age"), Some(&json!(30)));
    Ok(())
}

/// `Command { resume, update }` applies the update before the node runs again.
pub async fn resume_with_update_applies_it_first(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let graph = ask_graph(saver, &calls, CompileOptions::default())?;
    let config = RunConfig::thread(thread());
    graph.invoke(Some(obj(json!({}))), &config).await?;
    let mut command = Command::resume("Cy");
    command.update = Some(obj(json!({"note": "edited"})));
    let out = graph.invoke(command, &config).await?;
    assert_eq!(out.get("note"), Some(&json!("edited")));
    assert_eq!(out.get("answer"), Some(&json!("Cy")));
    // The note was in the state when `ask` ran again.
    let history = graph
        .get_state_history(&config, &Default::default())
        .await?;
    assert_eq!(history[0].values.get("note"), Some(&json!("edited")));
    Ok(())
}

/// Static breakpoints: before a node at compile time, after a node per run; continuing with
/// no input goes on from there.
pub async fn static_breakpoints_pause_and_continue(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let build = |before: &[&str]| {
        let mut graph = StateGraph::json(JsonSchema::new().append("log").last_value("last"));
        for name in ["a", "b", "c"] {
            graph.add_node(name, logging_node(&calls));
        }
        graph
            .add_edge(START, "a")
            .add_edge("a", "b")
            .add_edge("b", "c");
        let options = CompileOptions {
            interrupt_before: before.iter().map(|s| s.to_string()).collect(),
            ..CompileOptions::default()
        };
        graph.compile(options.checkpointer(Arc::clone(&saver)))
    };
    let graph = build(&["b"])?;
    let config = RunConfig::thread(thread());
    let out = graph.invoke(Some(obj(json!({}))), &config).await?;
    assert!(out.interrupted && out.interrupts.is_empty());
    assert_eq!(out.get("log"), Some(&json!(["a"])));
    assert_eq!(graph.get_state(&config).await?.next, vec!["b"]);
    let out = graph.invoke(None, &config).await?;
    assert!(!out.interrupted);
    assert_eq!(out.get("log"), Some(&json!(["a", "b", "c"])));

    // Per run, after `a` (the compiled breakpoint is replaced).
    let config = RunConfig::thread(thread()).interrupt_after(["a"]);
    let out = graph.invoke(Some(obj(json!({}))), &config).await?;
    assert!(out.interrupted);
    assert_eq!(out.get("log"), Some(&json!(["a"])));
    assert_eq!(graph.get_state(&config).await?.next, vec!["b"]);
    let out = graph.invoke(None, &config).await?;
    assert_eq!(out.get("log"), Some(&json!(["a", "b", "c"])));
    assert_eq!((calls.get("a"), calls.get("b"), calls.get("c")), (2, 2, 2));
    Ok(())
}

/// `update_state(config, None, as_node)` on a node paused by `interrupt` skips it.
pub async fn update_state_skips_interrupted_node(saver: Saver) -> TestResult {
    let calls = Calls::default();
    let graph = ask_graph(saver, &calls, CompileOptions::default())?;
    let config = RunConfig::thread(thread());
    graph.invoke(Some(obj(json!({}))), &config).await?;
    graph.update_state(&config, None, Some("ask")).await?;
    let snap = graph.get_state(&config).await?;
    assert_eq!(snap.next, vec!["after"]);
    assert!(snap.interrupts.is_empty());
    let out = graph.invoke(None, &config).await?;
    assert!(!out.interrupted);
    assert_eq!(out.get("log"), Some(&json!(["after"])));
    assert_eq!((calls.get("ask"), calls.get("after")), (1, 1));
    Ok(())
}

/// Two interrupted tasks: a single resume value is ambiguous; resuming by id answers each.
pub async fn parallel_interrupts_resume_by_id(saver: Saver) -> TestResult {
    async fn ask(_: JsonState, ctx: Context) -> NodeResult<Map<String, Value>> {
        let answer = ctx.interrupt(format!("{}?", ctx.node()))?;
        let answer = answer.as_str().unwrap_or("?");
        Ok(obj(
            json!({"answers": [format!("{}={answer}", ctx.node())]}),
        ))
    }
    let mut graph = StateGraph::json(JsonSchema::new().append("answers"));
    graph.add_node("left", ask).add_node("right", ask);
    graph.add_edge(START, "left").add_edge(START, "right");
    let graph = graph.compile(CompileOptions::default().checkpointer(saver))?;
    let config = RunConfig::thread(thread());
    let out = graph.invoke(Some(obj(json!({}))), &config).await?;
    assert_eq!(out.interrupts.len(), 2);
    let err = graph.invoke(Command::resume("x"), &config).await;
    assert!(matches!(err, Err(Error::InvalidUpdate(_))), "{err:?}");
    let answers = out.interrupts.iter().map(|i| {
        (
            i.id.clone(),
            json!(i.value.as_str().unwrap_or("?").trim_end_matches('?')),
        )
    });
    let out = graph
        .invoke(Command::resume_by_id(answers), &config)
        .await?;
    assert!(!out.interrupted, "{:?}", out.interrupts);
    let mut got: Vec<String> =
        serde_json::from_value(out.get("answers").cloned().unwrap_or_default())?;
    got.sort();
    assert_eq!(got, vec!["left=left", "right=right"]);
    Ok(())
}
