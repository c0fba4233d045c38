//! `RedisSaver`: the `CheckpointSaver` trait on plain Redis 7.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::time::{Duration, UNIX_EPOCH};
use tracing::field::Empty;
use waypoint_checkpoint::metadata;

use async_trait::async_trait;
use redis::{ScriptInvocation, Value};
use serde_json::Value as Json;
use waypoint_checkpoint::{
    Capabilities, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointMetadata,
    CheckpointSaver, CheckpointTuple, DeltaChannelHistory, Error, Lease, ListOptions,
    PruneStrategy, Result, Save, Serde, SerializedValue, Slot,
    raw::{
        PreparedPut, PreparedSave, PreparedWrites, check_fenced_saves, json_contains, lease_lost,
        record_batch, record_put, record_read, record_writes,
    },
    serde::{CHILD_CHANNEL, child_record_task, record},
};

use crate::config::RedisConfig;
use crate::connection::{Connection, RedisConnection, with_conn};
use crate::convert::{
    self, Head, array, bytes, decode_value, decode_write, encode_value, encode_write, pairs,
    parse_fields, parse_metadata, required, text,
};
use crate::error::Fault;
use crate::keys::{
    self, KeyKind, ThreadKeys, blob_field, enc, enc_successor, parse_blob_field,
    parse_global_member, parse_index_member, parse_write_field, write_field,
};
use crate::scripts;
use crate::slots::{SHARDS, each_in_slot, per_slot};

/// How long a lapsed lease stays renewable by its holder (unless someone takes it over).
const LEASE_GRACE_MS: u64 = 24 * 60 * 60 * 1000;

/// Candidates fetched per round trip when `list` has a metadata filter.
const FILTERED_PAGE: usize = 256;

/// Largest page of `list` without a filter, and of the scans over the global index.
const PAGE: usize = 512;

/// How often `prune` and `delete_for_runs` re-plan a thread that changed under them.
const APPLY_ATTEMPTS: usize = 8;

/// The thread a prepared save writes.
fn thread_of(save: &PreparedSave) -> &str {
    match save {
        PreparedSave::Put(put) => &put.thread_id,
        PreparedSave::Writes(w) => &w.thread_id,
    }
}

/// A checkpointer on a Redis 7 server (no modules), in a key layout of its own (see the
/// crate docs): every key of a thread carries the thread's hash tag.
///
/// Operations share one multiplexed connection that reconnects by itself (clones, and the
/// stores `RedisSaver::store` opens, share it too). Each has a deadline
/// ([`RedisConfig::timeout`]) and fails with [`Error::Backend`] while the server is
/// unreachable; idempotent operations are retried once after a broken connection, so the
/// saver recovers from a server restart without being rebuilt.
#[derive(Clone)]
pub struct RedisSaver {
    db: Connection,
    config: RedisConfig,
}

impl fmt::Debug for RedisSaver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisSaver")
            .field("prefix", &self.config.prefix)
            .field("timeout", &self.config.timeout)
            .field("ttl", &self.config.ttl)
            .finish_non_exhaustive()
    }
}

fn json_bytes(value: &impl serde::Serialize) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|e| Error::serialization("json", e))
}

/// `(` + member: an exclusive bound of a lexicographic range.
fn exclusive(member: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(member.len() + 1);
    out.push(b'(');
    out.extend_from_slice(member);
    out
}

/// Where `list` reads its candidates from.
enum Source {
    /// Every thread: the global index.
    Global,
    /// One thread, every namespace: the thread index.
    Thread(String),
    /// One namespace of a thread.
    Ns(String, String),
    /// One id of a thread, in every namespace.
    ThreadId(String, String),
    /// One checkpoint.
    One(String, String, String),
}

/// A global-index entry: the checkpoint `(thread, ns, id)` it names.
type Entry<'a> = (&'a str, &'a str, &'a str);

/// A checkpoint `list` considers: thread, namespace, id.
type Candidate = (String, String, String);

/// One deletion of a prune plan.
enum Removal {
    Key(String),
    Member(String, Vec<u8>),
    Field(String, String),
    /// A global-index entry, removed after the thread's keys.
    Global(Vec<u8>),
}

/// A put's stored parts: checkpoint, metadata and blob-field list JSON, and the blobs-hash
/// field and value of each new channel value.
struct EncodedPut {
    checkpoint: Vec<u8>,
    metadata: Vec<u8>,
    fields: Vec<u8>,
    values: Vec<(String, Vec<u8>)>,
}

/// What `list` reads of one thread once it has the checkpoints: the heads (their indexes),
/// the namespaces whose newest id it needs, the value fields per namespace, and the
/// entries whose checkpoint was missing.
#[derive(Default)]
struct ThreadReads<'a> {
    heads: Vec<usize>,
    scopes: Vec<&'a str>,
    groups: Vec<(&'a str, Vec<&'a str>)>,
    dangling: Vec<(&'a str, &'a str)>,
}

/// A thread as [`scripts::DUMP`] returned it.
struct Dump {
    generation: Vec<u8>,
    entries: Vec<(String, Vec<Vec<u8>>)>,
}

/// What a plan needs of one stored checkpoint.
struct Stored {
    parent: Option<String>,
    versions: ChannelVersions,
    metadata: serde_json::Map<String, Json>,
}

/// What a plan needs of one namespace of a thread.
#[derive(Default)]
struct NsState {
    checkpoints: BTreeMap<String, Stored>,
    /// Blobs-hash field to whether it holds a value.
    blobs: HashMap<String, bool>,
    /// Ids that have a writes hash.
    writes: Vec<String>,
    /// The child records (authenticated history) among the writes: the id whose writes
    /// hold one, its writes-hash field, and the child's id.
    children: Vec<(String, String, String)>,
}

impl NsState {
    fn has_value(&self, stored: &Stored, channel: &str) -> bool {
        stored.versions.get(channel).is_some_and(|v| {
            self.blobs
                .get(&blob_field(channel, v.as_str()))
                .copied()
                .unwrap_or(false)
        })
    }

    /// The ids `KeepLatest` keeps (see [`waypoint_checkpoint::raw::ids_to_keep`]).
    fn ids_to_keep(&self) -> BTreeSet<String> {
        let Some((latest_id, latest)) = self.checkpoints.last_key_value() else {
            return BTreeSet::new();
        };
        waypoint_checkpoint::raw::ids_to_keep(
            latest_id,
            latest.metadata.get(metadata::DELTA_COUNTERS),
            latest.metadata.get(metadata::WRITES_FROM),
            |id| self.checkpoints.get(id).map(|c| c.parent.as_deref()),
            |id, channel| {
                self.checkpoints
                    .get(id)
                    .is_some_and(|c| self.has_value(c, channel))
            },
        )
    }
}

impl RedisSaver {
    /// Connects to the server `config` names, checks that it answers, and checks its
    /// persistence settings per [`RedisConfig::persistence`]. With
    /// [`RedisConfig::auto_setup`] (the default) it runs [`Self::setup`], which moves a
    /// global index written by an older version into its shards (one `ZRANGEBYLEX`
    /// otherwise).
    pub async fn connect(config: RedisConfig) -> Result<Self> {
        let db = Connection::open(&config).await?;
        let saver = RedisSaver { db, config };
        if saver.config.auto_setup {
            saver.setup().await?;
        }
        Ok(saver)
    }

    /// Connects to the server `url` names ([`RedisConfig::from_url`]) with default settings.
    pub async fn from_url(url: &str) -> Result<Self> {
        Self::connect(RedisConfig::from_url(url)?).await
    }

