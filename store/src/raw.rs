//! For backend authors: what a storage engine implements, and the engine that turns it into a
//! [`Store`](crate::Store).
//!
//! A backend stores rows and vectors and nothing more; [`Engine`] owns every behaviour of the
//! store contract (validation, batch order, filters, pagination, TTL policy, embedding, the
//! in-process vector index). A new backend implements [`Backend`], wraps `Engine<ItsBackend>`
//! in a struct whose field is named `engine`, and calls [`forward_store!`](crate::forward_store)
//! on it; then it runs the crate's `conformance` suite, as the SQLite, PostgreSQL and Redis
//! stores (in `waypoint-checkpoint-sqlite`, `-postgres`, `-redis`) and [`InMemoryStore`](crate::InMemoryStore) do.

pub use async_trait::async_trait;
use chrono::{DateTime, Utc};

pub use crate::engine::Engine;
pub use crate::memory::expiry;
pub use crate::path::index_texts;
pub use crate::store::json_kind;
use crate::{Item, ItemKey, Namespace, Object, Result};

/// A stored row: the item plus its TTL.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The item.
    pub item: Item,
    /// Its TTL in minutes, if it has one.
    pub ttl_minutes: Option<f64>,
}

/// One embedded field of an item.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldVector {
    /// The path that produced it (`$`, `a.b`, `a.b.0` when a path yields several texts).
    pub field: String,
    /// The embedding.
    pub vector: Vec<f32>,
}

/// Every stored vector of one item.
#[derive(Clone, Debug, PartialEq)]
pub struct ItemVectors {
    /// The item.
    pub key: ItemKey,
    /// Its vectors, one per embedded field.
    pub vectors: Vec<FieldVector>,
}

/// An insert-or-update of one item.
#[derive(Clone, Debug, PartialEq)]
pub struct Upsert {
    /// The item.
    pub key: ItemKey,
    /// The new document.
    pub value: Object,
    /// TTL in minutes: `expires_at = now + ttl`; `None` never expires.
    pub ttl_minutes: Option<f64>,
    /// `None` when the store has no index (the vector table is not touched); otherwise the
    /// item's complete new set of vectors, replacing every old one (empty removes them all).
    pub vectors: Option<Vec<FieldVector>>,
    /// For a backend that ranks texts itself ([`Backend::searches_lexical`]) when the store
    /// has a lexical index: the item's indexed texts, replacing the old ones (empty removes
    /// them); `None` otherwise.
    pub texts: Option<Vec<String>>,
}

/// One change a batch makes.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// Insert or update; `created_at` is kept on update, `updated_at = now`.
    Put(Upsert),
    /// Remove the item and its vectors; a missing item is not an error.
    Delete(ItemKey),
}

/// Changes other processes made since a sequence number (backends shared between processes).
#[derive(Clone, Debug, PartialEq)]
pub struct Changes {
    /// The newest sequence number seen; pass it to the next call.
    pub last_seq: i64,
    /// Items written or deleted since (may repeat, may include this process's own writes).
    pub keys: Vec<ItemKey>,
    /// False when the log no longer reaches back that far: reload every vector instead.
    pub complete: bool,
}

/// A nearest-neighbour query a backend that searches its own vectors runs
/// ([`Backend::search_vectors`]).
#[derive(Clone, Copy, Debug)]
pub struct VectorQuery<'a> {
    /// The query's embedding.
    pub vector: &'a [f32],
    /// Only items under this namespace prefix (whole labels; empty = all).
    pub prefix: &'a Namespace,
    /// Only items whose value contains this object (JSON containment), when given.
    pub contains: Option<&'a Object>,
    /// How many items at most: the nearest, each scored by its best field.
    pub limit: usize,
}

/// A lexical query a backend that ranks its own texts runs ([`Backend::search_lexical`]).
#[derive(Clone, Copy, Debug)]
pub struct LexicalQuery<'a> {
    /// The query's distinct tokens ([`crate::lexical::query_terms`]), never empty; any item
    /// holding one of them matches.
    pub terms: &'a [String],
    /// Only items under this namespace prefix (whole labels; empty = all).
    pub prefix: &'a Namespace,
    /// How many items at most: the best ranked.
    pub limit: usize,
}

