//! Hybrid search with the real model (all-MiniLM-L6-v2, `WAYPOINT_TEST_MINILM_DIR`): its
//! vector leg finds a paraphrase that shares no word with the query (the lexical leg finds
//! nothing), the lexical leg ranks an exact identifier above look-alikes, and the fused
//! ranking ranks each first. (That the vector leg can miss an identifier is shown with a
//! deterministic embedder in the conformance suite: this model finds this one.)

use std::sync::Arc;

use serde_json::json;
use waypoint_store::embed::MiniLmEmbedder;
use waypoint_store::{
    BoxError, InMemoryStore, IndexConfig, SearchItem, SearchMode, SearchOp, StoreConfig, StoreExt,
};
use waypoint_test_kit::minilm_dir;

fn keys(items: &[SearchItem]) -> Vec<&str> {
    items.iter().map(|i| i.key.as_str()).collect()
}

#[tokio::test]
async fn each_leg_finds_what_the_other_misses_with_minilm() -> Result<(), BoxError> {
    let Some(dir) = minilm_dir() else {
        return Ok(());
    };
    let index = IndexConfig::new(Arc::new(MiniLmEmbedder::open(dir)?))
        .fields(["text"])
        .lexical(true);
    let store = InMemoryStore::with_config(StoreConfig::new().index(index))?;
    let items = [
        ("incident", "ticket QX-7731-VB: the invoice is blank"),
        ("hiking", "I love trekking in the Alps every summer"),
        ("plumber", "call the plumber about the leaking kitchen tap"),
        ("stamps", "buy stamps and envelopes at the post office"),
        ("passport", "renew the passport before the trip in June"),
        (
            "errors",
            "error codes of the export job are listed in the runbook",
        ),
        // Look-alike codes: the model cannot tell them apart, the words can.
        (
            "near1",
            "the nightly export job stopped with code QX-7713-VB",
        ),
        (
            "near2",
            "the nightly export job stopped with code QX-1377-BV",
        ),
        (
            "near3",
            "the nightly export job stopped with code XQ-7731-BV",
        ),
    ];
    for (key, text) in items {
        store.put(["ns"], key, json!({"text": text})).await?;
    }
    let search =
        |mode, query: &str, limit| SearchOp::new(["ns"]).query(query).mode(mode).limit(limit);

    // A paraphrase: no shared word, the model knows it.
    let query = "mountain hikes";
    let vector = store.search(search(SearchMode::Vector, query, 1)).await?;
    assert_eq!(keys(&vector), ["hiking"]);
    let lexical = store.search(search(SearchMode::Lexical, query, 10)).await?;
    assert!(lexical.is_empty(), "{:?}", keys(&lexical));
    let hybrid = store.search(search(SearchMode::Hybrid, query, 1)).await?;
    assert_eq!(keys(&hybrid), ["hiking"]);

    // An exact identifier among look-alikes: the lexical leg ranks it first (the model does
    // too here, printed), and so does the fused ranking.
    let query = "QX-7731-VB";
    let lexical = store.search(search(SearchMode::Lexical, query, 10)).await?;
    assert_eq!(keys(&lexical)[0], "incident", "{:?}", keys(&lexical));
    let vector = store.search(search(SearchMode::Vector, query, 9)).await?;
    let rank = keys(&vector).iter().position(|k| *k == "incident");
    eprintln!(
        "the model ranks the identifier's item at {rank:?} of {:?}",
        keys(&vector)
    );
    let hybrid = store.search(search(SearchMode::Hybrid, query, 1)).await?;
    assert_eq!(keys(&hybrid), ["incident"]);

    Ok(())
}
