//! `waypoint -v` and `RUST_LOG`: what the libraries log on stderr, and nothing by default.

use std::process::{Command, Output};

use waypoint_test_kit::{fresh_name, postgres_url, with_password};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Runs `waypoint ARGS` (in a fresh temp folder) with `RUST_LOG` set to `rust_log` or unset,
/// and without colours.
fn waypoint(args: &[&str], rust_log: Option<&str>) -> std::io::Result<(Output, String)> {
    let dir = tempfile::tempdir()?;
    let mut command = Command::new(env!("CARGO_BIN_EXE_waypoint"));
    command
        .args(args)
        .current_dir(dir.path())
        .env("NO_COLOR", "1");
    match rust_log {
        Some(filter) => command.env("RUST_LOG", filter),
        None => command.env_remove("RUST_LOG"),
    };
    let out = command.output()?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "waypoint {args:?} failed:\n{stderr}");
    Ok((out, stderr))
}

#[test]
fn nothing_is_logged_without_v() -> TestResult {
    let (_, stderr) = waypoint(&["demo", "--url", "memory:"], None)?;
    assert!(!stderr.contains("invoke"), "{stderr}");
    Ok(())
}

#[test]
fn v_logs_operations_with_durations_and_vv_adds_steps() -> TestResult {
    let (_, info) = waypoint(&["-v", "demo", "--url", "sqlite:demo.db"], None)?;
    assert!(info.contains(" INFO "), "{info}");
    assert!(info.contains("invoke{thread_id="), "{info}");
    assert!(info.contains("get_tuple{backend=\"sqlite\""), "{info}");
    assert!(info.contains("store.search{backend=\"sqlite\""), "{info}");
    assert!(
        info.contains("time.busy="),
        "span closes carry durations: {info}"
    );
    assert!(
        !info.contains("superstep{"),
        "super-steps are debug: {info}"
    );

    let (_, debug) = waypoint(&["demo", "-vv", "--url", "memory:"], None)?;
    assert!(debug.contains("superstep{step="), "{debug}");
    assert!(debug.contains("node{node="), "{debug}");
    Ok(())
}

#[test]
fn rust_log_replaces_the_v_level() -> TestResult {
    let (_, stderr) = waypoint(
        &["-v", "demo", "--url", "memory:"],
        Some("waypoint_runtime=debug"),
    )?;
    assert!(stderr.contains("superstep{step="), "{stderr}");
    assert!(
        !stderr.contains("get_tuple{"),
        "the savers' spans are not selected: {stderr}"
    );
    Ok(())
}

/// A PostgreSQL URL's password never shows, whatever the level (sqlx's own statements stay
/// at warnings unless named): not while the demo sets up its tables and runs, nor while the
/// inspector reads them.
#[test]
fn a_password_never_shows_at_any_level() -> TestResult {
    let Some(server) = postgres_url() else {
        return Ok(());
    };
    let secret = fresh_name("pw");
    let url = with_password(&server, &secret);
    for (args, span) in [
        (&["-vvv", "demo", "--url", &url][..], "invoke{thread_id="),
        (
            &["-vvv", "threads", "list", "--url", &url],
            "list{backend=\"postgres\"",
        ),
    ] {
        let (out, stderr) = waypoint(args, None)?;
        assert!(stderr.contains(span), "{args:?}: {stderr}");
        assert!(!stderr.contains(&secret), "{args:?}: {stderr}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains(&secret));
    }
    Ok(())
}
