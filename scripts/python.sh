# The Python side of the interop tests and peer benchmarks: source this file, then call
# `langgraph_venv` (and `langgraph06_venv` for the tests against the older LangGraph). Each
# creates (once) a venv with the real LangGraph packages at pinned versions and exports its
# interpreter: WAYPOINT_TEST_PYTHON for the current LangGraph, WAYPOINT_TEST_PYTHON_06 for
# langgraph 0.6. The venvs live at $WAYPOINT_VENV (default: target/venv-langgraph under the
# current directory) and $WAYPOINT_VENV_06 (default: target/venv-langgraph-06). A stamp file in
# each venv records the installed requirement list, so when it already matches, the call costs
# no pip run at all.

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
    # LangGraph's InMemoryStore falls back to pure-Python vector maths without it (and warns):
    # benchmarks compare against LangGraph as its docs ask it to be installed.
    "numpy==2.4.6"
)

# The older LangGraph a shared PostgreSQL thread must still serve (issue 18): langgraph 0.6.11
# with langgraph-checkpoint-postgres 2.0.25, and what pip resolves for them, pinned.
_waypoint_langgraph06_requirements=(
    "langgraph==0.6.11"
    "langgraph-checkpoint==2.1.2"
    "langgraph-checkpoint-postgres==2.0.25"
    "langchain-core==1.8.3"
    "psycopg[binary]==3.3.9"
    "psycopg-pool==3.3.3"
    "ormsgpack==1.13.1"
)

# Creates or updates the venv when needed, then exports WAYPOINT_TEST_PYTHON=<venv>/bin/python.
langgraph_venv() {
    local venv
    venv="$(_langgraph_venv_path "${WAYPOINT_VENV:-target/venv-langgraph}")"
    _langgraph_venv_ensure "$venv" _waypoint_langgraph_requirements || return
    export WAYPOINT_TEST_PYTHON="$venv/bin/python"
}

# The same for langgraph 0.6: exports WAYPOINT_TEST_PYTHON_06=<venv>/bin/python.
langgraph06_venv() {
    local venv
    venv="$(_langgraph_venv_path "${WAYPOINT_VENV_06:-target/venv-langgraph-06}")"
    _langgraph_venv_ensure "$venv" _waypoint_langgraph06_requirements || return
    export WAYPOINT_TEST_PYTHON_06="$venv/bin/python"
}

# $1 made absolute (relative to the current directory).
_langgraph_venv_path() {
    case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac
}

# Makes the venv at $1 hold exactly the requirements of the array named $2.
_langgraph_venv_ensure() {
    local venv="$1" stamp want lock_fd status=0
    local -n _requirements="$2"
    stamp="$venv/.waypoint-requirements"
    want="$(printf '%s\n' "${_requirements[@]}")"

    # Fast path: the venv's interpreter runs and the stamp lists exactly the pinned set.
    if ! _langgraph_venv_current "$venv" "$stamp" "$want"; then
        mkdir -p "$(dirname "$venv")" || return 1
        # Serialise concurrent callers (parallel test runs) on a lock next to the venv.
        exec {lock_fd}>"$venv.lock" || return 1
        flock "$lock_fd" || { exec {lock_fd}>&-; return 1; }
        if ! _langgraph_venv_current "$venv" "$stamp" "$want"; then
            _langgraph_venv_install "$venv" "$stamp" "$want" "${_requirements[@]}" || status=$?
        fi
        exec {lock_fd}>&-
        [ "$status" = 0 ] || return "$status"
    fi
}

# Whether the venv at $1 works and its stamp $2 holds exactly the requirement list $3.
_langgraph_venv_current() {
    [ -x "$1/bin/python" ] && [ -f "$2" ] && [ "$(cat "$2")" = "$3" ] &&
        "$1/bin/python" -c '' 2>/dev/null
}

# (Re)creates the venv at $1 if its interpreter is missing or broken, installs the
# requirements (the arguments after $3) with pip, and writes the stamp $2 (holding the list
# $3) only once pip has succeeded.
_langgraph_venv_install() {
    local venv="$1" stamp="$2" want="$3"
    shift 3
    rm -f "$stamp"
    if ! "$venv/bin/python" -c '' 2>/dev/null; then
        echo "creating the LangGraph venv at $venv" >&2
        python3 -m venv --clear "$venv" || { echo "python3 -m venv $venv failed" >&2; return 1; }
    fi
    echo "installing pinned LangGraph packages into $venv" >&2
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-input "$@" ||
        { echo "pip install into $venv failed" >&2; return 1; }
    printf '%s\n' "$want" >"$stamp"
}
