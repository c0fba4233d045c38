"""A real LangGraph app sharing threads with Waypoint on one PostgreSQL database.

The graph (`build_agent`) is a `MessagesState` ReAct loop: `agent` (a deterministic fake chat
model whose replies carry tool calls, usage_metadata, response_metadata and
additional_kwargs) and `tools` (LangGraph's `ToolNode`), routed by `tools_condition`; then
`research`, a compiled subgraph that fans out with `Send` to `worker`s and asks a human in
`check` (`interrupt()`), and `review`, which asks a human in the parent graph. The state holds a
pydantic v2 model (`Profile`), a dataclass (`Note`), plain str/int fields (stored inline in the
checkpoint row by LangGraph) and appending lists. `build_counter` is a one-node graph for the
concurrent-writers test. Waypoint's copy of both graphs is `tests/src/interop.rs`: same node
names, channels and reducers, same fake model.

Usage (what `tests/src/interop.rs` runs):

    python app.py '<json command>'     # one command, one JSON answer on stdout
    python app.py --serve              # one JSON command per stdin line, one answer per line

Commands (`url` is a PostgreSQL URL, `thread` a thread id):

    {"cmd": "setup", "url": ...}
    {"cmd": "invoke", "url": ..., "thread": ..., "input": INPUT}
    {"cmd": "resume", "url": ..., "thread": ..., "value": ANY}          # Command(resume=ANY)
    {"cmd": "resume", "url": ..., "thread": ..., "by_id": {ID: ANY}}    # resume by interrupt id
    {"cmd": "get_state", "url": ..., "thread": ..., "expect": {"profile": {...}, "note": {...}}}
    {"cmd": "history", "url": ..., "thread": ...}
    {"cmd": "interrupts", "url": ..., "thread": ...}                  # ids and values
    {"cmd": "hammer", "url": ..., "thread": ..., "runs": N, "threads": K}
    {"cmd": "types_check", "url": ..., "thread": ..., "graph": "types"}

`"graph": "counter"` runs a command on the counter graph instead of the agent, `"graph":
"types"` on the types graph (`build_types`; its `invoke` input `{"fill": true}` stores
`python_values()` in `misc`, `{}` only runs the node). `types_check` compares the thread's
`misc` with `python_values()` as LangGraph's serializer reads them back, by Python's `==`
and class at every level.

INPUT is `{"text": ..., "id": ..., "topic": ..., "turns": ..., "profile": {...}, "note":
{...}}` (all optional but `text`): a human message and the fields given. Every answer is a JSON
object; `{"error": ...}` when the command failed. State values are shown field by field as
`view` shows them: each Python object as `{"module", "class", "dump"}` (`model_dump()` for
messages and pydantic models, `asdict()` for dataclasses), plain values as they are.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import datetime
import decimal
import enum
import ipaddress
import json
import math
import operator
import pathlib
import re
import sys
import threading
import traceback
import uuid
from typing import Annotated, Any, Optional

from typing_extensions import TypedDict

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import BaseModel
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, Send, interrupt

# ----------------------------------------------------------------------------------------
# State


class Profile(BaseModel):
    """Who the conversation is with (a pydantic v2 model in the state)."""

    name: str
    tier: int = 1
    tags: list[str] = []


@dataclasses.dataclass
class Note:
    """The agent's last answer, summarised (a dataclass in the state)."""

    text: str
    score: int = 0


class AgentState(MessagesState, total=False):
    """The parent graph's state: messages, inline primitives, Python objects, lists."""

    topic: str
    turns: int
    profile: Optional[Profile]
    note: Optional[Note]
    log: Annotated[list[str], operator.add]
    findings: list[str]
    approved: str
    verdict: str


class ResearchState(TypedDict, total=False):
    """The subgraph's state: `topic`, `findings` and `approved` are shared with the parent."""

    topic: str
    item: int
    drafts: Annotated[list[str], operator.add]
    findings: list[str]
    approved: str


