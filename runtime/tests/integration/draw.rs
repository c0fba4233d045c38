//! Drawing graphs: the Mermaid text LangGraph prints for the same graphs (its own snapshot
//! tests, `libs/langgraph/tests/__snapshots__/`), and the ASCII drawing.

use serde_json::{Map, Value};
use waypoint_runtime::{
    CompileOptions, CompiledGraph, Context, END, JsonSchema, JsonState, NodeResult, START,
    StateGraph,
};

type Result<T = ()> = std::result::Result<T, waypoint_runtime::Error>;

async fn noop(_: JsonState, _: Context) -> NodeResult<Map<String, Value>> {
    Ok(Map::new())
}

fn graph() -> StateGraph<JsonState> {
    StateGraph::json(JsonSchema::new().last_value("x"))
}

fn graph_with(nodes: &[&str]) -> StateGraph<JsonState> {
    let mut graph = graph();
    for node in nodes {
        graph.add_node(*node, noop);
    }
    graph
}

fn compile(graph: StateGraph<JsonState>) -> Result<CompiledGraph<JsonState>> {
    graph.compile(CompileOptions::default())
}

fn plain(graph: &CompiledGraph<JsonState>) -> String {
    graph.drawing(0).draw_mermaid(false)
}

/// The styled text's fixed parts around `body` (nodes and edges).
fn styled(body: &str) -> String {
    format!(
        "---\nconfig:\n  flowchart:\n    curve: linear\n---\ngraph TD;\n{body}\
         \tclassDef default fill:#f2f0ff,line-height:1.2\n\
         \tclassDef first fill-opacity:0\n\
         \tclassDef last fill:#bfb6fc\n"
    )
}

/// The ReAct agent of LangGraph's guides (`create_react_agent` with tools): the model node
/// routes to the tools or to the end, the tools go back to the model.
#[test]
fn react_agent_draws_as_in_langgraph() -> Result {
    let mut agent = graph_with(&["agent", "tools"]);
    agent
        .add_edge(START, "agent")
        .add_conditional_edges("agent", |_: &JsonState| END, ["tools", END])
        .add_edge("tools", "agent");
    let agent = compile(agent)?;

    assert_eq!(
        plain(&agent),
        "graph TD;\n\
         \t__start__ --> agent;\n\
         \tagent -.-> __end__;\n\
         \tagent -.-> tools;\n\
         \ttools --> agent;\n"
    );
    assert_eq!(
        agent.draw_mermaid(),
        styled(
            "\t__start__([<p>__start__</p>]):::first\n\
             \tagent(agent)\n\
             \ttools(tools)\n\
             \t__end__([<p>__end__</p>]):::last\n\
             \t__start__ --> agent;\n\
             \tagent -.-> __end__;\n\
             \tagent -.-> tools;\n\
             \ttools --> agent;\n"
        )
    );
    Ok(())
}

/// LangGraph's `test_conditional_entrypoint_graph_state`: a path map's keys label the edges
/// unless a key is its node's name.
#[test]
fn path_map_keys_label_conditional_edges() -> Result {
    let mut graph = graph_with(&["left", "right"]);
    graph
        .set_conditional_entry_point(
            |_: &JsonState| "go-left",
            [("go-left", "left"), ("go-right", "right")],
        )
        .add_conditional_edges("left", |_: &JsonState| END, [(END, END)])
        .add_edge("right", END);

    assert_eq!(
        plain(&compile(graph)?),
        "graph TD;\n\
         \t__start__ -. &nbsp;go-left&nbsp; .-> left;\n\
         \t__start__ -. &nbsp;go-right&nbsp; .-> right;\n\
         \tleft -.-> __end__;\n\
         \tright --> __end__;\n"
    );
    Ok(())
}

/// LangGraph's `test_migration_graph`: edges come sorted by source (byte order: upper case
/// before `_`), then the edges to END.
#[test]
fn edges_are_sorted_as_in_langgraph() -> Result {
    let mut graph = graph_with(&["B", "C", "D"]);
    graph
        .add_edge(START, "B")
        .add_conditional_edges("B", |_: &JsonState| "X", [("X", "C"), ("Y", "D")])
        .add_edge("D", "B")
        .add_edge("C", END);

    assert_eq!(
        plain(&compile(graph)?),
        "graph TD;\n\
         \tB -. &nbsp;X&nbsp; .-> C;\n\
         \tB -. &nbsp;Y&nbsp; .-> D;\n\
         \tD --> B;\n\
         \t__start__ --> B;\n\
         \tC --> __end__;\n"
    );
    Ok(())
}

