#!/usr/bin/env python3
"""Interop fixture: the real LangGraph writes a thread through PostgresSaver.

Usage: python_writes.py DB_URL THREAD_ID OUT_JSON

Builds a StateGraph over a plain-data TypedDict state

    topic: str                                (overwrite)
    count: Annotated[int, operator.add]       (summed)
    items: Annotated[list[str], operator.add] (concatenated)
    notes: dict                               (overwrite)

with three nodes in a chain (START -> a -> b -> c -> END), each updating
several channels. It is compiled with `PostgresSaver.from_conn_string(DB_URL)`
(after `.setup()`), then invoked twice on THREAD_ID with different inputs, so
the history holds two runs (10 checkpoints: per run, the input checkpoint,
the one after START, and one per node).

OUT_JSON is a JSON list, newest first, one entry per snapshot of
`graph.get_state_history({"configurable": {"thread_id": THREAD_ID}})`:

    {
      "checkpoint_id": str,
      "parent_checkpoint_id": str | null,
      "checkpoint_ns": str,
      "metadata": {...},          # StateSnapshot.metadata, as-is
      "values": {...},            # StateSnapshot.values
      "next": [str, ...],         # StateSnapshot.next (nodes due to run)
      # storage level: saver.get_tuple(<config with that checkpoint_id>)
      "channel_values": {...},    # .checkpoint["channel_values"], raw
      "channel_versions": {...},  # .checkpoint["channel_versions"]
      "pending_writes": [[task_id, channel, value], ...]
    }

Determinism: PostgresSaver.get_next_version() draws the fractional part of
every channel version from the global `random` module, so it is seeded
(random.seed(SEED)) and the graph runs with durability="sync" (no background
checkpoint writes): channel versions, metadata and values are then the same
on every run. Checkpoint ids are uuid6 (time-based) and task ids are hashed
from the checkpoint id, so those two differ per run.

Exits non-zero with a message on stderr on any failure.
"""

from __future__ import annotations

import json
import operator
import random
import sys
import traceback
from typing import Annotated, Any, TypedDict

SEED = 20240501


class State(TypedDict):
    topic: str
    count: Annotated[int, operator.add]
    items: Annotated[list[str], operator.add]
    notes: dict[str, Any]


def node_a(state: State) -> dict[str, Any]:
    return {
        "count": 1,
        "items": ["a"],
        "notes": {"last": "a", "seen": state["count"], "flags": [True, None]},
    }


def node_b(state: State) -> dict[str, Any]:
    return {
        "topic": state["topic"] + " / b",
        "count": 10,
        "items": ["b1", "b2"],
        "notes": {**state["notes"], "last": "b", "ratio": 0.5},
    }


def node_c(state: State) -> dict[str, Any]:
    return {
        "topic": state["topic"] + " / c",
        "count": 100,
        "items": ["c"],
        "notes": {**state["notes"], "last": "c", "nested": {"len": len(state["items"])}},
    }


# Two runs on the same thread. The second input leaves `notes` out, so that
# channel keeps its value from the first run until node a overwrites it.
INPUTS: list[dict[str, Any]] = [
    {"topic": "first run", "count": 1, "items": ["in-1"], "notes": {"run": 1}},
    {"topic": "second run — ünïcödé ✓", "count": 2, "items": ["in-2"]},
]


def build_graph(checkpointer: Any) -> Any:
    from langgraph.graph import END, START, StateGraph

    builder = StateGraph(State)
    builder.add_node("a", node_a)
    builder.add_node("b", node_b)
    builder.add_node("c", node_c)
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.add_edge("c", END)
    return builder.compile(checkpointer=checkpointer)


def tuple_storage(saver: Any, config: dict[str, Any]) -> dict[str, Any]:
    """Storage-level view of one checkpoint, via saver.get_tuple."""
    t = saver.get_tuple(config)
    if t is None:
        raise RuntimeError(f"get_tuple found nothing for {config}")
    return {
        "channel_values": t.checkpoint["channel_values"],
        "channel_versions": t.checkpoint["channel_versions"],
        "pending_writes": [list(w) for w in t.pending_writes or []],
    }


def run(db_url: str, thread_id: str, out_path: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    random.seed(SEED)
    config = {"configurable": {"thread_id": thread_id}}
    with PostgresSaver.from_conn_string(db_url) as saver:
        saver.setup()
        if saver.get_tuple(config) is not None:
            raise RuntimeError(f"thread {thread_id!r} already has checkpoints")
        graph = build_graph(saver)
        for inp in INPUTS:
            graph.invoke(inp, config, durability="sync")

        out = []
        for snap in graph.get_state_history(config):
            conf = snap.config["configurable"]
            parent = (snap.parent_config or {}).get("configurable", {})
            entry = {
                "checkpoint_id": conf["checkpoint_id"],
                "parent_checkpoint_id": parent.get("checkpoint_id"),
                "checkpoint_ns": conf["checkpoint_ns"],
                "metadata": snap.metadata,
                "values": snap.values,
                "next": list(snap.next),
            }
            entry.update(tuple_storage(saver, snap.config))
            out.append(entry)

    # Per run: the input checkpoint (source "input"), the one after START
    # (step 0), then one per node.
    expected = len(INPUTS) * (2 + 3)
    if len(out) != expected:
        raise RuntimeError(f"expected {expected} checkpoints in history, got {len(out)}")
    # Strict JSON (no default hook): anything that is not plain data fails here.
    text = json.dumps(out, indent=2, ensure_ascii=False, allow_nan=False)
    with open(out_path, "w", encoding="utf-8") as f:
        f.write(text + "\n")


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(f"usage: {argv[0]} DB_URL THREAD_ID OUT_JSON", file=sys.stderr)
        return 2
    try:
        run(argv[1], argv[2], argv[3])
    except Exception as e:  # noqa: BLE001 - report anything, exit non-zero
        traceback.print_exc()
        print(f"python_writes.py failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
