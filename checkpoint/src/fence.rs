//! A saver whose every write proves that a lease still holds the thread.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::saver::{
    Capabilities, CheckpointSaver, DeltaChannelHistory, Lease, ListOptions, PruneStrategy, Save,
    TupleWithHistory,
};
use crate::version::ChannelVersion;
use crate::{
    ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata, CheckpointTuple, Error,
    Result, SerializedValue,
};

/// Wraps a saver so that `put`, `put_writes` and `save_batch` go through
/// [`CheckpointSaver::save_fenced`] with one lease: once the lease is lost, every write is a
/// `Conflict` and writes nothing. Reads pass through; whole-thread operations are refused.
#[derive(Debug, Clone)]
pub struct Fenced {
    inner: Arc<dyn CheckpointSaver>,
    lease: Lease,
}

impl Fenced {
    /// Fences `inner`'s writes with `lease` (its thread and token; renewals keep both).
    pub fn new(inner: Arc<dyn CheckpointSaver>, lease: Lease) -> Self {
        Fenced { inner, lease }
    }

    /// The lease the writes prove.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    fn refused(&self, operation: &str) -> Error {
        Error::InvalidConfig(format!(
            "{operation} is not fenced by a lease: call it on the saver itself"
        ))
    }
}

#[async_trait]
impl CheckpointSaver for Fenced {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn sealed(&self) -> bool {
        self.inner.sealed()
    }

    fn in_process(&self) -> bool {
        self.inner.in_process()
    }

    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        self.inner.get_tuple(config).await
    }

    async fn list(
        &self,
        config: Option<&CheckpointConfig>,
        options: &ListOptions,
    ) -> Result<Vec<CheckpointTuple>> {
        self.inner.list(config, options).await
    }

    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<CheckpointConfig> {
        let (returned, save) = Save::put(config, checkpoint, metadata, new_versions);
        self.inner.save_fenced(&self.lease, vec![save]).await?;
        Ok(returned)
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, SerializedValue)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        let save = Save::Writes {
            config: config.clone(),
            writes,
            task_id: task_id.to_owned(),
            task_path: task_path.to_owned(),
        };
        self.inner.save_fenced(&self.lease, vec![save]).await
    }

    async fn delete_thread(&self, _thread_id: &str) -> Result<()> {
        Err(self.refused("delete_thread"))
    }

    async fn save_batch(&self, saves: Vec<Save>) -> Result<()> {
        self.inner.save_fenced(&self.lease, saves).await
    }

    async fn save_fenced(&self, lease: &Lease, saves: Vec<Save>) -> Result<()> {
        self.inner.save_fenced(lease, saves).await
    }

    fn next_version(&self, current: Option<&ChannelVersion>) -> Result<ChannelVersion> {
        self.inner.next_version(current)
    }

    fn langgraph_values(&self) -> bool {
        self.inner.langgraph_values()
    }

    async fn delete_for_runs(&self, _run_ids: &[String]) -> Result<()> {
        Err(self.refused("delete_for_runs"))
    }

    async fn copy_thread(&self, _source: &str, _target: &str) -> Result<()> {
        Err(self.refused("copy_thread"))
    }

    async fn prune(&self, _thread_ids: &[String], _strategy: PruneStrategy) -> Result<()> {
        Err(self.refused("prune"))
    }

    async fn delta_channel_history(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<BTreeMap<String, DeltaChannelHistory>> {
        self.inner.delta_channel_history(config, channels).await
    }

    async fn get_tuple_with_history(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<Option<TupleWithHistory>> {
        self.inner.get_tuple_with_history(config, channels).await
    }

    async fn acquire_lease(&self, thread_id: &str, ttl: Duration) -> Result<Lease> {
        self.inner.acquire_lease(thread_id, ttl).await
    }

    async fn renew_lease(&self, lease: &Lease, ttl: Duration) -> Result<Lease> {
        self.inner.renew_lease(lease, ttl).await
    }

    async fn release_lease(&self, lease: &Lease) -> Result<()> {
        self.inner.release_lease(lease).await
    }
}