/// LangGraph's `test_get_graph_loop`: a loop with no way out ends, in the drawing, at the
/// node its last walked step ran.
#[test]
fn a_closed_loop_ends_where_langgraph_draws_it() -> Result {
    let mut graph = graph_with(&["human", "agent"]);
    graph
        .add_edge(START, "human")
        .add_edge("human", "agent")
        .add_edge("agent", "human");

    assert_eq!(
        plain(&compile(graph)?),
        "graph TD;\n\
         \t__start__ --> human;\n\
         \tagent --> human;\n\
         \thuman --> agent;\n\
         \tagent -.-> __end__;\n"
    );
    Ok(())
}

/// LangGraph's `test_get_graph_self_loop`: `Command` destinations are dotted edges, a
/// self-loop last.
#[test]
fn command_destinations_are_dotted() -> Result {
    let mut graph = graph_with(&["worker_node"]);
    graph
        .add_edge(START, "worker_node")
        .add_destinations("worker_node", ["worker_node", END]);

    assert_eq!(
        plain(&compile(graph)?),
        "graph TD;\n\
         \t__start__ --> worker_node;\n\
         \tworker_node -.-> __end__;\n\
         \tworker_node -.-> worker_node;\n"
    );
    Ok(())
}

/// A handoff: each agent's `Command`s may go to the other or end; only the destinations
/// connect them.
#[test]
fn nodes_reached_only_by_commands_draw_through_their_destinations() -> Result {
    let mut graph = graph_with(&["alice", "bob"]);
    graph
        .add_edge(START, "alice")
        .add_destinations("alice", ["bob", END])
        .add_destinations("bob", ["alice", END]);

    assert_eq!(
        plain(&compile(graph)?),
        "graph TD;\n\
         \t__start__ --> alice;\n\
         \talice -.-> __end__;\n\
         \talice -.-> bob;\n\
         \tbob -.-> __end__;\n\
         \tbob -.-> alice;\n"
    );
    Ok(())
}

/// LangGraph's `test_repeat_condition`: names with spaces are escaped in ids (`\20`).
#[test]
fn names_needing_escapes_are_escaped_as_in_langgraph() -> Result {
    let mut graph = graph_with(&["Researcher", "Chart Generator", "Call Tool"]);
    let to = |_: &JsonState| "end";
    graph
        .add_conditional_edges(
            "Researcher",
            to,
            [
                ("redo", "Researcher"),
                ("continue", "Chart Generator"),
                ("call_tool", "Call Tool"),
                ("end", END),
            ],
        )
        .add_conditional_edges(
            "Chart Generator",
            to,
            [
                ("continue", "Researcher"),
                ("call_tool", "Call Tool"),
                ("end", END),
            ],
        )
        .add_conditional_edges("Call Tool", to, ["Researcher", "Chart Generator"])
        .set_entry_point("Researcher");

    assert_eq!(
        plain(&compile(graph)?),
        "graph TD;\n\
         \tCall\\20Tool -.-> Chart\\20Generator;\n\
         \tCall\\20Tool -.-> Researcher;\n\
         \tChart\\20Generator -. &nbsp;call_tool&nbsp; .-> Call\\20Tool;\n\
         \tChart\\20Generator -. &nbsp;continue&nbsp; .-> Researcher;\n\
         \tChart\\20Generator -. &nbsp;end&nbsp; .-> __end__;\n\
         \tResearcher -. &nbsp;call_tool&nbsp; .-> Call\\20Tool;\n\
         \tResearcher -. &nbsp;continue&nbsp; .-> Chart\\20Generator;\n\
         \tResearcher -. &nbsp;end&nbsp; .-> __end__;\n\
         \t__start__ --> Researcher;\n\
         \tResearcher -. &nbsp;redo&nbsp; .-> Researcher;\n"
    );
    Ok(())
}

