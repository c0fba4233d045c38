#!/usr/bin/env python3
"""Peer benchmark: LangGraph's synchronous Postgres checkpointer (PostgresSaver).

Measures `langgraph.checkpoint.postgres.PostgresSaver` from the
`langgraph-checkpoint-postgres` package against a PostgreSQL server, so the
numbers can be compared side by side with Waypoint's Rust Postgres
checkpointer on the same machine.

Setup: a new database `peer_bench_<random hex>` is created on the server
given by --url (default: $WAYPOINT_TEST_POSTGRES_URL) and dropped at the end.
Every measurement run gets its own new schema in it (fresh, empty tables),
selected with `options=-c search_path=<schema>`. Connections are opened as
`PostgresSaver.from_conn_string` opens them:
`psycopg.Connection.connect(url, autocommit=True, prepare_threshold=0,
row_factory=dict_row)`, then `PostgresSaver(conn).setup()`. Server settings
are left as they are (printed at the start).

Workload: the same as langgraph_sqlite.py, whose code is imported for it
(payload V = the "small" plain-dict conversation, 5 channels each = V,
checkpoints built as LangGraph's Pregel loop builds them, step 0 writes all
channels, step i changes only names[i % 5], chained parent configs).
Note: PostgresSaver keeps only primitive channel values (str/int/float/bool/
None) inline in the `checkpoints.checkpoint` JSONB; every other value goes to
`checkpoint_blobs`, keyed by (thread, ns, channel, version) and written only
for the channels in new_versions. So a step > 0 writes one checkpoint row
(versions only) and one ~2.7 kB blob, not 5 copies of V as SqliteSaver does.

Measurements (checkpoint dicts and uuid4 task ids are built before the timed
loops, so only the saver calls are timed):

  1. put          2,000 sequential puts on one new thread -> puts/s.
  2. put_writes   2,000 calls x 2 writes [("messages", <message dict>),
                  ("status", "ok")], fresh uuid4 task_id per call, against the
                  latest checkpoint of the thread from (1) -> calls/s.
                  (1) and (2) run 3 times, each in a fresh schema; best of 3.
  3. get_tuple latest  on a thread with exactly 1,000 checkpoints, 2,000
                  calls, each timed with perf_counter_ns -> p50 / p99 ms.
  4. get_tuple by id   same thread, 2,000 calls with ids picked by
                  random.Random(7) -> p50 / p99 ms.
                  (3) and (4) run 3 times; best = lowest p50 and lowest p99.
  5. list         list(saver.list({"configurable": {"thread_id": T}})) of the
                  whole 1,000-checkpoint history -> median and best ms of 10
                  calls; asserts that 1,000 tuples come back.
     (extra, as in the SQLite bench: the same list with checkpoint_ns="".)
  6. bytes/ckpt   right after the 1,000-checkpoint thread is written into a
                  fresh schema: sum of pg_total_relation_size (heap + TOAST +
                  indexes) of checkpoints, checkpoint_blobs and
                  checkpoint_writes, / 1,000.
  7. concurrent put  16 Python threads, each with its own connection and
                  its own PostgresSaver, each putting 500 chained checkpoints
                  on its own thread_id; all released together by a barrier ->
                  total puts/s = 8,000 / wall time. 3 runs, each in a fresh
                  schema; best of 3. The GIL serialises the Python side
                  (serialisation, psycopg), so this measures the client as
                  much as the server.

Results are sanity-checked outside the timed loops. The garbage collector is
disabled while timing (gc.collect() runs before each timed loop).

Usage (Python 3.11, from the repo root):
    source scripts/python.sh && langgraph_venv     # pinned LangGraph venv
    "$WAYPOINT_TEST_PYTHON" benches/peers/langgraph_postgres.py --url postgres://...
    # options: --url URL (a role allowed to CREATE/DROP DATABASE)
    #          --writers N --writer-puts N (concurrent put shape, default 16 x 500)
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import threading
import time
import uuid
from importlib.metadata import version
from pathlib import Path
from typing import Any

import psycopg
from psycopg import Connection, sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row

from langgraph.checkpoint.postgres import PostgresSaver

# Reuse the SQLite peer bench's workload and timing helpers (same directory);
# don't leave a __pycache__ behind in the repo.
sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
from langgraph_sqlite import (  # noqa: E402
    CHANNELS,
    ID_SEED,
    N_GETS,
    N_HISTORY,
    N_LIST,
    N_PUT_WRITES,
    N_PUTS,
    RUNS,
    V,
    NoGC,
    build_history,
    latencies_ms,
    pct,
    put_chain,
)

TABLES = ["checkpoints", "checkpoint_blobs", "checkpoint_writes"]
N_WRITERS = 16  # measurement 7
N_WRITER_PUTS = 500  # puts per writer in 7

# --------------------------------------------------------------------------
# Database / schema handling
# --------------------------------------------------------------------------


def connect(url: str) -> Connection:
    """A connection exactly as PostgresSaver.from_conn_string opens it."""
    return Connection.connect(
        url, autocommit=True, prepare_threshold=0, row_factory=dict_row
    )


class BenchDB:
    """A throwaway database on the server; one fresh schema per run."""

    def __init__(self, url: str) -> None:
        self.server_url = url
        self.name = f"peer_bench_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.name)))
        self.url = make_conninfo(url, dbname=self.name)
        self.admin = psycopg.connect(self.url, autocommit=True)
        self.n_schemas = 0

    def fresh(self, label: str) -> tuple[str, str]:
        """Create an empty schema; returns (schema, URL whose search_path is it)."""
        self.n_schemas += 1
        schema = f"{label}_{self.n_schemas}"
        self.admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        return schema, make_conninfo(self.url, options=f"-c search_path={schema}")

    def open_saver(self, label: str) -> tuple[PostgresSaver, Connection, str, str]:
        """Fresh schema + PostgresSaver with its tables created."""
        schema, url = self.fresh(label)
        conn = connect(url)
        saver = PostgresSaver(conn)
        saver.setup()
        return saver, conn, schema, url

    def table_bytes(self, schema: str) -> dict[str, int]:
        """pg_total_relation_size (heap + TOAST + indexes) per table."""
        out = {}
        for t in TABLES:
            out[t] = self.admin.execute(
                "SELECT pg_total_relation_size(%s::regclass)",
                (f"{schema}.{t}",),
            ).fetchone()[0]
        return out

    def drop(self) -> None:
        self.admin.close()
        with psycopg.connect(self.server_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(self.name)
                )
            )


# --------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------


def bench_writes(db: BenchDB, run: int) -> tuple[float, float]:
    """Measurements 1 and 2 in a fresh schema. Returns (puts/s, put_writes calls/s)."""
    saver, conn, _, _ = db.open_saver("writes")
    try:
        thread_id = f"put-{run}-{uuid.uuid4()}"
        steps = build_history(saver, N_PUTS)  # type: ignore[arg-type]
        with NoGC():
            last_config, put_s = put_chain(saver, thread_id, steps)  # type: ignore[arg-type]

        calls = [
            ([("messages", V[i % len(V)]), ("status", "ok")], str(uuid.uuid4()))
            for i in range(N_PUT_WRITES)
        ]
        put_writes = saver.put_writes
        with NoGC():
            t0 = time.perf_counter()
            for writes, task_id in calls:
                put_writes(last_config, writes, task_id)
            pw_s = time.perf_counter() - t0

        # Sanity: the chain is complete and the writes hang off its head.
        n_rows = conn.execute(
            "SELECT count(*) AS n FROM checkpoints WHERE thread_id = %s", (thread_id,)
        ).fetchone()["n"]
        assert n_rows == N_PUTS, n_rows
        head = saver.get_tuple({"configurable": {"thread_id": thread_id}})
        assert head is not None
        assert head.checkpoint["id"] == steps[-1][0]["id"]
        assert head.parent_config["configurable"]["checkpoint_id"] == steps[-2][0]["id"]
        assert len(head.pending_writes) == 2 * N_PUT_WRITES
        return N_PUTS / put_s, N_PUT_WRITES / pw_s
    finally:
        conn.close()


def bench_reads(db: BenchDB) -> dict[str, Any]:
    """Measurements 3-6 in one fresh schema holding a 1,000-checkpoint thread."""
    saver, conn, schema, _ = db.open_saver("reads")
    res: dict[str, Any] = {}
    try:
        thread_id = f"read-{uuid.uuid4()}"
        steps = build_history(saver, N_HISTORY)  # type: ignore[arg-type]
        put_chain(saver, thread_id, steps)  # type: ignore[arg-type]
        ids = [c["id"] for c, _, _ in steps]

        # 6. bytes per checkpoint: the three tables with TOAST and indexes.
        res["table_bytes"] = db.table_bytes(schema)
        res["bytes_per_ckpt"] = sum(res["table_bytes"].values()) / N_HISTORY
        row = conn.execute(
            "SELECT avg(pg_column_size(checkpoint)) AS ckpt,"
            " avg(pg_column_size(metadata)) AS meta FROM checkpoints"
        ).fetchone()
        res["jsonb_bytes"], res["meta_bytes"] = float(row["ckpt"]), float(row["meta"])
        row = conn.execute(
            "SELECT count(*) AS n, avg(length(blob)) AS raw,"
            " avg(pg_column_size(blob)) AS stored FROM checkpoint_blobs"
        ).fetchone()
        res["n_blobs"] = row["n"]
        res["blob_raw"], res["blob_stored"] = float(row["raw"]), float(row["stored"])

        # Sanity: latest and by-id return the right checkpoint and values.
        latest_cfg = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        t = saver.get_tuple(latest_cfg)
        assert t is not None and t.checkpoint["id"] == ids[-1]
        assert all(t.checkpoint["channel_values"][ch] == V for ch in CHANNELS)
        assert t.metadata["step"] == N_HISTORY - 1

        rng = random.Random(ID_SEED)
        picked = [rng.choice(ids) for _ in range(N_GETS)]
        by_id_cfgs = [
            {"configurable": {"thread_id": thread_id, "checkpoint_ns": "",
                              "checkpoint_id": cid}}
            for cid in picked
        ]
        t = saver.get_tuple(by_id_cfgs[0])
        assert t is not None and t.checkpoint["id"] == picked[0]
        assert all(t.checkpoint["channel_values"][ch] == V for ch in CHANNELS)

        # 3 + 4. per-call latency, RUNS runs each (interleaved).
        res["latest"], res["by_id"] = [], []
        get_tuple = saver.get_tuple
        for _ in range(RUNS):
            with NoGC():
                lat = sorted(latencies_ms(get_tuple, [latest_cfg] * N_GETS))
            res["latest"].append((pct(lat, 50), pct(lat, 99)))
            with NoGC():
                lat = sorted(latencies_ms(get_tuple, by_id_cfgs))
            res["by_id"].append((pct(lat, 50), pct(lat, 99)))

        # 5. list the whole history (and the extra: with checkpoint_ns="").
        list_cfg = {"configurable": {"thread_id": thread_id}}
        got = list(saver.list(list_cfg))
        assert len(got) == N_HISTORY, len(got)
        assert [x.checkpoint["id"] for x in got] == ids[::-1]
        assert all(x.checkpoint["channel_values"][ch] == V for x in got for ch in CHANNELS)
        ns_cfg = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        for key, cfg in (("list_ms", list_cfg), ("list_ns_ms", ns_cfg)):
            times = []
            for _ in range(N_LIST):
                with NoGC():
                    t0 = time.perf_counter_ns()
                    n = len(list(saver.list(cfg)))
                    times.append((time.perf_counter_ns() - t0) / 1e6)
                assert n == N_HISTORY, n
            res[key] = times
        res["list_len"] = n
        return res
    finally:
        conn.close()


def bench_concurrent(db: BenchDB, writers: int, per_writer: int) -> tuple[float, float]:
    """Measurement 7 in a fresh schema. Returns (total puts/s, slowest writer's s)."""
    _, url = db.fresh("concurrent")
    savers, conns = [], []
    try:
        for _ in range(writers):
            conn = connect(url)
            conns.append(conn)
            savers.append(PostgresSaver(conn))
        savers[0].setup()
        plans = [
            (f"conc-{w}-{uuid.uuid4()}", build_history(s, per_writer))  # type: ignore[arg-type]
            for w, s in enumerate(savers)
        ]
        barrier = threading.Barrier(writers + 1)
        elapsed: list[float | None] = [None] * writers
        errors: list[BaseException] = []

        def writer(w: int) -> None:
            try:
                thread_id, steps = plans[w]
                barrier.wait()
                _, elapsed[w] = put_chain(savers[w], thread_id, steps)  # type: ignore[arg-type]
            except BaseException as e:  # noqa: BLE001 - surfaced below
                errors.append(e)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
        for th in threads:
            th.start()
        with NoGC():
            barrier.wait()
            t0 = time.perf_counter()
            for th in threads:
                th.join()
            wall = time.perf_counter() - t0
        if errors:
            raise errors[0]

        # Sanity: every writer's chain is complete.
        n_rows = conns[0].execute("SELECT count(*) AS n FROM checkpoints").fetchone()["n"]
        assert n_rows == writers * per_writer, n_rows
        for (thread_id, steps), s in zip(plans, savers):
            head = s.get_tuple({"configurable": {"thread_id": thread_id}})
            assert head is not None and head.checkpoint["id"] == steps[-1][0]["id"]
        return writers * per_writer / wall, max(e for e in elapsed if e is not None)
    finally:
        for conn in conns:
            conn.close()


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def server_info(url: str) -> dict[str, str]:
    names = ["server_version", "fsync", "synchronous_commit", "wal_sync_method",
             "full_page_writes", "shared_buffers"]
    with psycopg.connect(url, autocommit=True) as conn:
        return {n: conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(n))).fetchone()[0]
                for n in names}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default=os.environ.get("WAYPOINT_TEST_POSTGRES_URL"),
                    help="server to use, as a role that may CREATE DATABASE "
                         "(default: $WAYPOINT_TEST_POSTGRES_URL)")
    ap.add_argument("--writers", type=int, default=N_WRITERS,
                    help=f"concurrent writers in the last measurement (default {N_WRITERS})")
    ap.add_argument("--writer-puts", type=int, default=N_WRITER_PUTS,
                    help=f"puts per concurrent writer (default {N_WRITER_PUTS})")
    args = ap.parse_args()
    if not args.url:
        ap.error("no server: pass --url or set WAYPOINT_TEST_POSTGRES_URL")

    info = server_info(args.url)
    target = conninfo_to_dict(args.url)
    print("# LangGraph PostgresSaver peer benchmark\n")
    print(f"- Python: {platform.python_version()} ({platform.python_implementation()})")
    print(f"- langgraph-checkpoint: {version('langgraph-checkpoint')}")
    print(f"- langgraph-checkpoint-postgres: {version('langgraph-checkpoint-postgres')}")
    print(f"- psycopg: {psycopg.__version__} ({psycopg.pq.__impl__}, "
          f"libpq {psycopg.pq.version()})")
    print(f"- PostgreSQL server: {info['server_version']} at "
          f"{target.get('host', 'local socket')}:{target.get('port', 5432)}; "
          f"fsync={info['fsync']}, synchronous_commit={info['synchronous_commit']}, "
          f"wal_sync_method={info['wal_sync_method']}, "
          f"full_page_writes={info['full_page_writes']}, "
          f"shared_buffers={info['shared_buffers']}")
    print(f"- platform: {platform.platform()} / {platform.machine()}, "
          f"{os.cpu_count()} CPUs")
    print(f"- payload V: {len(V)} messages x {len(V[0]['content'])} chars, "
          f"plain dicts; {len(CHANNELS)} channels, each = V")

    db = BenchDB(args.url)
    try:
        print(f"- database: {db.name} (dropped at the end), one fresh schema per run")
        writes = [bench_writes(db, run) for run in range(RUNS)]
        r = bench_reads(db)
        conc = [bench_concurrent(db, args.writers, args.writer_puts) for _ in range(RUNS)]
    finally:
        db.drop()

    tb = r["table_bytes"]
    print(f"- avg checkpoint JSONB: {r['jsonb_bytes']:,.0f} B, metadata: "
          f"{r['meta_bytes']:,.0f} B; {r['n_blobs']:,} blobs of {r['blob_raw']:,.0f} B "
          f"({r['blob_stored']:,.0f} B stored) for {N_HISTORY:,} checkpoints")
    print("- method: only saver calls timed (checkpoints / task ids prebuilt); "
          "GC disabled while timing; p50/p99 nearest-rank\n")

    def runs(vals: list[str]) -> str:
        return " / ".join(vals)

    puts = [p for p, _ in writes]
    pws = [w for _, w in writes]
    lat_p50 = [a for a, _ in r["latest"]]
    lat_p99 = [b for _, b in r["latest"]]
    id_p50 = [a for a, _ in r["by_id"]]
    id_p99 = [b for _, b in r["by_id"]]
    list_ms = r["list_ms"]
    ns_ms = r["list_ns_ms"]
    cps = [c for c, _ in conc]

    print("| measurement | result | runs |")
    print("|---|---:|---|")
    print(f"| put ({N_PUTS:,} sequential, 1 thread) | {max(puts):,.0f} puts/s | "
          f"{runs([f'{x:,.0f}' for x in puts])} |")
    print(f"| put_writes ({N_PUT_WRITES:,} calls x 2 writes) | {max(pws):,.0f} calls/s | "
          f"{runs([f'{x:,.0f}' for x in pws])} |")
    print(f"| get_tuple latest ({N_HISTORY:,}-ckpt thread) p50 | {min(lat_p50):.3f} ms | "
          f"{runs([f'{x:.3f}' for x in lat_p50])} |")
    print(f"| get_tuple latest p99 | {min(lat_p99):.3f} ms | "
          f"{runs([f'{x:.3f}' for x in lat_p99])} |")
    print(f"| get_tuple by id (Random({ID_SEED})) p50 | {min(id_p50):.3f} ms | "
          f"{runs([f'{x:.3f}' for x in id_p50])} |")
    print(f"| get_tuple by id p99 | {min(id_p99):.3f} ms | "
          f"{runs([f'{x:.3f}' for x in id_p99])} |")
    print(f"| list whole history ({r['list_len']:,} tuples), median of {N_LIST} | "
          f"{statistics.median(list_ms):.1f} ms | "
          f"best {min(list_ms):.1f} / max {max(list_ms):.1f} |")
    print(f"| *(extra)* list with checkpoint_ns=\"\" in config, median of {N_LIST} | "
          f"{statistics.median(ns_ms):.1f} ms | "
          f"best {min(ns_ms):.1f} / max {max(ns_ms):.1f} |")
    print(f"| bytes per checkpoint (3 tables, pg_total_relation_size / {N_HISTORY:,}) | "
          f"{r['bytes_per_ckpt']:,.0f} B | "
          + ", ".join(f"{t} {b:,} B" for t, b in tb.items()) + " |")
    print(f"| put, {args.writers} concurrent writers x {args.writer_puts:,} "
          f"(own connection + saver + thread_id each) | {max(cps):,.0f} puts/s | "
          f"{runs([f'{x:,.0f}' for x in cps])} |")
    print(f"\nBest = max throughput / min latency over {RUNS} runs "
          "(p50 and p99 minimised separately); runs listed in order. "
          f"The concurrent row is {args.writers} Python threads in one process: "
          "the GIL serialises everything but the waits on the server.")


if __name__ == "__main__":
    sys.exit(main())
