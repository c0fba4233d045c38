//! Lexical and hybrid search: each leg finds what the other misses, fusion finds both, and
//! query text is only ever words.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::json;

use super::{SharedFactory, StoreFactory, ensure, fresh, open};
use crate::{
    Embedder, Error, Index, IndexConfig, Namespace, Result, SearchItem, SearchMode, SearchOp,
    Store, StoreConfig, StoreExt, Ttl,
};

/// A deterministic embedder that knows meanings, not spellings: each word of a small
/// vocabulary points along its concept's axis, every text gets a constant bias component, and
/// words it does not know (identifiers, names) count for nothing, so its vector search finds
/// paraphrases and never an exact identifier.
#[derive(Debug)]
pub struct ConceptEmbedder;

/// Words the [`ConceptEmbedder`] knows, by concept axis (axis 0 is the bias).
const CONCEPTS: &[&[&str]] = &[
    &[
        "hike",
        "hikes",
        "hiking",
        "trek",
        "trekking",
        "alps",
        "mountain",
        "mountains",
        "trail",
    ],
    &["cook", "cooking", "recipe", "ramen", "soup", "kitchen"],
    &[
        "deploy",
        "deployment",
        "service",
        "server",
        "billing",
        "failed",
        "crash",
    ],
];

#[async_trait]
impl Embedder for ConceptEmbedder {
    fn dims(&self) -> usize {
        CONCEPTS.len() + 1
    }

    async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        Ok(texts
            .iter()
            .map(|text| {
                let mut vector = vec![0.0; CONCEPTS.len() + 1];
                vector[0] = 1.0;
                for word in crate::lexical::tokens(text) {
                    if let Some(axis) = CONCEPTS.iter().position(|c| c.contains(&word.as_str())) {
                        vector[axis + 1] += 1.0;
                    }
                }
                vector
            })
            .collect())
    }
}

/// Opens a store with the lexical index, or skips the case on a backend that refuses one
/// (`Unsupported`: PostgreSQL in pgvector mode).
macro_rules! open_lexical {
    ($factory:expr) => {
        match $factory.open(hybrid_config()).await {
            Err(Error::Unsupported { .. }) => return Ok(()),
            other => match other? {
                Some(store) => store,
                None => return Ok(()),
            },
        }
    };
}

/// A store config with the concept embedder over `text` and the lexical index on.
fn hybrid_config() -> StoreConfig {
    let index = IndexConfig::new(Arc::new(ConceptEmbedder))
        .fields(["text"])
        .lexical(true);
    StoreConfig::new().index(index)
}

/// Items where the identifier and the paraphrase each hide from one leg.
async fn seed(store: &dyn Store, ns: &Namespace) -> Result<()> {
    let items = [
        (
            "incident",
            "deploy of the billing service failed with code ERR-4471-ZQ",
        ),
        ("hiking", "I love trekking in the Alps"),
        ("note1", "call the plumber about the leak"),
        ("note2", "buy stamps and envelopes"),
        ("note3", "renew the passport before june"),
    ];
    for (key, text) in items {
        store.put(ns, key, json!({"text": text})).await?;
    }
    Ok(())
}

async fn find(
    store: &dyn Store,
    ns: &Namespace,
    mode: SearchMode,
    query: &str,
    limit: usize,
) -> Result<Vec<SearchItem>> {
    store
        .search(SearchOp::new(ns).query(query).mode(mode).limit(limit))
        .await
}

fn keys(items: &[SearchItem]) -> Vec<&str> {
    items.iter().map(|i| i.key.as_str()).collect()
}

/// An exact identifier: the lexical leg finds it, the vector leg misses it, hybrid finds it.
pub async fn hybrid_identifier_found_by_lexical_leg(f: &dyn StoreFactory) -> Result<()> {
    let store = open_lexical!(f);
    let ns = fresh(&[]);
    seed(&*store, &ns).await?;
    let query = "ERR-4471-ZQ";
    let vector = find(&*store, &ns, SearchMode::Vector, query, 1).await?;
    ensure!(
        keys(&vector) != ["incident"],
        "the test embedder should miss the identifier, got {:?}",
        keys(&vector)
    );
    let lexical = find(&*store, &ns, SearchMode::Lexical, query, 10).await?;
    assert_eq!(keys(&lexical), ["incident"]);
    assert!(lexical[0].score.is_some_and(|s| s > 0.0));
    let hybrid = find(&*store, &ns, SearchMode::Hybrid, query, 1).await?;
    assert_eq!(keys(&hybrid), ["incident"]);
    Ok(())
}

