"""Task ids, task paths, subgraph namespaces and interrupt ids as real LangGraph derives them.

Runs a graph with Send fan-out, a node that interrupts twice, a subgraph that interrupts and a
node that calls a subgraph twice, on an InMemorySaver, resumes it to the end, and prints JSON:
every task of every checkpoint (id, name, path, what its id derives from), the task paths
stored with writes, the checkpoint namespaces written, the interrupts with the namespace of the
task that raised them, and direct calls of LangGraph's id functions. Works with langgraph
1.2.x and 0.6.x.
"""

import json
import operator
import sys
from typing import Annotated, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.pregel import _algo
from langgraph.types import Command, Send, interrupt
from xxhash import xxh3_128_hexdigest

try:  # langgraph >= 1.0: an interrupt's id also counts the answers its task already has
    from langgraph.types import _interrupt_id
except ImportError:  # 0.6: every interrupt of a task has the namespace's hash
    def _interrupt_id(ns, answered):
        return xxh3_128_hexdigest(ns.encode())

raised = []  # (task checkpoint ns, answers the task had, interrupt value)


def ask(value, answered):
    raised.append((get_config()["configurable"]["checkpoint_ns"], answered, value))
    return interrupt(value)


class Sub(TypedDict, total=False):
    answers: Annotated[list, operator.add]


def sub_ask(state):
    return {"answers": [ask("sub?", 0)]}


sub = StateGraph(Sub)
sub.add_node("sub_ask", sub_ask)
sub.add_edge(START, "sub_ask")
sub.add_edge("sub_ask", END)
sub = sub.compile()


class Echo(TypedDict, total=False):
    n: int


echo = StateGraph(Echo)
echo.add_node("bump", lambda s: {"n": s.get("n", 0) + 1})
echo.add_edge(START, "bump")
echo.add_edge("bump", END)
echo = echo.compile()


class S(TypedDict, total=False):
    items: list
    log: Annotated[list, operator.add]
    answers: Annotated[list, operator.add]
    item: str


def gate(state):
    first = ask("first?", 0)
    second = ask("second?", 1)
    return {"answers": [first, second]}


def twice(state):
    a = echo.invoke({"n": 0})
    b = echo.invoke({"n": a["n"]})
    return {"log": [f"twice {b['n']}"]}


g = StateGraph(S)
g.add_node("plan", lambda s: {"items": ["x", "y", "z"]})
g.add_node("work", lambda s: {"log": [f"work {s['item']}"]})
g.add_node("gate", gate)
g.add_node("sub", sub)
g.add_node("twice", twice)
g.add_edge(START, "plan")
g.add_conditional_edges(
    "plan", lambda s: [Send("work", {"item": i}) for i in s["items"]] + ["gate"], ["work", "gate"]
)
g.add_edge("gate", "sub")
g.add_edge("gate", "twice")
g.add_edge("work", END)
g.add_edge("sub", END)
g.add_edge("twice", END)
saver = InMemorySaver()
graph = g.compile(checkpointer=saver)
config = {"configurable": {"thread_id": "t"}}
graph.invoke({"log": []}, config)
for answer in ["a1", "a2", "s1"]:
    graph.invoke(Command(resume=answer), config)


def jsonable_path(path):
    return [jsonable_path(p) if isinstance(p, tuple) else p for p in path]


tasks = []
namespaces = sorted({t.config["configurable"]["checkpoint_ns"] for t in saver.list(config)})
for ns in namespaces:
    for tup in saver.list({"configurable": {"thread_id": "t", "checkpoint_ns": ns}}):
        snap = graph.get_state(tup.config)
        for task in snap.tasks:
            tasks.append(
                {
                    "checkpoint_id": tup.checkpoint["id"],
                    "v": tup.checkpoint["v"],
                    "ns": ns,
                    "step": tup.metadata["step"] + 1,
                    "name": task.name,
                    "path": jsonable_path(task.path),
                    "path_str": _algo.task_path_str(task.path[:3]),
                    "id": task.id,
                }
            )

stored_paths = {}
for writes in saver.writes.values():
    for write in writes.values():
        if len(write) > 3 and write[3]:
            stored_paths[write[0]] = write[3]

interrupts = []
for ns, answered, value in raised:
    interrupts.append({"task_ns": ns, "answered": answered, "value": value})
seen = {}
for tup in saver.list(config):
    for task_id, channel, value in tup.pending_writes:
        if channel == "__interrupt__":
            for i in value if isinstance(value, (list, tuple)) else [value]:
                seen[json.dumps(i.value)] = i.id
for entry in interrupts:
    entry["id"] = seen.get(json.dumps(entry["value"]))
    entry["expected"] = _interrupt_id(entry["task_ns"], entry["answered"])

cid = "1f0b2c3d-4e5f-6789-8abc-def012345678"
direct = []
for ns, step, name, kind, last in [
    ("", 0, "__start__", "__pregel_pull", "__start__"),
    ("", 3, "agent", "__pregel_pull", "branch:to:agent"),
    ("outer:0c0f3a1e-2b4d-5e6f-7a8b-9c0d1e2f3a4b", 7, "inner", "__pregel_push", "12"),
    ("a:1|b:2|3", -1, "ünïcode", "__pregel_pull", "branch:to:ünïcode"),
]:
    scoped = f"{ns}|{name}" if ns else name
    raw = bytes.fromhex(cid.replace("-", ""))
    parts = (scoped, str(step), name, kind, last)
    direct.append(
        {
            "checkpoint_id": cid,
            "ns": ns,
            "step": step,
            "name": name,
            "kind": kind,
            "last": last,
            "xxh3": _algo._xxhash_str(raw, *parts),
            "sha1": _algo._uuid5_str(raw, *parts),
        }
    )
hashes = {text: xxh3_128_hexdigest(text.encode()) for text in ["", "a:b", "gate:1|2", "ünïcode"]}

json.dump(
    {
        "tasks": tasks,
        "stored_paths": stored_paths,
        "namespaces": namespaces,
        "interrupts": interrupts,
        "direct": direct,
        "hashes": hashes,
        "final": graph.get_state(config).values,
    },
    sys.stdout,
)
