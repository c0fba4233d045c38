//! The one error mapping of the crate: a driver error becomes a [`Failure`] (what went wrong,
//! classified once), and a `Failure` becomes the saver's [`waypoint_checkpoint::Error`] or the
//! store's `waypoint_store::Error` with the same variant for the same cause.

use std::path::PathBuf;

use rusqlite::ErrorCode;

/// The backend's name in errors.
pub(crate) const BACKEND: &str = "sqlite";

/// What went wrong with the database, before it is reported as a saver's or a store's error.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The driver failed (I/O, constraint, lock timeout, ...).
    Driver(rusqlite::Error),
    /// A table Waypoint needs is missing: `setup()` never ran (the driver's message).
    NoTables(String),
    /// The file is not a SQLite database.
    NotADatabase(PathBuf),
    /// The database's schema (`what`: "" or "store ") is newer than this build.
    Newer {
        /// Which schema: "" (the saver's) or "store ".
        what: &'static str,
        /// The version found.
        found: i64,
        /// The newest version this build knows.
        latest: i64,
    },
    /// Refused, the database left as it was: another program's tables, a bad URL.
    Refused(String),
    /// The database records something impossible (a migration version before the first).
    Corrupt(String),
    /// Anything else (a thread that could not start, a task that panicked).
    Other(waypoint_checkpoint::BoxError),
}

impl From<rusqlite::Error> for Failure {
    fn from(e: rusqlite::Error) -> Self {
        if let rusqlite::Error::SqliteFailure(_, Some(msg)) = &e
            && msg.starts_with("no such table")
        {
            return Failure::NoTables(msg.clone());
        }
        Failure::Driver(e)
    }
}

impl Failure {
    /// The same failure, naming the file (`None` in memory) when it is not a database (only
    /// opening can tell).
    pub(crate) fn opening(self, file: Option<&std::path::Path>) -> Self {
        match (self, file) {
            (Failure::Driver(e), Some(path))
                if e.sqlite_error_code() == Some(ErrorCode::NotADatabase) =>
            {
                Failure::NotADatabase(path.to_owned())
            }
            (other, _) => other,
        }
    }

    /// The message of a failure reported as a configuration error, else `None`.
    fn config_message(&self) -> Option<String> {
        match self {
            Failure::NoTables(msg) => Some(format!(
                "the database has no Waypoint tables ({msg}); run setup() first"
            )),
            Failure::Refused(msg) => Some(msg.clone()),
            _ => None,
        }
    }

    /// The source of a failure reported as a backend error.
    fn into_source(self) -> waypoint_checkpoint::BoxError {
        match self {
            Failure::Driver(e) => Box::new(e),
            Failure::NotADatabase(path) => {
                format!("{} is not a SQLite database", path.display()).into()
            }
            Failure::Newer {
                what,
                found,
                latest,
            } => format!(
                "database {what}schema version {found} is newer than this build supports \
                 ({latest}); upgrade Waypoint"
            )
            .into(),
            Failure::Other(e) => e,
            Failure::NoTables(msg) | Failure::Refused(msg) | Failure::Corrupt(msg) => msg.into(),
        }
    }
}

/// Whether a driver error is SQLite's "database is busy" or "locked".
fn busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// Whether a backend error's source is SQLite's "busy" or "locked".
fn busy_source(source: &(dyn std::error::Error + 'static)) -> bool {
    source.downcast_ref::<rusqlite::Error>().is_some_and(busy)
}

/// An error type the connections report in: the saver's, the store's, or [`Failure`] itself.
/// (A method rather than `From` impls: a `From<Failure>` on the public error types would make
/// `?` in their users' code ambiguous wherever it is inferred.)
pub(crate) trait DbError: Send + 'static {
    /// The failure as this type's error, the same variant for the same cause.
    fn from_failure(f: Failure) -> Self;

    /// Whether it is SQLite's "busy" or "locked" (an attempt that may be retried elsewhere).
    fn is_busy(&self) -> bool;
}

impl DbError for Failure {
    fn from_failure(f: Failure) -> Self {
        f
    }

    fn is_busy(&self) -> bool {
        matches!(self, Failure::Driver(e) if busy(e))
    }
}

impl DbError for waypoint_checkpoint::Error {
    fn from_failure(f: Failure) -> Self {
        match f.config_message() {
            Some(msg) => waypoint_checkpoint::Error::InvalidConfig(msg),
            None => waypoint_checkpoint::Error::backend(BACKEND, f.into_source()),
        }
    }

    fn is_busy(&self) -> bool {
        matches!(self, waypoint_checkpoint::Error::Backend { source, .. } if busy_source(source.as_ref()))
    }
}

#[cfg(feature = "store")]
impl DbError for waypoint_store::Error {
    fn from_failure(f: Failure) -> Self {
        if let Failure::Corrupt(msg) = f {
            return waypoint_store::Error::Corrupt(msg);
        }
        match f.config_message() {
            Some(msg) => waypoint_store::Error::InvalidConfig(msg),
            None => waypoint_store::Error::backend(BACKEND, f.into_source()),
        }
    }

    fn is_busy(&self) -> bool {
        matches!(self, waypoint_store::Error::Backend { source, .. } if busy_source(source.as_ref()))
    }
}

/// Maps a driver error for the saver.
pub(crate) fn sqlite_error(e: rusqlite::Error) -> waypoint_checkpoint::Error {
    DbError::from_failure(Failure::from(e))
}

/// Maps a driver error for the store.
#[cfg(feature = "store")]
pub(crate) fn store_error(e: rusqlite::Error) -> waypoint_store::Error {
    DbError::from_failure(Failure::from(e))
}
