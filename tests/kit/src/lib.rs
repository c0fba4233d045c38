//! Test helpers shared by Waypoint's crates: the throwaway servers and interpreters the test
//! script provides, read from the environment, and fresh names so tests share them safely.
//!
//! `scripts/test.sh` starts the servers (`scripts/services.sh`) and the LangGraph venvs
//! (`scripts/python.sh`) and exports:
//!
//! | Variable | What it names | Read by |
//! |---|---|---|
//! | `WAYPOINT_REQUIRE_BACKENDS=1` | a missing variable below fails the test instead of skipping it | [`backends_required`] |
//! | `WAYPOINT_TEST_POSTGRES_URL` | the shared PostgreSQL server | [`postgres_url`] |
//! | `WAYPOINT_TEST_REDIS_URL` | the shared Redis server | [`redis_url`] |
//! | `WAYPOINT_TEST_POSTGRES_FAULTS_URL`, `_CTL` | a second PostgreSQL that fault tests stop, restart or hang, and its control script | [`postgres_faults`] |
//! | `WAYPOINT_TEST_REDIS_FAULTS_URL`, `_CTL` | a second Redis that fault tests stop, restart or kill, and its control script | [`redis_faults`] |
//! | `WAYPOINT_TEST_TLS_DIR` | a CA made by the script and certificates it signed (see [`Tls`]) | [`tls`] |
//! | `WAYPOINT_TEST_POSTGRES_TLS_URL` | a PostgreSQL that accepts TLS only (`postgres://waypoint@localhost:PORT/postgres`) | [`postgres_tls`] |
//! | `WAYPOINT_TEST_REDIS_TLS_URL` | a Redis that accepts TLS with a client certificate only (`rediss://localhost:PORT/`) | [`redis_tls`] |
//! | `WAYPOINT_TEST_PGBOUNCER_URL` | PgBouncer in transaction pooling mode in front of the shared PostgreSQL | [`pgbouncer_url`] |
//! | `WAYPOINT_TEST_REDIS_CLUSTER_URL`, `_NODES` | one node of a 3-primary Redis Cluster, and all of them | [`redis_cluster_url`], [`redis_cluster_nodes`] |
//! | `WAYPOINT_TEST_PYTHON` | the interpreter of a venv with the current LangGraph | [`python`] |
//! | `WAYPOINT_TEST_PYTHON_06` | the interpreter of a venv with langgraph 0.6 | [`python_06`] |
//! | `TMPDIR` | a scratch directory, removed when the script ends | [`kept_temp_dir`] |
//!
//! (`WAYPOINT_TEST_POSTGRES_CTL` and `WAYPOINT_TEST_REDIS_CTL` are exported too; no test may
//! stop the shared servers, so nothing here reads them.)
//!
//! Without a variable a test passes without running and prints why; under
//! `WAYPOINT_REQUIRE_BACKENDS=1` it fails instead, so a green run never hides a suite that
//! did not run. Tests share the servers: each takes a [`fresh_name`] for its schema, key
//! prefix or database, so they run in parallel without seeing each other.
//!
//! This crate depends on no Waypoint crate and no database driver, so any crate can
//! dev-depend on it.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// Whether `WAYPOINT_REQUIRE_BACKENDS=1`: a missing server or interpreter is a failure.
pub fn backends_required() -> bool {
    std::env::var("WAYPOINT_REQUIRE_BACKENDS").as_deref() == Ok("1")
}

/// The value of the environment variable `var`; `None` when it is unset or empty (the reason
/// printed, so the test can pass without running), a panic under `WAYPOINT_REQUIRE_BACKENDS=1`.
#[track_caller]
pub fn env_or_skip(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(value) if !value.is_empty() => Some(value),
        _ if backends_required() => {
            panic!("{var} is not set but WAYPOINT_REQUIRE_BACKENDS=1: run scripts/test.sh")
        }
        _ => {
            eprintln!("skipped: {var} is not set (scripts/test.sh sets it)");
            None
        }
    }
}

/// The shared PostgreSQL server's URL (`WAYPOINT_TEST_POSTGRES_URL`), as [`env_or_skip`].
#[track_caller]
pub fn postgres_url() -> Option<String> {
    env_or_skip("WAYPOINT_TEST_POSTGRES_URL")
}

/// The PostgreSQL server with the pgvector extension (`WAYPOINT_TEST_PGVECTOR_URL`), as
/// [`env_or_skip`].
#[track_caller]
pub fn pgvector_url() -> Option<String> {
    env_or_skip("WAYPOINT_TEST_PGVECTOR_URL")
}

/// The certificates of the TLS servers (`WAYPOINT_TEST_TLS_DIR`), as [`env_or_skip`].
#[track_caller]
pub fn tls() -> Option<Tls> {
    env_or_skip("WAYPOINT_TEST_TLS_DIR").map(|dir| Tls { dir: dir.into() })
}

/// The PostgreSQL server that accepts TLS only (`WAYPOINT_TEST_POSTGRES_TLS_URL`, no `ssl*`
/// parameters: add them), as [`env_or_skip`]. User `waypoint` is trusted over TLS; user
/// `waypoint_cert` must present [`Tls::cert_client`].
#[track_caller]
pub fn postgres_tls() -> Option<String> {
    env_or_skip("WAYPOINT_TEST_POSTGRES_TLS_URL")
}

