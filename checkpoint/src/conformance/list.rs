//! `list`: scopes, filters, ordering, `before`, `limit`, and the generated matrix.

use serde_json::json;

use super::*;
use crate::ListOptions;

/// Four chained checkpoints: sources input/loop/input/loop, steps 0..3.
async fn fixture(saver: &dyn CheckpointSaver, t: &str) -> Result<Vec<CheckpointConfig>> {
    let sources = [
        CheckpointSource::Input,
        CheckpointSource::Loop,
        CheckpointSource::Input,
        CheckpointSource::Loop,
    ];
    let mut parent = cfg(t, "");
    let mut out = Vec::new();
    for (step, source) in sources.into_iter().enumerate() {
        let m = meta(source, step as i64).with("score", json!(step * 14));
        parent = put_empty(saver, &parent, m.with_run_id(format!("run-{step}"))).await?;
        out.push(parent.clone());
    }
    Ok(out)
}

async fn list_of(
    saver: &dyn CheckpointSaver,
    t: &str,
    options: ListOptions,
) -> Result<Vec<CheckpointTuple>> {
    saver.list(Some(&CheckpointConfig::new(t)), &options).await
}

/// Every checkpoint of the thread is listed.
pub async fn list_all(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    fixture(saver, &t).await?;
    assert_eq!(list_of(saver, &t, ListOptions::default()).await?.len(), 4);
    Ok(())
}

/// An unknown thread lists nothing; a real one lists its own.
pub async fn list_by_thread(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    fixture(saver, &t).await?;
    assert!(
        list_of(saver, &thread(), ListOptions::default())
            .await?
            .is_empty()
    );
    assert_eq!(list_of(saver, &t, ListOptions::default()).await?.len(), 4);
    Ok(())
}

/// `""` lists the root only; a child namespace lists itself only.
pub async fn list_by_namespace(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    put_empty(saver, &cfg(&t, ""), meta(CheckpointSource::Loop, 0)).await?;
    put_empty(saver, &cfg(&t, "child:1"), meta(CheckpointSource::Loop, 0)).await?;
    let all = ListOptions::default();
    assert_eq!(saver.list(Some(&cfg(&t, "")), &all).await?.len(), 1);
    assert_eq!(saver.list(Some(&cfg(&t, "child:1")), &all).await?.len(), 1);
    Ok(())
}

/// Newest first.
pub async fn list_ordering(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let configs = fixture(saver, &t).await?;
    let mut expected: Vec<String> = configs.iter().map(|c| id_of(c).to_owned()).collect();
    expected.reverse();
    assert_eq!(
        ids(&list_of(saver, &t, ListOptions::default()).await?),
        expected
    );
    Ok(())
}

/// A single-key filter.
pub async fn list_metadata_filter_single_key(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    fixture(saver, &t).await?;
    let got = list_of(
        saver,
        &t,
        ListOptions::default().filter(json!({"source": "input"})),
    )
    .await?;
    assert_eq!(got.len(), 2);
    Ok(())
}

/// Integer equality on `step`.
pub async fn list_metadata_filter_step(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let configs = fixture(saver, &t).await?;
    let got = list_of(saver, &t, ListOptions::default().filter(json!({"step": 1}))).await?;
    assert_eq!(ids(&got), [id_of(&configs[1])]);
    Ok(())
}

/// Several keys are ANDed.
pub async fn list_metadata_filter_multiple_keys(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let configs = fixture(saver, &t).await?;
    let f = json!({"source": "input", "step": 2});
    let got = list_of(saver, &t, ListOptions::default().filter(f)).await?;
    assert_eq!(ids(&got), [id_of(&configs[2])]);
    Ok(())
}

/// A filter nothing matches.
pub async fn list_metadata_filter_no_match(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    fixture(saver, &t).await?;
    let f = json!({"source": "update", "step": 99});
    assert!(
        list_of(saver, &t, ListOptions::default().filter(f))
            .await?
            .is_empty()
    );
    Ok(())
}

/// Custom metadata keys filter, and `run_id` is preserved.
pub async fn list_metadata_custom_keys(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    fixture(saver, &t).await?;
    let got = list_of(
        saver,
        &t,
        ListOptions::default().filter(json!({"score": 42})),
    )
    .await?;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].metadata.run_id.as_deref(), Some("run-3"));
    Ok(())
}

