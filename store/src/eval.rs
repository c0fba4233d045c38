//! A retrieval check on text nobody here wrote: LangGraph's English guides cut into one
//! passage per section, stored as memories in an [`InMemoryStore`] indexed by an
//! [`Embedder`], then searched exactly (a flat scan, so the figures measure the embedder,
//! not the approximate index) with two kinds of queries: each section's heading, and
//! questions written about the passages in other words. The figure is recall@k: the share
//! of queries with a right passage among the first k results.
//!
//! The data is `store/tests/data/`: `seed_passages.json` (made by `seed_passages.py` from
//! the guides) and `seed_questions.json`.

use std::collections::HashSet;
use std::sync::Arc;

use serde::Deserialize;

use crate::{
    AnnConfig, Embedder, Error, InMemoryStore, IndexConfig, Object, Op, PutOp, Result, SearchItem,
    SearchOp, Store, StoreConfig, StoreExt,
};

/// The namespace the passages are stored under.
const NAMESPACE: &str = "seeds";

/// One section of a guide.
#[derive(Clone, Debug, Deserialize)]
pub struct Passage {
    /// Its key in the store (`p000`, `p001`, ...).
    pub id: String,
    /// The title of the guide page it comes from.
    pub page: String,
    /// Its section heading.
    pub heading: String,
    /// The section's text, without its heading (the only field embedded).
    pub text: String,
}

/// A search and the passages that answer it.
#[derive(Clone, Debug, Deserialize)]
pub struct Query {
    /// The query text.
    #[serde(rename = "question")]
    pub text: String,
    /// Ids of the passages counted as right answers.
    pub passages: Vec<String>,
}

/// Recall figures of one embedder on one set of queries.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Recall {
    /// Queries asked.
    pub queries: usize,
    /// Share of queries whose first result is a right passage.
    pub at_1: f64,
    /// Share of queries with a right passage in the first five results.
    pub at_5: f64,
}

/// The passages of the guides (168 sections).
pub fn seed_passages() -> Result<Vec<Passage>> {
    parse(
        "seed_passages.json",
        include_str!("../tests/data/seed_passages.json"),
    )
}

/// The questions written about the passages, each naming the passages that answer it.
pub fn seed_questions() -> Result<Vec<Query>> {
    parse(
        "seed_questions.json",
        include_str!("../tests/data/seed_questions.json"),
    )
}

/// Parses one of the data files.
fn parse<T: for<'de> Deserialize<'de>>(name: &str, json: &str) -> Result<Vec<T>> {
    serde_json::from_str(json).map_err(|e| Error::InvalidValue(format!("{name}: {e}")))
}

/// One query per distinct heading, answered by every passage with that heading.
pub fn heading_queries(passages: &[Passage]) -> Vec<Query> {
    let mut queries: Vec<Query> = Vec::new();
    for passage in passages {
        match queries.iter_mut().find(|q| q.text == passage.heading) {
            Some(query) => query.passages.push(passage.id.clone()),
            None => queries.push(Query {
                text: passage.heading.clone(),
                passages: vec![passage.id.clone()],
            }),
        }
    }
    queries
}

/// The passages stored once in a store indexed by one embedder, ready to be searched by any
/// number of query sets (embedding the passages is most of a check's time).
pub struct Memories {
    /// The store holding the passages.
    store: InMemoryStore,
    /// The passages' ids, to refuse a query naming another.
    ids: HashSet<String>,
}

impl Memories {
    /// Stores `passages` in a fresh store indexed by `embedder`, searched exactly.
    pub async fn store(embedder: Arc<dyn Embedder>, passages: &[Passage]) -> Result<Self> {
        let exact = AnnConfig {
            flat_threshold: usize::MAX,
            ..AnnConfig::default()
        };
        let index = IndexConfig::new(embedder).fields(["text"]).ann(exact);
        let store = InMemoryStore::with_config(StoreConfig::new().index(index))?;
        let puts = passages
            .iter()
            .map(|p| {
                let mut value = Object::new();
                value.insert("page".into(), p.page.clone().into());
                value.insert("heading".into(), p.heading.clone().into());
                value.insert("text".into(), p.text.clone().into());
                Op::Put(PutOp::new([NAMESPACE], p.id.clone(), value))
            })
            .collect();
        store.batch(puts).await?;
        let ids = passages.iter().map(|p| p.id.clone()).collect();
        Ok(Self { store, ids })
    }

    /// Recall@1 and recall@5 of `queries`. A query naming an unknown passage is an error.
    pub async fn recall(&self, queries: &[Query]) -> Result<Recall> {
        if let Some(query) = queries
            .iter()
            .find(|q| q.passages.is_empty() || q.passages.iter().any(|id| !self.ids.contains(id)))
        {
            return Err(Error::InvalidValue(format!(
                "query {:?} names no passage or an unknown one: {:?}",
                query.text, query.passages
            )));
        }
        let (mut at_1, mut at_5) = (0usize, 0usize);
        for query in queries {
            let hits = self
                .store
                .search(
                    SearchOp::new([NAMESPACE])
                        .query(query.text.clone())
                        .limit(5),
                )
                .await?;
            let right = |hit: &SearchItem| query.passages.contains(&hit.item.key);
            at_1 += usize::from(hits.first().is_some_and(right));
            at_5 += usize::from(hits.iter().any(right));
        }
        let share = |n: usize| {
            if queries.is_empty() {
                0.0
            } else {
                n as f64 / queries.len() as f64
            }
        };
        Ok(Recall {
            queries: queries.len(),
            at_1: share(at_1),
            at_5: share(at_5),
        })
    }
}
