//! Serialization throughput: encode and decode of the message-state workload (LangChain-shaped
//! chat messages plus a nested map) in every format, in MB/s of encoded bytes.

use anyhow::{Context, Result};
use indicatif::ProgressBar;
use serde_json::json;
use waypoint_checkpoint::{Format, Serde};
use waypoint_workloads::payload::{ChatMessage, Conversation, conversation};

use super::Scale;
use super::measure::{Table, throughput};
use super::peers::{LANGGRAPH, LANGGRAPH_MESSAGES, Peers, record};

/// The format LangGraph's `JsonPlusSerializer` is compared with (it writes MessagePack).
const PEER_FORMAT: &str = "msgpack";

/// Steps this group reports to its progress bar.
pub(crate) fn steps() -> u64 {
    Format::ALL.len() as u64
}

/// Measures every format (and, with `peers`, LangGraph's `JsonPlusSerializer` on the same
/// conversation as plain dicts and as LangChain message objects, beside MessagePack).
pub(crate) async fn run(scale: &Scale, bar: &ProgressBar, peers: &mut Peers) -> Result<Table> {
    let value = conversation(scale.payload);
    let mut table = Table::new(
        "serde",
        "format",
        format!(
            "Encode and decode of the `{}` message state ({} LangChain-shaped messages of {} \
             characters, {} map entries); MB/s of encoded bytes, median of {} samples of {} ms.",
            scale.payload.name,
            scale.payload.messages,
            scale.payload.content_chars,
            scale.payload.data_entries,
            scale.samples,
            scale.serde_window.as_millis()
        ),
    );
    for format in Format::ALL {
        let tag = format.name();
        bar.set_message(format!("serde · {tag}"));
        let serde = Serde::new(*format);
        let encoded = serde
            .dumps(&value)
            .with_context(|| format!("cannot encode the payload as {tag}"))?;
        let bytes = encoded.bytes.len();
        let mb = |rates: Vec<f64>| -> Vec<f64> { rates.into_iter().map(|r| r / 1e6).collect() };
        let encode = || {
            throughput(scale.serde_window, 1, || {
                serde.dumps(&value)?;
                Ok(bytes)
            })
            .with_context(|| format!("{tag} encode failed"))
        };
        let decode = || {
            throughput(scale.serde_window, 1, || {
                let _: Conversation<ChatMessage> = serde.loads(&encoded)?;
                Ok(bytes)
            })
            .with_context(|| format!("{tag} decode failed"))
        };
        for (workload, op) in [
            ("encode", &encode as &dyn Fn() -> Result<Vec<f64>>),
            ("decode", &decode),
        ] {
            let payload = json!({
                "messages": scale.payload.messages,
                "chars": scale.payload.content_chars,
                "data": scale.payload.data_entries > 0,
                "window_ms": scale.serde_window.as_secs_f64() * 1e3,
            });
            let variants =
                [(false, LANGGRAPH), (true, LANGGRAPH_MESSAGES)].map(|(objects, name)| {
                    let mut args = payload.clone();
                    args["objects"] = json!(objects);
                    (name, args)
                });
            // LangGraph's serializer writes MessagePack: only that column has a peer.
            let variants = if tag == PEER_FORMAT {
                &variants[..]
            } else {
                &[]
            };
            let (ours, theirs) = peers
                .pairs(
                    scale.samples,
                    &format!("serde.{workload}"),
                    "",
                    variants,
                    async || op().map(mb),
                )
                .await?;
            record(&mut table, workload, tag, ours, theirs, |t, w, c, s| {
                t.rate(w, "MB/s", c, s)
            });
        }
        bar.inc(1);
    }
    Ok(table)
}
