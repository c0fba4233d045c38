//! The Lua scripts: each runs atomically on the server, so every write (and every ttl
//! renewal a read makes) is all or nothing.
//!
//! Scripts name the fixed keys of an operation in `KEYS`; the keys whose names depend on
//! stored data (the latest checkpoint's hash, the registered keys of a thread) are built or
//! read inside the script. All of them carry the thread's hash tag, so they share its slot
//! (and every script runs on a Redis Cluster); the global index, in shards on other slots,
//! is written by separate calls (see `RedisSaver`).

use std::sync::LazyLock;

use redis::Script;

/// Shared helpers, prepended to every script that needs them.
const PRELUDE: &str = r#"
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Renews the ttl of a thread. The keys an operation touched and the bookkeeping keys get it
-- every time; every registered key gets it when the last full renewal is older than a tenth
-- of the ttl, so a thread's keys never expire more than a tenth of the ttl apart and a busy
-- thread does not renew its whole history on each call.
local function touch(reg, meta, ttl, touched)
  if ttl <= 0 or redis.call('EXISTS', reg) == 0 then return end
  if redis.call('HEXISTS', meta, 'pinned') == 1 then return end
  local now = now_ms()
  local last = tonumber(redis.call('HGET', meta, 'refreshed') or '0') or 0
  if now - last >= ttl / 10 then
    redis.call('HSET', meta, 'refreshed', tostring(now))
    for _, k in ipairs(redis.call('SMEMBERS', reg)) do redis.call('PEXPIRE', k, ttl) end
  else
    for _, k in ipairs(touched) do redis.call('PEXPIRE', k, ttl) end
  end
  redis.call('PEXPIRE', reg, ttl)
  redis.call('PEXPIRE', meta, ttl)
end
"#;

fn with_prelude(body: &str) -> Script {
    Script::new(&format!("{PRELUDE}\n{body}"))
}

/// A batch of head checks (`H`, 1 key, all first), puts (`P`, 6 keys) and write calls (`W`,
/// 3 keys) of one thread, in order; the number of threads written (0 or 1), -1 (and nothing written) when the batch
/// is fenced and its lease lost, or the id of a checkpoint newer than a checked head (and
/// nothing written).
///
/// `H` (the namespace index key): the put's own id and the parent it expects to be the
/// newest checkpoint other than its own (`PreparedPut::expected_head`).
///
/// `ARGV[1]` is the ttl in ms (0: none), `ARGV[2]` the fence flag (`1`: fenced), `ARGV[3]`
/// the lease token of a fenced batch. A fenced batch's first key is the thread's lease: the
/// batch applies only while the lease hash still holds the token (lapsed but not taken over
/// included; a lease key gone, released or expired past its grace, is lost). `P`: id,
/// checkpoint JSON, metadata JSON, parent id (empty: none), blob fields JSON, thread-index
/// member, count, then field/value pairs. `W`: replace flag, count, then
/// field/value pairs.
pub(crate) static SAVE: LazyLock<Script> = LazyLock::new(|| {
    with_prelude(
        r#"
local ttl = tonumber(ARGV[1])
local a, k = 4, 1
if ARGV[2] == '1' then
  if redis.call('HGET', KEYS[1], 'token') ~= ARGV[3] then return -1 end
  k = 2
end
local regs, metas, touched = {}, {}, {}
local function note(reg, meta, keys)
  if not touched[reg] then
    touched[reg] = {}
    regs[#regs + 1] = reg
    metas[reg] = meta
  end
  for _, key in ipairs(keys) do table.insert(touched[reg], key) end
end
while a <= #ARGV do
  local op = ARGV[a]
  if op == 'H' then
    -- Checks only, and every check comes before the first write: the newest other id
    -- when it is newer than the expected head.
    local own, parent = ARGV[a + 1], ARGV[a + 2]
    for _, id in ipairs(redis.call('ZREVRANGEBYLEX', KEYS[k], '+', '-', 'LIMIT', 0, 2)) do
      if id ~= own then
        if id > parent then return id end
        break
      end
    end
    k = k + 1
    a = a + 3
  elseif op == 'P' then
    local reg, meta, cp, nsz, idx, blobs =
      KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], KEYS[k + 5]
    k = k + 6
    local id, parent, n = ARGV[a + 1], ARGV[a + 4], tonumber(ARGV[a + 7])
    -- A re-put keeps the parent the checkpoint was first stored with (empty: none).
    if redis.call('EXISTS', cp) == 0 then
      redis.call('HSET', cp, 'p', parent)
    end
    redis.call('HSET', cp, 'c', ARGV[a + 2], 'm', ARGV[a + 3], 'b', ARGV[a + 5])
    redis.call('ZADD', nsz, 0, id)
    redis.call('ZADD', idx, 0, ARGV[a + 6])
    a = a + 8
    for i = 0, n - 1 do
      redis.call('HSETNX', blobs, ARGV[a + 2 * i], ARGV[a + 2 * i + 1])
    end
    a = a + 2 * n
    redis.call('SADD', reg, cp, nsz, idx, blobs)
    redis.call('HINCRBY', meta, 'gen', 1)
    note(reg, meta, {cp, nsz, idx, blobs})
  elseif op == 'W' then
    local reg, meta, w = KEYS[k], KEYS[k + 1], KEYS[k + 2]
    k = k + 3
    local replace, n = ARGV[a + 1] == '1', tonumber(ARGV[a + 2])
    a = a + 3
    for i = 0, n - 1 do
      if replace then
        redis.call('HSET', w, ARGV[a + 2 * i], ARGV[a + 2 * i + 1])
      else
        redis.call('HSETNX', w, ARGV[a + 2 * i], ARGV[a + 2 * i + 1])
      end
    end
    a = a + 2 * n
    redis.call('SADD', reg, w)
    redis.call('HINCRBY', meta, 'gen', 1)
    note(reg, meta, {w})
  else
    return redis.error_reply('waypoint: unknown save operation')
  end
end
for _, reg in ipairs(regs) do touch(reg, metas[reg], ttl, touched[reg]) end
return #regs
"#,
    )
});

