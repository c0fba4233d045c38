#!/usr/bin/env python3
"""Peer benchmark: LangGraph's graph runtime (Pregel loop + checkpointer), sync API.

Runs a small compiled `StateGraph` through `graph.invoke` with three
checkpointers, so Waypoint's Rust runtime can be compared side by side with
real LangGraph on the same machine. The Rust bench copies this workload, so
the constants below are the specification.

Graph:

  * State: `messages: Annotated[list, operator.add]`, a plain list of dicts
    and nothing else (no langchain `add_messages`: the reducer stays a list
    concatenation, cheap and easy to mirror).
  * 10 nodes in a line: START -> n0 -> n1 -> ... -> n9 -> END. Node i returns
    {"messages": [{"role": "ai", "content": f"n{i}"}]}.
  * Input of every invocation: {"messages": [{"role": "user", "content": "hi"}]}.
  * `graph.invoke(input, config)`, default durability ("async": the
    checkpoint of step s is written in a background thread while step s + 1
    runs; invoke() still waits for every write before it returns).

  One invocation = 11 super-steps (the START step, which writes the input to
  the channels, plus one per node) and writes 12 checkpoints (the "input"
  checkpoint before the START step, then one after each of the 11 steps).

Checkpointers (each measurement gets a fresh, empty one and a newly compiled
graph; one warm-up invocation on a throwaway thread runs before any timing):

  * InMemorySaver (`langgraph.checkpoint.memory`).
  * SqliteSaver: `sqlite3.connect(path, check_same_thread=False)` on a new
    file in a temp dir, then `setup()` (WAL; synchronous stays at SQLite's
    default FULL unless --synchronous says otherwise).
  * PostgresSaver: a connection opened as `from_conn_string` opens it
    (autocommit=True, prepare_threshold=0, row_factory=dict_row), then
    `setup()`. The database/schema handling is langgraph_postgres.py's: a
    throwaway `peer_bench_<hex>` database, one fresh schema per measurement.
    Skipped, with a message, when no URL is given.

Measurements per checkpointer:

  1. distinct threads  200 invocations, each on a new uuid4 thread_id
                  -> super-steps/s (200 x 11 / wall time) and invocations/s.
  2. one thread   200 invocations on one thread_id; the state grows by 11
                  messages per invocation (2,200 at the end)
                  -> super-steps/s overall, and the ratio
                  (time of the last 10 invocations) / (time of the first 10).
  3. get_state_history  a fresh thread with 50 invocations (50 x 12 = 600
                  checkpoints, checked), then `list(graph.get_state_history(
                  config))` -> best of 3, ms.
  4. fork         on that thread, the checkpoint taken right after n4 ran
                  (next == ("n5",)) in invocation 25 of 50, i.e. the
                  (12 x 24 + 6)-th oldest checkpoint, metadata step 293;
                  `graph.update_state(its config, {"messages": [{"role":
                  "user", "content": "fork"}]}, as_node="n4")`
                  -> median of 9 calls (best and worst printed too). Each
                  call adds one more child to that same checkpoint.

Results are sanity-checked outside the timed regions (message counts and
contents, checkpoint counts, the fork's parent, values and next node). As in
the other peer benches, the cyclic GC is off while timing (gc.collect()
first); --gc leaves it on.

Usage (from the repo root):
    source scripts/python.sh && langgraph_venv     # pinned LangGraph venv
    "$WAYPOINT_TEST_PYTHON" benches/peers/langgraph_runtime.py --postgres postgres://...
    # --postgres defaults to $WAYPOINT_TEST_POSTGRES_URL (a role with CREATEDB)
    # options: --quick (smoke run) --savers memory,sqlite,postgres --dir DIR
    #          --synchronous {default,FULL,NORMAL,OFF} --gc
"""

from __future__ import annotations

import argparse
import contextlib
import operator
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Annotated, Any, Callable, Iterator, TypedDict

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

# Reuse the SQLite peer bench's helpers (same directory); don't leave a
# __pycache__ behind in the repo. The Postgres helpers are imported lazily,
# so a run without a server needs nothing Postgres-specific.
sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
from langgraph_sqlite import NoGC, fs_type  # noqa: E402

