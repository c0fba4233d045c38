//! Redis over TLS (`WAYPOINT_TEST_REDIS_TLS_URL`: TLS only, a client certificate signed by
//! the test CA required, a server certificate for `localhost` only): the saver and the store
//! work with the CA and a client certificate, set by builder methods or by redis-py's URL
//! parameters; every way of getting it wrong fails within the connect timeout with an error
//! that says what is wrong; and the checkpointer conformance suite passes over TLS.

mod common;

use std::time::{Duration, Instant};

use serde_json::json;
use waypoint_checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver, CheckpointSource, Error,
    Result,
};
use waypoint_checkpoint_redis::{RedisConfig, RedisSaver, TlsVerify};

/// The TLS server's URL and a config for it with the test CA and client certificate, on a
/// fresh prefix; `None` without the server.
fn tls_config() -> Option<(String, RedisConfig)> {
    let url = waypoint_test_kit::redis_tls()?;
    let tls = waypoint_test_kit::tls()?;
    let (cert, key) = tls.client();
    let config = RedisConfig::new(&url)
        .prefix(common::fresh_prefix())
        .tls_ca(tls.ca())
        .tls_client_cert(cert, key);
    Some((url, config))
}

/// The error connecting with `config` gives, checked to come within its connect timeout
/// and to be a backend error naming the connection.
async fn refusal(config: RedisConfig) -> String {
    let limit = config.timeout + Duration::from_millis(500);
    let start = Instant::now();
    let err = RedisSaver::connect(config)
        .await
        .expect_err("the connection must be refused");
    assert!(start.elapsed() < limit, "took {:?}", start.elapsed());
    assert!(matches!(err, Error::Backend { .. }), "{err:?}");
    let message = format!("{err}: {}", source(&err));
    assert!(message.contains("`connect`"), "{message}");
    message
}

/// The error's source, shown.
fn source(err: &Error) -> String {
    std::error::Error::source(err).map_or_else(String::new, |s| s.to_string())
}

#[tokio::test]
async fn a_saver_and_a_store_work_over_tls_with_a_client_certificate() -> Result<()> {
    let Some((_, config)) = tls_config() else {
        return Ok(());
    };
    let saver = RedisSaver::connect(config).await?;
    assert!(!saver.connection().is_cluster());
    let stored = saver
        .put(
            &CheckpointConfig::new("tls"),
            Checkpoint::new(0),
            CheckpointMetadata::new(CheckpointSource::Input, -1),
            Default::default(),
        )
        .await?;
    let tuple = saver
        .get_tuple(&CheckpointConfig::new("tls"))
        .await?
        .expect("stored over TLS");
    assert_eq!(Some(tuple.checkpoint.id), stored.checkpoint_id);

    #[cfg(feature = "store")]
    {
        use waypoint_store::{StoreConfig, StoreExt};
        let store = saver
            .store(StoreConfig::new())
            .await
            .map_err(|e| Error::InvalidConfig(e.to_string()))?;
        let check = async {
            store.put(["tls"], "k", json!({"over": "tls"})).await?;
            store.get(["tls"], "k").await
        };
        let item = check
            .await
            .map_err(|e| Error::InvalidConfig(e.to_string()))?
            .expect("stored over TLS");
        assert_eq!(json!(*item.value), json!({"over": "tls"}));
    }
    Ok(())
}

