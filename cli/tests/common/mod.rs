//! What the end-to-end tests share: the test servers' URLs.

/// The server URL in `var`; `None` (the test passes without that server) unless
/// `WAYPOINT_REQUIRE_BACKENDS=1`, which makes a missing server a failure.
pub(crate) fn url(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("WAYPOINT_REQUIRE_BACKENDS").as_deref() == Ok("1") => {
            panic!("{var} is not set but WAYPOINT_REQUIRE_BACKENDS=1: run scripts/test.sh")
        }
        _ => {
            eprintln!("skipped: {var} is not set (scripts/test.sh starts a server)");
            None
        }
    }
}
