//! The one connection layer of the saver and the store: sqlx's pool, each operation's
//! deadline, and connections parked between operations.
//!
//! sqlx's pool pings every connection handed back to it before another caller may take it:
//! one more round trip per operation (the store once had a pool of its own for this reason,
//! measuring a third fewer single puts per second with sqlx's). A connection whose operation
//! ended cleanly is therefore parked here, and the next operation of the saver or the store
//! takes a parked one before asking sqlx's pool. It is parked only while sqlx's pool has
//! headroom (an idle connection, or room to open one): at the limit it goes back to sqlx's
//! pool, ping and all, so that whatever waits there (an operation, or SQL run on
//! [`Pool::pg`]) gets it. A connection whose operation was cut off (by the deadline or a
//! caller dropping the future), broke or failed in transport is closed, never reused: such
//! a session may still have a statement in flight, or a `BEGIN` whose transaction the next
//! user would run in, its commits acknowledged and never made (sqlx 0.8 returns a connection
//! cancelled during `BEGIN` to the pool inside the transaction, launchbadge/sqlx#4393).
//!
//! A broken connection (the server restarted or ended the session) closes the parked ones
//! too, and until a connection answers a ping every operation takes only one that does: the
//! idle connections in sqlx's pool, never pinged on the way out, may have died with it. An
//! idempotent operation that met the broken connection runs again on such a one, so killed
//! sessions cost no call; any other fails, and only it. Errors name the operation (the
//! function running it) and the server, and a connection that could not be opened says why
//! (sqlx's pool says only that it timed out).

use std::fmt;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{Connection, PgConnection, Postgres};

use crate::config::PostgresConfig;
use crate::error::{DbError, Failure, Kind};
use crate::schema::{self, Tables};

/// The saver's and the store's connections to one server and schema; clones share them.
#[derive(Clone)]
pub(crate) struct Pool {
    inner: Arc<Inner>,
}

