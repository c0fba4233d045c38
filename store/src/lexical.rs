//! The lexical leg of hybrid search: an in-process BM25 index over the texts a store embeds,
//! and reciprocal rank fusion of two rankings.
//!
//! Text is cut into tokens at every character that is not alphanumeric and lowercased, so
//! `ERR-4471-ZQ` is `err 4471 zq`. Query text is only ever tokenized, never parsed: quotes,
//! operators and control characters are separators, so no query can fail or inject.

use std::cmp::Ordering;
use std::collections::HashMap;

use parking_lot::RwLock;
use serde_json::Value;

use crate::ItemKey;
use crate::path::index_texts;

/// BM25's term-frequency saturation.
const K1: f32 = 1.2;
/// BM25's length normalisation.
const B: f32 = 0.75;

/// The default `k` of reciprocal rank fusion (Cormack et al.).
pub const RRF_K: f32 = 60.0;

/// How many candidates each leg of a hybrid search ranks at least, before fusion.
pub const FUSION_DEPTH: usize = 100;

/// The lowercased alphanumeric tokens of `text`.
pub fn tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
}

/// The distinct tokens of a query, sorted.
pub fn query_terms(query: &str) -> Vec<String> {
    let mut terms: Vec<String> = tokens(query).collect();
    terms.sort_unstable();
    terms.dedup();
    terms
}

/// The tokens of `texts` separated by single spaces: what a backend that ranks texts itself
/// indexes, so that its tokenizer sees the same words as [`tokens`].
pub fn token_text(texts: &[String]) -> String {
    let mut joined = String::new();
    for token in texts.iter().flat_map(|t| tokens(t)) {
        if !joined.is_empty() {
            joined.push(' ');
        }
        joined.push_str(&token);
    }
    joined
}

/// An in-process BM25 index of items' texts.
#[derive(Default)]
pub struct LexicalIndex {
    docs: RwLock<Docs>,
}

#[derive(Default)]
struct Docs {
    /// Each item's distinct terms and its length in tokens.
    items: HashMap<ItemKey, (Vec<String>, u32)>,
    /// For each term, the items holding it and how often.
    postings: HashMap<String, HashMap<ItemKey, u32>>,
    /// Sum of every item's length.
    total_len: u64,
}

impl Docs {
    fn upsert(&mut self, key: ItemKey, texts: &[String]) {
        let mut counts: HashMap<String, u32> = HashMap::new();
        let mut len: u32 = 0;
        for token in texts.iter().flat_map(|t| tokens(t)) {
            *counts.entry(token).or_default() += 1;
            len = len.saturating_add(1);
        }
        self.remove(&key);
        if counts.is_empty() {
            return;
        }
        self.total_len += u64::from(len);
        let mut terms = Vec::with_capacity(counts.len());
        for (term, count) in counts {
            self.postings
                .entry(term.clone())
                .or_default()
                .insert(key.clone(), count);
            terms.push(term);
        }
        self.items.insert(key, (terms, len));
    }

    fn remove(&mut self, key: &ItemKey) {
        let Some((terms, len)) = self.items.remove(key) else {
            return;
        };
        self.total_len -= u64::from(len);
        for term in terms {
            if let Some(items) = self.postings.get_mut(&term) {
                items.remove(key);
                if items.is_empty() {
                    self.postings.remove(&term);
                }
            }
        }
    }
}

impl LexicalIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the texts of `key` (no texts removes it).
    pub fn upsert(&self, key: ItemKey, texts: &[String]) {
        self.docs.write().upsert(key, texts);
    }

    /// Forgets `key`.
    pub fn remove(&self, key: &ItemKey) {
        self.docs.write().remove(key);
    }

    /// Replaces the whole index with `items` (built aside, then swapped in).
    pub fn load(&self, items: Vec<(ItemKey, Vec<String>)>) {
        let mut docs = Docs::default();
        for (key, texts) in items {
            docs.upsert(key, &texts);
        }
        *self.docs.write() = docs;
    }

    /// The `k` accepted items with the best BM25 score for `query`, best first (ties by key);
    /// items sharing no token with the query are not ranked.
    pub fn search(
        &self,
        query: &str,
        k: usize,
        accept: &dyn Fn(&ItemKey) -> bool,
    ) -> Vec<(ItemKey, f32)> {
        let terms = query_terms(query);
        let docs = self.docs.read();
        let n = docs.items.len() as f32;
        let average = docs.total_len as f32 / n.max(1.0);
        let mut scores: HashMap<&ItemKey, f32> = HashMap::new();
        for term in &terms {
            let Some(items) = docs.postings.get(term) else {
                continue;
            };
            let df = items.len() as f32;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for (key, &count) in items {
                if !accept(key) {
                    continue;
                }
                let len = docs.items.get(key).map_or(0, |(_, len)| *len) as f32;
                let tf = count as f32;
                let norm = K1 * (1.0 - B + B * len / average.max(1.0));
                *scores.entry(key).or_default() += idf * tf * (K1 + 1.0) / (tf + norm);
            }
        }
        let mut ranked: Vec<(ItemKey, f32)> =
            scores.into_iter().map(|(k, s)| (k.clone(), s)).collect();
        sort_ranked(&mut ranked);
        ranked.truncate(k);
        ranked
    }
}

