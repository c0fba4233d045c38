#!/usr/bin/env python3
"""Interop fixture: LangGraph's own PostgresStore reads items (e.g. ones Rust wrote).

Usage: python_store_reads.py DB_URL IN_JSON OUT_JSON

IN_JSON: {"get": [[namespace, key], ...], "search_prefix": [...], "filter": {...}}.
Runs `.setup()` (idempotent: only missing migrations run), then writes OUT_JSON:

    {
      "get": [I | null, ...],   # store.get of each, no TTL refresh
      "search": [I, ...],       # store.search(search_prefix, limit=100), newest first
      "filtered": [I, ...],     # the same search with filter
      "ttl_item": I | null      # store.get(("interop", "rs"), "ttl"), refreshing its TTL
    }

with I as in python_store_writes.py; finally deletes ("interop", "rs") / "one".
Exits non-zero on any failure.
"""

from __future__ import annotations

import json
import sys

from langgraph.store.postgres import PostgresStore


def item_json(item) -> dict | None:
    if item is None:
        return None
    return {
        "namespace": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
    }


def main() -> None:
    url, inp, out = sys.argv[1:4]
    with open(inp, encoding="utf-8") as f:
        ask = json.load(f)
    prefix = tuple(ask["search_prefix"])
    with PostgresStore.from_conn_string(url) as store:
        store.setup()
        gets = [store.get(tuple(ns), key, refresh_ttl=False) for ns, key in ask["get"]]
        search = store.search(prefix, limit=100, refresh_ttl=False)
        filtered = store.search(
            prefix, filter=ask["filter"], limit=100, refresh_ttl=False
        )
        ttl_item = store.get(("interop", "rs"), "ttl")
        store.delete(("interop", "rs"), "one")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(
            {
                "get": [item_json(i) for i in gets],
                "search": [item_json(i) for i in search],
                "filtered": [item_json(i) for i in filtered],
                "ttl_item": item_json(ttl_item),
            },
            f,
        )


if __name__ == "__main__":
    main()
