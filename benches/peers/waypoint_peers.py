#!/usr/bin/env python3
"""LangGraph's side of `waypoint bench --peers`, one sample per request, as JSON.

The workloads are the other scripts' in this directory (same savers, stores, graph and
sanity checks); the sizes come from the caller. `waypoint bench --peers` starts this script
with `--serve` and asks for one sample at a time, alternating with its own samples, so that a
swing of the machine's speed hits both sides.

Protocol: one JSON request per line on stdin, one JSON answer per line on stdout.

    {"workload": "checkpoint.put", "backend": "sqlite", "args": {"puts": 500}}
    -> {"samples": [4123.5]}          rates (per second) or latencies (ms), as named below
    -> {"none": "why"}                LangGraph has no counterpart on this backend
    -> {"error": "what went wrong"}

Workloads (backends memory, sqlite, postgres; "postgres" needs --postgres):

    checkpoint.put        args puts               -> [puts/s] of sequential puts, new thread
    checkpoint.put16      args writers, per_writer -> [puts/s] of concurrent writers (postgres)
    checkpoint.get_tuple  args history, calls     -> ms of each get_tuple of the latest
    checkpoint.list       args history            -> [ms] of listing the whole thread
    store.put             args items              -> [items/s], one put at a time
    store.batch           args items, batch       -> [items/s], puts in batches
    store.get             args items, calls       -> ms of each get on a filled store
    store.search          args items, calls       -> ms of each filtered search (limit 10)
    store.semantic        args items, calls       -> ms of each semantic search (memory)
    runtime.steps         args invocations, messages -> [super-steps/s], a new thread each
    runtime.history       args invocations, messages -> [ms] of get_state_history
    fork                  args invocations, messages, at ("middle" or "head"), calls
                          -> ms of each update_state fork
    serde.encode          args messages, chars, data, window_ms, objects -> [MB/s]
    serde.decode          the same                                    -> [MB/s]

`messages` true: the runtime state holds LangChain HumanMessage/AIMessage objects under
`add_messages`, as real apps store them; false: plain dicts under `operator.add` (the
`langgraph_runtime.py` graph). `objects` true: the serde payload's messages are LangChain
objects, false: plain dicts. Set-up (a saver holding a thread, a filled store, a compiled
graph) is built on first use and kept for the next request with the same arguments; the
samples exclude it.

Usage:
    "$WAYPOINT_TEST_PYTHON" benches/peers/waypoint_peers.py --serve --dir DIR [--postgres URL]
    "$WAYPOINT_TEST_PYTHON" benches/peers/waypoint_peers.py --dir DIR --json '{"workload": ...}'
"""

from __future__ import annotations

import argparse
import contextlib
import json
import operator
import sys
import tempfile
import time
import traceback
import uuid
from pathlib import Path
from typing import Annotated, Any, Callable, TypedDict

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))

from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.graph.message import add_messages  # noqa: E402
from langgraph.store.base import PutOp  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402

import langgraph_runtime as rt  # noqa: E402
import langgraph_sqlite as lsq  # noqa: E402
import langgraph_store as lst  # noqa: E402
from langgraph_serde import as_message_objects, as_plain_dicts, gen_raw  # noqa: E402
from langgraph_sqlite import NoGC, build_history, put_chain  # noqa: E402


class NoCounterpart(Exception):
    """LangGraph has no such saver or store here."""


# --------------------------------------------------------------------------
# Savers and stores
# --------------------------------------------------------------------------


class Backends:
    """Fresh savers and stores: SQLite files in `dir`, schemas of a throwaway database."""

    def __init__(self, dir_path: str, postgres: str | None) -> None:
        self.dir = dir_path
        self.postgres = postgres
        self.db: Any = None
        self.n = 0
        self.closers: list[Callable[[], None]] = []

    def bench_db(self) -> Any:
        if not self.postgres:
            raise NoCounterpart("no PostgreSQL URL given")
        if self.db is None:
            from langgraph_postgres import BenchDB  # noqa: PLC0415

            self.db = BenchDB(self.postgres)
        return self.db

    def saver(self, backend: str) -> Any:
        self.n += 1
        if backend == "memory":
            return InMemorySaver()
        if backend == "sqlite":
            saver, conn, _ = lsq.open_saver(self.dir, f"saver-{self.n}.sqlite", "default")
            self.closers.append(conn.close)
            return saver
        if backend == "postgres":
            saver, conn, _, _ = self.bench_db().open_saver(f"saver{self.n}")
            self.closers.append(conn.close)
            return saver
        raise NoCounterpart(f"LangGraph has no {backend} checkpointer here")

    def store(self, backend: str, index: dict[str, Any] | None = None) -> Any:
        self.n += 1
        if index is not None and backend != "memory":
            raise NoCounterpart(
                f"LangGraph's {backend} store needs a vector extension for semantic search")
        if backend == "memory":
            return InMemoryStore(index=index) if index else InMemoryStore()
        env = lst.Env(sqlite_dir=self.dir)
        if backend == "postgres":
            env.db = self.bench_db()
        elif backend != "sqlite":
            raise NoCounterpart(f"LangGraph has no {backend} store here")
        stack = contextlib.ExitStack()
        store = stack.enter_context(lst.open_store(env, backend, f"store{self.n}"))
        self.closers.append(stack.close)
        return store

    def close(self) -> None:
        for close in reversed(self.closers):
            with contextlib.suppress(Exception):
                close()
        if self.db is not None:
            self.db.drop()


