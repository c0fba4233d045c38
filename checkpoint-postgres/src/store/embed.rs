//! Embedding items another writer changed (Python's `PostgresStore`, a store without an
//! index, any SQL client): their vectors are made here, from the store's index fields, by
//! whichever process reads the change first.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::Value;

use super::convert::{MAX_ID_BYTES, Timestamp};
use super::queries::Unembedded;
use waypoint_store::raw::FieldVector;
use waypoint_store::raw::index_texts;
use waypoint_store::{Error, IndexConfig, ItemKey, Result};

/// Most items one search embeds before it runs; the rest wait for the next.
pub(crate) const BATCH: i64 = 128;

/// How long an item the embedder refused is left alone.
const REFUSED_BACKOFF: Duration = Duration::from_secs(60);

/// How long items are left alone after the embedder failed on the first of them (it is
/// probably away rather than refusing each of them).
const AWAY_BACKOFF: Duration = Duration::from_secs(1);

/// Items whose embedding failed, each at the version that failed, until when to leave it.
#[derive(Default)]
pub(crate) struct Failures {
    items: Mutex<HashMap<ItemKey, (Timestamp, Instant)>>,
}

impl Failures {
    /// The items to leave alone now, at the version that failed (a newer one is tried).
    pub(crate) fn current(&self) -> Vec<(ItemKey, Timestamp)> {
        let mut items = self.items.lock();
        let now = Instant::now();
        items.retain(|_, (_, until)| *until > now);
        items
            .iter()
            .map(|(key, (at, _))| (key.clone(), *at))
            .collect()
    }

    fn record(&self, key: ItemKey, at: Timestamp, backoff: Duration) {
        self.items
            .lock()
            .insert(key, (at, Instant::now() + backoff));
    }
}

/// The vectors of one item, ready to store: key, the version embedded, every field's vector.
pub(crate) type Embedded = (ItemKey, Timestamp, Vec<FieldVector>);

/// The texts of one item: its index fields' texts, each with its field name (`path`, or
/// `path.i` when a path yields several), as a put embeds them.
fn texts_of(item: &Unembedded, fields: &[String]) -> Result<Vec<(String, String)>> {
    let value: Value = serde_json::from_str(&item.value).map_err(|e| {
        Error::Corrupt(format!(
            "the value of `{}` in {:?} is not JSON: {e}",
            item.key.key,
            item.key.namespace.labels()
        ))
    })?;
    let texts = index_texts(&value, fields);
    if let Some((field, _)) = texts
        .iter()
        .find(|(field, _)| field.len() > MAX_ID_BYTES || field.contains('\0'))
    {
        return Err(Error::InvalidValue(format!(
            "the index path {field:?} of `{}` cannot be stored (NUL, or over {MAX_ID_BYTES} bytes)",
            item.key.key
        )));
    }
    Ok(texts)
}

/// Embeds `texts` (field, text) with one embedder call, checking what comes back.
async fn embed_texts(
    index: &IndexConfig,
    texts: Vec<(String, String)>,
) -> Result<Vec<FieldVector>> {
    if texts.is_empty() {
        return Ok(Vec::new());
    }
    let (fields, texts): (Vec<String>, Vec<String>) = texts.into_iter().unzip();
    let vectors = index.embedder.embed_documents(&texts).await?;
    if vectors.len() != texts.len() {
        return Err(Error::Embedding(format!(
            "asked for {} vectors, got {}",
            texts.len(),
            vectors.len()
        )));
    }
    if let Some(bad) = vectors
        .iter()
        .find(|v| v.len() != index.dims || v.iter().any(|x| !x.is_finite()))
    {
        return Err(Error::Embedding(format!(
            "the embedder returned a vector of {} dimensions (the index has {}), or one with NaN or infinite components",
            bad.len(),
            index.dims
        )));
    }
    Ok(fields
        .into_iter()
        .zip(vectors)
        .map(|(field, vector)| FieldVector { field, vector })
        .collect())
}