    /// Prepares the server for the saver: its keys are made as they are written (see the
    /// crate docs), so this checks that the server answers and moves the entries of a
    /// single global index `P:index` (written by versions before the sharded index) into
    /// the shards, so `list` across threads finds them. Idempotent, and safe to interrupt.
    #[tracing::instrument(level = "debug", skip_all, fields(backend = "redis", rows = Empty))]
    pub async fn setup(&self) -> Result<()> {
        self.db.ping("setup").await?;
        let legacy = keys::legacy_index(&self.config.prefix);
        let mut moved = 0;
        loop {
            let mut cmd = redis::cmd("ZRANGEBYLEX");
            cmd.arg(&legacy)
                .arg("-")
                .arg("+")
                .arg("LIMIT")
                .arg(0)
                .arg(PAGE);
            let members: Vec<Vec<u8>> = with_conn!(self.db, "setup", retry = true, |conn| cmd
                .query_async(&mut conn))?;
            if members.is_empty() {
                break;
            }
            let entries = members
                .iter()
                .map(|m| parse_global_member(m))
                .collect::<Result<Vec<_>>>()?;
            // Added to the shards before they leave the old index: never unlisted.
            self.index(
                "setup",
                entries
                    .iter()
                    .map(|(t, ns, id)| (t.as_str(), ns.as_str(), id.as_str())),
            )
            .await?;
            let mut cmd = redis::cmd("ZREM");
            cmd.arg(&legacy).arg(&members);
            with_conn!(self.db, "setup", retry = true, |conn| cmd
                .query_async::<Value>(&mut conn))?;
            moved += members.len();
        }
        tracing::Span::current().record("rows", moved);
        Ok(())
    }

    /// A store on this saver's connection and [`RedisConfig`] (prefix, timeouts,
    /// `auto_setup`), with `store`'s index and TTL policy: one connection serves both.
    #[cfg(feature = "store")]
    pub async fn store(
        &self,
        store: waypoint_store::StoreConfig,
    ) -> waypoint_store::Result<crate::RedisStore> {
        crate::RedisStore::on(self.db.clone(), self.config.clone(), store).await
    }

    /// The serde values are sealed and opened with.
    pub fn serde(&self) -> &Serde {
        &self.config.serde
    }

    /// The settings this saver was created with.
    pub fn config(&self) -> &RedisConfig {
        &self.config
    }

    /// The connection, for callers that want to run their own commands next to the saver.
    pub fn connection(&self) -> RedisConnection {
        self.db.manager()
    }

    /// Keeps every key of `thread_id` (present and future) from expiring, until
    /// [`Self::unpin_thread`] or `delete_thread`.
    pub async fn pin_thread(&self, thread_id: &str) -> Result<()> {
        self.pin(thread_id, true).await
    }

    /// Lets a pinned thread expire again after the configured ttl, from now.
    pub async fn unpin_thread(&self, thread_id: &str) -> Result<()> {
        self.pin(thread_id, false).await
    }

    async fn pin(&self, thread_id: &str, pinned: bool) -> Result<()> {
        if thread_id.is_empty() {
            return Err(Error::InvalidConfig(
                "pinning needs a non-empty thread_id".into(),
            ));
        }
        let k = self.keys(thread_id);
        let mut inv = scripts::PIN.prepare_invoke();
        inv.key(k.registry())
            .key(k.meta())
            .arg(if pinned { "1" } else { "0" })
            .arg(self.config.ttl_ms());
        let what = if pinned { "pin_thread" } else { "unpin_thread" };
        with_conn!(self.db, what, retry = true, |conn| inv
            .invoke_async::<Value>(&mut conn))?;
        Ok(())
    }

    fn keys(&self, thread_id: &str) -> ThreadKeys {
        ThreadKeys::new(&self.config.prefix, thread_id)
    }

    /// The key of a shard of the global index.
    fn shard(&self, shard: usize) -> String {
        keys::index_shard(&self.config.prefix, shard)
    }

