#!/usr/bin/env python3
"""Interop fixture: LangGraph's own PostgresStore edits items on command, while a Waypoint
store is open on the same database.

Usage: python_store_edits.py DB_URL

Runs `PostgresStore.from_conn_string(DB_URL)` and `.setup()`, prints {"ready": true}, then
reads one JSON command per line on stdin and answers each with one JSON line on stdout once
the write has committed (the connection autocommits):

    {"op": "put", "namespace": [...], "key": str, "value": {...}, "ttl": minutes | null}
        -> {"ok": true, "updated_at": ISO 8601}      (store.put, then store.get)
    {"op": "delete", "namespace": [...], "key": str}
        -> {"ok": true}                              (store.delete)
    {"op": "sweep"}
        -> {"ok": true, "swept": n}                  (store.sweep_ttl)

An empty line or end of input ends it. Exits non-zero on any failure.
"""

from __future__ import annotations

import json
import sys

from langgraph.store.postgres import PostgresStore


def answer(payload: dict) -> None:
    sys.stdout.write(json.dumps(payload) + "\n")
    sys.stdout.flush()


def main() -> None:
    url = sys.argv[1]
    with PostgresStore.from_conn_string(url) as store:
        store.setup()
        answer({"ready": True})
        for line in sys.stdin:
            if not line.strip():
                break
            command = json.loads(line)
            op = command["op"]
            if op == "put":
                namespace = tuple(command["namespace"])
                ttl = command.get("ttl")
                if ttl is None:
                    store.put(namespace, command["key"], command["value"])
                else:
                    store.put(namespace, command["key"], command["value"], ttl=ttl)
                item = store.get(namespace, command["key"], refresh_ttl=False)
                if item is None:
                    raise SystemExit("an item just put is missing")
                answer({"ok": True, "updated_at": item.updated_at.isoformat()})
            elif op == "delete":
                store.delete(tuple(command["namespace"]), command["key"])
                answer({"ok": True})
            elif op == "sweep":
                answer({"ok": True, "swept": store.sweep_ttl()})
            else:
                raise SystemExit(f"unknown command {op!r}")


if __name__ == "__main__":
    main()
