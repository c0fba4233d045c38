"""Values of every kind LangGraph's JsonPlusSerializer writes as msgpack, for the Rust
cross-check in `checkpoint/tests/integration/langgraph_interop.rs`.

The classes live at module level in this importable module, so that Python can rebuild
them from the (module, name) LangGraph stores; the runner puts this directory on sys.path.
"""

import dataclasses
import enum
import ipaddress
import pathlib
import uuid
from collections import deque, namedtuple
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from zoneinfo import ZoneInfo

import pydantic
import pydantic.v1
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage


class Color(enum.Enum):
    RED = "red"
    GREEN = 2


@dataclasses.dataclass
class Point:
    x: int
    y: float
    label: str = ""


Pair = namedtuple("Pair", "left right")


class ModelV1(pydantic.v1.BaseModel):
    name: str
    tags: list[str] = []
    score: float = 0.0


class Inner(pydantic.BaseModel):
    when: datetime
    ids: list[uuid.UUID]


class ModelV2(pydantic.BaseModel):
    title: str
    count: int
    inner: Inner
    extra: dict[str, int] = {}


UTC = timezone.utc
PLUS_2 = timezone(timedelta(hours=2))


def values() -> dict[str, object]:
    """Each value by name; the same on every call, so the check can compare."""
    ai = AIMessage(
        content="Let me look that up.",
        id="ai-1",
        tool_calls=[
            {"name": "search", "args": {"query": "weather", "days": 3}, "id": "call_1"}
        ],
        usage_metadata={"input_tokens": 12, "output_tokens": 7, "total_tokens": 19},
        response_metadata={"model_name": "m", "finish_reason": "tool_calls"},
        additional_kwargs={"refusal": None},
    )
    return {
        "int": 42,
        "negative": -70000,
        "big": 2**63 + 5,
        "float": 1.5,
        "whole_float": 2.0,
        "string": "héllo \U0001f600",
        "bool": True,
        "nested": {"a": [1, {"b": [None, 2.5, "x"]}], "c": {}, "d": []},
        "tuple_keys": {(1, 2): "a", (3, "x"): [1]},
        "int_keys": {1: "one", 2: {"nested": True}},
        "object_lookalike": {"lc": 2, "type": "constructor", "id": ["uuid", "UUID"], "ext": 0},
        "bytes_inside": {"blob": b"\x00\xffbin", "list": [b"", b"ab"]},
        "datetime_tz": datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=PLUS_2),
        "datetime_utc": datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
        "datetime_naive": datetime(2020, 2, 29, 23, 59, 59),
        "date": date(2024, 1, 2),
        "time": time(13, 14, 15, 16),
        "time_tz": time(1, 2, 3, tzinfo=UTC),
        "timedelta": timedelta(days=-1, seconds=5, microseconds=7),
        "timezone": PLUS_2,
        "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "decimal": Decimal("-12.3400"),
        "set": {1, 2, 3},
        "frozenset": frozenset({"a", "b"}),
        "deque": deque([1, "two", 3.0]),
        "enum_str": Color.RED,
        "enum_int": Color.GREEN,
        "path": pathlib.Path("/tmp/some/file.txt"),
        "ipv4": ipaddress.IPv4Address("192.168.1.7"),
        "ipv6_network": ipaddress.IPv6Network("2001:db8::/32"),
        "zoneinfo": ZoneInfo("Europe/Paris"),
        "dataclass": Point(1, 2.5, "p"),
        "namedtuple": Pair(1, [2, 3]),
        "pydantic_v1": ModelV1(name="v1", tags=["a", "b"], score=0.5),
        "pydantic_v2": ModelV2(
            title="t",
            count=3,
            inner=Inner(when=datetime(2024, 1, 1, tzinfo=UTC), ids=[uuid.UUID(int=7)]),
            extra={"k": 1},
        ),
        "human": HumanMessage(content="What's the weather?", id="h-1", name="alice"),
        "ai_tool_calls": ai,
        "messages": [
            SystemMessage(content="Be brief.", id="s-1"),
            HumanMessage(content=[{"type": "text", "text": "hi"}], id="h-2"),
            ai,
            ToolMessage(content="sunny", tool_call_id="call_1", id="t-1", name="search"),
        ],
        "state": {
            "messages": [HumanMessage(content="x", id="h-3")],
            "when": datetime(2024, 1, 1, tzinfo=UTC),
            "seen": {uuid.UUID(int=1), uuid.UUID(int=2)},
            "point": Point(0, 0.0),
        },
    }
