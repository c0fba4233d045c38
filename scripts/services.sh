# Throwaway database servers for tests and benchmarks; source this file, then call
# `start_postgres DIR NAME VAR` or `start_redis DIR NAME VAR` (each exports
# WAYPOINT_TEST_<VAR>_URL) and `stop_services` (also from a trap). Servers listen on loopback
# only, on a free random port, with their data in DIR.

_waypoint_stops=()

# A TCP port nothing listens on right now.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Runs a command as the unprivileged owner of the servers' files (root may not run PostgreSQL).
as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u "$_waypoint_owner" -- "$@"
    else
        "$@"
    fi
}

# The directory holding initdb, pg_ctl and postgres; installs PostgreSQL when it is missing.
postgres_bin() {
    local dir
    dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
    if [ -z "$dir" ] && command -v pg_ctl >/dev/null 2>&1; then
        dir="$(dirname "$(readlink -f "$(command -v pg_ctl)")")"
    fi
    if [ -z "$dir" ] || [ ! -x "$dir/initdb" ]; then
        echo "PostgreSQL not found: installing it from Debian's packages" >&2
        if [ "$(id -u)" = 0 ]; then
            apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql postgresql-contrib >&2
        else
            sudo apt-get update -qq >&2 && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql postgresql-contrib >&2
        fi
        dir="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
    fi
    echo "$dir"
}

# Starts a fresh PostgreSQL cluster under DIR/NAME and exports WAYPOINT_TEST_<VAR>_URL (and
# _CTL, a script taking `start`, `stop`, `pause` or `resume`, for tests that take the server
# away or hang it).
start_postgres() {
    local root="$1/$2" var="$3" bin port ctl
    bin="$(postgres_bin)"
    port="$(free_port)"
    _waypoint_owner="${WAYPOINT_SERVICE_USER:-nobody}"
    mkdir -p "$root"
    if [ "$(id -u)" = 0 ]; then
        chown "$_waypoint_owner" "$root"
        # The owner must be able to reach DIR (mktemp makes it 0700).
        chmod a+x "$1"
    fi
    as_owner "$bin/initdb" -D "$root/data" -U waypoint --auth=trust --no-sync -E UTF8 --locale=C.UTF-8 >"$root/initdb.log" 2>&1 ||
        { cat "$root/initdb.log" >&2; return 1; }
    ctl="$root/ctl.sh"
    cat >"$ctl" <<CTL
#!/usr/bin/env bash
# start | stop | pause | resume the throwaway PostgreSQL server in $root/data
set -euo pipefail
run() { if [ "\$(id -u)" = 0 ]; then runuser -u $_waypoint_owner -- "\$@"; else "\$@"; fi; }
case "\$1" in
    start) run $bin/pg_ctl -D $root/data -l $root/server.log -w -t 60 start -o "-c listen_addresses=127.0.0.1 -p $port -k $root -c max_connections=300 -c shared_buffers=256MB" >/dev/null ;;
    stop) run $bin/pg_ctl -D $root/data -m fast -w -t 60 stop >/dev/null ;;
    # A hung server: the postmaster (first, so it forks no more) and every process it
    # started stopped with SIGSTOP, sockets left open; \`resume\` continues them.
    pause) pid="\$(head -1 $root/data/postmaster.pid)"; kill -STOP "\$pid"; kill -STOP \$(pgrep -P "\$pid") ;;
    resume) pid="\$(head -1 $root/data/postmaster.pid)"; kill -CONT \$(pgrep -P "\$pid"); kill -CONT "\$pid" ;;
    *) echo "usage: \$0 start|stop|pause|resume" >&2; exit 2 ;;
esac
CTL
    chmod +x "$ctl"
    "$ctl" start || { cat "$root/server.log" >&2; return 1; }
    _waypoint_stops+=("$ctl stop 2>/dev/null || true")
    export "WAYPOINT_TEST_${var}_URL=postgres://waypoint@127.0.0.1:$port/postgres"
    export "WAYPOINT_TEST_${var}_CTL=$ctl"
    echo "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port ($2, data in $root/data)"
}

# The redis-server binary; installs Redis when it is missing.
redis_bin() {
    if ! command -v redis-server >/dev/null 2>&1; then
        echo "Redis not found: installing it from Debian's packages" >&2
        if [ "$(id -u)" = 0 ]; then
            apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >&2
        else
            sudo apt-get update -qq >&2 && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >&2
        fi
    fi
    command -v redis-server
}

# Starts a fresh Redis under DIR/NAME with the persistence Waypoint needs (AOF, fsync every
# second; no RDB snapshots) and exports WAYPOINT_TEST_<VAR>_URL (and _CTL, a script taking
# `start`, `stop` or `kill`, for tests that take the server away; `kill` is SIGKILL, no
# shutdown, as a crash).
start_redis() {
    local root="$1/$2" var="$3" bin port ctl
    bin="$(redis_bin)"
    port="$(free_port)"
    mkdir -p "$root"
    ctl="$root/ctl.sh"
    cat >"$ctl" <<CTL
#!/usr/bin/env bash
# start | stop | kill the throwaway Redis server in $root
set -euo pipefail
case "\$1" in
    start)
        $bin --bind 127.0.0.1 --port $port --dir $root --save '' \\
            --appendonly yes --appendfsync everysec \\
            --daemonize yes --pidfile $root/redis.pid --logfile $root/server.log
        for _ in \$(seq 100); do
            redis-cli -p $port ping >/dev/null 2>&1 && exit 0
            sleep 0.05
        done
        echo "Redis did not start" >&2; exit 1 ;;
    stop)
        redis-cli -p $port shutdown nosave >/dev/null 2>&1 || true
        for _ in \$(seq 100); do
            redis-cli -p $port ping >/dev/null 2>&1 || exit 0
            sleep 0.05
        done ;;
    kill)
        pid="\$(cat $root/redis.pid)"
        kill -KILL "\$pid"
        for _ in \$(seq 100); do
            kill -0 "\$pid" 2>/dev/null || { rm -f $root/redis.pid; exit 0; }
            sleep 0.05
        done
        echo "Redis (pid \$pid) did not die" >&2; exit 1 ;;
esac
CTL
    chmod +x "$ctl"
    "$ctl" start || { cat "$root/server.log" >&2; return 1; }
    _waypoint_stops+=("$ctl stop 2>/dev/null || true")
    export "WAYPOINT_TEST_${var}_URL=redis://127.0.0.1:$port/"
    export "WAYPOINT_TEST_${var}_CTL=$ctl"
    echo "Redis $("$bin" --version | awk '{print $3}' | cut -d= -f2) on 127.0.0.1:$port ($2, data in $root)"
}

# Stops every server started here.
stop_services() {
    local stop
    for stop in "${_waypoint_stops[@]}"; do
        eval "$stop"
    done
    _waypoint_stops=()
}
