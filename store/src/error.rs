//! The one error type of the store crate.

/// Result alias used across the store crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Boxed driver error kept as the source of [`Error::Backend`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything a store can report; callers match on the variant.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A namespace is empty, has an empty label, a label with `.`, or the reserved root.
    #[error("invalid namespace {namespace:?}: {reason}")]
    InvalidNamespace {
        /// The namespace as given.
        namespace: Vec<String>,
        /// Which rule it breaks.
        reason: &'static str,
    },

    /// A search filter uses an unknown operator or an operand the operator cannot take.
    #[error("invalid filter: {0}")]
    InvalidFilter(String),

    /// A value is not a JSON object, is too large, or a vector has the wrong dimensions.
    #[error("invalid value: {0}")]
    InvalidValue(String),

    /// The store's configuration cannot work (no index for a query, zero dimensions, ...).
    #[error("invalid config: {0}")]
    InvalidConfig(String),

    /// The embedder failed, timed out or answered with something unusable.
    #[error("embedding failed: {0}")]
    Embedding(String),

    /// A stored value or vector could not be decoded.
    #[error("corrupt stored data: {0}")]
    Corrupt(String),

    /// The backend does not implement this operation.
    #[error("`{operation}` is not supported by the {backend} backend")]
    Unsupported {
        /// The operation that was called.
        operation: &'static str,
        /// The backend that lacks it.
        backend: &'static str,
    },

    /// The storage engine failed (connection lost, disk full, corrupt database, ...).
    #[error("{backend} backend error: {source}")]
    Backend {
        /// The backend that failed.
        backend: &'static str,
        /// The driver's own error.
        #[source]
        source: BoxError,
    },
}

impl Error {
    /// Builds an [`Error::Backend`] from any driver error.
    pub fn backend(backend: &'static str, source: impl Into<BoxError>) -> Self {
        Error::Backend {
            backend,
            source: source.into(),
        }
    }
}
