//! The retrieval check (`waypoint_store::eval`) on LangGraph's guides: the data files are
//! consistent, the hashing embedder stays above the floors measured for it, and
//! all-MiniLM-L6-v2 (feature `minilm`, `WAYPOINT_TEST_MINILM_DIR`) finds clearly more.
//! `waypoint bench --only recall` prints the figures.

use std::collections::HashSet;
use std::sync::Arc;

use waypoint_store::eval::{self, Recall};
use waypoint_store::{Embedder, HashingEmbedder};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// The hashing embedder's dimensions in the check: the model's, so both index the same size.
const HASHING_DIMS: usize = 384;

/// Recall of the hashing embedder on (headings, questions).
async fn hashing_recall() -> Result<(Recall, Recall), waypoint_store::Error> {
    recalls(Arc::new(HashingEmbedder::new(HASHING_DIMS))).await
}

/// Recall of `embedder` on (headings, questions), the passages embedded once.
async fn recalls(embedder: Arc<dyn Embedder>) -> Result<(Recall, Recall), waypoint_store::Error> {
    let passages = eval::seed_passages()?;
    let memories = eval::Memories::store(embedder, &passages).await?;
    let headings = memories.recall(&eval::heading_queries(&passages)).await?;
    let questions = memories.recall(&eval::seed_questions()?).await?;
    Ok((headings, questions))
}

#[test]
fn the_data_files_are_consistent() -> TestResult {
    let passages = eval::seed_passages()?;
    let ids: HashSet<&str> = passages.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids.len(), passages.len(), "passage ids are unique");
    assert!(passages.len() >= 150, "{} passages", passages.len());
    assert!(passages.iter().all(|p| !p.text.trim().is_empty()));
    let questions = eval::seed_questions()?;
    assert!(questions.len() >= 60, "{} questions", questions.len());
    for question in &questions {
        assert!(!question.passages.is_empty(), "{:?}", question.text);
        for id in &question.passages {
            assert!(ids.contains(id.as_str()), "{:?} names {id}", question.text);
        }
    }
    Ok(())
}

#[tokio::test]
async fn a_query_naming_an_unknown_passage_is_an_error() -> TestResult {
    let passages = eval::seed_passages()?;
    let query = eval::Query {
        text: String::from("anything"),
        passages: vec![String::from("p999")],
    };
    let memories = eval::Memories::store(Arc::new(HashingEmbedder::new(16)), &passages).await?;
    let err = memories
        .recall(&[query])
        .await
        .expect_err("an unknown passage id must be refused");
    assert!(err.to_string().contains("p999"), "{err}");
    Ok(())
}

#[tokio::test]
async fn hashing_recall_stays_above_its_floors() -> TestResult {
    let (headings, questions) = hashing_recall().await?;
    eprintln!("hashing: headings {headings:?}, questions {questions:?}");
    // Measured: headings @1 0.28 @5 0.61 (154), questions @1 0.48 @5 0.75 (103).
    assert!(headings.at_5 >= 0.55, "{headings:?}");
    assert!(questions.at_5 >= 0.65, "{questions:?}");
    Ok(())
}

/// The MiniLM weights (`WAYPOINT_TEST_MINILM_DIR`): `None` skips the test, unless
/// `WAYPOINT_REQUIRE_BACKENDS=1` makes a missing directory a failure.
#[cfg(feature = "minilm")]
fn minilm_dir() -> Option<String> {
    match std::env::var("WAYPOINT_TEST_MINILM_DIR") {
        Ok(dir) if !dir.is_empty() => Some(dir),
        _ if std::env::var("WAYPOINT_REQUIRE_BACKENDS").as_deref() == Ok("1") => {
            panic!("WAYPOINT_TEST_MINILM_DIR is not set and WAYPOINT_REQUIRE_BACKENDS=1")
        }
        _ => {
            eprintln!("skipped: WAYPOINT_TEST_MINILM_DIR is not set");
            None
        }
    }
}

#[cfg(feature = "minilm")]
#[tokio::test]
async fn the_model_finds_clearly_more_than_hashing() -> TestResult {
    let Some(dir) = minilm_dir() else {
        return Ok(());
    };
    let embedder = Arc::new(waypoint_store::embed::MiniLmEmbedder::open(dir)?);
    let (headings, questions) = recalls(embedder).await?;
    let (hashing_headings, hashing_questions) = hashing_recall().await?;
    eprintln!("minilm: headings {headings:?}, questions {questions:?}");
    // Measured (this test, and the NumPy reference forward pass alike): headings @1 0.44 @5 0.73,
    // questions @1 0.65 @5 0.91; hashing @5 is 0.61 and 0.75. Floors leave a margin.
    assert!(questions.at_5 >= 0.85, "{questions:?}");
    assert!(headings.at_5 >= 0.65, "{headings:?}");
    assert!(
        questions.at_5 >= hashing_questions.at_5 + 0.10,
        "model {questions:?}, hashing {hashing_questions:?}"
    );
    assert!(
        headings.at_5 >= hashing_headings.at_5 + 0.05,
        "model {headings:?}, hashing {hashing_headings:?}"
    );
    Ok(())
}
