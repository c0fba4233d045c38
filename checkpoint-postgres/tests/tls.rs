//! TLS against a PostgreSQL server that accepts TLS only (`WAYPOINT_TEST_POSTGRES_TLS_URL`,
//! its CA and client certificates in `WAYPOINT_TEST_TLS_DIR`): full verification with the
//! test CA works for the saver, the store and `waypoint_runtime::connect`; a wrong host name,
//! an unknown CA, plaintext and a missing client certificate are refused with errors that
//! say which, where and during what. The checkpointer conformance suite runs over TLS too.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;
use waypoint_checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource, Result,
    Serde,
};
use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver, SslMode};
use waypoint_store::{StoreConfig, StoreExt};
use waypoint_test_kit::Tls;

/// The TLS server's URL (user `waypoint`, host `localhost`) and the certificates; `None`
/// without them.
fn server() -> Option<(String, Tls)> {
    Some((
        waypoint_test_kit::postgres_tls()?,
        waypoint_test_kit::tls()?,
    ))
}

/// `url` with the query `query` added.
fn with_query(url: &str, query: &str) -> String {
    let joiner = if url.contains('?') { '&' } else { '?' };
    format!("{url}{joiner}{query}")
}

/// `url` verifying the server fully against the test CA.
fn verified(url: &str, tls: &Tls) -> String {
    with_query(
        url,
        &format!("sslmode=verify-full&sslrootcert={}", tls.ca()),
    )
}

/// `url`'s `host:port`.
fn address(url: &str) -> &str {
    let rest = &url[url
        .find('@')
        .map_or(url.find("://").unwrap_or(0) + 3, |at| at + 1)..];
    rest.split(['/', '?']).next().unwrap_or(rest)
}

/// A short timeout, so a refusal that were retried would show.
const TIMEOUT: Duration = Duration::from_secs(3);

/// Opening a saver with `config` fails; its error, shown.
async fn refused(config: PostgresConfig) -> String {
    let start = std::time::Instant::now();
    let err = PostgresSaver::connect(config.timeout(TIMEOUT))
        .await
        .expect_err("the connection is refused");
    assert!(
        start.elapsed() <= TIMEOUT,
        "refused after {:?}",
        start.elapsed()
    );
    assert!(
        matches!(err, waypoint_checkpoint::Error::Backend { .. }),
        "{err:?}"
    );
    eprintln!("refused as expected: {err}");
    err.to_string()
}

/// Whether the session of `saver`'s pool is encrypted.
async fn encrypted(saver: &PostgresSaver) -> bool {
    sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(saver.pool())
        .await
        .expect("pg_stat_ssl")
}

