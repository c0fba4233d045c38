//! Semantic search: embedding, scores, max pooling, filters during the walk, bad embedders.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{
    DIMS, ProbeEmbedder, ProbeMode, StoreFactory, fresh, hashing_index, obj, open, similarity,
};
use crate::{
    AnnConfig, Distance, Embedder, Error, HashingEmbedder, Index, IndexConfig, Namespace, Op,
    PutOp, Result, SearchItem, SearchOp, Store, StoreConfig, StoreExt, Ttl, get_text_at_path,
};

fn indexed(index: IndexConfig) -> StoreConfig {
    StoreConfig::new().index(index)
}

async fn query(
    store: &dyn Store,
    ns: &Namespace,
    q: &str,
    limit: usize,
) -> Result<Vec<SearchItem>> {
    store.search(SearchOp::new(ns).query(q).limit(limit)).await
}

fn keys(items: &[SearchItem]) -> Vec<&str> {
    items.iter().map(|i| i.key.as_str()).collect()
}

/// The score the store must give `value` for `q`: max over the texts at `paths`.
async fn expected_score(distance: Distance, value: &Value, paths: &[&str], q: &str) -> Result<f32> {
    let embedder = HashingEmbedder::new(DIMS);
    let query = embedder.embed_query(q).await?;
    let mut best = f32::NEG_INFINITY;
    for path in paths {
        let texts = get_text_at_path(value, path);
        for vector in embedder.embed_documents(&texts).await? {
            best = best.max(similarity(distance, &vector, &query));
        }
    }
    Ok(best)
}

fn close(a: Option<f32>, b: f32) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-3)
}

/// Puts are embedded automatically and found by a query, best match first.
pub async fn vector_insert_with_auto_embedding(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, indexed(hashing_index()));
    let ns = fresh(&["docs"]);
    store
        .put(&ns, "short", json!({"text": "short text"}))
        .await?;
    store
        .put(
            &ns,
            "long",
            json!({"text": "longer text document about gardening"}),
        )
        .await?;
    store
        .put(
            &ns,
            "cats",
            json!({"text": "completely unrelated: cats purring"}),
        )
        .await?;
    let got = query(&*store, &ns, "longer text document about gardening", 3).await?;
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].key, "long");
    assert!(got.windows(2).all(|w| w[0].score >= w[1].score));
    assert!(got.iter().all(|i| i.score.is_some()));
    Ok(())
}

/// Re-putting an item re-embeds it.
pub async fn vector_update_changes_score(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, indexed(hashing_index()));
    let ns = fresh(&[]);
    store
        .put(
            &ns,
            "doc",
            json!({"text": "an apple a day keeps the doctor away"}),
        )
        .await?;
    let before = query(&*store, &ns, "an apple a day", 1).await?;
    store
        .put(
            &ns,
            "doc",
            json!({"text": "quantum chromodynamics lecture"}),
        )
        .await?;
    let after = query(&*store, &ns, "an apple a day", 1).await?;
    let (Some(b), Some(a)) = (before[0].score, after[0].score) else {
        return Err(Error::InvalidConfig("missing scores".into()));
    };
    assert!(a < b, "score after update {a} should drop below {b}");
    Ok(())
}

/// Items put with `Index::Off` are left out of semantic results but found by plain search.
pub async fn vector_index_off_excluded_from_semantic_results(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, indexed(hashing_index()));
    let ns = fresh(&[]);
    store.put(&ns, "on", json!({"text": "hello world"})).await?;
    store
        .put_with(
            &ns,
            "off",
            json!({"text": "hello world"}),
            Index::Off,
            Ttl::Default,
        )
        .await?;
    let semantic = query(&*store, &ns, "hello world", 10).await?;
    assert_eq!(keys(&semantic), ["on"]);
    let plain = store.search(SearchOp::new(&ns)).await?;
    assert_eq!(plain.len(), 2);
    assert!(plain.iter().all(|i| i.score.is_none()));
    Ok(())
}

