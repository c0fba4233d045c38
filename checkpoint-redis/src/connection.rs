//! The one connection layer of the crate, under the saver and the store alike: a multiplexed
//! connection to a standalone server or to a Redis Cluster (found out by asking the server)
//! that reconnects by itself, the per-operation deadline, one retry after a broken
//! connection, and the checks made when connecting (the server answers, and keeps what it
//! acknowledges per [`crate::PersistenceCheck`], on every primary of a cluster).

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo};
use redis::{Cmd, ConnectionAddr, ConnectionInfo, Pipeline, RedisFuture, Value};
use waypoint_checkpoint::raw::redact_url;

use crate::config::RedisConfig;
use crate::error::Fault;
use crate::persistence::{PersistenceError, check_persistence, check_settings};

/// Runs `$body` (a future of a `RedisResult`, using `$conn`, a fresh handle on the shared
/// connection) within the operation deadline of `$db` (a [`Connection`]); gives
/// `Result<_, Fault>` naming `$what`. A failure of the connection itself (the server
/// restarted) makes the connection manager reconnect; with `retry = true` (idempotent
/// operations) the body then runs once more, so a restart costs no failed call once the
/// server is back. A server still loading its data after a restart refuses every command
/// without running it: the body runs again, every 50 ms, until the deadline.
macro_rules! with_conn {
    ($db:expr, $what:expr, retry = $retry:expr, |$conn:ident| $body:expr) => {{
        let db: &$crate::connection::Connection = &$db;
        let work = async {
            let mut attempts: u8 = if $retry { 2 } else { 1 };
            loop {
                attempts -= 1;
                #[allow(unused_mut)]
                let mut $conn = db.manager();
                match $body.await {
                    Err(e) if $crate::error::is_loading(&e) => {
                        attempts += 1;
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                    Err(e) if attempts > 0 && $crate::error::is_broken(&e) => continue,
                    Err(e) => break Err($crate::error::Fault::driver($what, e)),
                    Ok(v) => break Ok(v),
                }
            }
        };
        match tokio::time::timeout(db.timeout(), work).await {
            Ok(done) => done,
            Err(_) => Err($crate::error::Fault::timed_out($what, db.timeout())),
        }
    }};
}
pub(crate) use with_conn;

/// A connection to a standalone Redis server or to a Redis Cluster: commands, pipelines and
/// scripts run on either ([`ConnectionLike`]); clones share it.
#[derive(Clone)]
pub enum RedisConnection {
    /// One server (a primary), reconnecting by itself.
    Standalone(ConnectionManager),
    /// A Redis Cluster: each command goes to the primary of its keys' slot.
    Cluster(ClusterConnection),
}

impl RedisConnection {
    /// Whether this is a connection to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self, RedisConnection::Cluster(_))
    }
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            RedisConnection::Standalone(conn) => conn.req_packed_command(cmd),
            RedisConnection::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            RedisConnection::Standalone(conn) => conn.req_packed_commands(pipeline, offset, count),
            RedisConnection::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            RedisConnection::Standalone(conn) => conn.get_db(),
            RedisConnection::Cluster(conn) => conn.get_db(),
        }
    }
}

/// A connection to one server or cluster, shared by clones (a saver and the stores it opens).
#[derive(Clone)]
pub(crate) struct Connection {
    conn: RedisConnection,
    timeout: Duration,
}

impl Connection {
    /// Connects to the server or cluster `config` names within its timeout, checks that it
    /// answers, and checks its persistence settings per [`RedisConfig::persistence`] (on
    /// every primary of a cluster). Failures name the server, its URL redacted.
    pub(crate) async fn open(config: &RedisConfig) -> Result<Self, Fault> {
        config.check()?;
        let client = config.client()?;
        Self::connect(client, config)
            .await
            .map_err(|fault| fault.connecting(&redact_url(&config.url), config.is_tls()))
    }

