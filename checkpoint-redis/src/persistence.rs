//! Whether the server keeps what it acknowledged across a restart: the check both the saver
//! and the Redis store run when they connect.
//!
//! Waypoint needs the append-only file: `appendonly yes` with `appendfsync everysec` (a
//! killed server loses nothing acknowledged; a power failure or OS crash, up to about two
//! seconds of writes) or `always` (nothing, at a cost per write). Without it, RDB snapshots
//! lose every write since the last snapshot, and a server with no persistence at all loses
//! everything on a restart.

use redis::aio::ConnectionLike;
use redis::{ErrorKind, RedisError, Value};

/// What connecting does about the server's persistence settings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PersistenceCheck {
    /// Connects, and logs a warning (`tracing::warn!`) when the server may lose
    /// acknowledged writes on a restart or its settings cannot be read (the default).
    #[default]
    Warn,
    /// Refuses to connect unless the server shows `appendonly yes` with `appendfsync
    /// everysec` or `always`; a server that does not allow `CONFIG GET` is refused too.
    Require,
    /// Does not look (the operator vouches for the server, e.g. a managed service with its
    /// own durability guarantees).
    Ignore,
}

/// Why [`check_persistence`] did not pass.
#[derive(Debug)]
pub enum PersistenceError {
    /// [`PersistenceCheck::Require`] and the server does not, or cannot be shown to, keep
    /// acknowledged writes; the message names the settings found.
    Refused(String),
    /// The connection failed while reading the settings.
    Redis(RedisError),
}

/// Reads the server's `appendonly` and `appendfsync` settings (`CONFIG GET`) and warns or
/// refuses per `check`; `server` names the server in messages (a redacted URL).
///
/// A server that refuses `CONFIG` (managed services often disable or rename it) has unknown
/// settings: a warning under [`PersistenceCheck::Warn`], a refusal under `Require`.
pub async fn check_persistence(
    conn: &mut impl ConnectionLike,
    check: PersistenceCheck,
    server: &str,
) -> Result<(), PersistenceError> {
    if check == PersistenceCheck::Ignore {
        return Ok(());
    }
    let mut pipe = redis::pipe();
    // Two commands rather than one with two names: Redis 6 takes a single name.
    pipe.cmd("CONFIG")
        .arg("GET")
        .arg("appendonly")
        .cmd("CONFIG")
        .arg("GET")
        .arg("appendfsync");
    let reply = pipe.query_async::<(Value, Value)>(conn).await;
    check_settings(reply, check, server)
}

/// Judges the reply to `CONFIG GET appendonly` and `CONFIG GET appendfsync` of the server
/// named `server` per `check` (not [`PersistenceCheck::Ignore`]): passes, warns or refuses.
pub(crate) fn check_settings(
    reply: Result<(Value, Value), RedisError>,
    check: PersistenceCheck,
    server: &str,
) -> Result<(), PersistenceError> {
    let problem = match reply {
        Ok((appendonly, appendfsync)) => {
            let (appendonly, appendfsync) = (setting(appendonly), setting(appendfsync));
            let durable = appendonly.as_deref() == Some("yes")
                && matches!(appendfsync.as_deref(), Some("everysec" | "always"));
            if durable {
                return Ok(());
            }
            let shown = |v: Option<String>| v.unwrap_or_else(|| "(not reported)".into());
            format!(
                "the Redis server at {server} has appendonly={} appendfsync={}: a restart or \
                 crash loses acknowledged writes",
                shown(appendonly),
                shown(appendfsync)
            )
        }
        Err(e) if !is_refusal(&e) => return Err(PersistenceError::Redis(e)),
        Err(e) => format!(
            "the persistence settings of the Redis server at {server} are unknown: CONFIG GET \
             was unavailable ({e}); managed services often disable it"
        ),
    };
    let needs = "Waypoint needs `appendonly yes` with `appendfsync everysec` or `always`";
    match check {
        PersistenceCheck::Require => Err(PersistenceError::Refused(format!(
            "refusing to connect (PersistenceCheck::Require): {problem}; {needs}"
        ))),
        _ => {
            tracing::warn!(
                server,
                "{problem}; {needs} (PersistenceCheck::Require refuses such a server, \
                 PersistenceCheck::Ignore silences this warning)"
            );
            Ok(())
        }
    }
}

/// The value of a `CONFIG GET name` reply (`[name, value]` in RESP2, a map in RESP3).
fn setting(reply: Value) -> Option<String> {
    let value = match reply {
        Value::Array(mut items) if items.len() == 2 => items.pop(),
        Value::Map(mut pairs) if pairs.len() == 1 => pairs.pop().map(|(_, v)| v),
        _ => None,
    }?;
    match value {
        Value::BulkString(b) => String::from_utf8(b).ok(),
        Value::SimpleString(s) => Some(s),
        _ => None,
    }
    .map(|s| s.to_ascii_lowercase())
}

/// Whether the server refused the command (unknown, renamed, or denied by an ACL), rather
/// than the connection failing.
fn is_refusal(e: &RedisError) -> bool {
    matches!(e.kind(), ErrorKind::Server(_) | ErrorKind::Extension)
}