/// The storage engine under a store. Rows whose `expires_at <= now` are invisible to every
/// read; `now` always comes from the engine so all backends agree on time.
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// The backend's name in the store's spans (`memory`, `sqlite`, `postgres`, `redis`);
    /// `custom` unless the backend names itself.
    fn name(&self) -> &'static str {
        "custom"
    }

    /// Live rows by key, positionally (`None` when missing or expired).
    async fn get(&self, keys: &[ItemKey], now: DateTime<Utc>) -> Result<Vec<Option<Row>>>;

    /// Calls `visit` with every live row under `prefix` (whole labels; empty = all), ordered
    /// by `updated_at` descending, then joined namespace, then key; stops when `visit` says
    /// false. Streams: memory stays flat however many rows match. `contains`, when given, is a
    /// hint: every row the engine wants has a value containing it (JSON containment), so a
    /// backend may skip others early; the engine checks every row it is given anyway.
    async fn scan(
        &self,
        prefix: &Namespace,
        contains: Option<&Object>,
        now: DateTime<Utc>,
        visit: &mut (dyn FnMut(Row) -> bool + Send),
    ) -> Result<()>;

    /// Sets `expires_at = now + ttl_minutes` on those of `keys` that have a TTL and are live.
    async fn refresh(&self, keys: &[ItemKey], now: DateTime<Utc>) -> Result<()>;

    /// Every distinct namespace holding at least one live row, in any order.
    async fn namespaces(&self, now: DateTime<Utc>) -> Result<Vec<Namespace>>;

    /// Applies all writes atomically (all or nothing), in order.
    async fn write(&self, writes: Vec<Write>, now: DateTime<Utc>) -> Result<()>;

    /// Stored vectors of `keys` (or of every item with `None`), grouped per item.
    async fn vectors(&self, keys: Option<&[ItemKey]>) -> Result<Vec<ItemVectors>>;

    /// Deletes every expired row with its vectors; returns the keys removed.
    async fn sweep(&self, now: DateTime<Utc>) -> Result<Vec<ItemKey>>;

    /// Whether the backend searches vectors itself ([`search_vectors`](Self::search_vectors)):
    /// the engine then keeps no vector index in memory.
    fn searches_vectors(&self) -> bool {
        false
    }

    /// Live rows nearest to `query`, best score first (similarity, higher is better), for a
    /// backend whose [`searches_vectors`](Self::searches_vectors) is true.
    async fn search_vectors(
        &self,
        query: VectorQuery<'_>,
        now: DateTime<Utc>,
    ) -> Result<Vec<(Row, f32)>> {
        let _ = (query, now);
        Err(crate::Error::Unsupported {
            operation: "search_vectors",
            backend: self.name(),
        })
    }

    /// Whether the backend ranks the indexed texts itself ([`search_lexical`](Self::search_lexical),
    /// keeping [`Upsert::texts`]): the engine then keeps no lexical index in memory.
    fn searches_lexical(&self) -> bool {
        false
    }

    /// Live items holding any of the query's terms, best first (higher is better; ties in
    /// any order), for a backend whose [`searches_lexical`](Self::searches_lexical) is true.
    async fn search_lexical(
        &self,
        query: LexicalQuery<'_>,
        now: DateTime<Utc>,
    ) -> Result<Vec<(ItemKey, f32)>> {
        let _ = (query, now);
        Err(crate::Error::Unsupported {
            operation: "search_lexical",
            backend: self.name(),
        })
    }

    /// Writes the texts of every item that has stored vectors but no texts made from its
    /// current value (written before the backend kept texts, or while the store had no
    /// lexical index), for a backend whose [`searches_lexical`](Self::searches_lexical) is
    /// true; called at open when the index asks for `lexical`. Cheap when none is missing.
    async fn backfill_lexical(&self) -> Result<()> {
        Ok(())
    }

    /// Changes logged after `after` by any process; `None` when the backend is not shared.
    async fn changes(&self, after: i64) -> Result<Option<Changes>> {
        let _ = after;
        Ok(None)
    }

    /// The vector index snapshot saved last ([`save_index_snapshot`](Self::save_index_snapshot)),
    /// if any; a backend that keeps none returns `None`.
    async fn load_index_snapshot(&self) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }

    /// Keeps `snapshot`, an opaque encoding of the vector index's graph, in place of the
    /// previous one so that the next open need not rebuild it; a backend without a place for
    /// it does nothing.
    async fn save_index_snapshot(&self, snapshot: Vec<u8>) -> Result<()> {
        let _ = snapshot;
        Ok(())
    }
}

/// A vector as every backend stores it: its components as little-endian `f32`s.
pub fn encode_vector(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Reads a stored vector; `None` when the bytes are not a whole number of `f32`s.
pub fn decode_vector(bytes: &[u8]) -> Option<Vec<f32>> {
    let chunks = bytes.chunks_exact(4);
    if !chunks.remainder().is_empty() {
        return None;
    }
    Some(
        chunks
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_and_torn_bytes_are_refused() {
        let v = vec![0.5, -1.25, f32::MAX, 0.0];
        let bytes = encode_vector(&v);
        assert_eq!(bytes.len(), 16);
        assert_eq!(&bytes[..4], &0.5f32.to_le_bytes());
        assert_eq!(decode_vector(&bytes), Some(v));
        assert_eq!(decode_vector(&bytes[..5]), None);
        assert_eq!(decode_vector(&[]), Some(Vec::new()));
    }
}