    async fn connect(client: redis::Client, config: &RedisConfig) -> Result<Self, Fault> {
        let conn = match config.cluster {
            Some(true) => Self::cluster(&client, config).await?,
            _ => {
                let manager = Self::standalone(client.clone(), config).await?;
                if config.cluster.is_none() && Self::cluster_enabled(&manager, config).await? {
                    drop(manager);
                    Self::cluster(&client, config).await?
                } else {
                    RedisConnection::Standalone(manager)
                }
            }
        };
        let db = Connection {
            conn,
            timeout: config.timeout,
        };
        db.ping("connect").await?;
        let server = redact_url(&config.url);
        tracing::debug!(server, cluster = db.is_cluster(), "connected to Redis");
        let checking = async {
            match db.manager() {
                RedisConnection::Standalone(mut conn) => {
                    check_persistence(&mut conn, config.persistence, &server).await
                }
                RedisConnection::Cluster(mut conn) => {
                    check_primaries(&mut conn, config, &server).await
                }
            }
        };
        match tokio::time::timeout(config.timeout, checking).await {
            Ok(Ok(())) => Ok(db),
            Ok(Err(PersistenceError::Refused(why))) => Err(Fault::Config(why)),
            Ok(Err(PersistenceError::Redis(e))) => Err(Fault::driver("connect", e)),
            Err(_) => Err(Fault::timed_out("connect", config.timeout)),
        }
    }

    /// A reconnecting connection to the one server of `client`.
    async fn standalone(
        client: redis::Client,
        config: &RedisConfig,
    ) -> Result<ConnectionManager, Fault> {
        // Few, short reconnection attempts per call: during an outage calls fail fast with
        // a clear error instead of each waiting out a long backoff, and a failed round
        // starts a new one on the next call.
        let manager = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(config.connect_timeout))
            .set_response_timeout(Some(config.timeout))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(500));
        let connecting = ConnectionManager::new_with_config(client, manager);
        match tokio::time::timeout(config.timeout, connecting).await {
            Ok(Ok(manager)) => Ok(manager),
            Ok(Err(e)) => Err(Fault::driver("connect", e)),
            Err(_) => Err(Fault::timed_out("connect", config.timeout)),
        }
    }

    /// Whether the server is a node of a Redis Cluster (`INFO cluster` shows
    /// `cluster_enabled:1`); a server refusing `INFO` counts as standalone.
    async fn cluster_enabled(
        manager: &ConnectionManager,
        config: &RedisConfig,
    ) -> Result<bool, Fault> {
        let mut conn = manager.clone();
        let mut info = redis::cmd("INFO");
        info.arg("cluster");
        let info = info.query_async::<String>(&mut conn);
        match tokio::time::timeout(config.timeout, info).await {
            Ok(Ok(info)) => Ok(info.lines().any(|l| l.trim() == "cluster_enabled:1")),
            Ok(Err(e)) if crate::error::is_broken(&e) => Err(Fault::driver("connect", e)),
            Ok(Err(_)) => Ok(false),
            Err(_) => Err(Fault::timed_out("connect", config.timeout)),
        }
    }

    /// A connection to the Redis Cluster that `client`'s node and
    /// [`RedisConfig::cluster_nodes`] belong to.
    async fn cluster(
        client: &redis::Client,
        config: &RedisConfig,
    ) -> Result<RedisConnection, Fault> {
        let first = client.get_connection_info().clone();
        if first.redis_settings().db() != 0 {
            return Err(Fault::Config(format!(
                "Redis URL {}: a Redis Cluster has only database 0; remove the database \
                 number from the URL",
                redact_url(&config.url)
            )));
        }
        let mut seeds = vec![first.clone()];
        for node in &config.cluster_nodes {
            seeds.push(seed(&first, node, config)?);
        }
        // The seeds share the first node's credentials and TLS, which the client takes.
        let builder = ClusterClientBuilder::new(seeds)
            .connection_timeout(config.connect_timeout)
            .response_timeout(config.timeout)
            .retries(2)
            .min_retry_wait(50)
            .max_retry_wait(500);
        let cluster = config.cluster_tls(builder)?.build().map_err(|e| {
            Fault::Config(format!(
                "Redis URL {}: cannot open a Redis Cluster client: {e}",
                redact_url(&config.url)
            ))
        })?;
        let connecting = cluster.get_async_connection();
        match tokio::time::timeout(config.timeout, connecting).await {
            Ok(Ok(conn)) => Ok(RedisConnection::Cluster(conn)),
            Ok(Err(e)) => Err(Fault::driver("connect", e)),
            Err(_) => Err(Fault::timed_out("connect", config.timeout)),
        }
    }

    /// Checks that the server answers, as the operation `what`.
    pub(crate) async fn ping(&self, what: &'static str) -> Result<(), Fault> {
        let ping = redis::cmd("PING");
        with_conn!(self, what, retry = false, |conn| ping
            .query_async::<Value>(&mut conn))?;
        Ok(())
    }

    /// A handle on the shared connection.
    pub(crate) fn manager(&self) -> RedisConnection {
        self.conn.clone()
    }

    /// Whether the connection is to a Redis Cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        self.conn.is_cluster()
    }

    /// How long one operation may take.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }
}