/// A checkpoint with one value, put on `thread` and read back.
async fn roundtrip(saver: &dyn CheckpointSaver, thread: &str) -> Result<()> {
    let serde = Serde::default();
    let version = saver.next_version(None)?;
    let mut checkpoint = Checkpoint::new(0);
    checkpoint
        .channel_values
        .insert("messages".into(), serde.dumps(&json!(["over TLS"]))?);
    checkpoint
        .channel_versions
        .insert("messages".into(), version.clone());
    let stored = saver
        .put(
            &CheckpointConfig::new(thread).with_ns(""),
            checkpoint.clone(),
            CheckpointMetadata::new(CheckpointSource::Input, -1),
            BTreeMap::from([("messages".to_owned(), version)]),
        )
        .await?;
    let read = saver.get_tuple(&stored).await?.expect("the checkpoint");
    assert_eq!(read.checkpoint.id, checkpoint.id);
    let value: serde_json::Value = serde.loads(&read.checkpoint.channel_values["messages"])?;
    assert_eq!(value, json!(["over TLS"]));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_with_the_ca_serves_the_saver_and_the_store() -> Result<()> {
    let Some((url, tls)) = server() else {
        return Ok(());
    };
    let schema = waypoint_test_kit::fresh_name("wp_tls");
    let saver =
        PostgresSaver::connect(PostgresConfig::new(verified(&url, &tls)).schema(&schema)).await?;
    assert!(encrypted(&saver).await);
    roundtrip(&saver, "tls").await?;
    let store = saver.store(StoreConfig::new()).await.expect("store");
    store
        .put(["users", "alice"], "prefs", json!({"theme": "dark"}))
        .await
        .expect("store put");
    let item = store
        .get(["users", "alice"], "prefs")
        .await
        .expect("store get")
        .expect("the item");
    assert_eq!(
        serde_json::Value::Object(std::sync::Arc::unwrap_or_clone(item.value)),
        json!({"theme": "dark"})
    );

    // The same through the builder methods, without URL parameters.
    let built = PostgresSaver::connect(
        PostgresConfig::new(&url)
            .schema(&schema)
            .ssl_mode(SslMode::VerifyFull)
            .ssl_root_cert(tls.ca()),
    )
    .await?;
    assert!(encrypted(&built).await);
    assert!(
        built
            .get_tuple(&CheckpointConfig::new("tls"))
            .await?
            .is_some()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_connect_takes_tls_url_parameters() -> Result<()> {
    let Some((url, tls)) = server() else {
        return Ok(());
    };
    let admin =
        PostgresSaver::connect(PostgresConfig::new(verified(&url, &tls)).auto_setup(false)).await?;
    let database = waypoint_test_kit::fresh_name("wp_tls");
    sqlx::query(&format!("CREATE DATABASE {database}"))
        .execute(admin.pool())
        .await
        .expect("create database");
    let opened = waypoint_runtime::connect(&verified(
        &waypoint_test_kit::database_url(&url, &database),
        &tls,
    ))
    .await
    .expect("connect over TLS");
    roundtrip(opened.checkpointer.as_ref(), "runtime").await?;
    opened
        .store
        .put(["a"], "k", json!({"v": 1}))
        .await
        .expect("store put");
    assert!(opened.store.get(["a"], "k").await.expect("get").is_some());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_name_the_certificate_lacks_is_refused() -> Result<()> {
    let Some((url, tls)) = server() else {
        return Ok(());
    };
    // The certificate names `localhost` only.
    let by_ip = url.replacen("@localhost:", "@127.0.0.1:", 1);
    let shown = refused(PostgresConfig::new(verified(&by_ip, &tls))).await;
    for expected in [address(&by_ip), "setup", "not valid for name", "127.0.0.1"] {
        assert!(shown.contains(expected), "{expected:?} missing: {shown}");
    }
    // verify-ca checks the chain: by the certificate's name it connects. (By another name it
    // is refused like verify-full: sqlx 0.8.6 misses rustls's newer name-mismatch error,
    // launchbadge/sqlx#3793.)
    let ca_only = PostgresSaver::connect(
        PostgresConfig::new(&url)
            .ssl_mode(SslMode::VerifyCa)
            .ssl_root_cert(tls.ca())
            .auto_setup(false),
    )
    .await?;
    assert!(encrypted(&ca_only).await);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_ca_is_refused() {
    let Some((url, tls)) = server() else {
        return;
    };
    for mode in [SslMode::VerifyFull, SslMode::VerifyCa] {
        let shown = refused(
            PostgresConfig::new(&url)
                .ssl_mode(mode)
                .ssl_root_cert(tls.other_ca()),
        )
        .await;
        for expected in [
            address(&url),
            "setup",
            "UnknownIssuer",
            "not signed by a trusted CA",
        ] {
            assert!(
                shown.contains(expected),
                "{mode:?}: {expected:?} missing: {shown}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plaintext_to_a_tls_only_server_is_refused() {
    let Some((url, _)) = server() else {
        return;
    };
    let shown = refused(PostgresConfig::new(with_query(&url, "sslmode=disable"))).await;
    for expected in [
        address(&url),
        "setup",
        "no pg_hba.conf entry",
        "no encryption",
    ] {
        assert!(shown.contains(expected), "{expected:?} missing: {shown}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_logs_in_and_none_is_refused() -> Result<()> {
    let Some((url, tls)) = server() else {
        return Ok(());
    };
    let cert_user = verified(&url.replacen("waypoint@", "waypoint_cert@", 1), &tls);
    let (cert, key) = tls.cert_client();
    let with_cert = with_query(&cert_user, &format!("sslcert={cert}&sslkey={key}"));
    let saver = PostgresSaver::connect(PostgresConfig::new(&with_cert).auto_setup(false)).await?;
    let user: String = sqlx::query_scalar("SELECT current_user::text")
        .fetch_one(saver.pool())
        .await
        .expect("who");
    assert_eq!(user, "waypoint_cert");
    // The builder's names for the same.
    PostgresSaver::connect(
        PostgresConfig::new(&cert_user)
            .ssl_client_cert(cert, key)
            .auto_setup(false),
    )
    .await?;

    let shown = refused(PostgresConfig::new(&cert_user).auto_setup(false)).await;
    for expected in [address(&url), "requires a valid client certificate"] {
        assert!(shown.contains(expected), "{expected:?} missing: {shown}");
    }
    Ok(())
}

/// The checkpointer conformance suite over verified TLS.
mod conformance_over_tls {
    use super::*;

    /// A saver on a fresh schema of the TLS server, verifying it fully.
    async fn saver() -> Result<Option<PostgresSaver>> {
        let Some((url, tls)) = server() else {
            return Ok(None);
        };
        let config = PostgresConfig::new(verified(&url, &tls))
            .schema(waypoint_test_kit::fresh_name("wp_tls"))
            .max_connections(4);
        Ok(Some(PostgresSaver::connect(config).await?))
    }

    waypoint_checkpoint::checkpoint_conformance!(optional saver());
}
