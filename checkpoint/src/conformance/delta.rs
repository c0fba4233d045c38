//! `delta_channel_history`: the parent-chain walk delta channels are rebuilt from.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::{DeltaChannelHistory, PruneStrategy, metadata};

/// A chain of `n` steps where every step bumps each channel's version; the channel gets a
/// stored value (its step number) at its snapshot steps and one write `(channel, step)`
/// against every other step (also at snapshot steps when `writes_on_snapshots`).
pub(crate) async fn delta_chain_multi(
    saver: &dyn CheckpointSaver,
    t: &str,
    ns: &str,
    n: i64,
    channels: &[(&str, &[i64])],
    writes_on_snapshots: bool,
) -> Result<Vec<CheckpointConfig>> {
    let mut parent = cfg(t, ns);
    let mut out = Vec::new();
    for step in 0..n {
        let mut cp = Checkpoint::new(step);
        let mut new_versions = ChannelVersions::new();
        for (ch, snapshots) in channels {
            let version = ChannelVersion::from(step as u64 + 1);
            cp.channel_versions
                .insert((*ch).to_owned(), version.clone());
            new_versions.insert((*ch).to_owned(), version);
            if snapshots.contains(&step) {
                cp.channel_values.insert((*ch).to_owned(), val(json!(step)));
            }
        }
        parent = saver
            .put(
                &parent,
                cp,
                meta(CheckpointSource::Loop, step),
                new_versions,
            )
            .await?;
        let writes: Vec<(String, SerializedValue)> = channels
            .iter()
            .filter(|(_, snapshots)| writes_on_snapshots || !snapshots.contains(&step))
            .map(|(ch, _)| ((*ch).to_owned(), val(json!(step))))
            .collect();
        saver.put_writes(&parent, writes, "task", "").await?;
        out.push(parent.clone());
    }
    Ok(out)
}

/// [`delta_chain_multi`] for one channel.
pub(crate) async fn delta_chain(
    saver: &dyn CheckpointSaver,
    t: &str,
    ns: &str,
    n: i64,
    snapshots: &[i64],
    writes_on_snapshots: bool,
    channel: &str,
) -> Result<Vec<CheckpointConfig>> {
    delta_chain_multi(
        saver,
        t,
        ns,
        n,
        &[(channel, snapshots)],
        writes_on_snapshots,
    )
    .await
}

fn decoded(h: &DeltaChannelHistory) -> (Vec<Value>, Option<Value>) {
    (
        h.writes.iter().map(|w| json_of(&w.value)).collect(),
        h.seed.as_ref().map(json_of),
    )
}

async fn history(
    saver: &dyn CheckpointSaver,
    at: &CheckpointConfig,
    channels: &[&str],
) -> Result<BTreeMap<String, (Vec<Value>, Option<Value>)>> {
    let channels = strings(channels);
    let got = saver.delta_channel_history(at, &channels).await?;
    assert_eq!(
        got.keys().cloned().collect::<Vec<_>>(),
        channels
            .iter()
            .cloned()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
    );
    // Read with the checkpoint, the channels it stores no value for have the same history.
    if let Some((tuple, with)) = saver.get_tuple_with_history(at, &channels).await? {
        let missing = crate::raw::unvalued_channels(&tuple, &channels);
        assert_eq!(with.keys().cloned().collect::<Vec<_>>(), missing);
        for channel in &missing {
            assert_eq!(
                with[channel], got[channel],
                "{channel} read with its checkpoint"
            );
        }
    }
    Ok(got.iter().map(|(k, h)| (k.clone(), decoded(h))).collect())
}

/// Ancestor writes come oldest first, from the seed on.
pub async fn delta_history_writes_oldest_first(saver: &dyn CheckpointSaver) -> Result<()> {
    let c = delta_chain(saver, &thread(), "", 5, &[0], false, "ch").await?;
    let h = history(saver, &c[4], &["ch"]).await?;
    assert_eq!(
        h["ch"],
        (vec![json!(1), json!(2), json!(3)], Some(json!(0)))
    );
    Ok(())
}

/// The seed is the nearest stored value.
pub async fn delta_history_seed_is_nearest_snapshot(saver: &dyn CheckpointSaver) -> Result<()> {
    let c = delta_chain(saver, &thread(), "", 6, &[0, 3], false, "ch").await?;
    let h = history(saver, &c[5], &["ch"]).await?;
    assert_eq!(h["ch"], (vec![json!(4)], Some(json!(3))));
    Ok(())
}

