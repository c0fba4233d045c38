//! Drawing a compiled graph: its nodes and edges as LangGraph's `get_graph` finds them,
//! printed as Mermaid text the way LangGraph's `draw_mermaid` prints it, or as a layered
//! ASCII sketch.
//!
//! The edges are found the way LangGraph finds them: by walking the graph's steps from
//! [`START`] with every declared write applied, fixed edges as solid lines, conditional edges
//! (with their path map) and `Command` destinations as dotted ones. So the drawing shows what
//! LangGraph would show for the same graph, quirks included: a node no walk reaches has no
//! edges, and edges to [`END`] are drawn from the nodes nothing leaves (a fixed edge to END
//! from a node that also routes elsewhere is not drawn, as in LangGraph).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use crate::names::{END, START};

/// How many steps LangGraph's drawing walks before it stops (its `limit` of 250, from step -1).
const STEPS: usize = 251;

/// Characters LangGraph wraps a label in `<p>` for when it starts and ends with one.
const MARKDOWN_SPECIAL: &[char] = &['*', '_', '`'];

/// Words per line of an edge label (LangGraph's `wrap_label_n_words`).
const LABEL_WORDS: usize = 9;

/// A path map's `(key, node)` pairs.
pub(crate) type PathPairs = Vec<(String, String)>;

/// What a compiled graph keeps for drawing: its nodes, edges and routes as built.
#[derive(Debug, Default)]
pub(crate) struct Shape {
    nodes: Vec<ShapeNode>,
    edges: Vec<(String, String)>,
    /// Conditional edges: the source and the path map, if one was given.
    branches: Vec<(String, Option<PathPairs>)>,
    /// Declared `Command` destinations, `(node, target)`.
    destinations: Vec<(String, String)>,
    interrupt_before: Vec<String>,
    interrupt_after: Vec<String>,
}

/// A node as drawn: its name and, for a compiled graph added as a node, that graph's shape.
#[derive(Debug)]
struct ShapeNode {
    name: String,
    subgraph: Option<Arc<Shape>>,
}

impl Shape {
    /// The shape of a graph as `compile` validated it: its nodes (each with its subgraph's
    /// shape, for one added with `add_subgraph`), fixed edges, conditional edges (source and
    /// path map), declared `Command` destinations and static breakpoints.
    pub(crate) fn new(
        nodes: Vec<(String, Option<Arc<Shape>>)>,
        edges: Vec<(String, String)>,
        branches: Vec<(String, Option<PathPairs>)>,
        destinations: Vec<(String, String)>,
        interrupt_before: Vec<String>,
        interrupt_after: Vec<String>,
    ) -> Self {
        Shape {
            nodes: nodes
                .into_iter()
                .map(|(name, subgraph)| ShapeNode { name, subgraph })
                .collect(),
            edges,
            branches,
            destinations,
            interrupt_before,
            interrupt_after,
        }
    }

    /// The targets `node` writes to at every run (fixed edges; END is not written) and the
    /// conditional ones, `(target, label)`, it declares (path maps, destinations; a router
    /// without a path map may go to any node or END).
    fn writes(&self, node: &str) -> (Vec<&str>, Vec<(&str, Option<&str>)>) {
        let fixed = self
            .edges
            .iter()
            .filter(|(from, to)| from == node && to != END)
            .map(|(_, to)| to.as_str())
            .collect();
        let mut conditional = Vec::new();
        for (from, map) in &self.branches {
            if from != node {
                continue;
            }
            match map {
                Some(map) => {
                    conditional.extend(
                        map.iter()
                            .map(|(key, to)| (to.as_str(), Some(key.as_str()))),
                    );
                }
                None => {
                    conditional.extend(self.nodes.iter().map(|n| (n.name.as_str(), None)));
                    conditional.push((END, None));
                }
            }
        }
        conditional.extend(
            self.destinations
                .iter()
                .filter(|(from, _)| from == node)
                .map(|(_, to)| (to.as_str(), None)),
        );
        (fixed, conditional)
    }