struct Inner {
    pg: PgPool,
    /// Where the server is (`host:port`, or the socket's directory), for errors.
    server: String,
    /// Connections whose operation ended cleanly, most recently parked last, each with the
    /// time it was parked.
    parked: Mutex<Vec<(PoolConnection<Postgres>, Instant)>>,
    /// Set when a connection broke or none could be opened: until a connection answers a
    /// ping, operations take only connections that do, so that one failed call (of an
    /// operation that may not run twice) is the only one.
    suspect: AtomicBool,
    config: PostgresConfig,
    /// [`PostgresConfig::pooled_settings`] and [`PostgresConfig::pooled_begin`], built once.
    settings: Option<String>,
    begin: Option<String>,
    /// The runtime the pool was made on: a parked connection dropped with the pool hands
    /// itself back to sqlx's pool on a task, which needs a runtime.
    runtime: Option<tokio::runtime::Handle>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let _entered = self.runtime.as_ref().map(|r| r.enter());
        self.parked.get_mut().clear();
    }
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl Pool {
    /// A pool for `config` that connects on first use.
    pub(crate) fn new(config: PostgresConfig) -> Result<Self, Failure> {
        let options = config.connect_options()?;
        let (settings, begin) = (config.pooled_settings()?, config.pooled_begin()?);
        let server = match options.get_socket() {
            Some(dir) => dir.display().to_string(),
            None => format!("{}:{}", options.get_host(), options.get_port()),
        };
        let pg = PgPoolOptions::new()
            .max_connections(config.max_connections)
            .min_connections(config.min_connections.min(config.max_connections))
            // What is left of the timeout goes to finding out why no connection came.
            .acquire_timeout(config.timeout * ACQUIRE_TENTHS / 10)
            .idle_timeout(Some(config.idle_timeout))
            // A ping per checkout would double the round trips; broken connections are
            // detected by the operation that meets them instead.
            .test_before_acquire(false)
            .connect_lazy_with(options);
        Ok(Pool {
            inner: Arc::new(Inner {
                pg,
                server,
                parked: Mutex::new(Vec::new()),
                suspect: AtomicBool::new(false),
                config,
                settings,
                begin,
                runtime: tokio::runtime::Handle::try_current().ok(),
            }),
        })
    }

    /// The settings the pool was made with.
    pub(crate) fn config(&self) -> &PostgresConfig {
        &self.inner.config
    }

    /// Behind a transaction pooler, the statements opening an operation's transaction
    /// ([`PostgresConfig::pooled_begin`], built when the pool was made); `None` on a direct
    /// connection. A `Result` as the config's, for [`schema::pinned!`].
    pub(crate) fn pooled_begin(&self) -> Result<Option<String>, Failure> {
        Ok(self.inner.begin.clone())
    }

    /// Behind a transaction pooler, the session settings as `SET LOCAL` statements
    /// ([`PostgresConfig::pooled_settings`]), for a statement that runs in a transaction of
    /// its own; `None` on a direct connection.
    pub(crate) fn pooled_settings(&self) -> Option<&str> {
        self.inner.settings.as_deref()
    }

    /// sqlx's pool underneath, for statements that stream (and callers' own SQL).
    pub(crate) fn pg(&self) -> &PgPool {
        &self.inner.pg
    }

    /// A connection: the most recently parked one, or one from sqlx's pool (within the
    /// timeout). Report how its operation ended with [`Conn::finish`].
    pub(crate) async fn acquire(&self) -> Result<Conn<'_>, Failure> {
        self.take(false).await
    }

    /// [`acquire`](Self::acquire), or with `checked` (a retry after a connection proved
    /// broken), or while the pool is suspect, one from sqlx's pool that answers a ping: the
    /// idle connections there may have died with the broken one, and each dead one is closed
    /// in turn until one answers or a new one is opened.
    pub(crate) async fn take(&self, checked: bool) -> Result<Conn<'_>, Failure> {
        let conn = if checked || self.inner.suspect.load(Ordering::Relaxed) {
            self.forget_parked();
            let conn = self.answering().await?;
            self.inner.suspect.store(false, Ordering::Relaxed);
            conn
        } else {
            match self.take_parked() {
                Some(conn) => conn,
                None => self.connect().await?,
            }
        };
        Ok(Conn {
            conn: Some(conn),
            pool: self,
            reuse: false,
        })
    }

    /// The most recently parked connection, closing those idle for too long.
    fn take_parked(&self) -> Option<PoolConnection<Postgres>> {
        let parked = {
            let mut parked = self.inner.parked.lock();
            // Connections idle for too long may have been cut by a firewall or the server.
            let limit = self.inner.config.idle_timeout;
            parked.retain_mut(|(conn, since)| {
                let fresh = since.elapsed() < limit;
                if !fresh {
                    conn.close_on_drop();
                }
                fresh
            });
            parked.pop()
        };
        parked.map(|(conn, _)| conn)
    }

    /// A connection of sqlx's pool that answers a ping (see [`take`](Self::take)).
    async fn answering(&self) -> Result<PoolConnection<Postgres>, Failure> {
        let mut last = None;
        // Every connection sqlx's pool holds, then a new one.
        for _ in 0..=self.inner.config.max_connections {
            let mut conn = self.connect().await?;
            match conn.ping().await {
                Ok(()) => return Ok(conn),
                Err(e) => {
                    conn.close_on_drop();
                    last = Some(e);
                }
            }
        }
        Err(Failure::Driver(last.unwrap_or(sqlx::Error::PoolClosed)))
    }

    /// A connection from sqlx's pool, or why none came: sqlx's pool retries a refused
    /// connection until its wait ends and then says only that it timed out, so one more
    /// attempt, within what is left of the timeout, finds the cause (or that the server
    /// answers, and every connection was busy).
    async fn connect(&self) -> Result<PoolConnection<Postgres>, Failure> {
        let pg = &self.inner.pg;
        let waited = pg.options().get_acquire_timeout();
        let cause = match pg.acquire().await {
            Ok(conn) => return Ok(conn),
            Err(sqlx::Error::PoolTimedOut) => {
                let rest = self.inner.config.timeout * PROBE_TENTHS / 10;
                let options = pg.connect_options();
                match tokio::time::timeout(rest, PgConnection::connect_with(&options)).await {
                    // The server answers (the probe closes on drop): every connection was
                    // busy, or the server came back just now.
                    Ok(Ok(_probe)) => {
                        let max = self.inner.config.max_connections;
                        return Err(Failure::Connect(if pg.size() >= max {
                            format!("all {max} connections stayed busy for {waited:?}")
                        } else {
                            format!("none opened within {waited:?}; the server answers again now")
                        }));
                    }
                    Ok(Err(e)) => connect_cause(&e),
                    Err(_) => format!("no answer within {:?}", waited + rest),
                }
            }
            Err(e) => connect_cause(&e),
        };
        // The server is gone or refuses: so are, or will be, the parked connections.
        self.forget_parked();
        Err(Failure::Connect(cause))
    }

    /// Keeps `conn` for the next operation while sqlx's pool has headroom; hands it back
    /// otherwise.
    fn park(&self, conn: PoolConnection<Postgres>) {
        let pg = &self.inner.pg;
        if pg.num_idle() > 0 || pg.size() < self.inner.config.max_connections {
            self.inner.parked.lock().push((conn, Instant::now()));
        }
    }

    /// Closes every parked connection and makes the pool suspect: one broke, so the server
    /// probably restarted and took the others with it.
    fn forget_parked(&self) {
        self.inner.suspect.store(true, Ordering::Relaxed);
        let mut parked = std::mem::take(&mut *self.inner.parked.lock());
        for (conn, _) in &mut parked {
            conn.close_on_drop();
        }
    }

    /// `outcome`, its error naming the operation `op` and this pool's server.
    pub(crate) fn in_op<T, E: DbError>(
        &self,
        op: &'static str,
        outcome: Result<T, E>,
    ) -> Result<T, E> {
        outcome.map_err(|e| e.in_op(op, &self.inner.server))
    }

    /// `fut`, failing with [`Failure::TimedOut`] if `bounded` and it takes longer than the
    /// timeout.
    pub(crate) async fn deadline<T, E: DbError>(
        &self,
        bounded: bool,
        fut: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        if !bounded {
            return fut.await;
        }
        let timeout = self.inner.config.timeout;
        tokio::time::timeout(timeout, fut)
            .await
            .unwrap_or_else(|_| Err(E::from_failure(Failure::TimedOut(timeout))))
    }

    /// Checks that the server answers, within the timeout.
    pub(crate) fn check(&self) -> BoxFuture<'_, Result<(), Failure>> {
        async move {
            on_conn!(self, retry = false, |conn| schema::execute(
                conn,
                String::from("SELECT 1")
            ))
        }
        .boxed()
    }

    /// Creates the schema (if one is configured) and `tables`, or migrates them (see
    /// [`schema::migrate`]), without the statement timeout: with one configured (on a direct
    /// connection), on a session of its own opened without it. A pooled connection is kept
    /// for the next operation only when setup succeeded: a failed setup may leave its lock
    /// behind.
    pub(crate) fn setup<'a>(&'a self, tables: &'a Tables) -> BoxFuture<'a, Result<(), Failure>> {
        async move { self.in_op("setup", self.setup_on_conn(tables).await) }.boxed()
    }

    /// [`setup`](Self::setup), its errors not yet naming the operation.
    async fn setup_on_conn(&self, tables: &Tables) -> Result<(), Failure> {
        {
            let config = &self.inner.config;
            let schema = config.checked_schema()?;
            let wait = config.timeout.max(Duration::from_secs(60));
            if config.statement_timeout.is_some() && !config.transaction_pooler {
                // A session of its own, opened without the timeout: on a pooled session, the
                // `SET statement_timeout = 0` lifting it would itself run under it, and a
                // short timeout on a busy server cut it off.
                let unlimited = PostgresConfig {
                    statement_timeout: None,
                    ..config.clone()
                };
                let options = unlimited.connect_options()?;
                let mut conn = match tokio::time::timeout(
                    config.timeout,
                    PgConnection::connect_with(&options),
                )
                .await
                {
                    Ok(Ok(conn)) => conn,
                    Ok(Err(e)) => return Err(Failure::Connect(connect_cause(&e))),
                    Err(_) => {
                        let waited = config.timeout;
                        return Err(Failure::Connect(format!("no answer within {waited:?}")));
                    }
                };
                let done = schema::migrate(&mut conn, schema, None, tables, wait).await;
                // Closing politely is a courtesy: the session ends either way.
                let _ = sqlx::Connection::close(conn).await;
                return done;
            }
            let mut conn = self.acquire().await?;
            let done = schema::migrate(&mut conn, schema, self.pooled_begin()?, tables, wait).await;
            if done.is_ok() {
                conn.finish(&done);
            }
            done
        }
    }
}

