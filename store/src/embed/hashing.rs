//! An offline embedder: signed feature hashing of words and character n-grams.
//!
//! Each text is lower-cased and split into words at whitespace, control characters and
//! punctuation (a fixed list of code points, so no Unicode table can move a boundary). Every
//! word contributes itself, its boundary-padded character bigrams and its boundary-padded
//! character trigrams; scripts written without spaces (Chinese, Japanese, Thai) become one long
//! "word" whose n-grams still overlap with those of a query. Each feature is hashed with 64-bit
//! FNV-1a over its code points and a MurmurHash3 finaliser, which picks a coordinate and a sign;
//! the sum is L2-normalised. The algorithm is fixed (no `std` hasher, no randomness, no
//! platform-dependent float operations before the final normalisation), so vectors are the
//! same on every platform and Rust version, which is what lets stored vectors outlive a
//! process.

use async_trait::async_trait;

use super::Embedder;
use crate::{Error, Result};

/// Weight of a whole-word feature; higher than an n-gram because a shared word says more
/// than a shared pair of letters.
const WORD_WEIGHT: f32 = 2.0;
/// Weight of a boundary-padded character bigram.
const BIGRAM_WEIGHT: f32 = 0.5;
/// Weight of a boundary-padded character trigram.
const TRIGRAM_WEIGHT: f32 = 1.0;

/// The code point standing for a word boundary in padded n-grams (a noncharacter, which no
/// text contains).
const BOUNDARY: u32 = 0xFFFF;

/// Feature-kind tags, hashed first so a word and an n-gram with the same letters differ.
const TAG_WORD: u8 = b'w';
const TAG_BIGRAM: u8 = b'2';
const TAG_TRIGRAM: u8 = b'3';

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// A deterministic, offline embedder hashing words and character n-grams into `dims`
/// coordinates: for tests, demos and lexical similarity without a model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashingEmbedder {
    dims: usize,
}

impl HashingEmbedder {
    /// An embedder with `dims` dimensions; with zero dimensions every trait call fails with
    /// [`Error::InvalidConfig`].
    pub fn new(dims: usize) -> Self {
        HashingEmbedder { dims }
    }

    /// An embedder with `dims` dimensions, refusing zero.
    pub fn try_new(dims: usize) -> Result<Self> {
        if dims == 0 {
            return Err(zero_dims());
        }
        Ok(Self::new(dims))
    }

    /// The unit vector of `text` (the zero vector if it has no word; empty if `dims` is 0).
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let mut vector = vec![0.0f32; self.dims];
        if self.dims == 0 {
            return vector;
        }
        let mut word: Vec<u32> = Vec::with_capacity(32);
        let mut chars = text.chars().flat_map(char::to_lowercase).peekable();
        while chars.peek().is_some() {
            word.clear();
            word.extend(
                chars
                    .by_ref()
                    .take_while(|&c| !is_separator(c))
                    .map(u32::from),
            );
            if !word.is_empty() {
                self.add_word(&word, &mut vector);
            }
        }
        normalise(&mut vector);
        vector
    }

    /// Adds the features of one lower-cased word.
    fn add_word(&self, word: &[u32], vector: &mut [f32]) {
        self.add(feature_hash(TAG_WORD, word), WORD_WEIGHT, vector);
        // Padding lets n-grams mark where a word starts and ends, so "art" in "cart" and "art"
        // alone share only their middle.
        let padded_at = |i: usize| {
            if i == 0 || i > word.len() {
                BOUNDARY
            } else {
                word[i - 1]
            }
        };
        let padded_len = word.len() + 2;
        for start in 0..padded_len - 1 {
            let gram = [padded_at(start), padded_at(start + 1)];
            self.add(feature_hash(TAG_BIGRAM, &gram), BIGRAM_WEIGHT, vector);
        }
        for start in 0..padded_len - 2 {
            let gram = [padded_at(start), padded_at(start + 1), padded_at(start + 2)];
            self.add(feature_hash(TAG_TRIGRAM, &gram), TRIGRAM_WEIGHT, vector);
        }
    }

    /// Adds `weight` with the hash's sign at the hash's coordinate.
    fn add(&self, hash: u64, weight: f32, vector: &mut [f32]) {
        // Multiply-shift maps the high bits onto [0, dims) without a division or modulo bias;
        // the sign comes from the low bit, independent of the coordinate.
        let index = ((u128::from(hash) * self.dims as u128) >> 64) as usize;
        let signed = if hash & 1 == 0 { weight } else { -weight };
        if let Some(slot) = vector.get_mut(index) {
            *slot += signed;
        }
    }

    fn check_dims(&self) -> Result<()> {
        if self.dims == 0 {
            return Err(zero_dims());
        }
        Ok(())
    }
}

