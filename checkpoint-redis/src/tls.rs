//! TLS for `rediss://` and `valkeys://` URLs: rustls on ring, the system's trusted CAs or
//! a CA file, an optional client certificate, and how the server's certificate is checked;
//! set by [`crate::RedisConfig`] methods or by redis-py's URL query names.

use std::path::{Path, PathBuf};

use redis::cluster::ClusterClientBuilder;
use redis::{ClientTlsConfig, ConnectionAddr, IntoConnectionInfo, TlsCertificates, TlsMode};

/// How a TLS connection checks the server's certificate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TlsVerify {
    /// The certificate must chain to a trusted CA and name the URL's host (the default;
    /// redis-py's `ssl_cert_reqs=required`, or `optional`, which a client treats the same).
    #[default]
    Full,
    /// The certificate must chain to a trusted CA; its host names are not checked
    /// (redis-py's `ssl_check_hostname=false`).
    SkipHostname,
    /// The certificate is not checked at all (redis-py's `ssl_cert_reqs=none`): the
    /// connection is encrypted but anyone on the path can pose as the server.
    Off,
}

/// The TLS query parameters a URL may carry: redis-py's names, which the redis crate does
/// not know.
const PARAMS: [&str; 5] = [
    "ssl_ca_certs",
    "ssl_certfile",
    "ssl_keyfile",
    "ssl_cert_reqs",
    "ssl_check_hostname",
];

/// TLS settings: those of a URL's query, or a config's merged over them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TlsSettings {
    /// A PEM file of the CAs to trust instead of the system's.
    pub(crate) ca: Option<PathBuf>,
    /// A PEM client certificate (chain) and its PEM private key.
    pub(crate) client_cert: Option<(PathBuf, PathBuf)>,
    /// How the server's certificate is checked; `None`: not said.
    pub(crate) verify: Option<TlsVerify>,
}

impl TlsSettings {
    /// Whether anything is set.
    pub(crate) fn is_set(&self) -> bool {
        *self != TlsSettings::default()
    }

    /// These settings, each one not set taken from `fallback`.
    pub(crate) fn or(self, fallback: TlsSettings) -> TlsSettings {
        TlsSettings {
            ca: self.ca.or(fallback.ca),
            client_cert: self.client_cert.or(fallback.client_cert),
            verify: self.verify.or(fallback.verify),
        }
    }
}

/// Splits redis-py's TLS parameters off `url`: the URL for the redis crate, and the
/// settings they give. Errors (without the URL) say which parameter is wrong.
pub(crate) fn split_url(url: &str) -> Result<(String, TlsSettings), String> {
    let Some(mut parsed) = redis::parse_redis_url(url) else {
        // Not a URL the redis crate reads: it gives the error.
        return Ok((url.to_owned(), TlsSettings::default()));
    };
    if !parsed
        .query_pairs()
        .any(|(name, _)| PARAMS.contains(&name.as_ref()))
    {
        return Ok((url.to_owned(), TlsSettings::default()));
    }
    let mut settings = TlsSettings::default();
    let (mut certfile, mut keyfile) = (None, None);
    let mut kept = Vec::new();
    for (name, value) in parsed.query_pairs() {
        let value = value.into_owned();
        match name.as_ref() {
            "ssl_ca_certs" => settings.ca = Some(PathBuf::from(value)),
            "ssl_certfile" => certfile = Some(PathBuf::from(value)),
            "ssl_keyfile" => keyfile = Some(PathBuf::from(value)),
            "ssl_cert_reqs" => {
                let verify = match value.to_ascii_lowercase().as_str() {
                    "none" | "cert_none" => TlsVerify::Off,
                    "optional" | "cert_optional" | "required" | "cert_required" => TlsVerify::Full,
                    _ => {
                        return Err(format!(
                            "ssl_cert_reqs={value} is not one of none, optional, required"
                        ));
                    }
                };
                // `none` wins over a hostname setting, as in redis-py.
                settings.verify = Some(match settings.verify {
                    Some(TlsVerify::SkipHostname) if verify == TlsVerify::Full => {
                        TlsVerify::SkipHostname
                    }
                    _ => verify,
                });
            }
            "ssl_check_hostname" => {
                let check = match value.to_ascii_lowercase().as_str() {
                    "true" | "1" | "yes" | "y" | "t" => true,
                    "false" | "0" | "no" | "n" | "f" => false,
                    _ => {
                        return Err(format!("ssl_check_hostname={value} is not true or false"));
                    }
                };
                if !check && settings.verify != Some(TlsVerify::Off) {
                    settings.verify = Some(TlsVerify::SkipHostname);
                }
            }
            _ => kept.push((name.into_owned(), value)),
        }
    }
    settings.client_cert = match (certfile, keyfile) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        _ => return Err("ssl_certfile and ssl_keyfile go together".into()),
    };
    if kept.is_empty() {
        parsed.set_query(None);
    } else {
        parsed.query_pairs_mut().clear().extend_pairs(kept);
    }
    Ok((parsed.into(), settings))
}