    /// The drawing of this graph, with subgraphs drawn inside down to `xray` levels.
    pub(crate) fn drawing(&self, xray: usize) -> Drawing {
        // LangGraph walks the steps with every write applied; a node's conditional writes
        // count once, at its first run, its fixed edges at every run.
        let mut found: BTreeSet<(&str, &str, bool, Option<&str>)> = BTreeSet::new();
        let mut tasks: BTreeSet<&str> = BTreeSet::from([START]);
        let mut last_step = BTreeSet::new();
        let mut routed: HashSet<&str> = HashSet::new();
        for _ in 0..STEPS {
            if tasks.is_empty() {
                break;
            }
            let mut next = BTreeSet::new();
            for &task in &tasks {
                let (fixed, conditional) = self.writes(task);
                for to in fixed {
                    found.insert((task, to, false, None));
                    next.insert(to);
                }
                if routed.insert(task) {
                    for (to, label) in conditional {
                        found.insert((task, to, true, label));
                        if to != END {
                            next.insert(to);
                        }
                    }
                }
            }
            last_step = std::mem::replace(&mut tasks, next);
        }

        let mut drawing = Drawing::default();
        drawing.nodes.push(DrawnNode::new(START, Vec::new()));
        for node in &self.nodes {
            drawing
                .nodes
                .push(DrawnNode::new(&node.name, self.metadata(&node.name)));
        }
        for &(from, to, conditional, label) in &found {
            let label = label.filter(|label| *label != to);
            drawing.add_edge(from, to, label, conditional);
        }
        // Edges to END: from the nodes that are reached but lead nowhere, or else, from the
        // one node of the last step walked.
        let sources: HashSet<&str> = found.iter().map(|edge| edge.0).collect();
        let termini: BTreeSet<&str> = found
            .iter()
            .map(|edge| edge.1)
            .filter(|to| *to != END && !sources.contains(to))
            .collect();
        if !termini.is_empty() {
            for from in termini {
                drawing.add_edge(from, END, None, false);
            }
        } else if last_step.len() == 1
            && !found.iter().any(|edge| edge.1 == END)
            && let Some(from) = last_step.first()
        {
            drawing.add_edge(from, END, None, true);
        }

        if xray > 0 {
            let depth = if xray == usize::MAX { xray } else { xray - 1 };
            for node in &self.nodes {
                if let Some(subgraph) = &node.subgraph {
                    drawing.replace(&node.name, subgraph.drawing(depth));
                }
            }
        }
        drawing
    }

    /// LangGraph's node metadata: `__interrupt` for static breakpoints.
    fn metadata(&self, node: &str) -> Vec<(String, String)> {
        let before = self.interrupt_before.iter().any(|n| n == node);
        let after = self.interrupt_after.iter().any(|n| n == node);
        let when = match (before, after) {
            (true, true) => "before,after",
            (true, false) => "before",
            (false, true) => "after",
            (false, false) => return Vec::new(),
        };
        vec![("__interrupt".to_owned(), when.to_owned())]
    }
}

/// A graph's nodes and edges as drawn (LangGraph's `get_graph()`); see
/// [`CompiledGraph::drawing`](crate::CompiledGraph::drawing).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Drawing {
    /// The nodes: `__start__`, the graph's nodes in the order added, then `__end__` (when an
    /// edge reaches it), then the nodes of subgraphs drawn inside (ids `subgraph:node`).
    pub nodes: Vec<DrawnNode>,
    /// The edges, in LangGraph's order.
    pub edges: Vec<DrawnEdge>,
}

/// A node of a [`Drawing`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DrawnNode {
    /// Its id: the node's name, prefixed by `subgraph:` for each enclosing subgraph.
    pub id: String,
    /// The node's name in its own graph.
    pub name: String,
    /// What LangGraph shows under the name: `__interrupt = before` for a breakpoint.
    pub metadata: Vec<(String, String)>,
}

/// An edge of a [`Drawing`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DrawnEdge {
    /// The id of the node it leaves.
    pub source: String,
    /// The id of the node it reaches.
    pub target: String,
    /// The path map's key leading there, when it is not the target's name.
    pub label: Option<String>,
    /// Whether it is a conditional edge or a `Command` destination (dotted), not a fixed edge.
    pub conditional: bool,
}

impl DrawnNode {
    fn new(name: &str, metadata: Vec<(String, String)>) -> Self {
        DrawnNode {
            id: name.to_owned(),
            name: name.to_owned(),
            metadata,
        }
    }
}

impl Drawing {
    /// Adds an edge unless one joins the same nodes already, adding `__end__` on first use.
    fn add_edge(&mut self, source: &str, target: &str, label: Option<&str>, conditional: bool) {
        if self
            .edges
            .iter()
            .any(|e| e.source == source && e.target == target)
        {
            return;
        }
        if target == END && !self.nodes.iter().any(|n| n.id == END) {
            self.nodes.push(DrawnNode::new(END, Vec::new()));
        }
        self.edges.push(DrawnEdge {
            source: source.to_owned(),
            target: target.to_owned(),
            label: label.map(str::to_owned),
            conditional,
        });
    }