/// The tenths of the timeout sqlx's pool may spend finding a connection, and the tenths one
/// more attempt may then spend finding out why it found none: together under the whole, so
/// the operation's own deadline does not cut the answer off.
const ACQUIRE_TENTHS: u32 = 7;
const PROBE_TENTHS: u32 = 2;

/// Why connecting failed, in words: the driver's error, with what a certificate refusal
/// means (rustls names it by its variant).
fn connect_cause(e: &sqlx::Error) -> String {
    let shown = match e {
        // "error communicating with database: " says nothing here.
        sqlx::Error::Io(io) => io.to_string(),
        other => other.to_string(),
    };
    let hint = if shown.contains("UnknownIssuer") {
        " (the server's certificate is not signed by a trusted CA: name its CA with sslrootcert)"
    } else if shown.contains("not valid for name") || shown.contains("NotValidForName") {
        " (the server's certificate does not name the host connected to: connect by a name it holds)"
    } else {
        ""
    };
    format!("{shown}{hint}")
}

/// A connection taken from a [`Pool`] for one operation. Dropped, it is parked if
/// [`finish`](Self::finish) saw the operation end cleanly, and closed otherwise.
pub(crate) struct Conn<'a> {
    conn: Option<PoolConnection<Postgres>>,
    pool: &'a Pool,
    reuse: bool,
}