/// Quotes and other characters become `\` and their hex code point in ids; labels keep the
/// name as written, in `<p>` when it starts and ends with a Markdown character.
#[test]
fn quotes_and_markdown_characters_in_names() -> Result {
    let mut graph = graph_with(&["say \"hi\"", "*bold*", "é"]);
    graph
        .add_edge(START, "say \"hi\"")
        .add_edge("say \"hi\"", "*bold*")
        .add_edge("*bold*", "é")
        .add_edge("é", END);

    assert_eq!(
        compile(graph)?.draw_mermaid(),
        styled(
            "\t__start__([<p>__start__</p>]):::first\n\
             \tsay\\20\\22hi\\22(say \"hi\")\n\
             \t\\2abold\\2a(<p>*bold*</p>)\n\
             \t\\e9(é)\n\
             \t__end__([<p>__end__</p>]):::last\n\
             \t\\2abold\\2a --> \\e9;\n\
             \t__start__ --> say\\20\\22hi\\22;\n\
             \tsay\\20\\22hi\\22 --> \\2abold\\2a;\n\
             \t\\e9 --> __end__;\n"
        )
    );
    Ok(())
}

/// Long labels wrap every nine words, as in LangGraph.
#[test]
fn long_labels_wrap_every_nine_words() -> Result {
    let label = "one two three four five six seven eight nine ten";
    let mut graph = graph_with(&["a"]);
    graph.set_conditional_entry_point(
        |_: &JsonState| "a",
        vec![(label.to_owned(), "a".to_owned())],
    );
    graph.add_edge("a", END);

    assert_eq!(
        plain(&compile(graph)?),
        "graph TD;\n\
         \t__start__ -. &nbsp;one two three four five six seven eight nine&nbsp<br>&nbspten&nbsp; .-> a;\n\
         \ta --> __end__;\n"
    );
    Ok(())
}

/// A router without a path map may go anywhere: dotted edges to every node and the end (a
/// self-loop drawn last, as LangGraph does).
#[test]
fn a_router_without_path_map_may_go_anywhere() -> Result {
    let mut graph = graph_with(&["a", "b"]);
    graph
        .add_edge(START, "a")
        .add_conditional_edges("a", |_: &JsonState| "b", ())
        .add_edge("b", END);

    assert_eq!(
        plain(&compile(graph)?),
        "graph TD;\n\
         \t__start__ --> a;\n\
         \ta -.-> __end__;\n\
         \ta -.-> b;\n\
         \tb --> __end__;\n\
         \ta -.-> a;\n"
    );
    Ok(())
}

/// LangGraph's `test_nested_graph`: a subgraph is one node, or with xray its nodes inside a
/// `subgraph` block (its plain start and end left out).
#[test]
fn a_subgraph_is_one_node_or_drawn_inside() -> Result {
    let mut inner = graph_with(&["up"]);
    inner.add_edge(START, "up").add_edge("up", END);
    let mut outer = graph_with(&["side"]);
    outer
        .add_subgraph("inner", compile(inner)?)
        .add_edge(START, "inner")
        .add_edge("inner", "side")
        .add_edge("side", END);
    let outer = compile(outer)?;

    assert_eq!(
        plain(&outer),
        "graph TD;\n\
         \t__start__ --> inner;\n\
         \tinner --> side;\n\
         \tside --> __end__;\n"
    );
    assert_eq!(outer.drawing(0).draw_mermaid(true), outer.draw_mermaid());
    assert_eq!(
        outer.drawing(usize::MAX).draw_mermaid(true),
        styled(
            "\t__start__([<p>__start__</p>]):::first\n\
             \tside(side)\n\
             \t__end__([<p>__end__</p>]):::last\n\
             \t__start__ --> inner\\3aup;\n\
             \tinner\\3aup --> side;\n\
             \tside --> __end__;\n\
             \tsubgraph inner\n\
             \tinner\\3aup(up)\n\
             \tend\n"
        )
    );
    Ok(())
}

