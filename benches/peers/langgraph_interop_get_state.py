#!/usr/bin/env python3
"""Peer benchmark: LangGraph's `get_state` of a 200-message thread on PostgresSaver.

The Python half of `benches/interop_get_state.rs`, which reads the same thread through
Waypoint and times both back to back. It can also run alone (`all`).

Thread (written by real graph runs, nothing hand-built):

  * State: LangGraph's `MessagesState` (`messages` under `add_messages`).
  * Graph: START -> agent; agent -> tools_condition -> tools | END; tools -> agent.
    `agent` is a deterministic fake model: after a human message it answers with an
    `AIMessage` carrying one tool call, after a tool result with a final answer. Both carry
    OpenAI-shaped `usage_metadata` (with token details) and `response_metadata`
    (`token_usage`, `model_name`, `system_fingerprint`, `id`, `finish_reason`, ...), and an id
    `chatcmpl-<hex>`. `tools` is LangGraph's `ToolNode` around a `@tool` whose result is
    ~200 chars; `add_messages` gives the human and tool messages their uuid4 ids.
  * 50 invocations `graph.invoke({"messages": [HumanMessage(...)]}, config)` on one thread,
    default durability: 4 messages each (human, AI with a tool call, tool, AI), 200 in all.
    Every content is ~200 chars of words drawn by `random.Random(18)`.

Timing: `graph.get_state(config)` of that thread on a `PostgresSaver` opened with
`from_conn_string` (one connection, as LangGraph's docs open it), through a freshly compiled
copy of the graph. One untimed warm-up call, then the number of calls per repeat is calibrated
(doubling until a repeat takes >= 0.2 s, then scaled to --target seconds); --repeats repeats;
the cyclic GC is collected first and off while timing, as `timeit` does. Each repeat gives a
per-call time; the JSON carries them all, their median and best.

Commands (each prints one JSON object on stdout):

    build --url DB_URL [--thread ID]            # setup(), write the thread, show its messages
    time  --url DB_URL --thread ID [--repeats N] [--target S]
    all   [--url SERVER_URL] [...]              # throwaway database: build, time, drop

`build` answers `{"thread_id", "checkpoint_id", "next", "messages": [{"module", "class",
"dump"}], "build_s", "versions"}` (`dump` is `model_dump()` as JSON). `time` answers
`{"per_call_s", "median_s", "best_s", "iterations", "repeats", "n_messages", "checkpoint_id",
"versions"}` and checks that the state it timed holds the 200 messages. DB_URL is a database
LangGraph may create its tables in; `all` takes a server URL (a role with CREATEDB, default
$WAYPOINT_TEST_POSTGRES_URL) and makes a `peer_bench_<hex>` database it drops at the end.

Usage (from the repo root):
    source scripts/python.sh && langgraph_venv     # pinned LangGraph venv
    "$WAYPOINT_TEST_PYTHON" benches/peers/langgraph_interop_get_state.py all
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import time
import uuid
from importlib.metadata import version
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

INVOCATIONS = 50
MESSAGES_PER_INVOCATION = 4
N_MESSAGES = INVOCATIONS * MESSAGES_PER_INVOCATION
CONTENT_CHARS = 200
SEED = 18
MODEL = "gpt-4o-mini-2024-07-18"

WORDS = (
    "the order shipment invoice customer account refund delivery warehouse status "
    "tracking number address payment card balance schedule carrier package weight "
    "region policy return window discount code loyalty tier support ticket agent "
    "priority escalation summary history update confirm cancel replace product "
    "stock level estimate arrival notice label receipt total tax currency euro"
).split()


def text(rng: random.Random, prefix: str = "") -> str:
    """~CONTENT_CHARS chars: `prefix`, then seeded words."""
    out = prefix
    while len(out) < CONTENT_CHARS:
        out += (" " if out else "") + WORDS[rng.randrange(len(WORDS))]
    return out[:CONTENT_CHARS].rstrip() + "."


def usage(rng: random.Random, prompt: int, completion: int) -> dict[str, Any]:
    return {
        "input_tokens": prompt,
        "output_tokens": completion,
        "total_tokens": prompt + completion,
        "input_token_details": {"audio": 0, "cache_read": rng.randrange(0, prompt, 64)},
        "output_token_details": {"audio": 0, "reasoning": 0},
    }


def response_metadata(rng: random.Random, u: dict[str, Any], finish: str, rid: str) -> dict:
    return {
        "token_usage": {
            "completion_tokens": u["output_tokens"],
            "prompt_tokens": u["input_tokens"],
            "total_tokens": u["total_tokens"],
            "completion_tokens_details": {
                "accepted_prediction_tokens": 0,
                "audio_tokens": 0,
                "reasoning_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
            "prompt_tokens_details": {
                "audio_tokens": 0,
                "cached_tokens": u["input_token_details"]["cache_read"],
            },
        },
        "model_provider": "openai",
        "model_name": MODEL,
        "system_fingerprint": f"fp_{rng.getrandbits(40):010x}",
        "id": rid,
        "service_tier": "default",
        "finish_reason": finish,
        "logprobs": None,
    }


def agent(state: MessagesState) -> dict:
    """The fake model: a tool call after a human message, an answer after a tool result.

    Seeded by the conversation's length, so a rebuild writes the same AI messages."""
    messages = state["messages"]
    n = len(messages)
    rng = random.Random(SEED * 1_000_003 + n)
    rid = f"chatcmpl-{rng.getrandbits(96):024x}"
    prompt = 40 * n + rng.randrange(50, 100)
    if isinstance(messages[-1], HumanMessage):
        u = usage(rng, prompt, rng.randrange(20, 40))
        query = " ".join(str(messages[-1].content).split()[:6])
        ai = AIMessage(
            content=text(rng, "Let me look that up for you."),
            id=rid,
            tool_calls=[
                {
                    "name": "search_orders",
                    "args": {"query": query, "limit": 5, "include_history": True},
                    "id": f"call_{rng.getrandbits(96):024x}",
                    "type": "tool_call",
                }
            ],
            usage_metadata=u,
            response_metadata=response_metadata(rng, u, "tool_calls", rid),
        )
    else:
        u = usage(rng, prompt, rng.randrange(40, 80))
        ai = AIMessage(
            content=text(rng, "Here is what I found."),
            id=rid,
            usage_metadata=u,
            response_metadata=response_metadata(rng, u, "stop", rid),
        )
    return {"messages": [ai]}


