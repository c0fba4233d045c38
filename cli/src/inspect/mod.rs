//! `waypoint threads ...` and `waypoint store ...`: inspect and edit any backend's threads
//! and long-term store, with tables for people and `--json` for scripts.

pub(crate) mod store;
mod threads;

use anyhow::{Context as _, Result, bail};
use serde_json::{Map, Value};

pub(crate) use store::{StoreCommand, store};
pub(crate) use threads::{ThreadsCommand, threads};

/// Where to connect and how to print: shared by every inspector command.
#[derive(clap::Args, Debug)]
pub(crate) struct Target {
    /// Backend URL: sqlite:PATH, postgres://..., redis://... (or memory:).
    #[arg(long, env = "WAYPOINT_URL", hide_env_values = true)]
    url: String,
    /// Print one JSON document on stdout instead of tables.
    #[arg(long)]
    json: bool,
}

/// Prints `value` as one pretty JSON document.
fn print_json(value: &Value) -> Result<()> {
    println!(
        "{}",
        serde_json::to_string_pretty(value).context("cannot encode the JSON output")?
    );
    Ok(())
}

/// `KEY=VALUE` pairs as a JSON object; values are JSON when they parse, else strings.
fn parse_filters(pairs: &[String]) -> Result<Option<Map<String, Value>>> {
    if pairs.is_empty() {
        return Ok(None);
    }
    let mut filter = Map::new();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            bail!("filter `{pair}` is not KEY=VALUE");
        };
        if key.is_empty() {
            bail!("filter `{pair}` has an empty key");
        }
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()));
        filter.insert(key.to_owned(), value);
    }
    Ok(Some(filter))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn filters_parse_json_or_text() {
        let filter = parse_filters(&["step=2".into(), "source=loop".into(), "a={\"b\":1}".into()])
            .unwrap()
            .unwrap();
        assert_eq!(
            Value::Object(filter),
            json!({"step": 2, "source": "loop", "a": {"b": 1}})
        );
        assert!(parse_filters(&["nokey".into()]).is_err());
        assert!(parse_filters(&["=1".into()]).is_err());
        assert!(parse_filters(&[]).unwrap().is_none());
    }
}