/// The Redis server that accepts TLS only, with a client certificate signed by [`Tls::ca`]
/// (`WAYPOINT_TEST_REDIS_TLS_URL`, `rediss://localhost:PORT/`), as [`env_or_skip`].
#[track_caller]
pub fn redis_tls() -> Option<String> {
    env_or_skip("WAYPOINT_TEST_REDIS_TLS_URL")
}

/// PgBouncer in transaction pooling mode in front of the shared PostgreSQL
/// (`WAYPOINT_TEST_PGBOUNCER_URL`; any database name passes through), as [`env_or_skip`].
#[track_caller]
pub fn pgbouncer_url() -> Option<String> {
    env_or_skip("WAYPOINT_TEST_PGBOUNCER_URL")
}

/// One node of the 3-primary Redis Cluster (`WAYPOINT_TEST_REDIS_CLUSTER_URL`), as
/// [`env_or_skip`].
#[track_caller]
pub fn redis_cluster_url() -> Option<String> {
    env_or_skip("WAYPOINT_TEST_REDIS_CLUSTER_URL")
}

/// Every node of the Redis Cluster as `host:port` (`WAYPOINT_TEST_REDIS_CLUSTER_NODES`), as
/// [`env_or_skip`].
#[track_caller]
pub fn redis_cluster_nodes() -> Option<Vec<String>> {
    env_or_skip("WAYPOINT_TEST_REDIS_CLUSTER_NODES")
        .map(|nodes| nodes.split(',').map(str::to_owned).collect())
}

/// `url` with `password` as its user's password (`scheme://user@host/..` becomes
/// `scheme://user:password@host/..`; a URL without a user gets an empty one), for tests that
/// check a password never shows.
pub fn with_password(url: &str, password: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let at = start + url[start..].find('@').unwrap_or(0);
    let user = url[start..at].split(':').next().unwrap_or("");
    let rest = if at > start {
        &url[at..]
    } else {
        &url[start..]
    };
    let sep = if at > start { "" } else { "@" };
    format!("{}{user}:{password}{sep}{rest}", &url[..start])
}

/// The test CA and the certificates it signed, as files.
#[derive(Debug, Clone)]
pub struct Tls {
    dir: PathBuf,
}

impl Tls {
    fn file(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// The CA every test server's certificate chains to (PEM).
    pub fn ca(&self) -> String {
        self.file("ca.pem")
    }

    /// A CA unrelated to the servers (PEM): trusting only it must fail.
    pub fn other_ca(&self) -> String {
        self.file("other-ca.pem")
    }

    /// A client certificate and key (PEM) with CN `waypoint`, signed by [`Self::ca`].
    pub fn client(&self) -> (String, String) {
        (self.file("client.pem"), self.file("client.key"))
    }

    /// A client certificate and key (PEM) with CN `waypoint_cert`, signed by [`Self::ca`]:
    /// PostgreSQL's certificate-authenticated user.
    pub fn cert_client(&self) -> (String, String) {
        (self.file("client-cert.pem"), self.file("client-cert.key"))
    }
}

/// The shared Redis server's URL (`WAYPOINT_TEST_REDIS_URL`), as [`env_or_skip`].
#[track_caller]
pub fn redis_url() -> Option<String> {
    env_or_skip("WAYPOINT_TEST_REDIS_URL")
}

/// The interpreter of the current LangGraph's venv (`WAYPOINT_TEST_PYTHON`), as
/// [`env_or_skip`].
#[track_caller]
pub fn python() -> Option<PathBuf> {
    env_or_skip("WAYPOINT_TEST_PYTHON").map(PathBuf::from)
}

/// The all-MiniLM-L6-v2 model directory (`WAYPOINT_TEST_MINILM_DIR`: config.json,
/// tokenizer.json, model.safetensors, made by scripts/models.sh), as [`env_or_skip`].
#[track_caller]
pub fn minilm_dir() -> Option<PathBuf> {
    env_or_skip("WAYPOINT_TEST_MINILM_DIR").map(PathBuf::from)
}

/// The interpreter of the venv that runs tests/python/minilm_ref.py
/// (`WAYPOINT_TEST_MINILM_PYTHON`), as [`env_or_skip`].
#[track_caller]
pub fn minilm_python() -> Option<PathBuf> {
    env_or_skip("WAYPOINT_TEST_MINILM_PYTHON").map(PathBuf::from)
}

/// The interpreter of langgraph 0.6's venv (`WAYPOINT_TEST_PYTHON_06`), as [`env_or_skip`].
#[track_caller]
pub fn python_06() -> Option<PathBuf> {
    env_or_skip("WAYPOINT_TEST_PYTHON_06").map(PathBuf::from)
}

/// The PostgreSQL fault server (`WAYPOINT_TEST_POSTGRES_FAULTS_URL` and `_CTL`), as
/// [`env_or_skip`]; its script takes `start`, `stop`, `pause` (SIGSTOP) and `resume`.
#[track_caller]
pub fn postgres_faults() -> Option<FaultServer> {
    FaultServer::from_env("WAYPOINT_TEST_POSTGRES_FAULTS")
}

/// The Redis fault server (`WAYPOINT_TEST_REDIS_FAULTS_URL` and `_CTL`), as [`env_or_skip`];
/// its script takes `start`, `stop` and `kill` (SIGKILL, as a crash).
#[track_caller]
pub fn redis_faults() -> Option<FaultServer> {
    FaultServer::from_env("WAYPOINT_TEST_REDIS_FAULTS")
}

/// A server of its own for the tests that take it away, and the script that does so.
#[derive(Debug, Clone)]
pub struct FaultServer {
    url: String,
    ctl: PathBuf,
}

impl FaultServer {
    /// The server named by `{prefix}_URL` and `{prefix}_CTL`.
    #[track_caller]
    fn from_env(prefix: &str) -> Option<FaultServer> {
        Some(FaultServer {
            url: env_or_skip(&format!("{prefix}_URL"))?,
            ctl: env_or_skip(&format!("{prefix}_CTL"))?.into(),
        })
    }