    /// Adds the global-index entries of checkpoints just stored. Called after the thread's
    /// own write (never before): an entry whose checkpoint is missing is then stale, or its
    /// put is still running and adds it again after [`Self::forget`] removed it.
    async fn index<'a>(
        &self,
        what: &'static str,
        entries: impl IntoIterator<Item = Entry<'a>>,
    ) -> Result<()> {
        self.shard_members(what, "ZADD", entries).await
    }

    /// Runs `ZADD` (score 0) or `ZREM` of global-index entries on their shards.
    async fn shard_members<'a>(
        &self,
        what: &'static str,
        command: &str,
        entries: impl IntoIterator<Item = Entry<'a>>,
    ) -> Result<()> {
        let mut shards: BTreeMap<usize, Vec<Vec<u8>>> = BTreeMap::new();
        for (t, ns, id) in entries {
            let k = self.keys(t);
            shards
                .entry(k.shard())
                .or_default()
                .push(k.global_member(id, ns));
        }
        let pipes: Vec<redis::Pipeline> = shards
            .into_iter()
            .map(|(shard, members)| {
                let mut pipe = redis::pipe();
                let cmd = pipe.cmd(command).arg(self.shard(shard));
                for m in members {
                    if command == "ZADD" {
                        cmd.arg(0);
                    }
                    cmd.arg(m);
                }
                pipe.ignore();
                pipe
            })
            .collect();
        per_slot(&self.db, what, &pipes).await?;
        Ok(())
    }

    /// Removes global-index entries whose checkpoints are gone, then puts back those whose
    /// checkpoint exists after all (a put stores its checkpoint, then its entry: if the
    /// checkpoint appeared before the check below, the entry goes back here; if after, its
    /// put adds the entry after this removal). Never loses an entry of a stored checkpoint.
    async fn forget(&self, what: &'static str, entries: &[Entry<'_>]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        self.shard_members(what, "ZREM", entries.iter().copied())
            .await?;
        let exists = each_in_slot(&self.db, what, entries.iter().map(|e| e.0), |i, pipe| {
            let (t, ns, id) = entries[i];
            pipe.cmd("EXISTS").arg(self.keys(t).checkpoint(ns, id));
        })
        .await?;
        let back: Vec<Entry<'_>> = entries
            .iter()
            .zip(exists)
            .filter(|(_, e)| matches!(e, Value::Int(1)))
            .map(|(entry, _)| *entry)
            .collect();
        if back.is_empty() {
            return Ok(());
        }
        self.index(what, back).await
    }

    /// `Error::Serialization` (nothing sent) when `len` bytes are over
    /// [`RedisConfig::max_value_bytes`]; `tag` and `path` name the value.
    fn check_size(&self, len: usize, tag: &str, path: impl FnOnce() -> String) -> Result<()> {
        let limit = self.config.max_value_bytes;
        if len <= limit {
            return Ok(());
        }
        Err(Error::Serialization {
            tag: tag.to_owned(),
            path: Some(path()),
            message: format!(
                "the value is {len} bytes as stored, over the limit of {limit} bytes for one \
                 Redis value (RedisConfig::max_value_bytes; Redis refuses values over its \
                 proto-max-bulk-len, 512 MB by default): nothing was written"
            ),
        })
    }

    /// A put's stored parts, each checked against the size limit.
    fn encode_put(&self, put: &PreparedPut) -> Result<EncodedPut> {
        let checkpoint = record::encode_checkpoint(&put.checkpoint);
        self.check_size(checkpoint.len(), "record", || "checkpoint".into())?;
        let metadata = record::encode_metadata(&put.metadata);
        self.check_size(metadata.len(), "record", || "metadata".into())?;
        let fields: Vec<String> = put
            .checkpoint
            .channel_versions
            .iter()
            .map(|(channel, version)| blob_field(channel, version.as_str()))
            .collect();
        let fields = json_bytes(&fields)?;
        self.check_size(fields.len(), "json", || "channel_versions".into())?;
        let mut values = Vec::with_capacity(put.values.len());
        for v in &put.values {
            let encoded = encode_value(v.value.as_ref());
            let tag = v.value.as_ref().map_or("", |v| &*v.type_tag);
            self.check_size(encoded.len(), tag, || v.channel.clone())?;
            values.push((blob_field(&v.channel, v.version.as_str()), encoded));
        }
        Ok(EncodedPut {
            checkpoint,
            metadata,
            fields,
            values,
        })
    }

    fn add_put(&self, inv: &mut ScriptInvocation<'_>, put: &PreparedPut) -> Result<()> {
        let k = self.keys(&put.thread_id);
        let (ns, id) = (put.checkpoint_ns.as_str(), put.checkpoint.id.as_str());
        let encoded = self.encode_put(put)?;
        inv.key(k.registry())
            .key(k.meta())
            .key(k.checkpoint(ns, id))
            .key(k.ns_index(ns))
            .key(k.index())
            .key(k.blobs(ns));
        inv.arg("P")
            .arg(id)
            .arg(encoded.checkpoint)
            .arg(encoded.metadata)
            .arg(put.parent.as_deref().unwrap_or(""))
            .arg(encoded.fields)
            .arg(ThreadKeys::index_member(id, ns))
            .arg(encoded.values.len());
        for (field, value) in encoded.values {
            inv.arg(field).arg(value);
        }
        Ok(())
    }

    /// A call of a read script (`GET`, `HISTORY`) at checkpoint `id` of `(thread_id, ns)`
    /// (the latest when empty): the keys and arguments both take, in their order.
    fn read_invocation(
        &self,
        script: &'static redis::Script,
        thread_id: &str,
        ns: &str,
        id: &str,
    ) -> redis::ScriptInvocation<'static> {
        let k = self.keys(thread_id);
        let mut inv = script.prepare_invoke();
        inv.key(k.registry())
            .key(k.meta())
            .key(k.ns_index(ns))
            .key(k.index())
            .key(k.blobs(ns))
            .arg(self.config.ttl_ms())
            .arg(k.checkpoint_prefix(ns))
            .arg(k.writes_prefix(ns))
            .arg(id);
        inv
    }

    /// What [`scripts::SAVE`] does for one put without a ttl, as one MULTI/EXEC pipeline. The
    /// parent is set only by the first put of an id (an empty one marks a root), so a re-put
    /// keeps it, as the script does. A child record (authenticated history) goes in the
    /// same transaction.
    fn put_pipeline(&self, put: &PreparedPut) -> Result<redis::Pipeline> {
        let k = self.keys(&put.thread_id);
        let (ns, id) = (put.checkpoint_ns.as_str(), put.checkpoint.id.as_str());
        let encoded = self.encode_put(put)?;
        let (cp, nsz, idx, blobs) = (k.checkpoint(ns, id), k.ns_index(ns), k.index(), k.blobs(ns));
        let mut pipe = redis::pipe();
        pipe.atomic()
            .hset_nx(&cp, "p", put.parent.as_deref().unwrap_or(""))
            .ignore()
            .hset_multiple(
                &cp,
                &[
                    ("c", encoded.checkpoint),
                    ("m", encoded.metadata),
                    ("b", encoded.fields),
                ],
            )
            .ignore()
            .zadd(&nsz, id, 0)
            .ignore()
            .zadd(&idx, ThreadKeys::index_member(id, ns), 0)
            .ignore();
        // A stored version is never rewritten (see `PreparedPut::values`).
        for (field, value) in &encoded.values {
            pipe.hset_nx(&blobs, field, value).ignore();
        }
        pipe.sadd(k.registry(), &[&cp, &nsz, &idx, &blobs]).ignore();
        if let Some(child) = &put.child {
            // The child record on the parent, in the same transaction (authenticated
            // history), with put_writes' semantics.
            let w = k.writes(&child.checkpoint_ns, &child.checkpoint_id);
            for (field, value) in self.encode_writes(child)? {
                if child.replace {
                    pipe.hset(&w, field, value).ignore();
                } else {
                    pipe.hset_nx(&w, field, value).ignore();
                }
            }
            pipe.sadd(k.registry(), &w).ignore();
        }
        pipe.hincr(k.meta(), "gen", 1).ignore();
        Ok(pipe)
    }

    /// The writes-hash fields and values of a write call, each checked against the size
    /// limit.
    fn encode_writes(&self, w: &PreparedWrites) -> Result<Vec<(String, Vec<u8>)>> {
        let mut rows = Vec::with_capacity(w.rows.len());
        for row in &w.rows {
            let encoded = encode_write(&row.channel, &w.task_path, &row.value);
            self.check_size(encoded.len(), &row.value.type_tag, || {
                format!("{} (write {} of task {})", row.channel, row.idx, w.task_id)
            })?;
            rows.push((write_field(&w.task_id, row.idx), encoded));
        }
        Ok(rows)
    }

    fn add_writes(&self, inv: &mut ScriptInvocation<'_>, w: &PreparedWrites) -> Result<()> {
        let rows = self.encode_writes(w)?;
        let k = self.keys(&w.thread_id);
        inv.key(k.registry())
            .key(k.meta())
            .key(k.writes(&w.checkpoint_ns, &w.checkpoint_id));
        inv.arg("W")
            .arg(if w.replace { "1" } else { "0" })
            .arg(rows.len());
        for (field, value) in rows {
            inv.arg(field).arg(value);
        }
        Ok(())
    }

    /// Applies prepared saves, one [`scripts::SAVE`] call per thread (atomic per thread:
    /// all or nothing; its keys share a slot), fenced by `fence` when given: `Conflict` and
    /// nothing written once that lease is lost. Then adds the puts' global-index entries.
    async fn save(
        &self,
        what: &'static str,
        fence: Option<&Lease>,
        saves: &[PreparedSave],
    ) -> Result<()> {
        let mut threads: Vec<&str> = Vec::new();
        for save in saves {
            if !threads.contains(&thread_of(save)) {
                threads.push(thread_of(save));
            }
        }
        if let (Some(lease), true) = (fence, threads.is_empty()) {
            // An empty fenced batch still checks the lease.
            threads.push(&lease.thread_id);
        }
        for thread in threads {
            self.save_thread(what, fence, saves, thread).await?;
            let puts = saves.iter().filter_map(|save| match save {
                PreparedSave::Put(put) if put.thread_id == thread => Some((
                    put.thread_id.as_str(),
                    put.checkpoint_ns.as_str(),
                    put.checkpoint.id.as_str(),
                )),
                _ => None,
            });
            self.index(what, puts).await?;
        }
        Ok(())
    }

    /// The saves of `thread` among `saves`, in one [`scripts::SAVE`] call.
    async fn save_thread(
        &self,
        what: &'static str,
        fence: Option<&Lease>,
        saves: &[PreparedSave],
        thread: &str,
    ) -> Result<()> {
        let mut inv = scripts::SAVE.prepare_invoke();
        inv.arg(self.config.ttl_ms());
        match fence {
            // The lease key carries the thread's hash tag: it shares the thread's slot.
            Some(lease) => inv
                .key(keys::lease(&self.config.prefix, &lease.thread_id))
                .arg("1")
                .arg(&lease.token),
            None => inv.arg("0").arg(""),
        };
        let saves_of = || saves.iter().filter(|save| thread_of(save) == thread);
        if fence.is_some() {
            for save in saves_of() {
                if let PreparedSave::Put(put) = save
                    && let Some(parent) = put.expected_head()
                {
                    let k = self.keys(&put.thread_id);
                    inv.key(k.ns_index(&put.checkpoint_ns))
                        .arg("H")
                        .arg(&put.checkpoint.id)
                        .arg(parent);
                }
            }
        }
        for save in saves_of() {
            match save {
                PreparedSave::Put(put) => {
                    self.add_put(&mut inv, put)?;
                    // The child record on the parent (authenticated history): one more
                    // write call of the same script, so stored with the put or not at all.
                    if let Some(child) = &put.child {
                        self.add_writes(&mut inv, child)?;
                    }
                }
                PreparedSave::Writes(w) => self.add_writes(&mut inv, w)?,
            }
        }
        // Every operation is idempotent, so a batch cut off by a broken connection (never
        // half-applied: a script runs whole or not at all) is safe to send again. A fenced
        // one whose first attempt landed but whose lease was taken over before the retry
        // reports `Conflict` although its writes (made while the lease held) are stored.
        let reply: redis::Value = with_conn!(self.db, what, retry = true, |conn| inv
            .invoke_async(&mut conn))?;
        match (fence, reply) {
            (Some(lease), redis::Value::Int(n)) if n < 0 => Err(lease_lost(lease)),
            (_, redis::Value::Int(_)) => Ok(()),
            (_, redis::Value::BulkString(newest)) => {
                let newest = String::from_utf8_lossy(&newest);
                Err(waypoint_checkpoint::raw::head_moved_in(saves, &newest))
            }
            (_, other) => {
                Err(Fault::unexpected(what, format!("unexpected reply {other:?}")).into())
            }
        }
    }

    /// Up to `count` members of `source` below `upper` (exclusive), newest first.
    async fn page(
        &self,
        source: &Source,
        upper: Option<&[u8]>,
        count: usize,
    ) -> Result<Vec<Candidate>> {
        let (key, thread) = match source {
            Source::Global => return self.global_page(upper, count).await,
            Source::Thread(t) => (self.keys(t).index(), t),
            Source::Ns(t, ns) => (self.keys(t).ns_index(ns), t),
            Source::ThreadId(t, id) => {
                // Every namespace's checkpoint with this id: members starting with enc(id).
                let k = self.keys(t);
                let (low, high) = (
                    [b"[".as_slice(), &enc(id.as_bytes())].concat(),
                    exclusive(&enc_successor(id.as_bytes())),
                );
                let mut cmd = redis::cmd("ZRANGEBYLEX");
                cmd.arg(k.index()).arg(&low).arg(&high);
                let reply: Vec<Vec<u8>> = with_conn!(self.db, "list", retry = true, |conn| cmd
                    .query_async(&mut conn))?;
                let mut out = Vec::with_capacity(reply.len());
                for m in reply.iter().rev() {
                    let (id, ns) = parse_index_member(m)?;
                    out.push((t.clone(), ns, id));
                }
                return Ok(out);
            }
            Source::One(t, ns, id) => return Ok(vec![(t.clone(), ns.clone(), id.clone())]),
        };
        let max = upper.map_or_else(|| b"+".to_vec(), exclusive);
        let mut cmd = redis::cmd("ZREVRANGEBYLEX");
        cmd.arg(&key)
            .arg(&max)
            .arg("-")
            .arg("LIMIT")
            .arg(0)
            .arg(count);
        let reply: Vec<Vec<u8>> = with_conn!(self.db, "list", retry = true, |conn| cmd
            .query_async(&mut conn))?;
        reply
            .iter()
            .map(|m| match source {
                Source::Ns(_, ns) => Ok((
                    thread.clone(),
                    ns.clone(),
                    String::from_utf8(m.clone())
                        .map_err(|_| keys::corrupt("a checkpoint id is not UTF-8"))?,
                )),
                _ => {
                    let (id, ns) = parse_index_member(m)?;
                    Ok((thread.clone(), ns, id))
                }
            })
            .collect()
    }

    /// Up to `count` entries of the global index below `upper` (exclusive), newest first:
    /// the first `count` of every shard, merged.
    async fn global_page(&self, upper: Option<&[u8]>, count: usize) -> Result<Vec<Candidate>> {
        let max = upper.map_or_else(|| b"+".to_vec(), exclusive);
        let replies = each_in_slot(&self.db, "list", 0..SHARDS, |shard, pipe| {
            pipe.cmd("ZREVRANGEBYLEX")
                .arg(self.shard(shard))
                .arg(&max)
                .arg("-")
                .arg("LIMIT")
                .arg(0)
                .arg(count);
        })
        .await?;
        let mut members = Vec::new();
        for reply in replies {
            for m in array(reply)? {
                members.push(required(m, "a global index entry")?);
            }
        }
        members.sort_unstable_by(|a, b| b.cmp(a));
        members.truncate(count);
        members.iter().map(|m| parse_global_member(m)).collect()
    }

    /// The tuples of `candidates` that exist and match the filter, at most `wanted`. The
    /// reads go per thread (one slot each: a pipeline per thread, all at once), and entries
    /// of checkpoints found missing (expired with their thread) are forgotten.
    async fn load(
        &self,
        candidates: &[Candidate],
        filter: Option<&Json>,
        wanted: usize,
    ) -> Result<Vec<CheckpointTuple>> {
        if candidates.is_empty() || wanted == 0 {
            return Ok(Vec::new());
        }
        let threads = candidates.iter().map(|(t, _, _)| t);
        let replies = each_in_slot(&self.db, "list", threads, |i, pipe| {
            let (t, ns, id) = &candidates[i];
            pipe.cmd("HMGET")
                .arg(self.keys(t).checkpoint(ns, id))
                .arg("c")
                .arg("m")
                .arg("p")
                .arg("b");
        })
        .await?;
        let mut heads = Vec::new();
        let mut dangling = Vec::new();
        for ((t, ns, id), reply) in candidates.iter().zip(replies) {
            if heads.len() >= wanted {
                break;
            }
            let mut fields = array(reply)?.into_iter();
            let (Some(c), Some(m), Some(p), Some(b)) =
                (fields.next(), fields.next(), fields.next(), fields.next())
            else {
                return Err(keys::corrupt("a checkpoint hash reply is short"));
            };
            let Some(checkpoint) = bytes(c)? else {
                // The index outlived the checkpoint (expired with its thread): forget it.
                dangling.push((t.as_str(), ns.as_str(), id.as_str()));
                continue;
            };
            let metadata = Json::Object(parse_metadata(&required(m, "metadata")?)?);
            if filter.is_some_and(|f| !json_contains(&metadata, f)) {
                continue;
            }
            let Json::Object(metadata) = metadata else {
                continue;
            };
            heads.push(Head {
                thread_id: t.clone(),
                ns: ns.clone(),
                id: id.clone(),
                checkpoint,
                metadata: CheckpointMetadata::from_json(metadata)?,
                parent: parent_id(bytes(p)?)?,
                fields: parse_fields(&required(b, "the blob field list")?)?,
            });
        }
        if heads.is_empty() && dangling.is_empty() {
            return Ok(Vec::new());
        }
        // Per thread, in one round trip: writes, then values (each distinct field of a
        // namespace once), then the ttl renewal and index cleanups. With an authenticated
        // history, the newest id of each namespace read too, in the same transaction as the
        // writes: a child record on the newest checkpoint is only ever seen when its child
        // is gone.
        let authenticated = self.serde().authenticates_history();
        let ttl = self.config.ttl_ms();
        let mut plan: BTreeMap<&str, ThreadReads<'_>> = BTreeMap::new();
        for (i, head) in heads.iter().enumerate() {
            plan.entry(&head.thread_id).or_default().heads.push(i);
        }
        for &(t, ns, id) in &dangling {
            plan.entry(t).or_default().dangling.push((ns, id));
        }
        for reads in plan.values_mut() {
            let mut groups: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
            for &i in &reads.heads {
                let head = &heads[i];
                let group = groups.entry(&head.ns).or_default();
                group.extend(head.fields.iter().map(String::as_str));
            }
            if authenticated {
                reads.scopes = groups.keys().copied().collect();
            }
            reads.groups = groups
                .into_iter()
                .filter(|(_, fields)| !fields.is_empty())
                .map(|(ns, fields)| (ns, fields.into_iter().collect()))
                .collect();
        }
        let pipes: Vec<redis::Pipeline> = plan
            .iter()
            .map(|(t, reads)| {
                let k = self.keys(t);
                let mut pipe = redis::pipe();
                if authenticated {
                    pipe.atomic();
                }
                for &i in &reads.heads {
                    pipe.cmd("HGETALL")
                        .arg(k.writes(&heads[i].ns, &heads[i].id));
                }
                for ns in &reads.scopes {
                    pipe.cmd("ZREVRANGEBYLEX")
                        .arg(k.ns_index(ns))
                        .arg("+")
                        .arg("-")
                        .arg("LIMIT")
                        .arg(0)
                        .arg(1);
                }
                for (ns, fields) in &reads.groups {
                    pipe.cmd("HMGET").arg(k.blobs(ns)).arg(fields);
                }
                if ttl > 0 && !reads.heads.is_empty() {
                    let mut touched = Vec::with_capacity(5 * reads.heads.len());
                    for &i in &reads.heads {
                        let (ns, id) = (&heads[i].ns, &heads[i].id);
                        touched.extend([
                            k.checkpoint(ns, id),
                            k.writes(ns, id),
                            k.ns_index(ns),
                            k.blobs(ns),
                            k.index(),
                        ]);
                    }
                    pipe.cmd("EVAL")
                        .arg(&*scripts::TOUCH_SOURCE)
                        .arg(2)
                        .arg(k.registry())
                        .arg(k.meta())
                        .arg(ttl)
                        .arg(touched)
                        .ignore();
                }
                for (ns, id) in &reads.dangling {
                    pipe.cmd("EVAL")
                        .arg(scripts::CLEAN)
                        .arg(3)
                        .arg(k.checkpoint(ns, id))
                        .arg(k.ns_index(ns))
                        .arg(k.index())
                        .arg(id)
                        .arg(ThreadKeys::index_member(id, ns));
                }
                pipe
            })
            .collect();
        let replies = per_slot(&self.db, "list", &pipes).await?;
        let mut writes = vec![Vec::new(); heads.len()];
        let mut newest: HashMap<(String, String), String> = HashMap::new();
        let mut values: HashMap<(String, String), HashMap<String, Vec<u8>>> = HashMap::new();
        let mut gone = Vec::new();
        for ((t, reads), reply) in plan.iter().zip(replies) {
            let mut reply = reply.into_iter();
            let mut next = || reply.next().unwrap_or(Value::Nil);
            for &i in &reads.heads {
                writes[i] = pairs(next())?;
            }
            for ns in &reads.scopes {
                if let Some(id) = array(next())?.into_iter().next() {
                    newest.insert(
                        (t.to_string(), ns.to_string()),
                        text(id, "a checkpoint id")?,
                    );
                }
            }
            for (ns, fields) in &reads.groups {
                let reply = array(next())?;
                let group = values.entry((t.to_string(), ns.to_string())).or_default();
                for (field, value) in fields.iter().zip(reply) {
                    if let Some(value) = bytes(value)? {
                        group.insert((*field).to_owned(), value);
                    }
                }
            }
            for &(ns, id) in &reads.dangling {
                if matches!(next(), Value::Int(1)) {
                    gone.push((*t, ns, id));
                }
            }
        }
        self.forget("list", &gone).await?;
        let serde = self.serde();
        let none = HashMap::new();
        let mut out = Vec::with_capacity(heads.len());
        for (head, writes) in heads.into_iter().zip(writes) {
            let scope = (head.thread_id.clone(), head.ns.clone());
            let latest = newest.get(&scope).is_some_and(|n| *n == head.id);
            let group = values.get(&scope).unwrap_or(&none);
            let value_of = |field: &str| group.get(field).map(Vec::as_slice);
            out.push(convert::tuple(serde, head, value_of, writes, latest)?);
        }
        Ok(out)
    }

    /// Everything of a thread, read atomically.
    async fn dump(&self, thread_id: &str, light: bool) -> Result<Dump> {
        let k = self.keys(thread_id);
        let mut inv = scripts::DUMP.prepare_invoke();
        inv.key(k.registry())
            .key(k.meta())
            .arg(&k.base)
            .arg(if light { "1" } else { "0" });
        let reply: Value = with_conn!(self.db, "dump", retry = true, |conn| inv
            .invoke_async(&mut conn))?;
        let mut items = array(reply)?.into_iter();
        let generation = required(items.next().unwrap_or(Value::Nil), "the thread generation")?;
        let mut entries = Vec::new();
        while let (Some(key), Some(content)) = (items.next(), items.next()) {
            let key = text(key, "a key name")?;
            let content = array(content)?
                .into_iter()
                .map(|v| required(v, "a stored item"))
                .collect::<Result<Vec<_>>>()?;
            entries.push((key, content));
        }
        Ok(Dump {
            generation,
            entries,
        })
    }

    /// The namespaces of a dumped thread, as plans need them.
    fn namespaces(&self, k: &ThreadKeys, dump: &Dump) -> Result<BTreeMap<String, NsState>> {
        let mut out: BTreeMap<String, NsState> = BTreeMap::new();
        for (key, content) in &dump.entries {
            match k.parse(key) {
                Some(KeyKind::Checkpoint(ns, id)) => {
                    let fields: HashMap<&[u8], &[u8]> = content
                        .chunks_exact(2)
                        .map(|p| (p[0].as_slice(), p[1].as_slice()))
                        .collect();
                    let (Some(c), Some(m)) =
                        (fields.get(b"c".as_slice()), fields.get(b"m".as_slice()))
                    else {
                        continue;
                    };
                    let checkpoint = record::decode_checkpoint(c)?;
                    let parent = parent_id(fields.get(b"p".as_slice()).map(|p| p.to_vec()))?;
                    out.entry(ns).or_default().checkpoints.insert(
                        id,
                        Stored {
                            parent,
                            versions: checkpoint.channel_versions,
                            metadata: parse_metadata(m)?,
                        },
                    );
                }
                Some(KeyKind::Blobs(ns)) => {
                    let blobs = &mut out.entry(ns).or_default().blobs;
                    for pair in content.chunks_exact(2) {
                        let field = String::from_utf8(pair[0].clone())
                            .map_err(|_| keys::corrupt("a value field is not UTF-8"))?;
                        blobs.insert(field, !pair[1].is_empty());
                    }
                }
                Some(KeyKind::Writes(ns, id)) => {
                    let state = out.entry(ns).or_default();
                    for pair in content.chunks_exact(2) {
                        if let Some(child) = child_of(&pair[0], &pair[1]) {
                            let field = String::from_utf8_lossy(&pair[0]).into_owned();
                            state.children.push((id.clone(), field, child));
                        }
                    }
                    state.writes.push(id);
                }
                _ => {}
            }
        }
        Ok(out)
    }

    /// The deletions that drop `doomed` checkpoints (and the writes `drop_writes` names) of
    /// one namespace, and every value no remaining checkpoint refers to.
    fn removals(
        &self,
        k: &ThreadKeys,
        ns: &str,
        state: &NsState,
        doomed: &BTreeSet<String>,
        drop_writes: impl Fn(&str) -> bool,
    ) -> Vec<Removal> {
        let mut out = Vec::new();
        for id in doomed {
            out.push(Removal::Key(k.checkpoint(ns, id)));
            out.push(Removal::Member(k.ns_index(ns), id.as_bytes().to_vec()));
            out.push(Removal::Member(k.index(), ThreadKeys::index_member(id, ns)));
            out.push(Removal::Global(k.global_member(id, ns)));
        }
        for id in &state.writes {
            if drop_writes(id) {
                out.push(Removal::Key(k.writes(ns, id)));
            }
        }
        let live: std::collections::HashSet<String> = state
            .checkpoints
            .iter()
            .filter(|(id, _)| !doomed.contains(*id))
            .flat_map(|(_, s)| {
                s.versions
                    .iter()
                    .map(|(channel, version)| blob_field(channel, version.as_str()))
            })
            .collect();
        for field in state.blobs.keys() {
            if !live.contains(field) {
                out.push(Removal::Field(k.blobs(ns), field.clone()));
            }
        }
        out
    }

    /// Adds to `threads` those of the checkpoints listed in one shard of the global index
    /// whose metadata names one of `runs`.
    async fn threads_of_runs(
        &self,
        shard: &str,
        runs: &BTreeSet<&str>,
        threads: &mut BTreeSet<String>,
    ) -> Result<()> {
        let mut lower = b"-".to_vec();
        loop {
            let mut cmd = redis::cmd("ZRANGEBYLEX");
            cmd.arg(shard)
                .arg(&lower)
                .arg("+")
                .arg("LIMIT")
                .arg(0)
                .arg(PAGE);
            let members: Vec<Vec<u8>> =
                with_conn!(self.db, "delete_for_runs", retry = true, |conn| cmd
                    .query_async(&mut conn))?;
            let Some(last) = members.last() else {
                return Ok(());
            };
            lower = exclusive(last);
            let candidates = members
                .iter()
                .map(|m| parse_global_member(m))
                .collect::<Result<Vec<_>>>()?;
            let slots = candidates.iter().map(|(t, _, _)| t);
            let metadata = each_in_slot(&self.db, "delete_for_runs", slots, |i, pipe| {
                let (t, ns, id) = &candidates[i];
                pipe.cmd("HGET")
                    .arg(self.keys(t).checkpoint(ns, id))
                    .arg("m");
            })
            .await?;
            for ((t, _, _), reply) in candidates.iter().zip(metadata) {
                let Some(m) = bytes(reply)? else { continue };
                let meta = parse_metadata(&m)?;
                if meta
                    .get("run_id")
                    .and_then(Json::as_str)
                    .is_some_and(|r| runs.contains(r))
                {
                    threads.insert(t.clone());
                }
            }
            if members.len() < PAGE {
                return Ok(());
            }
        }
    }

    /// Plans deletions on a consistent dump of a thread and applies them if the thread did
    /// not change meanwhile; re-plans otherwise.
    async fn replan(
        &self,
        thread_id: &str,
        what: &'static str,
        plan: impl Fn(&ThreadKeys, &BTreeMap<String, NsState>) -> Vec<Removal>,
    ) -> Result<()> {
        let k = self.keys(thread_id);
        for _ in 0..APPLY_ATTEMPTS {
            let dump = self.dump(thread_id, true).await?;
            let removals = plan(&k, &self.namespaces(&k, &dump)?);
            if removals.is_empty() {
                return Ok(());
            }
            let mut inv = scripts::APPLY.prepare_invoke();
            inv.key(k.registry())
                .key(k.meta())
                .arg(&dump.generation)
                .arg(self.config.ttl_ms());
            let mut global = Vec::new();
            for r in &removals {
                match r {
                    Removal::Key(key) => inv.arg("D").arg(key),
                    Removal::Member(key, m) => inv.arg("Z").arg(key).arg(m),
                    Removal::Field(key, f) => inv.arg("H").arg(key).arg(f),
                    Removal::Global(m) => {
                        global.push(m);
                        continue;
                    }
                };
            }
            let applied: i64 = with_conn!(self.db, what, retry = true, |conn| inv
                .invoke_async(&mut conn))?;
            if applied == 1 {
                // The thread's keys first, then its entries: an entry may outlive its
                // checkpoint (`list` forgets it), never the reverse.
                if !global.is_empty() {
                    let mut cmd = redis::cmd("ZREM");
                    cmd.arg(self.shard(k.shard())).arg(&global);
                    with_conn!(self.db, what, retry = true, |conn| cmd
                        .query_async::<Value>(&mut conn))?;
                }
                return Ok(());
            }
        }
        Err(Error::Conflict(format!(
            "thread `{thread_id}` kept changing during `{what}`; try again"
        )))
    }
}

