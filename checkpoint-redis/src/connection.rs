//! The one connection layer of the crate, under the saver and the store alike: a multiplexed
//! connection that reconnects by itself, the per-operation deadline, one retry after a
//! broken connection, and the checks made when connecting (the server answers, and keeps
//! what it acknowledges per [`crate::PersistenceCheck`]).

use std::time::Duration;

use redis::Value;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use waypoint_checkpoint::raw::redact_url;

use crate::config::RedisConfig;
use crate::error::Fault;
use crate::persistence::{PersistenceError, check_persistence};

/// Runs `$body` (a future of a `RedisResult`, using `$conn`, a fresh handle on the shared
/// connection) within the operation deadline of `$db` (a [`Connection`]); gives
/// `Result<_, Fault>` naming `$what`. A failure of the connection itself (the server
/// restarted) makes the connection manager reconnect; with `retry = true` (idempotent
/// operations) the body then runs once more, so a restart costs no failed call once the
/// server is back.
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

/// A connection to one server, shared by clones (a saver and the stores it opens).
#[derive(Clone)]
pub(crate) struct Connection {
    manager: ConnectionManager,
    timeout: Duration,
}

impl Connection {
    /// Connects to the server `config` names within its timeout, checks that it answers,
    /// and checks its persistence settings per [`RedisConfig::persistence`]. Failures name
    /// the server, its URL redacted.
    pub(crate) async fn open(config: &RedisConfig) -> Result<Self, Fault> {
        config.check()?;
        let client = config.client()?;
        Self::connect(client, config)
            .await
            .map_err(|fault| fault.at(&redact_url(&config.url)))
    }

    async fn connect(client: redis::Client, config: &RedisConfig) -> Result<Self, Fault> {
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
        let manager = match tokio::time::timeout(config.timeout, connecting).await {
            Ok(Ok(manager)) => manager,
            Ok(Err(e)) => return Err(Fault::driver("connect", e)),
            Err(_) => return Err(Fault::timed_out("connect", config.timeout)),
        };
        let db = Connection {
            manager,
            timeout: config.timeout,
        };
        db.ping("connect").await?;
        let server = redact_url(&config.url);
        let mut conn = db.manager();
        let checking = check_persistence(&mut conn, config.persistence, &server);
        match tokio::time::timeout(config.timeout, checking).await {
            Ok(Ok(())) => Ok(db),
            Ok(Err(PersistenceError::Refused(why))) => Err(Fault::Config(why)),
            Ok(Err(PersistenceError::Redis(e))) => Err(Fault::driver("connect", e)),
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
    pub(crate) fn manager(&self) -> ConnectionManager {
        self.manager.clone()
    }

    /// How long one operation may take.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }
}
