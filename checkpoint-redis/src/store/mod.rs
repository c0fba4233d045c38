//! [`RedisStore`]: the store on plain Redis 7 (no modules), on the crate's one connection
//! layer. Its keys are listed in the crate docs.
//!
//! A batch's writes are one Lua script, so they apply atomically and in one round trip; reads
//! are pipelined `HMGET`s; scans page through the sorted sets (merging the namespaces under a
//! prefix) and stop as soon as the engine has enough rows. Expiry is the engine's clock, as
//! on every backend: an expired item is invisible at once and deleted by the next sweep,
//! which walks `{p}:expiry`. Redis's own key expiry is not used, since it would leave the
//! sorted sets pointing at nothing. Vectors are loaded into the in-process index when the
//! store opens, and kept current with every other client's writes by replaying the change
//! feed, written by the same script as each write, before each semantic search; a reader the
//! capped feed left behind reloads every vector instead.

mod convert;
mod keys;
mod scripts;

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::fmt;
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use waypoint_store::raw::{Backend, Changes, Engine, ItemVectors, Row, Write};
use waypoint_store::{Error, ItemKey, Namespace, Object, Result, StoreConfig, forward_store};

use self::convert::{FIELDS, LAST_EXPIRY, expires_at, field_vectors, micros, row};
use self::keys::{BUCKET_LABELS, Keys, bucket_of, bucket_of_joined};
use self::scripts::{CHANGES_SOURCE, PAGE, REFRESH, SWEEP, WRITE};
use crate::config::RedisConfig;
use crate::connection::{Connection, with_conn};
use crate::slots::{SHARDS, each_in_slot, group, per_slot};
use redis::{FromRedisValue, Value};
use waypoint_store::raw::encode_vector;

/// The version of the key layout this code writes; a store written by a newer one is refused.
/// Layout 2 added the change feed to layout 1; layout 3 spreads the store over buckets chosen
/// by namespace (layouts 1 and 2 keep it in one slot). [`RedisStore::setup`] upgrades both
/// in place: from then on, older versions refuse the store.
const LAYOUT: i64 = 3;

/// Items one step of the upgrade to layout 3 moves.
const MOVE_CHUNK: usize = 200;

/// Entries of the change feed one read replays at most; a reader further behind reloads.
const CHANGES_READ: usize = 1000;

/// A store on a Redis server (7 or later, no modules needed), under the config's key prefix.
///
/// Every batch's writes are one Lua script: atomic, one round trip. Semantic search is served
/// by the in-process index, loaded from the vectors stored in Redis when the store opens.
/// Each operation has a deadline and fails with [`Error::Backend`] while the server is away;
/// the connection comes back by itself, so the same store works again once the server does.
/// Clones share the connection and the index. Expired items stay in Redis until a sweep
/// ([`Store::sweep_expired`](waypoint_store::Store::sweep_expired) or
/// [`start_sweeper`](waypoint_store::Store::start_sweeper)), as on the other backends.
///
/// ```no_run
/// # async fn demo() -> waypoint_store::Result<()> {
/// use serde_json::json;
/// use waypoint_checkpoint_redis::{RedisConfig, RedisStore};
/// use waypoint_store::{IndexConfig, StoreConfig, StoreExt};
///
/// let store = RedisStore::connect(
///     RedisConfig::new("redis://127.0.0.1:6379/").prefix("agents"),
///     StoreConfig::new().index(IndexConfig::hashing(64)),
/// )
/// .await?;
/// store.put(["users", "alice"], "prefs", json!({"theme": "dark"})).await?;
/// assert!(store.get(["users", "alice"], "prefs").await?.is_some());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    engine: Engine<RedisBackend>,
}

impl RedisStore {
    /// Connects to the server `config` names (checking it as [`crate::RedisSaver::connect`]
    /// does), runs [`Self::setup`] when [`RedisConfig::auto_setup`] is on (otherwise checks
    /// that it ran), and loads the stored vectors into `store`'s index.
    pub async fn connect(config: RedisConfig, store: StoreConfig) -> Result<Self> {
        let db = Connection::open(&config).await?;
        Self::on(db, config, store).await
    }

    /// Connects to the server `url` names ([`RedisConfig::from_url`]) with default settings.
    pub async fn from_url(url: &str, store: StoreConfig) -> Result<Self> {
        Self::connect(RedisConfig::parse(url)?, store).await
    }

    /// A store on an open connection (a saver's, or its own).
    pub(crate) async fn on(
        db: Connection,
        config: RedisConfig,
        store: StoreConfig,
    ) -> Result<Self> {
        let backend = RedisBackend::new(db, config);
        backend.layout(backend.config.auto_setup).await?;
        Ok(RedisStore {
            engine: Engine::open(backend, store).await?,
        })
    }

