//! The retrieval check of `waypoint_store::eval`: recall@1 and recall@5 of the hashing
//! embedder and of all-MiniLM-L6-v2 (feature `minilm`, with a model folder) on LangGraph's
//! guides, searched exactly, with section headings and with written questions as queries.

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use indicatif::ProgressBar;
use waypoint_store::eval::{self, Passage, Query};
use waypoint_store::{Embedder, HashingEmbedder};

use super::measure::{Better, Table};

/// The hashing embedder's dimensions: the model's, so both index vectors of one size.
const HASHING_DIMS: usize = 384;

/// Steps this group reports to its progress bar.
pub(crate) fn steps() -> u64 {
    2
}

/// Measures every embedder it can open; a missing model is a note, not a failure.
pub(crate) async fn run(model: Option<&Path>, bar: &ProgressBar) -> Result<Table> {
    let passages = eval::seed_passages()?;
    let headings = eval::heading_queries(&passages);
    let questions = eval::seed_questions()?;
    let mut table = Table::new(
        "recall",
        "embedder",
        format!(
            "{} passages (one per section of LangGraph's English guides) stored as memories, \
             searched exactly; queries: {} section headings, {} questions written about the \
             passages. Share of queries with a right passage first (@1) or in the first five (@5).",
            passages.len(),
            headings.len(),
            questions.len()
        ),
    );
    let sets = [("headings", &headings), ("questions", &questions)];

    bar.set_message("recall · hashing");
    let hashing = Arc::new(HashingEmbedder::new(HASHING_DIMS));
    let column = format!("hashing ({HASHING_DIMS})");
    measure(&mut table, &column, hashing, &passages, &sets).await?;
    bar.inc(1);

    bar.set_message("recall · minilm");
    match open_model(model) {
        Ok(embedder) => measure(&mut table, "minilm", embedder, &passages, &sets).await?,
        Err(why) => {
            eprintln!("waypoint bench: recall: minilm skipped, {why}");
            table.notes.push(format!("minilm skipped: {why}"));
        }
    }
    bar.inc(1);
    Ok(table)
}

/// Adds one embedder's column: recall@1 and @5 of each set of queries.
async fn measure(
    table: &mut Table,
    column: &str,
    embedder: Arc<dyn Embedder>,
    passages: &[Passage],
    sets: &[(&str, &Vec<Query>)],
) -> Result<()> {
    let memories = eval::Memories::store(embedder, passages).await?;
    for (name, queries) in sets {
        let recall = memories.recall(queries).await?;
        let rows = [("1", recall.at_1), ("5", recall.at_5)];
        for (k, value) in rows {
            let workload = format!("{name} ({}) recall@{k}", recall.queries);
            table.add(
                &workload,
                "share",
                Better::Higher,
                column,
                value,
                vec![value],
            );
        }
    }
    Ok(())
}

/// The MiniLM embedder from `model`, or why there is none.
#[cfg(feature = "minilm")]
fn open_model(model: Option<&Path>) -> Result<Arc<dyn Embedder>, String> {
    let dir = model.ok_or("no model folder (--model DIR or WAYPOINT_TEST_MINILM_DIR)")?;
    let embedder = waypoint_store::embed::MiniLmEmbedder::open(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(Arc::new(embedder))
}

/// Without the model code: why there is no MiniLM column.
#[cfg(not(feature = "minilm"))]
fn open_model(_: Option<&Path>) -> Result<Arc<dyn Embedder>, String> {
    Err(String::from(
        "this waypoint was built without the `minilm` feature",
    ))
}
