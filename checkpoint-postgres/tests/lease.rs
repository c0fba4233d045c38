//! Leases across savers sharing one schema (separate pools: separate sessions, as separate
//! processes would have): each excludes the others, of simultaneous claims exactly one wins,
//! an unrenewed lease expires by the server's clock, and the table is Waypoint's own.

mod common;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use waypoint_checkpoint::{CheckpointSaver, Error, Result};
use waypoint_checkpoint_postgres::{PostgresConfig, PostgresSaver};

const LONG: Duration = Duration::from_secs(60);

fn is_conflict<T>(r: &Result<T>) -> bool {
    matches!(r, Err(Error::Conflict(_)))
}

/// `n` savers with their own pools on one fresh, set-up schema; `None` without a server.
async fn savers(n: usize, prepared: bool) -> Result<Option<(String, Vec<Arc<PostgresSaver>>)>> {
    let Some(url) = waypoint_test_kit::postgres_url() else {
        return Ok(None);
    };
    let schema = common::fresh_schema();
    let mut out = Vec::new();
    for _ in 0..n {
        let config = PostgresConfig::new(&url)
            .schema(&schema)
            .max_connections(4)
            .prepared_statements(prepared);
        out.push(Arc::new(PostgresSaver::connect(config).await?));
    }
    out[0].setup().await?;
    Ok(Some((schema, out)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_savers_on_one_schema_exclude_each_other() -> Result<()> {
    for prepared in [true, false] {
        let Some((_, s)) = savers(2, prepared).await? else {
            return Ok(());
        };
        let (a, b) = (&s[0], &s[1]);
        let held = a.acquire_lease("t", LONG).await?;
        assert!(is_conflict(&b.acquire_lease("t", LONG).await));
        b.acquire_lease("other", LONG).await?;
        a.release_lease(&held).await?;
        let by_b = b.acquire_lease("t", Duration::from_millis(200)).await?;
        assert!(is_conflict(&a.acquire_lease("t", LONG).await));
        // B stops renewing: A takes over once the lease lapses, and B has lost it for good.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let by_a = a.acquire_lease("t", LONG).await?;
        assert!(is_conflict(&b.renew_lease(&by_b, LONG).await));
        b.release_lease(&by_b).await?;
        assert!(is_conflict(&b.acquire_lease("t", LONG).await));
        let renewed = a.renew_lease(&by_a, LONG).await?;
        assert!(renewed.expires_at >= by_a.expires_at);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claims_from_four_savers_one_wins() -> Result<()> {
    let Some((_, s)) = savers(4, true).await? else {
        return Ok(());
    };
    for round in 0..20 {
        let thread = format!("race-{round}");
        let mut claims = Vec::new();
        for saver in &s {
            for _ in 0..4 {
                let (saver, thread) = (saver.clone(), thread.clone());
                claims.push(tokio::spawn(async move {
                    saver.acquire_lease(&thread, LONG).await
                }));
            }
        }
        let results: Vec<Result<_>> = futures::future::join_all(claims)
            .await
            .into_iter()
            .map(|joined| joined.expect("task"))
            .collect();
        let won = results.iter().filter(|r| r.is_ok()).count();
        let lost = results.iter().filter(|r| is_conflict(r)).count();
        assert_eq!((won, lost), (1, 15), "round {round}: {results:?}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_is_the_servers_and_the_table_is_waypoints() -> Result<()> {
    let Some((schema, s)) = savers(1, true).await? else {
        return Ok(());
    };
    let saver = &s[0];
    let before = SystemTime::now();
    let lease = saver.acquire_lease("t", LONG).await?;
    // The test server runs on this machine, so its clock and ours agree closely.
    let slack = Duration::from_secs(5);
    assert!(lease.expires_at + slack >= before + LONG);
    assert!(lease.expires_at <= SystemTime::now() + LONG + slack);
    let pool = saver.pool();
    let (token, live): (String, bool) = sqlx::query_as(
        "SELECT token, expires_at > now() FROM waypoint_thread_leases WHERE thread_id = 't'",
    )
    .fetch_one(pool)
    .await
    .expect("lease row");
    assert_eq!((token, live), (lease.token.clone(), true));
    // A lease row that has lapsed by the server's clock is taken over, whatever ours says.
    sqlx::query(
        "UPDATE waypoint_thread_leases SET expires_at = now() - interval '1 second'
         WHERE thread_id = 't'",
    )
    .execute(pool)
    .await
    .expect("expire");
    let next = saver.acquire_lease("t", LONG).await?;
    assert!(is_conflict(&saver.renew_lease(&lease, LONG).await));
    saver.release_lease(&next).await?;
    // LangGraph's migrations table is untouched: the lease table is a Waypoint migration.
    let langgraph: Vec<i32> = sqlx::query_scalar("SELECT v FROM checkpoint_migrations ORDER BY v")
        .fetch_all(pool)
        .await
        .expect("versions");
    assert_eq!(
        langgraph,
        (0..=waypoint_checkpoint_postgres::LANGGRAPH_SCHEMA_VERSION).collect::<Vec<_>>()
    );
    let table_schema: String = sqlx::query_scalar(
        "SELECT table_schema::text FROM information_schema.tables
         WHERE table_name = 'waypoint_thread_leases'
         AND table_schema = $1",
    )
    .bind(&schema)
    .fetch_one(pool)
    .await
    .expect("table in the saver's schema");
    assert_eq!(table_schema, schema);
    // setup() again is a no-op.
    saver.setup().await?;
    Ok(())
}

/// A server restart breaks the pooled connection: each lease operation is retried once on a
/// fresh one, and the lease survives (it is a table row, not a session lock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_survive_a_server_restart() -> Result<()> {
    let Some(faults) = waypoint_test_kit::postgres_faults() else {
        return Ok(());
    };
    let saver = PostgresSaver::connect(
        PostgresConfig::new(faults.url())
            .schema(common::fresh_schema())
            .max_connections(1)
            .timeout(Duration::from_secs(5)),
    )
    .await?;
    saver.setup().await?;
    let held = saver.acquire_lease("held", LONG).await?;
    let restart = || {
        faults.ctl("stop");
        faults.ctl("start");
    };
    tokio::task::block_in_place(restart);
    let renewed = saver.renew_lease(&held, LONG).await?;
    assert_eq!(renewed.token, held.token);
    tokio::task::block_in_place(restart);
    let fresh = saver.acquire_lease("fresh", LONG).await?;
    assert!(is_conflict(&saver.acquire_lease("held", LONG).await));
    tokio::task::block_in_place(restart);
    saver.release_lease(&fresh).await?;
    saver.acquire_lease("fresh", LONG).await?;
    Ok(())
}
