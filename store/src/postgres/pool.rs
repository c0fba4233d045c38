//! The store's own connection pool. sqlx's pool pings every connection it gets back, one more
//! round trip per operation (a third fewer single puts per second without it, measured); this
//! one takes back only connections whose operation finished, so it never needs to ask.

use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, PgConnection};
use tokio::sync::{Semaphore, SemaphorePermit};

use super::convert::{BACKEND, pg_error};
use crate::{Error, Result};

/// Up to `max` connections to one server, reused most recently returned first.
pub(crate) struct Pool {
    options: PgConnectOptions,
    idle: Mutex<Vec<(PgConnection, Instant)>>,
    permits: Semaphore,
    acquire_timeout: Duration,
    idle_timeout: Duration,
}

impl Pool {
    /// A pool that connects on demand.
    pub(crate) fn new(
        options: PgConnectOptions,
        max: u32,
        acquire_timeout: Duration,
        idle_timeout: Duration,
    ) -> Self {
        Pool {
            options,
            idle: Mutex::new(Vec::new()),
            permits: Semaphore::new(max.max(1) as usize),
            acquire_timeout,
            idle_timeout,
        }
    }

    /// A connection (an idle one, or a new one) and the permit that holds its place; fails
    /// after the acquire timeout. Hand the connection back with [`release`](Self::release)
    /// once its operation finished; one dropped mid-operation (a timeout, a cancelled caller)
    /// may have a statement in flight and is closed instead.
    pub(crate) async fn acquire(&self) -> Result<(PgConnection, SemaphorePermit<'_>)> {
        let waited = Instant::now();
        let permit = tokio::time::timeout(self.acquire_timeout, self.permits.acquire())
            .await
            .map_err(|_| self.exhausted())?
            .map_err(|_| self.exhausted())?;
        let idle = {
            let mut idle = self.idle.lock();
            // Connections idle for too long may have been cut by a firewall or the server.
            idle.retain(|(_, since)| since.elapsed() < self.idle_timeout);
            idle.pop()
        };
        let conn = match idle {
            Some((conn, _)) => conn,
            None => {
                let left = self.acquire_timeout.saturating_sub(waited.elapsed());
                tokio::time::timeout(left, self.options.connect())
                    .await
                    .map_err(|_| self.exhausted())?
                    .map_err(pg_error)?
            }
        };
        Ok((conn, permit))
    }

    /// Takes back a connection whose operation finished (successfully, or with an error of
    /// the statement rather than of the connection).
    pub(crate) fn release(&self, conn: PgConnection) {
        self.idle.lock().push((conn, Instant::now()));
    }

    /// Drops every idle connection: one broke, so the server probably restarted and took
    /// the others with it.
    pub(crate) fn forget_idle(&self) {
        self.idle.lock().clear();
    }

    fn exhausted(&self) -> Error {
        Error::backend(
            BACKEND,
            format!("no PostgreSQL connection within {:?}", self.acquire_timeout),
        )
    }
}