    /// The server's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Runs the control script with `action` and waits for it; a panic when it fails.
    #[track_caller]
    pub fn ctl(&self, action: &str) {
        let status = match Command::new(&self.ctl).arg(action).status() {
            Ok(status) => status,
            Err(e) => panic!("cannot run {}: {e}", self.ctl.display()),
        };
        assert!(
            status.success(),
            "{} {action} failed: {status}",
            self.ctl.display()
        );
    }
}

/// `prefix`, `_` and a new UUID: a schema, key prefix, database or file name no other test
/// uses (a PostgreSQL identifier when `prefix` is one).
pub fn fresh_name(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
}

/// `server`'s URL naming the database `name` instead of its own, query kept
/// (`postgres://u@h:5432/postgres?x=1` to `postgres://u@h:5432/{name}?x=1`).
pub fn database_url(server: &str, name: &str) -> String {
    let (address, query) = match server.split_once('?') {
        Some((address, query)) => (address, Some(query)),
        None => (server, None),
    };
    let authority = address.find("://").map_or(0, |i| i + 3);
    let base = match address[authority..].find('/') {
        Some(slash) => &address[..authority + slash],
        None => address,
    };
    match query {
        Some(query) => format!("{base}/{name}?{query}"),
        None => format!("{base}/{name}"),
    }
}

/// A new empty directory under the temp dir, left in place after the test (so a second
/// process can open its files; `scripts/test.sh` removes its whole `TMPDIR`).
pub fn kept_temp_dir() -> std::io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(fresh_name("waypoint"));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// A TCP port on 127.0.0.1 nothing listens on right now, for a server a test starts itself.
#[track_caller]
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port on 127.0.0.1")
        .port()
}

/// Runs `command` with `input` on its stdin and returns its stdout; a panic showing its
/// stdout and stderr when it cannot start or exits with a failure.
#[track_caller]
pub fn run_with_input(command: &mut Command, input: &str) -> String {
    let shown = format!("{command:?}");
    let output = match output_of(command, input) {
        Ok(output) => output,
        Err(e) => panic!("cannot run {shown}: {e}"),
    };
    assert!(
        output.status.success(),
        "{shown} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    match String::from_utf8(output.stdout) {
        Ok(stdout) => stdout,
        Err(e) => panic!("{shown} printed no UTF-8: {e}"),
    }
}

/// What `command` prints with `input` on its stdin (closed after it).
fn output_of(command: &mut Command, input: &str) -> std::io::Result<Output> {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.as_bytes())?;
    }
    child.wait_with_output()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_url_replaces_only_the_database() {
        let cases = [
            ("postgres://u@h:5432/postgres", "postgres://u@h:5432/db"),
            (
                "postgres://u@h:5432/postgres?x=1",
                "postgres://u@h:5432/db?x=1",
            ),
            ("postgres://u@h:5432", "postgres://u@h:5432/db"),
            ("postgres://u@h:5432/", "postgres://u@h:5432/db"),
            ("postgres://u@h/a?x=/y", "postgres://u@h/db?x=/y"),
        ];
        for (server, expected) in cases {
            assert_eq!(database_url(server, "db"), expected, "{server}");
        }
    }

    #[test]
    fn fresh_names_differ_and_are_identifiers() {
        let (a, b) = (fresh_name("wp_test"), fresh_name("wp_test"));
        assert_ne!(a, b);
        assert!(a.starts_with("wp_test_"));
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    }

    #[test]
    fn run_with_input_returns_stdout() {
        let out = run_with_input(&mut Command::new("cat"), "hello");
        assert_eq!(out, "hello");
    }

    #[test]
    fn kept_temp_dirs_are_new_and_empty() -> std::io::Result<()> {
        let (a, b) = (kept_temp_dir()?, kept_temp_dir()?);
        assert_ne!(a, b);
        assert_eq!(std::fs::read_dir(&a)?.count(), 0);
        std::fs::remove_dir(a)?;
        std::fs::remove_dir(b)
    }
}
