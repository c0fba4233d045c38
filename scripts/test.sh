#!/usr/bin/env bash
# The whole test suite: formatting, lints, docs, every crate's tests, and the fuzz targets'
# build. Later backends add their throwaway servers here (loopback, random ports, temp dirs,
# removed on exit) and export WAYPOINT_TEST_*_URL; WAYPOINT_REQUIRE_BACKENDS=1 turns a skipped
# live-backend suite into a failure.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
export WAYPOINT_REQUIRE_BACKENDS=1
export RUST_BACKTRACE=1

# Scratch space for test databases and files; removed however the script ends.
scratch="$(mktemp -d -t waypoint-test.XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
export TMPDIR="$scratch"

step() { printf '\n==> %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check
cargo fmt --manifest-path fuzz/Cargo.toml -- --check

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --all-features -- -D warnings

step "cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --all-features --no-deps --quiet

step "fuzz targets build"
cargo build --quiet --manifest-path fuzz/Cargo.toml --bins

step "cargo test"
cargo test --workspace --all-features