/// One checkpoint (the latest of the namespace when the id is empty) with its values and
/// writes: `{id, checkpoint, metadata, parent, blob fields, values, writes, latest}` or nil,
/// `latest` being 1 when the checkpoint is the namespace's newest (0 otherwise).
///
/// KEYS: registry, meta, namespace index, thread index, blobs. ARGV: ttl, checkpoint-key
/// prefix, writes-key prefix, id.
pub(crate) static GET: LazyLock<Script> = LazyLock::new(|| {
    with_prelude(
        r#"
local id = ARGV[4]
local newest = redis.call('ZREVRANGEBYLEX', KEYS[3], '+', '-', 'LIMIT', 0, 1)
if id == '' then
  if #newest == 0 then return false end
  id = newest[1]
end
local latest = 0
if newest[1] == id then latest = 1 end
local cp = ARGV[2] .. id
local h = redis.call('HMGET', cp, 'c', 'm', 'p', 'b')
if not h[1] then return false end
local fields = cjson.decode(h[4])
local values = {}
for i = 1, #fields, 256 do
  local chunk = redis.call('HMGET', KEYS[5], unpack(fields, i, math.min(i + 255, #fields)))
  for j = 1, #chunk do values[#values + 1] = chunk[j] end
end
local w = ARGV[3] .. id
local writes = redis.call('HGETALL', w)
touch(KEYS[1], KEYS[2], tonumber(ARGV[1]), {KEYS[3], KEYS[4], KEYS[5], cp, w})
return {id, h[1], h[2], h[3], h[4], values, writes, latest}
"#,
    )
});

/// The parent-chain walk of `delta_channel_history`, from one checkpoint (the latest of the
/// namespace when the id is empty): for each ancestor visited, newest first, its id, the
/// writes-hash pairs of the channels still open there and the blobs-hash pairs of the
/// channels it stores a value of (which closes them), each list after its length, in one
/// flat array (ancestors with neither are left out); nil when the checkpoint does not exist.
///
/// KEYS: as [`GET`]. ARGV: ttl, checkpoint-key prefix, writes-key prefix, id, then the
/// channels.
pub(crate) static HISTORY: LazyLock<Script> = LazyLock::new(|| {
    with_prelude(
        r#"
-- The channel a blobs field or a stored write starts with (`<len>:<channel>`); nil when
-- malformed.
local function channel_of(s)
  local colon = string.find(s, ':', 1, true)
  if not colon then return nil end
  local n = tonumber(string.sub(s, 1, colon - 1))
  if not n then return nil end
  local ch = string.sub(s, colon + 1, colon + n)
  if #ch ~= n then return nil end
  return ch
end
local id = ARGV[4]
if id == '' then
  local r = redis.call('ZREVRANGEBYLEX', KEYS[3], '+', '-', 'LIMIT', 0, 1)
  if #r == 0 then return false end
  id = r[1]
end
local cp, w = ARGV[2] .. id, ARGV[3] .. id
-- 'b' is written with 'c' by every put: it tells whether the checkpoint exists.
local h = redis.call('HMGET', cp, 'p', 'b')
if not h[2] then return false end
-- The open channels, each with the quoted start of its fields in a JSON field list. A
-- channel name JSON leaves as is can be found there without decoding the list.
local open, quoted, plain, left = {}, {}, true, 0
for i = 5, #ARGV do
  local ch = ARGV[i]
  if not open[ch] then
    open[ch] = true
    quoted[ch] = '"' .. #ch .. ':' .. ch
    left = left + 1
    if string.find(ch, '["\\%c]') then plain = false end
  end
end
-- The field of `ch` in the JSON field list `b`; nil when there is none, false when the
-- list must be decoded to tell. An unescaped quote after `[` or `,` starts a string in
-- compact JSON, and a string without a backslash is its own content.
local function field_in(b, ch)
  local from = 1
  while true do
    local s = string.find(b, quoted[ch], from, true)
    if not s then return nil end
    local before = string.sub(b, s - 1, s - 1)
    if before == '[' or before == ',' then
      local e = string.find(b, '"', s + 1, true)
      if not e then return false end
      local f = string.sub(b, s + 1, e - 1)
      if string.find(f, '\\', 1, true) then return false end
      return f
    end
    from = s + 1
  end
end
-- The fields of the open channels a checkpoint has a version of, and their channels.
local function wanted_in(b)
  local fields, chans = {}, {}
  if plain then
    for ch in pairs(open) do
      local f = field_in(b, ch)
      if f == false then
        fields = nil
        break
      end
      if f then
        fields[#fields + 1] = f
        chans[#chans + 1] = ch
      end
    end
    if fields then return fields, chans end
    fields, chans = {}, {}
  end
  for _, f in ipairs(cjson.decode(b)) do
    local ch = channel_of(f)
    if ch and open[ch] then
      fields[#fields + 1] = f
      chans[#chans + 1] = ch
    end
  end
  return fields, chans
end
local touched = {KEYS[3], KEYS[4], KEYS[5], cp, w}
local seen = {[id] = true}
-- Flat: per ancestor with something to report, id, count, writes-hash pairs, count,
-- blobs-hash pairs.
local out = {}
local parent = h[1]
while left > 0 and parent and parent ~= '' do
  if seen[parent] then
    return redis.error_reply('waypoint: the parent links of checkpoint ' .. id .. ' form a cycle')
  end
  seen[parent] = true
  cp, w = ARGV[2] .. parent, ARGV[3] .. parent
  h = redis.call('HMGET', cp, 'p', 'b')
  if not h[2] then break end
  touched[#touched + 1] = cp
  touched[#touched + 1] = w
  local writes = {}
  local all = redis.call('HGETALL', w)
  for i = 1, #all, 2 do
    local ch = channel_of(all[i + 1])
    -- A malformed write goes back too: the caller reports it, as get_tuple would.
    if ch == nil or open[ch] then
      writes[#writes + 1] = all[i]
      writes[#writes + 1] = all[i + 1]
    end
  end
  -- A field holds a value when it is there, not empty (the empty string: versioned, no
  -- value) and not a sealed empty channel (tag `empty`).
  local fields, chans = wanted_in(h[2])
  local seeds = {}
  for i = 1, #fields, 256 do
    local chunk = redis.call('HMGET', KEYS[5], unpack(fields, i, math.min(i + 255, #fields)))
    for j = 1, #chunk do
      local v, ch = chunk[j], chans[i + j - 1]
      if v and #v > 0 and string.sub(v, 1, 7) ~= '5:empty' and open[ch] then
        open[ch] = nil
        left = left - 1
        seeds[#seeds + 1] = fields[i + j - 1]
        seeds[#seeds + 1] = v
      end
    end
  end
  if #writes > 0 or #seeds > 0 then
    out[#out + 1] = parent
    out[#out + 1] = #writes
    for _, x in ipairs(writes) do out[#out + 1] = x end
    out[#out + 1] = #seeds
    for _, x in ipairs(seeds) do out[#out + 1] = x end
  end
  parent = h[1]
end
touch(KEYS[1], KEYS[2], tonumber(ARGV[1]), touched)
return out
"#,
    )
});

/// Deletes every key of a thread; returns the members its thread index had, whose
/// global-index entries the caller removes next.
///
/// KEYS: registry, meta, thread index.
pub(crate) static DELETE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local members = redis.call('ZRANGE', KEYS[3], 0, -1)
for _, k in ipairs(redis.call('SMEMBERS', KEYS[1])) do redis.call('DEL', k) end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return members
"#,
    )
});

/// Everything of a thread, at one instant: `{gen, key, content, key, content, ...}`.
/// Sorted sets give their members, hashes field/value pairs; with `light`, the values of
/// blobs hashes are replaced by `1` (a value) or an empty string (versioned, no value, or a
/// sealed empty channel).
///
/// KEYS: registry, meta. ARGV: the thread's key base, light flag.
pub(crate) static DUMP: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local out = {redis.call('HGET', KEYS[2], 'gen') or '0'}
local base = ARGV[1]
for _, k in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local kind = string.sub(k, #base + 1)
  local content
  if kind == 'index' or string.sub(kind, 1, 3) == 'ns:' then
    content = redis.call('ZRANGE', k, 0, -1)
  elseif ARGV[2] == '1' and string.sub(kind, 1, 6) == 'blobs:' then
    content = {}
    for _, f in ipairs(redis.call('HKEYS', k)) do
      local v = redis.call('HGET', k, f)
      content[#content + 1] = f
      content[#content + 1] = (#v > 0 and string.sub(v, 1, 7) ~= '5:empty') and '1' or ''
    end
  else
    content = redis.call('HGETALL', k)
  end
  if #content > 0 then
    out[#out + 1] = k
    out[#out + 1] = content
  end
end
return out
"#,
    )
});

/// Deletions computed from a [`DUMP`], applied only if the thread did not change since
/// (its `gen` is the same); returns 0 when it did.
///
/// KEYS: registry, meta. ARGV: expected gen, ttl, then `D key` (delete a key), `Z key
/// member`, `H key field`.
pub(crate) static APPLY: LazyLock<Script> = LazyLock::new(|| {
    with_prelude(
        r#"
local reg, meta = KEYS[1], KEYS[2]
if (redis.call('HGET', meta, 'gen') or '0') ~= ARGV[1] then return 0 end
local touched = {}
local a = 3
while a <= #ARGV do
  local op = ARGV[a]
  if op == 'D' then
    redis.call('DEL', ARGV[a + 1])
    touched[#touched + 1] = ARGV[a + 1]
    a = a + 2
  elseif op == 'Z' then
    redis.call('ZREM', ARGV[a + 1], ARGV[a + 2])
    touched[#touched + 1] = ARGV[a + 1]
    a = a + 3
  elseif op == 'H' then
    redis.call('HDEL', ARGV[a + 1], ARGV[a + 2])
    touched[#touched + 1] = ARGV[a + 1]
    a = a + 3
  else
    return redis.error_reply('waypoint: unknown apply operation')
  end
end
-- Emptied hashes and sorted sets are gone: drop their names from the registry.
for _, k in ipairs(touched) do
  if redis.call('EXISTS', k) == 0 then redis.call('SREM', reg, k) end
end
if redis.call('EXISTS', reg) == 0 and redis.call('HEXISTS', meta, 'pinned') == 0 then
  redis.call('DEL', meta)
else
  redis.call('HINCRBY', meta, 'gen', 1)
  touch(reg, meta, tonumber(ARGV[2]), {})
end
return 1
"#,
    )
});

/// Writes a copied thread onto an empty target; returns 0 (and writes nothing) if the
/// target has checkpoints. Leftover keys of the target (writes of a deleted thread) go.
///
/// KEYS: registry, meta, thread index (of the target). ARGV: ttl, then `H key count field
/// value ...`, `Z key count member ...`.
pub(crate) static RESTORE: LazyLock<Script> = LazyLock::new(|| {
    with_prelude(
        r#"
local reg, meta, idx = KEYS[1], KEYS[2], KEYS[3]
if redis.call('ZCARD', idx) > 0 then return 0 end
for _, k in ipairs(redis.call('SMEMBERS', reg)) do redis.call('DEL', k) end
redis.call('DEL', reg)
local touched = {}
local a = 2
while a <= #ARGV do
  local op = ARGV[a]
  if op == 'H' or op == 'Z' then
    local key, n = ARGV[a + 1], tonumber(ARGV[a + 2])
    a = a + 3
    if op == 'H' then
      for i = 0, n - 1 do redis.call('HSET', key, ARGV[a + 2 * i], ARGV[a + 2 * i + 1]) end
      a = a + 2 * n
    else
      for i = 0, n - 1 do redis.call('ZADD', key, 0, ARGV[a + i]) end
      a = a + n
    end
    redis.call('SADD', reg, key)
    touched[#touched + 1] = key
  else
    return redis.error_reply('waypoint: unknown restore operation')
  end
end
redis.call('HINCRBY', meta, 'gen', 1)
redis.call('HSET', meta, 'refreshed', '0')
touch(reg, meta, tonumber(ARGV[1]), touched)
return 1
"#,
    )
});

/// Renews a thread's ttl after a read made of plain commands (`list`).
///
/// KEYS: registry, meta. ARGV: ttl, then the keys read.
pub(crate) const TOUCH: &str = r#"
local touched = {}
for i = 2, #ARGV do touched[#touched + 1] = ARGV[i] end
touch(KEYS[1], KEYS[2], tonumber(ARGV[1]), touched)
return 1
"#;

/// [`TOUCH`] with its helpers, sent with `EVAL` inside pipelines (a pipeline does not
/// reload a script the server forgot).
pub(crate) static TOUCH_SOURCE: LazyLock<String> = LazyLock::new(|| format!("{PRELUDE}\n{TOUCH}"));

/// Forgets the thread's index entries of a checkpoint whose hash is gone (expired with its
/// thread).
///
/// KEYS: checkpoint hash, namespace index, thread index. ARGV: id, thread-index member.
pub(crate) const CLEAN: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[2])
return 1
"#;

/// Pins (`1`) or unpins (`0`) a thread: a pinned thread's keys never expire.
///
/// KEYS: registry, meta. ARGV: flag, ttl.
pub(crate) static PIN: LazyLock<Script> = LazyLock::new(|| {
    with_prelude(
        r#"
local reg, meta = KEYS[1], KEYS[2]
if ARGV[1] == '1' then
  redis.call('HSET', meta, 'pinned', '1')
  redis.call('PERSIST', meta)
  redis.call('PERSIST', reg)
  for _, k in ipairs(redis.call('SMEMBERS', reg)) do redis.call('PERSIST', k) end
  return 1
end
redis.call('HDEL', meta, 'pinned')
if redis.call('EXISTS', reg) == 0 then
  redis.call('DEL', meta)
  return 1
end
redis.call('HSET', meta, 'refreshed', '0')
touch(reg, meta, tonumber(ARGV[2]), {})
return 1
"#,
    )
});

/// Claims a lease unless another live one holds the thread; the expiry (server ms) or nil.
///
/// KEYS: lease. ARGV: token, ttl ms, grace ms (how long a lapsed lease stays renewable).
pub(crate) static LEASE_ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    with_prelude(
        r#"
local now = now_ms()
local cur = redis.call('HMGET', KEYS[1], 'token', 'expires')
if cur[1] and cur[1] ~= ARGV[1] and (tonumber(cur[2]) or 0) > now then return false end
local exp = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'expires', tostring(exp))
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) + tonumber(ARGV[3]))
return exp
"#,
    )
});

/// Extends a lease still holding this token (lapsed but not taken over included); the new
/// expiry or nil. Same KEYS and ARGV as [`LEASE_ACQUIRE`].
pub(crate) static LEASE_RENEW: LazyLock<Script> = LazyLock::new(|| {
    with_prelude(
        r#"
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then return false end
local exp = now_ms() + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'expires', tostring(exp))
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) + tonumber(ARGV[3]))
return exp
"#,
    )
});

/// Drops a lease if it still holds this token. KEYS: lease. ARGV: token.
pub(crate) static LEASE_RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('HGET', KEYS[1], 'token') == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"#,
    )
});
