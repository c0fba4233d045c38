//! End to end: no password of a URL ever shows in what the `waypoint` binary prints (stdout,
//! stderr, the bench report), whichever backend, subcommand or failure, while its errors still
//! say which host and what went wrong.

use std::path::Path;
use std::process::{Command, Output};

use waypoint_test_kit::{postgres_url, redis_url};

/// The password every URL here carries.
const SECRET: &str = "hunter2";

/// How a URL reaches the binary.
#[derive(Clone, Copy, Debug)]
enum Via {
    /// `--url URL`.
    Flag,
    /// `WAYPOINT_URL=URL` (`demo` takes no environment variable: given as `--url`).
    Env,
}

/// Runs `waypoint ARGS` with `url` given `via` the flag or the environment, in `dir`.
fn waypoint(args: &[&str], url: &str, via: Via, dir: &Path) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_waypoint"));
    command
        .current_dir(dir)
        .args(args)
        .env_remove("WAYPOINT_URL");
    match via {
        Via::Env if args[0] != "demo" => command.env("WAYPOINT_URL", url),
        _ => command.args(["--url", url]),
    };
    command.output().expect("the binary runs")
}

/// What the run printed, stdout then stderr.
fn printed(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Fails if `text` holds the secret in any form a URL may carry it.
fn assert_no_secret(text: &str, what: &str) {
    for form in [SECRET, "hun/ter2", "ter2"] {
        assert!(!text.contains(form), "{what}: `{form}` shown in:\n{text}");
    }
    assert!(!text.contains("panicked"), "{what}: {text}");
}

/// Expects exit code 1 and one `waypoint: error:` line holding every one of `needles`, with
/// the secret nowhere in stdout or stderr.
fn assert_fails(out: &Output, what: &str, needles: &[&str]) {
    let all = printed(out);
    assert_no_secret(&all, what);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{what}: {all}");
    assert_eq!(stderr.lines().count(), 1, "{what}: {stderr}");
    assert!(stderr.starts_with("waypoint: error: "), "{what}: {stderr}");
    for needle in needles {
        assert!(stderr.contains(needle), "{what}: no `{needle}` in {stderr}");
    }
}

/// The subcommands tried on every URL; `threads show` of a thread no test writes.
const COMMANDS: [&[&str]; 4] = [
    &["threads", "list"],
    &["store", "ls"],
    &["threads", "show", "no-such-thread"],
    &["threads", "list", "--json"],
];

#[test]
fn unreachable_and_malformed_urls_keep_their_password_out_of_errors() {
    let dir = tempfile::tempdir().expect("temp dir");
    let unreachable = [
        "postgres://u:hunter2@127.0.0.1:1/db",
        "postgresql://u@127.0.0.1:1/db?password=hunter2",
        "postgres://u@127.0.0.1:1/db?sslmode=disable&password=hunter2&application_name=w",
        "redis://:hunter2@127.0.0.1:1/",
        "redis://default:hunter2@127.0.0.1:1/0",
        "rediss://u:hunter2@127.0.0.1:1/",
    ];
    for url in unreachable {
        for via in [Via::Flag, Via::Env] {
            for args in COMMANDS.iter().chain([&["demo"][..]].iter()) {
                let out = waypoint(args, url, via, dir.path());
                let what = format!("{args:?} {url} via {via:?}");
                assert_fails(&out, &what, &["cannot reach 127.0.0.1:1", "refused"]);
            }
        }
    }
    // Refused before any connection: the error says why, without echoing the URL.
    let malformed = [
        (
            "postgres://u:hun/ter2@db.invalid/x",
            "cannot parse the URL `postgres:<unparsable URL>`",
        ),
        (
            "postgres://u:hunter2@[bad/x",
            "cannot parse the URL `postgres:<unparsable URL>`",
        ),
        (
            "redis://:hunter2@127.0.0.1:99999/",
            "cannot parse the URL `redis:<unparsable URL>`",
        ),
        ("mysql://u:hunter2@db/x", "unknown URL `mysql://u:***@db/x`"),
        ("hunter2@nowhere", "unknown URL `<unparsable URL>`"),
        ("u:hunter2@db", "unknown URL `u:<unparsable URL>`"),
        // Nowhere for a secret to hide: the error shows what was typed.
        ("waypoint.db", "unknown URL `waypoint.db`"),
    ];
    for (url, needle) in malformed {
        for args in COMMANDS.iter().chain([&["demo"][..]].iter()) {
            let out = waypoint(args, url, Via::Flag, dir.path());
            assert_fails(&out, &format!("{args:?} {url}"), &[needle]);
        }
    }
    // Nothing was created by the failed demos.
    assert!(std::fs::read_dir(dir.path()).expect("dir").next().is_none());
}

#[test]
fn usage_errors_and_help_hide_the_url() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = "postgres://u:hunter2@127.0.0.1:1/db";
    // A mistyped option next to the URL: clap's own error.
    for args in [
        &["threads", "list", "--bogus"][..],
        &["threads", "lst"],
        &["store", "ls", "a", "b", "c"],
    ] {
        for via in [Via::Flag, Via::Env] {
            let out = waypoint(args, url, via, dir.path());
            let what = format!("{args:?} via {via:?}");
            assert_no_secret(&printed(&out), &what);
            assert_eq!(out.status.code(), Some(2), "{what}: {}", printed(&out));
            assert!(
                String::from_utf8_lossy(&out.stderr).contains("error:"),
                "{what}: {}",
                printed(&out)
            );
        }
    }
    // `--help` names the variable but not its value.
    let out = waypoint(&["threads", "list", "--help"], url, Via::Env, dir.path());
    assert!(out.status.success(), "{}", printed(&out));
    assert_no_secret(&printed(&out), "--help");
    assert!(printed(&out).contains("WAYPOINT_URL"), "{}", printed(&out));
}

