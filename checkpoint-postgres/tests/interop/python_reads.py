#!/usr/bin/env python3
"""Interop fixture: the real LangGraph PostgresSaver reads a thread (e.g. one Rust wrote).

Usage: python_reads.py DB_URL THREAD_ID OUT_JSON

Opens `PostgresSaver.from_conn_string(DB_URL)`, runs `.setup()` (idempotent:
it only applies migrations that are missing), and writes OUT_JSON:

    {
      "tuples": [T, ...],   # list(saver.list({"configurable": {"thread_id": THREAD_ID}})),
                            # newest first (all namespaces)
      "latest": T | null    # saver.get_tuple({"configurable": {"thread_id": THREAD_ID,
                            #                                   "checkpoint_ns": ""}})
    }

where each T is

    {
      "checkpoint_id": str,
      "parent_checkpoint_id": str | null,
      "checkpoint_ns": str,
      "metadata": {...},
      "channel_values": {...},
      "channel_versions": {...},
      "pending_writes": [[task_id, channel, value], ...],
      # the rest of the checkpoint dict, null when absent:
      "v": int, "ts": str, "versions_seen": {...}, "updated_channels": [...] | null
    }

The values must decode to plain data (maps with str keys, arrays, str, int,
float, bool, null); anything else (bytes, non-str map keys, NaN, objects)
is reported with its path instead of being coerced, since json.dumps would
silently turn an int key into a str. An unknown thread gives
{"tuples": [], "latest": null}.

Exits non-zero with a message on stderr on any failure.
"""

from __future__ import annotations

import json
import math
import sys
import traceback
from typing import Any


class NotPlainData(Exception):
    pass


def check_plain(value: Any, path: str) -> None:
    """Raise NotPlainData (with a path) unless value is JSON-representable as-is."""
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotPlainData(f"{path}: non-finite float {value!r}")
        return
    if isinstance(value, list):
        for i, v in enumerate(value):
            check_plain(v, f"{path}[{i}]")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise NotPlainData(f"{path}: map key {k!r} is a {type(k).__name__}, not a str")
            check_plain(v, f"{path}.{k}")
        return
    raise NotPlainData(f"{path}: {type(value).__name__} is not plain data: {value!r:.200}")


def tuple_json(t: Any) -> dict[str, Any]:
    conf = t.config["configurable"]
    parent = (t.parent_config or {}).get("configurable", {})
    cp = t.checkpoint
    out = {
        "checkpoint_id": conf["checkpoint_id"],
        "parent_checkpoint_id": parent.get("checkpoint_id"),
        "checkpoint_ns": conf["checkpoint_ns"],
        "metadata": t.metadata,
        "channel_values": cp["channel_values"],
        "channel_versions": cp["channel_versions"],
        "pending_writes": [list(w) for w in t.pending_writes or []],
        "v": cp.get("v"),
        "ts": cp.get("ts"),
        "versions_seen": cp.get("versions_seen"),
        "updated_channels": cp.get("updated_channels"),
    }
    check_plain(out, f"checkpoint {conf['checkpoint_id']!r} (ns {conf['checkpoint_ns']!r})")
    return out


def run(db_url: str, thread_id: str, out_path: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(db_url) as saver:
        saver.setup()
        tuples = [
            tuple_json(t) for t in saver.list({"configurable": {"thread_id": thread_id}})
        ]
        latest = saver.get_tuple(
            {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        )
        out = {
            "tuples": tuples,
            "latest": tuple_json(latest) if latest is not None else None,
        }
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
        print(f"python_reads.py failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