/// `before` is a strict upper bound.
pub async fn list_before(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let configs = fixture(saver, &t).await?;
    let got = list_of(saver, &t, ListOptions::default().before(id_of(&configs[2]))).await?;
    assert_eq!(ids(&got), [id_of(&configs[1]), id_of(&configs[0])]);
    Ok(())
}

/// `limit` caps the count.
pub async fn list_limit(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    fixture(saver, &t).await?;
    assert_eq!(
        list_of(saver, &t, ListOptions::default().limit(1))
            .await?
            .len(),
        1
    );
    assert_eq!(
        list_of(saver, &t, ListOptions::default().limit(2))
            .await?
            .len(),
        2
    );
    Ok(())
}

/// `limit` applies after `before`, newest first.
pub async fn list_limit_plus_before(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let configs = fixture(saver, &t).await?;
    let options = ListOptions::default().before(id_of(&configs[3])).limit(1);
    assert_eq!(
        ids(&list_of(saver, &t, options).await?),
        [id_of(&configs[2])]
    );
    Ok(())
}

/// Thread scope and a filter combine.
pub async fn list_combined_thread_and_filter(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    fixture(saver, &t).await?;
    fixture(saver, &thread()).await?;
    let got = list_of(
        saver,
        &t,
        ListOptions::default().filter(json!({"source": "loop"})),
    )
    .await?;
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|x| x.config.thread_id == t));
    Ok(())
}

/// An unknown thread with a filter lists nothing.
pub async fn list_empty_result(saver: &dyn CheckpointSaver) -> Result<()> {
    let got = list_of(
        saver,
        &thread(),
        ListOptions::default().filter(json!({"source": "loop"})),
    )
    .await?;
    assert!(got.is_empty());
    Ok(())
}

/// Listed tuples carry their pending writes.
pub async fn list_includes_pending_writes(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let configs = fixture(saver, &t).await?;
    saver
        .put_writes(
            &configs[3],
            vec![("ch".into(), val(json!("w")))],
            "task",
            "",
        )
        .await?;
    let got = list_of(saver, &t, ListOptions::default().limit(1)).await?;
    assert_eq!(
        writes_of(&got[0]),
        [("task".into(), "ch".into(), json!("w"))]
    );
    Ok(())
}

/// With checkpoints in three namespaces, `""` lists exactly the root one.
pub async fn list_multiple_namespaces(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let root = put_empty(saver, &cfg(&t, ""), meta(CheckpointSource::Loop, 0)).await?;
    for ns in ["child:1", "child:2"] {
        put_empty(saver, &cfg(&t, ns), meta(CheckpointSource::Loop, 0)).await?;
    }
    let got = saver
        .list(Some(&cfg(&t, "")), &ListOptions::default())
        .await?;
    assert_eq!(ids(&got), [id_of(&root)]);
    assert_eq!(list_of(saver, &t, ListOptions::default()).await?.len(), 3);
    Ok(())
}

/// `limit` 0 lists nothing.
pub async fn list_limit_zero_returns_nothing(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    fixture(saver, &t).await?;
    assert!(
        list_of(saver, &t, ListOptions::default().limit(0))
            .await?
            .is_empty()
    );
    Ok(())
}

/// A config with a checkpoint id lists only that checkpoint.
pub async fn list_by_checkpoint_id(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let configs = fixture(saver, &t).await?;
    let got = saver
        .list(Some(&configs[1]), &ListOptions::default())
        .await?;
    assert_eq!(ids(&got), [id_of(&configs[1])]);
    Ok(())
}

