//! The store contract, implemented once over any [`Backend`].
//!
//! A batch runs in four phases: validate every op (nothing runs if one is bad), embed every
//! text the puts produce with one embedder call, run the reads against the store as it is, then
//! apply the deduplicated puts in one atomic backend write and mirror them into the vector
//! index. A failure before the write leaves the store untouched; the backend write is all or
//! nothing.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use chrono::{DateTime, Utc};
use parking_lot::RwLock;
use serde::Serialize;
use tracing::Instrument;
use tracing::field::Empty;
use waypoint_checkpoint::raw::operation_span;

use crate::filter::Filter;
use crate::index::VectorIndex;
use crate::lexical::LexicalIndex;
use crate::path::index_texts;
use crate::raw::{Backend, FieldVector, Upsert, Write};
use crate::store::SweeperHandle;
use crate::{
    Error, Index, IndexConfig, ItemKey, ListNamespacesOp, Namespace, Object, Op, OpResult, PutOp,
    Result, StoreConfig, Ttl, WILDCARD,
};

mod search;
mod upkeep;

/// A store: the contract's behaviour on top of a backend.
pub struct Engine<B: Backend> {
    inner: Arc<Inner<B>>,
}

impl<B: Backend> Clone for Engine<B> {
    fn clone(&self) -> Self {
        Engine {
            inner: Arc::clone(&self.inner),
        }
    }
}

struct Inner<B> {
    backend: B,
    config: StoreConfig,
    /// The vector index; a full reload builds a new one and swaps it in.
    index: Option<RwLock<Arc<VectorIndex>>>,
    /// The in-process lexical index, when the index config asks for one and the backend
    /// does not rank texts itself.
    lexical: Option<LexicalIndex>,
    /// Whether the backend ranks texts itself and the index asks for `lexical`: every put then
    /// hands it its texts (only then, so a store without hybrid search writes no text rows),
    /// and the open backfills the texts of items written meanwhile.
    native_lexical: bool,
    /// Last timestamp handed out, in microseconds since the epoch: timestamps strictly
    /// increase, so updates always move `updated_at` forward even within one microsecond.
    clock: AtomicI64,
    /// Last change-log sequence applied to the index (backends shared between processes).
    seen: tokio::sync::Mutex<i64>,
    /// The index (by address) and build count of the last snapshot saved, locked while a
    /// snapshot is taken and written so that saves never overlap.
    saved: tokio::sync::Mutex<(usize, u64)>,
    /// Whether a task is waiting to save a snapshot.
    saving: AtomicBool,
}

impl<B: Backend> Engine<B> {
    /// Opens a store on `backend`, loading every stored vector into the index.
    pub async fn open(backend: B, config: StoreConfig) -> Result<Self> {
        let engine = Self::new(backend, config)?;
        engine.reload_index().await?;
        engine.reload_lexical().await?;
        if engine.inner.native_lexical {
            engine.inner.backend.backfill_lexical().await?;
        }
        Ok(engine)
    }

    /// A store on `backend` whose index starts empty (for backends that start empty).
    pub fn new(backend: B, config: StoreConfig) -> Result<Self> {
        if let Some(index) = &config.index {
            check_index_config(index)?;
        }
        if let Some(ttl) = config.ttl.default_ttl {
            check_ttl(ttl)?;
        }
        let index = config
            .index
            .as_ref()
            .filter(|_| !backend.searches_vectors())
            .map(|c| RwLock::new(Arc::new(VectorIndex::new(c.dims, c.distance, c.ann))));
        let wants_lexical = config.index.as_ref().is_some_and(|c| c.lexical);
        let native_lexical = wants_lexical && backend.searches_lexical();
        let lexical = (wants_lexical && !native_lexical).then(LexicalIndex::new);
        // An in-process lexical index would not see the changes of other writers to a backend
        // that searches its own vectors (it keeps no change log): refused rather than half right.
        if lexical.is_some() && backend.searches_vectors() {
            return Err(Error::Unsupported {
                operation: "a lexical index (hybrid search) with vectors searched by the backend",
                backend: backend.name(),
            });
        }
        Ok(Engine {
            inner: Arc::new(Inner {
                backend,
                config,
                index,
                lexical,
                native_lexical,
                clock: AtomicI64::new(i64::MIN),
                seen: tokio::sync::Mutex::new(0),
                saved: tokio::sync::Mutex::new((0, 0)),
                saving: AtomicBool::new(false),
            }),
        })
    }