impl Conn<'_> {
    /// Marks the connection reusable if `outcome` leaves it in a known state: success, or an
    /// error the server answered (anything but a transport failure or a timeout). A broken
    /// connection closes the parked ones too.
    pub(crate) fn finish<T, E: DbError>(&mut self, outcome: &Result<T, E>) {
        let kind = outcome.as_ref().err().map_or(Kind::Answered, E::kind);
        if kind == Kind::Broken {
            self.pool.forget_parked();
        }
        self.reuse = !kind.leaves_session_unknown();
    }

    /// Marks the connection for closing whatever [`finish`](Self::finish) saw: its session
    /// may hold locks or settings of its own.
    #[cfg(feature = "store")]
    pub(crate) fn discard(&mut self) {
        self.reuse = false;
    }
}

impl Deref for Conn<'_> {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        self.conn.as_deref().expect("held until dropped")
    }
}

impl DerefMut for Conn<'_> {
    fn deref_mut(&mut self) -> &mut PgConnection {
        self.conn.as_deref_mut().expect("held until dropped")
    }
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        if self.reuse {
            self.pool.park(conn);
        } else {
            conn.close_on_drop();
        }
    }
}

/// Runs `$body` (a future using `$conn: &mut PgConnection`, whose error is the saver's or
/// the store's) on a connection of `$pool` within the timeout (or, with `bounded = false`, a
/// body that bounds its own waits). With `retry = true` (idempotent operations) a body that
/// met a broken connection runs once more on a fresh one, so a server restart costs no
/// failed call once it is back, and one that lost a deadlock runs again (up to three times).
/// Behind a transaction pooler the body runs in one transaction ([`schema::pinned!`]); with
/// `pinned = false` it runs as it is, for a body whose every message is one transaction.
macro_rules! on_conn {
    ($pool:expr, retry = $retry:expr, |$conn:ident| $body:expr) => {
        $crate::pool::on_conn!(@run $pool, $retry, true, true, |$conn| $body)
    };
    ($pool:expr, retry = $retry:expr, bounded = $bounded:expr, |$conn:ident| $body:expr) => {
        $crate::pool::on_conn!(@run $pool, $retry, $bounded, true, |$conn| $body)
    };
    ($pool:expr, retry = $retry:expr, pinned = false, |$conn:ident| $body:expr) => {
        $crate::pool::on_conn!(@run $pool, $retry, true, false, |$conn| $body)
    };
    (@body true, $pool:ident, $conn:ident, $body:expr) => {
        $crate::schema::pinned!($pool, $conn, $body).await
    };
    (@body false, $pool:ident, $conn:ident, $body:expr) => {
        $body.await
    };
    (@run $pool:expr, $retry:expr, $bounded:expr, $pinned:tt, |$conn:ident| $body:expr) => {{
        let pool: &$crate::pool::Pool = &$pool;
        let op = $crate::pool::op_name(::std::any::type_name_of_val(&|| ()));
        let mut reconnects = if $retry { 1 } else { 0 };
        let mut reruns = if $retry { 3 } else { 0 };
        let mut checked = false;
        let outcome = loop {
            let outcome = pool
                .deadline($bounded, async {
                    let mut conn = match pool.take(checked).await {
                        Ok(conn) => conn,
                        Err(failure) => {
                            return Err($crate::error::DbError::from_failure(failure));
                        }
                    };
                    let done = {
                        let $conn: &mut ::sqlx::PgConnection = &mut conn;
                        $crate::pool::on_conn!(@body $pinned, pool, $conn, $body)
                    };
                    conn.finish(&done);
                    done
                })
                .await;
            match outcome.as_ref().err().map($crate::error::DbError::kind) {
                Some($crate::error::Kind::Broken) if reconnects > 0 => {
                    reconnects -= 1;
                    checked = true;
                }
                Some($crate::error::Kind::Transient) if reruns > 0 => reruns -= 1,
                _ => break outcome,
            }
        };
        pool.in_op(op, outcome)
    }};
}
pub(crate) use on_conn;