/// The target's own writes are pending for the next step, so excluded.
pub async fn delta_history_excludes_target_pending_writes(
    saver: &dyn CheckpointSaver,
) -> Result<()> {
    let c = delta_chain(saver, &thread(), "", 3, &[0], false, "ch").await?;
    saver
        .put_writes(&c[2], vec![("ch".into(), val(json!("late")))], "other", "")
        .await?;
    let h = history(saver, &c[2], &["ch"]).await?;
    assert_eq!(h["ch"], (vec![json!(1)], Some(json!(0))));
    Ok(())
}

/// Channels terminate independently.
pub async fn delta_history_multi_channel(saver: &dyn CheckpointSaver) -> Result<()> {
    let c = delta_chain_multi(saver, &thread(), "", 5, &[("a", &[1]), ("b", &[3])], true).await?;
    let h = history(saver, &c[4], &["a", "b"]).await?;
    assert_eq!(h["a"], (vec![json!(1), json!(2), json!(3)], Some(json!(1))));
    assert_eq!(h["b"], (vec![json!(3)], Some(json!(3))));
    Ok(())
}

/// No channels asked, no histories.
pub async fn delta_history_empty_channels(saver: &dyn CheckpointSaver) -> Result<()> {
    let c = delta_chain(saver, &thread(), "", 2, &[0], false, "ch").await?;
    assert!(saver.delta_channel_history(&c[1], &[]).await?.is_empty());
    Ok(())
}

/// Without any stored value the walk reaches the root and there is no seed.
pub async fn delta_history_walk_to_root_no_seed(saver: &dyn CheckpointSaver) -> Result<()> {
    let c = delta_chain(saver, &thread(), "", 4, &[], false, "ch").await?;
    let h = history(saver, &c[3], &["ch"]).await?;
    assert_eq!(h["ch"], (vec![json!(0), json!(1), json!(2)], None));
    Ok(())
}

/// A plain value (a thread migrated from a reducer channel) is a seed.
pub async fn delta_history_plain_value_as_seed(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let c0 = saver
        .put(
            &cfg(&t, ""),
            checkpoint(0, &[], &[("ch", 1)]),
            meta(CheckpointSource::Loop, 0),
            versions(&[("ch", 1)]),
        )
        .await?;
    saver
        .put_writes(&c0, vec![("ch".into(), val(json!(0)))], "task", "")
        .await?;
    let c1 = saver
        .put(
            &c0,
            checkpoint(1, &[("ch", json!([10, 20, 30]))], &[("ch", 2)]),
            meta(CheckpointSource::Loop, 1),
            versions(&[("ch", 2)]),
        )
        .await?;
    let c2 = saver
        .put(
            &c1,
            checkpoint(2, &[], &[("ch", 3)]),
            meta(CheckpointSource::Loop, 2),
            versions(&[("ch", 3)]),
        )
        .await?;
    saver
        .put_writes(&c2, vec![("ch".into(), val(json!(2)))], "task", "")
        .await?;
    let head = put_empty(saver, &c2, meta(CheckpointSource::Loop, 3)).await?;
    let h = history(saver, &head, &["ch"]).await?;
    assert_eq!(h["ch"], (vec![json!(2)], Some(json!([10, 20, 30]))));
    Ok(())
}

/// The seed ancestor's own writes are replayed; older ones are not.
pub async fn delta_history_seed_ancestor_own_writes_replayed(
    saver: &dyn CheckpointSaver,
) -> Result<()> {
    let t = thread();
    let w = |v: &str| vec![("ch".to_owned(), val(json!(v)))];
    let c0 = saver
        .put(
            &cfg(&t, ""),
            checkpoint(0, &[("ch", json!([10]))], &[("ch", 1)]),
            meta(CheckpointSource::Loop, 0),
            versions(&[("ch", 1)]),
        )
        .await?;
    saver.put_writes(&c0, w("before-seed"), "task", "").await?;
    let c1 = saver
        .put(
            &c0,
            checkpoint(1, &[("ch", json!([10, 20]))], &[("ch", 2)]),
            meta(CheckpointSource::Loop, 1),
            versions(&[("ch", 2)]),
        )
        .await?;
    saver.put_writes(&c1, w("at-seed"), "task", "").await?;
    let c2 = saver
        .put(
            &c1,
            checkpoint(2, &[], &[("ch", 3)]),
            meta(CheckpointSource::Loop, 2),
            versions(&[("ch", 3)]),
        )
        .await?;
    saver.put_writes(&c2, w("after-seed"), "task", "").await?;
    let head = saver
        .put(
            &c2,
            checkpoint(3, &[], &[("ch", 4)]),
            meta(CheckpointSource::Loop, 3),
            versions(&[("ch", 4)]),
        )
        .await?;
    saver.put_writes(&head, w("pending"), "task", "").await?;
    let h = history(saver, &head, &["ch"]).await?;
    assert_eq!(
        h["ch"],
        (
            vec![json!("at-seed"), json!("after-seed")],
            Some(json!([10, 20]))
        )
    );
    Ok(())
}