    /// The backend underneath.
    pub fn backend(&self) -> &B {
        &self.inner.backend
    }

    /// Counts describing the in-process vector index now, if the store keeps one.
    pub fn index_stats(&self) -> Option<crate::index::IndexStats> {
        self.index().map(|index| index.stats())
    }

    /// The current vector index, if the store has one.
    fn index(&self) -> Option<Arc<VectorIndex>> {
        self.inner.index.as_ref().map(|i| Arc::clone(&i.read()))
    }

    /// A timestamp later than every one handed out before, at microsecond precision.
    fn now(&self) -> DateTime<Utc> {
        // Whole microseconds (what the SQL backends store) as an integer: every put takes a
        // timestamp, and truncating and comparing `DateTime`s cost 5% of a put.
        let wall = Utc::now().timestamp_micros();
        let next = |last: i64| wall.max(last.saturating_add(1));
        // A single atomic orders all callers, so the sequence strictly increases.
        let last = self
            .inner
            .clock
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
                Some(next(last))
            })
            .unwrap_or_else(|last| last);
        DateTime::from_timestamp_micros(next(last)).unwrap_or(DateTime::<Utc>::MAX_UTC)
    }

    /// Runs a batch (see the module docs for its phases).
    #[tracing::instrument(name = "store.batch", level = "info", skip_all,
        fields(backend = self.inner.backend.name(), ops = ops.len(), namespace = Empty,
        rows = Empty))]
    pub async fn batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>> {
        record_namespace(&ops);
        let config = &self.inner.config;
        // Each get's position and TTL choice, and its key (moved out of the op, not copied).
        let mut gets = Vec::new();
        let mut get_keys = Vec::new();
        let mut searches = Vec::new();
        let mut listings = Vec::new();
        // The puts, already as the backend writes them (built in place: no second list).
        let mut writes =
            Vec::with_capacity(ops.iter().filter(|op| matches!(op, Op::Put(_))).count());
        // How each of `writes` is embedded; only kept when the store has an index.
        let mut embed_as = Vec::new();
        let mut results = Vec::with_capacity(ops.len());
        for (position, op) in ops.into_iter().enumerate() {
            match op {
                Op::Get(op) => {
                    op.namespace.validate()?;
                    gets.push((position, op.refresh_ttl));
                    get_keys.push(ItemKey {
                        namespace: op.namespace,
                        key: op.key,
                    });
                }
                Op::Search(op) => {
                    op.namespace_prefix.validate_prefix()?;
                    if !op.mode.is_vector() && !self.has_lexical() {
                        return Err(Error::InvalidConfig(format!(
                            "a {:?} search needs a lexical index (`IndexConfig::lexical(true)`)",
                            op.mode
                        )));
                    }
                    let filter = op.filter.as_ref().map(Filter::parse).transpose()?;
                    searches.push((position, op, filter.unwrap_or_default()));
                }
                Op::ListNamespaces(op) => {
                    check_pattern(op.prefix.as_deref())?;
                    check_pattern(op.suffix.as_deref())?;
                    listings.push((position, op));
                }
                Op::Put(op) => {
                    let (write, index) = self.checked_put(op)?;
                    writes.push(write);
                    if config.index.is_some() {
                        embed_as.push(index);
                    }
                }
            }
            results.push(OpResult::Done);
        }
        if writes.len() > 1 {
            (writes, embed_as) = last_put_wins(writes, embed_as);
        }

        let texts = self.embed(&mut writes, embed_as).await?;

        if !gets.is_empty() {
            let now = self.now();
            let rows = self.inner.backend.get(&get_keys, now).await?;
            let mut refresh = Vec::new();
            for ((position, refresh_ttl), row) in gets.into_iter().zip(rows) {
                let wants = refresh_ttl.unwrap_or(config.ttl.refresh_on_read);
                results[position] = OpResult::Item(row.map(|row| {
                    if wants && row.ttl_minutes.is_some() {
                        refresh.push(ItemKey::new(&row.item.namespace, row.item.key.clone()));
                    }
                    row.item
                }));
            }
            self.refresh(refresh, now).await?;
        }
        for (position, op, filter) in searches {
            // Boxed: a search's state is most of a batch's, and every batch (each single put
            // included) is allocated at the size of its largest state.
            results[position] = OpResult::Items(Box::pin(self.search(op, filter)).await?);
        }
        if !listings.is_empty() {
            let span = tracing::info_span!(
                "store.list_namespaces",
                backend = self.inner.backend.name(),
                rows = Empty
            );
            let all = (self.inner.backend.namespaces(self.now()))
                .instrument(span.clone())
                .await?;
            let mut rows = 0;
            for (position, op) in listings {
                let found = list_namespaces(&all, &op);
                rows += found.len();
                results[position] = OpResult::Namespaces(found);
            }
            span.record("rows", rows);
        }

        record("store.batch", "rows", writes.len());
        if !writes.is_empty() {
            let vectors: Vec<(ItemKey, Option<Vec<Vec<f32>>>)> = match config.index {
                None => Vec::new(),
                Some(_) => writes
                    .iter()
                    .filter_map(|w| match w {
                        Write::Put(u) => u.vectors.as_ref().map(|v| {
                            let raw = v.iter().map(|f| f.vector.clone()).collect();
                            (u.key.clone(), Some(raw))
                        }),
                        Write::Delete(key) => Some((key.clone(), None)),
                    })
                    .collect(),
            };
            let lexical: Vec<(ItemKey, Vec<String>)> = match &self.inner.lexical {
                None => Vec::new(),
                Some(_) => (writes.iter().zip(texts))
                    .map(|(w, texts)| match w {
                        Write::Put(u) => (u.key.clone(), texts),
                        Write::Delete(key) => (key.clone(), Vec::new()),
                    })
                    .collect(),
            };
            self.inner.backend.write(writes, self.now()).await?;
            if let Some(index) = &self.inner.lexical {
                for (key, texts) in lexical {
                    index.upsert(key, &texts);
                }
            }
            if let Some(index) = self.index() {
                for (key, vectors) in vectors {
                    match vectors {
                        Some(vectors) => index.upsert(key, vectors),
                        None => index.remove(&key),
                    }
                }
                if index.stats().building {
                    self.save_snapshot_later();
                }
            }
        }
        Ok(results)
    }

    /// Validates a put and resolves its TTL: the write (without vectors yet) and how to embed it.
    fn checked_put(&self, op: PutOp) -> Result<(Write, Index)> {
        op.namespace.validate()?;
        let ttl_minutes = match op.ttl {
            Ttl::Default => self.inner.config.ttl.default_ttl,
            Ttl::Never => None,
            Ttl::Minutes(minutes) => Some(check_ttl(minutes)?),
        };
        let limit = self.inner.config.max_value_bytes;
        // Encoding a value just to measure it would cost more than the rest of the put: the
        // exact size is only needed when the cheap upper bound is over the limit.
        if let Some(value) = &op.value
            && json_size_bound(value) > limit
        {
            let size = json_size(value);
            if size > limit {
                return Err(Error::InvalidValue(format!(
                    "the value of `{}` is {size} bytes as JSON, over the store's limit of {limit}",
                    op.key
                )));
            }
        }
        if let Index::Fields(paths) = &op.index {
            check_paths(paths)?;
        }
        let key = ItemKey::new(op.namespace, op.key);
        let write = match op.value {
            Some(value) => Write::Put(Upsert {
                key,
                value,
                ttl_minutes,
                vectors: None,
                texts: None,
            }),
            None => Write::Delete(key),
        };
        Ok((write, op.index))
    }

    /// Embeds every text the puts produce with one embedder call and gives each put of
    /// `writes` its vectors (`embed_as[i]` says how to embed `writes[i]`). Without an index
    /// the writes keep `vectors: None`. Returns the texts of each of `writes` (none for a
    /// delete), for the lexical index.
    #[tracing::instrument(name = "store.embed", level = "debug", skip_all, fields(texts = Empty))]
    async fn embed(&self, writes: &mut [Write], embed_as: Vec<Index>) -> Result<Vec<Vec<String>>> {
        let Some(index_config) = &self.inner.config.index else {
            return Ok(Vec::new());
        };
        // (put position, field name) for every text, in embedding order.
        let mut owners: Vec<(usize, String)> = Vec::new();
        let mut texts: Vec<String> = Vec::new();
        for (position, (write, index)) in writes.iter().zip(&embed_as).enumerate() {
            let Write::Put(put) = write else { continue };
            let value = &put.value;
            let paths = match index {
                Index::Off => continue,
                Index::Default => &index_config.fields,
                Index::Fields(paths) => paths,
            };
            let document = serde_json::Value::Object(value.clone());
            for (field, text) in index_texts(&document, paths) {
                owners.push((position, field));
                texts.push(text);
            }
        }
        record("store.embed", "texts", texts.len());
        let vectors = if texts.is_empty() {
            Vec::new()
        } else {
            let vectors = index_config.embedder.embed_documents(&texts).await?;
            if vectors.len() != texts.len() {
                return Err(Error::Embedding(format!(
                    "asked for {} vectors, got {}",
                    texts.len(),
                    vectors.len()
                )));
            }
            vectors
        };
        let mut per_put: Vec<Vec<FieldVector>> = vec![Vec::new(); writes.len()];
        let mut per_put_texts: Vec<Vec<String>> = vec![Vec::new(); writes.len()];
        for (((position, field), vector), text) in owners.into_iter().zip(vectors).zip(texts) {
            check_dims(&vector, index_config.dims)?;
            per_put[position].push(FieldVector { field, vector });
            per_put_texts[position].push(text);
        }
        let native = self.inner.native_lexical;
        for ((write, vectors), texts) in writes.iter_mut().zip(per_put).zip(&mut per_put_texts) {
            if let Write::Put(put) = write {
                put.vectors = Some(vectors);
                if native {
                    put.texts = Some(std::mem::take(texts));
                }
            }
        }
        Ok(per_put_texts)
    }

    /// Restarts the TTL of `keys` (rows known to have one).
    async fn refresh(&self, keys: Vec<ItemKey>, now: DateTime<Utc>) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        self.inner.backend.refresh(&keys, now).await
    }

    /// Deletes expired items and drops their vectors.
    #[tracing::instrument(name = "store.sweep", level = "debug", skip_all,
        fields(backend = self.inner.backend.name(), rows = Empty))]
    pub async fn sweep_expired(&self) -> Result<usize> {
        let removed = self.inner.backend.sweep(self.now()).await?;
        record("store.sweep", "rows", removed.len());
        if let Some(lexical) = &self.inner.lexical {
            for key in &removed {
                lexical.remove(key);
            }
        }
        if let Some(index) = self.index() {
            for key in &removed {
                index.remove(key);
            }
        }
        Ok(removed.len())
    }

    /// Sweeps every `sweep_interval` on the current tokio runtime until the handle drops.
    pub fn start_sweeper(&self) -> SweeperHandle {
        let engine = self.clone();
        let every = self.inner.config.ttl.sweep_interval;
        SweeperHandle::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await;
            loop {
                ticks.tick().await;
                // A failed sweep (server away) is retried at the next tick.
                let _ = engine.sweep_expired().await;
            }
        })
    }
}

