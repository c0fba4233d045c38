//! `waypoint demo` end to end: the real binary on temporary databases of every backend.

use std::path::Path;
use std::process::{Command, Output};

use waypoint_test_kit::{database_url, fresh_name, postgres_url, redis_url};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Runs `waypoint ARGS` in folder `dir`.
fn waypoint(args: &[&str], dir: &Path) -> std::io::Result<Output> {
    Command::new(env!("CARGO_BIN_EXE_waypoint"))
        .args(args)
        .current_dir(dir)
        .output()
}

/// The part of `text` from `start` up to `end` (or its end), failing if `start` is missing.
fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let Some(from) = text.find(start) else {
        panic!("`{start}` is not in the output:\n{text}");
    };
    let rest = &text[from..];
    match rest[start.len()..].find(end) {
        Some(to) => &rest[..start.len() + to],
        None => rest,
    }
}

/// Asserts the demo succeeded and told its three stories; returns its output.
fn assert_story(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the demo failed:\n{stdout}\n{stderr}");

    // Memory: Alice's fact is recalled on her second thread, and Bob does not see it.
    let second = between(&stdout, "-alice-2 (user alice, a new thread", "-bob-1");
    assert!(second.contains("agent  You told me: \"I love hiking in the Alps\"."));
    assert!(second.contains("I love hiking in the Alps"), "{second}");
    let bob = between(&stdout, "-bob-1 (user bob)", "2. ");
    assert!(
        bob.contains("agent  I don't know anything about you yet."),
        "{bob}"
    );
    assert!(bob.contains("holds 0 memories"), "{bob}");

    // The interrupt, what it asks, and its resumption.
    let approval = between(&stdout, "2. A human approves the booking", "3. Time travel");
    assert!(
        approval.contains("paused, waiting for a human:"),
        "{approval}"
    );
    assert!(approval.contains("next       book"), "{approval}");
    assert!(approval.contains("interrupt  "), "{approval}");
    assert!(approval.contains("\"Approve this booking?\""), "{approval}");
    assert!(approval.contains("Command::resume({\"action\":\"edit\",\"args\":{\"nights\":2}})"));
    assert!(approval.contains("agent  Done: booked 2 nights at Refuge du Gouter (Chamonix)."));

    // Time travel: the history, a replay, and a fork whose outcome differs.
    let travel = between(&stdout, "3. Time travel", "Everything above");
    let history = between(travel, "newest first:", "replay from");
    assert!(history.contains("step  source  next"), "{history}");
    for row in ["input", "loop", "__start__", "remember", "book"] {
        assert!(
            history.contains(row),
            "no `{row}` in the history:\n{history}"
        );
    }
    let replay = between(travel, "replay from step", "fork:");
    assert!(replay.contains("agent  Done: booked 2 nights at Refuge du Gouter"));
    let fork = between(travel, "fork: update_state", "two branches");
    assert!(fork.contains("now    You told me: \"I love hiking in the Dolomites\"."));
    assert!(
        fork.contains("Command::resume({\"action\":\"approve\"})"),
        "{fork}"
    );
    assert!(fork.contains("agent  Done: booked 1 night at Rifugio Lagazuoi (Cortina)."));
    let branches = between(travel, "two branches", "now holds");
    let line = |name: &str| {
        branches
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(line("original").contains("Refuge du Gouter"), "{branches}");
    assert!(line("fork").contains("Rifugio Lagazuoi"), "{branches}");
    stdout
}

/// The run id the demo's first line names.
fn run_id(stdout: &str) -> String {
    between(stdout, "(run ", ")")["(run ".len()..].to_owned()
}

/// `text` with ids replaced: the run id, then every run of 32 or more hex digits and dashes.
fn without_ids(text: &str) -> String {
    let text = text.replace(&run_id(text), "RUN");
    let mut out = String::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if word.len() >= 32 {
            out.push_str("ID");
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_ascii_hexdigit() || c == '-' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// Asserts `waypoint ARGS` fails with exit code 1 and one error line, without a panic.
fn assert_one_line_error(args: &[&str]) -> TestResult {
    let dir = tempfile::tempdir()?;
    let out = waypoint(args, dir.path())?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    assert!(
        stderr.starts_with("waypoint: error: "),
        "{args:?}: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    Ok(())
}

#[test]
fn the_demo_tells_its_story_on_a_sqlite_file() -> TestResult {
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite:{}", dir.path().join("demo.db").display());
    let stdout = assert_story(&waypoint(&["demo", "--url", &url], dir.path())?);
    assert!(stdout.contains(&format!("waypoint threads list --url {url}")));
    Ok(())
}

#[test]
fn running_the_demo_again_on_the_same_file_tells_the_same_story() -> TestResult {
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite:{}", dir.path().join("demo.db").display());
    let first = assert_story(&waypoint(&["demo", "--url", &url], dir.path())?);
    let second = assert_story(&waypoint(&["demo", "--url", &url], dir.path())?);
    assert_ne!(
        run_id(&first),
        run_id(&second),
        "each run has its own threads"
    );
    assert_eq!(without_ids(&first), without_ids(&second));
    Ok(())
}

#[test]
fn the_demo_defaults_to_a_file_in_the_current_folder() -> TestResult {
    let dir = tempfile::tempdir()?;
    let stdout = assert_story(&waypoint(&["demo"], dir.path())?);
    assert!(dir.path().join("waypoint-demo.db").is_file());
    assert!(stdout.contains("waypoint threads list --url sqlite:waypoint-demo.db"));
    assert!(stdout.contains("waypoint store search demo."), "{stdout}");
    Ok(())
}

#[test]
fn the_demo_runs_in_memory() -> TestResult {
    let dir = tempfile::tempdir()?;
    let stdout = assert_story(&waypoint(&["demo", "--url", "memory:"], dir.path())?);
    assert!(stdout.contains("Nothing was kept"));
    Ok(())
}

/// With the local model (feature `minilm`), the demo's memory is found by meaning, and the
/// store search command embeds its query with the same model.
#[cfg(feature = "minilm")]
#[test]
fn the_demo_and_store_search_use_the_local_model() -> TestResult {
    let Some(model) = waypoint_test_kit::minilm_dir() else {
        return Ok(());
    };
    let dir = tempfile::tempdir()?;
    let embed = format!("minilm:{}", model.display());
    let out = waypoint(
        &["demo", "--url", "sqlite:demo.db", "--embed", &embed],
        dir.path(),
    )?;
    let stdout = assert_story(&out);
    assert!(stdout.contains("embedder minilm"), "{stdout}");

    // The kept memories, searched by a question that shares no word with the fact.
    let ns = between(&stdout, "the store now holds, under ", ":");
    let ns = ns.trim_start_matches("the store now holds, under ").trim();
    let search = |query: &str| {
        waypoint(
            &[
                "store",
                "search",
                ns,
                query,
                "--embed",
                &embed,
                "--url",
                "sqlite:demo.db",
                "--json",
            ],
            dir.path(),
        )
    };
    let out = search("which mountains does she enjoy walking in?")?;
    let found: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(
        found["items"][0]["value"]["text"],
        serde_json::json!("I love hiking in the Alps"),
        "{found}"
    );
    let bad = waypoint(
        &[
            "store",
            "search",
            ns,
            "x",
            "--embed",
            "minilm:/nonexistent",
            "--url",
            "sqlite:demo.db",
        ],
        dir.path(),
    )?;
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("/nonexistent"));
    Ok(())
}

#[test]
fn the_demo_runs_on_postgres() -> TestResult {
    let Some(server) = postgres_url() else {
        return Ok(());
    };
    // A fresh database, so the demo also creates its tables from nothing.
    let name = fresh_name("demo");
    let runtime = tokio::runtime::Runtime::new()?;
    let admin = runtime.block_on(waypoint_runtime::PostgresSaver::from_url(&server))?;
    runtime.block_on(sqlx::query(&format!("CREATE DATABASE {name}")).execute(admin.pool()))?;
    let dir = tempfile::tempdir()?;
    let out = waypoint(
        &["demo", "--url", &database_url(&server, &name)],
        dir.path(),
    );
    runtime.block_on(
        sqlx::query(&format!("DROP DATABASE {name} WITH (FORCE)")).execute(admin.pool()),
    )?;
    assert_story(&out?);
    Ok(())
}

#[test]
fn the_demo_runs_on_redis() -> TestResult {
    let Some(server) = redis_url() else {
        return Ok(());
    };
    // The run id in every thread id and namespace keeps this run apart from others.
    let dir = tempfile::tempdir()?;
    assert_story(&waypoint(&["demo", "--url", &server], dir.path())?);
    Ok(())
}

/// The demo through each production connection the test script starts: TLS with full
/// verification (PostgreSQL, and Redis with a client certificate), PgBouncer in transaction
/// mode, and a Redis Cluster; the URLs are what a user types, nothing else configured.
#[test]
fn the_demo_runs_over_tls_poolers_and_a_cluster() -> TestResult {
    let (Some(tls), Some(postgres), Some(redis), Some(bouncer), Some(cluster)) = (
        waypoint_test_kit::tls(),
        waypoint_test_kit::postgres_tls(),
        waypoint_test_kit::redis_tls(),
        waypoint_test_kit::pgbouncer_url(),
        waypoint_test_kit::redis_cluster_url(),
    ) else {
        return Ok(());
    };
    let (cert, key) = tls.client();
    let urls = [
        format!("{postgres}?sslmode=verify-full&sslrootcert={}", tls.ca()),
        format!(
            "{redis}?ssl_ca_certs={}&ssl_certfile={cert}&ssl_keyfile={key}",
            tls.ca()
        ),
        format!("{bouncer}?transaction_pooler=true"),
        cluster,
    ];
    for url in &urls {
        let dir = tempfile::tempdir()?;
        assert_story(&waypoint(&["demo", "--url", url], dir.path())?);
    }
    // Without the CA the TLS servers' certificates are refused, in one line that says why.
    let out = waypoint(
        &["demo", "--url", &format!("{postgres}?sslmode=verify-full")],
        Path::new("."),
    )?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("UnknownIssuer"),
        "{stderr}"
    );
    Ok(())
}

#[test]
fn an_unknown_url_is_a_one_line_error() -> TestResult {
    assert_one_line_error(&["demo", "--url", "mysql://x"])
}

#[test]
fn unreachable_servers_are_one_line_errors() -> TestResult {
    assert_one_line_error(&["demo", "--url", "postgres://127.0.0.1:1/x"])?;
    assert_one_line_error(&["demo", "--url", "redis://127.0.0.1:1/"])
}
