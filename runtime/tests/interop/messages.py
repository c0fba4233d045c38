"""LangChain messages of every class, for the Rust cross-check in tests/integration/langchain_messages.rs.

    python messages.py dump          prints [{"module", "class", "dump"}] for each message:
                                     its class and json.dumps of model_dump()
    python messages.py check         reads [{"module", "class", "kwargs"}] on stdin (Rust's
                                     lc:2 output for each message, in order), rebuilds each
                                     with cls(**kwargs) and cls.model_validate(kwargs), and
                                     fails unless each is == to the original, of its type
    python messages.py msgpack       prints the hex of JsonPlusSerializer's dumps_typed of the
                                     list (its type tag first, then a space)
    python messages.py check-msgpack reads "<tag> <hex>" on stdin: loads_typed must give a
                                     list == to the messages, each of the original's type
"""

import importlib
import json
import sys

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    ChatMessage,
    ChatMessageChunk,
    FunctionMessage,
    FunctionMessageChunk,
    HumanMessage,
    HumanMessageChunk,
    RemoveMessage,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
)


def messages():
    usage = {
        "input_tokens": 350,
        "output_tokens": 240,
        "total_tokens": 590,
        "input_token_details": {"audio": 10, "cache_creation": 200, "cache_read": 100},
        "output_token_details": {"audio": 10, "reasoning": 200, "provider_specific": 3},
    }
    summed = (
        AIMessageChunk(content="Hel", id="run-7", response_metadata={"model_name": "m"})
        + AIMessageChunk(
            content="lo",
            tool_call_chunks=[{"name": "search", "args": '{"q": ', "id": "c9", "index": 0}],
        )
        + AIMessageChunk(
            content="!",
            tool_call_chunks=[{"name": None, "args": '"rust"}', "id": None, "index": 0}],
            usage_metadata={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
            chunk_position="last",
        )
    )
    return [
        HumanMessage("hi", id="h1"),
        HumanMessage(
            [
                {"type": "text", "text": "héllo 世界 🎉, what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                "a bare string block",
            ],
            id="h2",
            name="ada",
            additional_kwargs={"nested": {"list": [1, 2.5, None, True, "ü"]}},
            response_metadata={"source": "form"},
        ),
        HumanMessage("an attribute of my own", id="h3", custom_field={"a": [1, 2]}),
        HumanMessageChunk("a human chunk", id="hc"),
        AIMessage(
            "Let me look that up.",
            id="a1",
            name="bot",
            tool_calls=[
                {"name": "search", "args": {"query": "weather in SF", "n": 3}, "id": "call_1"},
                {"name": "lookup", "args": {}, "id": None},
            ],
            invalid_tool_calls=[
                {"name": "calc", "args": '{"x": ', "id": "call_2", "error": "bad JSON"},
                {"name": None, "args": None, "id": None, "error": None},
            ],
            usage_metadata=usage,
            additional_kwargs={"refusal": None, "reasoning_content": "thinking…"},
            response_metadata={
                "model_name": "gpt-x",
                "finish_reason": "tool_calls",
                "logprobs": None,
                "token_usage": {"prompt_tokens": 350, "completion_tokens": 240},
                "temperature": -0.25,
            },
        ),
        AIMessage(
            [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
            ],
            id="a2",
            tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "toolu_1"}],
            usage_metadata={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
        ),
        AIMessage(""),
        AIMessageChunk(
            "",
            id="lc_run-1",
            tool_call_chunks=[
                {"name": "search", "args": '{"q": "ru', "id": "c1", "index": 0},
                {"name": "other", "args": "{}", "id": "c2", "index": 1},
            ],
            chunk_position="last",
            usage_metadata={"input_tokens": 5, "output_tokens": 1, "total_tokens": 6},
            response_metadata={"finish_reason": "tool_calls"},
        ),
        AIMessageChunk("plain chunk", tool_calls=[{"name": "f", "args": {"a": 1}, "id": "t"}]),
        summed,
        SystemMessage("You are a weather bot.", id="s1"),
        SystemMessageChunk("system chunk"),
        ToolMessage(
            "sunny, 21°C",
            tool_call_id="call_1",
            id="t1",
            name="search",
            artifact={"raw": [{"temp": 21.5}], "source": "api"},
        ),
        ToolMessage(
            [{"type": "text", "text": "boom"}],
            tool_call_id="call_2",
            status="error",
            additional_kwargs={"trace": "x"},
        ),
        ToolMessageChunk("tool chunk", tool_call_id="call_3", artifact=[1, 2]),
        ChatMessage("I disagree.", role="critic", id="c1", name="carl"),
        ChatMessageChunk("assistant via chat", role="assistant"),
        FunctionMessage("42", name="calculator", id="f1"),
        FunctionMessageChunk("4", name="calculator"),
        RemoveMessage(id="h1"),
        RemoveMessage(id="__remove_all__"),
    ]


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(1)


def same(original, rebuilt, how, index):
    if type(rebuilt) is not type(original):
        fail(f"message {index} ({how}): {type(rebuilt)} is not {type(original)}")
    if rebuilt != original:
        fail(
            f"message {index} ({how}) differs:\n  original {original.model_dump()!r}\n"
            f"  rebuilt  {rebuilt.model_dump()!r}"
        )


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "dump"
    originals = messages()
    if mode == "dump":
        out = [
            {"module": type(m).__module__, "class": type(m).__name__, "dump": m.model_dump()}
            for m in originals
        ]
        print(json.dumps(out, ensure_ascii=False))
    elif mode == "check":
        entries = json.loads(sys.stdin.read())
        if len(entries) != len(originals):
            fail(f"{len(entries)} messages came back, {len(originals)} went out")
        for index, (original, entry) in enumerate(zip(originals, entries)):
            cls = getattr(importlib.import_module(entry["module"]), entry["class"])
            same(original, cls(**entry["kwargs"]), "cls(**kwargs)", index)
            same(original, cls.model_validate(entry["kwargs"]), "model_validate", index)
        print(f"ok: {len(originals)} messages equal")
    elif mode == "msgpack":
        from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

        tag, data = JsonPlusSerializer().dumps_typed(originals)
        print(tag, data.hex())
    elif mode == "check-msgpack":
        from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

        tag, data = sys.stdin.read().split()
        loaded = JsonPlusSerializer().loads_typed((tag, bytes.fromhex(data)))
        if len(loaded) != len(originals):
            fail(f"{len(loaded)} messages came back, {len(originals)} went out")
        for index, (original, rebuilt) in enumerate(zip(originals, loaded)):
            same(original, rebuilt, "msgpack", index)
        print(f"ok: {len(originals)} messages equal")
    else:
        fail(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
