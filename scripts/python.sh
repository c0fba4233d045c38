# The Python side of the interop tests and peer benchmarks: source this file, then call
# `langgraph_venv`. It creates (once) a venv with the real LangGraph packages at pinned versions
# and exports WAYPOINT_TEST_PYTHON, the venv's interpreter. The venv lives at $WAYPOINT_VENV
# (default: target/venv-langgraph under the current directory). A stamp file in the venv records
# the installed requirement list, so when it already matches, the call costs no pip run at all.

# Exact pins (what pip resolved from PyPI when this was written). ormsgpack is pinned too: it is
# the msgpack encoder behind the checkpoint bytes the interop tests compare.
_waypoint_langgraph_requirements=(
    "langgraph==1.2.22"
    "langgraph-checkpoint==4.3.2"
    "langgraph-checkpoint-postgres==3.2.0"
    "langgraph-checkpoint-sqlite==3.1.2"
    "langchain-core==1.7.2"
    "psycopg[binary]==3.3.9"
    "psycopg-pool==3.3.3"
    "ormsgpack==1.13.1"
)

# Creates or updates the venv when needed, then exports WAYPOINT_TEST_PYTHON=<venv>/bin/python.
langgraph_venv() {
    local venv="${WAYPOINT_VENV:-$PWD/target/venv-langgraph}" want stamp lock_fd status=0
    case "$venv" in /*) ;; *) venv="$PWD/$venv" ;; esac
    stamp="$venv/.waypoint-requirements"
    want="$(printf '%s\n' "${_waypoint_langgraph_requirements[@]}")"

    # Fast path: the venv's interpreter runs and the stamp lists exactly the pinned set.
    if ! _langgraph_venv_current "$venv" "$stamp" "$want"; then
        mkdir -p "$(dirname "$venv")" || return 1
        # Serialise concurrent callers (parallel test runs) on a lock next to the venv.
        exec {lock_fd}>"$venv.lock" || return 1
        flock "$lock_fd" || { exec {lock_fd}>&-; return 1; }
        if ! _langgraph_venv_current "$venv" "$stamp" "$want"; then
            _langgraph_venv_install "$venv" "$stamp" "$want" || status=$?
        fi
        exec {lock_fd}>&-
        [ "$status" = 0 ] || return "$status"
    fi
    export WAYPOINT_TEST_PYTHON="$venv/bin/python"
}

# Whether the venv at $1 works and its stamp $2 holds exactly the requirement list $3.
_langgraph_venv_current() {
    [ -x "$1/bin/python" ] && [ -f "$2" ] && [ "$(cat "$2")" = "$3" ] &&
        "$1/bin/python" -c '' 2>/dev/null
}

# (Re)creates the venv at $1 if its interpreter is missing or broken, installs the requirement
# list $3 with pip, and writes the stamp $2 only once pip has succeeded.
_langgraph_venv_install() {
    local venv="$1" stamp="$2" want="$3"
    rm -f "$stamp"
    if ! "$venv/bin/python" -c '' 2>/dev/null; then
        echo "creating the LangGraph venv at $venv" >&2
        python3 -m venv --clear "$venv" || { echo "python3 -m venv $venv failed" >&2; return 1; }
    fi
    echo "installing pinned LangGraph packages into $venv" >&2
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-input \
        "${_waypoint_langgraph_requirements[@]}" ||
        { echo "pip install into $venv failed" >&2; return 1; }
    printf '%s\n' "$want" >"$stamp"
}