/// Records `field` on the operation's own span `name` (see [`operation_span`]).
fn record(name: &str, field: &str, value: usize) {
    if let Some(span) = operation_span(&[name]) {
        span.record(field, value);
    }
}

/// Records on the current span the namespace of a one-op batch (a search's prefix), the
/// common case of the store's conveniences.
fn record_namespace(ops: &[Op]) {
    let ([op], Some(span)) = (ops, operation_span(&["store.batch"])) else {
        return;
    };
    let namespace = match op {
        Op::Get(op) => &op.namespace,
        Op::Put(op) => &op.namespace,
        Op::Search(op) => &op.namespace_prefix,
        Op::ListNamespaces(_) => return,
    };
    span.record("namespace", namespace.joined());
}

/// Keeps the last put to each key, in the place of the first one; `embed_as` (empty or one
/// entry per write) follows its write.
fn last_put_wins(writes: Vec<Write>, embed_as: Vec<Index>) -> (Vec<Write>, Vec<Index>) {
    let mut slot_of: HashMap<ItemKey, usize> = HashMap::with_capacity(writes.len());
    let mut kept: Vec<Write> = Vec::with_capacity(writes.len());
    let mut kept_as: Vec<Index> = Vec::with_capacity(embed_as.len());
    let mut embed_as = embed_as.into_iter();
    for write in writes {
        let index = embed_as.next();
        let key = match &write {
            Write::Put(put) => &put.key,
            Write::Delete(key) => key,
        };
        match slot_of.get(key) {
            Some(&slot) => {
                kept[slot] = write;
                if let Some(index) = index {
                    kept_as[slot] = index;
                }
            }
            None => {
                slot_of.insert(key.clone(), kept.len());
                kept.push(write);
                kept_as.extend(index);
            }
        }
    }
    (kept, kept_as)
}

