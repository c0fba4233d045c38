//! Search: newest first without a query, else the vector leg, the lexical leg or both fused,
//! from the in-process indexes or from a backend that ranks its own rows.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use tracing::field::Empty;

use super::{Engine, check_dims, record};
use crate::filter::Filter;
use crate::index::VectorIndex;
use crate::lexical::{FUSION_DEPTH, RRF_K, fuse, query_terms, sort_ranked};
use crate::raw::{Backend, Row};
use crate::{ItemKey, Namespace, Result, SearchItem, SearchMode, SearchOp};

impl<B: Backend> Engine<B> {
    /// One search: by similarity when there is a query and an index, else newest first.
    #[tracing::instrument(name = "store.search", level = "info", skip_all,
        fields(backend = self.inner.backend.name(), namespace = %op.namespace_prefix.joined(),
        query = op.query.is_some(), filter = !filter.is_empty(), limit = op.limit,
        offset = op.offset, rows = Empty))]
    pub(super) async fn search(&self, op: SearchOp, filter: Filter) -> Result<Vec<SearchItem>> {
        let wants_refresh = op
            .refresh_ttl
            .unwrap_or(self.inner.config.ttl.refresh_on_read);
        let query = op.query.as_deref().filter(|q| !q.is_empty());
        let (Some(query), Some(index_config)) = (query, &self.inner.config.index) else {
            return self.scan_page(&op, &filter, wants_refresh).await;
        };
        let in_backend = self.inner.backend.searches_vectors();
        if in_backend && op.mode == SearchMode::Vector {
            let vector = index_config.embedder.embed_query(query).await?;
            check_dims(&vector, index_config.dims)?;
            return self
                .backend_search(&op, &filter, &vector, wants_refresh)
                .await;
        }
        if let Some(index) = self.index() {
            self.catch_up(&index).await?;
        }
        let index = self.index();
        if index.is_none() && !in_backend {
            return self.scan_page(&op, &filter, wants_refresh).await;
        }
        let vector = if op.mode == SearchMode::Lexical {
            Vec::new()
        } else {
            let vector = index_config.embedder.embed_query(query).await?;
            check_dims(&vector, index_config.dims)?;
            vector
        };
        let now = self.now();
        let allowed = if filter.is_empty() {
            None
        } else {
            let mut allowed = HashSet::new();
            self.inner
                .backend
                .scan(
                    &op.namespace_prefix,
                    filter.contained().as_ref(),
                    now,
                    &mut |row: Row| {
                        if filter.matches(&row.item.value) {
                            allowed.insert(ItemKey::new(row.item.namespace, row.item.key));
                        }
                        true
                    },
                )
                .await?;
            Some(allowed)
        };
        let wanted = op.offset + op.limit;
        let mut gone: HashSet<ItemKey> = HashSet::new();
        loop {
            let accept = |key: &ItemKey| {
                key.namespace.starts_with(&op.namespace_prefix)
                    && allowed.as_ref().is_none_or(|a| a.contains(key))
                    && !gone.contains(key)
            };
            let depth = wanted.max(FUSION_DEPTH);
            let prefix = &op.namespace_prefix;
            let index = index.as_deref();
            let hits = match op.mode {
                SearchMode::Vector => {
                    (self.vector_leg(index, &vector, &op, &filter, wanted, now, &accept)).await?
                }
                SearchMode::Lexical => {
                    self.lexical_leg(query, prefix, wanted, now, &accept)
                        .await?
                }
                SearchMode::Hybrid => {
                    let vectors = (self
                        .vector_leg(index, &vector, &op, &filter, depth, now, &accept))
                    .await?;
                    let lexical = self.lexical_leg(query, prefix, depth, now, &accept).await?;
                    fuse(&[vectors, lexical], RRF_K, wanted)
                }
            };
            let exhausted = hits.len() < wanted;
            let keys: Vec<ItemKey> = hits.iter().map(|(key, _)| key.clone()).collect();
            let rows = self.inner.backend.get(&keys, now).await?;
            let mut page = Vec::with_capacity(op.limit);
            let mut refresh = Vec::new();
            for ((key, score), row) in hits.into_iter().zip(rows) {
                match row {
                    // Expired or deleted by another process since the index saw it.
                    None => {
                        gone.insert(key);
                    }
                    Some(row) => {
                        if wants_refresh && row.ttl_minutes.is_some() {
                            refresh.push(key);
                        }
                        page.push(SearchItem {
                            item: row.item,
                            score: Some(score),
                        });
                    }
                }
            }
            if page.len() == keys.len() || exhausted {
                let page: Vec<SearchItem> = page.into_iter().skip(op.offset).collect();
                record("store.search", "rows", page.len());
                self.refresh(refresh, now).await?;
                return Ok(page);
            }
        }
    }

    /// The `k` nearest items to `vector` that `accept` takes, best first: the in-process
    /// index's, or else the backend's ([`Self::backend_vector_rows`]).
    #[allow(clippy::too_many_arguments)]
    async fn vector_leg(
        &self,
        index: Option<&VectorIndex>,
        vector: &[f32],
        op: &SearchOp,
        filter: &Filter,
        k: usize,
        now: DateTime<Utc>,
        accept: &(dyn Fn(&ItemKey) -> bool + Sync),
    ) -> Result<Vec<(ItemKey, f32)>> {
        if let Some(index) = index {
            return Ok(index.search(vector, k, accept));
        }
        let rows = self.backend_vector_rows(vector, op, filter, k, now, accept);
        Ok(rows
            .await?
            .into_iter()
            .map(|(row, score)| (ItemKey::new(row.item.namespace, row.item.key), score))
            .collect())
    }

    /// Whether lexical and hybrid searches can run (in process or in the backend).
    pub(super) fn has_lexical(&self) -> bool {
        self.inner.lexical.is_some() || self.inner.native_lexical
    }

    /// The `depth` best items for `query` by the lexical index that `accept` takes, best
    /// first: the in-process index's, or the backend's, asked for twice as many candidates
    /// until enough are accepted or it has no more.
    async fn lexical_leg(
        &self,
        query: &str,
        prefix: &Namespace,
        depth: usize,
        now: DateTime<Utc>,
        accept: &(dyn Fn(&ItemKey) -> bool + Sync),
    ) -> Result<Vec<(ItemKey, f32)>> {
        if let Some(index) = &self.inner.lexical {
            return Ok(index.search(query, depth, accept));
        }
        let terms = query_terms(query);
        if terms.is_empty() || depth == 0 {
            return Ok(Vec::new());
        }
        let mut limit = depth;
        loop {
            let query = crate::raw::LexicalQuery {
                terms: &terms,
                prefix,
                limit,
            };
            let hits = self.inner.backend.search_lexical(query, now).await?;
            let exhausted = hits.len() < limit;
            let mut accepted: Vec<(ItemKey, f32)> =
                hits.into_iter().filter(|(key, _)| accept(key)).collect();
            if accepted.len() >= depth || exhausted {
                sort_ranked(&mut accepted);
                accepted.truncate(depth);
                return Ok(accepted);
            }
            limit = limit.saturating_mul(2);
        }
    }

    /// A page of items under the prefix that pass the filter, newest update first.
    async fn scan_page(
        &self,
        op: &SearchOp,
        filter: &Filter,
        wants_refresh: bool,
    ) -> Result<Vec<SearchItem>> {
        let now = self.now();
        let mut skip = op.offset;
        let mut page = Vec::with_capacity(op.limit.min(1024));
        let mut refresh = Vec::new();
        if op.limit > 0 {
            self.inner
                .backend
                .scan(
                    &op.namespace_prefix,
                    filter.contained().as_ref(),
                    now,
                    &mut |row: Row| {
                        if !filter.matches(&row.item.value) {
                            return true;
                        }
                        if skip > 0 {
                            skip -= 1;
                            return true;
                        }
                        if wants_refresh && row.ttl_minutes.is_some() {
                            refresh.push(ItemKey::new(&row.item.namespace, row.item.key.clone()));
                        }
                        page.push(SearchItem {
                            item: row.item,
                            score: None,
                        });
                        page.len() < op.limit
                    },
                )
                .await?;
        }
        // Called only by `search`.
        record("store.search", "rows", page.len());
        self.refresh(refresh, now).await?;
        Ok(page)
    }

    /// A similarity search the backend runs on its own vectors
    /// ([`Self::backend_vector_rows`]), as a page.
    async fn backend_search(
        &self,
        op: &SearchOp,
        filter: &Filter,
        vector: &[f32],
        wants_refresh: bool,
    ) -> Result<Vec<SearchItem>> {
        let now = self.now();
        let wanted = op.offset + op.limit;
        let matching =
            (self.backend_vector_rows(vector, op, filter, wanted, now, &|_| true)).await?;
        let mut refresh = Vec::new();
        let page: Vec<SearchItem> = matching
            .into_iter()
            .skip(op.offset)
            .take(op.limit)
            .map(|(row, score)| {
                if wants_refresh && row.ttl_minutes.is_some() {
                    refresh.push(ItemKey::new(&row.item.namespace, row.item.key.clone()));
                }
                SearchItem {
                    item: row.item,
                    score: Some(score),
                }
            })
            .collect();
        record("store.search", "rows", page.len());
        self.refresh(refresh, now).await?;
        Ok(page)
    }

    /// The `k` rows nearest to `vector` under the search's prefix that pass its filter and
    /// `accept`, best first, from a backend that searches its own vectors: it applies the
    /// prefix and the filter's equalities, the engine the rest, asking for twice as many
    /// candidates until enough pass or the backend has no more.
    async fn backend_vector_rows(
        &self,
        vector: &[f32],
        op: &SearchOp,
        filter: &Filter,
        k: usize,
        now: DateTime<Utc>,
        accept: &(dyn Fn(&ItemKey) -> bool + Sync),
    ) -> Result<Vec<(Row, f32)>> {
        let contains = filter.contained();
        let mut limit = k.max(1);
        loop {
            let query = crate::raw::VectorQuery {
                vector,
                prefix: &op.namespace_prefix,
                contains: contains.as_ref(),
                limit,
            };
            let hits = self.inner.backend.search_vectors(query, now).await?;
            let exhausted = hits.len() < limit;
            let mut matching: Vec<(Row, f32)> = hits
                .into_iter()
                .filter(|(row, _)| {
                    filter.matches(&row.item.value)
                        && accept(&ItemKey::new(&row.item.namespace, row.item.key.clone()))
                })
                .collect();
            if matching.len() >= k || exhausted {
                matching.truncate(k);
                return Ok(matching);
            }
            limit = limit.saturating_mul(2);
        }
    }
}