/// `url` with the password `SECRET` as its user's password, and the same with it as a
/// `password` query parameter.
fn with_password(url: &str) -> [String; 2] {
    let mut in_userinfo = url::Url::parse(url).expect("a test server URL parses");
    in_userinfo
        .set_password(Some(SECRET))
        .expect("the URL takes a password");
    let mut in_query = url::Url::parse(url).expect("a test server URL parses");
    in_query.query_pairs_mut().append_pair("password", SECRET);
    [in_userinfo.to_string(), in_query.to_string()]
}

/// The host and port of a test server URL, as errors name it.
fn host_port(url: &str) -> String {
    let parsed = url::Url::parse(url).expect("a test server URL parses");
    format!(
        "{}:{}",
        parsed.host_str().unwrap_or_default(),
        parsed.port().unwrap_or_default()
    )
}

#[test]
fn live_postgres_takes_a_password_and_never_shows_it() {
    let Some(server) = postgres_url() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    // The test server trusts loopback, so a bogus password is accepted: the commands work.
    for url in with_password(&server) {
        let demo = waypoint(&["demo"], &url, Via::Flag, dir.path());
        let all = printed(&demo);
        assert_no_secret(&all, &format!("demo {url}"));
        assert!(demo.status.success(), "demo {url}: {all}");
        assert!(all.contains(&format!("{}/", host_port(&server))), "{all}");
        assert!(all.contains("***"), "the URL is shown redacted: {all}");
        for via in [Via::Flag, Via::Env] {
            for args in [
                &["threads", "list"][..],
                &["store", "ls"],
                &["threads", "list", "--json"],
            ] {
                let out = waypoint(args, &url, via, dir.path());
                let what = format!("{args:?} {url} via {via:?}");
                assert_no_secret(&printed(&out), &what);
                assert!(out.status.success(), "{what}: {}", printed(&out));
                assert!(!out.stdout.is_empty(), "{what}: prints the listing");
            }
            let out = waypoint(
                &["threads", "show", "no-such-thread"],
                &url,
                via,
                dir.path(),
            );
            assert_fails(
                &out,
                &format!("show {url}"),
                &["unknown thread `no-such-thread`"],
            );
        }
    }
    // A database that is not there: the server's refusal, without the password.
    let mut missing = url::Url::parse(&server).expect("parses");
    missing.set_path("/no_such_database_w");
    for url in with_password(missing.as_str()) {
        for args in COMMANDS {
            let out = waypoint(args, &url, Via::Flag, dir.path());
            assert_fails(&out, &format!("{args:?} {url}"), &["no_such_database_w"]);
        }
    }
}