/// Embeds `items` with the store's index fields: all in one embedder call, or, when that
/// fails, one item at a time, so that an item the embedder refuses (a text too long for it,
/// say) holds up no other. Items that fail are recorded in `failures` and left out.
pub(crate) async fn embed_items(
    index: &IndexConfig,
    items: Vec<Unembedded>,
    failures: &Failures,
) -> Vec<Embedded> {
    let mut ready = Vec::with_capacity(items.len());
    let mut pending = Vec::with_capacity(items.len());
    for item in items {
        match texts_of(&item, &index.fields) {
            Ok(texts) => pending.push((item, texts)),
            Err(_) => failures.record(item.key, item.updated_at, REFUSED_BACKOFF),
        }
    }
    // One call for every text of every item, the common case.
    let all: Vec<(String, String)> = pending.iter().flat_map(|(_, t)| t.clone()).collect();
    if let Ok(mut vectors) = embed_texts(index, all).await {
        for (item, texts) in pending {
            let rest = vectors.split_off(texts.len());
            ready.push((item.key, item.updated_at, vectors));
            vectors = rest;
        }
        return ready;
    }
    let mut pending = pending.into_iter();
    let mut any_embedded = false;
    while let Some((item, texts)) = pending.next() {
        match embed_texts(index, texts).await {
            Ok(vectors) => {
                any_embedded = true;
                ready.push((item.key, item.updated_at, vectors));
            }
            Err(_) if !any_embedded => {
                // The first one failed as well: the embedder is probably away. Try again soon,
                // with this item last.
                failures.record(item.key, item.updated_at, REFUSED_BACKOFF);
                for (item, _) in pending {
                    failures.record(item.key, item.updated_at, AWAY_BACKOFF);
                }
                return ready;
            }
            Err(_) => failures.record(item.key, item.updated_at, REFUSED_BACKOFF),
        }
    }
    ready
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;
    use chrono::DateTime;

    use super::*;
    use waypoint_store::{Embedder, HashingEmbedder};

    /// The hashing embedder, refusing any call with a text containing "REFUSED" (or every
    /// call, when `away`).
    #[derive(Debug)]
    struct Picky {
        away: bool,
    }

    #[async_trait]
    impl Embedder for Picky {
        fn dims(&self) -> usize {
            8
        }

        async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
            if self.away || texts.iter().any(|t| t.contains("REFUSED")) {
                return Err(Error::Embedding(String::from("refused")));
            }
            HashingEmbedder::new(8).embed_documents(texts).await
        }
    }

    fn item(key: &str, value: &str) -> Unembedded {
        let at = DateTime::from_timestamp_micros(1_700_000_000_000_000).expect("in range");
        Unembedded {
            key: ItemKey::new(["ns"], key),
            value: value.to_owned(),
            updated_at: Timestamp::new(at),
        }
    }

    #[test]
    fn fields_are_named_as_a_put_names_them() -> Result<()> {
        let fields = [String::from("text"), String::from("tags[*]")];
        let texts = texts_of(&item("k", r#"{"text": "x", "tags": ["a", "b"]}"#), &fields)?;
        let names: Vec<&str> = texts.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(names, ["text", "tags[*].0", "tags[*].1"]);
        assert!(matches!(
            texts_of(&item("k", "not json"), &fields),
            Err(Error::Corrupt(_))
        ));
        Ok(())
    }

    #[tokio::test]
    async fn a_refused_item_holds_up_no_other() {
        let index = IndexConfig::new(Arc::new(Picky { away: false })).fields(["text"]);
        let failures = Failures::default();
        let items = vec![
            item("one", r#"{"text": "first"}"#),
            item("bad", r#"{"text": "REFUSED"}"#),
            item("none", r#"{"other": 1}"#),
            item("two", r#"{"text": "second"}"#),
        ];
        let ready = embed_items(&index, items, &failures).await;
        let keys: Vec<&str> = ready.iter().map(|(k, _, _)| k.key.as_str()).collect();
        assert_eq!(keys, ["one", "none", "two"]);
        assert!(ready[1].2.is_empty(), "no text, no vectors");
        let skipped: Vec<String> = failures.current().into_iter().map(|(k, _)| k.key).collect();
        assert_eq!(skipped, ["bad"]);
    }

    #[tokio::test]
    async fn an_embedder_away_leaves_the_rest_to_be_tried_again_soon() {
        let index = IndexConfig::new(Arc::new(Picky { away: true })).fields(["text"]);
        let failures = Failures::default();
        let items = vec![
            item("one", r#"{"text": "first"}"#),
            item("two", r#"{"text": "second"}"#),
        ];
        assert!(embed_items(&index, items, &failures).await.is_empty());
        assert_eq!(failures.current().len(), 2);
        // `two` waits only AWAY_BACKOFF.
        tokio::time::sleep(AWAY_BACKOFF + Duration::from_millis(50)).await;
        let left: Vec<String> = failures.current().into_iter().map(|(k, _)| k.key).collect();
        assert_eq!(left, ["one"]);
    }
}
