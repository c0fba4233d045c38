//! all-MiniLM-L6-v2 (sentence-transformers) run locally on the CPU with candle: BERT, mean
//! pooling over the attention mask, L2 normalisation, as the sentence-transformers pipeline does.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{Encoding, Tokenizer, TruncationParams};

use super::Embedder;
use crate::{Error, Result};

/// Texts per forward pass in [`MiniLmEmbedder::embed_documents`].
pub const MINILM_BATCH: usize = 32;

/// Longest input in tokens when the model directory has no `sentence_bert_config.json`
/// (all-MiniLM-L6-v2's own `max_seq_length`).
const DEFAULT_MAX_SEQ_LENGTH: usize = 256;

/// A sentence-transformers BERT model (such as all-MiniLM-L6-v2) loaded from a directory.
///
/// Cloning shares the loaded weights.
#[derive(Clone)]
pub struct MiniLmEmbedder {
    inner: Arc<Inner>,
}

/// The loaded model, shared with the blocking threads that run it.
struct Inner {
    dir: PathBuf,
    model: BertModel,
    tokenizer: Tokenizer,
    dims: usize,
    max_seq_length: usize,
}

#[derive(serde::Deserialize)]
struct SentenceBertConfig {
    max_seq_length: usize,
}

impl MiniLmEmbedder {
    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` (and
    /// `sentence_bert_config.json`'s `max_seq_length` if present, else 256) from `dir`.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        let fail = |what: String| {
            Error::InvalidConfig(format!("MiniLM model at {}: {what}", dir.display()))
        };
        let read = |name: &str| {
            std::fs::read(dir.join(name)).map_err(|e| fail(format!("cannot read {name}: {e}")))
        };

        let config: Config = serde_json::from_slice(&read("config.json")?)
            .map_err(|e| fail(format!("config.json is not a BERT config: {e}")))?;
        let max_seq_length = if dir.join("sentence_bert_config.json").exists() {
            let st: SentenceBertConfig =
                serde_json::from_slice(&read("sentence_bert_config.json")?)
                    .map_err(|e| fail(format!("bad sentence_bert_config.json: {e}")))?;
            st.max_seq_length
        } else {
            DEFAULT_MAX_SEQ_LENGTH
        };
        if max_seq_length == 0 || max_seq_length > config.max_position_embeddings {
            return Err(fail(format!(
                "max_seq_length {max_seq_length} is not within 1..={}",
                config.max_position_embeddings
            )));
        }

        let mut tokenizer = Tokenizer::from_bytes(read("tokenizer.json")?)
            .map_err(|e| fail(format!("bad tokenizer.json: {e}")))?;
        // Padding is done here per batch; tokenizer.json's own fixed padding would pad every
        // text to its length.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_seq_length,
                ..TruncationParams::default()
            }))
            .map_err(|e| fail(format!("cannot set truncation: {e}")))?;

        let device = Device::Cpu;
        let weights = candle_core::safetensors::load_buffer(&read("model.safetensors")?, &device)
            .map_err(|e| fail(format!("bad model.safetensors: {e}")))?;
        let vb = VarBuilder::from_tensors(weights, DType::F32, &device);
        let model = BertModel::load(vb, &config)
            .map_err(|e| fail(format!("model.safetensors does not match config.json: {e}")))?;

        Ok(MiniLmEmbedder {
            inner: Arc::new(Inner {
                dir,
                model,
                tokenizer,
                dims: config.hidden_size,
                max_seq_length,
            }),
        })
    }

    /// Longest input in tokens (with `[CLS]` and `[SEP]`); longer texts are truncated.
    pub fn max_seq_length(&self) -> usize {
        self.inner.max_seq_length
    }

    /// Token count of each text as the model sees it (truncated, with special tokens).
    pub fn token_counts(&self, texts: &[String]) -> Result<Vec<usize>> {
        Ok(self
            .inner
            .tokenize(texts)?
            .iter()
            .map(Encoding::len)
            .collect())
    }

    /// Embeds `texts` on the calling thread, in one forward pass per `batch` texts (texts of
    /// similar length are batched together); one unit vector per text, in order.
    pub fn embed_blocking(&self, texts: &[String], batch: usize) -> Result<Vec<Vec<f32>>> {
        self.inner.embed(texts, batch.max(1))
    }
}

impl Inner {
    fn tokenize(&self, texts: &[String]) -> Result<Vec<Encoding>> {
        self.tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| Error::Embedding(format!("tokenizing failed: {e}")))
    }

    fn embed(&self, texts: &[String], batch: usize) -> Result<Vec<Vec<f32>>> {
        let encodings = self.tokenize(texts)?;
        // Batching texts of similar length keeps padding (wasted work) small.
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let mut vectors = vec![Vec::new(); encodings.len()];
        for chunk in order.chunks(batch) {
            let group: Vec<&Encoding> = chunk.iter().map(|&i| &encodings[i]).collect();
            let embedded = self
                .forward(&group)
                .map_err(|e| Error::Embedding(format!("MiniLM forward pass failed: {e}")))?;
            for (&i, vector) in chunk.iter().zip(embedded) {
                vectors[i] = vector;
            }
        }
        Ok(vectors)
    }

    /// One forward pass over `group`, padded to its longest text.
    fn forward(&self, group: &[&Encoding]) -> candle_core::Result<Vec<Vec<f32>>> {
        let len = group.iter().map(|e| e.len()).max().unwrap_or(0);
        let padded = |field: fn(&Encoding) -> &[u32]| -> Vec<u32> {
            group
                .iter()
                .flat_map(|e| {
                    let values = field(e);
                    values
                        .iter()
                        .copied()
                        .chain(std::iter::repeat_n(0, len - values.len()))
                })
                .collect()
        };
        let shape = (group.len(), len);
        let device = &self.model.device;
        let ids = Tensor::from_vec(padded(Encoding::get_ids), shape, device)?;
        let types = Tensor::from_vec(padded(Encoding::get_type_ids), shape, device)?;
        let mask = Tensor::from_vec(padded(Encoding::get_attention_mask), shape, device)?;

        let hidden = self.model.forward(&ids, &types, Some(&mask))?;
        // Mean over the real tokens, then unit length (sentence-transformers' Pooling and
        // Normalize modules, with their clamps against division by zero).
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1e-9, f32::MAX)?;
        let mean = summed.broadcast_div(&counts)?;
        let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f32::MAX)?;
        mean.broadcast_div(&norms)?.to_vec2::<f32>()
    }
}

impl fmt::Debug for MiniLmEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MiniLmEmbedder")
            .field("dir", &self.inner.dir)
            .field("dims", &self.inner.dims)
            .field("max_seq_length", &self.inner.max_seq_length)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Embedder for MiniLmEmbedder {
    fn dims(&self) -> usize {
        self.inner.dims
    }

    /// Runs the model on tokio's blocking pool, [`MINILM_BATCH`] texts per forward pass.
    async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let inner = Arc::clone(&self.inner);
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || inner.embed(&texts, MINILM_BATCH))
            .await
            .map_err(|e| Error::Embedding(format!("the MiniLM task failed: {e}")))?
    }
}