#[test]
fn live_redis_refuses_or_takes_a_password_and_never_shows_it() {
    let Some(server) = redis_url() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let host = host_port(&server);
    // The test server has no password: `AUTH hunter2` (no user) is refused...
    let [refused, _] = with_password(&server);
    for via in [Via::Flag, Via::Env] {
        for args in COMMANDS.iter().chain([&["demo"][..]].iter()) {
            let out = waypoint(args, &refused, via, dir.path());
            let what = format!("{args:?} {refused} via {via:?}");
            assert_fails(&out, &what, &[&host, "uthentication"]);
        }
    }
    // ...while the `default` user, which has none, takes any password: the commands work.
    let mut accepted = url::Url::parse(&refused).expect("parses");
    accepted.set_username("default").expect("takes a user");
    let accepted = accepted.to_string();
    let demo = waypoint(&["demo"], &accepted, Via::Flag, dir.path());
    let all = printed(&demo);
    assert_no_secret(&all, &format!("demo {accepted}"));
    assert!(demo.status.success(), "demo {accepted}: {all}");
    assert!(
        all.contains(&format!("redis://default:***@{host}")),
        "{all}"
    );
    for via in [Via::Flag, Via::Env] {
        for args in [
            &["threads", "list"][..],
            &["store", "ls"],
            &["threads", "list", "--json"],
        ] {
            let out = waypoint(args, &accepted, via, dir.path());
            let what = format!("{args:?} {accepted} via {via:?}");
            assert_no_secret(&printed(&out), &what);
            assert!(out.status.success(), "{what}: {}", printed(&out));
        }
        let out = waypoint(
            &["threads", "show", "no-such-thread"],
            &accepted,
            via,
            dir.path(),
        );
        assert_fails(&out, "show", &["unknown thread `no-such-thread`"]);
    }
}

#[test]
fn bench_reports_name_skipped_servers_without_their_password() {
    let out_dir = tempfile::tempdir().expect("temp dir");
    let mut command = Command::new(env!("CARGO_BIN_EXE_waypoint"));
    for kind in ["BENCH", "TEST"] {
        for server in ["POSTGRES", "REDIS"] {
            command.env_remove(format!("WAYPOINT_{kind}_{server}_URL"));
        }
    }
    let out = command
        .args(["bench", "--smoke", "--only", "serde", "--out"])
        .arg(out_dir.path())
        .args(["--postgres", "postgres://u@127.0.0.1:1/db?password=hunter2"])
        .args(["--redis", "redis://:hunter2@127.0.0.1:1/"])
        .output()
        .expect("the binary runs");
    let all = printed(&out);
    assert!(out.status.success(), "{all}");
    assert_no_secret(&all, "bench");
    assert!(
        all.contains(
            "postgres: skipped, cannot open postgres://u@127.0.0.1:1/db?password=***: \
             cannot reach 127.0.0.1:1"
        ),
        "{all}"
    );
    for file in ["REPORT.md", "results.json"] {
        let text = std::fs::read_to_string(out_dir.path().join(file)).expect("written");
        assert_no_secret(&text, file);
        assert!(
            text.contains(
                "redis: skipped, cannot open redis://:***@127.0.0.1:1/: cannot reach 127.0.0.1:1"
            ),
            "{text}"
        );
    }
}
