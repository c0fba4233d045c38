//! Serialization throughput: encode and decode of the message-state workload (LangChain-shaped
//! chat messages plus a nested map) in every format, in MB/s of encoded bytes.

use anyhow::{Context, Result};
use indicatif::ProgressBar;
use waypoint_checkpoint::{Format, Serde};
use waypoint_workloads::payload::{ChatMessage, Conversation, conversation};

use super::Scale;
use super::measure::{Table, throughput};

/// Steps this group reports to its progress bar.
pub(crate) fn steps() -> u64 {
    Format::ALL.len() as u64
}

/// Measures every format.
pub(crate) fn run(scale: &Scale, bar: &ProgressBar) -> Result<Table> {
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
        let mb = |rates: Vec<f64>| rates.into_iter().map(|r| r / 1e6).collect();
        let encode = throughput(scale.serde_window, scale.samples, || {
            serde.dumps(&value)?;
            Ok(bytes)
        })
        .with_context(|| format!("{tag} encode failed"))?;
        table.rate("encode", "MB/s", tag, mb(encode));
        let decode = throughput(scale.serde_window, scale.samples, || {
            let _: Conversation<ChatMessage> = serde.loads(&encoded)?;
            Ok(bytes)
        })
        .with_context(|| format!("{tag} decode failed"))?;
        table.rate("decode", "MB/s", tag, mb(decode));
        bar.inc(1);
    }
    Ok(table)
}
