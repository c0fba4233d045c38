//! A server restart in the middle of a write loop, for the backends that talk to a server.
//! Not part of [`crate::store_conformance`]: the caller provides a server it may stop.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::{Error, Namespace, Result, SearchOp, Store, StoreExt};

/// What a server keeps of acknowledged writes across a restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restart {
    /// Everything acknowledged (PostgreSQL).
    KeepsData,
    /// Nothing (a Redis without persistence): only writes after the outage must survive.
    Empties,
}

/// Puts into `store` for ten seconds while another thread runs `ctl("stop")` three seconds in
/// and `ctl("start")` two seconds later. Calls during the outage must fail with
/// [`Error::Backend`] within `max_call`, calls after it must succeed on the same store, and
/// every acknowledged put the server keeps must be found by key and the last one by meaning
/// (`store` needs a semantic index). Returns a one-line summary.
pub async fn restart_mid_write_loop(
    store: &dyn Store,
    ctl: impl Fn(&str) + Send + Clone + 'static,
    max_call: Duration,
    restart: Restart,
) -> Result<String> {
    let ns = Namespace::from(["restart"]);
    let (start, run_for) = (Instant::now(), Duration::from_secs(10));
    let (mut acknowledged, mut failed, mut after_outage) = (Vec::new(), Vec::new(), 0);
    let mut restarted = None;
    let mut i = 0;
    while start.elapsed() < run_for {
        if restarted.is_none() && start.elapsed() > Duration::from_secs(3) {
            // Taken away mid-loop; back two seconds later, from another thread, while the
            // loop keeps calling.
            let ctl = ctl.clone();
            restarted = Some(std::thread::spawn(move || {
                ctl("stop");
                std::thread::sleep(Duration::from_secs(2));
                ctl("start");
            }));
        }
        i += 1;
        let key = format!("k{i:05}");
        let call = Instant::now();
        match store
            .put(&ns, &key, json!({"text": format!("item {i}")}))
            .await
        {
            Ok(()) => {
                let outage_seen = !failed.is_empty();
                after_outage += usize::from(outage_seen);
                if outage_seen || restart == Restart::KeepsData {
                    acknowledged.push(key);
                }
            }
            Err(e) => {
                assert!(
                    matches!(e, Error::Backend { .. }),
                    "an outage is a backend error: {e:?}"
                );
                let took = call.elapsed();
                assert!(took <= max_call, "a call during the outage took {took:?}");
                failed.push(key);
            }
        }
    }
    restarted
        .expect("the server was stopped")
        .join()
        .expect("restart");
    assert!(
        !failed.is_empty(),
        "no call failed while the server was down"
    );
    assert!(
        after_outage > 10,
        "no recovery: {after_outage} puts after the outage"
    );
    let stored: Vec<String> = store
        .search(SearchOp::new(&ns).limit(100_000))
        .await?
        .into_iter()
        .map(|i| i.item.key)
        .collect();
    for key in &acknowledged {
        assert!(
            stored.contains(key),
            "{key} was acknowledged but is missing"
        );
    }
    if restart == Restart::KeepsData {
        // Anything else stored is a put whose answer the outage lost.
        for key in &stored {
            assert!(acknowledged.contains(key) || failed.contains(key), "{key}?");
        }
    }
    let last = acknowledged.last().expect("some puts");
    let text = format!("item {}", last[1..].trim_start_matches('0'));
    // Texts differ by digits only ("item 12" and "item 120"), so the exact item must be among
    // the best few rather than strictly first.
    let found: Vec<String> = store
        .search(SearchOp::new(&ns).query(&text).limit(10))
        .await?
        .into_iter()
        .map(|i| i.item.key)
        .collect();
    assert!(found.contains(last), "{last} is not found by meaning");
    Ok(format!(
        "{} puts acknowledged and kept, {} failed during the outage, {after_outage} after it",
        acknowledged.len(),
        failed.len()
    ))
}
