//! Building a graph: nodes, edges, conditional edges, and `compile`.

use std::future::Future;
use std::sync::Arc;

use waypoint_checkpoint::BoxError;

use crate::command::{Command, Goto};
use crate::config::CompileOptions;
use crate::config::RunConfig;
use crate::context::Context;
use crate::draw::Shape;
use crate::error::{Error, Result};
use crate::pregel::CompiledGraph;
use crate::pregel::graph::{Branch, END, Graph, Node, NodeFn, NodeResult, RouterFn, START};
use crate::state::{
    JsonSchema, JsonState, State, channel_list, field_names, project_state, unknown_keys,
    update_from,
};

/// What a node takes as its state: `S` (a copy) or `Arc<S>` (shared, no copy; the better
/// choice for large states such as long conversations).
pub trait NodeInput<S>: Sized + std::marker::Send + 'static {
    /// The input for a node from the step's state.
    fn from_state(state: &Arc<S>) -> Self;
}

impl<S: State> NodeInput<S> for S {
    fn from_state(state: &Arc<S>) -> Self {
        S::clone(state)
    }
}

impl<S: State> NodeInput<S> for Arc<S> {
    fn from_state(state: &Arc<S>) -> Self {
        Arc::clone(state)
    }
}

/// Where a router sends the graph: node names (or mapped keys) and `Send`s.
#[derive(Clone, Debug)]
pub struct Route<S: State>(pub Vec<Goto<S>>);

impl<S: State> From<&str> for Route<S> {
    fn from(node: &str) -> Self {
        Route(vec![Goto::from(node)])
    }
}

impl<S: State> From<String> for Route<S> {
    fn from(node: String) -> Self {
        Route(vec![Goto::Node(node)])
    }
}

impl<S: State> From<bool> for Route<S> {
    /// `"true"` or `"false"`, for mappings keyed by a condition.
    fn from(value: bool) -> Self {
        Route(vec![Goto::Node(value.to_string())])
    }
}

impl<S: State, T: Into<Goto<S>>> From<Vec<T>> for Route<S> {
    fn from(gotos: Vec<T>) -> Self {
        Route(gotos.into_iter().map(Into::into).collect())
    }
}

impl<S: State> From<crate::command::Send<S>> for Route<S> {
    fn from(send: crate::command::Send<S>) -> Self {
        Route(vec![Goto::Send(send)])
    }
}

/// The possible destinations of a conditional edge: keys mapped to nodes, or none declared.
#[derive(Clone, Debug, Default)]
pub struct PathMap(Option<Vec<(String, String)>>);

impl From<()> for PathMap {
    /// No mapping: the router returns node names, and may reach any node.
    fn from((): ()) -> Self {
        PathMap(None)
    }
}

impl<const N: usize> From<[(&str, &str); N]> for PathMap {
    fn from(pairs: [(&str, &str); N]) -> Self {
        PathMap(Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ))
    }
}

impl<const N: usize> From<[&str; N]> for PathMap {
    /// The router returns one of these node names.
    fn from(nodes: [&str; N]) -> Self {
        PathMap(Some(
            nodes
                .iter()
                .map(|n| ((*n).to_owned(), (*n).to_owned()))
                .collect(),
        ))
    }
}

impl From<Vec<(String, String)>> for PathMap {
    fn from(pairs: Vec<(String, String)>) -> Self {
        PathMap(Some(pairs))
    }
}

/// The channel names of a state.
fn channel_names<S: State>(state: &S) -> Arc<[String]> {
    state
        .channels()
        .iter()
        .map(|c| c.name.to_string())
        .collect()
}

/// The names of a state's input channels.
fn input_names<S: State>(state: &S) -> Arc<[String]> {
    (0..state.channels().len())
        .filter(|&i| state.is_input(i))
        .map(|i| state.channels()[i].name.to_string())
        .collect()
}

/// The keys of `value` that `keys` names, as a `T` (extra keys dropped, missing ones absent).
fn project<A: serde::Serialize, T: serde::de::DeserializeOwned>(
    value: &A,
    keys: &[String],
) -> std::result::Result<T, BoxError> {
    let mut json = serde_json::to_value(value)?;
    if let serde_json::Value::Object(map) = &mut json {
        map.retain(|key, _| keys.contains(key));
    }
    Ok(serde_json::from_value(json)?)
}

