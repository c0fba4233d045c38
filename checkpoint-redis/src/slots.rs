//! Redis Cluster slots: which slot a hash tag names, the sixteen spread hash tags the
//! global index and the store's buckets use, and running commands grouped by slot (a
//! cluster refuses a pipeline or script whose keys span slots).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use redis::Value;

use crate::connection::{Connection, with_conn};
use crate::error::Fault;

/// How many sorted sets hold the global index (and the buckets of a store): one per
/// sixteenth of the cluster's slot range. Part of the key layout: never changed.
pub(crate) const SHARDS: usize = 16;

/// The cluster's slot count.
const SLOTS: usize = 16384;

/// The shard (`0..SHARDS`) of a hash tag: the sixteenth of the slot range its slot lies in.
pub(crate) fn shard_of(tag: &[u8]) -> usize {
    usize::from(slot(tag)) * SHARDS / SLOTS
}

/// The hash tag of shard `i`: the first of `s<i>-0`, `s<i>-1`, ... whose slot lies in the
/// `i`-th sixteenth of the slot range, so the shards spread over the whole range (and over
/// every node of a cluster that has up to sixteen).
pub(crate) fn shard_tag(i: usize) -> &'static str {
    static TAGS: LazyLock<Vec<String>> = LazyLock::new(|| {
        (0..SHARDS)
            .map(|i| {
                (0u32..)
                    .map(|c| format!("s{i}-{c}"))
                    .find(|t| shard_of(t.as_bytes()) == i)
                    .unwrap_or_default()
            })
            .collect()
    });
    &TAGS[i % SHARDS]
}

/// The cluster slot of a hash tag's content: CRC16 (XMODEM) modulo 16384, as Redis does.
pub(crate) fn slot(tag: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in tag {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

/// The positions of `items`, grouped by their group (a thread, a bucket: anything naming one
/// slot), groups in order.
pub(crate) fn group<G: Ord>(items: impl IntoIterator<Item = G>) -> BTreeMap<G, Vec<usize>> {
    let mut out: BTreeMap<G, Vec<usize>> = BTreeMap::new();
    for (i, g) in items.into_iter().enumerate() {
        out.entry(g).or_default().push(i);
    }
    out
}

/// Runs pipelines whose commands each stay in one slot, all at once: on a standalone server
/// they share the round trip, on a cluster each goes to its node. Every command must be
/// idempotent (a pipeline is sent again after a broken connection). The replies, per
/// pipeline.
pub(crate) async fn per_slot(
    db: &Connection,
    what: &'static str,
    pipes: &[redis::Pipeline],
) -> Result<Vec<Vec<Value>>, Fault> {
    let mut calls: Vec<_> = pipes
        .iter()
        .map(|pipe| {
            Some(Box::pin(async move {
                with_conn!(db, what, retry = true, |conn| pipe
                    .query_async::<Vec<Value>>(&mut conn))
            }))
        })
        .collect();
    let mut out: Vec<Option<Vec<Value>>> = vec![None; pipes.len()];
    // All polled together (a join without a dependency): the first error ends the wait.
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (call, done) in calls.iter_mut().zip(out.iter_mut()) {
            let Some(running) = call else { continue };
            match running.as_mut().poll(cx) {
                std::task::Poll::Ready(Ok(reply)) => {
                    *done = Some(reply);
                    *call = None;
                }
                std::task::Poll::Ready(Err(e)) => return std::task::Poll::Ready(Err(e)),
                std::task::Poll::Pending => pending = true,
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(Ok(()))
        }
    })
    .await?;
    Ok(out.into_iter().flatten().collect())
}

/// One idempotent command per item, `command(i, pipe)` adding item `i`'s (exactly one, not
/// ignored) to the pipeline of its group's slot ([`group`] of `groups`): one pipeline per
/// slot, all at once ([`per_slot`]). The replies, in item order.
pub(crate) async fn each_in_slot<G: Ord>(
    db: &Connection,
    what: &'static str,
    groups: impl IntoIterator<Item = G>,
    command: impl Fn(usize, &mut redis::Pipeline),
) -> Result<Vec<Value>, Fault> {
    let groups = group(groups);
    let pipes: Vec<redis::Pipeline> = groups
        .values()
        .map(|positions| {
            let mut pipe = redis::pipe();
            for &i in positions {
                command(i, &mut pipe);
            }
            pipe
        })
        .collect();
    let mut out = vec![Value::Nil; groups.values().map(Vec::len).sum()];
    for (positions, replies) in groups.values().zip(per_slot(db, what, &pipes).await?) {
        for (&i, reply) in positions.iter().zip(replies) {
            out[i] = reply;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_redis_slots_and_shards_spread_over_the_range() {
        // `CLUSTER KEYSLOT` of these, from the Redis cluster specification and a server.
        assert_eq!(slot(b"123456789"), 0x31C3);
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"user1000"), 3443);
        for i in 0..SHARDS {
            let slot = usize::from(slot(shard_tag(i).as_bytes()));
            assert_eq!(slot * SHARDS / SLOTS, i, "{}", shard_tag(i));
        }
    }

    #[test]
    fn items_group_by_slot_in_order() {
        let groups = group(["b", "a", "b", "c", "a"]);
        let groups: Vec<(&str, Vec<usize>)> = groups.into_iter().collect();
        assert_eq!(
            groups,
            [("a", vec![1, 4]), ("b", vec![0, 2]), ("c", vec![3])]
        );
    }
}