#[async_trait]
impl CheckpointSaver for RedisSaver {
    fn backend(&self) -> &'static str {
        "redis"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    fn sealed(&self) -> bool {
        self.serde().is_encrypted()
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "redis",
        thread_id = %config.thread_id, checkpoint_ns = config.ns(), checkpoint_id = Empty,
        rows = Empty, bytes = Empty))]
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>> {
        if config.thread_id.is_empty() {
            return Ok(None);
        }
        let (thread_id, ns) = (config.thread_id.as_str(), config.ns());
        let id = config.checkpoint_id.as_deref().unwrap_or("");
        let inv = self.read_invocation(&scripts::GET, thread_id, ns, id);
        let reply: Value = with_conn!(self.db, "get_tuple", retry = true, |conn| inv
            .invoke_async(&mut conn))?;
        if matches!(reply, Value::Nil) {
            return Ok(None);
        }
        let mut items = array(reply)?.into_iter();
        let mut next = || items.next().unwrap_or(Value::Nil);
        let id = text(next(), "the checkpoint id")?;
        let checkpoint = required(next(), "the checkpoint")?;
        let metadata =
            CheckpointMetadata::from_json(parse_metadata(&required(next(), "metadata")?)?)?;
        let parent = parent_id(bytes(next())?)?;
        let fields = parse_fields(&required(next(), "the blob field list")?)?;
        let values = array(next())?;
        let writes = pairs(next())?;
        let latest = match next() {
            Value::Int(flag) => flag == 1,
            other => {
                return Err(keys::corrupt(&format!(
                    "expected the latest flag, got {other:?}"
                )));
            }
        };
        let mut by_field: HashMap<&str, Vec<u8>> = HashMap::with_capacity(fields.len());
        for (field, value) in fields.iter().zip(values) {
            if let Some(value) = bytes(value)? {
                by_field.insert(field, value);
            }
        }
        let head = Head {
            thread_id: thread_id.to_owned(),
            ns: ns.to_owned(),
            id,
            checkpoint,
            metadata,
            parent,
            fields: fields.clone(),
        };
        let value_of = |field: &str| by_field.get(field).map(Vec::as_slice);
        let tuple = Some(convert::tuple(
            self.serde(),
            head,
            value_of,
            writes,
            latest,
        )?);
        record_read(&tuple);
        Ok(tuple)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = "redis",
        thread_id = %config.thread_id, checkpoint_ns = config.ns(),
        checkpoint_id = config.checkpoint_id.as_deref(), channels = channels.len()))]
    async fn delta_channel_history(
        &self,
        config: &CheckpointConfig,
        channels: &[String],
    ) -> Result<BTreeMap<String, DeltaChannelHistory>> {
        let mut out: BTreeMap<String, DeltaChannelHistory> = channels
            .iter()
            .map(|c| (c.clone(), DeltaChannelHistory::default()))
            .collect();
        if out.is_empty() || config.thread_id.is_empty() {
            return Ok(out);
        }
        let (thread_id, ns) = (config.thread_id.as_str(), config.ns());
        let id = config.checkpoint_id.as_deref().unwrap_or("");
        // The whole walk is one script (one round trip), with the keys and ttl renewals of
        // `get_tuple` on every checkpoint it visits.
        let mut inv = self.read_invocation(&scripts::HISTORY, thread_id, ns, id);
        for channel in out.keys() {
            inv.arg(channel);
        }
        let reply: Value = with_conn!(self.db, "delta_channel_history", retry = true, |conn| inv
            .invoke_async(&mut conn))?;
        let mut items = array(reply)?.into_iter();
        let mut ancestors = Vec::new();
        while let Some(id) = items.next() {
            let id = text(id, "an ancestor id")?;
            let writes = counted_pairs(&mut items)?;
            let seeds = counted_pairs(&mut items)?;
            ancestors.push((id, writes, seeds));
        }
        // Ancestors come newest first; writes are wanted oldest first.
        let serde = self.serde();
        for (id, writes, seeds) in ancestors.into_iter().rev() {
            for write in convert::pending_writes(serde, thread_id, ns, &id, writes)? {
                if let Some(history) = out.get_mut(&write.channel) {
                    history.writes.push(write);
                }
            }
            for (field, raw) in seeds {
                let (channel, version) = parse_blob_field(&field)?;
                let Some(value) = decode_value(&raw)? else {
                    continue;
                };
                if let Some(history) = out.get_mut(&channel) {
                    history.seed = Some(convert::open_value(
                        serde, thread_id, ns, &channel, &version, &value,
                    )?);
                }
            }
        }
        Ok(out)
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "redis",
        thread_id = config.map(|c| c.thread_id.as_str()),
        checkpoint_ns = config.and_then(|c| c.checkpoint_ns.as_deref()), limit = options.limit,
        filter = options.filter.is_some(), rows = Empty, bytes = Empty))]
    async fn list(
        &self,
        config: Option<&CheckpointConfig>,
        options: &ListOptions,
    ) -> Result<Vec<CheckpointTuple>> {
        let out = self.list_tuples(config, options).await?;
        record_read(&out);
        Ok(out)
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "redis",
        thread_id = %config.thread_id, checkpoint_ns = config.ns(), checkpoint_id = %checkpoint.id,
        bytes = Empty))]
    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<CheckpointConfig> {
        let put = PreparedPut::new(self.serde(), config, checkpoint, metadata, new_versions)?;
        record_put(&put);
        if self.config.ttl_ms() == 0 {
            // Without a ttl the script's writes are unconditional: a MULTI/EXEC pipeline does
            // them atomically in one round trip, at a fraction of the script's server time.
            let mut pipe = self.put_pipeline(&put)?;
            let (thread, ns, id) = (
                put.thread_id.as_str(),
                put.checkpoint_ns.as_str(),
                put.checkpoint.id.as_str(),
            );
            // On one server the global-index entry joins the thread's transaction (one round
            // trip, atomic); a cluster keeps it in another slot, added after the transaction.
            let standalone = !self.db.is_cluster();
            if standalone {
                let k = self.keys(thread);
                pipe.zadd(self.shard(k.shard()), k.global_member(id, ns), 0)
                    .ignore();
            }
            with_conn!(self.db, "put", retry = true, |conn| self
                .db
                .query(&pipe, &mut conn))?;
            if !standalone {
                self.index("put", [(thread, ns, id)]).await?;
            }
            return Ok(put.config());
        }
        let returned = put.config();
        self.save("put", None, &[PreparedSave::Put(Box::new(put))])
            .await?;
        Ok(returned)
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "redis",
        thread_id = %config.thread_id, checkpoint_ns = config.ns(),
        checkpoint_id = config.checkpoint_id.as_deref(), task_id = task_id, rows = Empty,
        bytes = Empty))]
    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, SerializedValue)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<()> {
        let Some(w) = PreparedWrites::new(self.serde(), config, writes, task_id, task_path)? else {
            return Ok(());
        };
        record_writes(&w);
        self.save("put_writes", None, &[PreparedSave::Writes(w)])
            .await
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "redis",
        checkpoint_ns = Empty, checkpoint_id = Empty, rows = Empty, bytes = Empty))]
    async fn save_batch(&self, saves: Vec<Save>) -> Result<()> {
        // Prepared (validated, sealed) first, then applied by one script call per thread.
        let prepared = PreparedSave::batch(self.serde(), saves)?;
        record_batch(&prepared);
        if prepared.is_empty() {
            return Ok(());
        }
        self.save("save_batch", None, &prepared).await
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "redis",
        thread_id = %lease.thread_id, checkpoint_ns = Empty, checkpoint_id = Empty, rows = Empty,
        bytes = Empty))]
    async fn save_fenced(&self, lease: &Lease, saves: Vec<Save>) -> Result<()> {
        check_fenced_saves(lease, &saves)?;
        // Sealed before the call; the token check and the writes are one script. An empty
        // batch still checks the lease.
        let prepared = PreparedSave::batch(self.serde(), saves)?;
        record_batch(&prepared);
        self.save("save_fenced", Some(lease), &prepared).await
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "redis",
        thread_id = thread_id, rows = Empty))]
    async fn delete_thread(&self, thread_id: &str) -> Result<()> {
        let k = self.keys(thread_id);
        let mut inv = scripts::DELETE.prepare_invoke();
        inv.key(k.registry()).key(k.meta()).key(k.index());
        let members: Vec<Vec<u8>> = with_conn!(self.db, "delete_thread", retry = true, |conn| {
            inv.invoke_async(&mut conn)
        })?;
        tracing::Span::current().record("rows", members.len());
        // Then the thread's entries of the global index, all in its shard (a retry after a
        // lost reply finds no members: `list` forgets those entries when it meets them).
        let entries: Vec<(String, String)> = members
            .iter()
            .filter_map(|m| parse_index_member(m).ok())
            .collect();
        self.shard_members(
            "delete_thread",
            "ZREM",
            entries
                .iter()
                .map(|(id, ns)| (thread_id, ns.as_str(), id.as_str())),
        )
        .await
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "redis",
        runs = run_ids.len()))]
    async fn delete_for_runs(&self, run_ids: &[String]) -> Result<()> {
        if run_ids.is_empty() {
            return Ok(());
        }
        let runs: BTreeSet<&str> = run_ids.iter().map(String::as_str).collect();
        // No index by run: one pass over the global index finds the threads concerned.
        let mut threads: BTreeSet<String> = BTreeSet::new();
        for shard in 0..SHARDS {
            self.threads_of_runs(&self.shard(shard), &runs, &mut threads)
                .await?;
        }
        for thread_id in &threads {
            self.replan(thread_id, "delete_for_runs", |k, namespaces| {
                let mut out = Vec::new();
                for (ns, state) in namespaces {
                    let doomed: BTreeSet<String> = state
                        .checkpoints
                        .iter()
                        .filter(|(_, s)| {
                            s.metadata
                                .get("run_id")
                                .and_then(Json::as_str)
                                .is_some_and(|r| runs.contains(r))
                        })
                        .map(|(id, _)| id.clone())
                        .collect();
                    if !doomed.is_empty() {
                        out.extend(self.removals(k, ns, state, &doomed, |id| doomed.contains(id)));
                        // Their child records on surviving parents go with them (the
                        // writes of doomed parents go whole).
                        for (parent, field, child) in &state.children {
                            if doomed.contains(child) && !doomed.contains(parent) {
                                out.push(Removal::Field(k.writes(ns, parent), field.clone()));
                            }
                        }
                    }
                }
                out
            })
            .await?;
        }
        Ok(())
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "redis",
        thread_id = source_thread_id, target_thread_id = target_thread_id))]
    async fn copy_thread(&self, source_thread_id: &str, target_thread_id: &str) -> Result<()> {
        if source_thread_id == target_thread_id {
            return Err(Error::Conflict("cannot copy a thread onto itself".into()));
        }
        let conflict = || {
            Error::Conflict(format!(
                "target thread `{target_thread_id}` already has checkpoints"
            ))
        };
        let (from, to) = (self.keys(source_thread_id), self.keys(target_thread_id));
        let dump = self.dump(source_thread_id, false).await?;
        let has_checkpoints = dump
            .entries
            .iter()
            .any(|(key, _)| from.parse(key) == Some(KeyKind::Index));
        if !has_checkpoints {
            let target_index = to.index();
            let mut cmd = redis::cmd("ZCARD");
            cmd.arg(&target_index);
            let taken: i64 = with_conn!(self.db, "copy_thread", retry = true, |conn| cmd
                .query_async(&mut conn))?;
            return if taken > 0 { Err(conflict()) } else { Ok(()) };
        }
        let encrypted = self.serde().is_encrypted();
        let mut inv = scripts::RESTORE.prepare_invoke();
        inv.key(to.registry())
            .key(to.meta())
            .key(to.index())
            .arg(self.config.ttl_ms());
        let mut copied_ids: Vec<(String, String)> = Vec::new();
        for (key, content) in &dump.entries {
            let Some(kind) = from.parse(key) else {
                continue;
            };
            let (target_key, zset) = match &kind {
                KeyKind::Index => (to.index(), true),
                KeyKind::NsIndex(ns) => (to.ns_index(ns), true),
                KeyKind::Blobs(ns) => (to.blobs(ns), false),
                KeyKind::Checkpoint(ns, id) => (to.checkpoint(ns, id), false),
                KeyKind::Writes(ns, id) => (to.writes(ns, id), false),
            };
            if zset {
                inv.arg("Z").arg(&target_key).arg(content.len());
                for m in content {
                    inv.arg(m);
                }
                if kind == KeyKind::Index {
                    for m in content {
                        copied_ids.push(parse_index_member(m)?);
                    }
                }
                continue;
            }
            inv.arg("H").arg(&target_key).arg(content.len() / 2);
            for pair in content.chunks_exact(2) {
                let (field, value) = (&pair[0], &pair[1]);
                let value = match (&kind, encrypted) {
                    (KeyKind::Blobs(ns), true) => {
                        // Sealed values are bound to their slot, thread included.
                        // Empty channels too: their seal names the slot as well.
                        let (channel, version) = parse_blob_field(field)?;
                        let slot = |thread_id| Slot::Channel {
                            thread_id,
                            checkpoint_ns: ns,
                            channel: &channel,
                            version: &version,
                        };
                        let resealed = self.serde().reseal(
                            &convert::stored_channel(value)?,
                            &slot(source_thread_id),
                            &slot(target_thread_id),
                        )?;
                        encode_value(Some(&resealed))
                    }
                    (KeyKind::Writes(ns, id), true) => {
                        let (task_id, idx) = parse_write_field(field)?;
                        let (channel, path, sealed) = decode_write(value)?;
                        let slot = |thread_id| Slot::Write {
                            thread_id,
                            checkpoint_ns: ns,
                            checkpoint_id: id,
                            task_id: &task_id,
                            channel: &channel,
                            idx,
                        };
                        let plain = self.serde().open(&sealed, &slot(source_thread_id))?;
                        let resealed = self.serde().seal(&plain, &slot(target_thread_id))?;
                        encode_write(&channel, &path, &resealed)
                    }
                    _ => value.clone(),
                };
                inv.arg(field).arg(value);
            }
        }
        let copied: i64 = with_conn!(self.db, "copy_thread", retry = false, |conn| inv
            .invoke_async(&mut conn))?;
        if copied == 0 {
            return Err(conflict());
        }
        self.index(
            "copy_thread",
            copied_ids
                .iter()
                .map(|(id, ns)| (target_thread_id, ns.as_str(), id.as_str())),
        )
        .await
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = "redis",
        threads = thread_ids.len(), strategy = ?strategy))]
    async fn prune(&self, thread_ids: &[String], strategy: PruneStrategy) -> Result<()> {
        for thread_id in thread_ids {
            match strategy {
                PruneStrategy::Delete => self.delete_thread(thread_id).await?,
                PruneStrategy::KeepLatest => {
                    self.replan(thread_id, "prune", |k, namespaces| {
                        let mut out = Vec::new();
                        for (ns, state) in namespaces {
                            let keep = state.ids_to_keep();
                            let Some(newest) = keep.last() else {
                                continue;
                            };
                            let doomed: BTreeSet<String> = state
                                .checkpoints
                                .keys()
                                .filter(|id| !keep.contains(*id))
                                .cloned()
                                .collect();
                            // Writes of checkpoints not stored yet (newer) stay.
                            out.extend(self.removals(k, ns, state, &doomed, |id| {
                                !keep.contains(id) && id < newest.as_str()
                            }));
                        }
                        out
                    })
                    .await?;
                }
            }
        }
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = "redis",
        thread_id = thread_id))]
    async fn acquire_lease(&self, thread_id: &str, ttl: Duration) -> Result<Lease> {
        let ttl_ms = lease_ms(thread_id, ttl)?;
        // One token for every attempt: a retry after a lost reply finds its own claim.
        let token = Lease::new_token();
        let key = keys::lease(&self.config.prefix, thread_id);
        let mut inv = scripts::LEASE_ACQUIRE.prepare_invoke();
        inv.key(&key).arg(&token).arg(ttl_ms).arg(LEASE_GRACE_MS);
        let expires: Option<i64> = with_conn!(self.db, "acquire_lease", retry = true, |conn| inv
            .invoke_async(&mut conn))?;
        let Some(expires) = expires else {
            return Err(Error::Conflict(format!(
                "thread `{thread_id}` is leased by another run"
            )));
        };
        Ok(Lease {
            thread_id: thread_id.to_owned(),
            token,
            expires_at: time_of(expires),
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = "redis",
        thread_id = %lease.thread_id))]
    async fn renew_lease(&self, lease: &Lease, ttl: Duration) -> Result<Lease> {
        let ttl_ms = lease_ms(&lease.thread_id, ttl)?;
        let key = keys::lease(&self.config.prefix, &lease.thread_id);
        let mut inv = scripts::LEASE_RENEW.prepare_invoke();
        inv.key(&key)
            .arg(&lease.token)
            .arg(ttl_ms)
            .arg(LEASE_GRACE_MS);
        let expires: Option<i64> = with_conn!(self.db, "renew_lease", retry = true, |conn| inv
            .invoke_async(&mut conn))?;
        let Some(expires) = expires else {
            return Err(Error::Conflict(format!(
                "the lease on thread `{}` was lost",
                lease.thread_id
            )));
        };
        Ok(Lease {
            expires_at: time_of(expires),
            ..lease.clone()
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(backend = "redis",
        thread_id = %lease.thread_id))]
    async fn release_lease(&self, lease: &Lease) -> Result<()> {
        let key = keys::lease(&self.config.prefix, &lease.thread_id);
        let mut inv = scripts::LEASE_RELEASE.prepare_invoke();
        inv.key(&key).arg(&lease.token);
        with_conn!(self.db, "release_lease", retry = true, |conn| inv
            .invoke_async::<Value>(&mut conn))?;
        Ok(())
    }
}