/// A node as built.
pub(crate) struct NodeSpec<S: State> {
    pub(crate) name: String,
    pub(crate) func: NodeFn<S>,
    /// The shape of the compiled graph this node runs, for drawing it inside.
    pub(crate) subgraph: Option<Arc<Shape>>,
    /// The fields of the node's own input type, which must be channels of the state.
    pub(crate) reads: Option<&'static [&'static str]>,
}

/// A graph under construction over state `S`.
pub struct StateGraph<S: State> {
    template: S,
    nodes: Vec<NodeSpec<S>>,
    edges: Vec<(String, String)>,
    branches: Vec<(String, Branch<S>)>,
    /// Declared `Command` destinations, `(node, target)`, in the order given.
    destinations: Vec<(String, String)>,
}

impl<S: State + Default> Default for StateGraph<S> {
    fn default() -> Self {
        StateGraph::with_state(S::default())
    }
}

impl<S: State + Default> StateGraph<S> {
    /// An empty graph whose runs start from `S::default()`.
    pub fn new() -> Self {
        StateGraph::default()
    }
}

impl StateGraph<JsonState> {
    /// An empty graph over a dynamic JSON state with the keys of `schema`.
    pub fn json(schema: JsonSchema) -> Self {
        StateGraph::with_state(JsonState::new(schema))
    }
}

impl<S: State> StateGraph<S> {
    /// An empty graph whose runs start from `template`.
    pub fn with_state(template: S) -> Self {
        StateGraph {
            template,
            nodes: Vec::new(),
            edges: Vec::new(),
            branches: Vec::new(),
            destinations: Vec::new(),
        }
    }

    /// Adds a node: an async function of the state and the run's context.
    ///
    /// It returns an update (the derive's `…Update`, or a JSON object for [`JsonState`]) or
    /// a [`Command`]. Names must be unique and must not be `START`/`END` or contain `:`.
    pub fn add_node<F, I, Fut, O>(&mut self, name: impl Into<String>, func: F) -> &mut Self
    where
        F: Fn(I, Context) -> Fut + Send + Sync + 'static,
        I: NodeInput<S>,
        Fut: Future<Output = NodeResult<O>> + std::marker::Send + 'static,
        O: Into<Command<S>>,
    {
        let func: NodeFn<S> = Arc::new(move |state: Arc<S>, ctx| {
            let fut = func(I::from_state(&state), ctx);
            Box::pin(async move { fut.await.map(Into::into) })
        });
        self.nodes.push(NodeSpec {
            name: name.into(),
            func,
            subgraph: None,
            reads: None,
        });
        self
    }

    /// Adds a node that reads the state as its own input type `P` (LangGraph's
    /// `def node(state: PrivateState)`): `P` is built from the state's channels, its fields
    /// ignoring the others, so a node can read channels `invoke` neither takes nor returns.
    ///
    /// For a typed state, every channel a node reads or writes is a field of `S`; `P` only
    /// narrows what the node sees. `compile` fails when a field of `P` is not a channel.
    pub fn add_node_with_input<P, F, Fut, O>(
        &mut self,
        name: impl Into<String>,
        func: F,
    ) -> &mut Self
    where
        P: serde::de::DeserializeOwned + std::marker::Send + 'static,
        F: Fn(P, Context) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = NodeResult<O>> + std::marker::Send + 'static,
        O: Into<Command<S>> + 'static,
    {
        let func = Arc::new(func);
        self.add_node(name, move |state: Arc<S>, ctx: Context| {
            let func = Arc::clone(&func);
            async move { func(project_state(&*state)?, ctx).await }
        });
        if let Some(node) = self.nodes.last_mut() {
            node.reads = field_names::<P>();
        }
        self
    }

