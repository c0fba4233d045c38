//! An embedder calling an OpenAI-compatible `POST {base_url}/embeddings` endpoint (OpenAI,
//! Azure-style proxies, llama.cpp, vLLM, Ollama, text-embeddings-inference, ...).

use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::HeaderMap;
use reqwest::{StatusCode, Url};
use serde::{Deserialize, Serialize};

use super::Embedder;
use crate::{Error, Result};

/// Longest part of a response body quoted in an error message, in characters.
const BODY_SNIPPET_CHARS: usize = 300;

/// How to reach an OpenAI-compatible embeddings endpoint, and how hard to try.
#[derive(Clone)]
#[non_exhaustive]
pub struct OpenAiConfig {
    /// The API root, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    /// Sent as a bearer token when set.
    pub api_key: Option<String>,
    /// The embedding model, e.g. `text-embedding-3-small`.
    pub model: String,
    /// Dimensions every returned vector must have.
    pub dims: usize,
    /// Whether requests carry `"dimensions": dims` (models that can shorten their vectors,
    /// such as OpenAI's `text-embedding-3-*`; others may reject the field).
    pub send_dimensions: bool,
    /// Most texts per HTTP request; larger inputs are sent in several requests, in order.
    pub batch_size: usize,
    /// Limit on each HTTP attempt, from connecting to the end of the response body.
    pub timeout: Duration,
    /// Further attempts after a connection error, a timeout, a 429 or a 5xx.
    pub max_retries: u32,
    /// Wait before the first retry; it doubles for each further retry, with jitter.
    pub initial_backoff: Duration,
    /// Longest wait before a retry, also capping a server's `Retry-After`.
    pub max_backoff: Duration,
}

impl OpenAiConfig {
    /// A config for `model` at `base_url` returning `dims`-dimensional vectors, with defaults:
    /// no key, batches of 256, 30 s timeout, 3 retries from 250 ms up to 10 s.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>, dims: usize) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            dims,
            send_dimensions: false,
            batch_size: 256,
            timeout: Duration::from_secs(30),
            max_retries: 3,
            initial_backoff: Duration::from_millis(250),
            max_backoff: Duration::from_secs(10),
        }
    }

    /// Authenticates with this bearer token.
    pub fn api_key(mut self, api_key: impl Into<String>) -> Self {
        self.api_key = Some(api_key.into());
        self
    }

    /// Sends `"dimensions"` so the model shortens its vectors to `dims`.
    pub fn send_dimensions(mut self, send: bool) -> Self {
        self.send_dimensions = send;
        self
    }

    /// Sends at most this many texts per request.
    pub fn batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size;
        self
    }

    /// Limits each attempt to this long.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Retries a failed request up to this many times.
    pub fn max_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// Waits this long before the first retry (doubling after).
    pub fn initial_backoff(mut self, backoff: Duration) -> Self {
        self.initial_backoff = backoff;
        self
    }

    /// Never waits longer than this between attempts.
    pub fn max_backoff(mut self, backoff: Duration) -> Self {
        self.max_backoff = backoff;
        self
    }
}

// By hand so that the API key never reaches a log line.
impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("dims", &self.dims)
            .field("send_dimensions", &self.send_dimensions)
            .field("batch_size", &self.batch_size)
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("initial_backoff", &self.initial_backoff)
            .field("max_backoff", &self.max_backoff)
            .finish()
    }
}

/// Embeds texts with an OpenAI-compatible HTTP API: one request per `batch_size` texts,
/// retried on transient failures.
#[derive(Clone, Debug)]
pub struct OpenAiEmbedder {
    config: OpenAiConfig,
    url: Url,
    client: reqwest::Client,
}