/// A paraphrase: the vector leg finds it, the lexical leg (no shared word) misses it, hybrid
/// finds it; a query holding both finds both at the top.
pub async fn hybrid_paraphrase_found_by_vector_leg(f: &dyn StoreFactory) -> Result<()> {
    let store = open_lexical!(f);
    let ns = fresh(&[]);
    seed(&*store, &ns).await?;
    let query = "mountain hikes";
    let vector = find(&*store, &ns, SearchMode::Vector, query, 1).await?;
    assert_eq!(keys(&vector), ["hiking"]);
    let lexical = find(&*store, &ns, SearchMode::Lexical, query, 10).await?;
    assert!(lexical.is_empty(), "{:?}", keys(&lexical));
    let hybrid = find(&*store, &ns, SearchMode::Hybrid, query, 1).await?;
    assert_eq!(keys(&hybrid), ["hiking"]);

    let both = find(
        &*store,
        &ns,
        SearchMode::Hybrid,
        "mountain hikes ERR-4471-ZQ",
        2,
    )
    .await?;
    let mut found = keys(&both);
    found.sort_unstable();
    assert_eq!(found, ["hiking", "incident"]);
    // Fused scores: each leg's rank 1 gives 1/61, and both legs hold the best item.
    assert!(
        both[0]
            .score
            .is_some_and(|s| s > 1.0 / 61.0 - 1e-6 && s <= 2.0 / 61.0 + 1e-6)
    );
    assert!(both.windows(2).all(|w| w[0].score >= w[1].score));
    Ok(())
}

/// Filters, namespace prefixes, offset and limit apply to lexical and hybrid search as to
/// vector search; updates, deletes and `Index::Off` reach the lexical index.
pub async fn hybrid_filters_pages_and_updates(f: &dyn StoreFactory) -> Result<()> {
    let store = open_lexical!(f);
    let root = fresh(&[]);
    let inside = Namespace::new(root.labels().iter().cloned().chain(["a".to_owned()]));
    let outside = Namespace::new(root.labels().iter().cloned().chain(["b".to_owned()]));
    for i in 0..12 {
        // Distinct counts: every leg ranks the items without ties.
        let text = format!("soup number {i} {}", "ramen ".repeat(i + 1));
        store
            .put(&inside, &format!("k{i:02}"), json!({"text": text, "n": i}))
            .await?;
    }
    store
        .put(&outside, "other", json!({"text": "ramen soup"}))
        .await?;
    for mode in [SearchMode::Lexical, SearchMode::Hybrid] {
        let all = store
            .search(SearchOp::new(&inside).query("ramen").mode(mode).limit(100))
            .await?;
        assert_eq!(all.len(), 12, "{mode:?}");
        let mut paged = Vec::new();
        for page in 0..3 {
            let op = SearchOp::new(&inside).query("ramen").mode(mode);
            paged.extend(store.search(op.offset(page * 5).limit(5)).await?);
        }
        assert_eq!(keys(&paged), keys(&all), "{mode:?}");
        let filtered = store
            .search(
                SearchOp::new(&inside)
                    .query("ramen")
                    .mode(mode)
                    .filter(json!({"n": {"$gte": 10}}))
                    .limit(5),
            )
            .await?;
        let mut got = keys(&filtered);
        got.sort_unstable();
        assert_eq!(got, ["k10", "k11"], "{mode:?}");
    }
    // Update, delete, index off: the lexical leg follows.
    store
        .put(&inside, "k00", json!({"text": "now about ERR-XYZZY only"}))
        .await?;
    store.delete(&inside, "k01").await?;
    store
        .put_with(
            &inside,
            "k02",
            json!({"text": "ramen"}),
            Index::Off,
            Ttl::Default,
        )
        .await?;
    let lexical = store
        .search(
            SearchOp::new(&root)
                .query("ramen")
                .mode(SearchMode::Lexical)
                .limit(100),
        )
        .await?;
    let got = keys(&lexical);
    assert_eq!(got.len(), 10, "{got:?}");
    assert!(
        !got.iter().any(|k| ["k00", "k01", "k02"].contains(k)),
        "{got:?}"
    );
    assert!(got.contains(&"other"));
    let moved = find(&*store, &inside, SearchMode::Lexical, "err-xyzzy", 10).await?;
    assert_eq!(keys(&moved), ["k00"]);
    Ok(())
}