/// Items a namespace listing returns: matching, truncated, de-duplicated, sorted label-wise.
fn list_namespaces(all: &[Namespace], op: &ListNamespacesOp) -> Vec<Namespace> {
    let mut found: Vec<Namespace> = all
        .iter()
        .filter(|ns| {
            let labels = ns.labels();
            op.prefix
                .as_deref()
                .is_none_or(|p| p.len() <= labels.len() && pattern_matches(p, &labels[..p.len()]))
                && op.suffix.as_deref().is_none_or(|s| {
                    s.len() <= labels.len() && pattern_matches(s, &labels[labels.len() - s.len()..])
                })
        })
        .map(|ns| match op.max_depth {
            Some(depth) if ns.len() > depth => Namespace::new(ns.labels()[..depth].iter().cloned()),
            _ => ns.clone(),
        })
        .collect();
    found.sort();
    found.dedup();
    found.into_iter().skip(op.offset).take(op.limit).collect()
}

fn pattern_matches(pattern: &[String], labels: &[String]) -> bool {
    pattern
        .iter()
        .zip(labels)
        .all(|(p, l)| p == WILDCARD || p == l)
}

fn check_pattern(pattern: Option<&[String]>) -> Result<()> {
    match pattern {
        Some(labels) => Namespace::new(labels.iter().cloned()).validate_prefix(),
        None => Ok(()),
    }
}