    /// Records this code's key layout under the prefix (or upgrades layout 1, which lacks
    /// only the change feed), and refuses a layout written by a newer version. Idempotent.
    pub async fn setup(&self) -> Result<()> {
        self.engine.backend().layout(true).await
    }

    /// The settings this store was opened with.
    pub fn config(&self) -> &RedisConfig {
        &self.engine.backend().config
    }
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.config().prefix)
            .finish_non_exhaustive()
    }
}

forward_store!(RedisStore);

/// First page of a scan; pages double from there.
const FIRST_PAGE: usize = 32;
/// Largest page of a scan: bounds the memory one page holds.
const MAX_PAGE: usize = 1024;
/// Expired items a sweep removes per script (a script blocks the server while it runs).
const SWEEP_CHUNK: usize = 500;
/// Items whose vectors one pipeline reads.
const VECTOR_CHUNK: usize = 256;

/// Items and vectors in Redis, in [`SHARDS`] buckets chosen by namespace (see the crate
/// docs): each bucket's keys share one slot, so a batch is one atomic script per bucket.
pub(crate) struct RedisBackend {
    db: Connection,
    /// The keys of each bucket, by bucket number.
    buckets: Vec<Keys>,
    /// The keys of layout 2 (one slot): the store's `meta` hash, and what `setup` moves.
    legacy: Keys,
    config: RedisConfig,
    /// Where this process has read the change feeds to: see [`Backend::changes`].
    feeds: Mutex<Feeds>,
}

/// The change-feed cursors handed to the engine: the engine holds one number, `token`,
/// which stands for one position in every bucket's feed, `seqs`.
#[derive(Default)]
struct Feeds {
    token: i64,
    seqs: Vec<i64>,
}

/// A reply converted to `T`; a reply of another shape is corrupt data.
fn parse<T: FromRedisValue>(v: Value) -> Result<T> {
    T::from_redis_value(v).map_err(|e| Error::Corrupt(format!("an unexpected reply: {e}")))
}

impl RedisBackend {
    fn new(db: Connection, config: RedisConfig) -> Self {
        RedisBackend {
            buckets: Keys::buckets(&config.prefix),
            legacy: Keys::legacy(&config.prefix),
            db,
            config,
            feeds: Mutex::new(Feeds::default()),
        }
    }

    /// Checks the key layout under the prefix; with `create`, records this code's layout
    /// under a new prefix and upgrades layouts 1 and 2 (moving their items into the
    /// buckets). Without it nothing is written: a prefix `setup` never ran on, or one
    /// needing the upgrade, is refused.
    async fn layout(&self, create: bool) -> Result<()> {
        let what = if create { "setup" } else { "connect" };
        let meta = self.legacy.meta();
        let mut pipe = redis::pipe();
        if create {
            pipe.cmd("HSETNX")
                .arg(&meta)
                .arg("layout")
                .arg(LAYOUT)
                .ignore();
        }
        pipe.cmd("HGET").arg(&meta).arg("layout");
        let (layout,): (Option<String>,) = with_conn!(self.db, what, retry = true, |conn| pipe
            .query_async(&mut conn))?;
        let refused = |why: String| {
            Err(Error::InvalidConfig(format!(
                "the keys under `{{{}}}:` {why}",
                self.config.prefix
            )))
        };
        match layout.as_deref().map(str::parse::<i64>) {
            Some(Ok(LAYOUT)) => Ok(()),
            Some(Ok(old @ (1 | 2))) if create => {
                self.move_into_buckets(what).await?;
                tracing::info!(
                    prefix = %self.config.prefix,
                    "store upgraded from key layout {old} to {LAYOUT}"
                );
                Ok(with_conn!(self.db, what, retry = true, |conn| redis::cmd(
                    "HSET"
                )
                .arg(&meta)
                .arg("layout")
                .arg(LAYOUT)
                .query_async::<()>(&mut conn))?)
            }
            Some(Ok(old @ (1 | 2))) => refused(format!(
                "have layout {old}, which needs upgrading to layout {LAYOUT}: run \
                 `RedisStore::setup` or open with `auto_setup(true)`"
            )),
            None if !create => refused(
                "hold no store (no layout recorded): run `RedisStore::setup` or open with \
                 `auto_setup(true)`"
                    .into(),
            ),
            _ => refused(format!(
                "have layout {}, this version reads layout {LAYOUT}: written by a newer \
                 version, or not a store",
                layout.as_deref().unwrap_or("(none)")
            )),
        }
    }

