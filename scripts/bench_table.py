#!/usr/bin/env python3
"""Prints criterion results as Markdown tables: one row per benchmark group and parameter,
one column per function, throughput in MB/s (1e6 bytes/s) or elements/s, from the median.

Usage: python3 scripts/bench_table.py [target/criterion] [group-prefix]
"""
import json
import pathlib
import sys
from collections import defaultdict

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/criterion")
prefix = sys.argv[2] if len(sys.argv) > 2 else ""

rows = defaultdict(dict)  # (group, value) -> function -> cell
functions = defaultdict(list)  # group family -> ordered functions
sizes = {}
for bench in sorted(root.glob("**/new/benchmark.json")):
    meta = json.loads(bench.read_text())
    if not meta["group_id"].startswith(prefix):
        continue
    est = json.loads((bench.parent / "estimates.json").read_text())
    seconds = est["median"]["point_estimate"] / 1e9
    tp = meta.get("throughput") or {}
    if "Bytes" in tp:
        cell = f"{tp['Bytes'] / seconds / 1e6:,.0f}"
        sizes[(meta["group_id"], meta["value_str"])] = tp["Bytes"]
    elif "Elements" in tp:
        cell = f"{tp['Elements'] / seconds:,.0f}/s"
    else:
        cell = f"{seconds * 1e6:,.2f} µs"
    key = (meta["group_id"], meta["value_str"] or "")
    function = meta["function_id"] or "result"
    rows[key][function] = cell
    if function not in functions[meta["group_id"]]:
        functions[meta["group_id"]].append(function)

for group in sorted(functions, key=lambda g: (g.split("/")[1:2], ["small", "medium", "large"].index(g.split("/")[-1]) if g.split("/")[-1] in ("small", "medium", "large") else 0, g)):
    cols = functions[group]
    print(f"\n**{group}** (MB/s of encoded bytes, elements/s, or median time per call)\n")
    print("| case | bytes | " + " | ".join(cols) + " |")
    print("|---|---:|" + "---:|" * len(cols))
    for (g, value), cells in sorted(rows.items()):
        if g != group:
            continue
        size = sizes.get((g, value))
        size = f"{size:,}" if size else ""
        print(f"| {value} | {size} | " + " | ".join(cells.get(c, "") for c in cols) + " |")