# How many workers `research` fans out to.
WORKERS = 3

# ----------------------------------------------------------------------------------------
# The fake model and the tool


def reply(messages: list[BaseMessage]) -> AIMessage:
    """The model's deterministic answer to a conversation: tool calls for a human message,
    a final answer after tool results."""
    n = len(messages)
    last = messages[-1]
    if isinstance(last, ToolMessage):
        results = []
        for m in reversed(messages):
            if not isinstance(m, ToolMessage):
                break
            results.append(str(m.content))
        results.reverse()
        return AIMessage(
            content="Found: " + "; ".join(results),
            id=f"ai-{n}",
            usage_metadata={"input_tokens": 10 * n, "output_tokens": 7, "total_tokens": 10 * n + 7},
            response_metadata={"model_name": "fake-model", "finish_reason": "stop"},
            additional_kwargs={},
        )
    query = str(last.content)
    return AIMessage(
        content="",
        id=f"ai-{n}",
        tool_calls=[
            {"name": "lookup", "args": {"query": query}, "id": f"call-{n}-0", "type": "tool_call"},
            {
                "name": "lookup",
                "args": {"query": f"{query} history"},
                "id": f"call-{n}-1",
                "type": "tool_call",
            },
        ],
        usage_metadata={
            "input_tokens": 10 * n,
            "output_tokens": 3,
            "total_tokens": 10 * n + 3,
            "input_token_details": {"cache_read": n},
            "output_token_details": {"reasoning": 1},
        },
        response_metadata={"model_name": "fake-model", "finish_reason": "tool_calls"},
        additional_kwargs={"trace": {"calls": 2, "turn": n}},
    )


class FakeToolModel(BaseChatModel):
    """A chat model that answers with `reply`, through LangChain's whole `invoke` path."""

    @property
    def _llm_type(self) -> str:
        return "fake-tool-model"

    def bind_tools(self, tools, **kwargs):  # noqa: ANN001, ANN003
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001, ANN003
        return ChatResult(generations=[ChatGeneration(message=reply(messages))])


@tool
def lookup(query: str) -> str:
    """Look facts up."""
    return f"facts about {query}"


MODEL = FakeToolModel().bind_tools([lookup])

# ----------------------------------------------------------------------------------------
# The graphs


def agent(state: AgentState) -> dict:
    ai = MODEL.invoke(state["messages"])
    update: dict[str, Any] = {"messages": [ai], "log": ["agent"]}
    if not ai.tool_calls:
        update["turns"] = state.get("turns", 0) + 1
        update["note"] = Note(text=str(ai.content), score=len(state["messages"]) + 1)
    return update


def plan(state: ResearchState) -> dict:
    return {"drafts": [f"plan:{state.get('topic', '')}"]}


def fan_out(state: ResearchState) -> list[Send]:
    topic = state.get("topic", "")
    return [Send("worker", {"topic": topic, "item": i}) for i in range(WORKERS)]


def worker(arg: dict) -> dict:
    return {"drafts": [f"{arg['topic']}/{arg['item']}"]}


def check(state: ResearchState) -> dict:
    drafts = state.get("drafts", [])
    answer = interrupt({"question": "approve findings?", "drafts": drafts})
    return {"findings": sorted(drafts), "approved": answer}


def review(state: AgentState) -> dict:
    verdict = interrupt({"question": "publish?", "findings": state.get("findings", [])})
    profile = state.get("profile") or Profile(name="anonymous")
    return {
        "verdict": verdict,
        "profile": Profile(name=profile.name, tier=profile.tier + 1, tags=[*profile.tags, str(verdict)]),
        "log": ["review"],
    }


def build_research():
    builder = StateGraph(ResearchState)
    builder.add_node("plan", plan)
    builder.add_node("worker", worker)
    builder.add_node("check", check)
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", fan_out, ["worker"])
    builder.add_edge("worker", "check")
    builder.add_edge("check", END)
    return builder.compile()