/// The name of the function whose closure has the type name `closure` (what
/// `type_name_of_val(&|| ())` gives inside it, `path::to::fn::{{closure}}::...`): the
/// operation [`on_conn!`] names in errors.
pub(crate) fn op_name(closure: &'static str) -> &'static str {
    let mut path = closure;
    while let Some(outer) = path.strip_suffix("::{{closure}}") {
        path = outer;
    }
    // A generic function's arguments (`get_tuple<'_, '_>`).
    if path.ends_with('>') {
        let mut depth = 0;
        for (i, c) in path.char_indices().rev() {
            match c {
                '>' => depth += 1,
                '<' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                path = &path[..i];
                break;
            }
        }
    }
    path.rsplit("::").next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operation_is_the_enclosing_function() {
        fn named() -> &'static str {
            op_name(std::any::type_name_of_val(&|| ()))
        }
        assert_eq!(named(), "named");
        let nested = async { op_name(std::any::type_name_of_val(&|| ())) };
        assert_eq!(
            futures::executor::block_on(nested),
            "the_operation_is_the_enclosing_function"
        );
        assert_eq!(
            op_name("crate::<impl Trait for Type>::get_tuple::{{closure}}::{{closure}}"),
            "get_tuple"
        );
        assert_eq!(
            op_name("crate::<impl Trait for a::Type>::list<'_, '_>::{{closure}}"),
            "list"
        );
    }

    /// Sessions ask the server for warnings and up only: setup's idempotent statements
    /// ("already exists, skipping") send no notices for sqlx to log at info level.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sessions_get_no_notices() {
        let Some(url) = waypoint_test_kit::postgres_url() else {
            return;
        };
        let pool = Pool::new(PostgresConfig::new(url)).expect("config");
        let level: String = sqlx::query_scalar("SHOW client_min_messages")
            .fetch_one(pool.pg())
            .await
            .expect("show");
        assert_eq!(level, "warning");
    }
}
