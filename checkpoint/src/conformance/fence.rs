//! Fenced saves: a run proves in every write that its lease still holds the thread.
//!
//! Each case passes without running on a backend whose `capabilities()` does not declare
//! `leases`. A "paused" run is a lease left to lapse while another run takes the thread.

use std::time::Duration;

use serde_json::json;

use super::*;
use crate::{Error, Lease, Save};

const LONG: Duration = Duration::from_secs(60);
const SHORT: Duration = Duration::from_millis(200);
const PAST_SHORT: Duration = Duration::from_millis(300);

/// A put of a one-channel checkpoint for `step` under `parent`.
fn put_save(parent: &CheckpointConfig, step: i64, value: Value) -> (Save, CheckpointConfig) {
    let cp = checkpoint(step, &[("x", value)], &[("x", step as u64 + 1)]);
    let stored = CheckpointConfig::of(&parent.thread_id, parent.ns(), &cp.id);
    let save = Save::Put {
        config: parent.clone(),
        checkpoint: cp,
        metadata: meta(CheckpointSource::Loop, step),
        new_versions: versions(&[("x", step as u64 + 1)]),
    };
    (save, stored)
}

fn writes_save(config: &CheckpointConfig, task: &str, value: Value) -> Save {
    Save::Writes {
        config: config.clone(),
        writes: vec![("x".to_owned(), val(value))],
        task_id: task.to_owned(),
        task_path: String::new(),
    }
}

fn is_conflict(r: &Result<()>) -> bool {
    matches!(r, Err(Error::Conflict(_)))
}

/// While the lease holds, fenced puts and writes land like `save_batch`'s.
pub async fn fenced_save_writes_while_held(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().leases {
        return Ok(());
    }
    let t = thread();
    let lease = saver.acquire_lease(&t, LONG).await?;
    let (put, stored) = put_save(&cfg(&t, ""), 0, json!("first"));
    let writes = writes_save(&stored, "task-1", json!("pending"));
    saver.save_fenced(&lease, vec![put, writes]).await?;
    let (child, child_cfg) = put_save(&stored, 1, json!("second"));
    saver.save_fenced(&lease, vec![child]).await?;
    let latest = saver
        .get_tuple(&cfg(&t, ""))
        .await?
        .expect("fenced put stored");
    assert_eq!(latest.config, child_cfg);
    assert_eq!(values_of(&latest)["x"], json!("second"));
    let first = saver.get_tuple(&stored).await?.expect("first put stored");
    assert_eq!(
        writes_of(&first),
        vec![("task-1".to_owned(), "x".to_owned(), json!("pending"))]
    );
    // A subgraph namespace of the same thread is fenced by the same lease.
    let (sub, _) = put_save(&cfg(&t, "child:1"), 0, json!("sub"));
    saver.save_fenced(&lease, vec![sub]).await?;
    assert!(saver.get_tuple(&cfg(&t, "child:1")).await?.is_some());
    Ok(())
}

/// A run paused past its lease while another run took the thread writes nothing when it
/// wakes: its next fenced save is a `Conflict`, puts and writes alike, and the thread holds
/// exactly what the new holder wrote.
pub async fn fenced_save_refused_after_takeover(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().leases {
        return Ok(());
    }
    let t = thread();
    let paused = saver.acquire_lease(&t, SHORT).await?;
    let (put, base) = put_save(&cfg(&t, ""), 0, json!("base"));
    saver.save_fenced(&paused, vec![put]).await?;
    tokio::time::sleep(PAST_SHORT).await;
    let next = saver.acquire_lease(&t, LONG).await?;
    let (theirs, theirs_cfg) = put_save(&base, 1, json!("theirs"));
    saver.save_fenced(&next, vec![theirs]).await?;

    // The paused run wakes and carries on from where it was.
    let (stale, stale_cfg) = put_save(&base, 1, json!("stale"));
    let stale_writes = writes_save(&base, "stale-task", json!("stale write"));
    let woke = saver
        .save_fenced(&paused, vec![stale_writes.clone(), stale])
        .await;
    assert!(is_conflict(&woke), "write after takeover: {woke:?}");
    assert!(is_conflict(
        &saver.save_fenced(&paused, vec![stale_writes]).await
    ));
    assert!(
        saver.get_tuple(&stale_cfg).await?.is_none(),
        "stale put stored"
    );
    let base_tuple = saver.get_tuple(&base).await?.expect("base kept");
    assert!(base_tuple.pending_writes.is_empty(), "stale writes stored");
    let latest = saver.get_tuple(&cfg(&t, "")).await?.expect("thread kept");
    assert_eq!(latest.config, theirs_cfg);
    assert_eq!(values_of(&latest)["x"], json!("theirs"));
    assert_eq!(
        saver
            .list(Some(&cfg(&t, "")), &Default::default())
            .await?
            .len(),
        2
    );
    // The new holder goes on writing.
    let (more, _) = put_save(&theirs_cfg, 2, json!("more"));
    saver.save_fenced(&next, vec![more]).await?;
    Ok(())
}