/// Writes of one super-step with equal (empty) task paths come in task id order, whatever the
/// arrival order.
pub async fn delta_history_orders_same_step_writes_by_task(
    saver: &dyn CheckpointSaver,
) -> Result<()> {
    let t = thread();
    let c0 = saver
        .put(
            &cfg(&t, ""),
            checkpoint(0, &[("ch", json!([0]))], &[("ch", 1)]),
            meta(CheckpointSource::Loop, 0),
            versions(&[("ch", 1)]),
        )
        .await?;
    let c1 = saver
        .put(
            &c0,
            checkpoint(1, &[], &[("ch", 2)]),
            meta(CheckpointSource::Loop, 1),
            versions(&[("ch", 2)]),
        )
        .await?;
    saver
        .put_writes(&c1, vec![("ch".into(), val(json!("b")))], "task-b", "")
        .await?;
    saver
        .put_writes(&c1, vec![("ch".into(), val(json!("a")))], "task-a", "")
        .await?;
    let head = put_empty(saver, &c1, meta(CheckpointSource::Loop, 2)).await?;
    let got = saver
        .delta_channel_history(&head, &strings(&["ch"]))
        .await?;
    let tasks: Vec<&str> = got["ch"]
        .writes
        .iter()
        .map(|w| w.task_id.as_str())
        .collect();
    assert_eq!(tasks, ["task-a", "task-b"]);
    Ok(())
}

/// Writes of one super-step come in `(task_path, task_id, idx)` order, the order the step
/// applied them (LangGraph's `writes_sort_key`), ancestor by ancestor, for every channel asked:
/// the path decides before the task id and paths compare as bytes.
pub async fn delta_history_orders_same_step_writes_by_task_path(
    saver: &dyn CheckpointSaver,
) -> Result<()> {
    let t = thread();
    let mut parent = saver
        .put(
            &cfg(&t, ""),
            checkpoint(
                0,
                &[("ch", json!([0])), ("other", json!([0]))],
                &[("ch", 1), ("other", 1)],
            ),
            meta(CheckpointSource::Loop, 0),
            versions(&[("ch", 1), ("other", 1)]),
        )
        .await?;
    // Per step, arrival order; ids sort the other way round from the paths.
    let steps: [&[(&str, &str)]; 2] = [
        &[
            ("task-a", "~__pregel_push, 0000000010, False"),
            ("task-b", "~__pregel_push, 0000000002, False"),
            ("task-c", "~__pregel_pull, alpha"),
            ("task-d", "~__pregel_pull, Zed"),
        ],
        &[
            ("task-a", "~__pregel_pull, zeta"),
            ("task-b", "~__pregel_pull, \u{e9}t\u{e9}"),
            ("task-c", "~__pregel_pull, node"),
            ("task-z", ""),
        ],
    ];
    for (step, tasks) in steps.iter().enumerate() {
        let version = step as u64 + 2;
        parent = saver
            .put(
                &parent,
                checkpoint(step as i64 + 1, &[], &[("ch", version), ("other", version)]),
                meta(CheckpointSource::Loop, step as i64 + 1),
                versions(&[("ch", version), ("other", version)]),
            )
            .await?;
        for (task, path) in tasks.iter() {
            let writes = vec![
                ("ch".into(), val(json!(format!("{step}:{task}:0")))),
                ("other".into(), val(json!(format!("{step}:{task}")))),
                ("ch".into(), val(json!(format!("{step}:{task}:1")))),
            ];
            saver.put_writes(&parent, writes, task, path).await?;
        }
    }
    let head = put_empty(saver, &parent, meta(CheckpointSource::Loop, 3)).await?;
    let h = history(saver, &head, &["ch", "other"]).await?;
    let in_order = ["0:task-d", "0:task-c", "0:task-b", "0:task-a"]
        .into_iter()
        .chain(["1:task-z", "1:task-c", "1:task-a", "1:task-b"]);
    let ch: Vec<Value> = in_order
        .clone()
        .flat_map(|t| [json!(format!("{t}:0")), json!(format!("{t}:1"))])
        .collect();
    let other: Vec<Value> = in_order.map(|t| json!(t)).collect();
    assert_eq!(h["ch"], (ch, Some(json!([0]))));
    assert_eq!(h["other"], (other, Some(json!([0]))));
    Ok(())
}

