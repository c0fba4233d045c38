//! The one error mapping of the crate: every driver error is classified here once, as a
//! [`Fault`], which becomes the saver's [`waypoint_checkpoint::Error`] or the store's
//! `waypoint_store::Error` by the same rule: settings that cannot work are `InvalidConfig`,
//! a server or connection that failed is `Backend { backend: "redis", .. }` whose source
//! names the operation (and the server, its URL redacted, when connecting).

use std::fmt;
use std::time::Duration;

use redis::{ErrorKind, RedisError, ServerErrorKind};

/// The backend's name in errors.
pub(crate) const BACKEND: &str = "redis";

/// What went wrong talking to Redis, before it becomes the saver's or the store's error.
#[derive(Debug)]
pub(crate) enum Fault {
    /// The settings cannot work: a URL this build cannot open, a bad prefix or limit, or a
    /// server refused under `PersistenceCheck::Require`.
    Config(String),
    /// The server or the connection failed.
    Backend(Failure),
}

/// An operation the server did not complete: the source of `Error::Backend`.
#[derive(Debug)]
pub(crate) struct Failure {
    operation: &'static str,
    /// The server, its URL redacted, when the operation is connecting.
    server: Option<String>,
    detail: String,
    source: Option<RedisError>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.server {
            Some(server) => write!(
                f,
                "`{}` to {server} failed: {}",
                self.operation, self.detail
            ),
            None => write!(f, "`{}` failed: {}", self.operation, self.detail),
        }
    }
}

impl std::error::Error for Failure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl Fault {
    /// `operation` failed with the driver error `e`.
    pub(crate) fn driver(operation: &'static str, e: RedisError) -> Fault {
        Fault::Backend(Failure {
            operation,
            server: None,
            detail: explain(&e),
            source: Some(e),
        })
    }

    /// `operation` got no answer within `timeout`.
    pub(crate) fn timed_out(operation: &'static str, timeout: Duration) -> Fault {
        Fault::Backend(Failure {
            operation,
            server: None,
            detail: format!("no answer from the Redis server within {timeout:?}"),
            source: None,
        })
    }

    /// `operation` got a reply this code does not expect.
    pub(crate) fn unexpected(operation: &'static str, detail: String) -> Fault {
        Fault::Backend(Failure {
            operation,
            server: None,
            detail,
            source: None,
        })
    }

    /// This fault of connecting, naming the server it happened on (`redacted`: its URL
    /// without secrets); `tls` says whether the URL asks for TLS, to explain a server that
    /// closed the connection at once.
    pub(crate) fn connecting(self, redacted: &str, tls: bool) -> Fault {
        let Fault::Backend(mut failure) = self else {
            return self;
        };
        failure.server = Some(redacted.to_owned());
        let closed = |e: &RedisError| e.is_connection_dropped() && !e.is_connection_refusal();
        if failure.source.as_ref().is_some_and(closed) {
            failure.detail.push_str(if tls {
                "; the server ended the TLS handshake: it may require a client certificate \
                 (ssl_certfile and ssl_keyfile in the URL, or RedisConfig::tls_client_cert), \
                 or not speak TLS on this port"
            } else {
                "; the server closed the connection at once: if it accepts only TLS, use a \
                 rediss:// URL"
            });
        }
        Fault::Backend(failure)
    }
}

/// The driver error `e` in words for whoever reads the error: a refused TLS certificate or
/// credentials say so and what to set, a failed connection says the server is unreachable.
fn explain(e: &RedisError) -> String {
    let said = e.to_string();
    let why = if said.contains("not valid for name") {
        "TLS: the server's certificate does not name the URL's host; connect by a name the \
         certificate holds, or skip the check (ssl_check_hostname=false, \
         TlsVerify::SkipHostname)"
    } else if said.contains("UnknownIssuer") {
        "TLS: the server's certificate is not signed by a trusted CA (its issuer is unknown); \
         name the CA that signed it (ssl_ca_certs in the URL, or RedisConfig::tls_ca)"
    } else if said.contains("CertificateRequired") {
        "TLS: the server requires a client certificate (ssl_certfile and ssl_keyfile in the \
         URL, or RedisConfig::tls_client_cert)"
    } else if said.contains("invalid peer certificate") || said.contains("fatal alert") {
        "TLS: the handshake with the server failed"
    } else if is_loading(e) {
        "the server is still loading its data after a restart"
    } else if e.kind() == ErrorKind::AuthenticationFailed {
        "the server refused the credentials (the URL's user name or password)"
    } else if is_broken(e) {
        "the Redis server is unreachable"
    } else {
        return said;
    };
    format!("{why} ({said})")
}

/// Whether the server refused a command, without running it, because it is still loading
/// its data (after a restart).
pub(crate) fn is_loading(e: &RedisError) -> bool {
    e.kind() == ErrorKind::Server(ServerErrorKind::BusyLoading)
}

/// Whether an error means the connection failed (rather than the command), so that the
/// operation may succeed on a new one.
pub(crate) fn is_broken(e: &RedisError) -> bool {
    e.is_unrecoverable_error()
        || e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
}

impl From<Fault> for waypoint_checkpoint::Error {
    fn from(fault: Fault) -> Self {
        match fault {
            Fault::Config(why) => waypoint_checkpoint::Error::InvalidConfig(why),
            Fault::Backend(failure) => waypoint_checkpoint::Error::backend(BACKEND, failure),
        }
    }
}

#[cfg(feature = "store")]
impl From<Fault> for waypoint_store::Error {
    fn from(fault: Fault) -> Self {
        match fault {
            Fault::Config(why) => waypoint_store::Error::InvalidConfig(why),
            Fault::Backend(failure) => waypoint_store::Error::backend(BACKEND, failure),
        }
    }
}
