#!/usr/bin/env python3
"""Peer benchmark: LangGraph's synchronous SQLite checkpointer (SqliteSaver).

Measures `langgraph.checkpoint.sqlite.SqliteSaver` from the
`langgraph-checkpoint-sqlite` package on a fresh database file, so the numbers
can be compared side by side with Waypoint's Rust SQLite checkpointer on the
same machine.

Setup: `sqlite3.connect(path, check_same_thread=False)` on a new file in a
temporary directory, then `SqliteSaver(conn).setup()`. setup() switches the
database to WAL; nothing else is tuned, so `synchronous` stays at the Python
sqlite3 / SQLite default (FULL = fsync of the WAL on every commit, and
SqliteSaver commits after every put / put_writes). `--synchronous NORMAL`
overrides that for a like-for-like run against a store using NORMAL.

Workload:

  * V: the "small" plain-dict conversation from langgraph_serde.py (10
    messages of 200 chars, {"type", "content", "id"}, seeded Random(42)), as
    a Python list of dicts.
  * 5 channels: messages, context, plan, scratch, status; every channel value
    is V.
  * Checkpoints are built the way LangGraph's Pregel loop builds them
    ({"v": 4, "id": uuid6(clock_seq=step), "ts", "channel_values",
    "channel_versions", "versions_seen", "updated_channels"}). Step 0 writes
    all 5 channels; step i > 0 changes only channel names[i % 5], whose
    version is bumped with saver.get_next_version(current, None); the value
    is V again. new_versions holds only the changed channel(s). Metadata is
    {"source": "loop", "step": i, "parents": {}}. Each put's config carries
    the previous checkpoint id (absent for step 0), i.e. a parent chain.
    Note: SqliteSaver stores the whole checkpoint, channel_values included,
    as one msgpack blob per row, so every row carries all 5 copies of V.

Measurements (the checkpoint dicts and uuid4 task ids are built before the
timed loops, so only the saver calls are timed):

  1. put          2,000 sequential puts on one new thread -> puts/s.
  2. put_writes   2,000 calls, each with 2 writes [("messages", <message
                  dict>), ("status", "ok")] and a fresh uuid4 task_id, against
                  the latest checkpoint of the thread from (1) -> calls/s.
                  (1) and (2) run 3 times, each on a fresh database; best of 3.
  3. get_tuple latest  on a thread with exactly 1,000 checkpoints, 2,000 calls
                  of get_tuple({"configurable": {"thread_id", "checkpoint_ns":
                  ""}}), each timed with perf_counter_ns -> p50 / p99 ms.
  4. get_tuple by id   same thread, 2,000 calls with checkpoint ids picked by
                  random.Random(7) among the 1,000 -> p50 / p99 ms.
                  (3) and (4) run 3 times; best = lowest p50 and lowest p99
                  over the runs (each taken separately).
  5. list         list(saver.list({"configurable": {"thread_id": T}})) of the
                  whole 1,000-checkpoint history -> median ms of 10 calls;
                  asserts that 1,000 tuples come back.
     (extra, not in the specified workload: the same list with
                  checkpoint_ns="" in the config, which lets SQLite read the
                  primary key in order instead of sorting every row.)
  6. bytes/ckpt   right after the 1,000-checkpoint thread is written into a
                  fresh DB: PRAGMA wal_checkpoint(TRUNCATE), then
                  page_count * page_size / 1000.

Results are sanity-checked outside the timed loops (ids, channel values,
number of pending writes). As in langgraph_serde.py, the garbage collector is
disabled while timing (gc.collect() runs before each timed loop).

Usage (Python 3.11, from the repo root):
    /work/venv-langgraph/bin/pip install langgraph-checkpoint-sqlite
    /work/venv-langgraph/bin/python benches/peers/langgraph_sqlite.py
    # options: --dir DIR (where the temp dir is created; default: system temp)
    #          --synchronous {default,FULL,NORMAL,OFF}
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path
from typing import Any, Callable

from langgraph.checkpoint.base import Checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.sqlite import SqliteSaver

# Reuse the serializer peer bench's payload generator (same directory);
# don't leave a __pycache__ behind in the repo.
sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
from langgraph_serde import PAYLOADS, as_plain_dicts, gen_raw  # noqa: E402

# --------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------

CHANNELS = ["messages", "context", "plan", "scratch", "status"]
N_PUTS = 2_000  # measurement 1
N_PUT_WRITES = 2_000  # measurement 2
N_HISTORY = 1_000  # checkpoints on the read thread (3-6)
N_GETS = 2_000  # measurements 3 and 4
N_LIST = 10  # measurement 5
RUNS = 3  # best-of for 1-4
ID_SEED = 7  # random.Random seed for the by-id lookups

# V: the "small" plain-dict conversation (list of 10 message dicts).
V: list[dict[str, str]] = as_plain_dicts(gen_raw(*PAYLOADS["small"]))["messages"]

# --------------------------------------------------------------------------
# Workload construction
# --------------------------------------------------------------------------


def build_history(
    saver: SqliteSaver, n: int
) -> list[tuple[Checkpoint, dict[str, Any], dict[str, Any]]]:
    """Build n chained checkpoints as LangGraph's loop would.

    Returns (checkpoint, metadata, new_versions) per step. Nothing is written;
    the parent link is added by `put_chain` from the previous put's config.
    """
    steps = []
    versions: dict[str, Any] = {}
    for step in range(n):
        changed = CHANNELS if step == 0 else [CHANNELS[step % len(CHANNELS)]]
        for ch in changed:
            versions[ch] = saver.get_next_version(versions.get(ch), None)
        checkpoint: Checkpoint = {  # type: ignore[typeddict-item]
            "v": 4,
            "id": str(uuid6(clock_seq=step)),
            "ts": datetime.now(timezone.utc).isoformat(),
            "channel_values": {ch: V for ch in CHANNELS},
            "channel_versions": dict(versions),
            "versions_seen": {},
            "updated_channels": list(changed),
        }
        metadata = {"source": "loop", "step": step, "parents": {}}
        new_versions = {ch: versions[ch] for ch in changed}
        steps.append((checkpoint, metadata, new_versions))
    # uuid6 ids are time-ordered and monotonic within a process; SqliteSaver
    # finds "latest" by ORDER BY checkpoint_id, so this must hold.
    ids = [c["id"] for c, _, _ in steps]
    assert ids == sorted(ids) and len(set(ids)) == n
    return steps


def put_chain(
    saver: SqliteSaver,
    thread_id: str,
    steps: list[tuple[Checkpoint, dict[str, Any], dict[str, Any]]],
) -> tuple[dict[str, Any], float]:
    """Put all steps in order, chaining configs. Returns (last config, seconds)."""
    config: dict[str, Any] = {
        "configurable": {"thread_id": thread_id, "checkpoint_ns": ""}
    }
    put = saver.put
    t0 = time.perf_counter()
    for checkpoint, metadata, new_versions in steps:
        # put() returns {"configurable": {thread_id, checkpoint_ns,
        # checkpoint_id}}: exactly the next step's config (parent = this one).
        config = put(config, checkpoint, metadata, new_versions)
    return config, time.perf_counter() - t0


def open_saver(
    dir_path: str, name: str, synchronous: str
) -> tuple[SqliteSaver, sqlite3.Connection, str]:
    """Fresh database file + SqliteSaver with its tables created."""
    path = os.path.join(dir_path, name)
    assert not os.path.exists(path)
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    if synchronous != "default":
        conn.execute(f"PRAGMA synchronous={synchronous}")
    return saver, conn, path


# --------------------------------------------------------------------------
# Timing helpers
# --------------------------------------------------------------------------


class NoGC:
    """Disable the cyclic GC inside the block (like timeit), collect first."""

    def __enter__(self) -> None:
        gc.collect()
        self.was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was_enabled:
            gc.enable()


def latencies_ms(fn: Callable[[Any], Any], args: list[Any]) -> list[float]:
    """Call fn(arg) for each arg, timing each call with perf_counter_ns."""
    out = []
    clock = time.perf_counter_ns
    for a in args:
        t0 = clock()
        fn(a)
        out.append((clock() - t0) / 1e6)
    return out


def pct(sorted_vals: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of an ascending list."""
    k = max(0, min(len(sorted_vals) - 1, -(-p * len(sorted_vals) // 100) - 1))
    return sorted_vals[int(k)]


# --------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------


def bench_writes(
    dir_path: str, run: int, synchronous: str
) -> tuple[float, float]:
    """Measurements 1 and 2 on a fresh DB. Returns (puts/s, put_writes calls/s)."""
    saver, conn, _ = open_saver(dir_path, f"writes-{run}.sqlite", synchronous)
    try:
        thread_id = f"put-{run}-{uuid.uuid4()}"
        steps = build_history(saver, N_PUTS)
        with NoGC():
            last_config, put_s = put_chain(saver, thread_id, steps)

        # 2 writes per call, fresh uuid4 task id per call; prebuilt.
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
            "SELECT count(*) FROM checkpoints WHERE thread_id = ?", (thread_id,)
        ).fetchone()[0]
        assert n_rows == N_PUTS, n_rows
        head = saver.get_tuple({"configurable": {"thread_id": thread_id}})
        assert head is not None
        assert head.checkpoint["id"] == steps[-1][0]["id"]
        assert head.parent_config["configurable"]["checkpoint_id"] == steps[-2][0]["id"]
        assert len(head.pending_writes) == 2 * N_PUT_WRITES
        return N_PUTS / put_s, N_PUT_WRITES / pw_s
    finally:
        conn.close()


def bench_reads(dir_path: str, synchronous: str) -> dict[str, Any]:
    """Measurements 3-6 on one fresh DB holding a 1,000-checkpoint thread."""
    saver, conn, path = open_saver(dir_path, "reads.sqlite", synchronous)
    res: dict[str, Any] = {}
    try:
        thread_id = f"read-{uuid.uuid4()}"
        steps = build_history(saver, N_HISTORY)
        put_chain(saver, thread_id, steps)
        ids = [c["id"] for c, _, _ in steps]

        # 6. bytes on disk per checkpoint, WAL folded into the main file.
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0, "wal_checkpoint(TRUNCATE) was blocked"
        page_count = conn.execute("PRAGMA page_count").fetchone()[0]
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        res["bytes_per_ckpt"] = page_count * page_size / N_HISTORY
        res["page_size"] = page_size
        res["file_bytes"] = os.path.getsize(path)
        res["wal_bytes"] = (
            os.path.getsize(path + "-wal") if os.path.exists(path + "-wal") else 0
        )
        res["blob_bytes"], res["meta_bytes"] = conn.execute(
            "SELECT avg(length(checkpoint)), avg(length(metadata)) FROM checkpoints"
        ).fetchone()
        res["journal_mode"] = conn.execute("PRAGMA journal_mode").fetchone()[0]
        res["synchronous"] = conn.execute("PRAGMA synchronous").fetchone()[0]

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

        # 5. list the whole history.
        list_cfg = {"configurable": {"thread_id": thread_id}}
        got = list(saver.list(list_cfg))
        assert len(got) == N_HISTORY, len(got)
        assert [x.checkpoint["id"] for x in got] == ids[::-1]
        times = []
        for _ in range(N_LIST):
            with NoGC():
                t0 = time.perf_counter_ns()
                n = len(list(saver.list(list_cfg)))
                times.append((time.perf_counter_ns() - t0) / 1e6)
            assert n == N_HISTORY, n
        res["list_ms"] = times
        res["list_len"] = n

        # Supplementary (not part of the specified workload): the same list
        # with checkpoint_ns="" in the config. With thread_id alone SQLite
        # cannot walk the (thread_id, checkpoint_ns, checkpoint_id) primary
        # key in order and sorts all rows, blobs included, in a temp B-tree.
        ns_cfg = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        times = []
        for _ in range(N_LIST):
            with NoGC():
                t0 = time.perf_counter_ns()
                n = len(list(saver.list(ns_cfg)))
                times.append((time.perf_counter_ns() - t0) / 1e6)
            assert n == N_HISTORY, n
        res["list_ns_ms"] = times
        return res
    finally:
        conn.close()


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def fs_type(path: str) -> str:
    """Filesystem type of path (best effort, Linux `df`)."""
    try:
        out = subprocess.run(["df", "-T", path], capture_output=True, text=True)
        return out.stdout.splitlines()[1].split()[1]
    except Exception:
        return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=None, help="parent dir for the temp dir")
    ap.add_argument("--synchronous", default="default",
                    choices=["default", "FULL", "NORMAL", "OFF"],
                    help="PRAGMA synchronous after setup() (default: untouched)")
    args = ap.parse_args()

    print("# LangGraph SqliteSaver peer benchmark\n")
    print(f"- Python: {platform.python_version()} ({platform.python_implementation()})")
    print(f"- langgraph-checkpoint: {version('langgraph-checkpoint')}")
    print(f"- langgraph-checkpoint-sqlite: {version('langgraph-checkpoint-sqlite')}")
    print(f"- SQLite library: {sqlite3.sqlite_version}")
    print(f"- platform: {platform.platform()} / {platform.machine()}")

    with tempfile.TemporaryDirectory(prefix="lg-sqlite-", dir=args.dir) as tmp:
        print(f"- DB dir: {tmp} ({fs_type(tmp)})")
        print(f"- payload V: {len(V)} messages x {len(V[0]['content'])} chars, "
              f"plain dicts; {len(CHANNELS)} channels, each = V")

        writes = [bench_writes(tmp, run, args.synchronous) for run in range(RUNS)]
        r = bench_reads(tmp, args.synchronous)

    sync_name = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(r["synchronous"])
    print(f"- journal_mode={r['journal_mode']}, synchronous={sync_name}"
          f"{' (SQLite default, untouched)' if args.synchronous == 'default' else ''}"
          f", page_size={r['page_size']}")
    print(f"- avg stored checkpoint blob: {r['blob_bytes']:,.0f} B, "
          f"metadata: {r['meta_bytes']:,.0f} B")
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
          f"min {min(list_ms):.1f} / max {max(list_ms):.1f} |")
    ns_ms = r["list_ns_ms"]
    print(f"| *(extra)* list with checkpoint_ns=\"\" in config, median of {N_LIST} | "
          f"{statistics.median(ns_ms):.1f} ms | "
          f"min {min(ns_ms):.1f} / max {max(ns_ms):.1f} |")
    print(f"| bytes on disk per checkpoint (after wal_checkpoint(TRUNCATE)) | "
          f"{r['bytes_per_ckpt']:,.0f} B | file {r['file_bytes']:,} B, "
          f"WAL {r['wal_bytes']:,} B |")
    print(f"\nBest = max throughput / min latency over {RUNS} runs "
          "(p50 and p99 minimised separately); runs listed in order.")


if __name__ == "__main__":
    sys.exit(main())