/// The texts an item was indexed with, found again from its stored vectors' field names (a
/// path, or a path and `.N` when the path gave several texts: see
/// [`index_texts`]).
pub fn stored_texts(value: &Value, fields: &[String]) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for field in fields {
        paths.push(field.clone());
        if let Some((base, n)) = field.rsplit_once('.')
            && n.parse::<usize>().is_ok()
        {
            paths.push(base.to_owned());
        }
    }
    paths.sort_unstable();
    paths.dedup();
    let mut found: HashMap<String, String> = index_texts(value, &paths).into_iter().collect();
    fields.iter().filter_map(|f| found.remove(f)).collect()
}

/// Sorts by score descending, then key, so equal scores rank the same way on every backend.
pub(crate) fn sort_ranked(ranked: &mut [(ItemKey, f32)]) {
    ranked.sort_by(|a, b| {
        b.1.partial_cmp(&a.1)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.0.cmp(&b.0))
    });
}

/// Reciprocal rank fusion: each item scores the sum over the rankings that hold it of
/// `1 / (k + rank)`, rank counted from 1; the best `limit`, best first (ties by key).
pub fn fuse(rankings: &[Vec<(ItemKey, f32)>], k: f32, limit: usize) -> Vec<(ItemKey, f32)> {
    let mut fused: HashMap<&ItemKey, f32> = HashMap::new();
    for ranking in rankings {
        for (rank, (key, _)) in ranking.iter().enumerate() {
            *fused.entry(key).or_default() += 1.0 / (k + rank as f32 + 1.0);
        }
    }
    let mut ranked: Vec<(ItemKey, f32)> = fused.into_iter().map(|(k, s)| (k.clone(), s)).collect();
    sort_ranked(&mut ranked);
    ranked.truncate(limit);
    ranked
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> ItemKey {
        ItemKey::new(["ns"], k)
    }

    fn texts(t: &str) -> Vec<String> {
        vec![t.to_owned()]
    }

    #[test]
    fn rare_terms_outrank_common_ones_and_updates_replace() {
        let index = LexicalIndex::new();
        index.upsert(key("a"), &texts("the error ERR-4471-ZQ happened"));
        index.upsert(key("b"), &texts("the error happened again, the error"));
        index.upsert(key("c"), &texts("nothing to see"));
        let hits = index.search("err-4471-zq", 10, &|_| true);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].0, key("a"));
        let hits = index.search("error", 10, &|_| true);
        assert_eq!(hits[0].0, key("b"));
        assert_eq!(hits.len(), 2);
        index.upsert(key("a"), &texts("rewritten"));
        assert!(index.search("4471", 10, &|_| true).is_empty());
        index.remove(&key("b"));
        assert!(index.search("error", 10, &|_| true).is_empty());
        assert!(index.search("\"\0 OR NEAR(* -", 10, &|_| true).is_empty());
    }

    #[test]
    fn stored_texts_are_found_again_from_field_names() {
        let value =
            serde_json::json!({"a": {"b": ["x one", "y two"]}, "t": "solo", "n": {"0": "z"}});
        let paths = [
            String::from("a.b[*]"),
            String::from("t"),
            String::from("n.0"),
        ];
        let fields: Vec<String> = index_texts(&value, &paths)
            .into_iter()
            .map(|(f, _)| f)
            .collect();
        assert_eq!(
            stored_texts(&value, &fields),
            ["x one", "y two", "solo", "z"]
        );
    }

    #[test]
    fn fusion_rewards_items_both_rankings_hold() {
        let a = vec![(key("x"), 9.0), (key("both"), 8.0)];
        let b = vec![(key("y"), 0.9), (key("both"), 0.8)];
        let fused = fuse(&[a, b], RRF_K, 10);
        assert_eq!(fused[0].0, key("both"));
        assert!((fused[0].1 - 2.0 / 62.0).abs() < 1e-6);
        assert_eq!(fused.len(), 3);
        assert_eq!(fused[1].0, key("x"));
    }
}
