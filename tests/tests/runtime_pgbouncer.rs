//! The runtime suite on the postgres checkpointer behind PgBouncer in transaction pooling mode
//! (`WAYPOINT_TEST_PGBOUNCER_URL`).

waypoint_tests::runtime_suite!(async {
    match waypoint_test_kit::pgbouncer_url() {
        Some(url) => {
            waypoint_tests::savers::postgres_at(format!("{url}?transaction_pooler=true")).await
        }
        None => Ok(None),
    }
});