impl RedisSaver {
    /// `list`, without its span.
    async fn list_tuples(
        &self,
        config: Option<&CheckpointConfig>,
        options: &ListOptions,
    ) -> Result<Vec<CheckpointTuple>> {
        let limit = options.limit.unwrap_or(usize::MAX);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let source = match config {
            None => Source::Global,
            Some(c) if c.thread_id.is_empty() => return Ok(Vec::new()),
            Some(c) => {
                let t = c.thread_id.clone();
                match (c.checkpoint_ns.clone(), c.checkpoint_id.clone()) {
                    (Some(ns), Some(id)) => Source::One(t, ns, id),
                    (None, Some(id)) => Source::ThreadId(t, id),
                    (Some(ns), None) => Source::Ns(t, ns),
                    (None, None) => Source::Thread(t),
                }
            }
        };
        let before = options.before.as_deref();
        if let (Source::One(_, _, id) | Source::ThreadId(_, id), Some(b)) = (&source, before)
            && id.as_str() >= b
        {
            return Ok(Vec::new());
        }
        // The first page starts below `before`: ns indexes hold bare ids, the others
        // encoded ids followed by more (which sort after the encoded bound itself).
        let mut upper: Option<Vec<u8>> = before.map(|b| match source {
            Source::Ns(..) => b.as_bytes().to_vec(),
            _ => enc(b.as_bytes()),
        });
        let filter = options.filter.as_ref();
        let mut out = Vec::new();
        loop {
            let remaining = limit - out.len();
            let count = if filter.is_some() {
                FILTERED_PAGE
            } else {
                remaining.clamp(1, PAGE)
            };
            let candidates = self.page(&source, upper.as_deref(), count).await?;
            let single = matches!(source, Source::One(..) | Source::ThreadId(..));
            let exhausted = single || candidates.len() < count;
            upper = candidates.last().map(|(t, ns, id)| match &source {
                Source::Ns(..) => id.as_bytes().to_vec(),
                Source::Global => self.keys(t).global_member(id, ns),
                _ => ThreadKeys::index_member(id, ns),
            });
            out.extend(self.load(&candidates, filter, remaining).await?);
            if out.len() >= limit || exhausted {
                break;
            }
        }
        Ok(out)
    }
}

