#!/usr/bin/env python3
"""Interop fixture: LangGraph's own PostgresStore with a pgvector index, embedding with the
NumPy all-MiniLM-L6-v2 reference (tests/python/minilm_ref.py, model $WAYPOINT_TEST_MINILM_DIR).

Usage: python_pgvector.py DB_URL SCHEMA IN_JSON OUT_JSON

IN_JSON: {"fields": [...], "put": [[namespace, key, value], ...],
          "search": [[namespace_prefix, query], ...]}.
Opens the store on SCHEMA (then `public`, where the extension lives) with
index={"dims": 384, "embed": <reference>, "fields": fields}, runs `.setup()`, puts the items,
then writes OUT_JSON: {"search": [[[namespace, key, score], ...], ...]} (top 5 per query).
Exits non-zero on any failure.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(
    0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "python")
)

import minilm_ref  # noqa: E402
from langgraph.store.postgres import PostgresStore  # noqa: E402
from psycopg import Connection  # noqa: E402
from psycopg.rows import dict_row  # noqa: E402


def main() -> None:
    url, schema, in_path, out_path = sys.argv[1:5]
    with open(in_path) as f:
        ask = json.load(f)
    with Connection.connect(
        url,
        autocommit=True,
        prepare_threshold=0,
        row_factory=dict_row,
        options=f"-c search_path={schema},public",
    ) as conn:
        store = PostgresStore(
            conn,
            index={
                "dims": 384,
                "embed": lambda texts: minilm_ref.embed(list(texts)),
                "fields": ask["fields"],
            },
        )
        store.setup()
        for namespace, key, value in ask.get("put", []):
            store.put(tuple(namespace), key, value)
        found = []
        for prefix, query in ask.get("search", []):
            hits = store.search(tuple(prefix), query=query, limit=5)
            found.append([[list(h.namespace), h.key, h.score] for h in hits])
    with open(out_path, "w") as f:
        json.dump({"search": found}, f)


if __name__ == "__main__":
    main()