    /// Moves every item of layout 2 (all under `{P}:`, one slot) into its bucket, a page at
    /// a time: copied first (created and updated times, TTL and vectors kept), then removed
    /// from the old keys, so an interrupted upgrade loses nothing and the next `setup`
    /// finishes it. Writers of the old layout must be stopped meanwhile.
    async fn move_into_buckets(&self, what: &'static str) -> Result<()> {
        let old = &self.legacy;
        loop {
            let mut cmd = redis::cmd("ZRANGE");
            cmd.arg(old.order())
                .arg(0)
                .arg(MOVE_CHUNK - 1)
                .arg("WITHSCORES");
            let page: Vec<(Vec<u8>, String)> = with_conn!(self.db, what, retry = true, |conn| {
                cmd.query_async(&mut conn)
            })?;
            if page.is_empty() {
                break;
            }
            let mut read = redis::pipe();
            for (id, _) in &page {
                read.cmd("HGETALL").arg(old.item(id));
                read.cmd("HGETALL").arg(old.vectors(id));
            }
            let hashes: Vec<Vec<(Vec<u8>, Vec<u8>)>> =
                with_conn!(self.db, what, retry = true, |conn| read
                    .query_async(&mut conn))?;
            let mut hashes = hashes.into_iter();
            let mut moves = Vec::with_capacity(page.len());
            for (id, score) in &page {
                let item = hashes.next().unwrap_or_default();
                let vectors = hashes.next().unwrap_or_default();
                moves.push((id, score, keys::parse_id(id), item, vectors));
            }
            let groups = group(
                moves
                    .iter()
                    .map(|(_, _, key, _, _)| key.as_ref().map_or(0, |k| bucket_of(&k.namespace))),
            );
            let pipes: Vec<redis::Pipeline> = groups
                .iter()
                .map(|(&bucket, positions)| {
                    let k = &self.buckets[bucket];
                    let mut pipe = redis::pipe();
                    pipe.atomic();
                    for &i in positions {
                        let (id, score, key, item, vectors) = &moves[i];
                        let (Some(key), false) = (key, item.is_empty()) else {
                            continue;
                        };
                        let joined = key.namespace.joined();
                        pipe.del(k.item(id)).ignore();
                        pipe.hset_multiple(k.item(id), item).ignore();
                        pipe.zadd(k.order(), id, score.as_str()).ignore();
                        pipe.zadd(k.namespace(&joined), id, score.as_str()).ignore();
                        pipe.zadd(k.namespaces(), &joined, 0).ignore();
                        if let Some((_, at)) = item.iter().find(|(f, _)| f == b"expires") {
                            pipe.zadd(k.expiry(), id, at.as_slice()).ignore();
                        }
                        pipe.del(k.vectors(id)).ignore();
                        if !vectors.is_empty() {
                            pipe.hset_multiple(k.vectors(id), vectors).ignore();
                            pipe.sadd(k.vectored(), id).ignore();
                        }
                    }
                    pipe
                })
                .collect();
            per_slot(&self.db, what, &pipes).await?;
            let mut drop = redis::pipe();
            drop.atomic();
            for (id, _, key, _, _) in &moves {
                drop.del(old.item(id)).ignore();
                drop.del(old.vectors(id)).ignore();
                drop.zrem(old.order(), id).ignore();
                drop.zrem(old.expiry(), id).ignore();
                drop.srem(old.vectored(), id).ignore();
                if let Some(key) = key {
                    drop.zrem(old.namespace(&key.namespace.joined()), id)
                        .ignore();
                }
            }
            with_conn!(self.db, what, retry = true, |conn| drop
                .query_async::<()>(&mut conn))?;
        }
        let mut rest = redis::pipe();
        rest.del(old.namespaces())
            .del(old.expiry())
            .del(old.vectored())
            .del(old.changes());
        Ok(with_conn!(self.db, what, retry = true, |conn| rest
            .query_async::<()>(&mut conn))?)
    }

    /// The hash fields of a row for each `(bucket, id)`, positionally, read as `what`: one
    /// pipeline per bucket, all at once.
    async fn fetch_rows(
        &self,
        what: &'static str,
        ids: &[(usize, Vec<u8>)],
    ) -> Result<Vec<Vec<Option<Vec<u8>>>>> {
        each_in_slot(&self.db, what, ids.iter().map(|(b, _)| *b), |i, pipe| {
            let (bucket, id) = &ids[i];
            pipe.cmd("HMGET")
                .arg(self.buckets[*bucket].item(id))
                .arg(&FIELDS[..]);
        })
        .await?
        .into_iter()
        .map(parse)
        .collect()
    }

