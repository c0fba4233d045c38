//! Where the server is, which keys are ours, how long operations and threads may last: the one
//! config of the saver and the store, and the one list of URL schemes.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use waypoint_checkpoint::raw::redact_url;
use waypoint_checkpoint::{Result, Serde};

use crate::PersistenceCheck;
use crate::error::Fault;
use crate::tls::{self, TlsSettings, TlsVerify};

/// The longest thread ttl (ten years): the server refuses expiry times past its clock range.
const MAX_TTL: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);

/// The longest key prefix, in bytes.
const MAX_PREFIX: usize = 256;

/// Redis' own limit on one value (`proto-max-bulk-len`, 512 MB by default).
pub const REDIS_MAX_VALUE_BYTES: usize = 512 * 1024 * 1024;

/// How a URL scheme reaches the server.
#[derive(Clone, Copy)]
enum Transport {
    Tcp,
    /// TCP with TLS.
    Tls,
    /// A Unix socket (Unix platforms only).
    Unix,
}

/// Every scheme of a Redis URL (the redis crate's, Valkey's included), with its transport.
const SCHEMES: [(&str, Transport); 7] = [
    ("redis", Transport::Tcp),
    ("valkey", Transport::Tcp),
    ("rediss", Transport::Tls),
    ("valkeys", Transport::Tls),
    ("redis+unix", Transport::Unix),
    ("valkey+unix", Transport::Unix),
    ("unix", Transport::Unix),
];

/// The schemes of Redis URLs, all recognised by [`RedisConfig::from_url`]: `redis://` and
/// `valkey://` (TCP), `rediss://` and `valkeys://` (TCP with TLS), and the Unix sockets
/// `redis+unix://`, `valkey+unix://` and `unix://` (refused, saying why, off Unix).
pub const URL_SCHEMES: [&str; SCHEMES.len()] = {
    let mut names = [""; SCHEMES.len()];
    let mut i = 0;
    while i < SCHEMES.len() {
        names[i] = SCHEMES[i].0;
        i += 1;
    }
    names
};

/// Settings of a [`crate::RedisSaver`] and a `RedisStore` (one config for both); `Debug`
/// shows the URL without its password.
#[derive(Clone)]
pub struct RedisConfig {
    /// `redis://[user:password@]host:port[/db]`, `rediss://...` (TLS, with redis-py's
    /// `ssl_*` query parameters, see the crate docs) or
    /// `redis+unix:///path/to/socket[?db=N]` (see [`URL_SCHEMES`]).
    pub url: String,
    /// The start of every key name (default `waypoint`): savers and stores with different
    /// prefixes share a server without seeing each other. 1 to 256 bytes, no `{` or `}`.
    pub prefix: String,
    /// How long one operation may take, reconnecting included, before it fails with
    /// `Error::Backend` (default 5 s).
    pub timeout: Duration,
    /// How long one connection attempt may take (default 2 s).
    pub connect_timeout: Duration,
    /// Saver only: how long a thread nobody reads or writes is kept (default: forever). Every
    /// key of the thread gets it; reads and writes renew it; pinned threads never expire.
    /// (A store's items have TTLs of their own, set by its `StoreConfig`.)
    pub ttl: Option<Duration>,
    /// Saver only: seals stored values when it has a keyring.
    pub serde: Serde,
    /// What connecting does when the server may lose acknowledged writes on a restart
    /// (default [`PersistenceCheck::Warn`]; see [`crate::check_persistence`]).
    pub persistence: PersistenceCheck,
    /// Saver only: the largest value sent to the server, in bytes as stored (a channel value
    /// or pending write with its small header, a checkpoint's or its metadata's JSON;
    /// default [`REDIS_MAX_VALUE_BYTES`]). A larger one is refused before anything is sent,
    /// with `Error::Serialization` naming its size: the server would drop the connection.
    /// Set it to the server's `proto-max-bulk-len` if that was changed. (A store's items
    /// have their own, smaller limit: `StoreConfig::max_value_bytes`.)
    pub max_value_bytes: usize,
    /// Whether opening a saver or a store runs its `setup()` (default true). The saver needs
    /// nothing set up; the store records (or upgrades) its key layout's version. With
    /// `false`, a store opens only where `setup()` has run.
    pub auto_setup: bool,
    /// Whether the server is a node of a Redis Cluster: `None` (the default) asks it when
    /// connecting (`INFO cluster`), `Some(true)` connects as a cluster client without asking,
    /// `Some(false)` as a standalone client (e.g. to a proxy that hides a cluster).
    pub cluster: Option<bool>,
    /// More nodes of the cluster to start from, as `host:port`, reached like the URL's node
    /// (credentials, TLS): connecting succeeds while any of them answers. The cluster's other
    /// nodes are found by asking it.
    pub cluster_nodes: Vec<String>,
    /// TLS only: a PEM file of the CAs that sign the server's certificate, trusted instead
    /// of the system's (default: the system's; the URL's `ssl_ca_certs` when not set here).
    pub tls_ca: Option<PathBuf>,
    /// TLS only: a PEM client certificate (chain) and its PEM private key, for servers that
    /// require one (`tls-auth-clients yes`; the URL's `ssl_certfile` and `ssl_keyfile` when
    /// not set here).
    pub tls_client_cert: Option<(PathBuf, PathBuf)>,
    /// TLS only: how the server's certificate is checked (default: the URL's
    /// `ssl_cert_reqs`/`ssl_check_hostname`, else [`TlsVerify::Full`]).
    pub tls_verify: Option<TlsVerify>,
}

