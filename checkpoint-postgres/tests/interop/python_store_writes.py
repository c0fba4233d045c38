#!/usr/bin/env python3
"""Interop fixture: LangGraph's own PostgresStore sets up a database and writes items.

Usage: python_store_writes.py DB_URL IN_JSON OUT_JSON   (IN_JSON is unused)

Runs `PostgresStore.from_conn_string(DB_URL)`, `.setup()`, puts a few items (nested
values, non-ASCII text, a sibling namespace sharing a text prefix, one with a TTL), reads
them back and writes OUT_JSON:

    {
      "items": [I, ...],    # store.get of every put, in put order
      "search": [I, ...]    # store.search(("interop", "py"), limit=100), newest first
    }

where each I is {"namespace": [...], "key": str, "value": {...},
"created_at": ISO 8601, "updated_at": ISO 8601}. Exits non-zero on any failure.
"""

from __future__ import annotations

import json
import sys
import time

from langgraph.store.postgres import PostgresStore

PUTS = [
    (("interop", "py"), "plain", {"text": "hello from python", "n": 1}, None),
    (
        ("interop", "py", "deep"),
        "nested",
        {"a": {"b": [1, 2.5, None, True]}, "ü": "ünïcödé ✓", "n": 2},
        None,
    ),
    (("interop", "pyx"), "sibling", {"n": 3}, None),
    (("interop", "py"), "ttl", {"n": 4}, 30),
]


def item_json(item) -> dict:
    return {
        "namespace": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
    }


def main() -> None:
    url, _, out = sys.argv[1:4]
    with PostgresStore.from_conn_string(url) as store:
        store.setup()
        for namespace, key, value, ttl in PUTS:
            if ttl is None:
                store.put(namespace, key, value)
            else:
                store.put(namespace, key, value, ttl=ttl)
            # Distinct timestamps, so "newest first" has one answer.
            time.sleep(0.002)
        items = [store.get(ns, key, refresh_ttl=False) for ns, key, _, _ in PUTS]
        if any(item is None for item in items):
            raise SystemExit("an item just put is missing")
        search = store.search(("interop", "py"), limit=100, refresh_ttl=False)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(
            {
                "items": [item_json(i) for i in items],
                "search": [item_json(i) for i in search],
            },
            f,
        )


if __name__ == "__main__":
    main()
