//! The MiniLM embedder: its vectors against an independent NumPy forward pass of the same
//! weights (tests/python/minilm_ref.py), a semantic sanity check, and clear errors for model
//! directories that are missing, incomplete or corrupt.

use std::path::{Path, PathBuf};
use std::process::Command;

use waypoint_store::embed::MiniLmEmbedder;
use waypoint_store::{Embedder, Error};
use waypoint_test_kit::{minilm_dir, minilm_python, run_with_input};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum()
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    dot(a, b) / (dot(a, a).sqrt() * dot(b, b).sqrt())
}

/// A few hundred varied texts: short and long (far beyond 256 tokens, so truncation matters),
/// accents, CJK, emoji, punctuation, whitespace and the empty string.
fn corpus() -> Vec<String> {
    let base = [
        "where do I hike?",
        "I love hiking in the Alps",
        "The quarterly tax report is due on Friday.",
        "My favourite food is spicy ramen.",
        "The user prefers dark mode and short answers.",
        "Reminder: call the dentist about the appointment",
        "Crème brûlée, café au lait et naïveté à Noël.",
        "Müller's Straße führt über die Brücke.",
        "¿Dónde está la biblioteca? Está cerca de la estación.",
        "東京は日本の首都です。",
        "我喜欢在山里徒步旅行。",
        "서울에서 부산까지 기차로 갑니다.",
        "Привет, как дела? Всё хорошо.",
        "مرحبا بالعالم",
        "I'm so happy today 😀🎉🚀",
        "🍕🍕🍕 pizza party 🍕",
        "a",
        "?",
        "   ",
        "",
        "The QUICK brown FOX jumps over the lazy dog!!!",
        "rust async tokio spawn_blocking candle tensor",
        "SELECT * FROM store WHERE prefix = 'users.42' AND key LIKE 'memo%';",
        "https://example.com/path?query=1&other=two#fragment",
        "user@example.com wrote: \"see you at 10:30\"",
        "3.14159 2.71828 1.41421 42 1e-9",
        "tab\tseparated\tvalues\nand a second line",
        "naïve café résumé coöperate",
        "Ελληνικά γράμματα: αβγδε",
        "The patient reported mild headaches after the new medication.",
    ];
    let mut texts: Vec<String> = base.iter().map(|t| (*t).to_owned()).collect();
    // Pairs of sentences and repetitions: medium lengths.
    for (i, a) in base.iter().enumerate() {
        for b in base.iter().skip(i + 1).step_by(4) {
            texts.push(format!("{a} {b}"));
        }
        texts.push(format!("{a} ").repeat(i % 7 + 2));
    }
    // Long texts: 300 to 1,500 words, well past 256 tokens.
    for i in 0..20 {
        let words: Vec<&str> = base
            .iter()
            .cycle()
            .skip(i)
            .take(40 + i * 5)
            .copied()
            .collect();
        texts.push(words.join(" "));
    }
    texts.push("emoji 😀 ".repeat(400));
    texts.push("東京".repeat(600));
    texts
}

/// The vectors minilm_ref.py computes for `texts`.
fn reference(python: &Path, dir: &Path, texts: &[String]) -> Vec<Vec<f32>> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/python/minilm_ref.py");
    let input = serde_json::to_string(texts).expect("texts serialise");
    let out = run_with_input(Command::new(python).arg(script).arg(dir), &input);
    serde_json::from_str(&out).expect("minilm_ref.py prints a JSON list of vectors")
}

#[tokio::test(flavor = "multi_thread")]
async fn vectors_match_the_numpy_reference() -> TestResult {
    let (Some(dir), Some(python)) = (minilm_dir(), minilm_python()) else {
        return Ok(());
    };
    let embedder = MiniLmEmbedder::open(&dir)?;
    assert_eq!(embedder.dims(), 384);
    let texts = corpus();
    assert!(texts.len() >= 200, "{} texts", texts.len());
    let counts = embedder.token_counts(&texts)?;
    assert_eq!(
        counts.iter().max(),
        Some(&256),
        "long texts are cut at 256 tokens"
    );
    assert!(counts.iter().filter(|&&n| n == 256).count() >= 20);
    assert_eq!(
        counts[base_index(&texts, "")],
        2,
        "the empty text is [CLS] [SEP]"
    );

    let ours = embedder.embed_documents(&texts).await?;
    let theirs = reference(&python, &dir, &texts);
    assert_eq!(ours.len(), texts.len());
    assert_eq!(theirs.len(), texts.len());
    let mut worst = (f64::INFINITY, 0);
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(a.len(), 384);
        assert!(
            (dot(a, a).sqrt() - 1.0).abs() < 1e-4,
            "text {i} is not unit length"
        );
        let c = cosine(a, b);
        if c < worst.0 {
            worst = (c, i);
        }
    }
    let (c, i) = worst;
    eprintln!("lowest cosine with the reference: {c} (text {i})");
    assert!(
        c >= 0.9999,
        "cosine {c} with the reference for {:?}",
        texts[i]
    );

    // One text alone (no padding, batch of one) gives the vector it got in its batch.
    for i in [0, 9, 14, texts.len() - 1] {
        let alone = embedder.embed_query(&texts[i]).await?;
        assert!(cosine(&alone, &ours[i]) >= 0.99999, "text {i} alone");
    }
    Ok(())
}

