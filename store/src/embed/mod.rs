//! Embedders turn texts into vectors for the semantic index.

mod hashing;
#[cfg(feature = "minilm")]
mod minilm;
#[cfg(feature = "openai")]
mod openai;

pub use hashing::HashingEmbedder;
#[cfg(feature = "minilm")]
pub use minilm::{MINILM_BATCH, MiniLmEmbedder};
#[cfg(feature = "openai")]
pub use openai::{OpenAiConfig, OpenAiEmbedder};

use async_trait::async_trait;

use crate::Result;

/// Turns texts into vectors of a fixed dimension.
///
/// A store calls [`embed_documents`](Embedder::embed_documents) once per batch with every text
/// the batch produces, and [`embed_query`](Embedder::embed_query) once per search.
#[async_trait]
pub trait Embedder: Send + Sync + std::fmt::Debug {
    /// The dimension of every vector it returns.
    fn dims(&self) -> usize;

    /// One vector per text, in order. Failures are [`Error::Embedding`](crate::Error::Embedding).
    async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>>;

    /// The vector of a search query.
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        let mut vectors = self.embed_documents(&[text.to_owned()]).await?;
        vectors
            .pop()
            .ok_or_else(|| crate::Error::Embedding(String::from("the embedder returned no vector")))
    }
}
