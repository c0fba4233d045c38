//! `copy_thread`, `prune`, and the capability declaration.

use crate::metadata;
use serde_json::json;

use super::*;
use crate::{Error, Lease, ListOptions, PruneStrategy};

/// The ttl of the leases the capability check claims.
const LEASE_TTL: std::time::Duration = std::time::Duration::from_secs(60);

async fn all(saver: &dyn CheckpointSaver, t: &str) -> Result<Vec<CheckpointTuple>> {
    saver
        .list(Some(&CheckpointConfig::new(t)), &ListOptions::default())
        .await
}

/// A thread with values that change, a child namespace and pending writes.
async fn source_thread(saver: &dyn CheckpointSaver, t: &str) -> Result<Vec<CheckpointConfig>> {
    let mut parent = cfg(t, "");
    let mut out = Vec::new();
    for step in 0..3i64 {
        let v = step as u64 + 1;
        let cp = checkpoint(
            step,
            &[("count", json!(step)), ("fixed", json!("same"))],
            &[("count", v), ("fixed", 1)],
        );
        let new = if step == 0 {
            versions(&[("count", v), ("fixed", 1)])
        } else {
            versions(&[("count", v)])
        };
        let m = run_meta(step, "run").with("label", format!("step-{step}"));
        parent = saver.put(&parent, cp, m, new).await?;
        saver
            .put_writes(
                &parent,
                vec![("count".into(), val(json!(step + 10)))],
                "task",
                "p",
            )
            .await?;
        out.push(parent.clone());
    }
    out.push(put_empty(saver, &cfg(t, "child:1"), meta(CheckpointSource::Loop, 0)).await?);
    Ok(out)
}

/// Compares two threads' tuples field by field, configs aside from the thread id.
fn assert_same_history(a: &[CheckpointTuple], b: &[CheckpointTuple], b_thread: &str) {
    assert_eq!(a.len(), b.len(), "checkpoint counts differ");
    for (x, y) in a.iter().zip(b) {
        let mut moved = x.clone();
        moved.config.thread_id = b_thread.to_owned();
        if let Some(p) = &mut moved.parent_config {
            p.thread_id = b_thread.to_owned();
        }
        assert_eq!(&moved, y);
    }
}

/// The source's checkpoints appear on the target.
pub async fn copy_thread_basic(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().copy_thread {
        return Ok(());
    }
    let (s, d) = (thread(), thread());
    source_thread(saver, &s).await?;
    saver.copy_thread(&s, &d).await?;
    assert_eq!(all(saver, &d).await?.len(), 4);
    Ok(())
}

/// Every checkpoint is copied with identical channel values.
pub async fn copy_thread_all_checkpoints(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().copy_thread {
        return Ok(());
    }
    let (s, d) = (thread(), thread());
    let configs = source_thread(saver, &s).await?;
    saver.copy_thread(&s, &d).await?;
    for c in &configs {
        let src = saver.get_tuple(c).await?.expect("source");
        let dst = saver
            .get_tuple(&CheckpointConfig {
                thread_id: d.clone(),
                ..c.clone()
            })
            .await?
            .expect("copied");
        assert_eq!(values_of(&src), values_of(&dst));
    }
    Ok(())
}

/// Metadata is identical.
pub async fn copy_thread_metadata(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().copy_thread {
        return Ok(());
    }
    let (s, d) = (thread(), thread());
    source_thread(saver, &s).await?;
    saver.copy_thread(&s, &d).await?;
    let a: Vec<_> = all(saver, &s)
        .await?
        .into_iter()
        .map(|t| t.metadata)
        .collect();
    let b: Vec<_> = all(saver, &d)
        .await?
        .into_iter()
        .map(|t| t.metadata)
        .collect();
    assert_eq!(a, b);
    Ok(())
}

/// Root and child namespaces are both copied.
pub async fn copy_thread_namespaces(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().copy_thread {
        return Ok(());
    }
    let (s, d) = (thread(), thread());
    source_thread(saver, &s).await?;
    saver.copy_thread(&s, &d).await?;
    assert_eq!(
        saver
            .list(Some(&cfg(&d, "")), &ListOptions::default())
            .await?
            .len(),
        3
    );
    assert_eq!(
        saver
            .list(Some(&cfg(&d, "child:1")), &ListOptions::default())
            .await?
            .len(),
        1
    );
    Ok(())
}

