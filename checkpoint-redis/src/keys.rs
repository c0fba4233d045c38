//! Key names, sorted-set members and the small binary encodings stored in hash fields.
//!
//! Every key of a thread starts with `<prefix>:{<tag>}:` where the tag is the thread id with
//! `%`, `{` and `}` percent-escaped, so the hash tag always ends where the thread id ends.

use waypoint_checkpoint::{Error, Result};

use crate::slots::{shard_of, shard_tag};

/// The names of one thread's keys, under one prefix.
#[derive(Clone, Debug)]
pub(crate) struct ThreadKeys {
    /// `<prefix>:{<tag>}:`, the start of every key of the thread.
    pub(crate) base: String,
    /// The thread id, encoded for sorted-set members of the global index.
    pub(crate) member: Vec<u8>,
    /// The shard of the global index holding the thread's checkpoints: the one whose tag's
    /// slot lies in the same sixteenth of the slot range as the thread's (on a cluster whose
    /// nodes own contiguous ranges, usually the thread's own node).
    shard: usize,
}

impl ThreadKeys {
    pub(crate) fn new(prefix: &str, thread_id: &str) -> Self {
        let tag = tag(thread_id);
        ThreadKeys {
            shard: shard_of(tag.as_bytes()),
            base: format!("{prefix}:{{{tag}}}:"),
            member: enc(thread_id.as_bytes()),
        }
    }

    /// The set of every other key of the thread (for `delete_thread`, pins and ttl).
    pub(crate) fn registry(&self) -> String {
        format!("{}registry", self.base)
    }

    /// A hash of the thread's bookkeeping: `gen` (bumped by every write), `pinned`,
    /// `refreshed` (the last time every key's ttl was renewed).
    pub(crate) fn meta(&self) -> String {
        format!("{}meta", self.base)
    }

    /// The thread's checkpoints in every namespace: members `enc(id) ++ ns`.
    pub(crate) fn index(&self) -> String {
        format!("{}index", self.base)
    }

    /// The checkpoint ids of one namespace (score 0, ordered by member).
    pub(crate) fn ns_index(&self, ns: &str) -> String {
        format!("{}ns:{}:{ns}", self.base, ns.len())
    }

    /// The channel values of one namespace: field [`blob_field`], value [`blob_value`].
    pub(crate) fn blobs(&self, ns: &str) -> String {
        format!("{}blobs:{}:{ns}", self.base, ns.len())
    }

    /// The start of the checkpoint hashes' names of one namespace (the id follows).
    pub(crate) fn checkpoint_prefix(&self, ns: &str) -> String {
        format!("{}checkpoint:{}:{ns}:", self.base, ns.len())
    }

    /// The start of the writes hashes' names of one namespace (the id follows).
    pub(crate) fn writes_prefix(&self, ns: &str) -> String {
        format!("{}writes:{}:{ns}:", self.base, ns.len())
    }

    pub(crate) fn checkpoint(&self, ns: &str, id: &str) -> String {
        let mut key = self.checkpoint_prefix(ns);
        key.push_str(id);
        key
    }

    pub(crate) fn writes(&self, ns: &str, id: &str) -> String {
        let mut key = self.writes_prefix(ns);
        key.push_str(id);
        key
    }

    /// What a registered key name stands for; `None` for a name this layout never makes.
    pub(crate) fn parse(&self, key: &str) -> Option<KeyKind> {
        let rest = key.strip_prefix(&self.base)?;
        if rest == "index" {
            return Some(KeyKind::Index);
        }
        let (kind, rest) = rest.split_once(':')?;
        let (len, rest) = rest.split_once(':')?;
        let len: usize = len.parse().ok()?;
        let ns = rest.get(..len)?.to_owned();
        let rest = &rest[len..];
        match kind {
            "ns" if rest.is_empty() => Some(KeyKind::NsIndex(ns)),
            "blobs" if rest.is_empty() => Some(KeyKind::Blobs(ns)),
            "checkpoint" => Some(KeyKind::Checkpoint(ns, rest.strip_prefix(':')?.to_owned())),
            "writes" => Some(KeyKind::Writes(ns, rest.strip_prefix(':')?.to_owned())),
            _ => None,
        }
    }

