//! The embedders: the offline hashing embedder's determinism and similarity, and the
//! OpenAI-compatible client against a fake `/v1/embeddings` server started by each test.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use waypoint_store::{Embedder, Error, HashingEmbedder, OpenAiConfig, OpenAiEmbedder};

type TestResult = Result<(), Box<dyn std::error::Error>>;

// ---------------------------------------------------------------------------------------------
// Hashing embedder
// ---------------------------------------------------------------------------------------------

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

/// The cosine similarity of two texts under a 256-dimension hashing embedder.
fn similarity(a: &str, b: &str) -> f32 {
    let embedder = HashingEmbedder::new(256);
    cosine(&embedder.embed(a), &embedder.embed(b))
}

#[test]
fn hashing_is_deterministic_down_to_the_bits() {
    // Golden coordinates: a change here means every stored hashing vector changes meaning.
    // They were checked against an independent re-implementation of the algorithm.
    let embedder = HashingEmbedder::new(64);
    let vector = embedder.embed("Hello, wörld! 你好");
    let nonzero: Vec<(usize, f32)> = vector
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, x)| *x != 0.0)
        .collect();
    assert_eq!(nonzero, GOLDEN_HELLO);
    assert_eq!(embedder.embed("Hello, wörld! 你好"), vector);

    let wide = HashingEmbedder::new(1536).embed("machine learning models");
    let first: Vec<(usize, f32)> = wide
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, x)| *x != 0.0)
        .take(6)
        .collect();
    assert_eq!(first, GOLDEN_MACHINE_LEARNING);
}

/// The nonzero coordinates of `HashingEmbedder::new(64).embed("Hello, wörld! 你好")`.
const GOLDEN_HELLO: [(usize, f32); 26] = [
    (0, 0.1933473),
    (3, -0.1933473),
    (4, 0.1933473),
    (5, -0.09667365),
    (6, 0.1933473),
    (10, -0.09667365),
    (11, -0.1933473),
    (12, 0.1933473),
    (16, -0.09667365),
    (18, 0.09667365),
    (19, -0.3866946),
    (23, 0.09667365),
    (28, 0.09667365),
    (29, 0.09667365),
    (30, -0.09667365),
    (31, 0.09667365),
    (32, 0.1933473),
    (34, -0.1933473),
    (36, -0.1933473),
    (37, -0.09667365),
    (39, -0.1933473),
    (45, -0.3866946),
    (48, 0.3866946),
    (58, 0.1933473),
    (59, -0.1933473),
    (62, 0.09667365),
];

/// The first nonzero coordinates of `HashingEmbedder::new(1536).embed("machine learning models")`.
const GOLDEN_MACHINE_LEARNING: [(usize, f32); 6] = [
    (8, 0.07856742),
    (16, 0.15713485),
    (241, -0.15713485),
    (247, -0.15713485),
    (293, -0.07856742),
    (341, 0.15713485),
];

#[test]
fn hashing_vectors_are_unit_length_or_zero() {
    let embedder = HashingEmbedder::new(128);
    let long = "word ".repeat(5000);
    for text in [
        "a",
        "hello world",
        "the quick brown fox",
        "日本語のテキスト",
        long.as_str(),
    ] {
        let v = embedder.embed(text);
        assert_eq!(v.len(), 128);
        assert!((norm(&v) - 1.0).abs() < 1e-5, "{text}: {}", norm(&v));
    }
    for text in ["", "   ", "...!?", "\n\t—“”"] {
        assert!(embedder.embed(text).iter().all(|x| *x == 0.0), "{text:?}");
    }
}

#[test]
fn identical_texts_score_one_and_case_is_folded() {
    for (a, b) in [
        ("same text here", "same text here"),
        ("Hello World", "hello world"),
        ("ПРИВЕТ МИР", "привет мир"),
        ("Straße", "STRAßE"),
        ("hello, world", "hello world"),
    ] {
        assert!((similarity(a, b) - 1.0).abs() < 1e-5, "{a} / {b}");
    }
}

#[test]
fn similar_texts_score_higher_than_unrelated_ones() {
    for (query, near, far) in [
        (
            "machine learning models",
            "models for machine learning",
            "the cat sat on the mat",
        ),
        ("long text", "longer text document", "short note"),
        (
            "color of the sky",
            "the colour of the sky",
            "a recipe for bread",
        ),
        (
            "zany zebra Xerxes",
            "Xerxes the zany zebra",
            "something about dogs",
        ),
        (
            "favourite food: pizza",
            r#"{"food": "pizza", "likes": true}"#,
            r#"{"sport": "tennis"}"#,
        ),
    ] {
        let (near_score, far_score) = (similarity(query, near), similarity(query, far));
        assert!(
            near_score > far_score + 0.2,
            "{query}: {near_score} vs {far_score}"
        );
    }
}