/// Pending writes are copied.
pub async fn copy_thread_pending_writes(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().copy_thread {
        return Ok(());
    }
    let (s, d) = (thread(), thread());
    source_thread(saver, &s).await?;
    saver.copy_thread(&s, &d).await?;
    let latest = saver.get_tuple(&cfg(&d, "")).await?.expect("copied");
    assert_eq!(
        writes_of(&latest),
        [("task".into(), "count".into(), json!(12))]
    );
    Ok(())
}

/// Ids (and so ordering) are preserved.
pub async fn copy_thread_ordering(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().copy_thread {
        return Ok(());
    }
    let (s, d) = (thread(), thread());
    source_thread(saver, &s).await?;
    saver.copy_thread(&s, &d).await?;
    assert_eq!(ids(&all(saver, &s).await?), ids(&all(saver, &d).await?));
    Ok(())
}

/// The source is unchanged.
pub async fn copy_thread_source_unchanged(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().copy_thread {
        return Ok(());
    }
    let (s, d) = (thread(), thread());
    source_thread(saver, &s).await?;
    let before = all(saver, &s).await?;
    saver.copy_thread(&s, &d).await?;
    assert_eq!(before, all(saver, &s).await?);
    Ok(())
}

/// Copying an unknown thread leaves the target empty.
pub async fn copy_thread_nonexistent_source(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().copy_thread {
        return Ok(());
    }
    let d = thread();
    saver.copy_thread(&thread(), &d).await?;
    assert!(all(saver, &d).await?.is_empty());
    Ok(())
}

/// Copying onto a thread that has checkpoints is a `Conflict`, and changes nothing.
pub async fn copy_thread_onto_thread_with_checkpoints_conflicts(
    saver: &dyn CheckpointSaver,
) -> Result<()> {
    if !saver.capabilities().copy_thread {
        return Ok(());
    }
    let (s, d) = (thread(), thread());
    source_thread(saver, &s).await?;
    let existing = chain(saver, &d, "", 1).await?;
    let err = saver.copy_thread(&s, &d).await;
    assert!(matches!(err, Err(Error::Conflict(_))), "{err:?}");
    assert_eq!(ids(&all(saver, &d).await?), [id_of(&existing[0])]);
    Ok(())
}

/// A 1,000-checkpoint thread with changing values and writes copies exactly.
pub async fn copy_thread_1000_checkpoints_exact(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().copy_thread {
        return Ok(());
    }
    let (s, d) = (thread(), thread());
    let mut parent = cfg(&s, "");
    for step in 0..1000i64 {
        let v = step as u64 / 3 + 1;
        let cp = checkpoint(
            step,
            &[("slow", json!(v)), ("step", json!(step))],
            &[("slow", v), ("step", step as u64 + 1)],
        );
        let mut new = versions(&[("step", step as u64 + 1)]);
        if step % 3 == 0 {
            new.insert("slow".into(), crate::ChannelVersion::from(v));
        }
        parent = saver
            .put(&parent, cp, meta(CheckpointSource::Loop, step), new)
            .await?;
        if step % 7 == 0 {
            saver
                .put_writes(&parent, vec![("step".into(), val(json!(step)))], "t", "")
                .await?;
        }
    }
    saver.copy_thread(&s, &d).await?;
    let (a, b) = (all(saver, &s).await?, all(saver, &d).await?);
    assert_eq!(a.len(), 1000);
    assert_same_history(&a, &b, &d);
    Ok(())
}

/// `KeepLatest` on one thread keeps only its newest checkpoint.
pub async fn prune_keep_latest_single_thread(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().prune {
        return Ok(());
    }
    let t = thread();
    let c = chain(saver, &t, "", 4).await?;
    saver
        .prune(std::slice::from_ref(&t), PruneStrategy::KeepLatest)
        .await?;
    assert_eq!(ids(&all(saver, &t).await?), [id_of(&c[3])]);
    Ok(())
}