/// LangGraph's `test_multiple_sinks_subgraphs`: a subgraph's end with two ways in stays.
#[test]
fn a_subgraph_with_two_sinks_keeps_its_end() -> Result {
    let mut sub = graph_with(&["one", "two", "three"]);
    sub.add_edge(START, "one").add_conditional_edges(
        "one",
        |_: &JsonState| "two",
        ["two", "three"],
    );
    let mut graph = graph_with(&["uno", "dos"]);
    graph
        .add_subgraph("subgraph", compile(sub)?)
        .add_edge(START, "uno")
        .add_conditional_edges("uno", |_: &JsonState| "dos", ["dos", "subgraph"]);

    assert_eq!(
        compile(graph)?.drawing(usize::MAX).draw_mermaid(true),
        styled(
            "\t__start__([<p>__start__</p>]):::first\n\
             \tuno(uno)\n\
             \tdos(dos)\n\
             \t__end__([<p>__end__</p>]):::last\n\
             \t__start__ --> uno;\n\
             \tuno -.-> dos;\n\
             \tuno -.-> subgraph\\3aone;\n\
             \tdos --> __end__;\n\
             \tsubgraph\\3a__end__ --> __end__;\n\
             \tsubgraph subgraph\n\
             \tsubgraph\\3aone(one)\n\
             \tsubgraph\\3atwo(two)\n\
             \tsubgraph\\3athree(three)\n\
             \tsubgraph\\3a__end__(<p>__end__</p>)\n\
             \tsubgraph\\3aone -.-> subgraph\\3athree;\n\
             \tsubgraph\\3aone -.-> subgraph\\3atwo;\n\
             \tsubgraph\\3athree --> subgraph\\3a__end__;\n\
             \tsubgraph\\3atwo --> subgraph\\3a__end__;\n\
             \tend\n"
        )
    );
    Ok(())
}

/// The loop of LangGraph's `test_xray_issue` / `test_xray_bool`: `c_one` routes to `c_two`
/// (key "0") or the end (key "1"), `c_two` goes back to `c_one`.
fn looping(first: &str, second: &str) -> StateGraph<JsonState> {
    let mut graph = graph_with(&[first]);
    graph
        .add_edge(START, first)
        .add_edge(second, first)
        .add_conditional_edges(first, |_: &JsonState| "1", [("0", second), ("1", END)]);
    graph
}

/// LangGraph's `test_xray_bool`: xray draws every level, nested blocks inside blocks; a
/// depth of 1 draws only the first level inside.
#[test]
fn xray_draws_nested_subgraphs_to_the_depth_asked() -> Result {
    let mut child = looping("c_one", "c_two");
    child.add_node("c_two", noop);
    let mut parent = looping("p_one", "p_two");
    parent.add_subgraph("p_two", compile(child)?);
    let mut grand_parent = looping("gp_one", "gp_two");
    grand_parent.add_subgraph("gp_two", compile(parent)?);
    let app = compile(grand_parent)?;

    assert_eq!(
        app.drawing(usize::MAX).draw_mermaid(true),
        styled(
            "\t__start__([<p>__start__</p>]):::first\n\
             \tgp_one(gp_one)\n\
             \t__end__([<p>__end__</p>]):::last\n\
             \t__start__ --> gp_one;\n\
             \tgp_one -. &nbsp;1&nbsp; .-> __end__;\n\
             \tgp_one -. &nbsp;0&nbsp; .-> gp_two\\3a__start__;\n\
             \tgp_two\\3a__end__ --> gp_one;\n\
             \tsubgraph gp_two\n\
             \tgp_two\\3a__start__(<p>__start__</p>)\n\
             \tgp_two\\3ap_one(p_one)\n\
             \tgp_two\\3a__end__(<p>__end__</p>)\n\
             \tgp_two\\3a__start__ --> gp_two\\3ap_one;\n\
             \tgp_two\\3ap_one -. &nbsp;1&nbsp; .-> gp_two\\3a__end__;\n\
             \tgp_two\\3ap_one -. &nbsp;0&nbsp; .-> gp_two\\3ap_two\\3a__start__;\n\
             \tgp_two\\3ap_two\\3a__end__ --> gp_two\\3ap_one;\n\
             \tsubgraph p_two\n\
             \tgp_two\\3ap_two\\3a__start__(<p>__start__</p>)\n\
             \tgp_two\\3ap_two\\3ac_one(c_one)\n\
             \tgp_two\\3ap_two\\3ac_two(c_two)\n\
             \tgp_two\\3ap_two\\3a__end__(<p>__end__</p>)\n\
             \tgp_two\\3ap_two\\3a__start__ --> gp_two\\3ap_two\\3ac_one;\n\
             \tgp_two\\3ap_two\\3ac_one -. &nbsp;1&nbsp; .-> gp_two\\3ap_two\\3a__end__;\n\
             \tgp_two\\3ap_two\\3ac_one -. &nbsp;0&nbsp; .-> gp_two\\3ap_two\\3ac_two;\n\
             \tgp_two\\3ap_two\\3ac_two --> gp_two\\3ap_two\\3ac_one;\n\
             \tend\n\
             \tend\n"
        )
    );
    let one_level = app.drawing(1);
    assert!(one_level.nodes.iter().any(|n| n.id == "gp_two:p_two"));
    assert!(
        !one_level
            .nodes
            .iter()
            .any(|n| n.id.starts_with("gp_two:p_two:"))
    );
    Ok(())
}

