//! `trim_messages`: cuts a conversation down to a token budget, as LangChain's
//! `trim_messages` does (`langchain_core.messages.utils`).
//!
//! Partial messages (LangChain's `allow_partial` and `text_splitter`) are not supported: a
//! message is kept whole or dropped.

use std::fmt;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::messages::{Content, Message};
use crate::{Error, Result};

/// Counts the tokens of a list of messages (LangChain's `token_counter`).
pub type TokenCounter = Arc<dyn Fn(&[Message]) -> usize + Send + Sync>;

/// Characters per token in [`count_tokens_approximately`].
pub const CHARS_PER_TOKEN: usize = 4;

/// Tokens [`count_tokens_approximately`] adds per message for its framing.
pub const EXTRA_TOKENS_PER_MESSAGE: usize = 3;

/// The message kinds `start_on` and `end_on` accept.
const KINDS: [&str; 4] = ["human", "ai", "system", "tool"];

/// Which end of the conversation [`trim_messages`] keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TrimStrategy {
    /// The earliest messages that fit.
    First,
    /// The latest messages that fit.
    #[default]
    Last,
}

/// How [`trim_messages`] trims, built as
/// `TrimOptions::new(45).start_on(["human"]).include_system(true)`.
///
/// The default keeps the last messages within no limit (`usize::MAX` tokens), counted by
/// [`count_tokens_approximately`], with no `start_on`, `end_on` or system message kept.
#[derive(Clone)]
pub struct TrimOptions {
    max_tokens: usize,
    strategy: TrimStrategy,
    token_counter: TokenCounter,
    start_on: Vec<String>,
    end_on: Vec<String>,
    include_system: bool,
}

impl Default for TrimOptions {
    fn default() -> Self {
        TrimOptions::new(usize::MAX)
    }
}

impl fmt::Debug for TrimOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrimOptions")
            .field("max_tokens", &self.max_tokens)
            .field("strategy", &self.strategy)
            .field("start_on", &self.start_on)
            .field("end_on", &self.end_on)
            .field("include_system", &self.include_system)
            .finish_non_exhaustive()
    }
}

impl TrimOptions {
    /// Keeps the last messages within `max_tokens`, counted approximately.
    pub fn new(max_tokens: usize) -> Self {
        TrimOptions {
            max_tokens,
            strategy: TrimStrategy::Last,
            token_counter: Arc::new(count_tokens_approximately),
            start_on: Vec::new(),
            end_on: Vec::new(),
            include_system: false,
        }
    }

