//! Two stores on one database, as two processes share it: what one writes reaches the other's
//! semantic index within a second (its change feed).

use std::future::Future;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::json;

use super::{ensure, fresh, hashing_index};
use crate::{Namespace, Op, PutOp, Result, SearchItem, SearchOp, Store, StoreConfig, StoreExt};

/// Opens two stores on one fresh database, as two processes would.
#[async_trait]
pub trait SharedFactory: Send + Sync {
    /// Two stores with `config` on one new empty database, or `None` to skip the case.
    async fn open_two(
        &self,
        config: StoreConfig,
    ) -> Result<Option<(Box<dyn Store>, Box<dyn Store>)>>;
}

/// A [`SharedFactory`] from a backend's usual factory (`first`) and a way to open a second
/// store on the database of a first one (`second`).
pub struct Shared<F, G> {
    first: F,
    second: G,
}

impl<F, G> Shared<F, G> {
    /// `first` opens a fresh store; `second(&store, config)` another on the same database.
    pub fn new<Fut, S, Fut2, S2>(first: F, second: G) -> Self
    where
        F: Fn(StoreConfig) -> Fut + Send + Sync,
        Fut: Future<Output = Result<Option<S>>> + Send,
        G: Fn(&S, StoreConfig) -> Fut2 + Send + Sync,
        Fut2: Future<Output = Result<S2>> + Send,
    {
        Shared { first, second }
    }
}

#[async_trait]
impl<F, Fut, S, G, Fut2, S2> SharedFactory for Shared<F, G>
where
    F: Fn(StoreConfig) -> Fut + Send + Sync,
    Fut: Future<Output = Result<Option<S>>> + Send,
    S: Store + 'static,
    G: Fn(&S, StoreConfig) -> Fut2 + Send + Sync,
    Fut2: Future<Output = Result<S2>> + Send,
    S2: Store + 'static,
{
    async fn open_two(
        &self,
        config: StoreConfig,
    ) -> Result<Option<(Box<dyn Store>, Box<dyn Store>)>> {
        let Some(first) = (self.first)(config.clone()).await? else {
            return Ok(None);
        };
        let second = (self.second)(&first, config).await?;
        Ok(Some((Box::new(first), Box::new(second))))
    }
}

/// How long another store may take to see a write.
const FEED_DEADLINE: Duration = Duration::from_secs(1);

/// A semantic search for `query` under `ns`, up to 50 hits.
async fn semantic(store: &dyn Store, ns: &Namespace, query: &str) -> Result<Vec<SearchItem>> {
    store.search(SearchOp::new(ns).query(query).limit(50)).await
}

/// Polls `seen` on `store`'s semantic search until it holds, failing after [`FEED_DEADLINE`];
/// returns how long it took.
async fn within_deadline(
    store: &dyn Store,
    ns: &Namespace,
    query: &str,
    what: &str,
    seen: impl Fn(&[SearchItem]) -> bool,
) -> Result<Duration> {
    let start = Instant::now();
    loop {
        let hits = semantic(store, ns, query).await?;
        if seen(&hits) {
            return Ok(start.elapsed());
        }
        let keys: Vec<&str> = hits.iter().map(|h| h.key.as_str()).collect();
        ensure!(
            start.elapsed() < FEED_DEADLINE,
            "the second store did not see {what} within {FEED_DEADLINE:?}: it found {keys:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Store B's semantic search finds the items store A puts, ranks them by A's updated values,
/// and drops the ones A deletes, each within a second, in both directions.
pub async fn feed_second_store_sees_puts_updates_and_deletes(f: &dyn SharedFactory) -> Result<()> {
    let Some((a, b)) = f
        .open_two(StoreConfig::new().index(hashing_index().fields(["text"])))
        .await?
    else {
        return Ok(());
    };
    let ns = fresh(&["docs"]);
    // B has loaded its index and searched before A writes anything.
    ensure!(
        semantic(&*b, &ns, "garden").await?.is_empty(),
        "B saw items before any put"
    );

    let puts = (0..20)
        .map(|i| {
            let value = json!({"text": format!("note {i} about tomatoes and basil")});
            Op::Put(PutOp::new(&ns, format!("n{i:02}"), super::obj(value)))
        })
        .collect();
    a.batch(puts).await?;
    let took =
        within_deadline(&*b, &ns, "tomatoes", "A's 20 puts", |hits| hits.len() == 20).await?;
    eprintln!("feed: B saw A's 20 puts after {took:?}");

    // An update moves the item in B's ranking: its new text is now an exact match (score 1).
    let text = "a fleet of sailing boats in the harbour";
    a.put(&ns, "n07", json!({"text": text})).await?;
    let took = within_deadline(&*b, &ns, text, "A's update", |hits| {
        hits.first()
            .is_some_and(|h| h.key == "n07" && h.score.is_some_and(|s| s > 0.999))
    })
    .await?;
    eprintln!("feed: B saw A's update after {took:?}");

    a.delete(&ns, "n07").await?;
    a.delete(&ns, "n08").await?;
    let took = within_deadline(&*b, &ns, text, "A's deletes", |hits| {
        hits.len() == 18 && hits.iter().all(|h| h.key != "n07" && h.key != "n08")
    })
    .await?;
    eprintln!("feed: B no longer found A's deletes after {took:?}");

    // And the other way: A's index follows B's writes.
    b.put(&ns, "n09", json!({"text": text})).await?;
    within_deadline(&*a, &ns, text, "B's update", |hits| {
        hits.first()
            .is_some_and(|h| h.key == "n09" && h.score.is_some_and(|s| s > 0.999))
    })
    .await?;
    Ok(())
}
