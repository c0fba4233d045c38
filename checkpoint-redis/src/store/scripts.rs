//! The Lua scripts of the backend. Every script is a constant: keys arrive in `KEYS`, data
//! (ids, namespaces, values, vectors, times) in `ARGV`, so nothing a caller supplies ever
//! becomes code. Times are integer microseconds passed as decimal text; Lua numbers are
//! doubles, exact for such times until the year 2255, past which expiries are clamped.
//!
//! Scripts that write start with a `#!lua` line: Redis then refuses them up front when it is
//! out of memory, instead of failing half way through a batch (Redis never rolls a script
//! back). A batch also checks every key's type before its first write, the other way a
//! script can fail midway.

use std::sync::LazyLock;

use redis::Script;

/// Applies a batch of puts and deletes.
///
/// KEYS: order, namespaces, expiry, vectored, changes, then per write its item, vectors and
/// namespace keys. ARGV: now, the score of now (`-now`), then per write either
/// `p id namespace key value ttl expires n field1 vector1 ... fieldN vectorN` (empty `ttl`
/// and `expires` for none; `n = -1` leaves the stored vectors alone) or `d id namespace`.
pub(crate) static WRITE: LazyLock<Script> = LazyLock::new(|| {
    logging(
        r#"#!lua
local now, score = ARGV[1], ARGV[2]
local now_n = tonumber(now)
local ops, a, k = {}, 3, 6
while a <= #ARGV do
  local op = {kind = ARGV[a], id = ARGV[a + 1], ns = ARGV[a + 2],
              item = KEYS[k], vec = KEYS[k + 1], nsz = KEYS[k + 2]}
  k = k + 3
  if op.kind == 'p' then
    op.key, op.value, op.ttl, op.expires = ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6]
    op.n = tonumber(ARGV[a + 7])
    op.first = a + 8
    a = a + 8 + 2 * math.max(op.n, 0)
  elseif op.kind == 'd' then
    a = a + 3
  else
    return redis.error_reply('waypoint: malformed batch')
  end
  ops[#ops + 1] = op
end

local function expect(key, kind)
  local t = redis.call('TYPE', key)['ok']
  return t == 'none' or t == kind
end
local kinds = {'zset', 'zset', 'zset', 'set', 'stream'}
for i = 1, 5 do
  if not expect(KEYS[i], kinds[i]) then
    return redis.error_reply('WRONGTYPE waypoint: a store key holds another kind of value')
  end
end
for _, op in ipairs(ops) do
  if not (expect(op.item, 'hash') and expect(op.vec, 'hash') and expect(op.nsz, 'zset')) then
    return redis.error_reply('WRONGTYPE waypoint: a store key holds another kind of value')
  end
end

for _, op in ipairs(ops) do
  if op.kind == 'p' then
    local old = redis.call('HMGET', op.item, 'created', 'expires')
    local created = now
    -- An expired item not swept yet is gone for readers: a put over it starts a new one.
    if old[1] and ((not old[2]) or tonumber(old[2]) > now_n) then created = old[1] end
    redis.call('DEL', op.item)
    if op.ttl ~= '' then
      redis.call('HSET', op.item, 'ns', op.ns, 'key', op.key, 'value', op.value,
        'created', created, 'updated', now, 'ttl', op.ttl, 'expires', op.expires)
      redis.call('ZADD', KEYS[3], op.expires, op.id)
    else
      redis.call('HSET', op.item, 'ns', op.ns, 'key', op.key, 'value', op.value,
        'created', created, 'updated', now)
      redis.call('ZREM', KEYS[3], op.id)
    end
    redis.call('ZADD', KEYS[1], score, op.id)
    redis.call('ZADD', op.nsz, score, op.id)
    redis.call('ZADD', KEYS[2], 0, op.ns)
    if op.n >= 0 then
      redis.call('DEL', op.vec)
      if op.n > 0 then
        local fields = {}
        for i = 0, op.n - 1 do
          fields[#fields + 1] = ARGV[op.first + 2 * i]
          fields[#fields + 1] = ARGV[op.first + 2 * i + 1]
        end
        redis.call('HSET', op.vec, unpack(fields))
        redis.call('SADD', KEYS[4], op.id)
      else
        redis.call('SREM', KEYS[4], op.id)
      end
    end
  else
    redis.call('DEL', op.item, op.vec)
    redis.call('ZREM', KEYS[1], op.id)
    redis.call('ZREM', KEYS[3], op.id)
    redis.call('SREM', KEYS[4], op.id)
    redis.call('ZREM', op.nsz, op.id)
    if redis.call('ZCARD', op.nsz) == 0 then redis.call('ZREM', KEYS[2], op.ns) end
  end
end
local changed = {}
for _, op in ipairs(ops) do
  if op.kind == 'd' or op.n >= 0 then changed[#changed + 1] = op.id end
end
LOG
return #ops
"#,
    )
});

/// Restarts the TTL of live items that have one.
///
/// KEYS: expiry, then one item key per id. ARGV: now, the latest expiry, then the ids.
pub(crate) static REFRESH: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"#!lua
local now_n, last = tonumber(ARGV[1]), tonumber(ARGV[2])
for i = 2, #KEYS do
  local r = redis.call('HMGET', KEYS[i], 'ttl', 'expires')
  if r[1] and r[2] and tonumber(r[2]) > now_n then
    local at = now_n + math.floor(tonumber(r[1]) * 60000000 + 0.5)
    if not (at <= last) then at = last end
    local text = string.format('%.0f', at)
    redis.call('HSET', KEYS[i], 'expires', text)
    redis.call('ZADD', KEYS[1], text, ARGV[i + 1])
  end
end
return 0
"#,
    )
});

