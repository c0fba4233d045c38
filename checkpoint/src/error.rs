//! The one error type of the checkpoint crate.

/// Result alias used across the checkpoint crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Boxed driver error kept as the source of [`Error::Backend`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything a checkpointer or serializer can report; callers match on the variant.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The config is missing something the operation needs (e.g. `checkpoint_id` for writes).
    #[error("invalid config: {0}")]
    InvalidConfig(String),

    /// A value could not be encoded or decoded: unknown tag, truncated or hostile bytes.
    #[error("serialization failed for tag `{tag}`{}: {message}", path.as_deref().map(|p| format!(" at `{p}`")).unwrap_or_default())]
    Serialization {
        /// The type tag of the value (e.g. `msgpack`).
        tag: String,
        /// The path of the field that failed, such as `messages[3].content`, when known.
        path: Option<String>,
        /// What went wrong.
        message: String,
    },

    /// An encrypted value could not be opened: wrong key, tampered or moved bytes, refused plaintext.
    #[error("decryption failed: {0}")]
    Decrypt(String),

    /// The backend does not implement this optional operation (see `capabilities()`).
    #[error("`{operation}` is not supported by the {backend} backend")]
    Unsupported {
        /// The operation that was called.
        operation: &'static str,
        /// The backend that lacks it.
        backend: &'static str,
    },

    /// The operation conflicts with existing data (e.g. copying onto a non-empty thread).
    #[error("conflict: {0}")]
    Conflict(String),

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

    /// Builds an [`Error::Serialization`] without a field path.
    pub fn serialization(tag: impl Into<String>, message: impl std::fmt::Display) -> Self {
        Error::Serialization {
            tag: tag.into(),
            path: None,
            message: message.to_string(),
        }
    }
}
