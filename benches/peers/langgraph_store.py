#!/usr/bin/env python3
"""Peer benchmark: LangGraph's long-term store (InMemoryStore, SqliteStore, PostgresStore).

Measures the synchronous `BaseStore` API of three LangGraph stores, so the
numbers can be compared side by side with Waypoint's Rust store
(benches/store_ops.rs, which uses the same workload definitions) on the same
machine:

  * `langgraph.store.memory.InMemoryStore` (package langgraph-checkpoint),
  * `langgraph.store.sqlite.SqliteStore` (langgraph-checkpoint-sqlite):
    `SqliteStore.from_conn_string(path)` on a new file in a temporary
    directory, then `setup()`. from_conn_string opens the connection in
    autocommit mode and tunes nothing, so the database keeps SQLite's
    defaults: journal_mode=DELETE (a rollback journal, not WAL) and
    synchronous=FULL (2). Every store call runs in BEGIN ... COMMIT, so every
    put pays the journal's fsyncs. Both settings are printed.
    `--journal-mode WAL --synchronous NORMAL` matches Waypoint's SQLite store.
  * `langgraph.store.postgres.PostgresStore` (langgraph-checkpoint-postgres):
    `PostgresStore.from_conn_string(url)` (one connection, autocommit,
    prepare_threshold=0, no pipeline), then `setup()`. As in
    langgraph_postgres.py, each run of the script creates a database
    `peer_bench_<random hex>` (dropped at the end) on the server given by
    --url (default: $WAYPOINT_TEST_POSTGRES_URL), and every measurement run
    gets a new schema in it, selected with `options=-c search_path=<schema>`.
    Each store call runs in a psycopg pipeline: one implicit transaction, so
    one commit (and one WAL flush) per put or batch.

Workload (the constants below; benches/store_ops.rs uses the same ones):

  * Item i, for i = 0, 1, 2, ...: namespace ("bench", "users", f"u{i % 10}"),
    key f"k{i}", value {"text": T_i, "kind": f"k{i % 10}", "n": i}.
    T_i is 200 chars of lowercase words: one random.Random(42) serves all
    items in order of i. For each item, words are drawn as
    VOCAB[rng.randrange(50)] until the words joined by single spaces are at
    least 200 chars long, and the first 200 chars are kept (the last word may
    be cut). For a port to another language: Random(42) is MT19937 seeded
    with init_by_array([42]), and in CPython 3.11 rng.randrange(n) draws
    getrandbits(k) (k = n.bit_length(), i.e. the top k bits of one 32-bit
    output) until the result is < n. The script prints CRC-32 fingerprints
    of the texts and of the picked indices so a port can check its data.
  * Embedder (for semantic search): a cheap deterministic hashing embedder in
    pure Python. For each character 3-gram of the text (each 3-byte window of
    its UTF-8 bytes; the texts are ASCII), h = zlib.crc32(trigram); bucket
    h % 128 gets +1, or -1 when bit 31 of h is set. The 128-vector is then
    L2-normalised. It costs ~0.05 ms a text, so the search itself dominates.

Measurements (ops, keys and queries are built before the timed loops, so only
store calls are timed):

  1. put           2,000 sequential `store.put(ns, key, value)` of items
                   0..1999 (fresh keys) on a fresh store without an index
                   -> puts/s. All three stores.
  2. batch put     the same 2,000 items as 20 `store.batch([PutOp, ...])`
                   calls of 100 PutOps each, on a fresh store -> items/s.
                   All three stores.
                   (1) and (2) run 3 times, each on a fresh store; best of 3.
  3. get           a fresh store loaded with items 0..9999 (batches of 100,
                   not timed); 2,000 `store.get(ns, key)` of items picked by
                   random.Random(7) (rng.randrange(10_000) each), each timed
                   with perf_counter_ns -> p50 / p99 ms. All three stores.
  4. filtered search  same store: `store.search(("bench",),
                   filter={"kind": "k3"}, limit=10)` 200 times -> p50 ms.
                   All three stores. (The stores return different items:
                   InMemoryStore the first 10 matches in insertion order,
                   SQLite and Postgres ORDER BY updated_at DESC.)
                   (3) and (4) run 3 times on that store; best = lowest p50
                   and lowest p99 (taken separately).
  5. semantic search  InMemoryStore only: InMemoryStore(index={"dims": 128,
                   "embed": embed_fn, "fields": ["text"]}) holding items
                   0..9999 (loaded in batches of 100, embedding included;
                   the load time is printed); 200 queries, each the text of an
                   item picked by random.Random(9) (rng.randrange(10_000)
                   each): `store.search(("bench",), query=q, limit=10)`
                   -> p50 / p99 ms, 3 runs, best. Each search embeds its query
                   first, through embed_query in a new ThreadPoolExecutor as
                   InMemoryStore does; that cost is measured on its own
                   (embed_fn alone, and in the executor as the store calls it)
                   so it can be subtracted. InMemoryStore then scores every
                   stored vector: with numpy installed it converts them to an
                   array and uses numpy, without numpy it falls back to a
                   pure-Python cosine (and logs a warning). The pinned venv has
                   no numpy; the script prints which path ran.
     SqliteStore needs the sqlite-vec extension for vector search (the
     package is installed with langgraph-checkpoint-sqlite, but Python's
     sqlite3 must allow loading extensions); PostgresStore needs the pgvector
     extension on the server. The script prints whether each is available.
     Neither is measured.

Results are sanity-checked outside the timed loops (item counts, returned
values, filter matches, and that a query's own item ranks first). The garbage
collector is disabled while timing (gc.collect() runs before each timed
loop). p50/p99 are nearest-rank.

Usage (Python 3.11, from the repo root):
    source scripts/python.sh && langgraph_venv     # pinned LangGraph venv
    "$WAYPOINT_TEST_PYTHON" benches/peers/langgraph_store.py --url postgres://...
    # options: --url URL (a role allowed to CREATE/DROP DATABASE)
    #          --stores memory,sqlite,postgres (default: all three)
    #          --dir DIR (where the SQLite temp dir goes)
    #          --journal-mode {default,WAL} --synchronous {default,FULL,NORMAL,OFF}
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import math
import os
import platform
import random
import sqlite3
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from langgraph.store.base import BaseStore, PutOp
from langgraph.store.memory import InMemoryStore
from langgraph.store.postgres import PostgresStore
from langgraph.store.sqlite import SqliteStore

# Reuse the checkpointer peer benches' helpers (same directory); don't leave a
# __pycache__ behind in the repo.
sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
from langgraph_postgres import BenchDB, server_info  # noqa: E402
from langgraph_sqlite import NoGC, fs_type, pct  # noqa: E402

# --------------------------------------------------------------------------
# Workload (benches/store_ops.rs uses the same definitions)
# --------------------------------------------------------------------------

ITEM_SEED = 42  # random.Random seed for the item texts
GET_SEED = 7  # random.Random seed for the keys of measurement 3
QUERY_SEED = 9  # random.Random seed for the query items of measurement 5
N_USERS = 10  # namespace ("bench", "users", f"u{i % N_USERS}")
N_KINDS = 10  # value["kind"] = f"k{i % N_KINDS}"
TEXT_CHARS = 200  # value["text"] length
VOCAB = (
    "agent", "alpha", "apple", "batch", "bridge", "cache", "cloud", "data",
    "delta", "drift", "echo", "engine", "field", "forest", "frame", "graph",
    "harbor", "index", "island", "job", "kernel", "lambda", "ledger", "memory",
    "node", "ocean", "orbit", "packet", "planet", "query", "queue", "river",
    "router", "schema", "signal", "state", "stream", "table", "thread", "token",
    "tower", "update", "user", "value", "vector", "wave", "window", "worker",
    "yard", "zone",
)  # fmt: skip
assert len(VOCAB) == 50 and len(set(VOCAB)) == 50

N_PUTS = 2_000  # measurements 1 and 2: items 0..N_PUTS-1
BATCH_SIZE = 100  # measurement 2: N_PUTS / BATCH_SIZE = 20 batch calls
N_ITEMS = 10_000  # items held by the stores of measurements 3-5
N_GETS = 2_000  # measurement 3
SEARCH_PREFIX = ("bench",)  # measurements 4 and 5
SEARCH_FILTER = {"kind": "k3"}  # measurement 4
SEARCH_LIMIT = 10  # measurements 4 and 5
N_SEARCHES = 200  # measurement 4
N_QUERIES = 200  # measurement 5
DIMS = 128  # embedding dimensions
RUNS = 3  # best-of for every measurement

STORES = ("memory", "sqlite", "postgres")
STORE_NAMES = {"memory": "InMemoryStore", "sqlite": "SqliteStore",
               "postgres": "PostgresStore"}

Item = tuple[tuple[str, ...], str, dict[str, Any]]


def make_text(rng: random.Random) -> str:
    """TEXT_CHARS chars of VOCAB words joined by spaces (last word may be cut)."""
    words: list[str] = []
    length = -1  # length of " ".join(words)
    while length < TEXT_CHARS:
        w = VOCAB[rng.randrange(len(VOCAB))]
        words.append(w)
        length += len(w) + 1
    return " ".join(words)[:TEXT_CHARS]


def make_items(n: int) -> list[Item]:
    """Items 0..n-1 as (namespace, key, value); item i is the same for every n."""
    rng = random.Random(ITEM_SEED)
    return [
        (("bench", "users", f"u{i % N_USERS}"), f"k{i}",
         {"text": make_text(rng), "kind": f"k{i % N_KINDS}", "n": i})
        for i in range(n)
    ]


def pick(seed: int, count: int, n: int) -> list[int]:
    """count indices in 0..n-1 drawn with random.Random(seed).randrange(n)."""
    rng = random.Random(seed)
    return [rng.randrange(n) for _ in range(count)]


def embed_text(text: str) -> list[float]:
    """Hashing embedder: signed CRC-32 buckets of byte 3-grams, L2-normalised."""
    v = [0.0] * DIMS
    b = text.encode("utf-8")
    crc32 = zlib.crc32
    for j in range(len(b) - 2):
        h = crc32(b[j:j + 3])
        v[h % DIMS] += -1.0 if h & 0x80000000 else 1.0
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v] if norm else v


def embed_fn(texts: list[str]) -> list[list[float]]:
    """The `embed` function given to the store's index config."""
    return [embed_text(t) for t in texts]