/// A released lease fences nothing: writes under it are refused.
pub async fn fenced_save_refused_after_release(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().leases {
        return Ok(());
    }
    let t = thread();
    let lease = saver.acquire_lease(&t, LONG).await?;
    saver.release_lease(&lease).await?;
    let (put, stored) = put_save(&cfg(&t, ""), 0, json!("late"));
    assert!(is_conflict(&saver.save_fenced(&lease, vec![put]).await));
    assert!(saver.get_tuple(&stored).await?.is_none());
    // A lease nobody ever held (a made-up token) fences nothing either.
    let forged = Lease {
        token: Lease::new_token(),
        ..lease
    };
    let (put, _) = put_save(&cfg(&t, ""), 0, json!("forged"));
    assert!(is_conflict(&saver.save_fenced(&forged, vec![put]).await));
    assert!(saver.get_tuple(&cfg(&t, "")).await?.is_none());
    Ok(())
}

/// A lease that lapsed but that nobody took over still fences its writes: nobody else can
/// have written in between.
pub async fn fenced_save_after_lapse_without_takeover(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().leases {
        return Ok(());
    }
    let t = thread();
    let lease = saver.acquire_lease(&t, SHORT).await?;
    tokio::time::sleep(PAST_SHORT).await;
    let (put, stored) = put_save(&cfg(&t, ""), 0, json!("late but alone"));
    saver.save_fenced(&lease, vec![put]).await?;
    assert!(saver.get_tuple(&stored).await?.is_some());
    Ok(())
}

/// `put_unleased` stores nothing while a live lease holds the thread; once the thread is
/// free, or its lease lapsed (taken over: the old holder's next fenced write is refused), it
/// stores as `put` does and leaves no live lease behind.
pub async fn put_unleased_refused_while_leased(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let put = |step: i64| {
        let cp = checkpoint(step, &[("x", json!(step))], &[("x", step as u64 + 1)]);
        let stored = CheckpointConfig::of(&t, "", &cp.id);
        let metadata = meta(CheckpointSource::Update, step);
        (cp, metadata, versions(&[("x", step as u64 + 1)]), stored)
    };
    let (cp, metadata, new_versions, first) = put(0);
    let stored = saver
        .put_unleased(&cfg(&t, ""), cp, metadata, new_versions)
        .await?;
    assert_eq!(stored.as_ref(), Some(&first));
    if !saver.capabilities().leases {
        return Ok(());
    }
    let held = saver.acquire_lease(&t, LONG).await?;
    let (cp, metadata, new_versions, refused) = put(1);
    let stored = saver
        .put_unleased(&first, cp, metadata, new_versions)
        .await?;
    assert_eq!(stored, None);
    assert!(saver.get_tuple(&refused).await?.is_none());
    saver.release_lease(&held).await?;

    let lapsed = saver.acquire_lease(&t, SHORT).await?;
    tokio::time::sleep(PAST_SHORT).await;
    let (cp, metadata, new_versions, second) = put(2);
    let stored = saver
        .put_unleased(&first, cp, metadata, new_versions)
        .await?;
    assert_eq!(stored.as_ref(), Some(&second));
    assert_eq!(
        values_of(&saver.get_tuple(&second).await?.expect("stored"))["x"],
        json!(2)
    );
    let (late, late_cfg) = put_save(&second, 3, json!("late"));
    assert!(is_conflict(&saver.save_fenced(&lapsed, vec![late]).await));
    assert!(saver.get_tuple(&late_cfg).await?.is_none());
    let next = saver.acquire_lease(&t, LONG).await?;
    saver.release_lease(&next).await?;
    Ok(())
}