/// A TLS client for `url` (a `rediss://` or `valkeys://` URL without redis-py's parameters)
/// with `settings`, its files read now.
pub(crate) fn client(url: &str, settings: &TlsSettings) -> Result<redis::Client, String> {
    install_ring();
    let mut info = url.into_connection_info().map_err(|e| e.to_string())?;
    if settings.verify == Some(TlsVerify::Off) {
        let mut addr = info.addr().clone();
        if let ConnectionAddr::TcpTls { insecure, .. } = &mut addr {
            *insecure = true;
        }
        info = info.set_addr(addr);
    }
    let client =
        redis::Client::build_with_tls(info, certificates(settings)?).map_err(|e| e.to_string())?;
    if settings.verify != Some(TlsVerify::SkipHostname) {
        return Ok(client);
    }
    let info = client.get_connection_info().clone();
    let mut addr = info.addr().clone();
    addr.set_danger_accept_invalid_hostnames(true);
    redis::Client::open(info.set_addr(addr)).map_err(|e| e.to_string())
}

/// `builder` set up to reach every node of a cluster with `settings`.
pub(crate) fn cluster(
    builder: ClusterClientBuilder,
    settings: &TlsSettings,
) -> Result<ClusterClientBuilder, String> {
    install_ring();
    let builder = match settings.verify {
        Some(TlsVerify::Off) => builder.tls(TlsMode::Insecure),
        Some(TlsVerify::SkipHostname) => builder.danger_accept_invalid_hostnames(true),
        _ => builder,
    };
    Ok(builder.certs(certificates(settings)?))
}

/// The certificates `settings` name, read from their files.
fn certificates(settings: &TlsSettings) -> Result<TlsCertificates, String> {
    let root_cert = settings
        .ca
        .as_deref()
        .map(|ca| read(ca, "CA"))
        .transpose()?;
    let client_tls = match &settings.client_cert {
        Some((cert, key)) => Some(ClientTlsConfig {
            client_cert: read(cert, "client certificate")?,
            client_key: read(key, "client key")?,
        }),
        None => None,
    };
    Ok(TlsCertificates {
        client_tls,
        root_cert,
    })
}

/// The contents of the PEM file `path` holding `what`.
fn read(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path)
        .map_err(|e| format!("cannot read the TLS {what} file {}: {e}", path.display()))
}

/// Makes ring the process' rustls provider unless the application chose one: the redis
/// crate builds its TLS configs with the process default.
fn install_ring() {
    // An error means a provider is installed already, which then serves.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_py_parameters_are_taken_off_the_url() -> Result<(), String> {
        let (url, tls) = split_url(
            "rediss://:pw@localhost:6380/2?ssl_ca_certs=%2Ftmp%2Fca.pem&protocol=resp3&\
             ssl_certfile=c.pem&ssl_keyfile=c.key&ssl_cert_reqs=required",
        )?;
        assert_eq!(url, "rediss://:pw@localhost:6380/2?protocol=resp3");
        assert_eq!(tls.ca.as_deref(), Some(Path::new("/tmp/ca.pem")));
        assert_eq!(
            tls.client_cert,
            Some((PathBuf::from("c.pem"), PathBuf::from("c.key")))
        );
        assert_eq!(tls.verify, Some(TlsVerify::Full));

        let (url, tls) = split_url("rediss://h/?ssl_check_hostname=false")?;
        assert_eq!(url, "rediss://h/");
        assert_eq!(tls.verify, Some(TlsVerify::SkipHostname));
        let (_, tls) = split_url("rediss://h/?ssl_check_hostname=false&ssl_cert_reqs=none")?;
        assert_eq!(tls.verify, Some(TlsVerify::Off));
        let (_, tls) = split_url("rediss://h/?ssl_cert_reqs=none&ssl_check_hostname=false")?;
        assert_eq!(tls.verify, Some(TlsVerify::Off));

        let plain = "redis://h:1/0?protocol=resp3";
        assert_eq!(
            split_url(plain)?,
            (plain.to_owned(), TlsSettings::default())
        );
        Ok(())
    }

    #[test]
    fn bad_parameters_are_named() {
        for (url, says) in [
            ("rediss://h/?ssl_cert_reqs=maybe", "ssl_cert_reqs=maybe"),
            (
                "rediss://h/?ssl_check_hostname=perhaps",
                "ssl_check_hostname",
            ),
            ("rediss://h/?ssl_certfile=c.pem", "go together"),
        ] {
            let why = split_url(url).expect_err(url);
            assert!(why.contains(says), "{url}: {why}");
        }
    }
}