impl fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &redact_url(&self.url))
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("ttl", &self.ttl)
            .field("serde", &self.serde)
            .field("persistence", &self.persistence)
            .field("max_value_bytes", &self.max_value_bytes)
            .field("auto_setup", &self.auto_setup)
            .field("cluster", &self.cluster)
            .field("cluster_nodes", &self.cluster_nodes)
            .field("tls_ca", &self.tls_ca)
            .field("tls_client_cert", &self.tls_client_cert)
            .field("tls_verify", &self.tls_verify)
            .finish()
    }
}

impl RedisConfig {
    /// Default settings for the server at `url` (checked when connecting).
    pub fn new(url: impl Into<String>) -> Self {
        RedisConfig {
            url: url.into(),
            prefix: "waypoint".into(),
            timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(2),
            ttl: None,
            serde: Serde::default(),
            persistence: PersistenceCheck::default(),
            max_value_bytes: REDIS_MAX_VALUE_BYTES,
            auto_setup: true,
            cluster: None,
            cluster_nodes: Vec::new(),
            tls_ca: None,
            tls_client_cert: None,
            tls_verify: None,
        }
    }

    /// Default settings for the server at `url`, checked now: `Error::InvalidConfig` for a
    /// URL that does not parse, a scheme not in [`URL_SCHEMES`], a Unix socket off Unix, or
    /// a bad TLS parameter (the files it names are read when connecting).
    pub fn from_url(url: &str) -> Result<Self> {
        Ok(Self::parse(url)?)
    }

    /// [`Self::from_url`] with the crate's own error.
    pub(crate) fn parse(url: &str) -> std::result::Result<Self, Fault> {
        let config = RedisConfig::new(url);
        // The URL parses; TLS files are read when connecting.
        let (url, _) = config.target()?;
        redis::Client::open(url).map_err(|e| config.refused(e.to_string()))?;
        Ok(config)
    }

    /// Sets the key prefix (1 to 256 bytes, no `{` or `}`: they would break hash tags).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets the per-operation timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets how long one connection attempt may take.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Expires the saver's threads left alone for `ttl` (at least 1 ms).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Sets the serde the saver's values are sealed and opened with.
    pub fn serde(mut self, serde: Serde) -> Self {
        self.serde = serde;
        self
    }

    /// Sets what connecting does about the server's persistence settings.
    pub fn persistence(mut self, check: PersistenceCheck) -> Self {
        self.persistence = check;
        self
    }

    /// Sets the largest value sent to the server, in bytes (at least 1).
    pub fn max_value_bytes(mut self, bytes: usize) -> Self {
        self.max_value_bytes = bytes;
        self
    }