    /// The index of the graph's one node at `end`: the node no edge reaches (first) or leaves
    /// (last), edges from or to `exclude` aside; `None` when there are none or several.
    fn end_node(&self, end: End, exclude: Option<&str>) -> Option<usize> {
        let inward: HashSet<&str> = self
            .edges
            .iter()
            .map(|edge| end.ends(edge))
            .filter(|(outer, _)| Some(*outer) != exclude)
            .map(|(_, inner)| inner)
            .collect();
        let mut found = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| Some(n.id.as_str()) != exclude && !inward.contains(n.id.as_str()));
        match (found.next(), found.next()) {
            (Some((i, _)), None) => Some(i),
            _ => None,
        }
    }

    /// Drops the node at `end` when one edge joins it to the rest and another node would be
    /// at that end without it (LangGraph's `trim_first_node`, `trim_last_node`).
    fn trim(&mut self, end: End) {
        let Some(index) = self.end_node(end, None) else {
            return;
        };
        let id = self.nodes[index].id.clone();
        if self.end_node(end, Some(&id)).is_some()
            && self.edges.iter().filter(|e| end.ends(e).0 == id).count() == 1
        {
            self.nodes.remove(index);
            self.edges.retain(|e| e.source != id && e.target != id);
        }
    }

    /// Draws `subgraph` in place of node `name`, as LangGraph does with `xray`: without its
    /// `__start__` and `__end__` where those are plain, its nodes' ids prefixed `name:`,
    /// and the node's edges moved to the subgraph's first and last nodes.
    fn replace(&mut self, name: &str, mut subgraph: Drawing) {
        if subgraph.nodes.len() <= 1
            || subgraph.end_node(End::First, None).is_none()
            || subgraph.end_node(End::Last, None).is_none()
        {
            return;
        }
        subgraph.trim(End::First);
        subgraph.trim(End::Last);
        let (Some(first), Some(last)) = (
            subgraph.end_node(End::First, None),
            subgraph.end_node(End::Last, None),
        ) else {
            return;
        };
        let prefixed = |id: &str| format!("{name}:{id}");
        let (first, last) = (
            prefixed(&subgraph.nodes[first].id),
            prefixed(&subgraph.nodes[last].id),
        );
        self.nodes.retain(|n| n.id != name);
        for edge in &mut self.edges {
            if edge.source == name {
                edge.source.clone_from(&last);
            }
            if edge.target == name {
                edge.target.clone_from(&first);
            }
        }
        self.nodes
            .extend(subgraph.nodes.into_iter().map(|node| DrawnNode {
                id: prefixed(&node.id),
                ..node
            }));
        self.edges
            .extend(subgraph.edges.into_iter().map(|edge| DrawnEdge {
                source: prefixed(&edge.source),
                target: prefixed(&edge.target),
                ..edge
            }));
    }

    /// Mermaid flowchart text, exactly as LangGraph's `draw_mermaid` prints it: with
    /// `with_styles`, the front matter, each node's shape and the class definitions (first
    /// and last node marked); fixed edges as `-->`, conditional ones as `-.->`, with their
    /// labels; nodes of subgraphs drawn inside in a `subgraph` block each.
    pub fn draw_mermaid(&self, with_styles: bool) -> String {
        let mut out = String::new();
        if with_styles {
            out.push_str("---\nconfig:\n  flowchart:\n    curve: linear\n---\n");
        }
        out.push_str("graph TD;\n");
        let first = self
            .end_node(End::First, None)
            .map(|i| self.nodes[i].id.as_str());
        let last = self
            .end_node(End::Last, None)
            .map(|i| self.nodes[i].id.as_str());
        let node_line = |node: &DrawnNode| -> String {
            let id = safe_id(&node.id);
            let label = node_label(node);
            if Some(node.id.as_str()) == first {
                format!("\t{id}([{label}]):::first\n")
            } else if Some(node.id.as_str()) == last {
                format!("\t{id}([{label}]):::last\n")
            } else {
                format!("\t{id}({label})\n")
            }
        };

        // Nodes whose id has a `:` are drawn inside their deepest subgraph's block.
        let mut nested: Vec<(String, Vec<&DrawnNode>)> = Vec::new();
        for node in &self.nodes {
            match node.id.rsplit_once(':') {
                Some((prefix, _)) => push_grouped(&mut nested, prefix, node),
                None if with_styles => out.push_str(&node_line(node)),
                None => {}
            }
        }
        // Edges are grouped by the parts their ends share (LangGraph's "common prefix").
        let mut groups: Vec<(String, Vec<&DrawnEdge>)> = Vec::new();
        for edge in &self.edges {
            let prefix: Vec<&str> = edge
                .source
                .split(':')
                .zip(edge.target.split(':'))
                .filter(|(s, t)| s == t)
                .map(|(s, _)| s)
                .collect();
            push_grouped(&mut groups, &prefix.join(":"), edge);
        }

        let mut mermaid = Mermaid {
            out,
            with_styles,
            nested: &nested,
            groups: &groups,
            node_line: &node_line,
            seen: HashSet::new(),
        };
        let top: &[&DrawnEdge] = groups
            .iter()
            .find(|(prefix, _)| prefix.is_empty())
            .map_or(&[], |(_, edges)| edges.as_slice());
        mermaid.block("", top);
        for (prefix, edges) in &groups {
            if !prefix.is_empty() && !prefix.contains(':') {
                mermaid.block(prefix, edges);
                mermaid.seen.insert(prefix.clone());
            }
        }
        if with_styles {
            for (prefix, nodes) in &nested {
                if !prefix.contains(':') && mermaid.seen.insert(prefix.clone()) {
                    mermaid.out.push_str(&format!("\tsubgraph {prefix}\n"));
                    for node in nodes {
                        mermaid.out.push_str(&node_line(node));
                    }
                    mermaid.out.push_str("\tend\n");
                }
            }
        }
        let mut out = mermaid.out;
        if with_styles {
            out.push_str(
                "\tclassDef default fill:#f2f0ff,line-height:1.2\n\
                 \tclassDef first fill-opacity:0\n\
                 \tclassDef last fill:#bfb6fc\n",
            );
        }
        out
    }

    /// A layered text drawing: each layer's nodes boxed side by side (a layer is the number
    /// of edges on the shortest way from a first node), under it the edges leaving them
    /// (`-->` fixed, `-.->` conditional, labels as in Mermaid). Every node and edge appears.
    pub fn draw_ascii(&self) -> String {
        let mut layer: BTreeMap<&str, usize> = BTreeMap::new();
        let mut frontier: Vec<&str> = self
            .nodes
            .iter()
            .map(|n| n.id.as_str())
            .filter(|id| !self.edges.iter().any(|e| e.target == *id))
            .collect();
        let mut depth = 0;
        while !frontier.is_empty() {
            let mut next = Vec::new();
            for id in frontier {
                if layer.contains_key(id) {
                    continue;
                }
                layer.insert(id, depth);
                next.extend(
                    self.edges
                        .iter()
                        .filter(|e| e.source == id)
                        .map(|e| e.target.as_str()),
                );
            }
            frontier = next;
            depth += 1;
        }
        // Nodes only a cycle reaches go last, one layer together.
        let mut rows: Vec<Vec<&str>> = vec![Vec::new(); depth + 1];
        for node in &self.nodes {
            let row = layer.get(node.id.as_str()).copied().unwrap_or(depth);
            rows[row].push(&node.id);
        }
        let mut out = String::new();
        for row in rows.iter().filter(|row| !row.is_empty()) {
            let rule: Vec<String> = row
                .iter()
                .map(|id| format!("+{}+", "-".repeat(id.chars().count() + 2)))
                .collect();
            let names: Vec<String> = row.iter().map(|id| format!("| {id} |")).collect();
            let rule = rule.join(" ");
            out.push_str(&format!("{rule}\n{}\n{rule}\n", names.join(" ")));
            for edge in self
                .edges
                .iter()
                .filter(|e| row.contains(&e.source.as_str()))
            {
                let arrow = match (&edge.label, edge.conditional) {
                    (None, false) => " --> ".to_owned(),
                    (None, true) => " -.-> ".to_owned(),
                    (Some(label), false) => format!(" -- {label} --> "),
                    (Some(label), true) => format!(" -. {label} .-> "),
                };
                out.push_str(&format!("    {}{arrow}{}\n", edge.source, edge.target));
            }
        }
        out
    }
}