/// LangGraph's `test_weather_subgraph` (xray=1): a breakpoint shows under its node's name.
#[test]
fn breakpoints_show_under_the_node_name() -> Result {
    let mut weather = graph_with(&["model_node", "weather_node"]);
    weather
        .add_edge(START, "model_node")
        .add_edge("model_node", "weather_node")
        .add_edge("weather_node", END);
    let weather = weather.compile(CompileOptions::default().interrupt_before(["weather_node"]))?;
    let mut graph = graph_with(&["router_node", "normal_llm_node"]);
    graph
        .add_subgraph("weather_graph", weather)
        .add_edge(START, "router_node")
        .add_conditional_edges(
            "router_node",
            |_: &JsonState| "normal_llm_node",
            ["weather_graph", "normal_llm_node"],
        )
        .add_edge("normal_llm_node", END)
        .add_edge("weather_graph", END);

    assert_eq!(
        compile(graph)?.drawing(1).draw_mermaid(true),
        styled(
            "\t__start__([<p>__start__</p>]):::first\n\
             \trouter_node(router_node)\n\
             \tnormal_llm_node(normal_llm_node)\n\
             \t__end__([<p>__end__</p>]):::last\n\
             \t__start__ --> router_node;\n\
             \trouter_node -.-> normal_llm_node;\n\
             \trouter_node -.-> weather_graph\\3amodel_node;\n\
             \tnormal_llm_node --> __end__;\n\
             \tweather_graph\\3aweather_node --> __end__;\n\
             \tsubgraph weather_graph\n\
             \tweather_graph\\3amodel_node(model_node)\n\
             \tweather_graph\\3aweather_node(weather_node<hr/><small><em>__interrupt = before</em></small>)\n\
             \tweather_graph\\3amodel_node --> weather_graph\\3aweather_node;\n\
             \tend\n"
        )
    );
    Ok(())
}

/// The ASCII drawing: layers from the start, each node boxed once, every edge listed under
/// its source's layer.
#[test]
fn ascii_shows_every_node_and_edge_in_layers() -> Result {
    let mut agent = graph_with(&["agent", "tools"]);
    agent
        .add_edge(START, "agent")
        .add_conditional_edges(
            "agent",
            |_: &JsonState| END,
            [("call", "tools"), (END, END)],
        )
        .add_edge("tools", "agent");
    let agent = compile(agent)?;

    assert_eq!(
        agent.draw_ascii(),
        "+-----------+\n\
         | __start__ |\n\
         +-----------+\n    \
         __start__ --> agent\n\
         +-------+\n\
         | agent |\n\
         +-------+\n    \
         agent -.-> __end__\n    \
         agent -. call .-> tools\n\
         +-------+ +---------+\n\
         | tools | | __end__ |\n\
         +-------+ +---------+\n    \
         tools --> agent\n"
    );
    let drawing = agent.drawing(0);
    let ascii = drawing.draw_ascii();
    for node in &drawing.nodes {
        assert_eq!(ascii.matches(&format!("| {} |", node.id)).count(), 1);
    }
    assert_eq!(
        ascii.lines().filter(|l| l.starts_with("    ")).count(),
        drawing.edges.len()
    );
    Ok(())
}