    /// The member of the thread index for a checkpoint.
    pub(crate) fn index_member(id: &str, ns: &str) -> Vec<u8> {
        let mut m = enc(id.as_bytes());
        m.extend_from_slice(ns.as_bytes());
        m
    }

    /// The shard of the global index holding this thread's checkpoints.
    pub(crate) fn shard(&self) -> usize {
        self.shard
    }

    /// The member of the global index for a checkpoint of this thread.
    pub(crate) fn global_member(&self, id: &str, ns: &str) -> Vec<u8> {
        let mut m = enc(id.as_bytes());
        m.extend_from_slice(&self.member);
        m.extend_from_slice(ns.as_bytes());
        m
    }
}

/// The kinds of registered keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum KeyKind {
    Index,
    NsIndex(String),
    Blobs(String),
    Checkpoint(String, String),
    Writes(String, String),
}

/// The global index of layout 1: every checkpoint of every thread under `prefix` in one
/// sorted set (one slot, one node); `RedisSaver::setup` moves it into the shards.
pub(crate) fn legacy_index(prefix: &str) -> String {
    format!("{prefix}:index")
}

/// One shard of the global index under `prefix`: the checkpoints of the threads whose tags
/// hash into its sixteenth of the slot range.
pub(crate) fn index_shard(prefix: &str, shard: usize) -> String {
    format!("{prefix}:index:{{{}}}", shard_tag(shard))
}

/// The key of a thread's lease (not a key of the thread's data, but in its slot).
pub(crate) fn lease(prefix: &str, thread_id: &str) -> String {
    format!("{prefix}:lease:{{{}}}", tag(thread_id))
}

/// The thread id with `%`, `{` and `}` percent-escaped: the hash tag ends where it ends.
fn tag(thread_id: &str) -> String {
    let mut out = String::with_capacity(thread_id.len() + 2);
    for c in thread_id.chars() {
        match c {
            '%' => out.push_str("%25"),
            '{' => out.push_str("%7B"),
            '}' => out.push_str("%7D"),
            c => out.push(c),
        }
    }
    out
}

/// Order-preserving, self-terminating encoding: NUL becomes `00 FF`, and `00` ends the
/// string, so `enc(a) ++ x < enc(b) ++ y` whenever `a < b`.
pub(crate) fn enc(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() + 1);
    for &b in s {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.push(0);
    out
}

/// Decodes one [`enc`] string from the start of `m`; returns it and the rest.
pub(crate) fn dec(m: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let mut out = Vec::with_capacity(m.len());
    let mut i = 0;
    while i < m.len() {
        if m[i] == 0 {
            if m.get(i + 1) == Some(&0xFF) {
                out.push(0);
                i += 2;
                continue;
            }
            return Some((out, &m[i + 1..]));
        }
        out.push(m[i]);
        i += 1;
    }
    None
}

/// The first string past every member that starts with `enc(s)` (for lexicographic ranges).
pub(crate) fn enc_successor(s: &[u8]) -> Vec<u8> {
    let mut out = enc(s);
    if let Some(last) = out.last_mut() {
        *last = 1;
    }
    out
}

fn utf8(bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes).map_err(|_| corrupt("a stored name is not UTF-8"))
}

/// `(id, ns)` of a thread-index member.
pub(crate) fn parse_index_member(m: &[u8]) -> Result<(String, String)> {
    let (id, ns) = dec(m).ok_or_else(|| corrupt("a thread index member is malformed"))?;
    Ok((utf8(id)?, utf8(ns.to_vec())?))
}

/// `(thread, ns, id)` of a global-index member.
pub(crate) fn parse_global_member(m: &[u8]) -> Result<(String, String, String)> {
    let bad = || corrupt("a global index member is malformed");
    let (id, rest) = dec(m).ok_or_else(bad)?;
    let (thread, ns) = dec(rest).ok_or_else(bad)?;
    Ok((utf8(thread)?, utf8(ns.to_vec())?, utf8(id)?))
}

/// The error of stored data this layout cannot read.
pub(crate) fn corrupt(what: &str) -> Error {
    Error::serialization("redis", what)
}