fn base_index(texts: &[String], text: &str) -> usize {
    texts
        .iter()
        .position(|t| t == text)
        .expect("text in the corpus")
}

#[tokio::test(flavor = "multi_thread")]
async fn similar_meanings_are_nearer() -> TestResult {
    let Some(dir) = minilm_dir() else {
        return Ok(());
    };
    let embedder = MiniLmEmbedder::open(&dir)?;
    let query = embedder.embed_query("where do I hike?").await?;
    let docs = embedder
        .embed_documents(&[
            "I love hiking in the Alps".to_owned(),
            "The quarterly tax report is due on Friday.".to_owned(),
        ])
        .await?;
    let (hiking, taxes) = (cosine(&query, &docs[0]), cosine(&query, &docs[1]));
    assert!(hiking > taxes + 0.2, "hiking {hiking}, taxes {taxes}");
    assert!(embedder.embed_documents(&[]).await?.is_empty());
    Ok(())
}

/// The error `MiniLmEmbedder::open` gives for `dir`, which must be a config error.
fn open_error(dir: &Path) -> String {
    match MiniLmEmbedder::open(dir) {
        Ok(embedder) => panic!("{} opened as {embedder:?}", dir.display()),
        Err(e @ Error::InvalidConfig(_)) => e.to_string(),
        Err(e) => panic!("not a config error: {e}"),
    }
}

/// A copy of the model directory's three files, for breaking one of them.
fn model_copy(dir: &Path) -> std::io::Result<tempfile::TempDir> {
    let copy = tempfile::tempdir()?;
    for name in ["config.json", "tokenizer.json", "model.safetensors"] {
        std::fs::copy(dir.join(name), copy.path().join(name))?;
    }
    Ok(copy)
}

#[test]
fn bad_model_directories_are_clear_errors() -> TestResult {
    let Some(dir) = minilm_dir() else {
        return Ok(());
    };
    let missing = tempfile::tempdir()?;
    let error = open_error(&missing.path().join("nowhere"));
    assert!(error.contains("cannot read config.json"), "{error}");

    // The three files alone load (max_seq_length then defaults to 256).
    let copy = model_copy(&dir)?;
    assert_eq!(MiniLmEmbedder::open(copy.path())?.max_seq_length(), 256);

    for name in ["config.json", "tokenizer.json", "model.safetensors"] {
        let copy = model_copy(&dir)?;
        std::fs::remove_file(copy.path().join(name))?;
        let error = open_error(copy.path());
        assert!(error.contains(&format!("cannot read {name}")), "{error}");
    }

    let copy = model_copy(&dir)?;
    std::fs::write(copy.path().join("config.json"), "{\"hidden_size\": 384}")?;
    let error = open_error(copy.path());
    assert!(
        error.contains("config.json is not a BERT config"),
        "{error}"
    );

    let copy = model_copy(&dir)?;
    std::fs::write(copy.path().join("tokenizer.json"), "not json")?;
    let error = open_error(copy.path());
    assert!(error.contains("bad tokenizer.json"), "{error}");

    // Garbage, and a file cut short.
    let copy = model_copy(&dir)?;
    let weights = copy.path().join("model.safetensors");
    std::fs::write(&weights, b"\xff\x00garbage")?;
    let error = open_error(copy.path());
    assert!(error.contains("bad model.safetensors"), "{error}");
    let bytes = std::fs::read(dir.join("model.safetensors"))?;
    std::fs::write(&weights, &bytes[..bytes.len() / 2])?;
    let error = open_error(copy.path());
    assert!(error.contains("bad model.safetensors"), "{error}");

    // Weights of other shapes than the config says.
    let copy = model_copy(&dir)?;
    let config = std::fs::read_to_string(dir.join("config.json"))?;
    let config = config.replace("\"intermediate_size\": 1536", "\"intermediate_size\": 1024");
    std::fs::write(copy.path().join("config.json"), config)?;
    let error = open_error(copy.path());
    assert!(error.contains("does not match config.json"), "{error}");

    // A max_seq_length the position embeddings cannot serve.
    let copy = model_copy(&dir)?;
    std::fs::write(
        copy.path().join("sentence_bert_config.json"),
        "{\"max_seq_length\": 4096}",
    )?;
    let error = open_error(copy.path());
    assert!(error.contains("max_seq_length 4096"), "{error}");
    Ok(())
}
