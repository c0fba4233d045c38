#!/usr/bin/env python3
"""Peer benchmark: LangGraph's checkpoint serializer (JsonPlusSerializer).

Measures encode/decode throughput of

    langgraph.checkpoint.serde.jsonplus.JsonPlusSerializer().dumps_typed(obj)
    langgraph.checkpoint.serde.jsonplus.JsonPlusSerializer().loads_typed(tagged)

on seeded, synthetic chat-history payloads, so the numbers can be compared
side by side with Waypoint's Rust serializer benchmarks on the same machine.

Throughput is reported in MB/s where MB = 1e6 bytes of the *encoded* output
(for both encode and decode), i.e. (encoded_len * iterations) / seconds / 1e6.

Payloads (all content generated with random.Random(42), one fresh generator
per payload, so every payload is reproducible on its own):

  * message content: exactly N chars drawn with rng.choices() from
    a-z A-Z 0-9 and space; message i is "user" (HumanMessage / type "human")
    if i is even, else "assistant" (AIMessage / type "ai"). Per message the
    content is drawn first, then
    id = str(uuid.UUID(int=rng.getrandbits(128), version=4)).
  * small : 10 messages, N=200
  * medium: 200 messages, N=200, plus "data": {"k0".."k999"} whose values
            cycle int (rng.randint(-10**9, 10**9)), float (rng.random()*1e6),
            str (16 chars from the alphabet); drawn after the messages.
  * large : 2,000 messages, N=460 (~1 MB encoded)

Shapes:
  (a) "message objects": {"messages": [HumanMessage/AIMessage(...)], ...}
  (b) "plain dicts":     {"messages": [{"type", "content", "id"}], ...}
plus an extra "ormsgpack raw" row: ormsgpack.packb / ormsgpack.unpackb (no
options, no default hook) on the plain-dict shape, i.e. the floor that
JsonPlusSerializer builds on.

Timing: time.perf_counter around a tight loop; the iteration count is
calibrated so one measurement takes ~1 s; the best of 5 repeats is reported.
As with the stdlib `timeit`, the garbage collector is disabled while timing.

Warnings: loads_typed() may log "Deserializing unregistered type ..." for
types outside LangGraph's SAFE_MSGPACK_TYPES. A verification round-trip runs
first (with logging/warnings captured and counted, and reported); during the
timed loops warnings and the jsonplus logger are silenced so that emitting
them cannot distort timing.

Usage (Python 3.11):
    python3 -m venv /work/venv-langgraph
    /work/venv-langgraph/bin/pip install langgraph-checkpoint langchain-core
    /work/venv-langgraph/bin/python benches/peers/langgraph_serde.py
"""

from __future__ import annotations

import gc
import logging
import platform
import random
import string
import sys
import time
import uuid
import warnings
from importlib.metadata import version
from typing import Any, Callable

import ormsgpack
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

# --------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------

SEED = 42
ALPHABET = string.ascii_lowercase + string.ascii_uppercase + string.digits + " "
TARGET_SECONDS = 1.0  # wall time per measurement (one repeat)
REPEATS = 5  # best-of

# name -> (message count, content length N, include the 1,000-entry "data" dict)
PAYLOADS: dict[str, tuple[int, int, bool]] = {
    "small": (10, 200, False),
    "medium": (200, 200, True),
    "large": (2_000, 460, False),
}

# --------------------------------------------------------------------------
# Payload generation
# --------------------------------------------------------------------------


def rand_text(rng: random.Random, n: int) -> str:
    """Exactly n ASCII chars from ALPHABET."""
    return "".join(rng.choices(ALPHABET, k=n))


def gen_raw(n_messages: int, n_chars: int, with_data: bool) -> dict[str, Any]:
    """Shape-neutral description of a payload (fresh Random(42) each call)."""
    rng = random.Random(SEED)
    messages = []
    for i in range(n_messages):
        content = rand_text(rng, n_chars)
        msg_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        messages.append(("human" if i % 2 == 0 else "ai", content, msg_id))
    raw: dict[str, Any] = {"messages": messages}
    if with_data:
        data: dict[str, Any] = {}
        for j in range(1_000):
            kind = j % 3
            if kind == 0:
                data[f"k{j}"] = rng.randint(-(10**9), 10**9)
            elif kind == 1:
                data[f"k{j}"] = rng.random() * 1e6
            else:
                data[f"k{j}"] = rand_text(rng, 16)
        raw["data"] = data
    return raw


def as_message_objects(raw: dict[str, Any]) -> dict[str, Any]:
    """Shape (a): LangChain HumanMessage / AIMessage instances."""
    cls = {"human": HumanMessage, "ai": AIMessage}
    out: dict[str, Any] = {
        "messages": [cls[t](content=c, id=i) for t, c, i in raw["messages"]]
    }
    if "data" in raw:
        out["data"] = raw["data"]
    return out


def as_plain_dicts(raw: dict[str, Any]) -> dict[str, Any]:
    """Shape (b): each message is a plain dict."""
    out: dict[str, Any] = {
        "messages": [{"type": t, "content": c, "id": i} for t, c, i in raw["messages"]]
    }
    if "data" in raw:
        out["data"] = raw["data"]
    return out


# --------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------


