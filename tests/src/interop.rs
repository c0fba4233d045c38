//! Interop with a real Python LangGraph app on one PostgreSQL database, both ways.
//!
//! `tests/interop/app.py` is a LangGraph app (a `MessagesState` ReAct loop with `ToolNode`, a
//! subgraph fanning out with `Send`, `interrupt()` in the parent and in the subgraph, a
//! pydantic model, a dataclass and plain str/int fields in the state) run through its JSON
//! command line ([`PyApp`]). This module holds the same graph over Waypoint's runtime
//! ([`agent_graph`]: same node names, channels and reducers, the same deterministic fake
//! model) on a default-config [`PostgresSaver`], and the views both sides give of a state
//! (each Python object as `{"module", "class", "dump"}`), so a test can compare them field by
//! field after every hop.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command as Process, Stdio};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use waypoint_checkpoint::CheckpointSaver;
use waypoint_checkpoint_postgres::PostgresSaver;
use waypoint_runtime::{
    BoxError, Command, CompileOptions, CompiledGraph, Context, END, JsonSchema, JsonState,
    ListOptions, Message, NodeResult, Outcome, Route, RunConfig, START, Send, State, StateGraph,
    StateSnapshot,
};
use waypoint_test_kit::{database_url, fresh_name};

/// What the helpers return.
pub type Result<T, E = BoxError> = std::result::Result<T, E>;

/// The Python module the app's classes live in (`app.Profile`, `app.Note`).
pub const APP_MODULE: &str = "app";
/// How many workers `research` fans out to (the app's `WORKERS`).
pub const WORKERS: i64 = 3;

// ---------------------------------------------------------------------------------------
// Where the test runs: servers, databases, interpreters

/// A new, empty database on the server of `WAYPOINT_TEST_POSTGRES_URL`, and its URL.
pub async fn fresh_database(server: &str) -> Result<String> {
    let name = fresh_name("interop_lg");
    let admin = sqlx::PgPool::connect(server).await?;
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&admin)
        .await?;
    admin.close().await;
    Ok(database_url(server, &name))
}

/// Drops the database of `url` (made by [`fresh_database`] on `server`), ending its
/// sessions; a failure is only printed: the database is a leftover, not a wrong result.
pub async fn drop_database(server: &str, url: &str) {
    let address = url.split_once('?').map_or(url, |(a, _)| a);
    let Some((_, name)) = address.rsplit_once('/') else {
        return;
    };
    if !name.starts_with("interop_lg_") {
        return;
    }
    let dropped = async {
        let admin = sqlx::PgPool::connect(server).await?;
        sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .execute(&admin)
            .await?;
        admin.close().await;
        Ok::<_, sqlx::Error>(())
    };
    if let Err(e) = dropped.await {
        eprintln!("could not drop the test database {name}: {e}");
    }
}

/// Waypoint's saver on `url`, in its default configuration, set up.
pub async fn waypoint_saver(url: &str) -> Result<Arc<dyn CheckpointSaver>> {
    let saver = PostgresSaver::from_url(url).await?;
    saver.setup().await?;
    Ok(Arc::new(saver))
}

/// The app's file.
pub fn app_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("interop/app.py")
}

// ---------------------------------------------------------------------------------------
// The Python side

/// The Python app, started once (`app.py --serve`) and sent one JSON command per line.
pub struct PyApp {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr: PathBuf,
    url: String,
    /// Which interpreter (for messages).
    pub python: String,
}

