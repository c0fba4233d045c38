//! The store's key names (see the crate docs) and item ids.
//!
//! An item's id is its dot-joined namespace and its key, each with every NUL byte written as
//! `00 01`, separated by `00 00`. Ids compare bytewise exactly as (joined namespace, key)
//! pairs compare, which is the tie order of the scan: a sorted set of ids with equal scores
//! is already in scan order. The encoding is reversible, so a sweep can name what it removed.

use waypoint_store::{ItemKey, Namespace};

use crate::slots::{SHARDS, shard_of, shard_tag};

/// How many leading labels of a namespace choose its bucket.
pub(crate) const BUCKET_LABELS: usize = 2;

/// The bucket of a namespace: its first [`BUCKET_LABELS`] labels (all of them when it has
/// fewer), dot-joined, hashed to one of the [`SHARDS`] sixteenths of the cluster's slot
/// range. Every item of a namespace, and every namespace sharing those labels, is in the
/// bucket: one slot, one script per batch.
pub(crate) fn bucket_of(namespace: &Namespace) -> usize {
    let labels = &namespace.labels()[..namespace.len().min(BUCKET_LABELS)];
    shard_of(labels.join(".").as_bytes())
}

/// The bucket of a dot-joined namespace.
pub(crate) fn bucket_of_joined(joined: &str) -> usize {
    bucket_of(&Namespace::from_joined(joined))
}

/// The keys of one bucket of a store (or of a store in layout 2, all in one slot).
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    base: String,
}

impl Keys {
    /// The keys of bucket `bucket` of the store under `prefix` (already checked to hold no
    /// brace): `{<tag>}/<prefix>:`, the tag being the bucket's shard tag.
    pub(crate) fn bucket(prefix: &str, bucket: usize) -> Self {
        Keys {
            base: format!("{{{}}}/{prefix}:", shard_tag(bucket)),
        }
    }

    /// Every bucket of the store under `prefix`, in bucket order.
    pub(crate) fn buckets(prefix: &str) -> Vec<Self> {
        (0..SHARDS).map(|b| Keys::bucket(prefix, b)).collect()
    }

    /// The keys of layout 2 and older under `prefix`: `{<prefix>}:`, one slot for the whole
    /// store. Its `meta` hash still records the layout of the store.
    pub(crate) fn legacy(prefix: &str) -> Self {
        Keys {
            base: format!("{{{prefix}}}:"),
        }
    }

    fn named(&self, kind: &str, rest: &[u8]) -> Vec<u8> {
        let mut key = Vec::with_capacity(self.base.len() + kind.len() + rest.len());
        key.extend_from_slice(self.base.as_bytes());
        key.extend_from_slice(kind.as_bytes());
        key.extend_from_slice(rest);
        key
    }

    /// Hash of the layout version.
    pub(crate) fn meta(&self) -> Vec<u8> {
        self.named("meta", b"")
    }

    /// Sorted set of every item id by `-updated_at`: the scan order of the whole store.
    pub(crate) fn order(&self) -> Vec<u8> {
        self.named("order", b"")
    }

    /// Sorted set (all scores 0, so ordered bytewise) of the namespaces holding items.
    pub(crate) fn namespaces(&self) -> Vec<u8> {
        self.named("namespaces", b"")
    }

    /// Sorted set of the ids of items with a TTL, by `expires_at`.
    pub(crate) fn expiry(&self) -> Vec<u8> {
        self.named("expiry", b"")
    }

    /// Stream of the ids whose vectors changed (puts with vectors, deletes, sweeps): the change
    /// feed other processes replay into their index.
    pub(crate) fn changes(&self) -> Vec<u8> {
        self.named("changes", b"")
    }

    /// Set of the ids of items that have vectors.
    pub(crate) fn vectored(&self) -> Vec<u8> {
        self.named("vectored", b"")
    }

    /// Hash of one item.
    pub(crate) fn item(&self, id: &[u8]) -> Vec<u8> {
        self.named("i:", id)
    }

    /// Hash of one item's vectors: field path to little-endian `f32`s.
    pub(crate) fn vectors(&self, id: &[u8]) -> Vec<u8> {
        self.named("v:", id)
    }