#[async_trait]
impl Embedder for HashingEmbedder {
    fn dims(&self) -> usize {
        self.dims
    }

    async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        self.check_dims()?;
        Ok(texts.iter().map(|text| self.embed(text)).collect())
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        self.check_dims()?;
        Ok(self.embed(text))
    }
}

fn zero_dims() -> Error {
    Error::InvalidConfig(String::from(
        "the hashing embedder needs at least one dimension",
    ))
}

/// FNV-1a over a tag byte and the code points (little-endian u32), then the MurmurHash3
/// 64-bit finaliser, because FNV alone mixes its high bits poorly for short inputs.
fn feature_hash(tag: u8, code_points: &[u32]) -> u64 {
    let mut hash = (FNV_OFFSET ^ u64::from(tag)).wrapping_mul(FNV_PRIME);
    for &code_point in code_points {
        for byte in code_point.to_le_bytes() {
            hash = (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME);
        }
    }
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    hash ^ (hash >> 33)
}

/// Scales `vector` to unit length; the zero vector stays zero.
fn normalise(vector: &mut [f32]) {
    let norm = vector
        .iter()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum::<f64>()
        .sqrt();
    if norm > 0.0 {
        for x in vector {
            *x = (f64::from(*x) / norm) as f32;
        }
    }
}

/// Whether `c` separates words: whitespace, controls, and punctuation of the common scripts.
fn is_separator(c: char) -> bool {
    if c.is_ascii() {
        return !c.is_ascii_alphanumeric();
    }
    c.is_whitespace()
        || c.is_control()
        || matches!(
            c,
            // Latin-1 punctuation and symbols (not the letters and digits among them).
            '\u{A1}'..='\u{A9}'
                | '\u{AB}'..='\u{B1}'
                | '\u{B4}'
                | '\u{B6}'..='\u{B8}'
                | '\u{BB}'
                | '\u{BF}'
                | '\u{D7}'
                | '\u{F7}'
                // Armenian, Arabic, Devanagari and Ethiopic sentence punctuation.
                | '\u{589}'
                | '\u{60C}'
                | '\u{61B}'
                | '\u{61F}'
                | '\u{6D4}'
                | '\u{964}'..='\u{965}'
                | '\u{1361}'..='\u{1368}'
                // General and supplemental punctuation.
                | '\u{2000}'..='\u{206F}'
                | '\u{2E00}'..='\u{2E7F}'
                // CJK punctuation (not the iteration marks and numerals of that block).
                | '\u{3000}'..='\u{3004}'
                | '\u{3008}'..='\u{3020}'
                | '\u{3030}'
                | '\u{303D}'..='\u{303F}'
                // Full-width ASCII punctuation and half-width CJK punctuation.
                | '\u{FF01}'..='\u{FF0F}'
                | '\u{FF1A}'..='\u{FF20}'
                | '\u{FF3B}'..='\u{FF40}'
                | '\u{FF5B}'..='\u{FF65}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators_split_words_but_not_letters() {
        for c in [
            ' ', '.', '"', '\u{3002}', '\u{FF0C}', '\u{964}', '\u{2014}', '\u{0}',
        ] {
            assert!(is_separator(c), "{c:?}");
        }
        for c in [
            'a', 'Z', '7', 'é', 'ж', '中', 'क', '\u{94D}', 'ं', '\u{3005}', 'µ',
        ] {
            assert!(!is_separator(c), "{c:?}");
        }
    }
}