impl PyApp {
    /// Starts the app with `python` on the database at `url`.
    pub fn start(python: &str, url: &str) -> Result<PyApp> {
        let stderr =
            std::env::temp_dir().join(format!("{}.stderr", fresh_name("waypoint_interop")));
        let mut child = Process::new(python)
            .arg(app_path())
            .arg("--serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr)?)
            .spawn()
            .map_err(|e| format!("cannot start {python}: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        Ok(PyApp {
            child,
            stdin,
            stdout,
            stderr,
            url: url.to_owned(),
            python: python.to_owned(),
        })
    }

    /// Sends `command` (with the database URL added) and returns the answer; an answer
    /// with `error` is an error carrying Python's traceback.
    pub fn call(&mut self, mut command: Value) -> Result<Value> {
        if let Value::Object(map) = &mut command {
            map.entry("url").or_insert_with(|| json!(self.url));
        }
        let line = tokio::task::block_in_place(|| -> Result<String> {
            writeln!(self.stdin, "{command}")?;
            self.stdin.flush()?;
            let mut line = String::new();
            self.stdout.read_line(&mut line)?;
            Ok(line)
        })?;
        if line.trim().is_empty() {
            return Err(format!(
                "the Python app ended without answering {}\n{}",
                command["cmd"],
                self.stderr_tail()
            )
            .into());
        }
        let answer: Value = serde_json::from_str(&line)?;
        if let Some(error) = answer.get("error") {
            return Err(format!(
                "Python ({}) failed on {}: {}\n{}",
                self.python,
                command["cmd"],
                error.as_str().unwrap_or_default(),
                answer["traceback"].as_str().unwrap_or_default()
            )
            .into());
        }
        Ok(answer)
    }

    /// The last lines Python wrote to stderr.
    fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// LangGraph's `PostgresSaver.setup()`.
    pub fn setup(&mut self) -> Result<()> {
        self.call(json!({"cmd": "setup"})).map(drop)
    }

    /// Runs the agent graph on `thread` with `input` (see [`input`]); returns
    /// `{"values", "next", "interrupts"}`.
    pub fn invoke(&mut self, thread: &str, input: &Value) -> Result<Value> {
        self.call(json!({"cmd": "invoke", "thread": thread, "input": input}))
    }

    /// Resumes `thread` with `Command(resume=value)`.
    pub fn resume(&mut self, thread: &str, value: &Value) -> Result<Value> {
        self.call(json!({"cmd": "resume", "thread": thread, "value": value}))
    }

    /// `get_state(subgraphs=True)` of `thread`, with Python's `==` of the state's profile
    /// and note against `expect` (`{"profile": kwargs, "note": kwargs}`).
    pub fn get_state(&mut self, thread: &str, expect: Option<&Value>) -> Result<Value> {
        let mut command = json!({"cmd": "get_state", "thread": thread, "subgraphs": true});
        if let Some(expect) = expect {
            command["expect"] = expect.clone();
        }
        self.call(command)
    }

    /// The pending interrupts of `thread`, its subgraphs' included: `[{"id", "value"}]`.
    pub fn interrupts(&mut self, thread: &str) -> Result<Value> {
        let answer = self.call(json!({"cmd": "interrupts", "thread": thread}))?;
        Ok(answer["interrupts"].clone())
    }

    /// `get_state_history` of `thread`, newest first.
    pub fn history(&mut self, thread: &str) -> Result<Vec<Value>> {
        let answer = self.call(json!({"cmd": "history", "thread": thread}))?;
        Ok(answer["history"].as_array().cloned().unwrap_or_default())
    }
}

impl Drop for PyApp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.stderr);
    }
}