# --------------------------------------------------------------------------
# Workload (the Rust bench mirrors these numbers)
# --------------------------------------------------------------------------

N_NODES = 10
STEPS_PER_INVOKE = N_NODES + 1  # the START step + one per node
CKPTS_PER_INVOKE = N_NODES + 2  # "input" checkpoint + one per super-step
INPUT = {"messages": [{"role": "user", "content": "hi"}]}
FORK_UPDATE = {"messages": [{"role": "user", "content": "fork"}]}
FORK_AS_NODE = "n4"


@dataclass(frozen=True)
class Sizes:
    invokes: int  # measurements 1 and 2
    window: int  # first/last invocations compared in 2
    history_invokes: int  # invocations on the thread of 3 and 4
    history_repeats: int  # best of, for 3
    fork_repeats: int  # median of, for 4


FULL = Sizes(invokes=200, window=10, history_invokes=50, history_repeats=3, fork_repeats=9)
QUICK = Sizes(invokes=30, window=10, history_invokes=10, history_repeats=2, fork_repeats=3)


class State(TypedDict):
    messages: Annotated[list, operator.add]


def make_node(i: int) -> Callable[[State], dict[str, Any]]:
    # A fresh list per call: the reducer concatenates, it must not alias.
    def node(state: State) -> dict[str, Any]:
        return {"messages": [{"role": "ai", "content": f"n{i}"}]}

    node.__name__ = f"n{i}"
    return node


def build_graph() -> StateGraph:
    builder = StateGraph(State)
    prev = START
    for i in range(N_NODES):
        builder.add_node(f"n{i}", make_node(i))
        builder.add_edge(prev, f"n{i}")
        prev = f"n{i}"
    builder.add_edge(prev, END)
    return builder


def thread_config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def expected_messages(invokes: int) -> list[dict[str, str]]:
    """The state a thread holds after `invokes` complete invocations."""
    one = [INPUT["messages"][0]] + [
        {"role": "ai", "content": f"n{i}"} for i in range(N_NODES)
    ]
    return one * invokes


# --------------------------------------------------------------------------
# Checkpointers: each call opens a fresh, empty one
# --------------------------------------------------------------------------

Opener = Callable[[str], contextlib.AbstractContextManager[BaseCheckpointSaver]]


@contextlib.contextmanager
def open_memory(_label: str) -> Iterator[BaseCheckpointSaver]:
    yield InMemorySaver()


def sqlite_opener(dir_path: str, synchronous: str, settings: dict[str, Any]) -> Opener:
    @contextlib.contextmanager
    def open_sqlite(label: str) -> Iterator[BaseCheckpointSaver]:
        path = os.path.join(dir_path, f"{label}.sqlite")
        assert not os.path.exists(path)
        conn = sqlite3.connect(path, check_same_thread=False)
        try:
            saver = SqliteSaver(conn)
            saver.setup()
            if synchronous != "default":
                conn.execute(f"PRAGMA synchronous={synchronous}")
            settings["journal_mode"] = conn.execute("PRAGMA journal_mode").fetchone()[0]
            settings["synchronous"] = conn.execute("PRAGMA synchronous").fetchone()[0]
            yield saver
        finally:
            conn.close()
            # The one-thread run leaves ~100 MB; don't keep it around.
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path + suffix)

    return open_sqlite


def postgres_opener(db: Any) -> Opener:
    @contextlib.contextmanager
    def open_postgres(label: str) -> Iterator[BaseCheckpointSaver]:
        saver, conn, _, _ = db.open_saver(label)
        try:
            yield saver
        finally:
            conn.close()

    return open_postgres


def compiled(saver: BaseCheckpointSaver) -> Any:
    """Compile the graph on `saver` and run one untimed invocation on it.

    The warm-up goes to its own thread so the measured threads start empty;
    it pays one-off costs (lazy imports, first queries, caches).
    """
    graph = build_graph().compile(checkpointer=saver)
    graph.invoke(INPUT, thread_config(f"warmup-{uuid.uuid4()}"))
    return graph