impl OpenAiEmbedder {
    /// An embedder for `config`; [`Error::InvalidConfig`] if the URL, model, dimensions or
    /// batch size cannot work.
    pub fn new(config: OpenAiConfig) -> Result<Self> {
        if config.dims == 0 {
            return Err(invalid("dims must be at least 1"));
        }
        if config.batch_size == 0 {
            return Err(invalid("batch_size must be at least 1"));
        }
        if config.model.is_empty() {
            return Err(invalid("model must not be empty"));
        }
        let endpoint = format!("{}/embeddings", config.base_url.trim_end_matches('/'));
        let url = Url::parse(&endpoint)
            .map_err(|e| invalid(&format!("base_url {:?}: {e}", config.base_url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid(&format!(
                "base_url {:?} is not http or https",
                config.base_url
            )));
        }
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .user_agent(concat!("waypoint-store/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| invalid(&format!("cannot build the HTTP client: {}", chain(&e))))?;
        Ok(OpenAiEmbedder {
            config,
            url,
            client,
        })
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// Embeds one chunk (at most `batch_size` texts), retrying transient failures.
    async fn embed_chunk(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let request = EmbeddingRequest {
            model: &self.config.model,
            input: texts,
            dimensions: self.config.send_dimensions.then_some(self.config.dims),
        };
        let mut retries = 0u32;
        loop {
            let failure = match self.attempt(&request).await {
                Ok(response) => return self.vectors(response, texts.len()),
                Err(failure) => failure,
            };
            let Some(server_delay) = failure.retry else {
                return Err(Error::Embedding(failure.message));
            };
            if retries >= self.config.max_retries {
                return Err(Error::Embedding(format!(
                    "{} (gave up after {} attempts)",
                    failure.message,
                    retries + 1
                )));
            }
            let delay = server_delay
                .unwrap_or_else(|| self.backoff(retries))
                .min(self.config.max_backoff);
            tokio::time::sleep(delay).await;
            retries += 1;
        }
    }

    /// One HTTP exchange; a failure says whether it is worth retrying.
    async fn attempt(&self, request: &EmbeddingRequest<'_>) -> Result<EmbeddingResponse, Failure> {
        let mut builder = self.client.post(self.url.clone()).json(request);
        if let Some(key) = &self.config.api_key {
            builder = builder.bearer_auth(key);
        }
        let response = builder.send().await.map_err(|e| self.transport(&e))?;
        let status = response.status();
        if !status.is_success() {
            let server_delay = retry_after(response.headers());
            let body = response.text().await.unwrap_or_default();
            let message = format!("POST {} returned {status}: {}", self.url, snippet(&body));
            let retryable = status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error();
            return Err(Failure {
                message,
                retry: retryable.then_some(server_delay),
            });
        }
        let body = response.bytes().await.map_err(|e| self.transport(&e))?;
        serde_json::from_slice(&body).map_err(|e| Failure {
            message: format!(
                "POST {} returned an unreadable body ({e}): {}",
                self.url,
                snippet(&String::from_utf8_lossy(&body))
            ),
            retry: None,
        })
    }

    /// Puts the response's vectors in input order and checks their number and dimensions.
    fn vectors(&self, response: EmbeddingResponse, expected: usize) -> Result<Vec<Vec<f32>>> {
        let data = response.data;
        if data.len() != expected {
            return Err(Error::Embedding(format!(
                "{} returned {} vectors for {expected} texts",
                self.url,
                data.len()
            )));
        }
        let mut ordered: Vec<Option<Vec<f32>>> = vec![None; expected];
        let indexed = data.iter().filter(|d| d.index.is_some()).count();
        if indexed != 0 && indexed != expected {
            return Err(Error::Embedding(format!(
                "{} gave an index to only {indexed} of {expected} vectors",
                self.url
            )));
        }
        for (position, datum) in data.into_iter().enumerate() {
            // Servers that omit `index` return vectors in input order.
            let index = datum.index.unwrap_or(position);
            let slot = ordered.get_mut(index).ok_or_else(|| {
                Error::Embedding(format!(
                    "{} returned index {index} for {expected} texts",
                    self.url
                ))
            })?;
            if slot.replace(datum.embedding).is_some() {
                return Err(Error::Embedding(format!(
                    "{} returned index {index} twice",
                    self.url
                )));
            }
        }
        let dims = self.config.dims;
        ordered
            .into_iter()
            .enumerate()
            .map(|(index, vector)| {
                let vector = vector.ok_or_else(|| {
                    Error::Embedding(format!("{} returned no vector {index}", self.url))
                })?;
                if vector.len() != dims {
                    let hint = if self.config.send_dimensions {
                        ""
                    } else {
                        " (send_dimensions asks models that can for the configured size)"
                    };
                    return Err(Error::Embedding(format!(
                        "{} returned a vector of {} dimensions, expected {dims}{hint}",
                        self.url,
                        vector.len()
                    )));
                }
                Ok(vector)
            })
            .collect()
    }

    /// Classifies a transport error: connection failures, timeouts and broken exchanges are
    /// transient; a request that cannot even be built is not.
    fn transport(&self, error: &reqwest::Error) -> Failure {
        let retryable = !(error.is_builder() || error.is_redirect() || error.is_decode());
        let message = if error.is_timeout() {
            format!(
                "POST {} timed out after {:?}: {}",
                self.url,
                self.config.timeout,
                chain(error)
            )
        } else {
            format!("POST {} failed: {}", self.url, chain(error))
        };
        Failure {
            message,
            retry: retryable.then_some(None),
        }
    }

    /// The wait before retry number `retries + 1`: exponential, capped, with "equal jitter"
    /// (between half and all of it) so clients that failed together do not retry together.
    fn backoff(&self, retries: u32) -> Duration {
        let exponential = self
            .config
            .initial_backoff
            .saturating_mul(2u32.saturating_pow(retries))
            .min(self.config.max_backoff);
        // Each RandomState has fresh keys, which is randomness enough for jitter.
        let random = RandomState::new().hash_one(retries);
        let fraction = 0.5 + (random >> 11) as f64 / (1u64 << 53) as f64 / 2.0;
        exponential.mul_f64(fraction)
    }
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn dims(&self) -> usize {
        self.config.dims
    }

    async fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let mut vectors = Vec::with_capacity(texts.len());
        // Sequential on purpose: a store batch is normally one chunk, and parallel chunks
        // would mostly trade latency for rate-limit errors.
        for chunk in texts.chunks(self.config.batch_size) {
            vectors.extend(self.embed_chunk(chunk).await?);
        }
        Ok(vectors)
    }
}

/// The request body of `POST /embeddings`.
#[derive(Serialize)]
struct EmbeddingRequest<'a> {
    model: &'a str,
    input: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    dimensions: Option<usize>,
}

/// The part of the response body that is used.
#[derive(Deserialize)]
struct EmbeddingResponse {
    data: Vec<EmbeddingDatum>,
}

#[derive(Deserialize)]
struct EmbeddingDatum {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

/// A failed attempt: its message, and `Some(server-requested delay)` if worth retrying.
struct Failure {
    message: String,
    retry: Option<Option<Duration>>,
}

/// The delay a 429 or 503 asks for: OpenAI's `retry-after-ms`, else `Retry-After` in
/// seconds (an HTTP date is ignored and the usual backoff applies).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| {
        headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    if let Some(ms) = number("retry-after-ms") {
        return Duration::try_from_secs_f64(ms / 1000.0).ok();
    }
    number("retry-after").and_then(|s| Duration::try_from_secs_f64(s).ok())
}

/// The start of a response body, for error messages.
fn snippet(body: &str) -> String {
    let body = body.trim();
    match body.char_indices().nth(BODY_SNIPPET_CHARS) {
        Some((cut, _)) => format!("{}...", &body[..cut]),
        None if body.is_empty() => String::from("<empty body>"),
        None => body.to_owned(),
    }
}

/// An error and its sources on one line (reqwest's own message hides the cause).
fn chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

fn invalid(reason: &str) -> Error {
    Error::InvalidConfig(format!("OpenAI embedder: {reason}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_prefers_milliseconds_and_ignores_dates() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", "150".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(150)));
        let mut dated = HeaderMap::new();
        dated.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&dated), None);
        dated.insert("retry-after", "-1".parse().unwrap());
        assert_eq!(retry_after(&dated), None);
    }

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let config = OpenAiConfig::new("http://127.0.0.1:1/v1", "m", 4)
            .initial_backoff(Duration::from_millis(100))
            .max_backoff(Duration::from_millis(500));
        let embedder = OpenAiEmbedder::new(config).unwrap();
        for _ in 0..100 {
            let first = embedder.backoff(0);
            assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
            let third = embedder.backoff(2);
            assert!(third >= Duration::from_millis(200) && third <= Duration::from_millis(400));
            let late = embedder.backoff(40);
            assert!(late >= Duration::from_millis(250) && late <= Duration::from_millis(500));
        }
    }

    #[test]
    fn snippets_are_cut_on_char_boundaries() {
        assert_eq!(snippet("  "), "<empty body>");
        let long = "é".repeat(BODY_SNIPPET_CHARS + 5);
        let cut = snippet(&long);
        assert_eq!(cut.chars().count(), BODY_SNIPPET_CHARS + 3);
    }

    #[test]
    fn debug_hides_the_api_key() {
        let config = OpenAiConfig::new("https://api.openai.com/v1", "m", 4).api_key("sk-secret");
        assert!(!format!("{config:?}").contains("sk-secret"));
    }
}