    /// Up to `count` members of a sorted set in scan order, after the cursor.
    async fn page(
        &self,
        key: &[u8],
        count: usize,
        after: Option<&(String, Vec<u8>)>,
    ) -> Result<VecDeque<Entry>> {
        let mut call = PAGE.prepare_invoke();
        call.key(key).arg(count);
        match after {
            Some((score, member)) => call.arg(score).arg(member),
            None => call.arg("").arg(""),
        };
        let flat: Vec<Vec<u8>> = with_conn!(self.db, "search", retry = true, |conn| call
            .invoke_async(&mut conn))?;
        let mut entries = VecDeque::with_capacity(flat.len() / 2);
        let mut flat = flat.into_iter();
        while let (Some(member), Some(text)) = (flat.next(), flat.next()) {
            let text = String::from_utf8(text).unwrap_or_default();
            let score = text.parse::<f64>().map_err(|_| {
                Error::Corrupt(format!("a sorted set of the store has score `{text}`"))
            })?;
            entries.push_back(Entry {
                score,
                text,
                member,
            });
        }
        Ok(entries)
    }

    /// The sorted sets a scan under `prefix` merges, each with its bucket: every bucket's
    /// whole order, or one set per namespace under the prefix (looked up in the prefix's
    /// bucket when it has [`BUCKET_LABELS`] labels or more, in every bucket otherwise).
    async fn scan_sources(&self, prefix: &Namespace) -> Result<Vec<(usize, Vec<u8>)>> {
        if prefix.is_empty() {
            return Ok(self
                .buckets
                .iter()
                .enumerate()
                .map(|(b, k)| (b, k.order()))
                .collect());
        }
        let buckets: Vec<usize> = if prefix.len() >= BUCKET_LABELS {
            vec![bucket_of(prefix)]
        } else {
            (0..SHARDS).collect()
        };
        let exact = prefix.joined();
        // Everything from `p` to just before `p/` ('/' follows '.'): `p`, every `p.…`, and a
        // few siblings such as `p-x` that the label check drops.
        let mut from = b"[".to_vec();
        from.extend_from_slice(exact.as_bytes());
        let mut to = b"(".to_vec();
        to.extend_from_slice(exact.as_bytes());
        to.push(b'/');
        let replies = each_in_slot(&self.db, "search", buckets.iter(), |i, pipe| {
            pipe.cmd("ZRANGEBYLEX")
                .arg(self.buckets[buckets[i]].namespaces())
                .arg(&from)
                .arg(&to);
        })
        .await?;
        let mut out = Vec::new();
        for (&b, reply) in buckets.iter().zip(replies) {
            let found: Vec<Vec<u8>> = parse(reply)?;
            out.extend(
                found
                    .into_iter()
                    .filter_map(|ns| String::from_utf8(ns).ok())
                    .filter(|ns| Namespace::from_joined(ns).starts_with(prefix))
                    .map(|ns| (b, self.buckets[b].namespace(&ns))),
            );
        }
        Ok(out)
    }

    /// Ids of items of every bucket with a TTL that expired at `now` or before, at most
    /// `limit` per bucket (all: `None`), read as the operation `what`; by bucket.
    async fn expired(
        &self,
        what: &'static str,
        now: DateTime<Utc>,
        limit: Option<usize>,
    ) -> Result<Vec<Vec<Vec<u8>>>> {
        each_in_slot(&self.db, what, 0..SHARDS, |b, pipe| {
            let cmd = pipe
                .cmd("ZRANGEBYSCORE")
                .arg(self.buckets[b].expiry())
                .arg("-inf")
                .arg(micros(now));
            if let Some(limit) = limit {
                cmd.arg("LIMIT").arg(0).arg(limit);
            }
        })
        .await?
        .into_iter()
        .map(parse)
        .collect()
    }
}

/// A member of a sorted set with its score, as a page returned it.
struct Entry {
    score: f64,
    /// The score as Redis wrote it, handed back verbatim as a page cursor.
    text: String,
    member: Vec<u8>,
}

/// One sorted set a scan merges.
struct Source {
    /// The bucket holding the set and the items it names.
    bucket: usize,
    key: Vec<u8>,
    buffered: VecDeque<Entry>,
    /// The last entry taken: where the next page starts.
    after: Option<(String, Vec<u8>)>,
    done: bool,
}

/// The next entry of a source, ordered as the scan is: score, then member bytewise.
struct Head {
    score: f64,
    member: Vec<u8>,
    source: usize,
}