/// A save for another thread cannot ride on a lease: `InvalidConfig`, and nothing of the
/// batch is written.
pub async fn fenced_save_rejects_other_thread(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().leases {
        return Ok(());
    }
    let (t, other) = (thread(), thread());
    let lease = saver.acquire_lease(&t, LONG).await?;
    let (mine, mine_cfg) = put_save(&cfg(&t, ""), 0, json!("mine"));
    let (theirs, _) = put_save(&cfg(&other, ""), 0, json!("theirs"));
    let r = saver.save_fenced(&lease, vec![mine, theirs]).await;
    assert!(matches!(r, Err(Error::InvalidConfig(_))), "{r:?}");
    assert!(saver.get_tuple(&mine_cfg).await?.is_none());
    assert!(saver.get_tuple(&cfg(&other, "")).await?.is_none());
    Ok(())
}

/// A fenced put continuing a thread that another writer (one without a lease, as a Python
/// LangGraph process) continued meanwhile is a `Conflict` and writes nothing, rather than
/// forking the thread silently; explicit branches (`fork`, `update`) and re-puts of the
/// newest checkpoint still land.
pub async fn fenced_put_refused_when_another_writer_moved_the_head(
    saver: &dyn CheckpointSaver,
) -> Result<()> {
    if !saver.capabilities().leases {
        return Ok(());
    }
    let t = thread();
    let lease = saver.acquire_lease(&t, LONG).await?;
    for ns in ["", "child:1"] {
        let (first, first_cfg) = put_save(&cfg(&t, ns), 0, json!("first"));
        saver.save_fenced(&lease, vec![first]).await?;
        let (second, second_cfg) = put_save(&first_cfg, 1, json!("second"));
        saver.save_fenced(&lease, vec![second]).await?;

        // A writer that takes no lease continues the thread from `second`.
        let foreign = saver
            .put(
                &second_cfg,
                checkpoint(2, &[("x", json!("foreign"))], &[("x", 3)]),
                meta(CheckpointSource::Loop, 2),
                versions(&[("x", 3)]),
            )
            .await?;

        // The run still believes `second` is the head: refused, nothing written.
        let (stale, stale_cfg) = put_save(&second_cfg, 2, json!("stale"));
        let writes = writes_save(&second_cfg, "task-1", json!("pending"));
        let refused = saver.save_fenced(&lease, vec![writes, stale]).await;
        assert!(is_conflict(&refused), "{refused:?}");
        assert!(saver.get_tuple(&stale_cfg).await?.is_none());
        let second = saver.get_tuple(&second_cfg).await?.expect("second");
        assert!(writes_of(&second).is_empty(), "{:?}", writes_of(&second));
        let latest = saver.get_tuple(&cfg(&t, ns)).await?.expect("latest");
        assert_eq!(latest.config, foreign);

        // Continuing from the real head lands, and so does re-putting it.
        let (next, next_cfg) = put_save(&foreign, 3, json!("next"));
        let Save::Put { checkpoint: cp, .. } = &next else {
            unreachable!("put_save makes puts")
        };
        let again = Save::Put {
            config: foreign.clone(),
            checkpoint: cp.clone(),
            metadata: meta(CheckpointSource::Loop, 3),
            new_versions: versions(&[("x", 4)]),
        };
        saver.save_fenced(&lease, vec![next]).await?;
        saver.save_fenced(&lease, vec![again]).await?;
        assert_eq!(
            saver.get_tuple(&cfg(&t, ns)).await?.expect("latest").config,
            next_cfg
        );

        // An explicit branch from an old checkpoint is not a lost race.
        for source in [CheckpointSource::Fork, CheckpointSource::Update] {
            let cp = checkpoint(1, &[("x", json!("branch"))], &[("x", 9)]);
            let branch = CheckpointConfig::of(&t, ns, &cp.id);
            let save = Save::Put {
                config: first_cfg.clone(),
                checkpoint: cp,
                metadata: meta(source, 1),
                new_versions: versions(&[("x", 9)]),
            };
            saver.save_fenced(&lease, vec![save]).await?;
            assert!(saver.get_tuple(&branch).await?.is_some());
        }
    }
    Ok(())
}