/// Checks a lease's arguments and gives its ttl in whole milliseconds (at least one).
fn lease_ms(thread_id: &str, ttl: Duration) -> Result<u64> {
    Lease::check(thread_id, ttl)?;
    // At most `Lease::MAX_TTL`, far below u64::MAX milliseconds.
    Ok(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1))
}

/// The server's Unix milliseconds as a time.
fn time_of(ms: i64) -> std::time::SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms.max(0).unsigned_abs())
}

/// A length (a count of items) followed by that many items of a flat reply, as pairs.
fn counted_pairs(items: &mut impl Iterator<Item = Value>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let n = match items.next() {
        Some(Value::Int(n)) => usize::try_from(n).ok(),
        _ => None,
    }
    .ok_or_else(|| keys::corrupt("a delta history reply is malformed"))?;
    let mut out = Vec::with_capacity(n / 2);
    for _ in 0..n / 2 {
        let (Some(field), Some(value)) = (items.next(), items.next()) else {
            return Err(keys::corrupt("a delta history reply is short"));
        };
        out.push((
            required(field, "a hash field")?,
            required(value, "a hash value")?,
        ));
    }
    Ok(out)
}

/// The child's id when a stored write (writes-hash field and value) is a child record of
/// an authenticated history; `None` for any other write.
fn child_of(field: &[u8], value: &[u8]) -> Option<String> {
    let (task_id, _) = parse_write_field(field).ok()?;
    let child = task_id.strip_prefix(&child_record_task(""))?;
    let (channel, _, _) = decode_write(value).ok()?;
    (channel == CHILD_CHANNEL).then(|| child.to_owned())
}

/// A stored parent id: an empty one marks a checkpoint stored without a parent.
fn parent_id(raw: Option<Vec<u8>>) -> Result<Option<String>> {
    raw.filter(|p| !p.is_empty())
        .map(String::from_utf8)
        .transpose()
        .map_err(|_| keys::corrupt("a parent id is not UTF-8"))
}
