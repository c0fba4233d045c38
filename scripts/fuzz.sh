#!/usr/bin/env bash
# Runs the fuzz targets under libFuzzer on the stable toolchain, without cargo-fuzz:
# the same coverage instrumentation cargo-fuzz passes (no sanitizer), built for the host
# target so that build scripts and proc macros stay uninstrumented.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]   # default: 60 seconds each, every target
#
# Each target keeps its corpus in target/fuzz/corpus/TARGET and writes a crashing input to
# target/fuzz/artifacts/TARGET/; replay one with
#   target/fuzz/build/x86_64-unknown-linux-gnu/release/TARGET CRASH_FILE
# Exit status: 1 if any target crashed, with the targets that did named on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(decode_formats serde_loads open_sealed metadata_json langgraph)
fi

host=$(rustc -vV | sed -n 's/^host: //p')
out=target/fuzz
RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions \
-Coverflow-checks" CARGO_TARGET_DIR="$out/build" \
    cargo build --quiet --release --manifest-path fuzz/Cargo.toml --bins --target "$host"

crashed=()
for target in "${targets[@]}"; do
    mkdir -p "$out/corpus/$target" "$out/artifacts/$target"
    echo "==> $target: ${seconds}s"
    if ! "$out/build/$host/release/$target" -max_total_time="$seconds" -max_len=4096 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out/artifacts/$target/" \
        "$out/corpus/$target" 2> "$out/$target.log"; then
        crashed+=("$target")
        grep -m1 -A3 "panicked\|ERROR: libFuzzer" "$out/$target.log" >&2 || true
    fi
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$out/$target.log" || true
done
if [ ${#crashed[@]} -gt 0 ]; then
    echo "crashed: ${crashed[*]} (inputs in $out/artifacts/)" >&2
    exit 1
fi