impl Ord for Head {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| self.member.cmp(&other.member))
            .then_with(|| self.source.cmp(&other.source))
    }
}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Head {}

fn head(source: usize, entries: &VecDeque<Entry>) -> Option<Reverse<Head>> {
    entries.front().map(|e| {
        Reverse(Head {
            score: e.score,
            member: e.member.clone(),
            source,
        })
    })
}

#[async_trait]
impl Backend for RedisBackend {
    fn name(&self) -> &'static str {
        "redis"
    }

    async fn get(&self, keys: &[ItemKey], now: DateTime<Utc>) -> Result<Vec<Option<Row>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<(usize, Vec<u8>)> = keys
            .iter()
            .map(|k| (bucket_of(&k.namespace), keys::id(k)))
            .collect();
        let now = micros(now);
        self.fetch_rows("get", &ids)
            .await?
            .into_iter()
            .map(|fields| row(fields, now))
            .collect()
    }

    async fn scan(
        &self,
        prefix: &Namespace,
        _contains: Option<&Object>,
        now: DateTime<Utc>,
        visit: &mut (dyn FnMut(Row) -> bool + Send),
    ) -> Result<()> {
        let now = micros(now);
        let mut page = FIRST_PAGE;
        let mut sources: Vec<Source> = self
            .scan_sources(prefix)
            .await?
            .into_iter()
            .map(|(bucket, key)| Source {
                bucket,
                key,
                buffered: VecDeque::new(),
                after: None,
                done: false,
            })
            .collect();
        let firsts =
            futures::future::try_join_all(sources.iter().map(|s| self.page(&s.key, page, None)))
                .await?;
        let mut heads = BinaryHeap::with_capacity(sources.len());
        for (i, (source, entries)) in sources.iter_mut().zip(firsts).enumerate() {
            source.done = entries.len() < page;
            heads.extend(head(i, &entries));
            source.buffered = entries;
        }
        loop {
            // Take ids in merged order until the page is full or a source needs its next
            // page (its next entry may come before every other source's).
            let mut ids = Vec::with_capacity(page);
            let mut refill = None;
            while ids.len() < page {
                let Some(Reverse(next)) = heads.pop() else {
                    break;
                };
                let source = &mut sources[next.source];
                let Some(entry) = source.buffered.pop_front() else {
                    continue;
                };
                source.after = Some((entry.text, entry.member.clone()));
                ids.push((source.bucket, entry.member));
                match head(next.source, &source.buffered) {
                    Some(h) => heads.push(h),
                    None if !source.done => {
                        refill = Some(next.source);
                        break;
                    }
                    None => {}
                }
            }
            if ids.is_empty() {
                return Ok(());
            }
            for fields in self.fetch_rows("search", &ids).await? {
                if let Some(row) = row(fields, now)?
                    && !visit(row)
                {
                    return Ok(());
                }
            }
            page = (page * 2).min(MAX_PAGE);
            if let Some(i) = refill {
                let source = &mut sources[i];
                let entries = self.page(&source.key, page, source.after.as_ref()).await?;
                source.done = entries.len() < page;
                heads.extend(head(i, &entries));
                source.buffered = entries;
            }
        }
    }

    async fn refresh(&self, keys: &[ItemKey], now: DateTime<Utc>) -> Result<()> {
        // One script per bucket.
        for (bucket, positions) in group(keys.iter().map(|k| bucket_of(&k.namespace))) {
            let k = &self.buckets[bucket];
            let ids: Vec<Vec<u8>> = positions.iter().map(|&i| keys::id(&keys[i])).collect();
            let mut call = REFRESH.prepare_invoke();
            call.key(k.expiry());
            for id in &ids {
                call.key(k.item(id));
            }
            call.arg(micros(now)).arg(LAST_EXPIRY);
            for id in &ids {
                call.arg(id);
            }
            with_conn!(self.db, "refresh", retry = true, |conn| call
                .invoke_async::<()>(&mut conn))?;
        }
        Ok(())
    }

    async fn namespaces(&self, now: DateTime<Utc>) -> Result<Vec<Namespace>> {
        let replies = each_in_slot(&self.db, "list_namespaces", 0..SHARDS, |b, pipe| {
            pipe.cmd("ZRANGE")
                .arg(self.buckets[b].namespaces())
                .arg(0)
                .arg(-1);
        })
        .await?;
        let mut all: Vec<String> = Vec::new();
        for reply in replies {
            let found: Vec<Vec<u8>> = parse(reply)?;
            all.extend(
                found
                    .into_iter()
                    .filter_map(|ns| String::from_utf8(ns).ok()),
            );
        }
        // A namespace whose items all expired (not swept yet) holds no live item.
        let mut expired: BTreeMap<String, usize> = BTreeMap::new();
        for id in self
            .expired("list_namespaces", now, None)
            .await?
            .into_iter()
            .flatten()
        {
            if let Some(key) = keys::parse_id(&id) {
                *expired.entry(key.namespace.joined()).or_default() += 1;
            }
        }
        if !expired.is_empty() {
            let checked: Vec<(String, usize)> = expired.into_iter().collect();
            let buckets = checked.iter().map(|(ns, _)| bucket_of_joined(ns));
            let sizes = each_in_slot(&self.db, "list_namespaces", buckets, |i, pipe| {
                let ns = &checked[i].0;
                pipe.cmd("ZCARD")
                    .arg(self.buckets[bucket_of_joined(ns)].namespace(ns));
            })
            .await?
            .into_iter()
            .map(parse::<usize>)
            .collect::<Result<Vec<_>>>()?;
            let dead: Vec<&String> = checked
                .iter()
                .zip(sizes)
                .filter(|((_, gone), size)| size <= gone)
                .map(|((ns, _), _)| ns)
                .collect();
            all.retain(|ns| !dead.contains(&ns));
        }
        Ok(all.iter().map(|ns| Namespace::from_joined(ns)).collect())
    }

    async fn write(&self, writes: Vec<Write>, now: DateTime<Utc>) -> Result<()> {
        // One script per bucket (atomic per bucket), in the order of each bucket's first
        // write; within a bucket, the batch's order.
        let groups = group(writes.iter().map(|w| match w {
            Write::Put(put) => bucket_of(&put.key.namespace),
            Write::Delete(key) => bucket_of(&key.namespace),
        }));
        for (bucket, positions) in groups {
            let k = &self.buckets[bucket];
            let at = micros(now);
            let mut call = WRITE.prepare_invoke();
            call.key(k.order())
                .key(k.namespaces())
                .key(k.expiry())
                .key(k.vectored())
                .key(k.changes())
                .arg(at)
                .arg(-at);
            for &i in &positions {
                match &writes[i] {
                    Write::Put(put) => {
                        let id = keys::id(&put.key);
                        let joined = put.key.namespace.joined();
                        let value = serde_json::to_string(&put.value)
                            .map_err(|e| Error::InvalidValue(e.to_string()))?;
                        call.key(k.item(&id))
                            .key(k.vectors(&id))
                            .key(k.namespace(&joined))
                            .arg("p")
                            .arg(&id)
                            .arg(&joined)
                            .arg(&put.key.key)
                            .arg(value);
                        match put.ttl_minutes {
                            Some(minutes) => {
                                call.arg(minutes.to_string()).arg(expires_at(now, minutes))
                            }
                            None => call.arg("").arg(""),
                        };
                        match &put.vectors {
                            None => {
                                call.arg(-1);
                            }
                            Some(vectors) => {
                                call.arg(vectors.len());
                                for field in vectors {
                                    call.arg(&field.field).arg(encode_vector(&field.vector));
                                }
                            }
                        }
                    }
                    Write::Delete(key) => {
                        let id = keys::id(key);
                        let joined = key.namespace.joined();
                        call.key(k.item(&id))
                            .key(k.vectors(&id))
                            .key(k.namespace(&joined))
                            .arg("d")
                            .arg(&id)
                            .arg(&joined);
                    }
                }
            }
            with_conn!(self.db, "write", retry = true, |conn| call
                .invoke_async::<i64>(&mut conn))?;
        }
        Ok(())
    }

    async fn vectors(&self, keys: Option<&[ItemKey]>) -> Result<Vec<ItemVectors>> {
        let wanted: Vec<ItemKey> = match keys {
            Some(keys) => keys.to_vec(),
            None => {
                let mut found = Vec::new();
                for k in &self.buckets {
                    let set = k.vectored();
                    let mut cursor = String::from("0");
                    loop {
                        let (next, ids): (String, Vec<Vec<u8>>) =
                            with_conn!(self.db, "load_vectors", retry = true, |conn| redis::cmd(
                                "SSCAN"
                            )
                            .arg(&set)
                            .arg(&cursor)
                            .arg("COUNT")
                            .arg(1000)
                            .query_async(&mut conn))?;
                        found.extend(ids.iter().filter_map(|id| keys::parse_id(id)));
                        if next == "0" {
                            break;
                        }
                        cursor = next;
                    }
                }
                // SSCAN may return an id twice.
                found.sort();
                found.dedup();
                found
            }
        };
        let mut all = Vec::new();
        for chunk in wanted.chunks(VECTOR_CHUNK) {
            let buckets = chunk.iter().map(|key| bucket_of(&key.namespace));
            let hashes = each_in_slot(&self.db, "load_vectors", buckets, |i, pipe| {
                let key = &chunk[i];
                pipe.cmd("HGETALL")
                    .arg(self.buckets[bucket_of(&key.namespace)].vectors(&keys::id(key)));
            })
            .await?;
            for (key, hash) in chunk.iter().zip(hashes) {
                let hash: BTreeMap<String, Vec<u8>> = parse(hash)?;
                if hash.is_empty() {
                    continue;
                }
                all.push(ItemVectors {
                    vectors: field_vectors(key, hash.into_iter().collect())?,
                    key: key.clone(),
                });
            }
        }
        Ok(all)
    }

    async fn sweep(&self, now: DateTime<Utc>) -> Result<Vec<ItemKey>> {
        let mut removed = Vec::new();
        for k in &self.buckets {
            loop {
                let mut cmd = redis::cmd("ZRANGEBYSCORE");
                cmd.arg(k.expiry())
                    .arg("-inf")
                    .arg(micros(now))
                    .arg("LIMIT")
                    .arg(0)
                    .arg(SWEEP_CHUNK);
                let ids: Vec<Vec<u8>> = with_conn!(self.db, "sweep", retry = true, |conn| cmd
                    .query_async(&mut conn))?;
                if ids.is_empty() {
                    break;
                }
                let mut call = SWEEP.prepare_invoke();
                call.key(k.order())
                    .key(k.namespaces())
                    .key(k.expiry())
                    .key(k.vectored())
                    .key(k.changes())
                    .arg(micros(now));
                let mut foreign = Vec::new();
                for id in &ids {
                    match keys::parse_id(id) {
                        Some(key) => {
                            let joined = key.namespace.joined();
                            call.key(k.item(id))
                                .key(k.vectors(id))
                                .key(k.namespace(&joined))
                                .arg(id)
                                .arg(joined);
                        }
                        None => foreign.push(id),
                    }
                }
                // Members no id encodes were not written by this store: drop them, or every
                // sweep would meet them again.
                if !foreign.is_empty() {
                    let expiry = k.expiry();
                    with_conn!(self.db, "sweep", retry = true, |conn| redis::cmd("ZREM")
                        .arg(&expiry)
                        .arg(&foreign)
                        .query_async::<()>(&mut conn))?;
                }
                let gone: Vec<Vec<u8>> = with_conn!(self.db, "sweep", retry = true, |conn| call
                    .invoke_async(&mut conn))?;
                removed.extend(gone.iter().filter_map(|id| keys::parse_id(id)));
                if ids.len() < SWEEP_CHUNK {
                    break;
                }
            }
        }
        Ok(removed)
    }

    /// The engine's cursor is a token standing for a position in each bucket's feed (kept
    /// here, per process): every call reads all the feeds after their positions at once
    /// and hands out a new token. A token this process did not hand out last reads as
    /// incomplete (the engine reloads its index).
    async fn changes(&self, after: i64) -> Result<Option<Changes>> {
        let from: Option<Vec<i64>> = {
            let feeds = self.feeds.lock().unwrap_or_else(|e| e.into_inner());
            (after != i64::MAX && after == feeds.token && feeds.seqs.len() == SHARDS)
                .then(|| feeds.seqs.clone())
        };
        let replies = each_in_slot(&self.db, "changes", 0..SHARDS, |b, pipe| {
            pipe.cmd("EVAL")
                .arg(CHANGES_SOURCE)
                .arg(1)
                .arg(self.buckets[b].changes())
                .arg(from.as_ref().map(|f| f[b].to_string()).unwrap_or_default())
                .arg(CHANGES_READ);
        })
        .await?;
        let mut keys = Vec::new();
        let mut seqs = Vec::with_capacity(SHARDS);
        // A cursor given but not this process's last is a position nobody knows.
        let mut complete = after == i64::MAX || from.is_some();
        for (b, reply) in replies.into_iter().enumerate() {
            let feed = read_feed(parse(reply)?, from.as_ref().map(|f| f[b]));
            seqs.push(feed.last_seq);
            keys.extend(feed.keys);
            complete &= feed.complete;
        }
        let mut feeds = self.feeds.lock().unwrap_or_else(|e| e.into_inner());
        feeds.token += 1;
        feeds.seqs = seqs;
        Ok(Some(Changes {
            last_seq: feeds.token,
            keys,
            complete,
        }))
    }
}

