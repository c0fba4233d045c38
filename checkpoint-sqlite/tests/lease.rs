//! Leases across savers and processes sharing one SQLite file: each excludes the others, of
//! simultaneous claims exactly one wins, and a killed holder's lease expires.
//!
//! The child processes are this test binary re-run on one `#[ignore]`d entry point, which
//! does nothing unless `WAYPOINT_LEASE_CHILD` tells it what to do.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use waypoint_checkpoint::{CheckpointSaver, Error, Result};
use waypoint_checkpoint_sqlite::SqliteSaver;

const LONG: Duration = Duration::from_secs(60);

fn temp_db() -> PathBuf {
    tempfile::tempdir()
        .expect("temp dir")
        .keep()
        .join("leases.db")
}

fn is_conflict<T>(r: &Result<T>) -> bool {
    matches!(r, Err(Error::Conflict(_)))
}

fn unix_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_savers_on_one_file_exclude_each_other() -> Result<()> {
    let db = temp_db();
    let (a, b) = (
        SqliteSaver::from_path(&db).await?,
        SqliteSaver::from_path(&db).await?,
    );
    let held = a.acquire_lease("t", LONG).await?;
    assert!(is_conflict(&b.acquire_lease("t", LONG).await));
    // Another thread is free on either saver.
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
    a.renew_lease(&by_a, LONG).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claims_from_four_savers_one_wins() -> Result<()> {
    let db = temp_db();
    let mut savers = Vec::new();
    for _ in 0..4 {
        savers.push(Arc::new(SqliteSaver::from_path(&db).await?));
    }
    for round in 0..20 {
        let thread = format!("race-{round}");
        let claims = savers.iter().flat_map(|saver| {
            (0..2).map({
                let thread = thread.clone();
                move |_| {
                    let (saver, thread) = (saver.clone(), thread.clone());
                    tokio::spawn(async move { saver.acquire_lease(&thread, LONG).await })
                }
            })
        });
        let results: Vec<Result<_>> = futures::future::join_all(claims.collect::<Vec<_>>())
            .await
            .into_iter()
            .map(|joined| joined.expect("task"))
            .collect();
        let won = results.iter().filter(|r| r.is_ok()).count();
        let lost = results.iter().filter(|r| is_conflict(r)).count();
        assert_eq!((won, lost), (1, 7), "round {round}: {results:?}");
    }
    Ok(())
}

/// Entry point of the child processes; a no-op unless `WAYPOINT_LEASE_CHILD` is set.
///
/// `hold`: claims the thread for `WAYPOINT_LEASE_TTL_MS`, prints `LEASED` or `CONFLICT`, and
/// (when leased) sleeps until killed. `claim`: waits for the Unix time
/// `WAYPOINT_LEASE_START_MS` so that all children claim at once, claims, prints and exits.
#[test]
#[ignore = "run as a child process by the tests below"]
fn child() {
    let Ok(mode) = std::env::var("WAYPOINT_LEASE_CHILD") else {
        return;
    };
    let path = std::env::var("WAYPOINT_LEASE_DB").expect("WAYPOINT_LEASE_DB");
    let thread = std::env::var("WAYPOINT_LEASE_THREAD").expect("WAYPOINT_LEASE_THREAD");
    let number = |var: &str| -> u64 {
        std::env::var(var)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let ttl = Duration::from_millis(number("WAYPOINT_LEASE_TTL_MS").max(1));
    let start = number("WAYPOINT_LEASE_START_MS");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let saver = SqliteSaver::from_path(&path).await.expect("open");
        if mode == "claim" {
            let wait = start.saturating_sub(unix_millis());
            tokio::time::sleep(Duration::from_millis(wait)).await;
        }
        match saver.acquire_lease(&thread, ttl).await {
            Ok(lease) => println!("LEASED {}", lease.token),
            Err(Error::Conflict(_)) => println!("CONFLICT"),
            Err(e) => panic!("claim failed: {e}"),
        }
        if mode == "hold" {
            tokio::time::sleep(Duration::from_secs(120)).await;
        }
    });
}

fn spawn_child(mode: &str, db: &Path, thread: &str, ttl_ms: u64, start_ms: u64) -> Child {
    Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("WAYPOINT_LEASE_CHILD", mode)
        .env("WAYPOINT_LEASE_DB", db)
        .env("WAYPOINT_LEASE_THREAD", thread)
        .env("WAYPOINT_LEASE_TTL_MS", ttl_ms.to_string())
        .env("WAYPOINT_LEASE_START_MS", start_ms.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child")
}

/// The child's verdict: `Some(true)` leased, `Some(false)` conflict, `None` if it said
/// neither before closing its output. With `drain`, reads to the end of the output, so the
/// child never writes to a closed pipe (which would fail it).
fn verdict(child: &mut Child, drain: bool) -> Option<bool> {
    let stdout = child.stdout.take().expect("piped stdout");
    let mut found = None;
    for line in BufReader::new(stdout)
        .lines()
        .map_while(std::io::Result::ok)
    {
        // The harness's own `test child ... ` may precede the word on the same line.
        if found.is_none() && line.contains("LEASED ") {
            found = Some(true);
        } else if found.is_none() && line.contains("CONFLICT") {
            found = Some(false);
        }
        if found.is_some() && !drain {
            break;
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_of_killed_process_blocks_then_expires() -> Result<()> {
    let db = temp_db();
    let saver = SqliteSaver::from_path(&db).await?; // the schema exists before the child
    let ttl = Duration::from_millis(1500);
    let mut child = spawn_child("hold", &db, "t", ttl.as_millis() as u64, 0);
    let leased = tokio::task::block_in_place(|| verdict(&mut child, false));
    // The child claimed before this point, so its lease lapses at most `ttl` from here.
    let seen = std::time::Instant::now();
    if leased != Some(true) {
        let _ = child.kill();
        panic!("the child did not get the lease: {leased:?}");
    }
    // The live process holds the thread.
    assert!(is_conflict(&saver.acquire_lease("t", LONG).await));
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    // The dead process's lease blocks nobody once its ttl has run out.
    tokio::time::sleep(ttl.saturating_sub(seen.elapsed()) + Duration::from_millis(50)).await;
    let taken = saver.acquire_lease("t", LONG).await?;
    assert!(is_conflict(&saver.acquire_lease("t", LONG).await));
    saver.release_lease(&taken).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simultaneous_claims_from_processes_one_wins() -> Result<()> {
    let db = temp_db();
    let saver = SqliteSaver::from_path(&db).await?;
    const CHILDREN: usize = 4;
    // Far enough ahead for every child to start and open the file first.
    let start = unix_millis() + 1500;
    let mut children: Vec<Child> = (0..CHILDREN)
        .map(|_| spawn_child("claim", &db, "race", LONG.as_millis() as u64, start))
        .collect();
    let verdicts: Vec<Option<bool>> = tokio::task::block_in_place(|| {
        children
            .iter_mut()
            .map(|child| {
                let v = verdict(child, true);
                assert!(child.wait().expect("reap").success());
                v
            })
            .collect()
    });
    let won = verdicts.iter().filter(|v| **v == Some(true)).count();
    let lost = verdicts.iter().filter(|v| **v == Some(false)).count();
    assert_eq!((won, lost), (1, CHILDREN - 1), "{verdicts:?}");
    assert!(is_conflict(&saver.acquire_lease("race", LONG).await));
    Ok(())
}
