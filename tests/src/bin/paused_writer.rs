//! The paused writer of `tests/tests/paused_writer.rs`: runs the thread once with a short
//! lease and prints how the run ended (`OK`, `CONFLICT` or `ERROR ...`).

use std::time::Duration;

use serde_json::json;
use waypoint_runtime::RunConfig;
use waypoint_tests::{obj, paused, savers};

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(spec), Some(thread)) = (args.next(), args.next()) else {
        eprintln!("usage: paused_writer SAVER_SPEC THREAD_ID");
        std::process::exit(2);
    };
    let outcome = run(&spec, &thread).await;
    println!("{outcome}");
}

async fn run(spec: &str, thread: &str) -> String {
    let saver = match savers::open_spec(spec).await {
        Ok(saver) => saver,
        Err(e) => return format!("ERROR opening {spec}: {e}"),
    };
    let graph = match paused::graph(saver, "child", Duration::from_secs(2), true) {
        Ok(graph) => graph,
        Err(e) => return format!("ERROR compiling: {e}"),
    };
    let config = RunConfig::thread(thread).lease_ttl(paused::CHILD_LEASE_TTL);
    match graph.invoke(Some(obj(json!({"who": ""}))), &config).await {
        Ok(_) => "OK".to_owned(),
        Err(e) if e.to_string().contains("conflict") => "CONFLICT".to_owned(),
        Err(e) => format!("ERROR {e}"),
    }
}