# --------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------


def timed_invokes(
    graph: Any, configs: list[dict[str, Any]], keep_gc: bool
) -> tuple[float, list[float]]:
    """Invoke once per config; returns (wall seconds, per-invocation seconds)."""
    invoke = graph.invoke
    clock = time.perf_counter
    per_call = []
    with contextlib.nullcontext() if keep_gc else NoGC():
        t_start = clock()
        for config in configs:
            t0 = clock()
            invoke(INPUT, config)
            per_call.append(clock() - t0)
        wall = clock() - t_start
    return wall, per_call


def bench_distinct(open_saver: Opener, sizes: Sizes, keep_gc: bool) -> dict[str, float]:
    """Measurement 1: every invocation on a new thread."""
    with open_saver("distinct") as saver:
        graph = compiled(saver)
        configs = [thread_config(str(uuid.uuid4())) for _ in range(sizes.invokes)]
        wall, _ = timed_invokes(graph, configs, keep_gc)

        want = expected_messages(1)
        for config in (configs[0], configs[-1]):
            assert graph.get_state(config).values["messages"] == want
        n_ckpts = len(list(saver.list(configs[-1])))
        assert n_ckpts == CKPTS_PER_INVOKE, n_ckpts
    return {
        "steps_per_s": sizes.invokes * STEPS_PER_INVOKE / wall,
        "invokes_per_s": sizes.invokes / wall,
    }


def bench_one_thread(open_saver: Opener, sizes: Sizes, keep_gc: bool) -> dict[str, float]:
    """Measurement 2: every invocation on the same thread, state growing."""
    with open_saver("one_thread") as saver:
        graph = compiled(saver)
        config = thread_config(f"one-{uuid.uuid4()}")
        wall, per_call = timed_invokes(graph, [config] * sizes.invokes, keep_gc)

        # Listing all 2,400 checkpoints would decode ~2.6M messages, so
        # check the head only: full state, and the step counter.
        state = graph.get_state(config)
        assert state.values["messages"] == expected_messages(sizes.invokes)
        last_step = sizes.invokes * CKPTS_PER_INVOKE - 2  # the first checkpoint is step -1
        assert state.metadata["step"] == last_step, state.metadata["step"]
    first = sum(per_call[: sizes.window])
    last = sum(per_call[-sizes.window :])
    return {
        "steps_per_s": sizes.invokes * STEPS_PER_INVOKE / wall,
        "invokes_per_s": sizes.invokes / wall,
        "first_ms": first / sizes.window * 1e3,
        "last_ms": last / sizes.window * 1e3,
        "ratio": last / first,
    }