/// Each pruned thread keeps its own newest.
pub async fn prune_keep_latest_multiple_threads(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().prune {
        return Ok(());
    }
    let (t1, t2) = (thread(), thread());
    let a = chain(saver, &t1, "", 3).await?;
    let b = chain(saver, &t2, "", 2).await?;
    saver
        .prune(&[t1.clone(), t2.clone()], PruneStrategy::KeepLatest)
        .await?;
    assert_eq!(ids(&all(saver, &t1).await?), [id_of(&a[2])]);
    assert_eq!(ids(&all(saver, &t2).await?), [id_of(&b[1])]);
    Ok(())
}

/// Each namespace keeps its newest.
pub async fn prune_keep_latest_per_namespace(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().prune {
        return Ok(());
    }
    let t = thread();
    let r = chain(saver, &t, "", 3).await?;
    let c = chain(saver, &t, "child:1", 3).await?;
    saver
        .prune(std::slice::from_ref(&t), PruneStrategy::KeepLatest)
        .await?;
    let mut expected = vec![id_of(&r[2]).to_owned(), id_of(&c[2]).to_owned()];
    expected.sort_by(|a, b| b.cmp(a));
    assert_eq!(ids(&all(saver, &t).await?), expected);
    Ok(())
}

/// The kept checkpoint keeps its writes and values.
pub async fn prune_keep_latest_keeps_writes(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().prune {
        return Ok(());
    }
    let t = thread();
    let c = source_thread(saver, &t).await?;
    let before = saver.get_tuple(&c[2]).await?.expect("latest root");
    saver
        .prune(std::slice::from_ref(&t), PruneStrategy::KeepLatest)
        .await?;
    assert_eq!(saver.get_tuple(&c[2]).await?.expect("kept"), before);
    assert!(saver.get_tuple(&c[0]).await?.is_none());
    Ok(())
}

/// `Delete` removes everything of the thread.
pub async fn prune_delete_removes_all(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().prune {
        return Ok(());
    }
    let t = thread();
    source_thread(saver, &t).await?;
    saver
        .prune(std::slice::from_ref(&t), PruneStrategy::Delete)
        .await?;
    assert!(all(saver, &t).await?.is_empty());
    Ok(())
}

/// Threads not named are untouched.
pub async fn prune_preserves_other_threads(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().prune {
        return Ok(());
    }
    let (t1, t2) = (thread(), thread());
    chain(saver, &t1, "", 3).await?;
    chain(saver, &t2, "", 3).await?;
    let before = ids(&all(saver, &t2).await?);
    saver.prune(&[t1], PruneStrategy::KeepLatest).await?;
    assert_eq!(ids(&all(saver, &t2).await?), before);
    Ok(())
}

/// An empty list prunes nothing.
pub async fn prune_empty_list_noop(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().prune {
        return Ok(());
    }
    let t = thread();
    chain(saver, &t, "", 3).await?;
    saver.prune(&[], PruneStrategy::Delete).await?;
    assert_eq!(all(saver, &t).await?.len(), 3);
    Ok(())
}

/// Unknown threads are a no-op.
pub async fn prune_unknown_thread_noop(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().prune {
        return Ok(());
    }
    saver.prune(&[thread()], PruneStrategy::KeepLatest).await?;
    saver.prune(&[thread()], PruneStrategy::Delete).await
}

/// `KeepLatest` keeps the ancestors a delta channel (named in the latest metadata's
/// `counters_since_delta_snapshot`) needs back to its seed, and nothing older.
pub async fn prune_keep_latest_is_delta_safe(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().prune {
        return Ok(());
    }
    let t = thread();
    let configs = super::delta::delta_chain(saver, &t, "", 9, &[0, 5], false, "ch").await?;
    let head = configs.last().expect("chain").clone();
    // Re-put the head with the delta counters the runtime records.
    let tuple = saver.get_tuple(&head).await?.expect("head");
    let m = tuple
        .metadata
        .clone()
        .with(metadata::DELTA_COUNTERS, json!({"ch": [3, 3]}));
    saver
        .put(&head, tuple.checkpoint.clone(), m, Default::default())
        .await?;
    let channels = vec!["ch".to_owned()];
    let history = saver.delta_channel_history(&head, &channels).await?;
    saver
        .prune(std::slice::from_ref(&t), PruneStrategy::KeepLatest)
        .await?;
    assert_eq!(
        saver.delta_channel_history(&head, &channels).await?,
        history
    );
    let kept = ids(&all(saver, &t).await?);
    let expected: Vec<String> = configs[5..]
        .iter()
        .rev()
        .map(|c| id_of(c).to_owned())
        .collect();
    assert_eq!(kept, expected);
    Ok(())
}