/// A query with a filter returns only matching items, ranked by similarity.
pub async fn vector_search_with_filters(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, indexed(hashing_index()));
    let ns = fresh(&[]);
    let docs = [
        (
            "red_apple",
            json!({"text": "red apple", "color": "red", "score": 4.5}),
        ),
        (
            "red_car",
            json!({"text": "red car", "color": "red", "score": 3.0}),
        ),
        (
            "green_apple",
            json!({"text": "green apple", "color": "green", "score": 4.0}),
        ),
        (
            "blue_car",
            json!({"text": "blue car", "color": "blue", "score": 3.5}),
        ),
    ];
    for (key, value) in docs {
        store.put(&ns, key, value).await?;
    }
    let search =
        |filter: Value, q: &str| store.search(SearchOp::new(&ns).query(q).filter(filter).limit(10));
    let got = search(json!({"color": "red"}), "apple").await?;
    assert_eq!(keys(&got), ["red_apple", "red_car"]);
    let got = search(json!({"score": {"$gt": 3.2}}), "car").await?;
    assert_eq!(keys(&got), ["blue_car", "red_apple", "green_apple"]);
    let got = search(json!({"score": {"$gte": 4.0}, "color": "green"}), "apple").await?;
    assert_eq!(keys(&got), ["green_apple"]);
    Ok(())
}

/// Pages of a semantic search follow each other in score order without repeats.
pub async fn vector_search_pagination(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, indexed(hashing_index()));
    let ns = fresh(&[]);
    for i in 0..5 {
        store
            .put(
                &ns,
                &format!("doc{i}"),
                json!({"text": format!("test document number {i}")}),
            )
            .await?;
    }
    let all = query(&*store, &ns, "test document", 5).await?;
    let mut paged = Vec::new();
    for offset in [0, 2, 4] {
        let page = store
            .search(
                SearchOp::new(&ns)
                    .query("test document")
                    .limit(2)
                    .offset(offset),
            )
            .await?;
        paged.extend(page);
    }
    assert_eq!(paged.len(), 5);
    assert_eq!(keys(&paged), keys(&all));
    Ok(())
}

/// A semantic search stays inside its namespace prefix.
pub async fn vector_search_namespace_prefix(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, indexed(hashing_index()));
    let root = fresh(&[]);
    let a = Namespace::new(root.labels().iter().cloned().chain(["a".to_owned()]));
    let ab = Namespace::new(root.labels().iter().cloned().chain(["ab".to_owned()]));
    store
        .put(&a, "in", json!({"text": "needle in a haystack"}))
        .await?;
    store
        .put(&ab, "out", json!({"text": "needle in a haystack"}))
        .await?;
    let got = query(&*store, &a, "needle", 10).await?;
    assert_eq!(keys(&got), ["in"]);
    let got = query(&*store, &root, "needle", 10).await?;
    assert_eq!(got.len(), 2);
    Ok(())
}

/// Configured and per-put field paths are embedded; an item scores its best field.
pub async fn vector_embed_with_path(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, indexed(hashing_index().fields(["key0", "key1", "key3"])));
    let ns = fresh(&[]);
    let doc1 = json!({"key0": "xxx", "key1": "yyy", "key2": "zzz", "key3": "aaa"});
    let doc2 = json!({"key0": "uuu", "key1": "vvv", "key2": "www", "key3": "bbb"});
    let doc3 = json!({"key0": "mmm", "key4": "zzz"});
    store.put(&ns, "doc1", doc1.clone()).await?;
    store.put(&ns, "doc2", doc2.clone()).await?;
    store
        .put_with(
            &ns,
            "doc3",
            doc3.clone(),
            Index::Fields(vec!["key4".into()]),
            Ttl::Default,
        )
        .await?;
    let default_paths = ["key0", "key1", "key3"];
    for q in ["xxx", "yyy", "aaa", "zzz"] {
        let got = query(&*store, &ns, q, 10).await?;
        assert_eq!(got.len(), 3);
        for item in &got {
            let (value, paths): (&Value, &[&str]) = match item.key.as_str() {
                "doc1" => (&doc1, &default_paths),
                "doc2" => (&doc2, &default_paths),
                _ => (&doc3, &["key4"]),
            };
            let expected = expected_score(Distance::Cosine, value, paths, q).await?;
            assert!(
                close(item.score, expected),
                "{q} {}: {:?} vs {expected}",
                item.key,
                item.score
            );
        }
    }
    // "zzz" is only embedded for doc3 (key4); doc1's key2 is not indexed.
    assert_eq!(query(&*store, &ns, "zzz", 1).await?[0].key, "doc3");
    assert_eq!(query(&*store, &ns, "aaa", 1).await?[0].key, "doc1");
    Ok(())
}

