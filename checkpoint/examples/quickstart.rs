//! Quickstart on the in-memory saver: a short conversation checkpointed step by step, its
//! history listed, a fork made with `copy_thread` and continued, then the original pruned.
//!
//! Run with `cargo run --release --example quickstart`.

use waypoint_checkpoint::{
    ChannelVersion, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointSaver,
    CheckpointSource, InMemorySaver, ListOptions, PruneStrategy, Result, Serde,
};

/// Appends `text` to the thread's `messages` channel as a new checkpoint after `parent`.
async fn say(
    saver: &InMemorySaver,
    parent: &CheckpointConfig,
    text: &str,
) -> Result<CheckpointConfig> {
    let serde = Serde::default();
    let previous = saver.get_tuple(parent).await?;
    let (mut messages, version, step): (Vec<String>, Option<ChannelVersion>, i64) = match &previous
    {
        Some(t) => (
            serde.loads(&t.checkpoint.channel_values["messages"])?,
            t.checkpoint.channel_versions.get("messages").cloned(),
            t.metadata.step.unwrap_or(-1) + 1,
        ),
        None => (Vec::new(), None, -1),
    };
    messages.push(text.to_owned());
    let version = saver.next_version(version.as_ref())?;
    let mut checkpoint = Checkpoint::new(step);
    checkpoint
        .channel_values
        .insert("messages".into(), serde.dumps(&messages)?);
    checkpoint
        .channel_versions
        .insert("messages".into(), version.clone());
    let source = if step < 0 {
        CheckpointSource::Input
    } else {
        CheckpointSource::Loop
    };
    let metadata = CheckpointMetadata::new(source, step);
    let parent = previous.map(|t| t.config).unwrap_or_else(|| parent.clone());
    saver
        .put(
            &parent,
            checkpoint,
            metadata,
            [("messages".to_string(), version)].into(),
        )
        .await
}

async fn show(saver: &InMemorySaver, thread_id: &str) -> Result<()> {
    let serde = Serde::default();
    println!("thread {thread_id}, newest first:");
    let history = saver
        .list(
            Some(&CheckpointConfig::new(thread_id)),
            &ListOptions::default(),
        )
        .await?;
    for tuple in history {
        let messages: Vec<String> = serde.loads(&tuple.checkpoint.channel_values["messages"])?;
        println!(
            "  {}  step {:>2}  {:?}",
            tuple.checkpoint.id,
            tuple.metadata.step.unwrap_or_default(),
            messages.last().map(String::as_str).unwrap_or_default()
        );
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let saver = InMemorySaver::new();
    let thread = CheckpointConfig::new("conversation-1");

    for text in [
        "hi",
        "hello! how can I help?",
        "tell me a joke",
        "why did the chicken...",
    ] {
        say(&saver, &thread, text).await?;
    }
    show(&saver, "conversation-1").await?;

    // Fork: copy the whole thread, then take the copy somewhere else.
    saver
        .copy_thread("conversation-1", "conversation-1-fork")
        .await?;
    say(
        &saver,
        &CheckpointConfig::new("conversation-1-fork"),
        "actually, a limerick please",
    )
    .await?;
    show(&saver, "conversation-1-fork").await?;

    // Prune the original down to its latest checkpoint.
    saver
        .prune(&["conversation-1".into()], PruneStrategy::KeepLatest)
        .await?;
    show(&saver, "conversation-1").await?;
    Ok(())
}
