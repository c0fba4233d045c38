//! The one connection layer of the crate, under the saver and the store alike: a multiplexed
//! connection to a standalone server or to a Redis Cluster (found out by asking the server)
//! that reconnects by itself, the per-operation deadline, one retry after a broken
//! connection, and the checks made when connecting (the server answers, and keeps what it
//! acknowledges per [`crate::PersistenceCheck`], on every primary of a cluster).

use std::sync::{Arc, Mutex, PoisonError};
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
    /// A connection of its own for one caller at a time (a standalone server over plain
    /// TCP), see [`Connection::query`].
    direct: Option<Arc<Direct>>,
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
        let direct = match &conn {
            RedisConnection::Standalone(_) => Direct::new(&client, config).map(Arc::new),
            RedisConnection::Cluster(_) => None,
        };
        let db = Connection {
            conn,
            timeout: config.timeout,
            direct,
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

    /// Runs `pipe` on the direct connection when no other caller holds it (connecting it
    /// first if it is not), else on `shared`. The multiplexed connection hands every request
    /// to its driver task and the reply back (two task wake-ups besides the socket's); here
    /// the caller's own task writes and reads. The replies are the same either way.
    pub(crate) async fn query(
        &self,
        pipe: &Pipeline,
        shared: &mut RedisConnection,
    ) -> redis::RedisResult<Value> {
        let Some(mut lease) = self.direct.as_deref().and_then(Direct::lease) else {
            return pipe.query_async(shared).await;
        };
        let conn = match lease.conn.take() {
            Some(conn) => lease.conn.insert(conn),
            None => match lease.direct.connect().await {
                Ok(conn) => lease.conn.insert(conn),
                // The shared connection says why, or reconnects by itself.
                Err(_) => return pipe.query_async(shared).await,
            },
        };
        let done = pipe.query_async(&mut **conn).await;
        // A reply from the server leaves the connection in step; anything else drops it.
        lease.keep = match &done {
            Ok(_) => true,
            Err(e) => !crate::error::is_broken(e) && e.kind() != redis::ErrorKind::Parse,
        };
        done
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

/// The direct connection of a standalone server over plain TCP: idle, in use by one caller,
/// or not connected (at first, and after a broken or cancelled call).
struct Direct {
    host: String,
    port: u16,
    /// `AUTH` arguments (username, password), when the URL has a password.
    auth: Option<(Option<String>, String)>,
    db: i64,
    connect_timeout: Duration,
    slot: Mutex<Slot>,
}

/// The state of the direct connection.
enum Slot {
    Idle(Box<DirectConn>),
    Busy,
    Empty,
}

impl Direct {
    /// The direct connection of `client`'s server, if it is reached over plain TCP.
    fn new(client: &redis::Client, config: &RedisConfig) -> Option<Direct> {
        let info = client.get_connection_info();
        let ConnectionAddr::Tcp(host, port) = info.addr() else {
            return None;
        };
        let settings = info.redis_settings();
        Some(Direct {
            host: host.clone(),
            port: *port,
            auth: settings
                .password()
                .map(|p| (settings.username().map(str::to_owned), p.to_owned())),
            db: settings.db(),
            connect_timeout: config.connect_timeout,
            slot: Mutex::new(Slot::Empty),
        })
    }

    /// The connection for one call, unless another caller holds it (`conn` is `None` when
    /// it must be connected first).
    fn lease(&self) -> Option<Lease<'_>> {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        let conn = match std::mem::replace(&mut *slot, Slot::Busy) {
            Slot::Idle(conn) => Some(conn),
            Slot::Empty => None,
            Slot::Busy => return None,
        };
        Some(Lease {
            direct: self,
            conn,
            keep: false,
        })
    }

    /// A new connection, authenticated and on the URL's database.
    async fn connect(&self) -> redis::RedisResult<Box<DirectConn>> {
        let connecting = tokio::net::TcpStream::connect((self.host.as_str(), self.port));
        let stream = tokio::time::timeout(self.connect_timeout, connecting)
            .await
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
        stream.set_nodelay(true)?;
        let mut conn = Box::new(DirectConn {
            stream,
            buf: Vec::new(),
            db: self.db,
        });
        if let Some((user, password)) = &self.auth {
            let mut auth = redis::cmd("AUTH");
            auth.arg(user.as_deref()).arg(password);
            auth.query_async::<()>(&mut *conn).await?;
        }
        if self.db != 0 {
            redis::cmd("SELECT")
                .arg(self.db)
                .query_async::<()>(&mut *conn)
                .await?;
        }
        Ok(conn)
    }
}