/// Query text is words only: syntax characters, quotes, NUL and very long text never fail a
/// search or change what it matches.
pub async fn hybrid_hostile_queries_are_words(f: &dyn StoreFactory) -> Result<()> {
    let store = open_lexical!(f);
    let ns = fresh(&[]);
    seed(&*store, &ns).await?;
    let long = "ERR-4471-ZQ ".repeat(20_000);
    let hostile = [
        "\"",
        "'",
        "\"ERR-4471-ZQ",
        "ERR-4471-ZQ\" OR \"",
        "'; DROP TABLE store; --",
        "\0ERR\0-4471-ZQ\0",
        "NEAR(ERR 4471) NOT * OR ^ -zq : { } ( ) [ ] \\",
        "plumber*",
        "",
        "   ",
        long.as_str(),
    ];
    for query in hostile {
        for mode in [SearchMode::Lexical, SearchMode::Hybrid] {
            let got = find(&*store, &ns, mode, query, 10).await?;
            let wants_incident = query.to_lowercase().contains("4471");
            if mode == SearchMode::Lexical && wants_incident {
                assert_eq!(keys(&got), ["incident"], "{:.40}", query);
            }
        }
    }
    let plumber = find(&*store, &ns, SearchMode::Lexical, "plumber*", 10).await?;
    assert_eq!(keys(&plumber), ["note1"]);
    assert_eq!(store.search(SearchOp::new(&ns).limit(100)).await?.len(), 5);
    Ok(())
}

/// Lexical and hybrid search need the lexical index: without it they are a clear error, and
/// the default (vector) search is unchanged.
pub async fn hybrid_without_lexical_index_is_error(f: &dyn StoreFactory) -> Result<()> {
    let index = IndexConfig::new(Arc::new(ConceptEmbedder)).fields(["text"]);
    let store = open!(f, StoreConfig::new().index(index));
    let ns = fresh(&[]);
    seed(&*store, &ns).await?;
    for mode in [SearchMode::Lexical, SearchMode::Hybrid] {
        let err = find(&*store, &ns, mode, "ERR-4471-ZQ", 10).await;
        assert!(
            matches!(&err, Err(Error::InvalidConfig(m)) if m.contains("lexical")),
            "{mode:?}: {:?}",
            err.map(|r| r.len())
        );
    }
    let vector = find(&*store, &ns, SearchMode::Vector, "mountain hikes", 1).await?;
    assert_eq!(keys(&vector), ["hiking"]);
    let store = open!(f, StoreConfig::new());
    let err = find(&*store, &ns, SearchMode::Hybrid, "anything", 10).await;
    assert!(
        matches!(err, Err(Error::InvalidConfig(_))),
        "{:?}",
        err.map(|r| r.len())
    );
    Ok(())
}

/// Store B's lexical leg follows the items store A puts, rewrites and deletes (its change
/// feed), as its vector leg does.
pub async fn hybrid_second_store_follows_lexically(f: &dyn SharedFactory) -> Result<()> {
    let (a, b) = match f.open_two(hybrid_config()).await {
        Err(Error::Unsupported { .. }) => return Ok(()),
        other => match other? {
            Some(stores) => stores,
            None => return Ok(()),
        },
    };
    let ns = fresh(&[]);
    ensure!(
        find(&*b, &ns, SearchMode::Lexical, "ERR-4471-ZQ", 10)
            .await?
            .is_empty(),
        "B found items before any put"
    );
    seed(&*a, &ns).await?;
    let found = eventually(&*b, &ns, "ERR-4471-ZQ", |k| k == ["incident"]).await?;
    ensure!(found, "B's lexical leg never found A's identifier");
    a.put(&ns, "incident", json!({"text": "deploy fixed"}))
        .await?;
    a.put(&ns, "note1", json!({"text": "ticket ERR-4471-ZQ closed"}))
        .await?;
    let found = eventually(&*b, &ns, "ERR-4471-ZQ", |k| k == ["note1"]).await?;
    ensure!(found, "B's lexical leg never followed A's rewrites");
    a.delete(&ns, "note1").await?;
    let found = eventually(&*b, &ns, "ERR-4471-ZQ", |k| k.is_empty()).await?;
    ensure!(found, "B's lexical leg never dropped A's delete");
    Ok(())
}

/// Whether `store`'s lexical search for `query` under `ns` gives keys `seen` accepts within
/// a second.
async fn eventually(
    store: &dyn Store,
    ns: &Namespace,
    query: &str,
    seen: impl Fn(&[&str]) -> bool,
) -> Result<bool> {
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_secs(1) {
        if seen(&keys(
            &find(store, ns, SearchMode::Lexical, query, 10).await?,
        )) {
            return Ok(true);
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    Ok(false)
}
