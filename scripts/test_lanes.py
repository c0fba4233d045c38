#!/usr/bin/env python3
"""Runs the test binaries `cargo test --no-run --message-format=json` built, as `cargo test`
would (each from its package's folder, one after another, every test binary's own threads),
but in two lanes at once: the PostgreSQL and Redis packages, whose tests mostly wait on their
servers, and every test that stops, hangs or restarts a fault server in one; everything else in
the other. On two cores the server lane leaves a core mostly idle; the other lane's CPU-bound
tests fill it. (In a clean run at 537d169 the lanes' binaries ran 8m18s and 5m44s, the server
lane then holding every end-to-end runtime test too; one after another, at 47cd454, ~10m.)

Usage: test_lanes.py CARGO_JSON_FILE. The local lane prints each binary's output as it ends;
the server lane's follows when both are done. Every binary runs even after one fails; the exit
status is 1 if any failed, with why (libtest's failures list) and their names listed last.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

# The package folders (from the workspace root) whose test binaries run in the server lane,
# and the other binaries that must: every test that stops, hangs or restarts a fault server
# runs in this lane, one binary at a time, so that no two of them take it away at once.
SERVER_PACKAGES = {"checkpoint-postgres", "checkpoint-redis"}
FAULT_BINARIES = {("tests", "restart_mid_run"), ("tests", "failed_run_lease")}


def test_binaries(path):
    """(package folder, target name, its path, executable, label) of each test harness binary,
    in cargo's order; the folder is relative to the workspace root (the current directory)."""
    root = os.getcwd()
    found = []
    with open(path, encoding="utf-8") as messages:
        for line in messages:
            if not line.startswith("{"):
                continue
            message = json.loads(line)
            if message.get("reason") != "compiler-artifact":
                continue
            if not message.get("executable") or not message["profile"]["test"]:
                continue
            target = message["target"]
            folder = os.path.dirname(message["manifest_path"])
            package = os.path.relpath(folder, root)
            label = f"{package}: {'/'.join(target['kind'])} {target['name']}"
            found.append((package, target["name"], folder, message["executable"], label))
    return found


def library_path():
    """LD_LIBRARY_PATH as cargo sets it for tests: a proc-macro crate's test binary links the
    toolchain's libstd dynamically."""
    libdir = subprocess.run(
        ["rustc", "--print", "target-libdir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    sysroot = os.path.dirname(os.path.dirname(os.path.dirname(libdir)))
    dirs = [libdir, os.path.join(sysroot, "lib"), os.environ.get("LD_LIBRARY_PATH", "")]
    return os.pathsep.join(d for d in dirs if d)


def failure_report(output, limit=60):
    """The part of a failed binary's output that says why: from libtest's "failures:" list
    (or the whole, when it has none, as when the binary itself crashed), without backtraces,
    its last `limit` lines."""
    start = output.find("\nfailures:\n")
    lines = output[start + 1 if start >= 0 else 0 :].splitlines()
    backtrace = re.compile(r"^\s+(\d+: |at )|^stack backtrace:|^note: Some details are omitted")
    kept = [line for line in lines if not backtrace.match(line)]
    return "\n".join(kept[-limit:])


def run_lane(binaries, out, failures):
    """Runs `binaries` one after another, writing their output to `out` after each ends, and
    appending (label, why) to `failures` for each that failed."""
    libraries = library_path()
    for _, _, folder, executable, label in binaries:
        start = time.monotonic()
        out.write(f"     Running {label} ({executable})\n")
        out.flush()
        env = dict(os.environ, CARGO_MANIFEST_DIR=folder, LD_LIBRARY_PATH=libraries)
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as captured:
            status = subprocess.run(
                [executable], cwd=folder, env=env, stdout=captured, stderr=subprocess.STDOUT
            ).returncode
            captured.seek(0)
            output = captured.read()
        out.write(output)
        out.write(f"     [{time.monotonic() - start:.1f} s] {label}: exit {status}\n")
        out.flush()
        if status != 0:
            failures.append((label, failure_report(output)))


def main():
    binaries = test_binaries(sys.argv[1])
    if not binaries:
        sys.exit("test_lanes.py: no test binaries in the cargo output")
    in_server_lane = [b[0] in SERVER_PACKAGES or b[:2] in FAULT_BINARIES for b in binaries]
    server = [b for b, s in zip(binaries, in_server_lane) if s]
    local = [b for b, s in zip(binaries, in_server_lane) if not s]
    failures = []
    log_path = sys.argv[1] + ".server-lane.log"
    with open(log_path, "w+", encoding="utf-8") as server_log:
        lane = threading.Thread(target=run_lane, args=(server, server_log, failures))
        lane.start()
        run_lane(local, sys.stdout, failures)
        lane.join()
        server_log.seek(0)
        sys.stdout.write("\n==== server lane ====\n")
        sys.stdout.write(server_log.read())
    # The failures' reasons come last, where a log's tail shows them.
    for label, why in failures:
        print(f"\n==== why {label} failed ====\n{why}")
    print(f"\n{len(binaries)} test binaries, {len(failures)} failed")
    for label, _ in failures:
        print(f"FAILED: {label}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
