"""Cross-check of Waypoint's LangGraph msgpack codec with Python's JsonPlusSerializer.

    python jsonplus_roundtrip.py dump    prints [{"name", "tag", "hex"}] for every value
    python jsonplus_roundtrip.py check   reads the same shape on stdin (Waypoint's bytes)
                                         and checks each value loads `==` to the original,
                                         of the same type, recursively; exits 1 otherwise
"""

import dataclasses
import json
import sys

import pydantic
import pydantic.v1
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

import lg_values


def same_types(a, b, path="value"):
    """Type mismatches between `a` and `b`, recursively through containers and models."""
    if type(a) is not type(b):
        return [f"{path}: {type(a).__qualname__} != {type(b).__qualname__}"]
    out = []
    if isinstance(a, dict):
        for (ka, va), (kb, vb) in zip(sorted(a.items(), key=repr), sorted(b.items(), key=repr)):
            out += same_types(ka, kb, f"{path} key {ka!r}")
            out += same_types(va, vb, f"{path}[{ka!r}]")
    elif isinstance(a, (list, tuple)) and not hasattr(a, "_asdict"):
        for i, (x, y) in enumerate(zip(a, b)):
            out += same_types(x, y, f"{path}[{i}]")
    elif isinstance(a, (pydantic.BaseModel, pydantic.v1.BaseModel)):
        fields = a.model_fields if isinstance(a, pydantic.BaseModel) else a.__fields__
        for name in fields:
            out += same_types(getattr(a, name), getattr(b, name), f"{path}.{name}")
    elif dataclasses.is_dataclass(a) or hasattr(a, "_asdict"):
        names = [f.name for f in dataclasses.fields(a)] if dataclasses.is_dataclass(a) else a._fields
        for name in names:
            out += same_types(getattr(a, name), getattr(b, name), f"{path}.{name}")
    return out


def main() -> int:
    serde = JsonPlusSerializer()
    originals = lg_values.values()
    if sys.argv[1:] == ["dump"]:
        out = []
        for name, value in originals.items():
            tag, data = serde.dumps_typed(value)
            out.append({"name": name, "tag": tag, "hex": data.hex()})
        json.dump(out, sys.stdout)
        return 0
    if sys.argv[1:] == ["check"]:
        failures = []
        entries = json.load(sys.stdin)
        missing = set(originals) - {e["name"] for e in entries}
        failures += [f"{name}: not sent back" for name in sorted(missing)]
        for entry in entries:
            name = entry["name"]
            original = originals[name]
            try:
                loaded = serde.loads_typed((entry["tag"], bytes.fromhex(entry["hex"])))
            except Exception as exc:  # reported, not raised: every value is checked
                failures.append(f"{name}: does not load: {exc!r}")
                continue
            if loaded != original:
                failures.append(f"{name}: {loaded!r} != {original!r}")
            failures += [f"{name}: {d}" for d in same_types(loaded, original)]
        for failure in failures:
            print(failure)
        print(f"{len(entries)} values checked, {len(failures)} failures")
        return 1 if failures else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