#[test]
fn non_ascii_scripts_embed_and_compare() {
    for (query, near, far) in [
        // Cyrillic.
        (
            "привет мир",
            "привет всем в этом мире",
            "погода сегодня хорошая",
        ),
        // Chinese, written without spaces.
        ("机器学习", "我喜欢机器学习和深度学习", "今天天气很好"),
        // Japanese.
        ("東京の天気", "明日の東京の天気予報", "猫が好きです"),
        // Devanagari, with combining vowel signs and viramas.
        ("नमस्ते दुनिया", "नमस्ते दोस्तों", "मौसम अच्छा है"),
        // Greek and Arabic.
        ("καλημέρα κόσμε", "καλημέρα σε όλους", "ευχαριστώ πολύ"),
        ("مرحبا بالعالم", "مرحبا يا صديقي", "شكرا جزيلا"),
    ] {
        let (near_score, far_score) = (similarity(query, near), similarity(query, far));
        assert!(
            near_score > far_score + 0.1,
            "{query}: {near_score} vs {far_score}"
        );
    }
}

#[tokio::test]
async fn hashing_trait_calls_match_embed_and_refuse_zero_dims() -> TestResult {
    let embedder = HashingEmbedder::new(32);
    assert_eq!(embedder.dims(), 32);
    let texts = vec![String::from("one"), String::from("two")];
    let vectors = embedder.embed_documents(&texts).await?;
    assert_eq!(vectors, vec![embedder.embed("one"), embedder.embed("two")]);
    assert_eq!(embedder.embed_query("one").await?, embedder.embed("one"));

    let zero = HashingEmbedder::new(0);
    assert!(matches!(
        zero.embed_documents(&texts).await,
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        zero.embed_query("one").await,
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        HashingEmbedder::try_new(0),
        Err(Error::InvalidConfig(_))
    ));
    assert_eq!(HashingEmbedder::try_new(8)?, HashingEmbedder::new(8));
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Fake OpenAI-compatible server
// ---------------------------------------------------------------------------------------------

/// What the fake server does with one request.
#[derive(Clone, Debug)]
enum Reply {
    /// 200 with one `fake_vector` per input, listed in reverse with their `index`.
    Embeddings,
    /// This status, extra headers and body.
    Status(u16, Vec<(&'static str, &'static str)>, &'static str),
    /// 200 with this body.
    Body(String),
    /// 200 with vectors of this many dimensions.
    Dims(usize),
    /// 200 with one vector too few.
    OneShort,
    /// 200 with every vector at index 0.
    DuplicateIndex,
    /// Waits this long, then answers normally.
    Sleep(Duration),
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
struct Seen {
    path: String,
    authorization: Option<String>,
    body: Value,
}

#[derive(Default)]
struct Shared {
    script: VecDeque<Reply>,
    seen: Vec<Seen>,
}

/// A minimal HTTP/1.1 server on 127.0.0.1: keep-alive, Content-Length bodies only. Replies
/// follow the script, then `Reply::Embeddings` forever.
struct FakeServer {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
}

const DIMS: usize = 4;

impl FakeServer {
    fn start(script: Vec<Reply>) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Mutex::new(Shared {
            script: script.into(),
            seen: Vec::new(),
        }));
        let state = Arc::clone(&shared);
        // Detached: the thread ends with the test process.
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = Arc::clone(&state);
                thread::spawn(move || serve(stream, &state));
            }
        });
        Ok(FakeServer { addr, shared })
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    fn seen(&self) -> Vec<Seen> {
        self.shared
            .lock()
            .map(|s| s.seen.clone())
            .unwrap_or_default()
    }

    fn config(&self) -> OpenAiConfig {
        OpenAiConfig::new(self.base_url(), "test-model", DIMS)
            .timeout(Duration::from_millis(200))
            .initial_backoff(Duration::from_millis(5))
            .max_backoff(Duration::from_millis(50))
    }
}

