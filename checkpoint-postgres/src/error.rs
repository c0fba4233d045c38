//! One error mapping for the saver and the store: a driver error is classified once (what
//! it says about the connection, whether setup is missing), then turned into
//! [`waypoint_checkpoint::Error`] or [`waypoint_store::Error`], each variant by the same rule.

use std::fmt;
use std::time::Duration;

use waypoint_checkpoint::BoxError;

/// The backend's name in errors.
pub(crate) const BACKEND: &str = "postgres";

/// A failure of the shared layer (pool, setup, deadline), before it becomes the caller's
/// error type.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The driver's error: a statement the server refused, a lost connection, no connection.
    Driver(sqlx::Error),
    /// The server did not answer within the deadline.
    TimedOut(Duration),
    /// Another process has held the setup lock for longer than this.
    SetupBusy(Duration),
    /// The configuration cannot work (a bad URL or schema name, a newer or foreign schema).
    InvalidConfig(String),
    /// No connection could be opened, for this reason (refused, unreachable, TLS,
    /// authentication, or every connection busy).
    Connect(String),
    /// `failure`, met by the operation `op` on the server at `server` (`host:port`).
    InOp {
        /// The operation (`put`, `get_tuple`, `setup`, ...).
        op: &'static str,
        /// Where the server is, without credentials.
        server: String,
        /// What went wrong.
        failure: Box<Failure>,
    },
}

/// What a failure becomes, in terms both error types have.
enum Mapped {
    InvalidConfig(String),
    /// Someone else holds what this needs (the saver's `Conflict`).
    Busy(String),
    Backend(waypoint_checkpoint::BoxError),
}

impl Failure {
    fn mapped(self) -> Mapped {
        match self {
            // A missing table, column or schema means setup never ran (or an older one).
            Failure::Driver(sqlx::Error::Database(db))
                if matches!(db.code().as_deref(), Some("42P01" | "3F000" | "42703")) =>
            {
                Mapped::InvalidConfig(format!(
                    "the database lacks Waypoint's tables ({}); run setup() first",
                    db.message()
                ))
            }
            Failure::Driver(e) => Mapped::Backend(e.into()),
            Failure::TimedOut(after) => {
                Mapped::Backend(format!("no answer from PostgreSQL within {after:?}").into())
            }
            Failure::Connect(cause) => Mapped::Backend(Box::new(ConnectError(cause))),
            Failure::InOp {
                op,
                server,
                failure,
            } => match failure.mapped() {
                Mapped::Backend(source) => {
                    Mapped::Backend(Box::new(OpError { op, server, source }))
                }
                other => other,
            },
            Failure::SetupBusy(wait) => Mapped::Busy(format!(
                "another process has been running setup() for over {wait:?}"
            )),
            Failure::InvalidConfig(message) => Mapped::InvalidConfig(message),
        }
    }
}

/// Why no connection could be opened: the source of a backend error.
#[derive(Debug)]
struct ConnectError(String);

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot connect: {}", self.0)
    }
}

impl std::error::Error for ConnectError {}

/// A backend error with the operation that met it and the server it ran against: the
/// source of a backend error, its own source the driver's error.
#[derive(Debug)]
struct OpError {
    op: &'static str,
    server: String,
    source: BoxError,
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on {}: {}", self.op, self.server, self.source)
    }
}

impl std::error::Error for OpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.source.as_ref())
    }
}

/// `source` with the operation and server named, for a backend error's source.
fn in_op(op: &'static str, server: &str, source: BoxError) -> BoxError {
    Box::new(OpError {
        op,
        server: server.to_owned(),
        source,
    })
}

/// What a failed operation says about the connection it ran on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Refused before any statement, or answered by the server: the session is as it was.
    Answered,
    /// Lost a deadlock or serialization race: the statement may simply run again.
    Transient,
    /// The connection itself failed (transport, protocol, the server shutting down).
    Broken,
    /// No answer (a timeout, a failure mid-exchange): the session's state is unknown.
    Unknown,
}

impl Kind {
    /// The kind of a driver error.
    pub(crate) fn of_driver(e: &sqlx::Error) -> Kind {
        match e {
            sqlx::Error::Io(_) | sqlx::Error::Protocol(_) | sqlx::Error::WorkerCrashed => {
                Kind::Broken
            }
            // A fatal error ends the session (PgBouncer's "server conn crashed?" too).
            sqlx::Error::Database(db)
                if db
                    .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                    .is_some_and(|pg| {
                        matches!(
                            pg.severity(),
                            sqlx::postgres::PgSeverity::Fatal | sqlx::postgres::PgSeverity::Panic
                        )
                    }) =>
            {
                Kind::Broken
            }
            sqlx::Error::Database(db) => match db.code().as_deref() {
                // admin_shutdown, crash_shutdown, cannot_connect_now: this connection is gone.
                Some("57P01" | "57P02" | "57P03") => Kind::Broken,
                // Connection exceptions.
                Some(code) if code.starts_with("08") => Kind::Broken,
                // deadlock_detected, serialization_failure.
                Some("40P01" | "40001") => Kind::Transient,
                _ => Kind::Answered,
            },
            _ => Kind::Unknown,
        }
    }