async fn scores_match(f: &dyn StoreFactory, distance: Distance) -> Result<()> {
    let store = open!(f, indexed(hashing_index().distance(distance)));
    let ns = fresh(&[]);
    let docs = [
        json!({"text": "the quick brown fox"}),
        json!({"text": "jumps over the lazy dog"}),
        json!({"text": "lorem ipsum dolor sit amet"}),
        json!({"text": "пример текста"}),
    ];
    for (i, doc) in docs.iter().enumerate() {
        store.put(&ns, &format!("d{i}"), doc.clone()).await?;
    }
    for q in ["quick fox", "lazy dog", "ipsum", "текст", "nothing alike"] {
        let got = query(&*store, &ns, q, 10).await?;
        assert_eq!(got.len(), docs.len());
        for item in &got {
            let i: usize = item.key[1..].parse().unwrap_or(usize::MAX);
            let expected = expected_score(distance, &docs[i], &["$"], q).await?;
            assert!(
                close(item.score, expected),
                "{distance:?} {q}: {:?} vs {expected}",
                item.score
            );
        }
    }
    Ok(())
}

/// Cosine scores equal the cosine similarity of the embeddings.
pub async fn vector_scores_cosine(f: &dyn StoreFactory) -> Result<()> {
    scores_match(f, Distance::Cosine).await
}

/// Dot-product scores equal the dot product of the embeddings.
pub async fn vector_scores_dot(f: &dyn StoreFactory) -> Result<()> {
    scores_match(f, Distance::Dot).await
}

/// L2 scores equal the negative Euclidean distance of the embeddings.
pub async fn vector_scores_l2(f: &dyn StoreFactory) -> Result<()> {
    scores_match(f, Distance::L2).await
}

/// Non-ASCII texts are embedded and found by their own words.
pub async fn vector_non_ascii(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, indexed(hashing_index()));
    let ns = fresh(&[]);
    let docs = [
        ("zh", "这是中文文本，讨论天气"),
        ("ja", "これは日本語のテキストです"),
        ("ru", "Это русский текст о погоде"),
        ("hi", "यह हिंदी में लिखा गया पाठ है"),
        ("ar", "هذا نص باللغة العربية"),
    ];
    for (key, text) in docs {
        store.put(&ns, key, json!({"text": text})).await?;
    }
    for (key, text) in docs {
        assert_eq!(query(&*store, &ns, text, 1).await?[0].key, key, "{text}");
    }
    Ok(())
}

/// Without an index, a query is ignored: plain search, no scores.
pub async fn vector_query_without_index_is_plain_search(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, StoreConfig::new());
    let ns = fresh(&[]);
    store.put(&ns, "a", json!({"text": "alpha"})).await?;
    store.put(&ns, "b", json!({"text": "beta"})).await?;
    let got = query(&*store, &ns, "alpha", 10).await?;
    assert_eq!(keys(&got), ["b", "a"]);
    assert!(got.iter().all(|i| i.score.is_none()));
    Ok(())
}

/// An empty query is a plain search.
pub async fn vector_empty_query_is_plain_search(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, indexed(hashing_index()));
    let ns = fresh(&[]);
    store.put(&ns, "a", json!({"text": "alpha"})).await?;
    let got = query(&*store, &ns, "", 10).await?;
    assert_eq!(keys(&got), ["a"]);
    assert!(got[0].score.is_none());
    Ok(())
}

/// Deleted items leave semantic results.
pub async fn vector_deleted_items_not_returned(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, indexed(hashing_index()));
    let ns = fresh(&[]);
    store
        .put(&ns, "gone", json!({"text": "ephemeral words"}))
        .await?;
    store
        .put(&ns, "kept", json!({"text": "lasting words"}))
        .await?;
    store.delete(&ns, "gone").await?;
    assert_eq!(
        keys(&query(&*store, &ns, "ephemeral words", 10).await?),
        ["kept"]
    );
    Ok(())
}

/// Re-putting with `Index::Off` removes the item's old vectors.
pub async fn vector_reput_with_index_off_removes_vectors(f: &dyn StoreFactory) -> Result<()> {
    let store = open!(f, indexed(hashing_index()));
    let ns = fresh(&[]);
    store
        .put(&ns, "doc", json!({"text": "indexed once"}))
        .await?;
    store
        .put_with(
            &ns,
            "doc",
            json!({"text": "indexed once"}),
            Index::Off,
            Ttl::Default,
        )
        .await?;
    assert!(query(&*store, &ns, "indexed once", 10).await?.is_empty());
    Ok(())
}