/// Appends `<decimal length>:<bytes>`.
pub(crate) fn put_part(out: &mut Vec<u8>, part: &[u8]) {
    out.extend_from_slice(part.len().to_string().as_bytes());
    out.push(b':');
    out.extend_from_slice(part);
}

/// Takes one [`put_part`] from the start of `bytes`.
pub(crate) fn take_part(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = bytes.iter().position(|&b| b == b':')?;
    let len: usize = std::str::from_utf8(&bytes[..colon]).ok()?.parse().ok()?;
    let rest = &bytes[colon + 1..];
    if rest.len() < len {
        return None;
    }
    Some(rest.split_at(len))
}

/// The blobs-hash field of one channel version.
pub(crate) fn blob_field(channel: &str, version: &str) -> String {
    format!("{}:{channel}{version}", channel.len())
}

/// `(channel, version)` of a blobs-hash field.
pub(crate) fn parse_blob_field(field: &[u8]) -> Result<(String, String)> {
    let (channel, version) =
        take_part(field).ok_or_else(|| corrupt("a channel value field is malformed"))?;
    Ok((utf8(channel.to_vec())?, utf8(version.to_vec())?))
}

/// The writes-hash field of one write.
pub(crate) fn write_field(task_id: &str, idx: i64) -> String {
    format!("{}:{task_id}{idx}", task_id.len())
}

/// `(task_id, idx)` of a writes-hash field.
pub(crate) fn parse_write_field(field: &[u8]) -> Result<(String, i64)> {
    let bad = || corrupt("a pending write field is malformed");
    let (task, idx) = take_part(field).ok_or_else(bad)?;
    let idx = std::str::from_utf8(idx)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(bad)?;
    Ok((utf8(task.to_vec())?, idx))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_orders_like_the_strings() {
        let words: [&[u8]; 7] = [b"", b"\0", b"\0\0", b"\0a", b"a", b"a\0b", b"ab"];
        for a in words {
            for b in words {
                // Whatever follows an encoded string, the order is the strings' order.
                let (ea, eb) = (
                    [enc(a), b"zz".to_vec()].concat(),
                    [enc(b), b"\x01".to_vec()].concat(),
                );
                if a != b {
                    assert_eq!(a.cmp(b), ea.cmp(&eb), "{a:?} {b:?}");
                }
                let (decoded, rest) = dec(&ea).expect("decodes");
                assert_eq!((decoded.as_slice(), rest), (a, b"zz".as_slice()));
            }
        }
    }

    #[test]
    fn braces_cannot_break_the_tag() {
        let keys = ThreadKeys::new("wp", "a}{b%");
        assert_eq!(keys.base, "wp:{a%7D%7Bb%25}:");
        assert_eq!(lease("wp", "a}"), "wp:lease:{a%7D}");
        let k = keys.checkpoint("x:1", "id:2");
        assert_eq!(
            keys.parse(&k),
            Some(KeyKind::Checkpoint("x:1".into(), "id:2".into()))
        );
        assert_eq!(
            keys.parse(&keys.blobs("")),
            Some(KeyKind::Blobs(String::new()))
        );
        assert_eq!(keys.parse(&keys.index()), Some(KeyKind::Index));
    }

    #[test]
    fn a_threads_index_shard_is_its_own_sixteenth() {
        let k = ThreadKeys::new("wp", "t");
        assert_eq!(k.shard(), shard_of(b"t"));
        assert_eq!(
            index_shard("wp", 3),
            format!("wp:index:{{{}}}", shard_tag(3))
        );
    }

    #[test]
    fn members_roundtrip() {
        let keys = ThreadKeys::new("wp", "t\0x");
        let m = keys.global_member("id\0", "ns|a");
        assert_eq!(
            parse_global_member(&m).expect("parses"),
            ("t\0x".into(), "ns|a".into(), "id\0".into())
        );
        let m = ThreadKeys::index_member("i", "");
        assert_eq!(
            parse_index_member(&m).expect("parses"),
            ("i".into(), String::new())
        );
        assert_eq!(
            parse_write_field(write_field("t:1", -3).as_bytes()).expect("parses"),
            ("t:1".into(), -3)
        );
        assert_eq!(
            parse_blob_field(blob_field("c:h", "0002.5").as_bytes()).expect("parses"),
            ("c:h".into(), "0002.5".into())
        );
    }
}
