"""Cuts LangGraph's English guides (/work/shared/reference/seeds/000_* and 004_*) into one
passage per section, written to seed_passages.json beside this script: the data of the
store's retrieval check (waypoint_store::eval). Run once; the JSON is what the tests read.

Usage: python3 seed_passages.py [SEEDS_DIR]
"""

import json
import pathlib
import re
import sys

SEEDS = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "/work/shared/reference/seeds")
OUT = pathlib.Path(__file__).with_name("seed_passages.json")
# Sections shorter than this (a heading right above its first subheading) are left out.
MIN_CHARS = 120


def unmangle(line):
    """The 004 file is UTF-8 read as cp1252 and written again; undo that line by line."""
    try:
        return line.encode("cp1252").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return line


def sections(lines, is_heading, source):
    """(heading, body) per heading, the body running to the next heading of any level."""
    out, heading, body, page = [], None, [], None
    for line in lines:
        level_title = is_heading(line)
        if level_title:
            level, title = level_title
            if heading is not None:
                out.append((page, heading, body))
            if level == 1:
                page = title
            heading, body = title, []
            continue
        if heading is not None:
            body.append(line)
    if heading is not None:
        out.append((page, heading, body))
    passages = []
    for page, heading, body in out:
        if heading == "Comments":
            continue  # the site's footer and the next page's navigation
        text = re.sub(r"\n{3,}", "\n\n", "\n".join(body)).strip()
        if len(text) < MIN_CHARS:
            continue
        passages.append({"source": source, "page": page, "heading": heading, "text": text})
    return passages


def markdown_heading(in_code):
    def check(line):
        if line.startswith("```"):
            in_code[0] = not in_code[0]
            return None
        m = None if in_code[0] else re.match(r"^(#{1,6}) (.+)$", line)
        return (len(m.group(1)), m.group(2).strip()) if m else None
    return check


def site_heading(line):
    if line.strip() == "## Comments":
        return (2, "Comments")
    m = re.match(r"^(#{1,6}) (.+?)\s*¶$", line)
    if not m:
        return None
    title = m.group(2).replace("`", "").replace("**", "")
    title = re.sub(r"[^\x20-\x7e].*$", "", title).strip()  # a trailing emoji
    return (len(m.group(1)), title)


def main():
    passages = []
    best = SEEDS.glob("000_*.txt").__next__()
    passages += sections(best.read_text().splitlines(), markdown_heading([False]), best.name)
    guides = SEEDS.glob("004_*.txt").__next__()
    lines = [unmangle(l) for l in guides.read_text().splitlines()]
    passages += sections(lines, site_heading, guides.name)
    for i, p in enumerate(passages):
        p["id"] = f"p{i:03}"
    OUT.write_text(json.dumps([{k: p[k] for k in ("id", "source", "page", "heading", "text")}
                               for p in passages], ensure_ascii=False, indent=1) + "\n")
    print(f"{len(passages)} passages -> {OUT}")


main()