def fingerprint(items: list[Item], get_ix: list[int], query_ix: list[int]) -> str:
    """CRC-32s of the texts and picked indices, for checking a port's data."""
    texts = zlib.crc32("\n".join(v["text"] for _, _, v in items).encode())
    gets = zlib.crc32(",".join(map(str, get_ix)).encode())
    queries = zlib.crc32(",".join(map(str, query_ix)).encode())
    return (f"crc32(texts of items 0..{len(items) - 1} joined by \\n) = {texts:08x}, "
            f"crc32(get indices joined by ,) = {gets:08x}, "
            f"crc32(query indices joined by ,) = {queries:08x}")


# --------------------------------------------------------------------------
# Stores
# --------------------------------------------------------------------------


@dataclass
class Env:
    """Where the SQLite files and Postgres schemas go, and SQLite settings."""

    sqlite_dir: str | None = None
    journal_mode: str = "default"
    synchronous: str = "default"
    db: BenchDB | None = None
    n_opened: int = 0
    sqlite_settings: tuple[str, str] | None = None


@contextmanager
def open_store(env: Env, store: str, label: str) -> Iterator[BaseStore]:
    """A fresh, empty store without an index, opened as the docstring says."""
    env.n_opened += 1
    if store == "memory":
        yield InMemoryStore()
    elif store == "sqlite":
        assert env.sqlite_dir is not None
        path = os.path.join(env.sqlite_dir, f"{label}-{env.n_opened}.sqlite")
        with SqliteStore.from_conn_string(path) as s:
            s.setup()
            if env.journal_mode != "default":
                s.conn.execute(f"PRAGMA journal_mode={env.journal_mode}")
            if env.synchronous != "default":
                s.conn.execute(f"PRAGMA synchronous={env.synchronous}")
            mode = s.conn.execute("PRAGMA journal_mode").fetchone()[0]
            sync = s.conn.execute("PRAGMA synchronous").fetchone()[0]
            env.sqlite_settings = (
                mode, {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(sync, str(sync)))
            yield s
    elif store == "postgres":
        assert env.db is not None
        _, url = env.db.fresh(label)
        with PostgresStore.from_conn_string(url) as s:
            s.setup()
            yield s
    else:
        raise ValueError(store)


def load(store: BaseStore, items: list[Item]) -> None:
    """Write items in batches of BATCH_SIZE (not timed)."""
    for b in range(0, len(items), BATCH_SIZE):
        store.batch([PutOp(ns, key, value) for ns, key, value in items[b:b + BATCH_SIZE]])


def check_contents(store: BaseStore, items: list[Item]) -> None:
    """Sanity: the store holds exactly these items, first and last read back."""
    got = store.search(SEARCH_PREFIX, limit=len(items) + 1)
    assert len(got) == len(items), (len(got), len(items))
    for ns, key, value in (items[0], items[-1]):
        item = store.get(ns, key)
        assert item is not None and item.value == value and item.namespace == ns, key


# --------------------------------------------------------------------------
# Timing helpers
# --------------------------------------------------------------------------


def timed_calls(fn: Callable[..., Any], calls: list[tuple[Any, ...]],
                kwargs: dict[str, Any]) -> tuple[list[float], list[Any]]:
    """fn(*args, **kwargs) per call, each timed with perf_counter_ns; keeps results."""
    lat, out = [], []
    clock = time.perf_counter_ns
    for args in calls:
        t0 = clock()
        r = fn(*args, **kwargs)
        lat.append((clock() - t0) / 1e6)
        out.append(r)
    return lat, out


def ms(x: float) -> str:
    """A latency in ms with about 3 significant digits."""
    return f"{x:.4f}" if x < 0.1 else f"{x:.3f}" if x < 100 else f"{x:.1f}"


def p50_p99(lat_ms: list[float]) -> tuple[float, float]:
    s = sorted(lat_ms)
    return pct(s, 50), pct(s, 99)


# --------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------


def bench_put(env: Env, store: str, items: list[Item]) -> float:
    """Measurement 1 on a fresh store. Returns puts/s."""
    with open_store(env, store, "put") as s:
        put = s.put
        with NoGC():
            t0 = time.perf_counter()
            for ns, key, value in items:
                put(ns, key, value)
            elapsed = time.perf_counter() - t0
        check_contents(s, items)
    return len(items) / elapsed


def bench_batch_put(env: Env, store: str, items: list[Item]) -> float:
    """Measurement 2 on a fresh store. Returns items/s."""
    batches = [[PutOp(ns, key, value) for ns, key, value in items[b:b + BATCH_SIZE]]
               for b in range(0, len(items), BATCH_SIZE)]
    with open_store(env, store, "batch") as s:
        batch = s.batch
        with NoGC():
            t0 = time.perf_counter()
            for ops in batches:
                batch(ops)
            elapsed = time.perf_counter() - t0
        check_contents(s, items)
    return len(items) / elapsed


def bench_reads(env: Env, store: str, items: list[Item],
                get_ix: list[int]) -> dict[str, list[tuple[float, float]]]:
    """Measurements 3 and 4 on one fresh store holding N_ITEMS items."""
    gets = [(items[i][0], items[i][1]) for i in get_ix]
    searches = [(SEARCH_PREFIX,)] * N_SEARCHES
    search_kw = {"filter": SEARCH_FILTER, "limit": SEARCH_LIMIT}
    res: dict[str, list[tuple[float, float]]] = {"get": [], "search": []}
    with open_store(env, store, "reads") as s:
        load(s, items)
        check_contents(s, items)
        for _ in range(RUNS):
            with NoGC():
                lat, got = timed_calls(s.get, gets, {})
            res["get"].append(p50_p99(lat))
            for i, item in zip(get_ix, got):
                assert item is not None and item.key == items[i][1], i
                assert item.value == items[i][2] and item.namespace == items[i][0], i
            del got

            with NoGC():
                lat, got = timed_calls(s.search, searches, search_kw)
            res["search"].append(p50_p99(lat))
            for hits in got:
                assert len(hits) == SEARCH_LIMIT, len(hits)
                for h in hits:
                    n = h.value["n"]
                    assert h.value == items[n][2] and h.key == items[n][1], h.key
                    assert h.value["kind"] == SEARCH_FILTER["kind"], h.value
            del got
    return res


def bench_semantic(items: list[Item], query_ix: list[int]) -> dict[str, Any]:
    """Measurement 5: InMemoryStore with a 128-dim index over N_ITEMS items."""
    res: dict[str, Any] = {"runs": []}
    s = InMemoryStore(index={"dims": DIMS, "embed": embed_fn, "fields": ["text"]})
    with NoGC():
        t0 = time.perf_counter()
        load(s, items)
        res["load_s"] = time.perf_counter() - t0
    check_contents(s, items)

    queries = [(SEARCH_PREFIX,)] * len(query_ix)
    texts = [items[i][2]["text"] for i in query_ix]
    for _ in range(RUNS):
        kws = [{"query": q, "limit": SEARCH_LIMIT} for q in texts]
        lat, got = [], []
        clock = time.perf_counter_ns
        search = s.search
        with NoGC():
            for (prefix,), kw in zip(queries, kws):
                t0 = clock()
                r = search(prefix, **kw)
                lat.append((clock() - t0) / 1e6)
                got.append(r)
        res["runs"].append(p50_p99(lat))
        # Sanity: each query is an item's own text, so that item ranks first.
        for i, hits in zip(query_ix, got):
            assert len(hits) == SEARCH_LIMIT, len(hits)
            top = hits[0]
            assert top.score is not None and top.score > 0.999999, (i, top.score)
            assert top.value["text"] == items[i][2]["text"], (i, top.key)
            assert all(a.score >= b.score for a, b in zip(hits, hits[1:]))
        del got

    # The embedding part of each search, measured on its own: embed_fn alone,
    # and embed_query in a new ThreadPoolExecutor as InMemoryStore runs it.
    embeddings = s.embeddings
    assert embeddings is not None
    with NoGC():
        lat, _ = timed_calls(embed_fn, [([q],) for q in texts], {})
    res["embed_ms"] = sorted(lat)

    def embed_like_store(q: str) -> list[float]:
        with cf.ThreadPoolExecutor() as ex:
            return ex.submit(embeddings.embed_query, q).result()

    with NoGC():
        lat, vecs = timed_calls(embed_like_store, [(q,) for q in texts], {})
    res["embed_pool_ms"] = sorted(lat)
    assert vecs[0] == embed_text(texts[0])
    return res


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def vector_support(url: str | None) -> tuple[str, str]:
    """Whether SqliteStore / PostgresStore vector search could run here."""
    conn = sqlite3.connect(":memory:")
    try:
        if not hasattr(conn, "enable_load_extension"):
            sq = ("sqlite-vec " + _version("sqlite-vec")
                  + " installed, but this Python's sqlite3 cannot load extensions")
        else:
            sq = "sqlite-vec " + _version("sqlite-vec") + " loadable (not measured)"
    finally:
        conn.close()
    if url is None:
        return sq, "no server"
    with psycopg.connect(url, autocommit=True) as c:
        row = c.execute("SELECT default_version FROM pg_available_extensions "
                        "WHERE name = 'vector'").fetchone()
    pg = ("pgvector not available on the server" if row is None
          else f"pgvector {row[0]} available (not measured)")
    return sq, pg


def _version(pkg: str) -> str:
    try:
        return version(pkg)
    except PackageNotFoundError:
        return "(not installed)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default=os.environ.get("WAYPOINT_TEST_POSTGRES_URL"),
                    help="Postgres server, as a role that may CREATE DATABASE "
                         "(default: $WAYPOINT_TEST_POSTGRES_URL)")
    ap.add_argument("--stores", default=",".join(STORES),
                    help="comma-separated subset of memory,sqlite,postgres")
    ap.add_argument("--dir", default=None, help="parent dir for the SQLite temp dir")
    ap.add_argument("--journal-mode", default="default", choices=["default", "WAL"],
                    help="SQLite PRAGMA journal_mode after setup() (default: untouched)")
    ap.add_argument("--synchronous", default="default",
                    choices=["default", "FULL", "NORMAL", "OFF"],
                    help="SQLite PRAGMA synchronous after setup() (default: untouched)")
    args = ap.parse_args()
    stores = [x.strip() for x in args.stores.split(",") if x.strip()]
    if not stores or any(x not in STORES for x in stores):
        ap.error(f"--stores: pick from {','.join(STORES)}")
    if "postgres" in stores and not args.url:
        ap.error("no server: pass --url, set WAYPOINT_TEST_POSTGRES_URL, "
                 "or leave postgres out of --stores")

    started = time.perf_counter()
    items = make_items(N_ITEMS)
    put_items = items[:N_PUTS]
    get_ix = pick(GET_SEED, N_GETS, N_ITEMS)
    query_ix = pick(QUERY_SEED, N_QUERIES, N_ITEMS)
    numpy_note = (f"numpy {_version('numpy')}: LangGraph's numpy cosine"
                  if find_spec("numpy") else
                  "numpy not installed: LangGraph's pure-Python cosine fallback")

    print("# LangGraph store peer benchmark\n")
    print(f"- Python: {platform.python_version()} ({platform.python_implementation()})")
    for pkg in ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite",
                "langgraph-checkpoint-postgres", "psycopg"):
        print(f"- {pkg}: {_version(pkg)}")
    print(f"- SQLite library: {sqlite3.sqlite_version}")
    if "postgres" in stores:
        info = server_info(args.url)
        target = conninfo_to_dict(args.url)
        print(f"- PostgreSQL server: {info['server_version']} at "
              f"{target.get('host', 'local socket')}:{target.get('port', 5432)}; "
              f"fsync={info['fsync']}, synchronous_commit={info['synchronous_commit']}, "
              f"wal_sync_method={info['wal_sync_method']}, "
              f"shared_buffers={info['shared_buffers']}")
    print(f"- platform: {platform.platform()} / {platform.machine()}, "
          f"{os.cpu_count()} CPUs")
    text_len = sum(len(v["text"]) for _, _, v in items) / len(items)
    print(f"- items: namespace (\"bench\", \"users\", \"u<i % {N_USERS}>\"), key \"k<i>\", "
          f"value {{text: {text_len:.0f} chars from {len(VOCAB)} words, "
          f"kind: \"k<i % {N_KINDS}>\", n: i}}; seeds: items Random({ITEM_SEED}), "
          f"gets Random({GET_SEED}), queries Random({QUERY_SEED})")
    print(f"- workload fingerprint: {fingerprint(items, get_ix, query_ix)}; "
          f"item 0 text starts {items[0][2]['text'][:40]!r}")

    env = Env(journal_mode=args.journal_mode, synchronous=args.synchronous)
    put_res: dict[str, list[float]] = {}
    batch_res: dict[str, list[float]] = {}
    read_res: dict[str, dict[str, list[tuple[float, float]]]] = {}
    with tempfile.TemporaryDirectory(prefix="lg-store-", dir=args.dir) as tmp:
        env.sqlite_dir = tmp
        if "sqlite" in stores:
            print(f"- SQLite DB dir: {tmp} ({fs_type(tmp)})")
        if "postgres" in stores:
            env.db = BenchDB(args.url)
            print(f"- Postgres database: {env.db.name} (dropped at the end), "
                  "one fresh schema per run")
        try:
            for st in stores:
                put_res[st] = [bench_put(env, st, put_items) for _ in range(RUNS)]
                batch_res[st] = [bench_batch_put(env, st, put_items) for _ in range(RUNS)]
                read_res[st] = bench_reads(env, st, items, get_ix)
        finally:
            if env.db is not None:
                env.db.drop()
    sem = bench_semantic(items, query_ix) if "memory" in stores else None

    if env.sqlite_settings is not None:
        mode, sync = env.sqlite_settings
        untouched = args.journal_mode == "default" and args.synchronous == "default"
        note = " (SQLite defaults, untouched by from_conn_string/setup)" if untouched else ""
        print(f"- SqliteStore: journal_mode={mode}, synchronous={sync}{note}")
    sq_vec, pg_vec = vector_support(args.url if "postgres" in stores else None)
    print(f"- vector search: InMemoryStore with {numpy_note}; SqliteStore: {sq_vec}; "
          f"PostgresStore: {pg_vec}")
    print("- method: only store calls timed (items / ops / queries prebuilt); "
          f"GC disabled while timing; best of {RUNS} runs; p50/p99 nearest-rank\n")

    def runs(vals: list[str]) -> str:
        return " / ".join(vals)

    def name(st: str) -> str:
        return STORE_NAMES[st]

    print("| measurement | store | result | runs |")
    print("|---|---|---:|---|")
    for st in stores:
        v = put_res[st]
        print(f"| put ({N_PUTS:,} sequential, fresh keys) | {name(st)} | "
              f"{max(v):,.0f} puts/s | {runs([f'{x:,.0f}' for x in v])} |")
    for st in stores:
        v = batch_res[st]
        print(f"| batch put ({N_PUTS // BATCH_SIZE} x {BATCH_SIZE} PutOps) | {name(st)} | "
              f"{max(v):,.0f} items/s | {runs([f'{x:,.0f}' for x in v])} |")
    for q, label in ((0, "p50"), (1, "p99")):
        for st in stores:
            v = [r[q] for r in read_res[st]["get"]]
            print(f"| get ({N_GETS:,} on {N_ITEMS:,} items, Random({GET_SEED})) {label} | "
                  f"{name(st)} | {ms(min(v))} ms | {runs([ms(x) for x in v])} |")
    for st in stores:
        v = [r[0] for r in read_res[st]["search"]]
        v99 = [r[1] for r in read_res[st]["search"]]
        print(f"| filtered search (kind=k3, limit {SEARCH_LIMIT}, {N_SEARCHES} calls) p50 | "
              f"{name(st)} | {ms(min(v))} ms | {runs([ms(x) for x in v])} "
              f"(p99 best {ms(min(v99))}) |")
    if sem is not None:
        for q, label in ((0, "p50"), (1, "p99")):
            v = [r[q] for r in sem["runs"]]
            print(f"| semantic search ({DIMS} dims, {N_ITEMS:,} items, limit {SEARCH_LIMIT}, "
                  f"{N_QUERIES} queries) {label} | InMemoryStore | {ms(min(v))} ms | "
                  f"{runs([ms(x) for x in v])} |")
        e, ep = sem["embed_ms"], sem["embed_pool_ms"]
        print(f"| of which: embed one query, embed_fn alone, p50 | - | "
              f"{ms(pct(e, 50))} ms | p99 {ms(pct(e, 99))} |")
        print(f"| of which: embed one query as the store does (new ThreadPoolExecutor), "
              f"p50 | InMemoryStore | {ms(pct(ep, 50))} ms | p99 {ms(pct(ep, 99))} |")
        print(f"| *(info)* index build: {N_ITEMS:,} items in batches of {BATCH_SIZE}, "
              f"embedding included | InMemoryStore | {sem['load_s']:.2f} s | |")
    print(f"\nBest = max throughput / min latency over {RUNS} runs "
          "(p50 and p99 minimised separately); runs listed in order. "
          f"Total time {time.perf_counter() - started:.0f} s.")


if __name__ == "__main__":
    sys.exit(main())