    /// Adds a compiled graph as a node. The keys both states declare are shared: the node
    /// passes those among the subgraph's input keys in, runs the subgraph (in its own
    /// checkpoint namespace, on this graph's checkpointer) and returns the subgraph's final
    /// values of those among its output keys as its update, through this graph's reducers.
    /// Keys only one side declares are left alone.
    pub fn add_subgraph<S2: State>(
        &mut self,
        name: impl Into<String>,
        graph: CompiledGraph<S2>,
    ) -> &mut Self {
        let ours = channel_names(&self.template);
        let theirs = input_names(&graph.inner.template);
        let shape = Arc::clone(&graph.inner.shape);
        self.add_node(name, move |state: Arc<S>, ctx: Context| {
            let (graph, ours, theirs) = (graph.clone(), Arc::clone(&ours), Arc::clone(&theirs));
            async move {
                let input: S2::Update = project(&*state, &theirs)?;
                let out = ctx.call(&graph, Some(input)).await?;
                let update: S::Update = project(&*out, &ours)?;
                Ok(Command::update(update))
            }
        });
        if let Some(node) = self.nodes.last_mut() {
            node.subgraph = Some(shape);
        }
        self
    }

    /// Declares the nodes `node`'s `Command`s may go to (LangGraph's `destinations`).
    ///
    /// Only documentation of the graph's shape: a `Command` may go to any node whether
    /// declared or not, and `compile` does not need them. May be called before or after
    /// `node` is added; `compile` fails when `node` or a destination is not a node.
    pub fn add_destinations<I, T>(&mut self, node: &str, destinations: I) -> &mut Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.destinations.extend(
            destinations
                .into_iter()
                .map(|to| (node.to_owned(), to.into())),
        );
        self
    }

    /// Adds an edge: after `from` runs, `to` runs in the next step.
    pub fn add_edge(&mut self, from: impl Into<String>, to: impl Into<String>) -> &mut Self {
        self.edges.push((from.into(), to.into()));
        self
    }

    /// Sets the first node (an edge from [`START`]).
    pub fn set_entry_point(&mut self, node: impl Into<String>) -> &mut Self {
        self.add_edge(START, node)
    }

    /// Adds a conditional edge: after `from`, `router` picks the next nodes from the state
    /// with `from`'s update applied; `map` translates its keys into node names.
    pub fn add_conditional_edges<F, R>(
        &mut self,
        from: impl Into<String>,
        router: F,
        map: impl Into<PathMap>,
    ) -> &mut Self
    where
        F: Fn(&S) -> R + Send + Sync + 'static,
        R: Into<Route<S>>,
    {
        let router: RouterFn<S> = Arc::new(move |state| router(state).into().0);
        let map = map.into().0.map(|pairs| pairs.into_iter().collect());
        self.branches.push((from.into(), Branch { router, map }));
        self
    }

    /// Routes the start of the graph with `router` (a conditional edge from [`START`]).
    pub fn set_conditional_entry_point<F, R>(
        &mut self,
        router: F,
        map: impl Into<PathMap>,
    ) -> &mut Self
    where
        F: Fn(&S) -> R + Send + Sync + 'static,
        R: Into<Route<S>>,
    {
        self.add_conditional_edges(START, router, map)
    }

    /// Validates the graph and makes it runnable.
    ///
    /// Fails on duplicate or reserved node names, edges from or to unknown nodes, mapped
    /// conditional edges naming unknown nodes, destinations of or to unknown nodes,
    /// interrupt nodes that do not exist and a missing entry point, as LangGraph's
    /// `validate` does. A node without static edges into it compiles, as in LangGraph: a
    /// `Command`'s `goto` may reach it (an unknown `goto` target fails the run, naming it).
    pub fn compile(self, options: CompileOptions) -> Result<CompiledGraph<S>> {
        let mut index = foldhash::HashMap::default();
        for (i, node) in self.nodes.iter().enumerate() {
            let name = node.name.as_str();
            if name == START || name == END || name.is_empty() || name.contains(':') {
                return Err(Error::InvalidGraph(format!(
                    "`{name}` is not a valid node name (reserved, empty or containing `:`)"
                )));
            }
            if index.insert(name.to_owned(), i).is_some() {
                return Err(Error::InvalidGraph(format!("node `{name}` is added twice")));
            }
        }
        let known = |name: &str, role: &str| -> Result<()> {
            if index.contains_key(name) || name == END || (role == "source" && name == START) {
                Ok(())
            } else {
                Err(Error::InvalidGraph(format!(
                    "{role} `{name}` is not a node of this graph"
                )))
            }
        };
        for (from, to) in &self.edges {
            known(from, "source")?;
            if to == START {
                return Err(Error::InvalidGraph(format!(
                    "edge `{from}` -> START is not allowed"
                )));
            }
            known(to, "target")?;
            if from == END {
                return Err(Error::InvalidGraph(format!(
                    "edge from END to `{to}` is not allowed"
                )));
            }
        }
        for (from, branch) in &self.branches {
            known(from, "source")?;
            for target in branch.map.iter().flat_map(|m| m.values()) {
                known(target, "target")?;
            }
        }
        for node in &self.nodes {
            let reads = node.reads.unwrap_or_default().iter().copied();
            if let Some(unknown) = unknown_keys(&self.template, reads) {
                return Err(Error::InvalidGraph(format!(
                    "node `{}` reads {unknown}, which this graph's state does not declare \
                     (its channels: {})",
                    node.name,
                    channel_list(&self.template)
                )));
            }
        }
        for (node, target) in &self.destinations {
            if !index.contains_key(node.as_str()) {
                return Err(Error::InvalidGraph(format!(
                    "destinations are declared for `{node}`, which is not a node of this graph"
                )));
            }
            known(target, "destination")?;
        }
        for name in options
            .interrupt_before
            .iter()
            .chain(&options.interrupt_after)
        {
            known(name, "interrupt node")?;
        }
        if !self.edges.iter().any(|(from, _)| from == START)
            && !self.branches.iter().any(|(from, _)| from == START)
        {
            return Err(Error::InvalidGraph(
                "the graph has no entry point: add an edge from START".into(),
            ));
        }

        let shape = Shape::new(
            self.nodes
                .iter()
                .map(|node| (node.name.clone(), node.subgraph.clone()))
                .collect(),
            self.edges.clone(),
            self.branches
                .iter()
                .map(|(from, branch)| {
                    let map = branch.map.as_ref().map(|map| {
                        let mut pairs: Vec<_> =
                            map.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                        pairs.sort();
                        pairs
                    });
                    (from.clone(), map)
                })
                .collect(),
            self.destinations.clone(),
            options.interrupt_before.clone(),
            options.interrupt_after.clone(),
        );
        let mut nodes: Vec<Node<S>> = self
            .nodes
            .into_iter()
            .map(|spec| Node::new(spec.name, Some(spec.func)))
            .collect();
        let mut start = Node::new(START.to_owned(), None);
        for (from, to) in self.edges {
            if to == END {
                continue;
            }
            let target = index[&to];
            let node = if from == START {
                &mut start
            } else {
                &mut nodes[index[&from]]
            };
            if !node.edges.contains(&target) {
                node.edges.push(target);
            }
        }
        for (from, branch) in self.branches {
            let node = if from == START {
                &mut start
            } else {
                &mut nodes[index[&from]]
            };
            node.branches.push(branch);
        }
        let mut graph = Graph::new(
            self.template,
            start,
            nodes,
            index,
            options.for_checkpointer(),
        );
        graph.shape = Arc::new(shape);
        Ok(CompiledGraph::new(graph))
    }
}

impl<S: State> CompiledGraph<S> {
    /// Runs the graph from a typed input and returns the final state read as `O`
    /// (LangGraph's `StateGraph(State, input=I, output=O)` for typed states).
    ///
    /// `input`'s keys must be channels (and input keys) of the state: an unknown key is an
    /// error naming it. `O` takes the channels it has fields for; a required field the state
    /// does not hold is an error naming it. A paused run returns the state so far: use
    /// [`CompiledGraph::invoke`] to see its interrupts.
    pub async fn invoke_as<I: serde::Serialize, O: serde::de::DeserializeOwned>(
        &self,
        input: &I,
        config: &RunConfig,
    ) -> Result<O> {
        let update = update_from(&self.inner.template, input)?;
        let out = self.invoke(Some(update), config).await?;
        project_state(&*out.values)
    }
}
