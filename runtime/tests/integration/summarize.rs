//! The `summarize` example's graph, run turn by turn: the thread keeps the last two
//! messages once it grows past six, and the summary accumulates what the user said.

// The example itself, so the test runs exactly the graph it prints (its `main` is unused).
#[allow(dead_code)]
#[path = "../../examples/summarize.rs"]
mod example;

use example::{ChatState, MAX_MESSAGES, TURNS, build_graph, chat};
use waypoint_runtime::{Result, RunConfig};

/// The kind and text of each message.
fn transcript(state: &ChatState) -> Vec<(&'static str, String)> {
    state
        .messages
        .iter()
        .map(|m| (m.kind(), m.text()))
        .collect()
}

#[tokio::test]
async fn summarize_keeps_the_last_two_messages_and_extends_the_summary() -> Result<()> {
    let graph = build_graph()?;
    let config = RunConfig::thread(uuid::Uuid::new_v4().to_string());
    let mut states = Vec::new();
    for text in TURNS {
        states.push(chat(&graph, &config, text).await?);
    }
    let lengths: Vec<usize> = states.iter().map(|s| s.messages.len()).collect();
    assert_eq!(lengths, [2, 4, 6, 2, 4, 6, 2]);
    assert!(states.iter().all(|s| s.messages.len() <= MAX_MESSAGES));

    // Turn 3 is still whole: six messages, no summary.
    assert_eq!(states[2].messages[4].text(), "i like the celtics!");
    assert_eq!(states[2].summary, "");

    // Turn 4 made eight messages: the first six were summarized and deleted.
    assert_eq!(
        transcript(&states[3]),
        [
            ("human", "i like how much they win".to_owned()),
            (
                "ai",
                "(7 messages in context) you said \"i like how much they win\"".to_owned()
            ),
        ]
    );
    assert_eq!(
        states[3].summary,
        "The user said: hi! I'm bob / what's my name? / i like the celtics!"
    );

    // Turn 5's model saw the summary as a system message plus three messages.
    assert_eq!(
        states[4].messages[3].text(),
        "(4 messages in context) you said \"who is their best player?\""
    );

    // Turn 7 summarized again, extending the summary.
    assert_eq!(
        transcript(&states[6]),
        [
            ("human", "thanks, bye".to_owned()),
            (
                "ai",
                "(8 messages in context) you said \"thanks, bye\"".to_owned()
            ),
        ]
    );
    let summary = "The user said: hi! I'm bob / what's my name? / i like the celtics! / \
                   i like how much they win / who is their best player? / and their coach?";
    assert_eq!(states[6].summary, summary);

    // The checkpoint holds what the last run returned.
    let saved = graph.get_state(&config).await?.values;
    assert_eq!(transcript(&saved), transcript(&states[6]));
    assert_eq!(saved.summary, summary);
    Ok(())
}