/// The seed node `node` (`host:port`) of a cluster, reached like `first` (TLS included).
fn seed(first: &ConnectionInfo, node: &str, config: &RedisConfig) -> Result<ConnectionInfo, Fault> {
    let bad = || {
        Fault::Config(format!(
            "the Redis Cluster node `{node}` is not `host:port` (e.g. 10.0.0.2:6379)"
        ))
    };
    let (host, port) = node.rsplit_once(':').ok_or_else(bad)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port: u16 = port.parse().map_err(|_| bad())?;
    if host.is_empty() {
        return Err(bad());
    }
    let mut addr = first.addr().clone();
    match &mut addr {
        ConnectionAddr::Tcp(h, p)
        | ConnectionAddr::TcpTls {
            host: h, port: p, ..
        } => {
            *h = host.to_owned();
            *p = port;
        }
        _ => {
            return Err(Fault::Config(format!(
                "Redis URL {}: a Redis Cluster is reached over TCP, not a Unix socket",
                redact_url(&config.url)
            )));
        }
    }
    Ok(first.clone().set_addr(addr))
}

/// Checks the persistence settings of every primary of the cluster, each named by its
/// address in messages.
async fn check_primaries(
    conn: &mut ClusterConnection,
    config: &RedisConfig,
    server: &str,
) -> Result<(), PersistenceError> {
    if config.persistence == crate::PersistenceCheck::Ignore {
        return Ok(());
    }
    let primaries = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
    let mut per_node = Vec::new();
    for name in ["appendonly", "appendfsync"] {
        let mut get = redis::cmd("CONFIG");
        get.arg("GET").arg(name);
        let replies = conn
            .route_command(get, primaries.clone())
            .await
            .map_err(PersistenceError::Redis)?;
        per_node.push(by_node(replies));
    }
    let appendfsync = per_node.pop().unwrap_or_default();
    let appendonly = per_node.pop().unwrap_or_default();
    for (node, appendonly) in appendonly {
        let appendfsync = appendfsync
            .iter()
            .find(|(n, _)| *n == node)
            .map_or(Value::Nil, |(_, v)| v.clone());
        let named = format!("{node} (a primary of the cluster at {server})");
        let reply = match (appendonly, appendfsync) {
            (Value::ServerError(e), _) | (_, Value::ServerError(e)) => Err(e.into()),
            both => Ok(both),
        };
        check_settings(reply, config.persistence, &named)?;
    }
    Ok(())
}

/// The replies of a command sent to several nodes, by node address.
fn by_node(replies: Value) -> Vec<(String, Value)> {
    let Value::Map(pairs) = replies else {
        return Vec::new();
    };
    pairs
        .into_iter()
        .map(|(node, reply)| {
            let node = match node {
                Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
                Value::SimpleString(s) => s,
                other => format!("{other:?}"),
            };
            (node, reply)
        })
        .collect()
}
