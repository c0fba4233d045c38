"""LangGraph's Interrupt and Send as Python's JsonPlusSerializer writes and reads them.

`objects.py dump` prints JSON of msgpack hex strings Python writes: a list of 1.x interrupts, an
interrupt with older fields, a Send and the list of Sends a checkpoint's `__pregel_tasks`
holds. `objects.py check` reads JSON `{"interrupts": hex, "send": hex, "sends": hex}` (what
Waypoint wrote) on stdin, loads each with `loads_typed` and asserts the classes and values;
prints `ok`.
"""

import json
import sys

import ormsgpack
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Interrupt, Send

serde = JsonPlusSerializer()


def packed(obj):
    tag, data = serde.dumps_typed(obj)
    assert tag == "msgpack", tag
    return data.hex()


def old_interrupt():
    # An interrupt as langgraph 0.4 wrote it: no id, a namespace, `when` and `resumable`.
    payload = ["langgraph.types", "Interrupt", {"value": "old?", "resumable": True, "ns": ["gate:abc"], "when": "during"}]
    return ormsgpack.packb([ormsgpack.Ext(2, ormsgpack.packb(payload))]).hex()


if sys.argv[1] == "dump":
    json.dump(
        {
            "interrupts": packed([Interrupt(value={"question": "name?"}, id="0123456789abcdef0123456789abcdef")]),
            "old": old_interrupt(),
            "send": packed(Send("work", {"item": "x", "n": 1})),
            "sends": packed([Send("work", {"item": "x"}), Send("work", {"item": "y"})]),
        },
        sys.stdout,
    )
elif sys.argv[1] == "check":
    data = json.load(sys.stdin)
    interrupts = serde.loads_typed(("msgpack", bytes.fromhex(data["interrupts"])))
    assert isinstance(interrupts, list) and len(interrupts) == 1, interrupts
    (interrupt,) = interrupts
    assert type(interrupt) is Interrupt, type(interrupt)
    assert interrupt.value == {"question": "name?"}, interrupt.value
    assert interrupt.id == "0123456789abcdef0123456789abcdef", interrupt.id
    send = serde.loads_typed(("msgpack", bytes.fromhex(data["send"])))
    assert type(send) is Send, type(send)
    assert send == Send("work", {"item": "x", "n": 1}), send
    sends = serde.loads_typed(("msgpack", bytes.fromhex(data["sends"])))
    assert sends == [Send("work", {"item": "x"}), Send("work", {"item": "y"})], sends
    assert all(type(s) is Send for s in sends)
    print("ok")