# --------------------------------------------------------------------------
# The runtime graph, with plain dicts or LangChain messages
# --------------------------------------------------------------------------


class MessagesState(TypedDict):
    messages: Annotated[list, add_messages]


def build_graph(messages: bool) -> StateGraph:
    """langgraph_runtime.py's 10-node line; with `messages`, LangChain objects."""
    if not messages:
        return rt.build_graph()
    builder = StateGraph(MessagesState)
    prev = START
    for i in range(rt.N_NODES):
        def node(state: MessagesState, i: int = i) -> dict[str, Any]:
            return {"messages": [AIMessage(content=f"n{i}")]}

        builder.add_node(f"n{i}", node)
        builder.add_edge(prev, f"n{i}")
        prev = f"n{i}"
    builder.add_edge(prev, END)
    return builder


def graph_input(messages: bool) -> dict[str, Any]:
    return {"messages": [HumanMessage(content="hi")]} if messages else rt.INPUT


def fork_update(messages: bool) -> dict[str, Any]:
    return {"messages": [HumanMessage(content="fork")]} if messages else rt.FORK_UPDATE


def contents(values: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, content) of every message, for either shape."""
    out = []
    for m in values["messages"]:
        if isinstance(m, dict):
            out.append((m["role"], m["content"]))
        else:
            out.append(({"human": "user"}.get(m.type, m.type), m.content))
    return out


def expected(invokes: int) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in rt.expected_messages(invokes)]


# --------------------------------------------------------------------------
# Workloads
# --------------------------------------------------------------------------


class Peers:
    def __init__(self, backends: Backends) -> None:
        self.b = backends
        self.fixtures: dict[str, Any] = {}

    def fixture(self, key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        k = json.dumps(key, sort_keys=True)
        if k not in self.fixtures:
            self.fixtures[k] = build()
        return self.fixtures[k]

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        workload = request["workload"]
        backend = request["backend"]
        args = request.get("args", {})
        method = getattr(self, "w_" + workload.replace(".", "_"), None)
        if method is None:
            return {"error": f"unknown workload {workload!r}"}
        try:
            return {"samples": [float(x) for x in method(backend, **args)]}
        except NoCounterpart as e:
            return {"none": str(e)}

    # Checkpointers (langgraph_sqlite.py / langgraph_postgres.py workloads)

    def w_checkpoint_put(self, backend: str, puts: int) -> list[float]:
        saver = self.fixture(("put", backend), lambda: self.b.saver(backend))
        steps = build_history(saver, puts)
        thread = f"put-{uuid.uuid4()}"
        with NoGC():
            _, seconds = put_chain(saver, thread, steps)
        head = saver.get_tuple({"configurable": {"thread_id": thread}})
        assert head is not None and head.checkpoint["id"] == steps[-1][0]["id"]
        return [puts / seconds]

    def w_checkpoint_put16(self, backend: str, writers: int, per_writer: int) -> list[float]:
        if backend != "postgres":
            raise NoCounterpart(f"LangGraph's {backend} saver has no concurrent writers here")
        from langgraph_postgres import bench_concurrent  # noqa: PLC0415

        rate, _ = bench_concurrent(self.b.bench_db(), writers, per_writer)
        return [rate]

    def history_thread(self, backend: str, history: int) -> tuple[Any, str]:
        def build() -> tuple[Any, str]:
            saver = self.b.saver(backend)
            thread = f"reads-{uuid.uuid4()}"
            put_chain(saver, thread, build_history(saver, history))
            return saver, thread

        return self.fixture(("reads", backend, history), build)

    def w_checkpoint_get_tuple(self, backend: str, history: int, calls: int) -> list[float]:
        saver, thread = self.history_thread(backend, history)
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        with NoGC():
            out = lsq.latencies_ms(saver.get_tuple, [config] * calls)
        got = saver.get_tuple(config)
        assert got is not None and got.metadata["step"] == history - 1
        return out

    def w_checkpoint_list(self, backend: str, history: int) -> list[float]:
        saver, thread = self.history_thread(backend, history)
        config = {"configurable": {"thread_id": thread}}
        with NoGC():
            t0 = time.perf_counter()
            n = len(list(saver.list(config)))
            took = (time.perf_counter() - t0) * 1e3
        assert n == history, n
        return [took]

    # Stores (langgraph_store.py workloads)

    def w_store_put(self, backend: str, items: int) -> list[float]:
        store = self.fixture(("store-put", backend), lambda: self.b.store(backend))
        run = uuid.uuid4().hex
        work = [(ns, f"{run}{key}", v) for ns, key, v in lst.make_items(items)]
        with NoGC():
            t0 = time.perf_counter()
            for ns, key, value in work:
                store.put(ns, key, value)
            took = time.perf_counter() - t0
        ns, key, value = work[-1]
        assert store.get(ns, key).value == value
        return [items / took]

    def w_store_batch(self, backend: str, items: int, batch: int) -> list[float]:
        store = self.fixture(("store-batch", backend), lambda: self.b.store(backend))
        run = uuid.uuid4().hex
        work = [PutOp(ns, f"{run}{key}", v) for ns, key, v in lst.make_items(items)]
        batches = [work[b:b + batch] for b in range(0, len(work), batch)]
        with NoGC():
            t0 = time.perf_counter()
            for ops in batches:
                store.batch(ops)
            took = time.perf_counter() - t0
        last = work[-1]
        assert store.get(last.namespace, last.key).value == last.value
        return [items / took]

    def filled(self, backend: str, items: int, index: bool) -> tuple[Any, list[Any]]:
        def build() -> tuple[Any, list[Any]]:
            spec = {"dims": lst.DIMS, "embed": lst.embed_fn, "fields": ["text"]}
            store = self.b.store(backend, spec if index else None)
            data = lst.make_items(items)
            lst.load(store, data)
            lst.check_contents(store, data)
            return store, data

        return self.fixture(("filled", backend, items, index), build)

    def w_store_get(self, backend: str, items: int, calls: int) -> list[float]:
        store, data = self.filled(backend, items, False)
        picks = [data[(n * 7919) % items] for n in range(calls)]
        with NoGC():
            lat, got = lst.timed_calls(store.get, [(ns, key) for ns, key, _ in picks], {})
        for (_, key, value), item in zip(picks, got):
            assert item is not None and item.key == key and item.value == value, key
        return lat

    def w_store_search(self, backend: str, items: int, calls: int) -> list[float]:
        store, _ = self.filled(backend, items, False)
        limit = min(lst.SEARCH_LIMIT, items // 10)
        kw = {"filter": lst.SEARCH_FILTER, "limit": limit}
        with NoGC():
            lat, got = lst.timed_calls(store.search, [(lst.SEARCH_PREFIX,)] * calls, kw)
        for hits in got:
            assert len(hits) == limit and all(h.value["kind"] == "k3" for h in hits)
        return lat

    def w_store_semantic(self, backend: str, items: int, calls: int) -> list[float]:
        store, data = self.filled(backend, items, True)
        limit = min(lst.SEARCH_LIMIT, items // 10)
        texts = [data[(n * 7919) % items][2]["text"] for n in range(calls)]
        with NoGC():
            lat, got = lst.timed_calls(
                lambda q: store.search(lst.SEARCH_PREFIX, query=q, limit=limit),
                [(q,) for q in texts], {})
        for text, hits in zip(texts, got):
            assert len(hits) == limit and hits[0].value["text"] == text
        return lat

    # The graph runtime (langgraph_runtime.py workloads)

    def graph(self, backend: str, messages: bool, purpose: str) -> Any:
        def build() -> Any:
            graph = build_graph(messages).compile(checkpointer=self.b.saver(backend))
            graph.invoke(graph_input(messages), rt.thread_config(f"warmup-{uuid.uuid4()}"))
            return graph

        return self.fixture(("graph", backend, messages, purpose), build)

    def w_runtime_steps(self, backend: str, invocations: int, messages: bool) -> list[float]:
        graph = self.graph(backend, messages, "steps")
        configs = [rt.thread_config(str(uuid.uuid4())) for _ in range(invocations)]
        inputs = graph_input(messages)
        with NoGC():
            t0 = time.perf_counter()
            for config in configs:
                graph.invoke(inputs, config)
            took = time.perf_counter() - t0
        assert contents(graph.get_state(configs[-1]).values) == expected(1)
        return [invocations * rt.STEPS_PER_INVOKE / took]

    def long_thread(self, backend: str, invocations: int, messages: bool) -> tuple[Any, Any]:
        def build() -> tuple[Any, Any]:
            graph = self.graph(backend, messages, f"thread-{invocations}")
            config = rt.thread_config(f"hist-{uuid.uuid4()}")
            for _ in range(invocations):
                graph.invoke(graph_input(messages), config)
            return graph, config

        return self.fixture(("thread", backend, invocations, messages), build)

    def w_runtime_history(self, backend: str, invocations: int, messages: bool) -> list[float]:
        graph, config = self.long_thread(backend, invocations, messages)
        with NoGC():
            t0 = time.perf_counter()
            history = list(graph.get_state_history(config))
            took = (time.perf_counter() - t0) * 1e3
        assert len(history) == invocations * rt.CKPTS_PER_INVOKE, len(history)
        assert contents(history[0].values) == expected(invocations)
        return [took]

    def w_fork(self, backend: str, invocations: int, messages: bool, at: str,
               calls: int) -> list[float]:
        # A thread of its own: forks add checkpoints, which history reads must not see.
        def build() -> tuple[Any, Any]:
            graph = self.graph(backend, messages, "fork")
            config = rt.thread_config(f"fork-{uuid.uuid4()}")
            for _ in range(invocations):
                graph.invoke(graph_input(messages), config)
            # Newest first; each invocation has one checkpoint whose next task is n5.
            after_n4 = [s for s in graph.get_state_history(config) if s.next == ("n5",)]
            assert len(after_n4) == invocations
            return graph, {"middle": after_n4[invocations // 2], "head": after_n4[0]}

        graph, points = self.fixture(("fork", backend, invocations, messages), build)
        point = points[at]
        update = fork_update(messages)
        out, configs = [], []
        with NoGC():
            for _ in range(calls):
                t0 = time.perf_counter()
                configs.append(graph.update_state(point.config, update, as_node=rt.FORK_AS_NODE))
                out.append((time.perf_counter() - t0) * 1e3)
        forked = graph.get_state(configs[-1])
        parent = point.config["configurable"]["checkpoint_id"]
        assert forked.parent_config["configurable"]["checkpoint_id"] == parent
        assert contents(forked.values) == contents(point.values) + [("user", "fork")]
        assert forked.next == ("n5",), forked.next
        return out

    # Serialization (langgraph_serde.py workload)

    def payload(self, messages: int, chars: int, data: bool, objects: bool) -> Any:
        def build() -> Any:
            raw = gen_raw(messages, chars, data)
            value = as_message_objects(raw) if objects else as_plain_dicts(raw)
            serde = JsonPlusSerializer()
            encoded = serde.dumps_typed(value)
            back = serde.loads_typed(encoded)
            assert back == value
            return serde, value, encoded

        return self.fixture(("serde", messages, chars, data, objects), build)

    def serde_sample(self, fn: Callable[[], Any], n_bytes: int, window_ms: float) -> float:
        with NoGC():
            t0 = time.perf_counter()
            calls = 0
            while time.perf_counter() - t0 < window_ms / 1e3:
                fn()
                calls += 1
            took = time.perf_counter() - t0
        return n_bytes * calls / took / 1e6

    def w_serde_encode(self, backend: str, messages: int, chars: int, data: bool,
                       window_ms: float, objects: bool) -> list[float]:
        serde, value, encoded = self.payload(messages, chars, data, objects)
        return [self.serde_sample(lambda: serde.dumps_typed(value), len(encoded[1]), window_ms)]

    def w_serde_decode(self, backend: str, messages: int, chars: int, data: bool,
                       window_ms: float, objects: bool) -> list[float]:
        serde, _, encoded = self.payload(messages, chars, data, objects)
        return [self.serde_sample(lambda: serde.loads_typed(encoded), len(encoded[1]), window_ms)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serve", action="store_true", help="answer requests from stdin")
    ap.add_argument("--json", help="answer this one request and exit")
    ap.add_argument("--dir", help="where the SQLite files go (default: a temp dir)")
    ap.add_argument("--postgres", help="PostgreSQL server, a role that may CREATE DATABASE")
    args = ap.parse_args()
    if not args.serve and args.json is None:
        ap.error("give --serve or --json REQUEST")
    with contextlib.ExitStack() as stack:
        dir_path = args.dir or stack.enter_context(tempfile.TemporaryDirectory(prefix="peers-"))
        backends = Backends(dir_path, args.postgres)
        stack.callback(backends.close)
        peers = Peers(backends)
        requests = sys.stdin if args.serve else [args.json]
        for line in requests:
            if not line.strip():
                continue
            try:
                answer = peers.answer(json.loads(line))
            except Exception as e:  # noqa: BLE001 - the caller reports it
                detail = "".join(traceback.format_exception_only(type(e), e)).strip()
                answer = {"error": detail or type(e).__name__}
            print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