/// A filter that keeps few items still fills the page (the graph walk applies it).
pub async fn vector_filtered_page_is_full(f: &dyn StoreFactory) -> Result<()> {
    let ann = AnnConfig {
        flat_threshold: 0,
        ..AnnConfig::default()
    };
    let store = open!(f, indexed(hashing_index().ann(ann)));
    let ns = fresh(&[]);
    let ops = (0..300)
        .map(|i| {
            let kind = if i % 60 == 0 {
                "rare"
            } else if i % 10 == 0 {
                "some"
            } else {
                "common"
            };
            let value = obj(json!({"text": format!("item {i} of kind {kind}"), "kind": kind}));
            Op::Put(PutOp::new(&ns, format!("k{i}"), value))
        })
        .collect();
    store.batch(ops).await?;
    let search = |kind: &str, limit| {
        store.search(
            SearchOp::new(&ns)
                .query("item of kind")
                .filter(json!({"kind": kind}))
                .limit(limit),
        )
    };
    let rare = search("rare", 10).await?;
    assert_eq!(rare.len(), 5);
    assert!(rare.iter().all(|i| i.value["kind"] == "rare"));
    let some = search("some", 10).await?;
    assert_eq!(some.len(), 10);
    assert!(some.iter().all(|i| i.value["kind"] == "some"));
    Ok(())
}

/// Vectors of the wrong size are refused at open or at put, and nothing is written.
pub async fn vector_wrong_dimensions_rejected(f: &dyn StoreFactory) -> Result<()> {
    let mismatched = IndexConfig {
        dims: DIMS + 1,
        ..hashing_index()
    };
    match f.open(indexed(mismatched)).await {
        Ok(None) => return Ok(()), // the backend is not available here
        err => assert!(
            matches!(err, Err(Error::InvalidConfig(_))),
            "{:?}",
            err.map(drop)
        ),
    }
    let probe = ProbeEmbedder::new(ProbeMode::WrongDims);
    let store = open!(f, indexed(IndexConfig::new(probe)));
    let ns = fresh(&[]);
    let err = store.put(&ns, "doc", json!({"text": "x"})).await;
    assert!(matches!(err, Err(Error::Embedding(_))), "{err:?}");
    assert!(store.get(&ns, "doc").await?.is_none());
    let err = query(&*store, &ns, "x", 10).await;
    assert!(matches!(err, Err(Error::Embedding(_))), "{err:?}");
    Ok(())
}

/// A failing embedder fails the batch and nothing of it is written.
pub async fn vector_failing_embedder_writes_nothing(f: &dyn StoreFactory) -> Result<()> {
    let probe = ProbeEmbedder::new(ProbeMode::Fail);
    let store = open!(f, indexed(IndexConfig::new(probe)));
    let ns = fresh(&[]);
    let ops = vec![
        Op::Put(PutOp::new(&ns, "a", obj(json!({"text": "a"})))),
        Op::Put(PutOp::new(&ns, "b", obj(json!({"text": "b"})))),
    ];
    let err = store.batch(ops).await;
    assert!(matches!(err, Err(Error::Embedding(_))), "{err:?}");
    assert!(store.search(SearchOp::new(&ns)).await?.is_empty());
    // Unembedded puts still work.
    store
        .put_with(&ns, "c", json!({"text": "c"}), Index::Off, Ttl::Default)
        .await?;
    Ok(())
}

/// A batch of puts costs one embedding call; a search one more.
pub async fn vector_one_embedding_call_per_batch(f: &dyn StoreFactory) -> Result<()> {
    let probe = ProbeEmbedder::new(ProbeMode::Pass);
    let store = open!(
        f,
        indexed(IndexConfig::new(Arc::clone(&probe) as Arc<dyn Embedder>))
    );
    let ns = fresh(&[]);
    let ops = (0..10)
        .map(|i| {
            Op::Put(PutOp::new(
                &ns,
                format!("k{i}"),
                obj(json!({"text": format!("doc {i}")})),
            ))
        })
        .collect();
    let before = probe.calls();
    store.batch(ops).await?;
    assert_eq!(probe.calls() - before, 1);
    query(&*store, &ns, "doc", 3).await?;
    assert_eq!(probe.calls() - before, 2);
    Ok(())
}