/// Runs one command through a new Python process (`app.py '<json>'`), blocking.
pub fn run_once(python: &str, url: &str, mut command: Value) -> Result<Value> {
    command["url"] = json!(url);
    let output = Process::new(python)
        .arg(app_path())
        .arg(command.to_string())
        .output()?;
    let answer: Value = serde_json::from_slice(&output.stdout).map_err(|e| {
        format!(
            "Python answered no JSON ({e}):\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    if let Some(error) = answer.get("error") {
        return Err(format!("Python failed: {error}\n{}", answer["traceback"]).into());
    }
    Ok(answer)
}

// ---------------------------------------------------------------------------------------
// The Rust side: the same graphs

/// The parent graph's state (the app's `AgentState`).
#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentState {
    /// The conversation.
    #[reducer(add_messages)]
    pub messages: Vec<Message>,
    /// What to research (a str: LangGraph stores it inline in the checkpoint row).
    pub topic: Option<String>,
    /// Finished turns (an int, inline too).
    pub turns: Option<i64>,
    /// `app.Profile`, a pydantic v2 model, as its `lc: 2` form.
    pub profile: Option<Value>,
    /// `app.Note`, a dataclass, as its `lc: 2` form.
    pub note: Option<Value>,
    /// The nodes that ran (`operator.add`).
    #[reducer(append)]
    pub log: Vec<String>,
    /// The subgraph's sorted drafts.
    pub findings: Option<Vec<String>>,
    /// The answer to the subgraph's question.
    pub approved: Option<String>,
    /// The answer to the parent's question.
    pub verdict: Option<String>,
}

/// The subgraph's state (the app's `ResearchState`).
#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ResearchState {
    /// Shared with the parent.
    pub topic: Option<String>,
    /// A worker's item (only in `Send` arguments).
    pub item: Option<i64>,
    /// What the plan and the workers wrote (`operator.add`).
    #[reducer(append)]
    pub drafts: Vec<String>,
    /// Shared with the parent.
    pub findings: Option<Vec<String>>,
    /// Shared with the parent.
    pub approved: Option<String>,
}

/// The concurrent-writers graph's state (the app's `CounterState`).
#[derive(State, Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CounterState {
    /// Runs so far.
    pub turns: Option<i64>,
    /// Who ran (`operator.add`).
    #[reducer(append)]
    pub log: Vec<String>,
}

/// A Python object of this app's module in the form LangGraph's encoding reads and writes.
pub fn py_object(ext: u8, class: &str, kwargs: Value) -> Value {
    json!({
        "lc": 2,
        "type": "constructor",
        "id": [APP_MODULE, class],
        "ext": ext,
        "method": if ext == 5 { json!("model_validate_json") } else { Value::Null },
        "args": [],
        "kwargs": kwargs,
    })
}

/// `app.Profile(**kwargs)` (pydantic v2: msgpack extension 5).
pub fn profile(kwargs: Value) -> Value {
    py_object(5, "Profile", kwargs)
}

/// `app.Note(**kwargs)` (a dataclass: msgpack extension 2).
pub fn note(kwargs: Value) -> Value {
    py_object(2, "Note", kwargs)
}

/// The keyword arguments of a Python object's `lc: 2` form.
pub fn kwargs_of(object: &Value) -> Option<&Map<String, Value>> {
    object.get("kwargs").and_then(Value::as_object)
}

/// The fake model's answer to a conversation (the app's `reply`): two tool calls for a
/// human message, a final answer after tool results. Built from LangChain's dict form.
pub fn reply(messages: &[Message]) -> Result<Message> {
    let n = messages.len() as u64;
    let last = messages.last().ok_or("no message to answer")?;
    let dict = if last.kind() == "tool" {
        let mut results: Vec<String> = messages
            .iter()
            .rev()
            .take_while(|m| m.kind() == "tool")
            .map(Message::text)
            .collect();
        results.reverse();
        json!({
            "type": "ai",
            "content": format!("Found: {}", results.join("; ")),
            "id": format!("ai-{n}"),
            "usage_metadata": {
                "input_tokens": 10 * n,
                "output_tokens": 7,
                "total_tokens": 10 * n + 7,
            },
            "response_metadata": {"model_name": "fake-model", "finish_reason": "stop"},
        })
    } else {
        let query = last.text();
        json!({
            "type": "ai",
            "content": "",
            "id": format!("ai-{n}"),
            "tool_calls": [
                {
                    "name": "lookup",
                    "args": {"query": query},
                    "id": format!("call-{n}-0"),
                    "type": "tool_call",
                },
                {
                    "name": "lookup",
                    "args": {"query": format!("{query} history")},
                    "id": format!("call-{n}-1"),
                    "type": "tool_call",
                },
            ],
            "usage_metadata": {
                "input_tokens": 10 * n,
                "output_tokens": 3,
                "total_tokens": 10 * n + 3,
                "input_token_details": {"cache_read": n},
                "output_token_details": {"reasoning": 1},
            },
            "response_metadata": {"model_name": "fake-model", "finish_reason": "tool_calls"},
            "additional_kwargs": {"trace": {"calls": 2, "turn": n}},
        })
    };
    Ok(Message::from_json(dict)?)
}