    /// The kind of an error whose backend error (if any) carries `source`.
    fn of_source(source: Option<&(dyn std::error::Error + Send + Sync + 'static)>) -> Kind {
        let Some(source) = source else {
            return Kind::Answered;
        };
        if let Some(op) = source.downcast_ref::<OpError>() {
            return Kind::of_source(Some(op.source.as_ref()));
        }
        if source.is::<ConnectError>() {
            // Nothing ran; the pool already retried whatever a retry could cure.
            return Kind::Answered;
        }
        source
            .downcast_ref::<sqlx::Error>()
            .map_or(Kind::Unknown, Kind::of_driver)
    }

    /// Whether the session may not be reused after this.
    pub(crate) fn leaves_session_unknown(self) -> bool {
        matches!(self, Kind::Broken | Kind::Unknown)
    }
}

/// The error types of the saver and the store (and [`Failure`] itself): built from a
/// failure by one rule, classified by what they carry. A trait of this crate rather than
/// `From` impls, which would be visible to every crate and break its type inference.
pub(crate) trait DbError: Sized {
    /// The failure as this error type.
    fn from_failure(failure: Failure) -> Self;

    /// What this error says about its connection.
    fn kind(&self) -> Kind;

    /// This error naming the operation `op` that met it and the `server` (`host:port`) it
    /// ran against, if it is a backend error.
    fn in_op(self, op: &'static str, server: &str) -> Self;
}

impl DbError for Failure {
    fn from_failure(failure: Failure) -> Self {
        failure
    }

    fn kind(&self) -> Kind {
        match self {
            Failure::Driver(e) => Kind::of_driver(e),
            Failure::TimedOut(_) => Kind::Unknown,
            Failure::SetupBusy(_) | Failure::InvalidConfig(_) | Failure::Connect(_) => {
                Kind::Answered
            }
            Failure::InOp { failure, .. } => failure.kind(),
        }
    }

    fn in_op(self, op: &'static str, server: &str) -> Self {
        Failure::InOp {
            op,
            server: server.to_owned(),
            failure: Box::new(self),
        }
    }
}

impl DbError for waypoint_checkpoint::Error {
    fn from_failure(failure: Failure) -> Self {
        use waypoint_checkpoint::Error;
        match failure.mapped() {
            Mapped::InvalidConfig(message) => Error::InvalidConfig(message),
            Mapped::Busy(message) => Error::Conflict(message),
            Mapped::Backend(source) => Error::backend(BACKEND, source),
        }
    }

    fn kind(&self) -> Kind {
        match self {
            waypoint_checkpoint::Error::Backend { source, .. } => {
                Kind::of_source(Some(source.as_ref()))
            }
            _ => Kind::of_source(None),
        }
    }

    fn in_op(self, op: &'static str, server: &str) -> Self {
        match self {
            waypoint_checkpoint::Error::Backend { backend, source } => {
                waypoint_checkpoint::Error::backend(backend, in_op(op, server, source))
            }
            other => other,
        }
    }
}

#[cfg(feature = "store")]
impl DbError for waypoint_store::Error {
    fn from_failure(failure: Failure) -> Self {
        use waypoint_store::Error;
        match failure.mapped() {
            Mapped::InvalidConfig(message) => Error::InvalidConfig(message),
            Mapped::Busy(message) => Error::backend(BACKEND, message),
            Mapped::Backend(source) => Error::backend(BACKEND, source),
        }
    }

    fn kind(&self) -> Kind {
        match self {
            waypoint_store::Error::Backend { source, .. } => Kind::of_source(Some(source.as_ref())),
            _ => Kind::of_source(None),
        }
    }

    fn in_op(self, op: &'static str, server: &str) -> Self {
        match self {
            waypoint_store::Error::Backend { backend, source } => {
                waypoint_store::Error::backend(backend, in_op(op, server, source))
            }
            other => other,
        }
    }
}

/// Maps a driver error for the saver.
pub(crate) fn pg_error(e: sqlx::Error) -> waypoint_checkpoint::Error {
    DbError::from_failure(Failure::Driver(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_error_types_classify_alike() {
        let io = || sqlx::Error::Io(std::io::Error::other("reset"));
        let saver = waypoint_checkpoint::Error::from_failure(Failure::Driver(io()));
        assert_eq!(saver.kind(), Kind::Broken);
        let timed_out =
            waypoint_checkpoint::Error::from_failure(Failure::TimedOut(Duration::from_secs(1)));
        assert_eq!(timed_out.kind(), Kind::Unknown);
        let busy =
            waypoint_checkpoint::Error::from_failure(Failure::SetupBusy(Duration::from_secs(1)));
        assert!(matches!(busy, waypoint_checkpoint::Error::Conflict(_)));
        assert_eq!(busy.kind(), Kind::Answered);
        #[cfg(feature = "store")]
        {
            let store = waypoint_store::Error::from_failure(Failure::Driver(io()));
            assert_eq!(store.kind(), Kind::Broken);
            let busy =
                waypoint_store::Error::from_failure(Failure::SetupBusy(Duration::from_secs(1)));
            assert!(matches!(busy, waypoint_store::Error::Backend { .. }));
        }
    }
}