fn check_ttl(minutes: f64) -> Result<f64> {
    if minutes.is_finite() && minutes > 0.0 {
        Ok(minutes)
    } else {
        Err(Error::InvalidValue(format!(
            "a TTL must be a positive number of minutes, got {minutes}"
        )))
    }
}

fn check_dims(vector: &[f32], dims: usize) -> Result<()> {
    if vector.len() != dims {
        return Err(Error::Embedding(format!(
            "the embedder returned a vector of {} dimensions, the index has {dims}",
            vector.len()
        )));
    }
    if vector.iter().any(|x| !x.is_finite()) {
        return Err(Error::Embedding(String::from(
            "the embedder returned a vector with NaN or infinite components",
        )));
    }
    Ok(())
}

/// Checks stored vectors against the index's dimensions.
fn checked_vectors(vectors: Vec<FieldVector>, dims: usize) -> Result<Vec<Vec<f32>>> {
    vectors
        .into_iter()
        .map(|f| {
            if f.vector.len() == dims {
                Ok(f.vector)
            } else {
                Err(Error::Corrupt(format!(
                    "a stored vector of field `{}` has {} dimensions, the index has {dims}",
                    f.field,
                    f.vector.len()
                )))
            }
        })
        .collect()
}

fn check_index_config(index: &IndexConfig) -> Result<()> {
    if index.dims == 0 {
        return Err(Error::InvalidConfig(String::from(
            "an index needs at least one dimension",
        )));
    }
    if index.embedder.dims() != index.dims {
        return Err(Error::InvalidConfig(format!(
            "the index has {} dimensions but its embedder makes {}",
            index.dims,
            index.embedder.dims()
        )));
    }
    check_paths(&index.fields)
}

fn check_paths(paths: &[String]) -> Result<()> {
    if paths.is_empty() {
        return Err(Error::InvalidConfig(String::from(
            "an index needs at least one field path (use `$` for the whole value)",
        )));
    }
    Ok(())
}