/// One bucket's feed as [`CHANGES_SOURCE`] returned it, read after `from` (`None`: only
/// where it ends).
fn read_feed(reply: Vec<Vec<u8>>, from: Option<i64>) -> Changes {
    let mut reply = reply.into_iter();
    let mut header = || reply.next().unwrap_or_default();
    let (first, last, read) = (header(), header(), header());
    let first = feed_seq(&first);
    let last_seq = feed_seq(&last).flatten().unwrap_or(0);
    let read: usize = std::str::from_utf8(&read)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(usize::MAX);
    let ids: Vec<Vec<u8>> = reply.collect();
    let keys: Vec<ItemKey> = ids.iter().filter_map(|id| keys::parse_id(id)).collect();
    // Complete when nothing after the cursor was trimmed (the first entry kept follows it),
    // the feed is not behind the cursor (it was not deleted and begun again), the read was
    // not cut short, and every entry was the feed's own.
    let complete = from.is_none_or(|after| {
        let first_ok = match first {
            None => true,
            Some(Some(seq)) => seq <= after.saturating_add(1),
            Some(None) => false,
        };
        first_ok && last_seq >= after && read <= CHANGES_READ && keys.len() == ids.len()
    });
    Changes {
        last_seq,
        keys,
        complete,
    }
}