/// A resume value as the text the app stores (`str(value)` for a non-string).
fn text_of(value: &Value) -> String {
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_owned)
}

async fn agent(state: Arc<AgentState>, _ctx: Context) -> NodeResult<AgentStateUpdate> {
    let ai = reply(&state.messages)?;
    let mut update = AgentStateUpdate::default().log(vec!["agent".to_owned()]);
    if ai.tool_calls().is_empty() {
        let score = state.messages.len() as i64 + 1;
        update = update
            .turns(state.turns.unwrap_or(0) + 1)
            .note(note(json!({"text": ai.text(), "score": score})));
    }
    Ok(update.messages(vec![ai]))
}

/// LangGraph's `ToolNode([lookup])`: one tool message per call of the last AI message.
async fn tools(state: Arc<AgentState>, _ctx: Context) -> NodeResult<AgentStateUpdate> {
    let last = state.messages.last().ok_or("no message to answer")?;
    let results: Vec<Message> = last
        .tool_calls()
        .iter()
        .map(|call| {
            let query = call.args["query"].as_str().unwrap_or_default();
            Message::tool(
                call.id.clone().unwrap_or_default(),
                format!("facts about {query}"),
            )
            .with_name(call.name.clone())
        })
        .collect();
    Ok(AgentStateUpdate::default().messages(results))
}

/// LangGraph's `tools_condition`: `tools` when the last AI message calls tools.
fn tools_condition(state: &AgentState) -> &'static str {
    match state.messages.last() {
        Some(m) if !m.tool_calls().is_empty() => "tools",
        _ => END,
    }
}