/// The vector the fake server returns for `text`, so tests can check order.
fn fake_vector(text: &str, dims: usize) -> Vec<f32> {
    let bytes = text.as_bytes();
    (0..dims)
        .map(|i| {
            bytes
                .iter()
                .map(|b| f32::from(*b) * (i + 1) as f32)
                .sum::<f32>()
                + text.len() as f32
        })
        .collect()
}

fn serve(stream: TcpStream, state: &Mutex<Shared>) {
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut writer = write_half;
    while let Some(seen) = read_request(&mut reader) {
        let reply = {
            let Ok(mut shared) = state.lock() else { return };
            shared.seen.push(seen.clone());
            shared.script.pop_front().unwrap_or(Reply::Embeddings)
        };
        let inputs: Vec<String> = seen.body["input"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let (status, headers, body) = respond(reply, &inputs);
        let mut head = format!(
            "HTTP/1.1 {status} Fake\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        if writer.write_all(head.as_bytes()).is_err() || writer.write_all(body.as_bytes()).is_err()
        {
            return;
        }
    }
}

fn respond(reply: Reply, inputs: &[String]) -> (u16, Vec<(&'static str, &'static str)>, String) {
    let data = |dims: usize, count: usize, index: &dyn Fn(usize) -> usize| {
        let items: Vec<Value> = (0..count)
            .rev()
            .map(|i| json!({"object": "embedding", "index": index(i), "embedding": fake_vector(&inputs[i], dims)}))
            .collect();
        json!({"object": "list", "model": "test-model", "data": items, "usage": {"prompt_tokens": 1, "total_tokens": 1}})
            .to_string()
    };
    match reply {
        Reply::Embeddings => (200, vec![], data(DIMS, inputs.len(), &|i| i)),
        Reply::Status(status, headers, body) => (status, headers, body.to_owned()),
        Reply::Body(body) => (200, vec![], body),
        Reply::Dims(dims) => (200, vec![], data(dims, inputs.len(), &|i| i)),
        Reply::OneShort => (
            200,
            vec![],
            data(DIMS, inputs.len().saturating_sub(1), &|i| i),
        ),
        Reply::DuplicateIndex => (200, vec![], data(DIMS, inputs.len(), &|_| 0)),
        Reply::Sleep(pause) => {
            thread::sleep(pause);
            (200, vec![], data(DIMS, inputs.len(), &|i| i))
        }
    }
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Seen> {
    let mut line = String::new();
    reader.read_line(&mut line).ok().filter(|n| *n > 0)?;
    let path = line.split_whitespace().nth(1)?.to_owned();
    let mut length = 0usize;
    let mut authorization = None;
    loop {
        line.clear();
        reader.read_line(&mut line).ok().filter(|n| *n > 0)?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().ok()?,
            "authorization" => authorization = Some(value.trim().to_owned()),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Seen {
        path,
        authorization,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    })
}

fn texts(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("text number {i}")).collect()
}

// ---------------------------------------------------------------------------------------------
// OpenAI embedder
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn batches_split_into_chunks_and_keep_order() -> TestResult {
    let server = FakeServer::start(vec![])?;
    let embedder = OpenAiEmbedder::new(server.config().batch_size(3))?;
    let inputs = texts(10);
    let vectors = embedder.embed_documents(&inputs).await?;

    let expected: Vec<Vec<f32>> = inputs.iter().map(|t| fake_vector(t, DIMS)).collect();
    assert_eq!(vectors, expected);
    let seen = server.seen();
    assert_eq!(seen.len(), 4);
    let sizes: Vec<usize> = seen
        .iter()
        .map(|s| s.body["input"].as_array().map_or(0, Vec::len))
        .collect();
    assert_eq!(sizes, [3, 3, 3, 1]);
    assert!(seen.iter().all(|s| s.path == "/v1/embeddings"));
    assert_eq!(seen[0].body["model"], "test-model");
    assert_eq!(seen[0].body["input"], json!(inputs[..3]));
    assert!(seen[0].body.get("dimensions").is_none());
    Ok(())
}

#[tokio::test]
async fn one_request_per_store_batch_and_none_for_no_texts() -> TestResult {
    let server = FakeServer::start(vec![])?;
    let embedder = OpenAiEmbedder::new(server.config())?;
    assert_eq!(embedder.dims(), DIMS);
    assert!(embedder.embed_documents(&[]).await?.is_empty());
    assert!(server.seen().is_empty());
    assert_eq!(embedder.embed_documents(&texts(256)).await?.len(), 256);
    assert_eq!(embedder.embed_query("q").await?, fake_vector("q", DIMS));
    assert_eq!(server.seen().len(), 2);
    Ok(())
}

#[tokio::test]
async fn sends_bearer_token_only_when_configured() -> TestResult {
    let server = FakeServer::start(vec![])?;
    OpenAiEmbedder::new(server.config().api_key("sk-test"))?
        .embed_query("a")
        .await?;
    OpenAiEmbedder::new(server.config())?
        .embed_query("b")
        .await?;
    let seen = server.seen();
    assert_eq!(seen[0].authorization.as_deref(), Some("Bearer sk-test"));
    assert_eq!(seen[1].authorization, None);
    Ok(())
}

#[tokio::test]
async fn sends_dimensions_when_asked() -> TestResult {
    let server = FakeServer::start(vec![])?;
    OpenAiEmbedder::new(server.config().send_dimensions(true))?
        .embed_query("a")
        .await?;
    assert_eq!(server.seen()[0].body["dimensions"], DIMS);
    Ok(())
}

#[tokio::test]
async fn retries_after_500_and_429_then_succeeds() -> TestResult {
    let server = FakeServer::start(vec![
        Reply::Status(500, vec![], r#"{"error": "boom"}"#),
        Reply::Status(429, vec![("retry-after", "0")], r#"{"error": "slow down"}"#),
        Reply::Status(503, vec![], ""),
    ])?;
    let embedder = OpenAiEmbedder::new(server.config())?;
    let vectors = embedder.embed_documents(&texts(2)).await?;
    assert_eq!(vectors[1], fake_vector("text number 1", DIMS));
    assert_eq!(server.seen().len(), 4);
    Ok(())
}

#[tokio::test]
async fn honours_retry_after_up_to_the_cap() -> TestResult {
    let server = FakeServer::start(vec![Reply::Status(
        429,
        vec![("retry-after-ms", "120")],
        "",
    )])?;
    let embedder = OpenAiEmbedder::new(server.config().max_backoff(Duration::from_secs(1)))?;
    let started = Instant::now();
    embedder.embed_query("a").await?;
    assert!(started.elapsed() >= Duration::from_millis(120));

    // A server asking for a minute gets max_backoff (50 ms) instead.
    let server = FakeServer::start(vec![Reply::Status(429, vec![("retry-after", "60")], "")])?;
    let embedder = OpenAiEmbedder::new(server.config())?;
    let started = Instant::now();
    embedder.embed_query("a").await?;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(server.seen().len(), 2);
    Ok(())
}

#[tokio::test]
async fn gives_up_after_max_retries() -> TestResult {
    let failures = vec![Reply::Status(502, vec![], "bad gateway"); 10];
    let server = FakeServer::start(failures)?;
    let embedder = OpenAiEmbedder::new(server.config().max_retries(2))?;
    let result = embedder.embed_query("a").await;
    assert!(matches!(result, Err(Error::Embedding(_))), "{result:?}");
    assert_eq!(server.seen().len(), 3);
    Ok(())
}

#[tokio::test]
async fn client_errors_are_not_retried() -> TestResult {
    let server = FakeServer::start(vec![
        Reply::Status(400, vec![], r#"{"error": {"message": "input is invalid"}}"#),
        Reply::Status(401, vec![], "unauthorized"),
    ])?;
    let embedder = OpenAiEmbedder::new(server.config())?;
    assert!(matches!(
        embedder.embed_query("a").await,
        Err(Error::Embedding(_))
    ));
    assert_eq!(server.seen().len(), 1);
    assert!(matches!(
        embedder.embed_query("a").await,
        Err(Error::Embedding(_))
    ));
    assert_eq!(server.seen().len(), 2);
    Ok(())
}

#[tokio::test]
async fn error_message_names_the_status_and_body() -> TestResult {
    let server = FakeServer::start(vec![Reply::Status(
        400,
        vec![],
        r#"{"error": "input is invalid"}"#,
    )])?;
    let embedder = OpenAiEmbedder::new(server.config())?;
    let Err(Error::Embedding(message)) = embedder.embed_query("a").await else {
        return Err("expected an embedding error".into());
    };
    assert!(
        message.contains("400") && message.contains("input is invalid"),
        "{message}"
    );
    Ok(())
}

#[tokio::test]
async fn times_out_within_about_the_timeout() -> TestResult {
    let server = FakeServer::start(vec![Reply::Sleep(Duration::from_secs(3)); 2])?;
    let embedder = OpenAiEmbedder::new(server.config().max_retries(0))?;
    let started = Instant::now();
    let result = embedder.embed_query("a").await;
    let elapsed = started.elapsed();
    assert!(matches!(result, Err(Error::Embedding(_))), "{result:?}");
    assert!(
        elapsed >= Duration::from_millis(190) && elapsed < Duration::from_millis(1500),
        "{elapsed:?}"
    );

    // A timeout is transient: the retry gets the normal reply.
    let embedder = OpenAiEmbedder::new(server.config().max_retries(1))?;
    assert_eq!(embedder.embed_query("b").await?, fake_vector("b", DIMS));
    assert_eq!(server.seen().len(), 3);
    Ok(())
}

#[tokio::test]
async fn connection_refused_is_retried_then_reported() -> TestResult {
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let config = OpenAiConfig::new(format!("http://127.0.0.1:{port}/v1"), "m", DIMS)
        .timeout(Duration::from_millis(200))
        .initial_backoff(Duration::from_millis(1))
        .max_retries(2);
    let result = OpenAiEmbedder::new(config)?.embed_query("a").await;
    assert!(matches!(result, Err(Error::Embedding(_))), "{result:?}");
    Ok(())
}

#[tokio::test]
async fn malformed_json_is_an_embedding_error_without_retry() -> TestResult {
    let server = FakeServer::start(vec![
        Reply::Body(String::from("{not json")),
        Reply::Body(String::from(
            r#"{"data": [{"embedding": "abc", "index": 0}]}"#,
        )),
        Reply::Body(String::from(r#"{"object": "list"}"#)),
    ])?;
    let embedder = OpenAiEmbedder::new(server.config())?;
    for expected_requests in 1..=3 {
        let result = embedder.embed_query("a").await;
        assert!(matches!(result, Err(Error::Embedding(_))), "{result:?}");
        assert_eq!(server.seen().len(), expected_requests);
    }
    Ok(())
}

#[tokio::test]
async fn wrong_dimensions_are_an_embedding_error() -> TestResult {
    let server = FakeServer::start(vec![Reply::Dims(DIMS + 1), Reply::Dims(0)])?;
    let embedder = OpenAiEmbedder::new(server.config())?;
    assert!(matches!(
        embedder.embed_documents(&texts(2)).await,
        Err(Error::Embedding(_))
    ));
    assert!(matches!(
        embedder.embed_documents(&texts(2)).await,
        Err(Error::Embedding(_))
    ));
    Ok(())
}

#[tokio::test]
async fn wrong_vector_count_or_indexes_are_an_embedding_error() -> TestResult {
    let server = FakeServer::start(vec![
        Reply::OneShort,
        Reply::DuplicateIndex,
        Reply::Body(json!({"data": [{"embedding": vec![0.0; DIMS], "index": 5}]}).to_string()),
    ])?;
    let embedder = OpenAiEmbedder::new(server.config())?;
    assert!(matches!(
        embedder.embed_documents(&texts(3)).await,
        Err(Error::Embedding(_))
    ));
    assert!(matches!(
        embedder.embed_documents(&texts(3)).await,
        Err(Error::Embedding(_))
    ));
    assert!(matches!(
        embedder.embed_documents(&texts(1)).await,
        Err(Error::Embedding(_))
    ));
    Ok(())
}

#[tokio::test]
async fn responses_without_indexes_keep_their_order() -> TestResult {
    let body =
        json!({"data": [{"embedding": [1.0, 0.0, 0.0, 0.0]}, {"embedding": [0.0, 1.0, 0.0, 0.0]}]});
    let server = FakeServer::start(vec![Reply::Body(body.to_string())])?;
    let vectors = OpenAiEmbedder::new(server.config())?
        .embed_documents(&texts(2))
        .await?;
    assert_eq!(vectors, [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]);
    Ok(())
}

#[test]
fn unusable_configs_are_refused() {
    let base = || OpenAiConfig::new("http://127.0.0.1:9/v1", "m", 4);
    for config in [
        OpenAiConfig::new("http://127.0.0.1:9/v1", "m", 0),
        base().batch_size(0),
        OpenAiConfig::new("http://127.0.0.1:9/v1", "", 4),
        OpenAiConfig::new("not a url", "m", 4),
        OpenAiConfig::new("ftp://example.com/v1", "m", 4),
    ] {
        let result = OpenAiEmbedder::new(config);
        assert!(matches!(result, Err(Error::InvalidConfig(_))), "{result:?}");
    }
    assert!(OpenAiEmbedder::new(base()).is_ok());
}