/// The direct connection held by one call; put back when dropped if `keep`, else closed (a
/// call cut off by its deadline leaves replies unread).
struct Lease<'a> {
    direct: &'a Direct,
    conn: Option<Box<DirectConn>>,
    keep: bool,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let next = match self.conn.take() {
            Some(conn) if self.keep => Slot::Idle(conn),
            _ => Slot::Empty,
        };
        *self
            .direct
            .slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = next;
    }
}

/// One plain TCP connection, read and written by the calling task itself (RESP2).
struct DirectConn {
    stream: tokio::net::TcpStream,
    /// Bytes read and not yet parsed.
    buf: Vec<u8>,
    db: i64,
}

impl DirectConn {
    /// Sends `packed` and reads `replies` replies; the first error reply fails the call
    /// (after every reply is read, so the connection stays in step).
    async fn exchange(&mut self, packed: &[u8], replies: usize) -> redis::RedisResult<Vec<Value>> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        self.stream.write_all(packed).await?;
        let mut values = Vec::with_capacity(replies);
        let mut at = 0;
        while values.len() < replies {
            match decode(&self.buf, at)? {
                Some((value, end)) => {
                    values.push(value);
                    at = end;
                }
                None => {
                    if self.stream.read_buf(&mut self.buf).await? == 0 {
                        return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
                    }
                }
            }
        }
        self.buf.drain(..at);
        if let Some(Value::ServerError(e)) =
            values.iter().find(|v| matches!(v, Value::ServerError(_)))
        {
            return Err(e.clone().into());
        }
        Ok(values)
    }
}

impl ConnectionLike for DirectConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let mut values = self.exchange(&cmd.get_packed_command(), 1).await?;
            Ok(values.pop().unwrap_or(Value::Nil))
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let packed = pipeline.get_packed_pipeline();
            let mut values = self.exchange(&packed, offset + count).await?;
            Ok(values.split_off(offset.min(values.len())))
        })
    }

    fn get_db(&self) -> i64 {
        self.db
    }
}

/// How deeply replies may nest arrays: a put's replies nest two deep; a deeper reply is
/// refused rather than walked by recursion until the stack runs out.
const MAX_REPLY_DEPTH: usize = 16;

/// The RESP2 reply starting at `at` in `buf` and where it ends, `None` while it is
/// incomplete. Replies decode as `redis::parse_redis_value` decodes them (`+OK` is
/// `Value::Okay`; an error reply is `Value::ServerError`), at a fraction of its cost: a put's
/// fifteen replies took a third of its client time there.
fn decode(buf: &[u8], at: usize) -> redis::RedisResult<Option<(Value, usize)>> {
    decode_nested(buf, at, 0)
}