async fn review(state: Arc<AgentState>, ctx: Context) -> NodeResult<AgentStateUpdate> {
    let findings = state.findings.clone().unwrap_or_default();
    let verdict = text_of(&ctx.interrupt(json!({"question": "publish?", "findings": findings}))?);
    let current = state.profile.as_ref().and_then(kwargs_of);
    let name = current
        .and_then(|k| k.get("name"))
        .cloned()
        .unwrap_or_else(|| json!("anonymous"));
    let tier = current
        .and_then(|k| k.get("tier"))
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let mut tags: Vec<Value> = current
        .and_then(|k| k.get("tags"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    tags.push(json!(verdict));
    Ok(AgentStateUpdate::default()
        .verdict(verdict)
        .profile(profile(
            json!({"name": name, "tier": tier + 1, "tags": tags}),
        ))
        .log(vec!["review".to_owned()]))
}

async fn plan(state: ResearchState, _ctx: Context) -> NodeResult<ResearchStateUpdate> {
    let topic = state.topic.unwrap_or_default();
    Ok(ResearchStateUpdate::default().drafts(vec![format!("plan:{topic}")]))
}

fn fan_out(state: &ResearchState) -> Route<ResearchState> {
    let sends: Vec<Send<ResearchState>> = (0..WORKERS)
        .map(|i| {
            let arg = ResearchState {
                topic: Some(state.topic.clone().unwrap_or_default()),
                item: Some(i),
                ..ResearchState::default()
            };
            Send::new("worker", arg)
        })
        .collect();
    Route::from(sends)
}

async fn worker(arg: ResearchState, _ctx: Context) -> NodeResult<ResearchStateUpdate> {
    let topic = arg.topic.unwrap_or_default();
    let item = arg.item.ok_or("a worker needs an item")?;
    Ok(ResearchStateUpdate::default().drafts(vec![format!("{topic}/{item}")]))
}

async fn check(state: ResearchState, ctx: Context) -> NodeResult<ResearchStateUpdate> {
    let answer = ctx.interrupt(json!({"question": "approve findings?", "drafts": state.drafts}))?;
    let mut findings = state.drafts.clone();
    findings.sort();
    Ok(ResearchStateUpdate::default()
        .findings(findings)
        .approved(text_of(&answer)))
}

/// The app's `research` subgraph: `plan`, `Send` fan-out to `worker`s, `check` (asks).
pub fn research_graph(
    saver: &Arc<dyn CheckpointSaver>,
) -> waypoint_runtime::Result<CompiledGraph<ResearchState>> {
    let mut graph = StateGraph::<ResearchState>::new();
    graph
        .add_node("plan", plan)
        .add_node("worker", worker)
        .add_node("check", check);
    graph
        .add_edge(START, "plan")
        .add_conditional_edges("plan", fan_out, ["worker"])
        .add_edge("worker", "check")
        .add_edge("check", END);
    graph.compile(CompileOptions::default().checkpointer(Arc::clone(saver)))
}

/// The app's agent graph: `agent` / `tools` loop, then `research` (the subgraph), then
/// `review` (asks).
pub fn agent_graph(
    saver: &Arc<dyn CheckpointSaver>,
) -> waypoint_runtime::Result<CompiledGraph<AgentState>> {
    let mut graph = StateGraph::<AgentState>::new();
    graph
        .add_node("agent", agent)
        .add_node("tools", tools)
        .add_subgraph("research", research_graph(saver)?)
        .add_node("review", review);
    graph
        .add_edge(START, "agent")
        .add_conditional_edges(
            "agent",
            tools_condition,
            [("tools", "tools"), (END, "research")],
        )
        .add_edge("tools", "agent")
        .add_edge("research", "review")
        .add_edge("review", END);
    graph.compile(CompileOptions::default().checkpointer(Arc::clone(saver)))
}

async fn bump(state: Arc<CounterState>, _ctx: Context) -> NodeResult<CounterStateUpdate> {
    Ok(CounterStateUpdate::default()
        .turns(state.turns.unwrap_or(0) + 1)
        .log(vec!["waypoint".to_owned()]))
}

/// The app's counter graph: one node, `bump`.
pub fn counter_graph(
    saver: &Arc<dyn CheckpointSaver>,
) -> waypoint_runtime::Result<CompiledGraph<CounterState>> {
    let mut graph = StateGraph::<CounterState>::new();
    graph.add_node("bump", bump);
    graph.add_edge(START, "bump").add_edge("bump", END);
    graph.compile(CompileOptions::default().checkpointer(Arc::clone(saver)))
}

/// The app's types graph (`build_types`) over a dynamic JSON state: its one node, `touch`,
/// reads `misc` (values of many Python types, each as Waypoint reads it) and writes it back
/// with `"waypoint": true` added.
pub fn types_graph(
    saver: &Arc<dyn CheckpointSaver>,
) -> waypoint_runtime::Result<CompiledGraph<JsonState>> {
    let mut graph = StateGraph::json(JsonSchema::new().last_value("misc").append("log"));
    graph.add_node("touch", |state: JsonState, _ctx: Context| async move {
        let mut misc = match state.get("misc") {
            Some(Value::Object(misc)) => misc.clone(),
            _ => Map::new(),
        };
        misc.insert("waypoint".to_owned(), json!(true));
        let mut update = Map::new();
        update.insert("misc".to_owned(), Value::Object(misc));
        update.insert("log".to_owned(), json!(["waypoint"]));
        Ok(update)
    });
    graph.add_edge(START, "touch").add_edge("touch", END);
    graph.compile(CompileOptions::default().checkpointer(Arc::clone(saver)))
}

/// An input for either side: a human message `text` with id `id`, and more fields (`topic`,
/// `turns`, `profile` and `note` as their keyword arguments).
pub fn input(text: &str, id: &str, more: Value) -> Value {
    let mut spec = json!({"text": text, "id": id});
    if let (Value::Object(spec), Value::Object(more)) = (&mut spec, more) {
        spec.extend(more);
    }
    spec
}

/// The Rust update an [`input`] stands for.
pub fn update_of(spec: &Value) -> AgentStateUpdate {
    let mut update = AgentStateUpdate::default();
    if let Some(text) = spec["text"].as_str() {
        let mut message = Message::human(text);
        if let Some(id) = spec["id"].as_str() {
            message = message.with_id(id);
        }
        update = update.messages(vec![message]);
    }
    if let Some(topic) = spec["topic"].as_str() {
        update = update.topic(topic.to_owned());
    }
    if let Some(turns) = spec["turns"].as_i64() {
        update = update.turns(turns);
    }
    if spec["profile"].is_object() {
        update = update.profile(profile(spec["profile"].clone()));
    }
    if spec["note"].is_object() {
        update = update.note(note(spec["note"].clone()));
    }
    update
}

/// Waypoint's side of a test: the graphs on a default-config saver.
pub struct Waypoint {
    /// The saver.
    pub saver: Arc<dyn CheckpointSaver>,
    /// The agent graph.
    pub agent: CompiledGraph<AgentState>,
    /// The subgraph, compiled alone, to read its checkpoints.
    pub research: CompiledGraph<ResearchState>,
}

impl Waypoint {
    /// The graphs on Waypoint's saver for `url`, set up.
    pub async fn open(url: &str) -> Result<Waypoint> {
        let saver = waypoint_saver(url).await?;
        Ok(Waypoint {
            agent: agent_graph(&saver)?,
            research: research_graph(&saver)?,
            saver,
        })
    }

    /// Runs the agent graph on `thread` with an [`input`].
    pub async fn invoke(&self, thread: &str, spec: &Value) -> Result<Outcome<AgentState>> {
        Ok(self
            .agent
            .invoke(Some(update_of(spec)), &RunConfig::thread(thread))
            .await?)
    }

    /// Resumes `thread` with `value`.
    pub async fn resume(&self, thread: &str, value: &Value) -> Result<Outcome<AgentState>> {
        Ok(self
            .agent
            .invoke(Command::resume(value.clone()), &RunConfig::thread(thread))
            .await?)
    }

    /// The latest state of `thread` as [`snapshot_view`] shows it, with the state of the
    /// subgraph each pending task is paused in (`subgraph_states`), as Python's
    /// `get_state(subgraphs=True)` gives them.
    pub async fn get_state(&self, thread: &str) -> Result<Value> {
        let snapshot = self.agent.get_state(&RunConfig::thread(thread)).await?;
        let mut view = snapshot_view(&snapshot, agent_view);
        let mut subgraphs = Vec::new();
        for task in snapshot.tasks.iter().filter(|t| t.name == "research") {
            let ns = format!("research:{}", task.id);
            let config = RunConfig {
                checkpoint_ns: ns,
                ..RunConfig::thread(thread)
            };
            let sub = self.research.get_state(&config).await?;
            if sub.config.checkpoint_id.is_some() {
                subgraphs.push(snapshot_view(&sub, research_view));
            }
        }
        view["subgraph_states"] = Value::Array(subgraphs);
        Ok(view)
    }

    /// Every checkpoint of `thread`'s root namespace as [`snapshot_view`] shows it, newest
    /// first.
    pub async fn history(&self, thread: &str) -> Result<Vec<Value>> {
        let history = self
            .agent
            .get_state_history(&RunConfig::thread(thread), &ListOptions::default())
            .await?;
        Ok(history
            .iter()
            .map(|s| snapshot_view(s, agent_view))
            .collect())
    }
}

// ---------------------------------------------------------------------------------------
// Views: what both sides show of a state

/// A message as the app shows it: `{"module", "class", "dump": model_dump()}`.
pub fn message_view(message: &Message) -> Value {
    json!({
        "module": message.module(),
        "class": message.class_name(),
        "dump": message.model_dump(),
    })
}

/// A Python object's `lc: 2` form as the app shows the object: `{"module", "class",
/// "dump"}` (its keyword arguments); any other value as it is.
pub fn object_view(value: &Value) -> Value {
    let id = value.get("id").and_then(Value::as_array);
    match (value.get("lc"), id, kwargs_of(value)) {
        (Some(lc), Some(id), Some(kwargs)) if lc == 2 && !id.is_empty() => {
            let parts: Vec<&str> = id.iter().filter_map(Value::as_str).collect();
            let (class, module) = parts.split_last().unwrap_or((&"", &[]));
            json!({"module": module.join("."), "class": class, "dump": kwargs})
        }
        _ => value.clone(),
    }
}

/// The agent state as the app's `view(state)` shows it (unset fields absent).
pub fn agent_view(state: &AgentState) -> Value {
    let mut out = Map::new();
    out.insert(
        "messages".into(),
        state.messages.iter().map(message_view).collect(),
    );
    let mut put = |key: &str, value: Option<Value>| {
        if let Some(value) = value {
            out.insert(key.to_owned(), value);
        }
    };
    put("topic", state.topic.clone().map(Value::from));
    put("turns", state.turns.map(Value::from));
    put("profile", state.profile.as_ref().map(object_view));
    put("note", state.note.as_ref().map(object_view));
    put("log", Some(json!(state.log)));
    put("findings", state.findings.clone().map(|f| json!(f)));
    put("approved", state.approved.clone().map(Value::from));
    put("verdict", state.verdict.clone().map(Value::from));
    Value::Object(out)
}

/// The subgraph state as the app shows it.
pub fn research_view(state: &ResearchState) -> Value {
    let mut out = Map::new();
    if let Some(topic) = &state.topic {
        out.insert("topic".into(), json!(topic));
    }
    if let Some(item) = state.item {
        out.insert("item".into(), json!(item));
    }
    out.insert("drafts".into(), json!(state.drafts));
    if let Some(findings) = &state.findings {
        out.insert("findings".into(), json!(findings));
    }
    if let Some(approved) = &state.approved {
        out.insert("approved".into(), json!(approved));
    }
    Value::Object(out)
}

/// A snapshot as the app's `snapshot_view` shows one.
pub fn snapshot_view<S: State>(snapshot: &StateSnapshot<S>, values: fn(&S) -> Value) -> Value {
    let interrupts = |list: &[waypoint_runtime::Interrupt]| -> Value {
        list.iter()
            .map(|i| json!({"id": i.id, "value": i.value}))
            .collect()
    };
    let parent = snapshot
        .parent_config
        .as_ref()
        .and_then(|p| p.checkpoint_id.clone());
    json!({
        "values": values(&snapshot.values),
        "next": snapshot.next,
        "checkpoint_id": snapshot.config.checkpoint_id,
        "checkpoint_ns": snapshot.config.checkpoint_ns,
        "parent_checkpoint_id": parent,
        "metadata": Value::Object(snapshot.metadata.to_json()),
        "interrupts": interrupts(&snapshot.interrupts),
        "tasks": snapshot.tasks.iter().map(|t| json!({
            "id": t.id,
            "name": t.name,
            "interrupts": interrupts(&t.interrupts),
        })).collect::<Vec<_>>(),
    })
}

/// The differences between two state views, key by key (messages one by one), each as
/// `key: python = ..., waypoint = ...`.
pub fn diff_values(python: &Value, waypoint: &Value) -> Vec<String> {
    let empty = Map::new();
    let (p, w) = (
        python.as_object().unwrap_or(&empty),
        waypoint.as_object().unwrap_or(&empty),
    );
    let mut keys: Vec<&String> = p.keys().chain(w.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out = Vec::new();
    for key in keys {
        match (p.get(key), w.get(key)) {
            (Some(Value::Array(a)), Some(Value::Array(b))) if key == "messages" => {
                if a.len() != b.len() {
                    out.push(format!(
                        "messages: python has {}, waypoint {}",
                        a.len(),
                        b.len()
                    ));
                }
                for (i, (x, y)) in a.iter().zip(b).enumerate() {
                    if x != y {
                        out.push(format!("messages[{i}]: python = {x}, waypoint = {y}"));
                    }
                }
            }
            (x, y) if x != y => out.push(format!(
                "{key}: python = {}, waypoint = {}",
                x.map_or("<absent>".into(), Value::to_string),
                y.map_or("<absent>".into(), Value::to_string)
            )),
            _ => {}
        }
    }
    out
}

/// Asserts that Python's and Waypoint's views of the same thread's latest state agree: the
/// checkpoint, the values field by field, the next nodes and the pending interrupts (ids and
/// values); and the subgraph states of paused tasks.
pub fn assert_same_state(hop: &str, python: &Value, waypoint: &Value) {
    let diffs = diff_values(&python["values"], &waypoint["values"]);
    assert!(
        diffs.is_empty(),
        "{hop}: the values differ:\n  {}",
        diffs.join("\n  ")
    );
    assert_eq!(
        python["checkpoint_id"], waypoint["checkpoint_id"],
        "{hop}: the latest checkpoint"
    );
    assert_eq!(
        sorted(&python["next"]),
        sorted(&waypoint["next"]),
        "{hop}: next"
    );
    assert_eq!(
        python["interrupts"], waypoint["interrupts"],
        "{hop}: pending interrupts (ids and values)"
    );
    let (ps, ws) = (
        python["subgraph_states"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
        waypoint["subgraph_states"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
    );
    assert_eq!(
        ps.len(),
        ws.len(),
        "{hop}: paused subgraphs: python {ps:?}, waypoint {ws:?}"
    );
    for (p, w) in ps.iter().zip(&ws) {
        assert_eq!(
            p["checkpoint_ns"], w["checkpoint_ns"],
            "{hop}: subgraph namespace"
        );
        let diffs = diff_values(&p["values"], &w["values"]);
        assert!(
            diffs.is_empty(),
            "{hop}: the subgraph's values differ:\n  {}",
            diffs.join("\n  ")
        );
        assert_eq!(p["next"], w["next"], "{hop}: the subgraph's next");
        assert_eq!(
            p["interrupts"], w["interrupts"],
            "{hop}: the subgraph's interrupts"
        );
    }
}

/// Asserts that both sides list the same history: the same checkpoints with the same
/// parents, steps, sources, next nodes and values.
pub fn assert_same_history(hop: &str, python: &[Value], waypoint: &[Value]) {
    let ids =
        |h: &[Value]| -> Vec<Value> { h.iter().map(|s| s["checkpoint_id"].clone()).collect() };
    assert_eq!(
        ids(python),
        ids(waypoint),
        "{hop}: the history's checkpoints"
    );
    for (p, w) in python.iter().zip(waypoint) {
        let at = format!("{hop}, checkpoint {}", p["checkpoint_id"]);
        assert_eq!(
            p["parent_checkpoint_id"], w["parent_checkpoint_id"],
            "{at}: parent"
        );
        for key in ["step", "source"] {
            assert_eq!(
                p["metadata"][key], w["metadata"][key],
                "{at}: metadata {key}"
            );
        }
        assert_eq!(sorted(&p["next"]), sorted(&w["next"]), "{at}: next");
        let diffs = diff_values(&p["values"], &w["values"]);
        assert!(
            diffs.is_empty(),
            "{at}: the values differ:\n  {}",
            diffs.join("\n  ")
        );
    }
}

fn sorted(list: &Value) -> Vec<String> {
    let mut out: Vec<String> = list
        .as_array()
        .map(|l| l.iter().map(text_of).collect())
        .unwrap_or_default();
    out.sort();
    out
}

/// A state view with the ids `add_messages` draws (tool messages': Python's are random)
/// replaced by `<id>`, to compare threads that took different paths to the same state.
pub fn masked(view: &Value) -> Value {
    let mut view = view.clone();
    if let Some(messages) = view.get_mut("messages").and_then(Value::as_array_mut) {
        for message in messages {
            if message["class"] == "ToolMessage" {
                message["dump"]["id"] = json!("<id>");
            }
        }
    }
    view
}

/// The classes of a view's messages, in order.
pub fn message_classes(view: &Value) -> Vec<String> {
    view["messages"]
        .as_array()
        .map(|m| m.iter().map(|m| text_of(&m["class"])).collect())
        .unwrap_or_default()
}
