//! `waypoint store`: list namespaces and items, and search the long-term store.

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};
use waypoint_store::{
    IndexConfig, ListNamespacesOp, Namespace, SearchItem, SearchOp, StoreConfig, StoreExt,
};

use super::{Target, parse_filters, print_json};
use crate::backend::{self, Open};
use crate::table::{Table, ellipsize};

/// Widest value cell in tables; `--json` has the whole value.
const VALUE_WIDTH: usize = 100;

/// `waypoint store` subcommands.
#[derive(clap::Subcommand)]
pub(crate) enum StoreCommand {
    /// Lists the namespaces, or with NAMESPACE the items under that prefix (newest first).
    ///
    /// Namespaces are written dot-separated (`users.alice.memories`). --json prints
    /// {"namespaces": [[label, ..], ..]}, or with NAMESPACE {"items": [{"namespace": [..],
    /// "key", "value", "created_at", "updated_at"}]}.
    Ls {
        #[command(flatten)]
        target: Target,
        /// A namespace prefix, dot-separated.
        namespace: Option<String>,
        /// At most this many results.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Searches items under a namespace prefix: by filter, or by meaning when QUERY is given.
    ///
    /// --json prints {"items": [{"namespace": [..], "key", "value", "created_at",
    /// "updated_at", "score"}]} (score is null without a query).
    Search {
        #[command(flatten)]
        target: Target,
        /// A namespace prefix, dot-separated (`""` for all).
        namespace: String,
        /// Natural-language query; needs a semantic index (--embed).
        query: Option<String>,
        /// Condition on a top-level value key, KEY=VALUE (VALUE is JSON when it parses,
        /// e.g. `n={"$gt":2}`); repeatable.
        #[arg(long = "filter", value_name = "KEY=VALUE")]
        filters: Vec<String>,
        /// At most this many results.
        #[arg(long, default_value_t = 10)]
        limit: usize,
        /// The store's embedder: `hashing:DIMS` (the offline hashing embedder) or `minilm:DIR`
        /// (all-MiniLM-L6-v2 run locally from DIR; needs the `minilm` feature). Use the one the
        /// items were written with.
        #[arg(long, value_name = "hashing:DIMS|minilm:DIR")]
        embed: Option<String>,
    },
}

/// Runs a `store` subcommand.
pub(crate) async fn store(command: StoreCommand) -> Result<()> {
    match command {
        StoreCommand::Ls {
            target,
            namespace: None,
            limit,
        } => {
            let store = backend::store(&target.url, StoreConfig::new(), Open::Existing).await?;
            let namespaces = store
                .list_namespaces(ListNamespacesOp::new().limit(limit))
                .await
                .context("cannot list namespaces")?;
            if target.json {
                let labels: Vec<&[String]> = namespaces.iter().map(Namespace::labels).collect();
                return print_json(&json!({ "namespaces": labels }));
            }
            if namespaces.is_empty() {
                println!("no namespaces");
            }
            for namespace in namespaces {
                println!("{}", namespace.joined());
            }
            Ok(())
        }
        StoreCommand::Ls {
            target,
            namespace: Some(namespace),
            limit,
        } => {
            let op = SearchOp::new(parse_namespace(&namespace)).limit(limit);
            search(&target, StoreConfig::new(), op).await
        }
        StoreCommand::Search {
            target,
            namespace,
            query,
            filters,
            limit,
            embed,
        } => {
            let mut config = StoreConfig::new();
            if let Some(embed) = embed {
                config = config.index(parse_embed(&embed)?);
            } else if query.is_some() {
                bail!(
                    "a search with a QUERY needs a semantic index: pass --embed hashing:DIMS or \
                     --embed minilm:DIR"
                );
            }
            let mut op = SearchOp::new(parse_namespace(&namespace)).limit(limit);
            if let Some(query) = query {
                op = op.query(query);
            }
            if let Some(filter) = parse_filters(&filters)? {
                op = op.filter(Value::Object(filter));
            }
            search(&target, config, op).await
        }
    }
}

/// A dot-separated namespace; empty is the root (everything). The store validates labels.
fn parse_namespace(text: &str) -> Namespace {
    if text.is_empty() {
        Namespace::root()
    } else {
        Namespace::new(text.split('.'))
    }
}

/// `hashing:DIMS` or `minilm:DIR` as an index over whole values.
pub(crate) fn parse_embed(spec: &str) -> Result<IndexConfig> {
    if let Some(dir) = spec.strip_prefix("minilm:") {
        return minilm_index(dir);
    }
    let dims = spec
        .strip_prefix("hashing:")
        .and_then(|d| d.parse::<usize>().ok())
        .filter(|d| *d > 0);
    match dims {
        Some(dims) => Ok(IndexConfig::hashing(dims)),
        None => bail!(
            "unknown embedder `{spec}`: use hashing:DIMS (e.g. hashing:256) or minilm:DIR (an \
             all-MiniLM-L6-v2 folder)"
        ),
    }
}

/// An index embedding with the sentence-transformers model in `dir`.
#[cfg(feature = "minilm")]
fn minilm_index(dir: &str) -> Result<IndexConfig> {
    let embedder = waypoint_store::embed::MiniLmEmbedder::open(dir)?;
    Ok(IndexConfig::new(std::sync::Arc::new(embedder)))
}

/// Without the model code: an error saying how to get it.
#[cfg(not(feature = "minilm"))]
fn minilm_index(_dir: &str) -> Result<IndexConfig> {
    bail!("this waypoint was built without the `minilm` feature: build it with --features minilm")
}

/// Runs one search and prints its items.
async fn search(target: &Target, config: StoreConfig, op: SearchOp) -> Result<()> {
    // An inspector's embedder is not the application's: it never writes vectors for items
    // other clients left unembedded.
    let config = config.embed_others(false);
    let store = backend::store(&target.url, config, Open::Existing).await?;
    let prefix = op.namespace_prefix.joined();
    let items = store
        .search(op)
        .await
        .with_context(|| format!("cannot search the store under `{prefix}`"))?;
    if target.json {
        let items: Vec<Value> = items.iter().map(item_json).collect();
        return print_json(&json!({ "items": items }));
    }
    if items.is_empty() {
        println!("no items");
        return Ok(());
    }
    let scored = items.iter().any(|i| i.score.is_some());
    let mut headers = vec!["NAMESPACE", "KEY", "UPDATED"];
    if scored {
        headers.push("SCORE");
    }
    headers.push("VALUE");
    let mut table = Table::new(&headers);
    for item in &items {
        let mut row = vec![
            item.namespace.joined(),
            item.key.clone(),
            item.updated_at.to_rfc3339(),
        ];
        if scored {
            row.push(item.score.map_or_else(|| "-".into(), |s| format!("{s:.3}")));
        }
        row.push(ellipsize(
            &Value::Object((*item.value).clone()).to_string(),
            VALUE_WIDTH,
        ));
        table.row(row);
    }
    print!("{}", table.render());
    Ok(())
}

fn item_json(item: &SearchItem) -> Value {
    json!({
        "namespace": item.namespace.labels(),
        "key": item.key,
        "value": item.value,
        "created_at": item.created_at.to_rfc3339(),
        "updated_at": item.updated_at.to_rfc3339(),
        "score": item.score,
    })
}