    /// Sets whether opening a saver or a store runs its `setup()`.
    pub fn auto_setup(mut self, auto_setup: bool) -> Self {
        self.auto_setup = auto_setup;
        self
    }

    /// Connects as a Redis Cluster client (`true`) or a standalone one (`false`) without
    /// asking the server which it is.
    pub fn cluster(mut self, cluster: bool) -> Self {
        self.cluster = Some(cluster);
        self
    }

    /// Adds seed nodes (`host:port`) of the Redis Cluster besides the URL's node.
    pub fn cluster_nodes<S: Into<String>>(mut self, nodes: impl IntoIterator<Item = S>) -> Self {
        self.cluster_nodes.extend(nodes.into_iter().map(Into::into));
        self
    }

    /// Trusts the CAs of the PEM file `path` (instead of the system's) for the server's
    /// TLS certificate.
    pub fn tls_ca(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls_ca = Some(path.into());
        self
    }

    /// Presents the PEM client certificate `cert` with its PEM private key `key` over TLS.
    pub fn tls_client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.tls_client_cert = Some((cert.into(), key.into()));
        self
    }

    /// Sets how the server's TLS certificate is checked.
    pub fn tls_verify(mut self, verify: TlsVerify) -> Self {
        self.tls_verify = Some(verify);
        self
    }

    /// Checks the settings a server cannot check.
    pub(crate) fn check(&self) -> std::result::Result<(), Fault> {
        let prefix = &self.prefix;
        if prefix.is_empty() || prefix.len() > MAX_PREFIX || prefix.contains(['{', '}']) {
            return Err(Fault::Config(format!(
                "the Redis key prefix `{prefix}` must be 1 to {MAX_PREFIX} bytes with no `{{` \
                 or `}}`"
            )));
        }
        if self.timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(Fault::Config("the Redis timeouts must be positive".into()));
        }
        if self.max_value_bytes == 0 {
            return Err(Fault::Config(
                "the largest Redis value must be at least 1 byte".into(),
            ));
        }
        if let Some(ttl) = self.ttl
            && (ttl < Duration::from_millis(1) || ttl > MAX_TTL)
        {
            return Err(Fault::Config(format!(
                "a thread ttl of {ttl:?} is out of range (1 ms to {MAX_TTL:?})"
            )));
        }
        Ok(())
    }

    /// A client for the URL (nothing is sent yet), or why this build cannot open it.
    pub(crate) fn client(&self) -> std::result::Result<redis::Client, Fault> {
        let (url, tls) = self.target()?;
        let made = match &tls {
            Some(tls) => tls::client(&url, tls),
            None => redis::Client::open(url.as_str()).map_err(|e| e.to_string()),
        };
        made.map_err(|why| self.refused(why))
    }

    /// `builder` set up for this config's TLS, if it uses TLS.
    pub(crate) fn cluster_tls(
        &self,
        builder: redis::cluster::ClusterClientBuilder,
    ) -> std::result::Result<redis::cluster::ClusterClientBuilder, Fault> {
        match self.target()? {
            (_, Some(tls)) => tls::cluster(builder, &tls).map_err(|why| self.refused(why)),
            (_, None) => Ok(builder),
        }
    }

    /// The URL for the redis crate (without redis-py's TLS parameters) and, for a TLS
    /// scheme, the TLS settings: this config's, else the URL's. Refuses a scheme this build
    /// cannot open, and TLS settings for a scheme without TLS.
    fn target(&self) -> std::result::Result<(String, Option<TlsSettings>), Fault> {
        let scheme = self.scheme();
        let transport = match self.transport() {
            Some(transport) => transport,
            None => {
                return Err(self.refused(format!(
                    "not a Redis URL; use one of the schemes {} (e.g. redis://host:6379/0, \
                     rediss://host:6380/0 or redis+unix:///path/to/redis.sock)",
                    URL_SCHEMES.join(", ")
                )));
            }
        };
        if matches!(transport, Transport::Unix) && !cfg!(unix) {
            return Err(self.refused(format!(
                "`{scheme}:` is a Unix socket, which this platform does not have"
            )));
        }
        let (url, from_url) = tls::split_url(&self.url).map_err(|why| self.refused(why))?;
        let settings = TlsSettings {
            ca: self.tls_ca.clone(),
            client_cert: self.tls_client_cert.clone(),
            verify: self.tls_verify,
        }
        .or(from_url);
        match transport {
            Transport::Tls => Ok((url, Some(settings))),
            _ if settings.is_set() => Err(self.refused(format!(
                "TLS settings (a CA, a client certificate, ssl_* parameters) need a TLS URL: \
                 `rediss://` or `valkeys://`, not `{scheme}:`"
            ))),
            _ => Ok((url, None)),
        }
    }

    /// Whether the URL's scheme is one of TLS.
    pub(crate) fn is_tls(&self) -> bool {
        matches!(self.transport(), Some(Transport::Tls))
    }

    /// The URL's scheme.
    fn scheme(&self) -> &str {
        self.url.split_once(':').map_or("", |(scheme, _)| scheme)
    }

    /// How the URL's scheme reaches the server, `None` for no Redis scheme.
    fn transport(&self) -> Option<Transport> {
        let scheme = self.scheme();
        SCHEMES
            .iter()
            .find(|(name, _)| *name == scheme)
            .map(|(_, transport)| *transport)
    }

    /// The error refusing this config's URL for the reason `why`.
    fn refused(&self, why: String) -> Fault {
        Fault::Config(format!("Redis URL {}: {why}", redact_url(&self.url)))
    }

    /// The thread ttl in milliseconds, 0 without one.
    pub(crate) fn ttl_ms(&self) -> u64 {
        self.ttl
            .map_or(0, |t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(url: &str) -> String {
        match RedisConfig::from_url(url) {
            Err(waypoint_checkpoint::Error::InvalidConfig(why)) => why,
            other => panic!("{url}: {other:?}"),
        }
    }

    #[test]
    fn from_url_opens_the_schemes_this_build_can_reach() -> Result<()> {
        for url in [
            "redis://127.0.0.1:6379/0",
            "redis://user:pw@host/3",
            "valkey://[::1]:6380",
        ] {
            assert_eq!(RedisConfig::from_url(url)?.url, url);
        }
        for url in [
            "redis+unix:///run/redis.sock",
            "valkey+unix:///run/valkey.sock?db=2",
            "unix:///tmp/redis.sock",
        ] {
            if cfg!(unix) {
                RedisConfig::from_url(url)?;
            } else {
                assert!(refusal(url).contains("Unix socket"));
            }
        }
        Ok(())
    }

    #[test]
    fn tls_urls_open_and_tls_settings_need_them() -> Result<()> {
        for url in [
            "rediss://:secret@host:6380/0",
            "valkeys://host",
            "rediss://host/?ssl_cert_reqs=none&ssl_check_hostname=false",
        ] {
            RedisConfig::from_url(url)?;
        }
        let why = refusal("redis://:secret@host/?ssl_ca_certs=ca.pem");
        assert!(why.contains("rediss://"), "{why}");
        assert!(!why.contains("secret"), "{why}");
        let why = refusal("rediss://:secret@host/?ssl_cert_reqs=sometimes");
        assert!(
            why.contains("ssl_cert_reqs") && !why.contains("secret"),
            "{why}"
        );
        let plain = RedisConfig::new("redis://host/").tls_ca("ca.pem");
        assert!(matches!(plain.client(), Err(Fault::Config(why)) if why.contains("rediss://")));
        let missing = RedisConfig::new("rediss://host/").tls_ca("/nonexistent/ca.pem");
        assert!(
            matches!(missing.client(), Err(Fault::Config(why)) if why.contains("/nonexistent/ca.pem"))
        );
        Ok(())
    }

    #[test]
    fn other_urls_are_refused_naming_the_schemes() {
        for url in [
            "postgres://h/db",
            "redis",
            "",
            "sqlite:x.db",
            "redis://:x:y:z",
        ] {
            let why = refusal(url);
            assert!(why.contains("Redis URL"), "{url}: {why}");
        }
        assert!(refusal("mysql://h").contains("redis+unix"));
        assert_eq!(URL_SCHEMES[0], "redis");
        assert!(URL_SCHEMES.contains(&"rediss"));
    }
}