def _run(fn: Callable[[], Any], iters: int) -> float:
    """Seconds for `iters` calls of fn (GC disabled, like timeit)."""
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        return time.perf_counter() - t0
    finally:
        if gc_was_enabled:
            gc.enable()


def calibrate(fn: Callable[[], Any]) -> int:
    """Iteration count such that one measurement takes ~TARGET_SECONDS."""
    iters = 1
    while True:
        elapsed = _run(fn, iters)
        if elapsed >= 0.2:
            return max(1, round(iters * TARGET_SECONDS / elapsed))
        # grow geometrically (at most 10x per step) until a 0.2 s sample
        iters = max(iters + 1, min(iters * 10, int(iters * 0.25 / max(elapsed, 1e-9))))


def best_seconds_per_call(fn: Callable[[], Any]) -> float:
    """Best-of-REPEATS seconds per call."""
    fn()  # warm up
    iters = calibrate(fn)
    return min(_run(fn, iters) for _ in range(REPEATS)) / iters


def mb_per_s(n_bytes: int, seconds_per_call: float) -> float:
    return n_bytes / seconds_per_call / 1e6


# --------------------------------------------------------------------------
# Warning handling
# --------------------------------------------------------------------------

JSONPLUS_LOGGER = logging.getLogger("langgraph.checkpoint.serde.jsonplus")


class _Counter(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def verify_roundtrip(
    label: str, obj: Any, enc: Callable[[Any], Any], dec: Callable[[Any], Any]
) -> list[str]:
    """Round-trip once, assert equality, return any warnings emitted."""
    handler = _Counter()
    root = logging.getLogger()
    root.addHandler(handler)
    JSONPLUS_LOGGER.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            back = dec(enc(obj))
    finally:
        root.removeHandler(handler)
        JSONPLUS_LOGGER.removeHandler(handler)
    if back != obj:
        raise AssertionError(f"round-trip mismatch for {label}")
    msgs = [f"{label}: log: {r.getMessage()}" for r in handler.records]
    msgs += [f"{label}: warning: {w.message}" for w in caught]
    return msgs


def silence_warnings() -> None:
    """Suppress everything that could print during the timed loops."""
    warnings.simplefilter("ignore")
    JSONPLUS_LOGGER.setLevel(logging.CRITICAL + 1)
    logging.disable(logging.CRITICAL)


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def main() -> None:
    serde = JsonPlusSerializer()

    print("# LangGraph JsonPlusSerializer peer benchmark\n")
    print(f"- Python: {platform.python_version()} ({platform.python_implementation()})")
    print(f"- langgraph-checkpoint: {version('langgraph-checkpoint')}")
    print(f"- langchain-core: {version('langchain-core')}")
    print(f"- ormsgpack: {version('ormsgpack')}")
    print(f"- pydantic: {version('pydantic')}")
    print(f"- platform: {platform.platform()} / {platform.machine()}")
    print(
        f"- method: perf_counter, ~{TARGET_SECONDS:g} s per measurement, "
        f"best of {REPEATS}, GC disabled while timing; MB = 1e6 encoded bytes\n"
    )

    # Build all cases: (payload, shape label, object, encode fn, decode fn).
    cases = []
    for name, (n_msgs, n_chars, with_data) in PAYLOADS.items():
        raw = gen_raw(n_msgs, n_chars, with_data)
        objs = as_message_objects(raw)
        plain = as_plain_dicts(raw)
        cases.append((name, "message objects", objs, serde.dumps_typed, serde.loads_typed))
        cases.append((name, "plain dicts", plain, serde.dumps_typed, serde.loads_typed))
        cases.append((name, "ormsgpack raw", plain, ormsgpack.packb, ormsgpack.unpackb))

    # Verify correctness first, with warnings captured rather than suppressed.
    seen_warnings: list[str] = []
    for name, shape, obj, enc, dec in cases:
        seen_warnings += verify_roundtrip(f"{name}/{shape}", obj, enc, dec)
    silence_warnings()

    print("| payload | shape | encoded bytes | encode MB/s | decode MB/s |")
    print("|---|---|---:|---:|---:|")
    for name, shape, obj, enc, dec in cases:
        encoded = enc(obj)
        if isinstance(encoded, tuple):  # dumps_typed -> ("msgpack", bytes)
            n_bytes = len(encoded[1])
        else:
            n_bytes = len(encoded)
        t_enc = best_seconds_per_call(lambda: enc(obj))
        t_dec = best_seconds_per_call(lambda: dec(encoded))
        print(
            f"| {name} | {shape} | {n_bytes:,} | "
            f"{mb_per_s(n_bytes, t_enc):,.1f} | {mb_per_s(n_bytes, t_dec):,.1f} |",
            flush=True,
        )

    print()
    if seen_warnings:
        print(f"Warnings during verification round-trip ({len(seen_warnings)}), "
              "suppressed while timing:")
        for w in seen_warnings:
            print(f"- {w}")
    else:
        print("No warnings were emitted by loads_typed during the verification "
              "round-trip (HumanMessage/AIMessage are in SAFE_MSGPACK_TYPES); "
              "warnings/logging were suppressed while timing regardless.")


if __name__ == "__main__":
    sys.exit(main())