#[tokio::test]
async fn redis_py_url_parameters_set_the_ca_and_client_certificate() -> Result<()> {
    let (Some(url), Some(tls)) = (waypoint_test_kit::redis_tls(), waypoint_test_kit::tls()) else {
        return Ok(());
    };
    let (cert, key) = tls.client();
    let query = format!(
        "ssl_ca_certs={}&ssl_certfile={cert}&ssl_keyfile={key}&ssl_cert_reqs=required",
        tls.ca()
    );
    let saver = RedisSaver::from_url(&format!("{url}?{query}")).await?;
    saver.setup().await?;

    // 127.0.0.1 is not a name of the server's certificate: accepted only when told to skip
    // the host-name check (the CA is still checked) or to skip checking entirely.
    let by_ip = url.replace("localhost", "127.0.0.1");
    RedisSaver::from_url(&format!("{by_ip}?{query}&ssl_check_hostname=false"))
        .await?
        .setup()
        .await?;
    let unchecked = format!("{by_ip}?ssl_certfile={cert}&ssl_keyfile={key}&ssl_cert_reqs=none");
    RedisSaver::from_url(&unchecked).await?.setup().await?;
    let wrong_ca = RedisConfig::new(&by_ip)
        .tls_ca(tls.other_ca())
        .tls_client_cert(&cert, &key)
        .tls_verify(TlsVerify::SkipHostname);
    assert!(
        refusal(wrong_ca)
            .await
            .contains("not signed by a trusted CA")
    );
    Ok(())
}

#[tokio::test]
async fn a_certificate_for_another_host_name_is_refused_saying_so() {
    let Some((url, config)) = tls_config() else {
        return;
    };
    let by_ip = RedisConfig {
        url: url.replace("localhost", "127.0.0.1"),
        ..config
    };
    let message = refusal(by_ip).await;
    assert!(
        message.contains("does not name the URL's host") && message.contains("127.0.0.1"),
        "{message}"
    );
}

#[tokio::test]
async fn a_server_certificate_of_an_unknown_ca_is_refused_saying_so() {
    let (Some((_, config)), Some(tls)) = (tls_config(), waypoint_test_kit::tls()) else {
        return;
    };
    for config in [
        config.clone().tls_ca(tls.other_ca()),
        // The system's CAs do not include the test CA either.
        RedisConfig {
            tls_ca: None,
            ..config
        },
    ] {
        let message = refusal(config).await;
        assert!(
            message.contains("not signed by a trusted CA") && message.contains("ssl_ca_certs"),
            "{message}"
        );
    }
}

#[tokio::test]
async fn no_client_certificate_is_refused_saying_one_is_required() {
    let Some((_, config)) = tls_config() else {
        return;
    };
    let message = refusal(RedisConfig {
        tls_client_cert: None,
        ..config
    })
    .await;
    assert!(
        message.contains("client certificate") && message.contains("ssl_certfile"),
        "{message}"
    );
}

#[tokio::test]
async fn plaintext_to_the_tls_port_fails_fast_suggesting_rediss() {
    let Some(url) = waypoint_test_kit::redis_tls() else {
        return;
    };
    let plain = RedisConfig::new(url.replace("rediss://", "redis://"))
        .connect_timeout(Duration::from_secs(1))
        .timeout(Duration::from_secs(2));
    let message = refusal(plain).await;
    assert!(message.contains("rediss://"), "{message}");
}

#[tokio::test]
async fn tls_settings_are_checked_before_connecting() {
    let (Some((_, config)), Some(tls)) = (tls_config(), waypoint_test_kit::tls()) else {
        return;
    };
    // A missing file is named; a plaintext URL with TLS settings is refused.
    let missing = config.clone().tls_ca("/nonexistent/ca.pem");
    match RedisSaver::connect(missing).await {
        Err(Error::InvalidConfig(why)) => assert!(why.contains("/nonexistent/ca.pem"), "{why}"),
        other => panic!("{:?}", other.err()),
    }
    let plain = RedisConfig::new("redis://localhost:6379/").tls_ca(tls.ca());
    match RedisSaver::connect(plain).await {
        Err(Error::InvalidConfig(why)) => assert!(why.contains("rediss://"), "{why}"),
        other => panic!("{:?}", other.err()),
    }
}

mod conformance_over_tls {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(optional async {
        match tls_config() {
            Some((_, config)) => RedisSaver::connect(config).await.map(Some),
            None => Ok(None),
        }
    });
}
