//! The `Store` trait and its conveniences.

use async_trait::async_trait;
use serde_json::Value;

use crate::{
    Error, GetOp, Index, Item, ListNamespacesOp, Namespace, Op, OpResult, PutOp, Result,
    SearchItem, SearchOp, Ttl,
};

/// A namespaced document store with filters, TTL and semantic search.
///
/// Every operation is a [`batch`](Store::batch) of [`Op`]s. Within a batch, all reads (gets,
/// searches, namespace listings) see the store as it was before the batch, then the puts apply
/// atomically: the last put to a key wins, and a batch that fails writes nothing. Namespaces
/// are validated on every operation.
#[async_trait]
pub trait Store: Send + Sync {
    /// Runs `ops` and returns one result per op, in order.
    async fn batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>>;

    /// Deletes every expired item now; returns how many.
    async fn sweep_expired(&self) -> Result<usize>;

    /// Starts a background task that sweeps every `TtlConfig::sweep_interval`; it stops when
    /// the handle is dropped or [`SweeperHandle::stop`] is called.
    fn start_sweeper(&self) -> SweeperHandle;
}

/// Stops the background sweeper when dropped.
#[derive(Debug)]
pub struct SweeperHandle {
    task: Option<tokio::task::JoinHandle<()>>,
}

impl SweeperHandle {
    /// Runs `sweeper` on the current tokio runtime; outside one, nothing runs.
    pub(crate) fn spawn(sweeper: impl std::future::Future<Output = ()> + Send + 'static) -> Self {
        let task = tokio::runtime::Handle::try_current()
            .ok()
            .map(|runtime| runtime.spawn(sweeper));
        SweeperHandle { task }
    }

    /// Whether a sweeper task is running (false when started outside a tokio runtime).
    pub fn is_running(&self) -> bool {
        self.task.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops the sweeper.
    pub fn stop(mut self) {
        self.abort();
    }

    fn abort(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl Drop for SweeperHandle {
    fn drop(&mut self) {
        self.abort();
    }
}

/// Forwards [`Store`] through a smart pointer, so `Arc<dyn Store>` and `Box<dyn Store>` are stores.
macro_rules! forward_pointer {
    ($($pointer:ident)::+) => {
        #[async_trait]
        impl<S: Store + ?Sized> Store for $($pointer)::+<S> {
            async fn batch(&self, ops: Vec<Op>) -> Result<Vec<OpResult>> {
                (**self).batch(ops).await
            }

            async fn sweep_expired(&self) -> Result<usize> {
                (**self).sweep_expired().await
            }

            fn start_sweeper(&self) -> SweeperHandle {
                (**self).start_sweeper()
            }
        }
    };
}

forward_pointer!(std::sync::Arc);
forward_pointer!(Box);

/// One-op conveniences over [`Store::batch`], for every store.
///
/// Each builds its op and calls `batch` itself (no convenience calls another), so a call
/// costs one boxed future besides the store's own.
#[async_trait]
pub trait StoreExt: Store {
    /// Reads one item; `None` when missing or expired.
    async fn get(&self, namespace: impl Into<Namespace> + Send, key: &str) -> Result<Option<Item>> {
        match first(
            self.batch(vec![Op::Get(GetOp::new(namespace, key))])
                .await?,
        )? {
            OpResult::Item(item) => Ok(item),
            other => Err(unexpected(other)),
        }
    }

    /// Puts a JSON object with the default index and TTL.
    async fn put(
        &self,
        namespace: impl Into<Namespace> + Send,
        key: &str,
        value: Value,
    ) -> Result<()> {
        let op = put_op(namespace, key, value, Index::Default, Ttl::Default)?;
        first(self.batch(vec![op]).await?).map(drop)
    }

    /// Puts a JSON object with an explicit index choice and TTL.
    async fn put_with(
        &self,
        namespace: impl Into<Namespace> + Send,
        key: &str,
        value: Value,
        index: Index,
        ttl: Ttl,
    ) -> Result<()> {
        let op = put_op(namespace, key, value, index, ttl)?;
        first(self.batch(vec![op]).await?).map(drop)
    }

    /// Deletes one item; deleting a missing item is not an error.
    async fn delete(&self, namespace: impl Into<Namespace> + Send, key: &str) -> Result<()> {
        first(
            self.batch(vec![Op::Put(PutOp::delete(namespace, key))])
                .await?,
        )
        .map(drop)
    }

    /// Runs one search: without a query, newest update first (`results[0]` is the most
    /// recent, unlike the `memories[-1]` of LangGraph's in-memory store; see [`SearchOp`]).
    async fn search(&self, op: SearchOp) -> Result<Vec<SearchItem>> {
        match first(self.batch(vec![Op::Search(op)]).await?)? {
            OpResult::Items(items) => Ok(items),
            other => Err(unexpected(other)),
        }
    }

    /// Lists namespaces.
    async fn list_namespaces(&self, op: ListNamespacesOp) -> Result<Vec<Namespace>> {
        match first(self.batch(vec![Op::ListNamespaces(op)]).await?)? {
            OpResult::Namespaces(namespaces) => Ok(namespaces),
            other => Err(unexpected(other)),
        }
    }

    /// Runs a batch of one op.
    async fn one(&self, op: Op) -> Result<OpResult> {
        first(self.batch(vec![op]).await?)
    }
}

/// The put op for a JSON value, which must be an object.
fn put_op(
    namespace: impl Into<Namespace>,
    key: &str,
    value: Value,
    index: Index,
    ttl: Ttl,
) -> Result<Op> {
    let Value::Object(value) = value else {
        return Err(Error::InvalidValue(format!(
            "a stored value must be a JSON object, got {}",
            json_kind(&value)
        )));
    };
    Ok(Op::Put(
        PutOp::new(namespace, key, value).index(index).ttl(ttl),
    ))
}

/// The result of a batch of one op.
fn first(mut results: Vec<OpResult>) -> Result<OpResult> {
    results
        .pop()
        .ok_or_else(|| Error::InvalidConfig(String::from("the store returned no result")))
}

impl<S: Store + ?Sized> StoreExt for S {}

fn unexpected(result: OpResult) -> Error {
    Error::InvalidConfig(format!(
        "the store answered with the wrong result kind: {result:?}"
    ))
}

/// Names a JSON value's type for error messages.
pub fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