/// Deletes the candidates of a sweep that are still expired; returns the ids it removed.
/// A candidate whose item is gone is only unlinked; one whose item lives (refreshed since it
/// was picked) gets its expiry entry back in line with the item.
///
/// KEYS: order, namespaces, expiry, vectored, changes, then per candidate its item, vectors
/// and namespace keys. ARGV: now, then per candidate its id and namespace.
pub(crate) static SWEEP: LazyLock<Script> = LazyLock::new(|| {
    logging(
        r#"#!lua
local now_n = tonumber(ARGV[1])
local t = redis.call('TYPE', KEYS[5])['ok']
if t ~= 'none' and t ~= 'stream' then
  return redis.error_reply('WRONGTYPE waypoint: a store key holds another kind of value')
end
local removed = {}
local k = 6
for a = 2, #ARGV, 2 do
  local id, ns = ARGV[a], ARGV[a + 1]
  local item, vec, nsz = KEYS[k], KEYS[k + 1], KEYS[k + 2]
  k = k + 3
  local expires = redis.call('HGET', item, 'expires')
  local exists = redis.call('EXISTS', item) == 1
  if exists and expires and tonumber(expires) > now_n then
    redis.call('ZADD', KEYS[3], expires, id)
  elseif exists and not expires then
    redis.call('ZREM', KEYS[3], id)
  else
    if exists then removed[#removed + 1] = id end
    redis.call('DEL', item, vec)
    redis.call('ZREM', KEYS[1], id)
    redis.call('ZREM', KEYS[3], id)
    redis.call('SREM', KEYS[4], id)
    redis.call('ZREM', nsz, id)
    if redis.call('ZCARD', nsz) == 0 then redis.call('ZREM', KEYS[2], ns) end
  end
end
local changed = removed
LOG
return removed
"#,
    )
});

/// Entries the change feed keeps, about (`MAXLEN ~`): each is one batch's or sweep's ids.
pub(crate) const CHANGES_KEPT: usize = 10_000;

/// The end of every script that writes: appends the ids in the Lua table `changed` to the
/// change feed (`KEYS[5]`), at most 1000 ids an entry, with ids `0-<n>` that number the
/// entries one by one, so a reader sees from the first id kept whether it missed any.
const LOG_CHANGES: &str = "
for i = 1, #changed, 1000 do
  local entry = {}
  for j = i, math.min(i + 999, #changed) do
    entry[#entry + 1] = 'i'
    entry[#entry + 1] = changed[j]
  end
  redis.call('XADD', KEYS[5], 'MAXLEN', '~', CHANGES_KEPT, '0-*', unpack(entry))
end
";

/// A script whose `LOG` line is [`LOG_CHANGES`].
fn logging(body: &str) -> Script {
    let log = LOG_CHANGES.replace("CHANGES_KEPT", &CHANGES_KEPT.to_string());
    Script::new(&body.replacen("\nLOG\n", &log, 1))
}

/// Reads the change feed: the ids of its first and last entries (empty when it has none) and
/// how many entries come after a cursor, then the item ids those entries name (at most
/// `limit + 1` entries are read, so a reader too far behind learns it cheaply).
///
/// KEYS: the feed. ARGV: the cursor (`n` of the last entry read; empty: none), `limit`.
/// Sent with `EVAL` in the pipelines that read every bucket's feed at once (a pipeline does
/// not reload a script the server forgot).
pub(crate) const CHANGES_SOURCE: &str = r#"#!lua flags=no-writes
local key, after, limit = KEYS[1], ARGV[1], tonumber(ARGV[2])
local t = redis.call('TYPE', key)['ok']
if t == 'none' then return {'', '', '0'} end
if t ~= 'stream' then
  return redis.error_reply('WRONGTYPE waypoint: a store key holds another kind of value')
end
local first = redis.call('XRANGE', key, '-', '+', 'COUNT', 1)[1]
local last = redis.call('XREVRANGE', key, '+', '-', 'COUNT', 1)[1]
local out = {first and first[1] or '', last and last[1] or '', '0'}
if after ~= '' then
  local entries = redis.call('XRANGE', key, '(0-' .. after, '+', 'COUNT', limit + 1)
  out[3] = tostring(#entries)
  if #entries <= limit then
    for _, entry in ipairs(entries) do
      local fields = entry[2]
      for j = 2, #fields, 2 do out[#out + 1] = fields[j] end
    end
  end
end
return out
"#;

/// One page of a sorted set in scan order (score, then member bytewise), starting after a
/// cursor: the element after which the previous page ended, found again by rank when it is
/// still there with the same score, else by binary search (it was updated or deleted).
///
/// KEYS: the sorted set. ARGV: how many, the cursor's score (empty: from the start) and
/// member. Returns members and scores, interleaved.
pub(crate) static PAGE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"#!lua flags=no-writes
local key, count = KEYS[1], tonumber(ARGV[1])
local start = 0
-- Bytewise, as Redis orders members: Lua's own `<` follows the locale.
local function after(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return #a > #b
end
if ARGV[2] ~= '' then
  local s, m = ARGV[2], ARGV[3]
  local rank = redis.call('ZRANK', key, m)
  if rank and tonumber(redis.call('ZSCORE', key, m)) == tonumber(s) then
    start = rank + 1
  else
    local lo = redis.call('ZCOUNT', key, '-inf', '(' .. s)
    local hi = lo + redis.call('ZCOUNT', key, s, s)
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if after(redis.call('ZRANGE', key, mid, mid)[1], m) then hi = mid else lo = mid + 1 end
    end
    start = lo
  end
end
return redis.call('ZRANGE', key, start, start + count - 1, 'WITHSCORES')
"#,
    )
});