/// An end of a graph: its first node (no edge in) or its last (no edge out).
#[derive(Clone, Copy)]
enum End {
    First,
    Last,
}

impl End {
    /// An edge's two ends ordered for this end of the graph: source then target for the
    /// first node (never a target), target then source for the last (never a source).
    fn ends(self, edge: &DrawnEdge) -> (&str, &str) {
        match self {
            End::First => (&edge.source, &edge.target),
            End::Last => (&edge.target, &edge.source),
        }
    }
}

/// The Mermaid text being written, with what `draw_mermaid` grouped.
struct Mermaid<'a, F> {
    out: String,
    with_styles: bool,
    nested: &'a [(String, Vec<&'a DrawnNode>)],
    groups: &'a [(String, Vec<&'a DrawnEdge>)],
    node_line: &'a F,
    /// Subgraph blocks already written, by name.
    seen: HashSet<String>,
}

impl<F: Fn(&DrawnNode) -> String> Mermaid<'_, F> {
    /// Writes the block of subgraph `prefix` (none for the top level or a lone self-loop):
    /// its nodes, `edges`, then the blocks of the subgraphs one level inside it.
    fn block(&mut self, prefix: &str, edges: &[&DrawnEdge]) {
        let self_loop = edges.len() == 1 && edges[0].source == edges[0].target;
        let opened = !prefix.is_empty() && !self_loop;
        if opened {
            let name = prefix.rsplit(':').next().unwrap_or(prefix);
            // LangGraph fails on two blocks of one name; a distinct id keeps the text valid.
            if self.seen.insert(name.to_owned()) {
                self.out.push_str(&format!("\tsubgraph {name}\n"));
            } else {
                self.out
                    .push_str(&format!("\tsubgraph {}[{name}]\n", safe_id(prefix)));
            }
            if self.with_styles
                && let Some((_, nodes)) = self.nested.iter().find(|(p, _)| p == prefix)
            {
                for node in nodes {
                    let line = (self.node_line)(node);
                    self.out.push_str(&line);
                }
            }
        }
        for edge in edges {
            self.out.push_str(&format!(
                "\t{}{}{};\n",
                safe_id(&edge.source),
                edge_arrow(edge),
                safe_id(&edge.target)
            ));
        }
        let groups = self.groups;
        for (inner, edges) in groups {
            let Some(rest) = inner
                .strip_prefix(prefix)
                .and_then(|rest| rest.strip_prefix(':'))
            else {
                continue;
            };
            if !rest.contains(':') {
                self.block(inner, edges);
            }
        }
        if opened {
            self.out.push_str("\tend\n");
        }
    }
}