def bench_history_and_fork(open_saver: Opener, sizes: Sizes, keep_gc: bool) -> dict[str, Any]:
    """Measurements 3 and 4 on one long thread (history first: forks add checkpoints)."""
    with open_saver("history") as saver:
        graph = compiled(saver)
        config = thread_config(f"hist-{uuid.uuid4()}")
        for _ in range(sizes.history_invokes):
            graph.invoke(INPUT, config)
        n_want = sizes.history_invokes * CKPTS_PER_INVOKE

        # 3. get_state_history, best of N.
        # One gc.collect() before the repeats, not one per call: a collection
        # right before every call made the short update_state ~2.5x slower
        # (0.9 vs 0.35 ms on InMemorySaver), likely by releasing memory that
        # the call then has to take back.
        history_ms = []
        with contextlib.nullcontext() if keep_gc else NoGC():
            for _ in range(sizes.history_repeats):
                t0 = time.perf_counter()
                history = list(graph.get_state_history(config))
                history_ms.append((time.perf_counter() - t0) * 1e3)
                assert len(history) == n_want, (len(history), n_want)
        assert history[0].values["messages"] == expected_messages(sizes.history_invokes)

        # 4. fork point: the middle invocation's checkpoint right after n4
        # ran. History is newest first, and each invocation has exactly one
        # checkpoint whose next task is n5.
        after_n4 = [s for s in history if s.next == ("n5",)]
        assert len(after_n4) == sizes.history_invokes
        mid_invoke = sizes.history_invokes // 2  # 1-based, counted from the oldest
        fork_from = after_n4[sizes.history_invokes - mid_invoke]
        fork_step = fork_from.metadata["step"]
        assert fork_step == (mid_invoke - 1) * CKPTS_PER_INVOKE - 1 + 6, fork_step
        base = fork_from.values["messages"]
        assert len(base) == (mid_invoke - 1) * STEPS_PER_INVOKE + 6

        fork_ms = []
        new_configs = []
        with contextlib.nullcontext() if keep_gc else NoGC():
            for _ in range(sizes.fork_repeats):
                t0 = time.perf_counter()
                new_config = graph.update_state(fork_from.config, FORK_UPDATE, as_node=FORK_AS_NODE)
                fork_ms.append((time.perf_counter() - t0) * 1e3)
                new_configs.append(new_config)

        # Every fork is a child of the chosen checkpoint holding its messages
        # plus the update, and resumes at n5.
        parent_id = fork_from.config["configurable"]["checkpoint_id"]
        for new_config in (new_configs[0], new_configs[-1]):
            forked = graph.get_state(new_config)
            assert forked.parent_config["configurable"]["checkpoint_id"] == parent_id
            assert forked.values["messages"] == base + FORK_UPDATE["messages"]
            assert forked.next == ("n5",), forked.next
            assert forked.metadata["source"] == "update"
        assert len({c["configurable"]["checkpoint_id"] for c in new_configs}) == sizes.fork_repeats
    return {
        "n_checkpoints": len(history),
        "history_ms": history_ms,
        "fork_ms": fork_ms,
        "fork_step": fork_step,
        "fork_messages": len(base),
    }


