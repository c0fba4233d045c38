//! `delete_thread` and `delete_for_runs`.

use serde_json::json;

use super::*;
use crate::ListOptions;

async fn count(saver: &dyn CheckpointSaver, t: &str) -> Result<usize> {
    Ok(saver
        .list(Some(&CheckpointConfig::new(t)), &ListOptions::default())
        .await?
        .len())
}

/// Checkpoints are gone from `get_tuple` and `list`.
pub async fn delete_thread_removes_checkpoints(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    chain(saver, &t, "", 3).await?;
    saver.delete_thread(&t).await?;
    assert!(saver.get_tuple(&cfg(&t, "")).await?.is_none());
    assert_eq!(count(saver, &t).await?, 0);
    Ok(())
}

/// Writes are gone too: a re-put of the same id has none.
pub async fn delete_thread_removes_writes(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let c = put_empty(saver, &cfg(&t, ""), meta(CheckpointSource::Loop, 0)).await?;
    saver
        .put_writes(&c, vec![("ch".into(), val(json!(1)))], "task", "")
        .await?;
    saver.delete_thread(&t).await?;
    let again = saver
        .put(
            &cfg(&t, ""),
            Checkpoint {
                id: id_of(&c).to_owned(),
                ..Checkpoint::new(0)
            },
            meta(CheckpointSource::Loop, 0),
            Default::default(),
        )
        .await?;
    assert!(
        saver
            .get_tuple(&again)
            .await?
            .expect("re-put")
            .pending_writes
            .is_empty()
    );
    Ok(())
}

/// Every namespace of the thread is deleted.
pub async fn delete_thread_removes_all_namespaces(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    for ns in ["", "child:1", "child:2|grand:3"] {
        chain(saver, &t, ns, 2).await?;
    }
    saver.delete_thread(&t).await?;
    assert_eq!(count(saver, &t).await?, 0);
    assert!(saver.get_tuple(&cfg(&t, "child:1")).await?.is_none());
    Ok(())
}

/// Other threads are untouched.
pub async fn delete_thread_preserves_other_threads(saver: &dyn CheckpointSaver) -> Result<()> {
    let (t1, t2) = (thread(), thread());
    chain(saver, &t1, "", 2).await?;
    let kept = chain(saver, &t2, "", 2).await?;
    saver.delete_thread(&t1).await?;
    assert_eq!(
        saver.get_tuple(&cfg(&t2, "")).await?.expect("kept").config,
        kept[1]
    );
    assert_eq!(count(saver, &t2).await?, 2);
    Ok(())
}

/// Deleting an unknown thread is a no-op.
pub async fn delete_thread_nonexistent_is_noop(saver: &dyn CheckpointSaver) -> Result<()> {
    saver.delete_thread(&thread()).await
}

async fn runs_fixture(saver: &dyn CheckpointSaver, t: &str) -> Result<Vec<CheckpointConfig>> {
    let mut parent = cfg(t, "");
    let mut out = Vec::new();
    for (step, run) in ["run-a", "run-a", "run-b", "run-c"].iter().enumerate() {
        parent = put_empty(saver, &parent, run_meta(step as i64, &format!("{t}-{run}"))).await?;
        out.push(parent.clone());
    }
    Ok(out)
}

/// Checkpoints of one run are removed; others stay.
pub async fn delete_for_runs_single(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().delete_for_runs {
        return Ok(());
    }
    let t = thread();
    let c = runs_fixture(saver, &t).await?;
    saver.delete_for_runs(&[format!("{t}-run-a")]).await?;
    let left = saver
        .list(Some(&CheckpointConfig::new(&t)), &ListOptions::default())
        .await?;
    assert_eq!(ids(&left), [id_of(&c[3]), id_of(&c[2])]);
    Ok(())
}

/// Several runs at once.
pub async fn delete_for_runs_multiple(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().delete_for_runs {
        return Ok(());
    }
    let t = thread();
    let c = runs_fixture(saver, &t).await?;
    saver
        .delete_for_runs(&[format!("{t}-run-a"), format!("{t}-run-c")])
        .await?;
    let left = saver
        .list(Some(&CheckpointConfig::new(&t)), &ListOptions::default())
        .await?;
    assert_eq!(ids(&left), [id_of(&c[2])]);
    Ok(())
}

/// Runs not named, on other threads too, are untouched.
pub async fn delete_for_runs_preserves_other_runs(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().delete_for_runs {
        return Ok(());
    }
    let (t1, t2) = (thread(), thread());
    runs_fixture(saver, &t1).await?;
    runs_fixture(saver, &t2).await?;
    saver.delete_for_runs(&[format!("{t1}-run-b")]).await?;
    assert_eq!(count(saver, &t1).await?, 3);
    assert_eq!(count(saver, &t2).await?, 4);
    Ok(())
}

/// Writes of deleted checkpoints go with them.
pub async fn delete_for_runs_removes_writes(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().delete_for_runs {
        return Ok(());
    }
    let t = thread();
    let c = runs_fixture(saver, &t).await?;
    saver
        .put_writes(&c[0], vec![("ch".into(), val(json!(1)))], "task", "")
        .await?;
    saver.delete_for_runs(&[format!("{t}-run-a")]).await?;
    assert!(saver.get_tuple(&c[0]).await?.is_none());
    let again = saver
        .put(
            &cfg(&t, ""),
            Checkpoint {
                id: id_of(&c[0]).to_owned(),
                ..Checkpoint::new(0)
            },
            meta(CheckpointSource::Loop, 0),
            Default::default(),
        )
        .await?;
    assert!(
        saver
            .get_tuple(&again)
            .await?
            .expect("re-put")
            .pending_writes
            .is_empty()
    );
    Ok(())
}

/// An empty list deletes nothing.
pub async fn delete_for_runs_empty_list_noop(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().delete_for_runs {
        return Ok(());
    }
    let t = thread();
    runs_fixture(saver, &t).await?;
    saver.delete_for_runs(&[]).await?;
    assert_eq!(count(saver, &t).await?, 4);
    Ok(())
}

/// Unknown run ids delete nothing.
pub async fn delete_for_runs_unknown_ids_noop(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().delete_for_runs {
        return Ok(());
    }
    let t = thread();
    runs_fixture(saver, &t).await?;
    saver.delete_for_runs(&[format!("{t}-run-zzz")]).await?;
    assert_eq!(count(saver, &t).await?, 4);
    Ok(())
}

/// One run spanning namespaces is removed everywhere.
pub async fn delete_for_runs_across_namespaces(saver: &dyn CheckpointSaver) -> Result<()> {
    if !saver.capabilities().delete_for_runs {
        return Ok(());
    }
    let t = thread();
    let run = format!("{t}-run");
    put_empty(saver, &cfg(&t, ""), run_meta(0, &run)).await?;
    put_empty(saver, &cfg(&t, "child:1"), run_meta(0, &run)).await?;
    let other = put_empty(saver, &cfg(&t, "child:1"), run_meta(1, "other")).await?;
    saver.delete_for_runs(&[run]).await?;
    let left = saver
        .list(Some(&CheckpointConfig::new(&t)), &ListOptions::default())
        .await?;
    assert_eq!(ids(&left), [id_of(&other)]);
    Ok(())
}
