//! How a store is set up: its semantic index and its TTL policy.

use std::sync::Arc;
use std::time::Duration;

use crate::embed::{Embedder, HashingEmbedder};

/// How vectors are compared; scores are higher-is-closer in every case.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Distance {
    /// Cosine similarity, in [-1, 1].
    #[default]
    Cosine,
    /// Dot product.
    Dot,
    /// Negative Euclidean distance.
    L2,
}

/// Parameters of the approximate (HNSW) index.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AnnConfig {
    /// Below this many vectors, search is exact (a flat scan); above, the HNSW graph answers.
    pub flat_threshold: usize,
    /// Neighbours per node in the graph.
    pub m: usize,
    /// Candidate list size while building.
    pub ef_construction: usize,
    /// Candidate list size while searching (raised to the number of results asked for).
    pub ef_search: usize,
    /// The graph is rebuilt in the background once this share of its nodes is tombstoned.
    pub rebuild_ratio: f32,
}

impl Default for AnnConfig {
    fn default() -> Self {
        AnnConfig {
            flat_threshold: 4096,
            m: 16,
            ef_construction: 100,
            ef_search: 64,
            rebuild_ratio: 0.25,
        }
    }
}

/// The semantic index of a store.
#[derive(Clone, Debug)]
pub struct IndexConfig {
    /// Vector dimensions; every embedding must have exactly this many.
    pub dims: usize,
    /// Turns texts into vectors.
    pub embedder: Arc<dyn Embedder>,
    /// JSON paths embedded by default (`$` is the whole value).
    pub fields: Vec<String>,
    /// How vectors compare.
    pub distance: Distance,
    /// Approximate-index tuning.
    pub ann: AnnConfig,
    /// Whether the same texts are also indexed for lexical and hybrid search (see
    /// [`SearchMode`](crate::SearchMode)): BM25 in process (memory, Redis), or inside the
    /// database where the backend ranks texts itself (SQLite's FTS5 `bm25()`, PostgreSQL's
    /// `ts_rank_cd`, pgvector mode included). A backend that searches its own vectors but not
    /// its texts refuses it at open with `Error::Unsupported`.
    pub lexical: bool,
}

impl IndexConfig {
    /// An index over the whole value (`$`) with cosine similarity.
    pub fn new(embedder: Arc<dyn Embedder>) -> Self {
        IndexConfig {
            dims: embedder.dims(),
            embedder,
            fields: vec![String::from("$")],
            distance: Distance::Cosine,
            ann: AnnConfig::default(),
            lexical: false,
        }
    }

    /// The offline hashing embedder with `dims` dimensions: deterministic, for tests and demos.
    pub fn hashing(dims: usize) -> Self {
        Self::new(Arc::new(HashingEmbedder::new(dims)))
    }

    /// Embeds these paths by default.
    pub fn fields<I: IntoIterator<Item = S>, S: Into<String>>(mut self, fields: I) -> Self {
        self.fields = fields.into_iter().map(Into::into).collect();
        self
    }

    /// Compares vectors with `distance`.
    pub fn distance(mut self, distance: Distance) -> Self {
        self.distance = distance;
        self
    }

    /// Tunes the approximate index.
    pub fn ann(mut self, ann: AnnConfig) -> Self {
        self.ann = ann;
        self
    }

    /// Also indexes the texts for lexical and hybrid search.
    pub fn lexical(mut self, on: bool) -> Self {
        self.lexical = on;
        self
    }
}

/// Expiry policy; TTLs are in minutes, fractions kept exactly.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TtlConfig {
    /// TTL of puts that do not give one; `None` keeps them forever.
    pub default_ttl: Option<f64>,
    /// Whether reads (get and search) restart the TTL of what they return, unless the op says.
    pub refresh_on_read: bool,
    /// How often [`Store::start_sweeper`](crate::Store) deletes expired items.
    pub sweep_interval: Duration,
}

impl Default for TtlConfig {
    fn default() -> Self {
        TtlConfig {
            default_ttl: None,
            refresh_on_read: true,
            sweep_interval: Duration::from_secs(5 * 60),
        }
    }
}

/// Everything a store is opened with.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// The semantic index; without one, searches with a query are refused.
    pub index: Option<IndexConfig>,
    /// Expiry policy.
    pub ttl: TtlConfig,
    /// Largest JSON encoding of a value accepted by a put, in bytes.
    pub max_value_bytes: usize,
    /// Whether semantic searches embed, with this store's index, the items other writers
    /// (Python's `PostgresStore`, a store without an index) added or changed without vectors,
    /// where the backend can tell (PostgreSQL; default on). Turn it off in a process whose
    /// embedder is not the application's (an inspection tool): it then uses the vectors
    /// others made and leaves such items out until one of them embeds them.
    pub embed_others: bool,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            index: None,
            ttl: TtlConfig::default(),
            max_value_bytes: 16 << 20,
            embed_others: true,
        }
    }
}

impl StoreConfig {
    /// No index, no default TTL.
    pub fn new() -> Self {
        Self::default()
    }

    /// Turns embedding other writers' items on or off (see
    /// [`embed_others`](Self::embed_others)).
    pub fn embed_others(mut self, on: bool) -> Self {
        self.embed_others = on;
        self
    }

    /// Adds a semantic index.
    pub fn index(mut self, index: IndexConfig) -> Self {
        self.index = Some(index);
        self
    }

    /// Sets the expiry policy.
    pub fn ttl(mut self, ttl: TtlConfig) -> Self {
        self.ttl = ttl;
        self
    }
}