/// The `n` of a feed entry id `0-<n>`: `None` when the feed has no entry (empty text),
/// `Some(None)` for an id this code does not write.
fn feed_seq(id: &[u8]) -> Option<Option<i64>> {
    if id.is_empty() {
        return None;
    }
    Some(
        std::str::from_utf8(id)
            .ok()
            .and_then(|id| id.strip_prefix("0-"))
            .and_then(|n| n.parse().ok()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backend on the test server under a fresh prefix; `None` without a server, unless
    /// `WAYPOINT_REQUIRE_BACKENDS=1`.
    async fn backend() -> Result<Option<RedisBackend>> {
        let Some(url) = waypoint_test_kit::redis_url() else {
            return Ok(None);
        };
        let config = RedisConfig::new(url).prefix(waypoint_test_kit::fresh_name("wp-store-unit"));
        Ok(Some(RedisBackend::new(
            Connection::open(&config).await?,
            config,
        )))
    }

    fn members(entries: &VecDeque<Entry>) -> Vec<&[u8]> {
        entries.iter().map(|e| e.member.as_slice()).collect()
    }

    #[tokio::test]
    async fn pages_resume_after_a_cursor_that_moved_or_vanished() -> Result<()> {
        let Some(backend) = backend().await? else {
            return Ok(());
        };
        let key = backend.buckets[0].order();
        // Ties at -5 ordered bytewise (`\xc3` sorts after ASCII, whatever the locale), then -3.
        let mut pipe = redis::pipe();
        for (score, member) in [
            (-5, &b"b"[..]),
            (-5, b"a"),
            (-5, b"\xc3\xa9"),
            (-5, b"c"),
            (-3, b"x"),
        ] {
            pipe.cmd("ZADD").arg(&key).arg(score).arg(member).ignore();
        }
        with_conn!(backend.db, "test", retry = true, |conn| pipe
            .query_async::<()>(&mut conn))?;
        let first = backend.page(&key, 2, None).await?;
        assert_eq!(members(&first), [&b"a"[..], b"b"]);
        let cursor = (first[1].text.clone(), first[1].member.clone());
        // The cursor's member is still there: found by rank.
        let next = backend.page(&key, 2, Some(&cursor)).await?;
        assert_eq!(members(&next), [&b"c"[..], b"\xc3\xa9"]);
        // Deleted, or moved to another score: the page starts after where it was.
        with_conn!(backend.db, "test", retry = true, |conn| redis::cmd("ZREM")
            .arg(&key)
            .arg("b")
            .query_async::<()>(&mut conn))?;
        let next = backend.page(&key, 10, Some(&cursor)).await?;
        assert_eq!(members(&next), [&b"c"[..], b"\xc3\xa9", b"x"]);
        with_conn!(backend.db, "test", retry = true, |conn| redis::cmd("ZADD")
            .arg(&key)
            .arg(-1)
            .arg("b")
            .query_async::<()>(&mut conn))?;
        let next = backend.page(&key, 10, Some(&cursor)).await?;
        assert_eq!(members(&next), [&b"c"[..], b"\xc3\xa9", b"x", b"b"]);
        with_conn!(backend.db, "test", retry = true, |conn| redis::cmd("DEL")
            .arg(&key)
            .query_async::<()>(&mut conn))?;
        Ok(())
    }
}
