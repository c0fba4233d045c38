//! pgvector mode shared with Python LangGraph: its `PostgresStore` with a pgvector index
//! embedding with the NumPy all-MiniLM-L6-v2 reference (`tests/python/minilm_ref.py`) puts
//! items that a Waypoint store (`MiniLmEmbedder`) finds by search, and finds Waypoint's; both
//! rank the same item first for each query.
//!
//! Needs the pgvector server (`WAYPOINT_TEST_PGVECTOR_URL`), the LangGraph venv
//! (`WAYPOINT_TEST_PYTHON`), the model (`WAYPOINT_TEST_MINILM_DIR`) and the reference venv
//! (`WAYPOINT_TEST_MINILM_PYTHON`, whose NumPy, tokenizers and safetensors the LangGraph
//! interpreter imports through `PYTHONPATH`); passes without running without them, unless
//! `WAYPOINT_REQUIRE_BACKENDS=1`.

#![cfg(feature = "store")]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use serde_json::{Value, json};
use waypoint_checkpoint_postgres::{PostgresConfig, PostgresStore};
use waypoint_store::embed::MiniLmEmbedder;
use waypoint_store::{IndexConfig, Result, SearchOp, StoreConfig, StoreExt};

/// Runs `python_pgvector.py` with `ask` for the store on `schema`, and returns its answer.
fn python(url: &str, schema: &str, ask: &Value) -> Value {
    let (Some(python), Some(reference)) = (
        waypoint_test_kit::python(),
        waypoint_test_kit::minilm_python(),
    ) else {
        unreachable!("checked by the caller");
    };
    let site = Command::new(&reference)
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['platlib'])",
        ])
        .output()
        .expect("reference interpreter");
    let site = String::from_utf8(site.stdout).expect("path");
    let dir = std::env::temp_dir();
    let input = dir.join(format!("{}.json", waypoint_test_kit::fresh_name("pgv_in")));
    let out = dir.join(format!("{}.json", waypoint_test_kit::fresh_name("pgv_out")));
    std::fs::write(&input, ask.to_string()).expect("input");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/python_pgvector.py");
    let output = Command::new(python)
        .arg(script)
        .args([url, schema])
        .arg(&input)
        .arg(&out)
        .env("PYTHONPATH", site.trim())
        .output()
        .expect("run python");
    assert!(
        output.status.success(),
        "python_pgvector.py failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let answer = serde_json::from_slice(&std::fs::read(&out).expect("output")).expect("JSON");
    let _ = std::fs::remove_file(input);
    let _ = std::fs::remove_file(out);
    answer
}

const QUERIES: [(&str, &str); 4] = [
    ("how do I bake bread at home", "bread"),
    ("which football team won the match", "football"),
    ("symptoms of the flu and a fever", "flu"),
    ("travelling by train across Europe", "train"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_and_waypoint_share_pgvector_items_and_rankings() -> Result<()> {
    let (Some(url), Some(dir), Some(_), Some(_)) = (
        waypoint_test_kit::pgvector_url(),
        waypoint_test_kit::minilm_dir(),
        waypoint_test_kit::python(),
        waypoint_test_kit::minilm_python(),
    ) else {
        return Ok(());
    };
    let schema = waypoint_test_kit::fresh_name("wp_pgv_interop");
    let embedder = Arc::new(MiniLmEmbedder::open(&dir)?);
    let store = PostgresStore::connect(
        PostgresConfig::new(&url)
            .schema(&schema)
            .max_connections(4)
            .pgvector(true),
        StoreConfig::new().index(IndexConfig::new(embedder).fields(["text"])),
    )
    .await?;
    // Python writes half the documents, Waypoint the other half.
    let python_docs = [
        (
            "bread",
            "Knead the dough, let it rise, and bake the loaf in a hot oven.",
        ),
        (
            "football",
            "The home side scored twice in the second half to win the game.",
        ),
        (
            "weather",
            "Tomorrow brings heavy rain and strong winds along the coast.",
        ),
    ];
    let waypoint_docs = [
        (
            "flu",
            "Influenza causes fever, aches and a cough for about a week.",
        ),
        (
            "train",
            "Night trains connect Paris, Vienna and Budapest by rail.",
        ),
        (
            "guitar",
            "Tune the strings and practise chords slowly every evening.",
        ),
    ];
    for (key, text) in waypoint_docs {
        store.put(["wp"], key, json!({"text": text})).await?;
    }
    let ask = json!({
        "fields": ["text"],
        "put": python_docs.iter().map(|(k, t)| json!([["py"], k, {"text": t}])).collect::<Vec<_>>(),
        "search": QUERIES.iter().map(|(q, _)| json!([[], q])).collect::<Vec<_>>(),
    });
    let answer = python(&url, &schema, &ask);
    let python_hits = answer["search"].as_array().expect("hits");
    for ((query, expected), python_hits) in QUERIES.iter().zip(python_hits) {
        let ours = store
            .search(SearchOp::new(Vec::<String>::new()).query(*query).limit(5))
            .await?;
        let keys: Vec<&str> = ours.iter().map(|h| h.item.key.as_str()).collect();
        assert_eq!(
            keys.first(),
            Some(expected),
            "Waypoint, {query:?}: {keys:?}"
        );
        let theirs: Vec<&str> = python_hits
            .as_array()
            .expect("hits")
            .iter()
            .map(|h| h[1].as_str().expect("key"))
            .collect();
        assert_eq!(
            theirs.first(),
            Some(expected),
            "Python, {query:?}: {theirs:?}"
        );
        assert_eq!(keys.len(), 5, "{keys:?}");
        // The same item's score on both sides, both by cosine similarity over pgvector.
        let their_top = python_hits[0][2].as_f64().expect("score");
        let our_top = f64::from(ours[0].score.expect("score"));
        assert!(
            (their_top - our_top).abs() < 1e-3,
            "{their_top} vs {our_top}"
        );
    }
    Ok(())
}