def build_agent(checkpointer):
    builder = StateGraph(AgentState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([lookup]))
    builder.add_node("research", build_research())
    builder.add_node("review", review)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: "research"})
    builder.add_edge("tools", "agent")
    builder.add_edge("research", "review")
    builder.add_edge("review", END)
    return builder.compile(checkpointer=checkpointer)


class CounterState(TypedDict, total=False):
    """The concurrent-writers graph's state."""

    turns: int
    log: Annotated[list[str], operator.add]


def bump(state: CounterState) -> dict:
    return {"turns": state.get("turns", 0) + 1, "log": ["python"]}


def one_node(state_type, node, checkpointer):
    """A graph of `node` alone, from START to END."""
    builder = StateGraph(state_type)
    builder.add_node(node.__name__, node)
    builder.add_edge(START, node.__name__)
    builder.add_edge(node.__name__, END)
    return builder.compile(checkpointer=checkpointer)


def build_counter(checkpointer):
    return one_node(CounterState, bump, checkpointer)


# The types graph: one node, `touch`, on a state whose `misc` holds values of many Python
# types (`python_values`); Python's `touch` leaves `misc` as it is, Waypoint's rewrites it.


class Color(enum.Enum):
    """An enum in the state (one int member, one str member)."""

    RED = 1
    BLUE = "b"


Pair = collections.namedtuple("Pair", "a b")


class TypesState(TypedDict, total=False):
    """The types graph's state."""

    misc: dict
    log: Annotated[list[str], operator.add]


def python_values() -> dict:
    """Values of the types LangGraph's serializer stores, each under its own key."""
    return {
        "datetime_utc": datetime.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=datetime.timezone.utc),
        "datetime_offset": datetime.datetime(
            2024, 5, 6, 7, 8, 9, tzinfo=datetime.timezone(datetime.timedelta(hours=5, minutes=30))
        ),
        "datetime_naive": datetime.datetime(2024, 5, 6, 7, 8, 9),
        "date": datetime.date(2024, 1, 2),
        "time": datetime.time(3, 4, 5, 6),
        "timedelta": datetime.timedelta(days=1, seconds=2, microseconds=3),
        "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "decimal": decimal.Decimal("1.10"),
        "set": {1, 2, 3},
        "frozenset": frozenset({"a"}),
        "tuple": (1, "x", None),
        "bytes": b"\x00\xff",
        "enum_str": Color.BLUE,
        "enum_int": Color.RED,
        "model": Profile(name="n", tier=2, tags=["t"]),
        "dataclass": Note(text="kept", score=3),
        "namedtuple": Pair(1, 2),
        "path": pathlib.Path("/tmp/x"),
        "ip": ipaddress.IPv4Address("10.0.0.1"),
        "pattern": re.compile("a+b", re.I),
        "int_min": -(2**63),
        "int_max": 2**64 - 1,
        "float": 0.1,
        "nan": float("nan"),
        "inf": float("inf"),
        "minus_inf": float("-inf"),
        "non_str_keys": {1: "one", (2, 3): "tuple"},
        "nested": [[[{"k": [1, {"deep": (4, 5)}]}]]],
        "unicode": "h\u00e9llo \u2603 \U0001F600",
    }