@tool
def search_orders(query: str, limit: int = 5, include_history: bool = False) -> str:
    """Search the order database."""
    rng = random.Random(f"{query}/{limit}/{include_history}")
    return text(rng, f"{limit} results for '{query}':")


def build_graph() -> StateGraph:
    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([search_orders]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    builder.add_edge("tools", "agent")
    return builder


def config_of(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def plain(value: Any) -> Any:
    """`value` as JSON-ready data."""
    return json.loads(json.dumps(value, default=repr))


def view(message: Any) -> dict[str, Any]:
    cls = type(message)
    return {"module": cls.__module__, "class": cls.__name__, "dump": plain(message.model_dump())}


def versions() -> dict[str, str]:
    return {
        pkg: version(pkg)
        for pkg in (
            "langgraph",
            "langgraph-checkpoint",
            "langgraph-checkpoint-postgres",
            "langchain-core",
            "ormsgpack",
            "psycopg",
        )
    }


def build(url: str, thread_id: str | None) -> dict[str, Any]:
    thread_id = thread_id or f"interop-get-state-{uuid.uuid4()}"
    rng = random.Random(SEED)
    start = time.perf_counter()
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        graph = build_graph().compile(checkpointer=saver)
        config = config_of(thread_id)
        for i in range(INVOCATIONS):
            graph.invoke({"messages": [HumanMessage(content=text(rng, f"Turn {i}:"))]}, config)
        build_s = time.perf_counter() - start
        state = graph.get_state(config)
    messages = state.values["messages"]
    kinds = [type(m) for m in messages]
    assert len(messages) == N_MESSAGES, len(messages)
    assert kinds == [HumanMessage, AIMessage, ToolMessage, AIMessage] * INVOCATIONS, kinds[:8]
    assert all(m.id for m in messages)
    assert state.next == (), state.next
    return {
        "thread_id": thread_id,
        "checkpoint_id": state.config["configurable"]["checkpoint_id"],
        "next": list(state.next),
        "messages": [view(m) for m in messages],
        "build_s": build_s,
        "versions": versions(),
    }


class NoGC:
    """The cyclic GC collected, then off inside the block (as timeit does)."""

    def __enter__(self) -> None:
        gc.collect()
        self.was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was_enabled:
            gc.enable()


def time_get_state(url: str, thread_id: str, repeats: int, target: float) -> dict[str, Any]:
    config = config_of(thread_id)
    with PostgresSaver.from_conn_string(url) as saver:
        graph = build_graph().compile(checkpointer=saver)
        get_state = graph.get_state
        state = get_state(config)  # warm-up, and what the timed calls read
        n = len(state.values["messages"])
        if n != N_MESSAGES:
            raise SystemExit(f"thread {thread_id} holds {n} messages, not {N_MESSAGES}")
        clock = time.perf_counter

        def run(iterations: int) -> float:
            t0 = clock()
            for _ in range(iterations):
                get_state(config)
            return clock() - t0

        with NoGC():
            iterations = 1
            while (elapsed := run(iterations)) < 0.2:
                iterations *= 2
            iterations = max(1, round(iterations * target / elapsed))
        per_call = []
        for _ in range(repeats):
            with NoGC():
                per_call.append(run(iterations) / iterations)
        last = get_state(config)
    assert [m.id for m in last.values["messages"]] == [m.id for m in state.values["messages"]]
    return {
        "per_call_s": per_call,
        "median_s": statistics.median(per_call),
        "best_s": min(per_call),
        "iterations": iterations,
        "repeats": repeats,
        "n_messages": n,
        "checkpoint_id": state.config["configurable"]["checkpoint_id"],
        "versions": versions(),
    }


def run_all(server: str, repeats: int, target: float) -> dict[str, Any]:
    name = f"peer_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        url = make_conninfo(server, dbname=name)
        built = build(url, None)
        timed = time_get_state(url, built["thread_id"], repeats, target)
        return {"build_s": built["build_s"], "database": name, **timed}
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["build", "time", "all"], nargs="?", default="all")
    ap.add_argument("--url", default=None, help="database URL (build, time); server URL (all)")
    ap.add_argument("--thread", default=None, help="thread id (time: required)")
    ap.add_argument("--repeats", type=int, default=5, help="timed repeats (default 5)")
    ap.add_argument("--target", type=float, default=0.5, help="seconds per repeat (default 0.5)")
    args = ap.parse_args()
    url = args.url or os.environ.get("WAYPOINT_TEST_POSTGRES_URL")
    if not url:
        ap.error("no --url and WAYPOINT_TEST_POSTGRES_URL is not set")
    if args.repeats < 1 or args.target <= 0:
        ap.error("--repeats must be >= 1 and --target > 0")
    if args.command == "build":
        out = build(url, args.thread)
    elif args.command == "time":
        if not args.thread:
            ap.error("time needs --thread")
        out = time_get_state(url, args.thread, args.repeats, args.target)
    else:
        out = run_all(url, args.repeats, args.target)
    json.dump(out, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
