#!/usr/bin/env bash
# The whole test suite: formatting, lints, docs, every crate's tests, and the fuzz targets'
# build. Live backends run on throwaway servers started here (loopback, random ports, data in
# a temp dir, stopped and removed however the script ends), named by WAYPOINT_TEST_*_URL;
# WAYPOINT_REQUIRE_BACKENDS=1 turns a skipped live-backend suite into a failure. Interop tests
# run the real Python LangGraph packages from a venv (created once, pinned: scripts/python.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# CI builds once from clean: incremental caches would only take disk.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
export WAYPOINT_REQUIRE_BACKENDS=1
export RUST_BACKTRACE=1

source scripts/services.sh
source scripts/python.sh
source scripts/models.sh

# Scratch space for servers, test databases and files; removed however the script ends.
scratch="$(mktemp -d -t waypoint-test.XXXXXX)"
python_pid=
trap '[ -z "$python_pid" ] || kill "$python_pid" 2>/dev/null || true; stop_services; rm -rf "$scratch"' EXIT
# Interrupted or killed, the script still exits through the EXIT trap above.
trap 'exit 130' INT
trap 'exit 143' TERM

# Each step says how long the suite has run: CI gives it 30 minutes on two cores.
step() { printf '\n==> [%dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check
cargo fmt --manifest-path fuzz/Cargo.toml -- --check

# The LangGraph venvs and the model files download and install while the steps below compile
# (most of the 1m42s the servers step took before, mostly waiting on the network); that step
# waits for them. Each call takes a lock, so a second call only finds them made.
prepare_python() { langgraph_venv && langgraph06_venv && minilm_model && minilm_reference_venv; }
prepare_python >"$scratch/python.log" 2>&1 &
python_pid=$!

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --all-features -- -D warnings
# The checkpoint crate's formats are features: its build without them must stay clean too
# (JSON alone, as an embedder that wants no MessagePack builds it).
cargo clippy --quiet -p waypoint-checkpoint --no-default-features -- -D warnings

step "cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --all-features --no-deps --quiet

step "fuzz targets build, and their harnesses reach the sealed-value paths"
cargo build --quiet --manifest-path fuzz/Cargo.toml --bins
cargo test --quiet --manifest-path fuzz/Cargo.toml --lib

step "throwaway servers (PostgreSQL, Redis, TLS-only twins, PgBouncer, a Redis Cluster) and the LangGraph venvs"
# No fsync on these servers: tests stop, pause and restart them but never crash the OS, so
# nothing is lost without it, and the catalog work of thousands of fresh test schemas runs
# about a third faster.
export WAYPOINT_POSTGRES_FSYNC=off
start_postgres "$scratch" postgres POSTGRES
# A second server for the fault tests, which stop and restart it mid-run.
start_postgres "$scratch" postgres-faults POSTGRES_FAULTS
# PostgreSQL 18 with pgvector, for the store's pgvector mode.
start_pgvector_postgres "$scratch" pgvector PGVECTOR
start_redis "$scratch" redis REDIS
# A second server for the fault tests, which stop and restart it mid-run.
start_redis "$scratch" redis-faults REDIS_FAULTS
# A CA made now, and servers that speak TLS only, with certificates it signed.
make_test_ca "$scratch/tls"
start_postgres "$scratch" postgres-tls POSTGRES_TLS "$scratch/tls"
start_redis "$scratch" redis-tls REDIS_TLS "$scratch/tls"
start_pgbouncer "$scratch" pgbouncer PGBOUNCER "$WAYPOINT_TEST_POSTGRES_URL"
start_redis_cluster "$scratch" redis-cluster REDIS_CLUSTER
wait "$python_pid" || { cat "$scratch/python.log" >&2; exit 1; }
cat "$scratch/python.log"
prepare_python
export TMPDIR="$scratch"

step "cargo test"
# Built as one workspace (so every package gets the same dependency features), then run in two
# lanes at once: the tests that mostly wait on servers beside the ones that keep a core busy.
cargo test --workspace --all-features --no-run --message-format=json-render-diagnostics \
    >"$scratch/tests.json"
python3 scripts/test_lanes.py "$scratch/tests.json"
cargo test --workspace --all-features --doc

step "waypoint bench --quick --peers: both sides in one run, as README's figures are made"
# The binary `cargo test` just built (all features, store code optimised): a release build
# would add 10-15 minutes on two cores; the figures of a debug build are not published.
# The groups behind issue 23's figures (serde, puts, forks, and the limits the put shares are
# of), at --quick size with LangGraph's side; every group, store and runtime included, ran
# with --peers at smoke size in cli/tests/bench.rs. (At --quick size, all nine groups took 7
# minutes of the 30-minute budget in a clean run, the six with a LangGraph side 5.5.)
"${CARGO_TARGET_DIR:-target}/debug/waypoint" bench --quick --peers \
    --only serde,checkpoint,fork,limits --out "$scratch/bench"
grep -q '^## Against LangGraph$' "$scratch/bench/REPORT.md"
grep -qE '^\| checkpoint put \(sequential\), puts/s \| [0-9,.]+ / [0-9,.]+ \(' "$scratch/bench/REPORT.md"
# The limit of the PostgreSQL put's own rows, beside the single-row one.
grep -qE "^\| put \(16 writers\), one put's rows \| puts/s .*\| [0-9][0-9,.]* \|" "$scratch/bench/REPORT.md"
step "done"