/// [`decode`] of a reply nested `depth` arrays deep.
fn decode_nested(
    buf: &[u8],
    at: usize,
    depth: usize,
) -> redis::RedisResult<Option<(Value, usize)>> {
    let bad = |what: &'static str| redis::RedisError::from((redis::ErrorKind::Parse, what));
    if depth > MAX_REPLY_DEPTH {
        return Err(bad("reply nests arrays too deeply"));
    }
    let Some(line) = buf.get(at..).and_then(|b| memchr::memmem::find(b, b"\r\n")) else {
        return Ok(None);
    };
    // Every reply has its type byte before the line's end.
    if line == 0 {
        return Err(bad("unexpected reply: an empty line"));
    }
    let head = at + line + 2;
    let text = &buf[at + 1..at + line];
    let number = || {
        std::str::from_utf8(text)
            .ok()
            .and_then(|n| n.trim().parse::<i64>().ok())
            .ok_or_else(|| bad("unexpected reply: a length or integer that is not a number"))
    };
    let value = match buf[at] {
        b'+' => match std::str::from_utf8(text) {
            Ok("OK") => Value::Okay,
            Ok(line) => Value::SimpleString(line.to_owned()),
            Err(_) => return Err(bad("unexpected reply: a status line that is not UTF-8")),
        },
        // Rare, and redis' own parser names the error's kind.
        b'-' => redis::parse_redis_value(&buf[at..head])?,
        b':' => Value::Int(number()?),
        b'$' => match usize::try_from(number()?) {
            Ok(len) => {
                let Some(end) = head.checked_add(len).filter(|end| end + 2 <= buf.len()) else {
                    return Ok(None);
                };
                if &buf[end..end + 2] != b"\r\n" {
                    return Err(bad(
                        "unexpected reply: a bulk string longer than its length",
                    ));
                }
                return Ok(Some((Value::BulkString(buf[head..end].to_vec()), end + 2)));
            }
            Err(_) => Value::Nil,
        },
        b'*' => match usize::try_from(number()?) {
            Ok(len) => {
                // Each element takes at least three bytes: a hostile length reserves nothing.
                let mut items = Vec::with_capacity(len.min((buf.len() - head) / 3));
                let mut end = head;
                for _ in 0..len {
                    match decode_nested(buf, end, depth + 1)? {
                        Some((item, next)) => {
                            items.push(item);
                            end = next;
                        }
                        None => return Ok(None),
                    }
                }
                return Ok(Some((Value::Array(items), end)));
            }
            Err(_) => Value::Nil,
        },
        _ => return Err(bad("unexpected reply")),
    };
    Ok(Some((value, head)))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every reply of `replies` by [`decode`], and where each ends.
    fn decoded(replies: &[u8]) -> redis::RedisResult<Vec<(Value, usize)>> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < replies.len() {
            let (value, end) = decode(replies, at)?.expect("a whole reply");
            out.push((value, end));
            at = end;
        }
        Ok(out)
    }

    #[test]
    fn replies_decode_as_redis_decodes_them_and_only_when_whole() -> redis::RedisResult<()> {
        let replies: &[u8] = b"+OK\r\n+QUEUED\r\n*4\r\n:1\r\n$3\r\nabc\r\n$-1\r\n*-1\r\n-ERR no\r\n:-7\r\n$0\r\n\r\n*0\r\n";
        let ends: Vec<usize> = decoded(replies)?.iter().map(|(_, end)| *end).collect();
        assert_eq!(&ends[..3], &[5, 14, 41]);
        let mut at = 0;
        for (value, end) in decoded(replies)? {
            assert_eq!(value, redis::parse_redis_value(&replies[at..end])?);
            // Cut anywhere inside, the reply is not there yet.
            for cut in at + 1..end {
                assert!(decode(&replies[..cut], at)?.is_none(), "cut at {cut}");
            }
            at = end;
        }
        assert!(matches!(
            decoded(b"-ERR no\r\n")?[0].0,
            Value::ServerError(_)
        ));
        assert_eq!(decoded(b"+OK\r\n")?[0].0, Value::Okay);
        Ok(())
    }

    /// Byte strings made of RESP pieces, whole and broken, decode as redis' own parser
    /// decodes them, or are incomplete or refused: never a panic.
    #[test]
    fn random_replies_decode_as_redis_decodes_them() {
        const PIECES: &[&[u8]] = &[
            b"+OK\r\n",
            b"+QUEUED\r\n",
            b"-ERR x\r\n",
            b":12\r\n",
            b":-3\r\n",
            b"$3\r\nabc\r\n",
            b"$-1\r\n",
            b"$0\r\n\r\n",
            b"*2\r\n",
            b"*0\r\n",
            b"*-1\r\n",
            b"$5\r\nab",
            b"\r\n",
            b"*",
            b"$",
            b":",
            b"x",
            b"\xff",
            b"+\xc3\r\n",
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..20_000 {
            let mut buf = Vec::new();
            for _ in 0..next() % 8 {
                buf.extend_from_slice(PIECES[(next() % PIECES.len() as u64) as usize]);
            }
            match decode(&buf, 0) {
                Ok(Some((value, end))) => {
                    let theirs = redis::parse_redis_value(&buf[..end]);
                    assert_eq!(Some(&value), theirs.as_ref().ok(), "{buf:?}");
                }
                // Incomplete or refused: redis' parser finds no reply there either.
                _ => assert!(redis::parse_redis_value(&buf).is_err(), "{buf:?}"),
            }
        }
    }

    #[test]
    fn hostile_replies_are_refused() -> redis::RedisResult<()> {
        assert!(decode(b"?what\r\n", 0).is_err());
        assert!(decode(b"\r\n", 0).is_err());
        // Nesting beyond any real reply, headers that are not numbers, a bulk string whose
        // bytes run past its length, a status line that is not UTF-8.
        let deep = b"*1\r\n".repeat(100_000);
        assert!(decode(&deep, 0).is_err());
        assert!(decode(b"$x\r\n", 0).is_err());
        assert!(decode(b"*\r\n", 0).is_err());
        assert!(decode(b"$2\r\nabc\r\n", 0).is_err());
        assert!(decode(b"+\xff\r\n", 0).is_err());
        // Lengths no buffer holds wait for more bytes, reserving nothing.
        assert!(decode(b"$9223372036854775807\r\nab", 0)?.is_none());
        assert!(decode(b"*9223372036854775807\r\n:1\r\n", 0)?.is_none());
        Ok(())
    }
}