/// Appends `item` to the group of `key`, keeping groups in first-seen order.
fn push_grouped<'a, T>(groups: &mut Vec<(String, Vec<&'a T>)>, key: &str, item: &'a T) {
    match groups.iter_mut().find(|(k, _)| k == key) {
        Some((_, items)) => items.push(item),
        None => groups.push((key.to_owned(), vec![item])),
    }
}

/// A node's Mermaid label: its name (in `<p>` when Markdown would read it), then its metadata.
fn node_label(node: &DrawnNode) -> String {
    let name = node.name.rsplit(':').next().unwrap_or(&node.name);
    let mut label = if name.starts_with(MARKDOWN_SPECIAL) && name.ends_with(MARKDOWN_SPECIAL) {
        format!("<p>{name}</p>")
    } else {
        name.to_owned()
    };
    if !node.metadata.is_empty() {
        let lines: Vec<String> = node
            .metadata
            .iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect();
        label = format!("{label}<hr/><small><em>{}</em></small>", lines.join("\n"));
    }
    label
}

/// An edge's Mermaid arrow with its label, long labels wrapped every nine words.
fn edge_arrow(edge: &DrawnEdge) -> String {
    let Some(label) = &edge.label else {
        return if edge.conditional { " -.-> " } else { " --> " }.to_owned();
    };
    let words: Vec<&str> = label.split_whitespace().collect();
    let text = if words.len() > LABEL_WORDS {
        words
            .chunks(LABEL_WORDS)
            .map(|chunk| chunk.join(" "))
            .collect::<Vec<_>>()
            .join("&nbsp<br>&nbsp")
    } else {
        label.clone()
    };
    if edge.conditional {
        format!(" -. &nbsp;{text}&nbsp; .-> ")
    } else {
        format!(" -- &nbsp;{text}&nbsp; --> ")
    }
}

/// A Mermaid node id: letters, digits, `_` and `-` kept, any other character as `\` and its
/// code point in lowercase hex (LangGraph's `_to_safe_id`), so any name draws.
fn safe_id(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for c in id.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            out.push(c);
        } else {
            out.push_str(&format!("\\{:x}", u32::from(c)));
        }
    }
    out
}