/// The walk follows parent links: a sibling fork with a newer id is ignored.
pub async fn delta_history_follows_parents_not_ids(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let c0 = saver
        .put(
            &cfg(&t, ""),
            checkpoint(0, &[("ch", json!(0))], &[("ch", 1)]),
            meta(CheckpointSource::Loop, 0),
            versions(&[("ch", 1)]),
        )
        .await?;
    let c1 = saver
        .put(
            &c0,
            checkpoint(1, &[], &[("ch", 2)]),
            meta(CheckpointSource::Loop, 1),
            versions(&[("ch", 2)]),
        )
        .await?;
    saver
        .put_writes(&c1, vec![("ch".into(), val(json!(1)))], "task", "")
        .await?;
    let fork = saver
        .put(
            &c0,
            checkpoint(1, &[], &[("ch", 2)]),
            meta(CheckpointSource::Fork, 1),
            versions(&[("ch", 2)]),
        )
        .await?;
    saver
        .put_writes(&fork, vec![("ch".into(), val(json!("fork")))], "task", "")
        .await?;
    let head = put_empty(saver, &c1, meta(CheckpointSource::Loop, 2)).await?;
    let h = history(saver, &head, &["ch"]).await?;
    assert_eq!(h["ch"], (vec![json!(1)], Some(json!(0))));
    Ok(())
}

/// Without a checkpoint id, the latest checkpoint is the target.
pub async fn delta_history_latest_when_no_id(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let c = delta_chain(saver, &t, "", 3, &[0], false, "ch").await?;
    let by_id = history(saver, &c[2], &["ch"]).await?;
    assert_eq!(history(saver, &cfg(&t, ""), &["ch"]).await?, by_id);
    Ok(())
}

/// An unknown target gives every channel an empty history.
pub async fn delta_history_unknown_target(saver: &dyn CheckpointSaver) -> Result<()> {
    let missing = cfg(&thread(), "").with_id(crate::checkpoint_id(0));
    let h = history(saver, &missing, &["a", "b"]).await?;
    assert!(h.values().all(|v| *v == (Vec::new(), None)));
    Ok(())
}

/// A put naming the checkpoint itself as its parent stores it without one: walks over parent
/// links (the delta history, `KeepLatest`) end there instead of looping.
pub async fn self_parent_is_no_parent(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let cp = checkpoint(0, &[], &[("ch", 1)]);
    let own = CheckpointConfig::of(&t, "", &cp.id);
    let m = meta(CheckpointSource::Loop, 0).with(metadata::DELTA_COUNTERS, json!({"ch": [1, 1]}));
    let stored = saver.put(&own, cp, m, versions(&[("ch", 1)])).await?;
    saver
        .put_writes(&stored, vec![("ch".into(), val(json!(0)))], "task", "")
        .await?;
    let tuple = saver.get_tuple(&stored).await?.expect("stored");
    assert_eq!(tuple.parent_config, None);
    let walked = tokio::time::timeout(Duration::from_secs(30), history(saver, &stored, &["ch"]))
        .await
        .expect("the delta walk of a self-parented checkpoint never ended")?;
    assert_eq!(walked["ch"], (vec![], None));
    if saver.capabilities().prune {
        let pruned = saver.prune(std::slice::from_ref(&t), PruneStrategy::KeepLatest);
        tokio::time::timeout(Duration::from_secs(30), pruned)
            .await
            .expect("KeepLatest on a self-parented checkpoint never ended")?;
        assert!(
            saver.get_tuple(&stored).await?.is_some(),
            "the latest is kept"
        );
    }
    Ok(())
}