def same(a: Any, b: Any) -> bool:
    """`a == b` with the same class at every level (a NaN is the same as a NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def touch(state: TypesState) -> dict:
    return {"log": ["python"]}


def build_types(checkpointer):
    return one_node(TypesState, touch, checkpointer)


def types_check(graph, serde, config: dict) -> dict:
    """Which of `python_values` the thread's `misc` holds as LangGraph's own serializer gives
    them back (class and value: a tuple comes back a list), which it holds otherwise (their
    repr), and the keys it holds besides."""
    values = graph.get_state(config).values
    misc = values.get("misc") or {}
    expected = serde.loads_typed(serde.dumps_typed(python_values()))
    return {
        "same": sorted(k for k, v in expected.items() if k in misc and same(misc[k], v)),
        "changed": {k: repr(misc[k]) for k, v in expected.items() if k in misc and not same(misc[k], v)},
        "missing": sorted(k for k in expected if k not in misc),
        "extra": {str(k): repr(v) for k, v in misc.items() if k not in expected},
        "log": list(values.get("log") or []),
    }


# ----------------------------------------------------------------------------------------
# Showing values


def view(value: Any) -> Any:
    """A JSON form of a state value that keeps every Python object's class."""
    if isinstance(value, BaseModel):  # messages and pydantic models
        return {
            "module": type(value).__module__,
            "class": type(value).__qualname__,
            "dump": plain(value.model_dump()),
        }
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            "module": type(value).__module__,
            "class": type(value).__qualname__,
            "dump": plain(dataclasses.asdict(value)),
        }
    if isinstance(value, dict):
        return {str(k): view(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [view(v) for v in value]
    return plain(value)


def plain(value: Any) -> Any:
    """`value` as JSON-ready data (objects JSON has no form for: their repr; NaN and infinite
    floats: `"NaN"`, `"Infinity"`, `"-Infinity"`)."""
    return json.loads(json.dumps(value, default=repr), parse_constant=str)


def interrupts_of(items) -> list[dict]:
    return [{"id": i.id, "value": plain(i.value)} for i in items]


def snapshot_view(snapshot, expect: dict | None = None) -> dict:
    values = snapshot.values or {}
    out = {
        "values": view(dict(values)),
        "next": list(snapshot.next),
        "checkpoint_id": snapshot.config["configurable"].get("checkpoint_id"),
        "checkpoint_ns": snapshot.config["configurable"].get("checkpoint_ns", ""),
        "parent_checkpoint_id": (snapshot.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
        "metadata": plain(snapshot.metadata),
        "interrupts": interrupts_of(getattr(snapshot, "interrupts", ())),
        "tasks": [
            {
                "id": t.id,
                "name": t.name,
                "interrupts": interrupts_of(t.interrupts),
                "error": repr(t.error) if t.error else None,
            }
            for t in snapshot.tasks
        ],
    }
    if expect is not None:
        # Python's own `==`: the objects read are of the expected class and equal.
        equal = {}
        if "profile" in expect:
            equal["profile"] = values.get("profile") == Profile(**expect["profile"])
        if "note" in expect:
            equal["note"] = values.get("note") == Note(**expect["note"])
        out["equal"] = equal
    return out


# ----------------------------------------------------------------------------------------
# Commands


@contextlib.contextmanager
def open_saver(url: str):
    """LangGraph's `PostgresSaver` on `url`, allowed to revive this app's classes without a
    warning (langgraph-checkpoint 4.x; 2.x revives every class anyway)."""
    with PostgresSaver.from_conn_string(url) as saver:
        try:
            saver.serde = JsonPlusSerializer(
                allowed_msgpack_modules=[("app", "Profile"), ("app", "Note"), ("app", "Color"), ("app", "Pair")]
            )
        except TypeError:
            pass
        yield saver


def make_input(spec: dict) -> dict:
    update: dict[str, Any] = {}
    if "text" in spec:
        update["messages"] = [HumanMessage(content=spec["text"], id=spec.get("id"))]
    for key in ("topic", "turns"):
        if key in spec:
            update[key] = spec[key]
    if "profile" in spec:
        update["profile"] = Profile(**spec["profile"])
    if "note" in spec:
        update["note"] = Note(**spec["note"])
    return update


def config_of(cmd: dict) -> dict:
    return {"configurable": {"thread_id": cmd["thread"]}, "metadata": {"writer": "python"}}


def run_outcome(graph, config: dict, output: Any) -> dict:
    state = graph.get_state(config)
    values = {k: v for k, v in dict(output).items() if k != "__interrupt__"}
    return {
        "values": view(values),
        "next": list(state.next),
        "interrupts": interrupts_of(getattr(state, "interrupts", ())),
    }


def hammer(url: str, thread: str, runs: int, threads: int) -> dict:
    """`runs` runs of the counter graph on one thread from `threads` threads at once."""
    done = [0]
    errors: list[str] = []
    lock = threading.Lock()

    def loop(count: int) -> None:
        with open_saver(url) as saver:
            graph = build_counter(saver)
            config = {"configurable": {"thread_id": thread}, "metadata": {"writer": "python"}}
            for _ in range(count):
                try:
                    graph.invoke({"log": []}, config)
                    with lock:
                        done[0] += 1
                except Exception as e:  # noqa: BLE001 - counted and reported
                    with lock:
                        errors.append(repr(e))

    share = [runs // threads + (1 if i < runs % threads else 0) for i in range(threads)]
    workers = [threading.Thread(target=loop, args=(n,)) for n in share]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return {"committed": done[0], "errors": errors[:5], "failed": len(errors)}


def execute(cmd: dict) -> dict:
    kind = cmd.get("cmd")
    url = cmd["url"]
    if kind == "hammer":
        return hammer(url, cmd["thread"], int(cmd["runs"]), int(cmd.get("threads", 4)))
    with open_saver(url) as saver:
        if kind == "setup":
            saver.setup()
            return {"ok": True}
        builds = {"counter": build_counter, "types": build_types}
        graph = builds.get(cmd.get("graph"), build_agent)(saver)
        config = config_of(cmd)
        if kind == "types_check":
            return types_check(graph, saver.serde, config)
        if kind == "invoke":
            spec = cmd.get("input")
            if cmd.get("graph") == "counter":
                data = {"log": []}
            elif cmd.get("graph") == "types":
                data = {"misc": python_values(), "log": []} if spec.get("fill") else {"log": []}
            else:
                data = make_input(spec) if spec is not None else None
            output = graph.invoke(data, config)
            return run_outcome(graph, config, output)
        if kind == "resume":
            resume = cmd["by_id"] if "by_id" in cmd else cmd.get("value")
            output = graph.invoke(Command(resume=resume), config)
            return run_outcome(graph, config, output)
        if kind == "get_state":
            snapshot = graph.get_state(config, subgraphs=bool(cmd.get("subgraphs")))
            out = snapshot_view(snapshot, cmd.get("expect"))
            out["subgraph_states"] = [
                snapshot_view(t.state) for t in snapshot.tasks if getattr(t, "state", None) is not None
            ]
            return out
        if kind == "interrupts":
            # The pending interrupts, the subgraphs' included (they surface in the parent).
            snapshot = graph.get_state(config, subgraphs=True)
            found = interrupts_of(getattr(snapshot, "interrupts", ()))
            for task in snapshot.tasks:
                if getattr(task, "state", None) is not None:
                    found += interrupts_of(getattr(task.state, "interrupts", ()))
            unique = {i["id"]: i for i in found}
            return {"interrupts": list(unique.values())}
        if kind == "history":
            return {"history": [snapshot_view(s) for s in graph.get_state_history(config)]}
    return {"error": f"unknown command {kind!r}"}


def answer(line: str) -> str:
    try:
        return json.dumps(execute(json.loads(line)))
    except Exception as e:  # noqa: BLE001 - the caller sees what failed
        return json.dumps({"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})


def main() -> None:
    args = sys.argv[1:]
    if args == ["--serve"]:
        for line in sys.stdin:
            if line.strip():
                print(answer(line), flush=True)
        return
    line = args[0] if args else sys.stdin.read()
    print(answer(line), flush=True)


if __name__ == "__main__":
    # Run as the module `app`, so the classes stored in checkpoints are `app.Profile` and
    # `app.Note` whether this file is run or imported.
    import app

    app.main()