/// The length of a value's compact JSON encoding, without building it.
fn json_size<T: Serialize + ?Sized>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing JSON values cannot fail; a failure would only undercount.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// An upper bound of [`json_size`] that reads no string's bytes: a string encodes to at most
/// six bytes per byte (`\u001f`) plus its quotes. Numbers are short: encoded exactly.
fn json_size_bound(value: &Object) -> usize {
    fn string(s: &str) -> usize {
        s.len().saturating_mul(6).saturating_add(2)
    }
    fn any(value: &serde_json::Value) -> usize {
        use serde_json::Value;
        match value {
            Value::Null => 4,
            Value::Bool(_) => 5,
            Value::Number(n) => json_size(n),
            Value::String(s) => string(s),
            // Brackets, and a separator after every element (one more than needed).
            Value::Array(items) => items.iter().fold(2, |sum: usize, item| {
                sum.saturating_add(any(item)).saturating_add(1)
            }),
            Value::Object(map) => object(map),
        }
    }
    fn object(map: &Object) -> usize {
        // Braces; a `:` and a separator per entry.
        map.iter().fold(2, |sum: usize, (key, value)| {
            sum.saturating_add(string(key))
                .saturating_add(any(value))
                .saturating_add(2)
        })
    }
    object(value)
}

/// Implements [`Store`](crate::Store) for a type with an `engine: Engine<_>` field, by
/// handing every call to the engine.
#[macro_export]
macro_rules! forward_store {
    ($store:ty) => {
        #[$crate::raw::async_trait]
        impl $crate::Store for $store {
            async fn batch(&self, ops: Vec<$crate::Op>) -> $crate::Result<Vec<$crate::OpResult>> {
                self.engine.batch(ops).await
            }

            async fn sweep_expired(&self) -> $crate::Result<usize> {
                self.engine.sweep_expired().await
            }

            fn start_sweeper(&self) -> $crate::SweeperHandle {
                self.engine.start_sweeper()
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{InMemoryStore, StoreExt};

    fn obj(value: serde_json::Value) -> Object {
        match value {
            serde_json::Value::Object(map) => map,
            other => Object::from_iter([(String::from("v"), other)]),
        }
    }

    #[test]
    fn size_bound_never_undercounts() {
        let values = [
            json!({}),
            json!({"": ""}),
            json!({"ctrl": "\u{0}\u{1f}\n\t\"\\", "\u{1}key": "é✓😀\u{7f}\u{2028}"}),
            json!({"n": [u64::MAX, i64::MIN, f64::MAX, -0.0, 1e-300, 0.1, 3]}),
            json!({"a": [null, true, false, [], {}, [[{"b": [1, "\u{5}"]}]]]}),
            json!({"text": "plain words only", "kind": "k3", "n": 17}),
        ];
        for value in values {
            let value = obj(value);
            let exact = serde_json::to_string(&value).map(|s| s.len()).unwrap_or(0);
            assert_eq!(json_size(&value), exact);
            assert!(json_size_bound(&value) >= exact, "{value:?}");
        }
    }

    #[tokio::test]
    async fn the_limit_applies_to_the_exact_size() {
        // A value whose bound is far over its exact size (no string needs escaping).
        let value = json!({"text": "x".repeat(100)});
        let exact = serde_json::to_string(&value).map(|s| s.len()).unwrap_or(0);
        assert!(json_size_bound(&obj(value.clone())) > exact);
        let at_limit = |max_value_bytes| {
            InMemoryStore::with_config(StoreConfig {
                max_value_bytes,
                ..StoreConfig::new()
            })
        };
        let store = at_limit(exact).unwrap();
        store.put(["ns"], "fits", value.clone()).await.unwrap();
        let store = at_limit(exact - 1).unwrap();
        let err = store.put(["ns"], "over", value).await.unwrap_err();
        let Error::InvalidValue(message) = err else {
            panic!("{err:?}")
        };
        assert!(message.contains(&format!("is {exact} bytes")), "{message}");
        assert!(store.get(["ns"], "over").await.unwrap().is_none());
    }

    #[test]
    fn timestamps_strictly_increase_in_whole_microseconds() {
        let engine = Engine::new(crate::memory::MemoryBackend::default(), StoreConfig::new())
            .unwrap_or_else(|e| panic!("{e}"));
        let mut last = engine.now();
        for _ in 0..10_000 {
            let now = engine.now();
            assert!(now > last);
            assert_eq!(now.timestamp_subsec_nanos() % 1000, 0);
            last = now;
        }
    }
}
