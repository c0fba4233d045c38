#!/usr/bin/env python3
"""Runs the test binaries `cargo test --no-run --message-format=json` built, as `cargo test`
would (each from its package's folder, one after another, every test binary's own threads),
but in two lanes at once: the packages whose tests mostly wait on servers (PostgreSQL, Redis,
and the end-to-end runtime tests, including every test that stops, hangs or restarts the fault
servers) in one, everything else in the other. On two cores the server lane leaves a core
mostly idle; the other lane's CPU-bound tests fill it.

Usage: test_lanes.py CARGO_JSON_FILE. The local lane prints as it runs; the server lane's
output follows when both are done. Every binary runs even after one fails; the exit status is
1 if any failed, with their names listed last.
"""

import json
import os
import subprocess
import sys
import threading
import time

# The package folders (from the workspace root) whose test binaries run in the server lane.
SERVER_PACKAGES = {"checkpoint-postgres", "checkpoint-redis", "tests"}


def test_binaries(path):
    """(package folder, its path, executable, label) of each test harness binary, in cargo's
    order; the folder is relative to the workspace root (the current directory)."""
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
            found.append((package, folder, message["executable"], label))
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


def run_lane(binaries, out, failures):
    """Runs `binaries` one after another, writing their output to `out`."""
    libraries = library_path()
    for _, folder, executable, label in binaries:
        start = time.monotonic()
        out.write(f"     Running {label} ({executable})\n")
        out.flush()
        env = dict(os.environ, CARGO_MANIFEST_DIR=folder, LD_LIBRARY_PATH=libraries)
        status = subprocess.run(
            [executable], cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT
        ).returncode
        out.write(f"     [{time.monotonic() - start:.1f} s] {label}: exit {status}\n")
        out.flush()
        if status != 0:
            failures.append(label)


def main():
    binaries = test_binaries(sys.argv[1])
    if not binaries:
        sys.exit("test_lanes.py: no test binaries in the cargo output")
    server = [b for b in binaries if b[0] in SERVER_PACKAGES]
    local = [b for b in binaries if b[0] not in SERVER_PACKAGES]
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
    print(f"\n{len(binaries)} test binaries, {len(failures)} failed")
    for label in failures:
        print(f"FAILED: {label}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