    /// Sorted set of the ids in one namespace by `-updated_at`.
    pub(crate) fn namespace(&self, joined: &str) -> Vec<u8> {
        self.named("n:", joined.as_bytes())
    }
}

/// The id of an item (see the module docs).
pub(crate) fn id(key: &ItemKey) -> Vec<u8> {
    let joined = key.namespace.joined();
    let mut id = Vec::with_capacity(joined.len() + key.key.len() + 2);
    escape(&mut id, joined.as_bytes());
    id.extend_from_slice(&[0, 0]);
    escape(&mut id, key.key.as_bytes());
    id
}

fn escape(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(1);
        }
    }
}

/// The item an id names; `None` for bytes no id has.
pub(crate) fn parse_id(id: &[u8]) -> Option<ItemKey> {
    let mut parts = [Vec::new(), Vec::new()];
    let mut part = 0;
    let mut bytes = id.iter();
    while let Some(&b) = bytes.next() {
        if b != 0 {
            parts[part].push(b);
            continue;
        }
        match bytes.next() {
            Some(1) => parts[part].push(0),
            Some(0) if part == 0 => part = 1,
            _ => return None,
        }
    }
    if part != 1 {
        return None;
    }
    let [joined, key] = parts;
    let joined = String::from_utf8(joined).ok()?;
    let key = String::from_utf8(key).ok()?;
    Some(ItemKey::new(Namespace::from_joined(&joined), key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(labels: &[&str], key: &str) -> ItemKey {
        ItemKey::new(Namespace::new(labels.iter().copied()), key)
    }

    #[test]
    fn ids_round_trip_and_sort_like_joined_namespace_then_key() {
        let keys = [
            key(&["a"], ""),
            key(&["a"], "b"),
            key(&["a"], "b\0c"),
            key(&["a\0"], "b"),
            key(&["a", "b"], "a"),
            key(&["a-b"], "z"),
            key(&["a\0b"], "c"),
            key(&["ab"], ""),
            key(&["é"], "\0"),
        ];
        for a in &keys {
            assert_eq!(parse_id(&id(a)).as_ref(), Some(a));
            for b in &keys {
                let joined = (a.namespace.joined(), &a.key).cmp(&(b.namespace.joined(), &b.key));
                assert_eq!(id(a).cmp(&id(b)), joined, "{a:?} vs {b:?}");
            }
        }
        // The two that a plain separator would confuse stay apart.
        assert_ne!(id(&key(&["a\0b"], "c")), id(&key(&["a"], "b\0c")));
    }

    #[test]
    fn malformed_ids_are_refused() {
        for bad in [
            &b"abc"[..],
            b"a\0",
            b"a\0\x02b",
            b"a\0\0b\0\0c",
            b"\xff\0\0k",
        ] {
            assert_eq!(parse_id(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn keys_carry_their_buckets_tag_chosen_by_the_first_two_labels() {
        let keys = Keys::legacy("tenant-a");
        assert_eq!(keys.order(), b"{tenant-a}:order");
        assert_eq!(keys.namespace("users.alice"), b"{tenant-a}:n:users.alice");
        assert_eq!(keys.item(b"x\0\0k"), b"{tenant-a}:i:x\0\0k");
        let b = bucket_of(&Namespace::new(["users", "alice", "prefs"]));
        assert_eq!(b, bucket_of(&Namespace::new(["users", "alice"])));
        assert_eq!(b, bucket_of_joined("users.alice.x.y"));
        assert_eq!(b, shard_of(b"users.alice"));
        let tag = shard_tag(b);
        assert_eq!(
            Keys::bucket("tenant-a", b).order(),
            format!("{{{tag}}}/tenant-a:order").into_bytes()
        );
        // Users spread: 64 of them land in more than half of the buckets.
        let used: std::collections::BTreeSet<usize> = (0..64)
            .map(|i| {
                bucket_of(&Namespace::new([
                    "memories".to_owned(),
                    format!("user-{i}"),
                ]))
            })
            .collect();
        assert!(used.len() > SHARDS / 2, "{used:?}");
    }
}