/// The generated matrix of the LangGraph JS suite: thread x namespace x limit x before x
/// filter; every listed tuple also equals its `get_tuple`.
///
/// Listing every thread may include other cases' checkpoints (the suite shares databases), so
/// for that scope this case's own tuples must form a prefix of the expected list, and all of it
/// when fewer than `limit` came back.
pub async fn list_matrix(saver: &dyn CheckpointSaver) -> Result<()> {
    let threads = [thread(), thread(), thread()];
    let mut stored: Vec<CheckpointTuple> = Vec::new();
    for t in &threads[..2] {
        let parent = put_empty(saver, &cfg(t, ""), meta(CheckpointSource::Input, -1)).await?;
        let child = put_empty(saver, &parent, meta(CheckpointSource::Loop, 0)).await?;
        saver
            .put_writes(
                &child,
                vec![("animals".into(), val(json!("dog")))],
                "pet_task",
                "",
            )
            .await?;
        let sub = put_empty(saver, &cfg(t, "child"), meta(CheckpointSource::Loop, 0)).await?;
        for c in [parent, child, sub] {
            stored.push(saver.get_tuple(&c).await?.expect("stored"));
        }
    }
    let ours: std::collections::HashSet<String> = ids(&stored).into_iter().collect();
    let befores = [
        None,
        Some(id_of(&stored[0].config).to_owned()),
        Some(id_of(&stored[1].config).to_owned()),
    ];
    let filters = [
        None,
        Some(json!({})),
        Some(json!({"source": "input"})),
        Some(json!({"source": "loop"})),
    ];
    let mut scopes: Vec<Option<CheckpointConfig>> = vec![None];
    for t in [&threads[0], &threads[1], &threads[2]] {
        scopes.push(Some(CheckpointConfig::new(t)));
        scopes.push(Some(cfg(t, "")));
        scopes.push(Some(cfg(t, "child")));
    }
    let mut combos = 0;
    for scope in &scopes {
        for limit in [None, Some(1), Some(2)] {
            for before in &befores {
                for filter in &filters {
                    combos += 1;
                    let options = ListOptions {
                        filter: filter.clone(),
                        before: before.clone(),
                        limit,
                    };
                    let matches = |t: &CheckpointTuple| {
                        scope.as_ref().is_none_or(|s| {
                            s.thread_id == t.config.thread_id
                                && s.checkpoint_ns
                                    .as_ref()
                                    .is_none_or(|ns| Some(ns) == t.config.checkpoint_ns.as_ref())
                        }) && before
                            .as_ref()
                            .is_none_or(|b| id_of(&t.config) < b.as_str())
                            && filter.as_ref().is_none_or(|f| {
                                crate::raw::json_contains(
                                    &serde_json::Value::Object(t.metadata.to_json()),
                                    f,
                                )
                            })
                    };
                    let mut expected: Vec<&CheckpointTuple> =
                        stored.iter().filter(|t| matches(t)).collect();
                    expected.sort_by(|a, b| id_of(&b.config).cmp(id_of(&a.config)));
                    let got = saver.list(scope.as_ref(), &options).await?;
                    let context = format!(
                        "scope {scope:?} limit {limit:?} before {before:?} filter {filter:?}"
                    );
                    assert!(
                        got.len() <= limit.unwrap_or(usize::MAX),
                        "{context}: over limit"
                    );
                    assert!(
                        got.windows(2)
                            .all(|w| id_of(&w[0].config) >= id_of(&w[1].config)),
                        "{context}: not newest first"
                    );
                    assert!(
                        got.iter().all(matches),
                        "{context}: a tuple outside the predicates"
                    );
                    let mine: Vec<&CheckpointTuple> = got
                        .iter()
                        .filter(|t| ours.contains(id_of(&t.config)))
                        .collect();
                    let expected_ids: Vec<&str> =
                        expected.iter().map(|t| id_of(&t.config)).collect();
                    let mine_ids: Vec<&str> = mine.iter().map(|t| id_of(&t.config)).collect();
                    let complete = got.len() < limit.unwrap_or(usize::MAX);
                    if scope.is_some() {
                        let n = expected_ids.len().min(limit.unwrap_or(usize::MAX));
                        assert_eq!(mine_ids, expected_ids[..n], "{context}");
                    } else if complete {
                        assert_eq!(mine_ids, expected_ids, "{context}");
                    } else {
                        assert_eq!(mine_ids, expected_ids[..mine_ids.len()], "{context}");
                    }
                    for t in mine {
                        let again = saver
                            .get_tuple(&t.config)
                            .await?
                            .expect("listed tuples exist");
                        assert_eq!(t, &again, "{context}: list and get_tuple differ");
                    }
                }
            }
        }
    }
    assert_eq!(combos, 10 * 3 * 3 * 4);
    Ok(())
}