def bench_saver(open_saver: Opener, sizes: Sizes, keep_gc: bool) -> dict[str, Any]:
    return {
        "distinct": bench_distinct(open_saver, sizes, keep_gc),
        "one": bench_one_thread(open_saver, sizes, keep_gc),
        **bench_history_and_fork(open_saver, sizes, keep_gc),
    }


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--postgres", "--url", dest="postgres",
                    default=os.environ.get("WAYPOINT_TEST_POSTGRES_URL"),
                    help="PostgreSQL server, as a role that may CREATE DATABASE "
                         "(default: $WAYPOINT_TEST_POSTGRES_URL; none: PostgresSaver is skipped)")
    ap.add_argument("--savers", default="memory,sqlite,postgres",
                    help="comma-separated subset of memory,sqlite,postgres")
    ap.add_argument("--quick", action="store_true", help="small smoke run")
    ap.add_argument("--dir", default=None, help="parent dir for the SQLite temp dir")
    ap.add_argument("--synchronous", default="default",
                    choices=["default", "FULL", "NORMAL", "OFF"],
                    help="SQLite PRAGMA synchronous after setup() (default: untouched)")
    ap.add_argument("--gc", action="store_true", help="leave the cyclic GC on while timing")
    args = ap.parse_args()
    wanted = [s.strip() for s in args.savers.split(",") if s.strip()]
    unknown = set(wanted) - {"memory", "sqlite", "postgres"}
    if unknown:
        ap.error(f"unknown saver(s): {', '.join(sorted(unknown))}")
    sizes = QUICK if args.quick else FULL

    print("# LangGraph graph runtime peer benchmark" + (" (--quick)" if args.quick else "") + "\n")
    print(f"- Python: {platform.python_version()} ({platform.python_implementation()})")
    for pkg in ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite",
                "langgraph-checkpoint-postgres", "psycopg"):
        print(f"- {pkg}: {version(pkg)}")
    print(f"- SQLite library: {sqlite3.sqlite_version}")
    print(f"- platform: {platform.platform()} / {platform.machine()}, {os.cpu_count()} CPUs")
    print(f"- graph: START -> n0 -> ... -> n{N_NODES - 1} -> END, state "
          "`messages: Annotated[list, operator.add]` (plain dicts); "
          f"1 invocation = {STEPS_PER_INVOKE} super-steps, {CKPTS_PER_INVOKE} checkpoints; "
          "graph.invoke, default durability")

    results: dict[str, dict[str, Any]] = {}
    with contextlib.ExitStack() as stack:
        if "memory" in wanted:
            results["InMemorySaver"] = bench_saver(open_memory, sizes, args.gc)
        if "sqlite" in wanted:
            tmp = stack.enter_context(
                tempfile.TemporaryDirectory(prefix="lg-runtime-", dir=args.dir))
            settings: dict[str, Any] = {}
            results["SqliteSaver"] = bench_saver(
                sqlite_opener(tmp, args.synchronous, settings), sizes, args.gc)
            sync_name = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(settings["synchronous"])
            print(f"- SQLite: DB dir {tmp} ({fs_type(tmp)}), "
                  f"journal_mode={settings['journal_mode']}, synchronous={sync_name}"
                  f"{' (default, untouched)' if args.synchronous == 'default' else ''}")
        if "postgres" in wanted and not args.postgres:
            print("- PostgresSaver: skipped (no --postgres URL and "
                  "WAYPOINT_TEST_POSTGRES_URL is not set)")
        elif "postgres" in wanted:
            from langgraph_postgres import BenchDB, server_info  # noqa: PLC0415

            info = server_info(args.postgres)
            print(f"- PostgreSQL server: {info['server_version']}; fsync={info['fsync']}, "
                  f"synchronous_commit={info['synchronous_commit']}, "
                  f"wal_sync_method={info['wal_sync_method']}, "
                  f"shared_buffers={info['shared_buffers']}")
            db = BenchDB(args.postgres)
            stack.callback(db.drop)
            print(f"- PostgreSQL database: {db.name} (dropped at the end), "
                  "one fresh schema per measurement")
            results["PostgresSaver"] = bench_saver(postgres_opener(db), sizes, args.gc)

    if not results:
        return
    print(f"- method: each measurement on a fresh checkpointer after 1 warm-up invocation; "
          f"GC {'on' if args.gc else 'disabled'} while timing; "
          "super-steps/s = invocations x 11 / wall time\n")

    names = list(results)
    n_hist = sizes.history_invokes * CKPTS_PER_INVOKE
    any_r = next(iter(results.values()))
    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        (f"distinct threads ({sizes.invokes} invocations): super-steps/s",
         lambda r: f"{r['distinct']['steps_per_s']:,.0f}"),
        ("distinct threads: invocations/s",
         lambda r: f"{r['distinct']['invokes_per_s']:,.1f}"),
        (f"one thread ({sizes.invokes} invocations): super-steps/s",
         lambda r: f"{r['one']['steps_per_s']:,.0f}"),
        ("one thread: invocations/s",
         lambda r: f"{r['one']['invokes_per_s']:,.1f}"),
        (f"one thread: last {sizes.window} / first {sizes.window} invocations (time ratio)",
         lambda r: f"{r['one']['ratio']:.2f} ({r['one']['first_ms']:.1f} -> "
                   f"{r['one']['last_ms']:.1f} ms/inv)"),
        (f"get_state_history ({n_hist} checkpoints), best of {sizes.history_repeats}",
         lambda r: f"{min(r['history_ms']):,.1f} ms"),
        (f"update_state fork (as_node={FORK_AS_NODE}, step {any_r['fork_step']}, "
         f"{any_r['fork_messages']} messages), median of {sizes.fork_repeats}",
         lambda r: f"{statistics.median(r['fork_ms']):.2f} ms "
                   f"(best {min(r['fork_ms']):.2f}, max {max(r['fork_ms']):.2f})"),
    ]
    for name, r in results.items():
        assert r["n_checkpoints"] == n_hist
        print(f"- {name}: history thread holds {r['n_checkpoints']} checkpoints "
              f"(expected {sizes.history_invokes} x {CKPTS_PER_INVOKE} = {n_hist}); "
              "get_state_history runs: "
              + " / ".join(f"{x:.1f}" for x in r["history_ms"]) + " ms")
    print()
    print("| measurement | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for label, cell in rows:
        print(f"| {label} | " + " | ".join(cell(results[n]) for n in names) + " |")


if __name__ == "__main__":
    sys.exit(main())