    /// The most tokens the kept messages may count.
    pub fn max_tokens(mut self, max_tokens: usize) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// Which end to keep.
    pub fn strategy(mut self, strategy: TrimStrategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// Counts tokens with `counter`, given a list of messages; `<[Message]>::len` makes
    /// `max_tokens` a number of messages (LangChain's `token_counter=len`).
    pub fn token_counter(
        mut self,
        counter: impl Fn(&[Message]) -> usize + Send + Sync + 'static,
    ) -> Self {
        self.token_counter = Arc::new(counter);
        self
    }

    /// Counts tokens with `counter`, given one message: a list counts the sum.
    pub fn per_message_counter(
        self,
        counter: impl Fn(&Message) -> usize + Send + Sync + 'static,
    ) -> Self {
        self.token_counter(move |messages: &[Message]| messages.iter().map(&counter).sum())
    }

    /// With [`TrimStrategy::Last`], drops the kept messages before the first one of these
    /// kinds (`"human"`, `"ai"`, `"system"`, `"tool"`), after trimming to the budget; the
    /// system message kept by `include_system` is exempt.
    pub fn start_on<I, K>(mut self, kinds: I) -> Self
    where
        I: IntoIterator<Item = K>,
        K: Into<String>,
    {
        self.start_on = kinds.into_iter().map(Into::into).collect();
        self
    }

    /// Drops the messages after the last one of these kinds: before trimming with
    /// [`TrimStrategy::Last`], after with [`TrimStrategy::First`].
    pub fn end_on<I, K>(mut self, kinds: I) -> Self
    where
        I: IntoIterator<Item = K>,
        K: Into<String>,
    {
        self.end_on = kinds.into_iter().map(Into::into).collect();
        self
    }

    /// With [`TrimStrategy::Last`], keeps a system message at index 0 whatever the budget.
    pub fn include_system(mut self, include_system: bool) -> Self {
        self.include_system = include_system;
        self
    }

    /// Refuses what LangChain refuses (`start_on` or `include_system` with `First`) and
    /// kinds no message has, which would otherwise silently empty the result.
    fn validate(&self) -> Result<()> {
        if self.strategy == TrimStrategy::First {
            if !self.start_on.is_empty() {
                return Err(invalid("`start_on` is only valid with the `Last` strategy"));
            }
            if self.include_system {
                return Err(invalid(
                    "`include_system` is only valid with the `Last` strategy",
                ));
            }
        }
        for (option, kinds) in [("start_on", &self.start_on), ("end_on", &self.end_on)] {
            if let Some(kind) = kinds.iter().find(|k| !KINDS.contains(&k.as_str())) {
                return Err(invalid(format!(
                    "`{option}` names an unknown message kind `{kind}` (expected one of {})",
                    KINDS.join(", ")
                )));
            }
        }
        Ok(())
    }
}

fn invalid(message: impl Into<String>) -> Error {
    Error::InvalidUpdate(format!("trim_messages: {}", message.into()))
}

/// The messages of `messages` that fit `options.max_tokens`, kept whole and in order.
///
/// With [`TrimStrategy::Last`]: drop what follows the last `end_on` message, set aside a
/// leading system message if `include_system`, keep the longest suffix whose count fits
/// the budget left after the system message, then drop what precedes the first `start_on`
/// message. A system message larger than the whole budget is still kept (as LangChain
/// does), so the result may exceed the budget by it. With [`TrimStrategy::First`]: keep
/// the longest prefix that fits, then drop what follows its last `end_on` message.
///
/// The counter is assumed to grow with the list (a binary search finds the cut); a list
/// that fits as a whole is returned whole. Fails on a [`Message::Remove`] in `messages`
/// (an instruction, not part of a conversation) and on invalid options (see
/// [`TrimOptions`]).
pub fn trim_messages(messages: &[Message], options: &TrimOptions) -> Result<Vec<Message>> {
    options.validate()?;
    if let Some(at) = messages
        .iter()
        .position(|m| matches!(m, Message::Remove(_)))
    {
        return Err(invalid(format!(
            "message {at} is a remove instruction, not a conversation message"
        )));
    }
    let count = |slice: &[Message]| (options.token_counter)(slice);
    let kept = match options.strategy {
        TrimStrategy::First => {
            let fit = longest_fit(messages.len(), options.max_tokens, |k| {
                count(&messages[..k])
            });
            let prefix = &messages[..fit];
            prefix[..end_after_last(prefix, &options.end_on)].to_vec()
        }
        TrimStrategy::Last => {
            let messages = &messages[..end_after_last(messages, &options.end_on)];
            let (system, rest) = match messages.split_first() {
                Some((system @ Message::System(_), rest)) if options.include_system => {
                    (Some(system), rest)
                }
                _ => (None, messages),
            };
            let budget = match system {
                Some(system) => options
                    .max_tokens
                    .saturating_sub(count(std::slice::from_ref(system))),
                None => options.max_tokens,
            };
            // Suffixes are counted in their own order, so an order-sensitive counter sees
            // the messages as the model will.
            let fit = longest_fit(rest.len(), budget, |k| count(&rest[rest.len() - k..]));
            let suffix = &rest[rest.len() - fit..];
            let start = if options.start_on.is_empty() {
                0
            } else {
                suffix
                    .iter()
                    .position(|m| is_kind(m, &options.start_on))
                    .unwrap_or(suffix.len())
            };
            system
                .into_iter()
                .chain(&suffix[start..])
                .cloned()
                .collect()
        }
    };
    Ok(kept)
}

/// The largest `k <= len` with `count(k) <= budget` (0 if none), assuming `count` grows
/// with `k`; `count(0)` is never asked.
fn longest_fit(len: usize, budget: usize, count: impl Fn(usize) -> usize) -> usize {
    if len == 0 || count(len) <= budget {
        return len;
    }
    let (mut low, mut high) = (0, len - 1);
    while low < high {
        let mid = low + (high - low).div_ceil(2);
        if count(mid) <= budget {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    low
}

/// The length of `messages` up to and including its last message of `kinds` (0 if none);
/// all of it when `kinds` is empty.
fn end_after_last(messages: &[Message], kinds: &[String]) -> usize {
    if kinds.is_empty() {
        return messages.len();
    }
    messages
        .iter()
        .rposition(|m| is_kind(m, kinds))
        .map_or(0, |at| at + 1)
}

fn is_kind(message: &Message, kinds: &[String]) -> bool {
    kinds.iter().any(|k| k == message.kind())
}

/// An approximate token count, LangChain's `count_tokens_approximately` with its defaults.
///
/// Per message: the characters (Unicode scalar values) of its text content (content
/// blocks count as their JSON text), of its tool calls as JSON `[{"name", "args", "id",
/// "type"}]` (AI messages with text content only, as LangChain skips block content, which
/// carries the calls already), of a tool message's `tool_call_id`, of its OpenAI role
/// (`user`, `assistant`, `system`, `tool`, `function`, a chat message's own) and of its
/// name; divided by [`CHARS_PER_TOKEN`] rounded up, plus [`EXTRA_TOKENS_PER_MESSAGE`]. A
/// remove instruction counts 0. LangChain measures blocks and tool calls by their Python `repr`, so counts of
/// those differ slightly; text-only messages count the same.
pub fn count_tokens_approximately(messages: &[Message]) -> usize {
    messages.iter().map(approximate_tokens).sum()
}

fn approximate_tokens(message: &Message) -> usize {
    let role = match message {
        Message::Human(_) => "user",
        Message::Ai(_) => "assistant",
        Message::System(_) => "system",
        Message::Tool(_) => "tool",
        Message::Chat(m) => m.role.as_str(),
        Message::Function(_) => "function",
        Message::Remove(_) => return 0,
    };
    let mut chars = match message.content() {
        Content::Text(text) => text.chars().count(),
        Content::Blocks(blocks) => json_chars(blocks),
    };
    if let Message::Ai(ai) = message
        && matches!(ai.content, Content::Text(_))
        && !ai.tool_calls.is_empty()
    {
        let calls: Vec<Value> = ai
            .tool_calls
            .iter()
            .map(|c| json!({"name": c.name, "args": c.args, "id": c.id, "type": "tool_call"}))
            .collect();
        chars += json_chars(&calls);
    }
    if let Message::Tool(tool) = message {
        chars += tool.tool_call_id.chars().count();
    }
    chars += role.len();
    chars += message.name().map_or(0, |n| n.chars().count());
    chars.div_ceil(CHARS_PER_TOKEN) + EXTRA_TOKENS_PER_MESSAGE
}

fn json_chars(values: &[Value]) -> usize {
    serde_json::to_string(values).map_or(0, |text| text.chars().count())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::ToolCall;

    /// The conversation of LangChain's "How to trim messages" guide and of the
    /// `trim_messages` docstring.
    fn joke_conversation() -> Vec<Message> {
        vec![
            Message::system("you're a good assistant, you always respond with a joke."),
            Message::human("i wonder why it's called langchain"),
            Message::ai(
                "Well, I guess they thought \"WordRope\" and \"SentenceString\" just didn't \
                 have the same ring to it!",
            ),
            Message::human("and who is harrison chasing anyways"),
            Message::ai(
                "Hmmm let me think.\n\nWhy, he's probably chasing after the last cup of coffee \
                 in the office!",
            ),
            Message::human("what do you call a speechless parrot"),
        ]
    }

    /// LangChain's `_MESSAGES_TO_TRIM` in `tests/unit_tests/messages/test_utils.py`.
    fn messages_to_trim() -> Vec<Message> {
        vec![
            Message::system("This is a 4 token text."),
            Message::human("This is a 4 token text.").with_id("first"),
            Message::ai(Content::Blocks(vec![
                json!({"type": "text", "text": "This is the FIRST 4 token block."}),
                json!({"type": "text", "text": "This is the SECOND 4 token block."}),
            ]))
            .with_id("second"),
            Message::human("This is a 4 token text.").with_id("third"),
            Message::ai("This is a 4 token text.").with_id("fourth"),
        ]
    }

    /// LangChain's `dummy_token_counter`: 3 + 4 + 3 tokens a text message, 4 more a block.
    fn dummy_token_counter(message: &Message) -> usize {
        match message.content() {
            Content::Text(_) => 3 + 4 + 3,
            Content::Blocks(blocks) => 3 + 4 * blocks.len() + 3,
        }
    }

    fn pick(messages: &[Message], indexes: &[usize]) -> Vec<Message> {
        indexes.iter().map(|&i| messages[i].clone()).collect()
    }

    #[test]
    fn approximate_counts_match_langchain_on_the_guide_conversation() {
        // ceil((content chars + role chars) / 4) + 3, as LangChain computes them.
        let counts: Vec<usize> = joke_conversation()
            .iter()
            .map(|m| count_tokens_approximately(std::slice::from_ref(m)))
            .collect();
        assert_eq!(counts, [19, 13, 30, 13, 28, 13]);
        assert_eq!(count_tokens_approximately(&joke_conversation()), 116);
        assert_eq!(count_tokens_approximately(&[]), 0);
    }

    #[test]
    fn approximate_counts_names_tool_call_ids_and_tool_calls() {
        // "bob" + "user" + "hi": 9 chars.
        let named = Message::human("hi").with_name("bob");
        assert_eq!(count_tokens_approximately(&[named]), 3 + 3);
        // "call_1" + "tool" + "42": 12 chars.
        let tool = Message::tool("call_1", "42");
        assert_eq!(count_tokens_approximately(&[tool]), 3 + 3);
        let mut ai = Message::ai("");
        if let Message::Ai(m) = &mut ai {
            m.tool_calls.push(ToolCall::new("c", "f", json!({"x": 1})));
        }
        let calls = r#"[{"args":{"x":1},"id":"c","name":"f","type":"tool_call"}]"#;
        let chars = calls.chars().count() + "assistant".len();
        assert_eq!(count_tokens_approximately(&[ai]), chars.div_ceil(4) + 3);
        assert_eq!(count_tokens_approximately(&[Message::remove("x")]), 0);
    }

    /// "How to trim messages", "Trimming based on token count": max_tokens=45,
    /// strategy="last", count_tokens_approximately, start_on="human",
    /// end_on=("human", "tool"), include_system=True.
    #[test]
    fn guide_token_count_keeps_system_and_last_question() -> Result<()> {
        let messages = joke_conversation();
        let options = TrimOptions::new(45)
            .start_on(["human"])
            .end_on(["human", "tool"])
            .include_system(true);
        assert_eq!(
            trim_messages(&messages, &options)?,
            pick(&messages, &[0, 5])
        );
        Ok(())
    }

    /// "How to trim messages", "Trimming based on message count": token_counter=len,
    /// max_tokens=5, strategy="last", start_on="human", end_on=("human", "tool"),
    /// include_system=True.
    #[test]
    fn guide_message_count_keeps_system_and_last_exchange() -> Result<()> {
        let messages = joke_conversation();
        let options = TrimOptions::new(5)
            .token_counter(<[Message]>::len)
            .start_on(["human"])
            .end_on(["human", "tool"])
            .include_system(true);
        assert_eq!(
            trim_messages(&messages, &options)?,
            pick(&messages, &[0, 3, 4, 5])
        );
        Ok(())
    }

    /// The `trim_messages` docstring's second example: max_tokens=4, strategy="last",
    /// token_counter=len, start_on="human", include_system=True, allow_partial=False.
    #[test]
    fn docstring_message_count_example() -> Result<()> {
        let messages = joke_conversation();
        let options = TrimOptions::default()
            .max_tokens(4)
            .strategy(TrimStrategy::Last)
            .token_counter(|m: &[Message]| m.len())
            .start_on(["human"])
            .include_system(true);
        assert_eq!(
            trim_messages(&messages, &options)?,
            pick(&messages, &[0, 3, 4, 5])
        );
        Ok(())
    }

    /// "How to trim messages", "Advanced usage": max_tokens=45, strategy="last",
    /// count_tokens_approximately, without include_system.
    #[test]
    fn guide_last_without_system() -> Result<()> {
        let messages = joke_conversation();
        let options = TrimOptions::new(45);
        assert_eq!(
            trim_messages(&messages, &options)?,
            pick(&messages, &[4, 5])
        );
        Ok(())
    }

    /// "How to trim messages", "Advanced usage": max_tokens=45, strategy="first",
    /// count_tokens_approximately.
    #[test]
    fn guide_first_strategy() -> Result<()> {
        let messages = joke_conversation();
        let options = TrimOptions::new(45).strategy(TrimStrategy::First);
        assert_eq!(
            trim_messages(&messages, &options)?,
            pick(&messages, &[0, 1])
        );
        Ok(())
    }

    /// LangChain's `test_trim_messages_first_30`.
    #[test]
    fn first_30_with_dummy_counter() -> Result<()> {
        let messages = messages_to_trim();
        let options = TrimOptions::new(30)
            .strategy(TrimStrategy::First)
            .per_message_counter(dummy_token_counter);
        assert_eq!(
            trim_messages(&messages, &options)?,
            pick(&messages, &[0, 1])
        );
        Ok(())
    }

    /// LangChain's `test_trim_messages_last_30_include_system`.
    #[test]
    fn last_30_include_system_with_dummy_counter() -> Result<()> {
        let messages = messages_to_trim();
        let options = TrimOptions::new(30)
            .include_system(true)
            .per_message_counter(dummy_token_counter);
        assert_eq!(
            trim_messages(&messages, &options)?,
            pick(&messages, &[0, 3, 4])
        );
        Ok(())
    }

    /// LangChain's `test_trim_messages_exact_token_boundary`.
    #[test]
    fn budget_equal_to_the_count_keeps_the_messages() -> Result<()> {
        let messages = vec![
            Message::system("10 tokens exactly."),
            Message::human("Another 10 tokens."),
        ];
        let first = TrimOptions::new(10)
            .strategy(TrimStrategy::First)
            .per_message_counter(dummy_token_counter);
        assert_eq!(trim_messages(&messages, &first)?, pick(&messages, &[0]));
        let both = first.max_tokens(20);
        assert_eq!(trim_messages(&messages, &both)?, messages);
        Ok(())
    }

    #[test]
    fn first_end_on_cuts_after_the_last_kind_kept() -> Result<()> {
        let messages = joke_conversation();
        // Four messages fit; the last human among them is index 3.
        let options = TrimOptions::new(4)
            .strategy(TrimStrategy::First)
            .token_counter(<[Message]>::len)
            .end_on(["human"]);
        assert_eq!(
            trim_messages(&messages, &options)?,
            pick(&messages, &[0, 1, 2, 3])
        );
        let none = options.end_on(["tool"]);
        assert!(trim_messages(&messages, &none)?.is_empty());
        Ok(())
    }

    #[test]
    fn start_on_applies_when_everything_fits() -> Result<()> {
        let messages = joke_conversation();
        let options = TrimOptions::default().start_on(["ai"]);
        assert_eq!(
            trim_messages(&messages, &options)?,
            pick(&messages, &[2, 3, 4, 5])
        );
        Ok(())
    }

    #[test]
    fn empty_input_gives_empty_output() -> Result<()> {
        for options in [
            TrimOptions::new(10)
                .include_system(true)
                .start_on(["human"]),
            TrimOptions::new(0).strategy(TrimStrategy::First),
        ] {
            assert!(trim_messages(&[], &options)?.is_empty());
        }
        Ok(())
    }

    #[test]
    fn zero_budget_keeps_nothing_but_the_included_system() -> Result<()> {
        let messages = joke_conversation();
        let last = TrimOptions::new(0);
        assert!(trim_messages(&messages, &last)?.is_empty());
        let first = TrimOptions::new(0).strategy(TrimStrategy::First);
        assert!(trim_messages(&messages, &first)?.is_empty());
        let with_system = TrimOptions::new(0).include_system(true);
        assert_eq!(
            trim_messages(&messages, &with_system)?,
            pick(&messages, &[0])
        );
        Ok(())
    }

    #[test]
    fn system_larger_than_the_budget_is_kept_alone() -> Result<()> {
        let messages = joke_conversation();
        // The system message counts 19 tokens.
        let options = TrimOptions::new(10).include_system(true);
        assert_eq!(trim_messages(&messages, &options)?, pick(&messages, &[0]));
        let alone = TrimOptions::new(1).include_system(true);
        assert_eq!(
            trim_messages(&messages[..1], &alone)?,
            pick(&messages, &[0])
        );
        Ok(())
    }

    #[test]
    fn include_system_ignores_a_system_message_not_first() -> Result<()> {
        let messages = vec![
            Message::human("a"),
            Message::system("b"),
            Message::human("c"),
        ];
        let options = TrimOptions::new(1)
            .token_counter(<[Message]>::len)
            .include_system(true);
        assert_eq!(trim_messages(&messages, &options)?, pick(&messages, &[2]));
        Ok(())
    }

    #[test]
    fn invalid_options_and_inputs_are_errors() {
        let messages = joke_conversation();
        let refused = [
            TrimOptions::new(10)
                .strategy(TrimStrategy::First)
                .start_on(["human"]),
            TrimOptions::new(10)
                .strategy(TrimStrategy::First)
                .include_system(true),
            TrimOptions::new(10).start_on(["user"]),
            TrimOptions::new(10).end_on(["human", "HumanMessage"]),
        ];
        for options in &refused {
            let err = trim_messages(&messages, options);
            assert!(matches!(err, Err(Error::InvalidUpdate(_))), "{options:?}");
        }
        let with_remove = vec![Message::human("a").with_id("1"), Message::remove("1")];
        let err = trim_messages(&with_remove, &TrimOptions::default());
        assert!(matches!(err, Err(Error::InvalidUpdate(_))));
    }
}