/// Every optional operation not declared in `capabilities()` returns `Unsupported`.
pub async fn optional_operations_match_capabilities(saver: &dyn CheckpointSaver) -> Result<()> {
    let caps = saver.capabilities();
    let unsupported = |r: Result<()>| matches!(r, Err(Error::Unsupported { .. }));
    if !caps.delete_for_runs {
        assert!(unsupported(saver.delete_for_runs(&[thread()]).await));
    }
    if !caps.copy_thread {
        assert!(unsupported(saver.copy_thread(&thread(), &thread()).await));
    }
    if !caps.prune {
        assert!(unsupported(
            saver.prune(&[thread()], PruneStrategy::Delete).await
        ));
    }
    if !caps.leases {
        let claimed = saver.acquire_lease(&thread(), LEASE_TTL).await;
        assert!(matches!(claimed, Err(Error::Unsupported { .. })));
        let lease = Lease {
            thread_id: thread(),
            token: Lease::new_token(),
            expires_at: std::time::SystemTime::now(),
        };
        assert!(matches!(
            saver.renew_lease(&lease, LEASE_TTL).await,
            Err(Error::Unsupported { .. })
        ));
        assert!(unsupported(saver.release_lease(&lease).await));
    }
    // Declared ones must not answer `Unsupported`.
    if caps.delete_for_runs {
        saver.delete_for_runs(&[thread()]).await?;
    }
    if caps.copy_thread {
        saver.copy_thread(&thread(), &thread()).await?;
    }
    if caps.prune {
        saver.prune(&[thread()], PruneStrategy::KeepLatest).await?;
    }
    if caps.leases {
        let lease = saver.acquire_lease(&thread(), LEASE_TTL).await?;
        let lease = saver.renew_lease(&lease, LEASE_TTL).await?;
        saver.release_lease(&lease).await?;
    }
    Ok(())
}

/// `save_batch` applies puts and writes in order, exactly as the single calls would: a
/// chain of checkpoints with parents, values joined by version, and pending writes on the
/// checkpoint they name.
pub async fn save_batch_applies_in_order(saver: &dyn CheckpointSaver) -> Result<()> {
    use crate::Save;
    let t = thread();
    let first = checkpoint(0, &[("a", json!(1))], &[("a", 1)]);
    let second = checkpoint(1, &[("b", json!(2))], &[("a", 1), ("b", 2)]);
    let (first_id, second_id) = (first.id.clone(), second.id.clone());
    let first_config = CheckpointConfig::of(&t, "", &first_id);
    saver
        .save_batch(vec![
            Save::Put {
                config: cfg(&t, ""),
                checkpoint: first,
                metadata: meta(CheckpointSource::Loop, 0),
                new_versions: versions(&[("a", 1)]),
            },
            Save::Writes {
                config: first_config.clone(),
                writes: vec![("b".into(), val(json!("pending")))],
                task_id: "task".into(),
                task_path: String::new(),
            },
            Save::Put {
                config: first_config.clone(),
                checkpoint: second,
                metadata: meta(CheckpointSource::Loop, 1),
                new_versions: versions(&[("b", 2)]),
            },
        ])
        .await?;
    let latest = saver.get_tuple(&cfg(&t, "")).await?.expect("stored");
    assert_eq!(latest.checkpoint.id, second_id);
    assert_eq!(latest.parent_config, Some(first_config.clone()));
    assert_eq!(
        values_of(&latest),
        [("a".into(), json!(1)), ("b".into(), json!(2))].into()
    );
    let first = saver.get_tuple(&first_config).await?.expect("stored");
    assert_eq!(
        writes_of(&first),
        [("task".into(), "b".into(), json!("pending"))]
    );
    // An empty batch is a no-op.
    saver.save_batch(Vec::new()).await?;
    Ok(())
}
