//! One case per decision where LangGraph's backends diverge (DESIGN section 3).

use serde_json::json;

use super::*;
use crate::ListOptions;

async fn tagged(saver: &dyn CheckpointSaver, t: &str, extra: Value) -> Result<CheckpointConfig> {
    let mut m = meta(CheckpointSource::Loop, 0);
    if let Value::Object(map) = extra {
        m.extra.extend(map);
    }
    put_empty(saver, &cfg(t, ""), m).await
}

async fn matching(saver: &dyn CheckpointSaver, t: &str, filter: Value) -> Result<Vec<String>> {
    let got = saver
        .list(
            Some(&CheckpointConfig::new(t)),
            &ListOptions::default().filter(filter),
        )
        .await?;
    Ok(ids(&got))
}

/// Nested objects match as subsets (under a key of the caller's: LangGraph's PostgreSQL
/// saver drops its legacy `writes` key).
pub async fn filter_containment_nested_objects(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let c = tagged(
        saver,
        &t,
        json!({"details": {"foo": "bar", "n": {"deep": 1, "x": 2}}}),
    )
    .await?;
    assert_eq!(
        matching(saver, &t, json!({"details": {"foo": "bar"}})).await?,
        [id_of(&c)]
    );
    assert_eq!(
        matching(saver, &t, json!({"details": {"n": {"deep": 1}}})).await?,
        [id_of(&c)]
    );
    assert!(
        matching(saver, &t, json!({"details": {"foo": "baz"}}))
            .await?
            .is_empty()
    );
    assert!(
        matching(saver, &t, json!({"details": {"n": {"deep": 1, "y": 0}}}))
            .await?
            .is_empty()
    );
    Ok(())
}

/// Arrays match when every pattern element is in the stored array.
pub async fn filter_containment_arrays(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let c = tagged(saver, &t, json!({"tags": ["a", "b", {"k": 1}]})).await?;
    assert_eq!(
        matching(saver, &t, json!({"tags": ["b"]})).await?,
        [id_of(&c)]
    );
    assert_eq!(
        matching(saver, &t, json!({"tags": [{"k": 1}, "a"]})).await?,
        [id_of(&c)]
    );
    assert_eq!(matching(saver, &t, json!({"tags": []})).await?, [id_of(&c)]);
    assert!(
        matching(saver, &t, json!({"tags": ["c"]}))
            .await?
            .is_empty()
    );
    assert!(matching(saver, &t, json!({"tags": "a"})).await?.is_empty());
    Ok(())
}

/// `{"k": null}` matches only an explicit null, never a missing key.
pub async fn filter_null_matches_only_explicit_null(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let with_null = tagged(saver, &t, json!({"k": null})).await?;
    tagged(saver, &t, json!({})).await?;
    tagged(saver, &t, json!({"k": "v"})).await?;
    assert_eq!(
        matching(saver, &t, json!({"k": null})).await?,
        [id_of(&with_null)]
    );
    Ok(())
}

/// Hostile keys and values (SQL injection, quotes, NUL, unicode) are data: they match
/// exactly what was stored and never error.
pub async fn filter_keys_are_data(saver: &dyn CheckpointSaver) -> Result<()> {
    let hostile = [
        "a'); DROP TABLE checkpoints; --",
        "x' OR '1'='1",
        "$.source') = 'loop' OR ('1'='1",
        "key\"; DELETE FROM checkpoint_writes; --",
        "1) UNION SELECT * FROM checkpoints --",
        "semi;colon",
        "dotted.key.path",
        "日本語キー",
        "back\\slash",
        "%_*?[]",
    ];
    let t = thread();
    let mut extra = serde_json::Map::new();
    for (i, k) in hostile.iter().enumerate() {
        extra.insert((*k).to_owned(), json!(format!("{k}-{i}")));
    }
    let c = tagged(saver, &t, Value::Object(extra)).await?;
    for (i, k) in hostile.iter().enumerate() {
        assert_eq!(
            matching(saver, &t, json!({*k: format!("{k}-{i}")})).await?,
            [id_of(&c)],
            "key {k}"
        );
        assert!(
            matching(saver, &t, json!({*k: "other"})).await?.is_empty(),
            "key {k}"
        );
    }
    // Keys nobody stored, hostile or not, match nothing; the thread survives them all.
    for k in hostile {
        assert!(
            matching(saver, &t, json!({format!("{k}!"): 1}))
                .await?
                .is_empty()
        );
    }
    assert_eq!(matching(saver, &t, json!({})).await?, [id_of(&c)]);
    Ok(())
}

/// A call mixing reserved and regular channels inserts-or-ignores every row: first wins.
pub async fn put_writes_mixed_special_and_regular_first_wins(
    saver: &dyn CheckpointSaver,
) -> Result<()> {
    let c = put_empty(saver, &cfg(&thread(), ""), meta(CheckpointSource::Loop, 0)).await?;
    let call = |a: i64, e: &str| {
        vec![
            ("a".to_owned(), val(json!(a))),
            (channels::ERROR.to_owned(), val(json!(e))),
        ]
    };
    saver.put_writes(&c, call(1, "e1"), "task", "").await?;
    saver.put_writes(&c, call(2, "e2"), "task", "").await?;
    let tuple = saver.get_tuple(&c).await?.expect("stored");
    assert_eq!(
        writes_of(&tuple),
        [
            ("task".into(), channels::ERROR.into(), json!("e1")),
            ("task".into(), "a".into(), json!(1))
        ]
    );
    Ok(())
}

/// A call of only reserved channels replaces: last wins.
pub async fn put_writes_all_special_last_wins(saver: &dyn CheckpointSaver) -> Result<()> {
    let c = put_empty(saver, &cfg(&thread(), ""), meta(CheckpointSource::Loop, 0)).await?;
    for v in ["first", "second"] {
        saver
            .put_writes(
                &c,
                vec![(channels::RESUME.into(), val(json!(v)))],
                "task",
                "",
            )
            .await?;
    }
    let tuple = saver.get_tuple(&c).await?.expect("stored");
    assert_eq!(
        writes_of(&tuple),
        [("task".into(), channels::RESUME.into(), json!("second"))]
    );
    Ok(())
}

/// Writes may arrive before their checkpoint and show up once it is stored.
pub async fn put_writes_before_checkpoint(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let cp = Checkpoint::new(0);
    let early = cfg(&t, "").with_id(cp.id.clone());
    saver
        .put_writes(&early, vec![("ch".into(), val(json!("early")))], "task", "")
        .await?;
    assert!(saver.get_tuple(&cfg(&t, "")).await?.is_none());
    let c = saver
        .put(
            &cfg(&t, ""),
            cp,
            meta(CheckpointSource::Loop, 0),
            Default::default(),
        )
        .await?;
    let tuple = saver.get_tuple(&c).await?.expect("stored");
    assert_eq!(
        writes_of(&tuple),
        [("task".into(), "ch".into(), json!("early"))]
    );
    Ok(())
}

/// With equal task paths (empty here), pending writes are ordered by `(task_id, idx)`, reserved
/// channels first within a task.
pub async fn pending_writes_ordered_by_task_and_idx(saver: &dyn CheckpointSaver) -> Result<()> {
    let c = put_empty(saver, &cfg(&thread(), ""), meta(CheckpointSource::Loop, 0)).await?;
    saver
        .put_writes(
            &c,
            vec![("x".into(), val(json!(0))), ("y".into(), val(json!(1)))],
            "task-b",
            "",
        )
        .await?;
    saver
        .put_writes(
            &c,
            vec![(channels::INTERRUPT.into(), val(json!("i")))],
            "task-b",
            "",
        )
        .await?;
    saver
        .put_writes(&c, vec![("z".into(), val(json!(2)))], "task-a", "")
        .await?;
    saver
        .put_writes(
            &c,
            vec![(channels::ERROR.into(), val(json!("e")))],
            "task-a",
            "",
        )
        .await?;
    let tuple = saver.get_tuple(&c).await?.expect("stored");
    let order: Vec<(String, String)> = tuple
        .pending_writes
        .iter()
        .map(|w| (w.task_id.clone(), w.channel.clone()))
        .collect();
    let expected = [
        ("task-a", "__error__"),
        ("task-a", "z"),
        ("task-b", "__interrupt__"),
        ("task-b", "x"),
        ("task-b", "y"),
    ];
    assert_eq!(order, expected.map(|(a, b)| (a.to_owned(), b.to_owned())));
    let listed = saver.list(Some(&c), &ListOptions::default()).await?;
    assert_eq!(listed[0].pending_writes, tuple.pending_writes);
    Ok(())
}

/// Pending writes are ordered by `(task_path, task_id, idx)`, LangGraph's `writes_sort_key`
/// (the order a step applies its tasks): the path decides before the task id, paths compare
/// as bytes (`Z` before `a`, `z` before `é`, not as a locale would), equal paths fall back to
/// the task id and one task's writes to `idx`.
pub async fn pending_writes_ordered_by_task_path_first(saver: &dyn CheckpointSaver) -> Result<()> {
    let c = put_empty(saver, &cfg(&thread(), ""), meta(CheckpointSource::Loop, 0)).await?;
    // Arrival order; the task ids sort nearly the other way round from the paths.
    let tasks: [(&str, &str, &[&str]); 7] = [
        ("task-a", "~__pregel_push, 0000000010, False", &["a"]),
        ("task-b", "~__pregel_push, 0000000002, False", &["b1", "b2"]),
        ("task-c", "~__pregel_pull, \u{e9}t\u{e9}", &["c"]),
        ("task-d", "~__pregel_pull, zeta", &["d"]),
        ("task-e", "~__pregel_pull, alpha", &["e"]),
        ("task-f", "~__pregel_pull, Zed", &["f"]),
        ("task-g", "", &["g"]),
    ];
    for (task, path, chans) in tasks {
        let writes = chans
            .iter()
            .enumerate()
            .map(|(i, ch)| ((*ch).to_owned(), val(json!(i))))
            .collect();
        saver.put_writes(&c, writes, task, path).await?;
    }
    // A reserved channel (negative idx) of task-b, and a second task on task-e's path.
    saver
        .put_writes(
            &c,
            vec![(channels::INTERRUPT.into(), val(json!("i")))],
            "task-b",
            "~__pregel_push, 0000000002, False",
        )
        .await?;
    saver
        .put_writes(
            &c,
            vec![("e0".into(), val(json!(0)))],
            "task-0",
            "~__pregel_pull, alpha",
        )
        .await?;
    let tuple = saver.get_tuple(&c).await?.expect("stored");
    let order: Vec<(String, String)> = tuple
        .pending_writes
        .iter()
        .map(|w| (w.task_id.clone(), w.channel.clone()))
        .collect();
    let expected = [
        ("task-g", "g"),
        ("task-f", "f"),
        ("task-0", "e0"),
        ("task-e", "e"),
        ("task-d", "d"),
        ("task-c", "c"),
        ("task-b", "__interrupt__"),
        ("task-b", "b1"),
        ("task-b", "b2"),
        ("task-a", "a"),
    ];
    assert_eq!(order, expected.map(|(a, b)| (a.to_owned(), b.to_owned())));
    let listed = saver.list(Some(&c), &ListOptions::default()).await?;
    assert_eq!(listed[0].pending_writes, tuple.pending_writes);
    Ok(())
}

/// Listing all threads orders by id globally, interleaving threads.
pub async fn list_orders_globally_across_threads(saver: &dyn CheckpointSaver) -> Result<()> {
    let (t1, t2) = (thread(), thread());
    let run = format!("{t1}-global");
    let mut expected = Vec::new();
    for step in 0..3 {
        for t in [&t1, &t2] {
            let c = put_empty(saver, &cfg(t, ""), run_meta(step, &run)).await?;
            expected.push(id_of(&c).to_owned());
        }
    }
    expected.reverse();
    let got = saver
        .list(None, &ListOptions::default().filter(json!({"run_id": run})))
        .await?;
    assert_eq!(ids(&got), expected);
    Ok(())
}

/// `before` applies across threads when listing them all.
pub async fn list_before_across_threads(saver: &dyn CheckpointSaver) -> Result<()> {
    let (t1, t2) = (thread(), thread());
    let run = format!("{t1}-before");
    let older = put_empty(saver, &cfg(&t1, ""), run_meta(0, &run)).await?;
    let newer = put_empty(saver, &cfg(&t2, ""), run_meta(0, &run)).await?;
    let options = ListOptions::default()
        .filter(json!({"run_id": run}))
        .before(id_of(&newer));
    assert_eq!(ids(&saver.list(None, &options).await?), [id_of(&older)]);
    Ok(())
}

/// Re-putting an id replaces checkpoint and metadata but keeps the first parent.
pub async fn reput_keeps_parent(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let c = chain(saver, &t, "", 2).await?;
    let mut again = saver.get_tuple(&c[1]).await?.expect("stored").checkpoint;
    again.channel_versions = versions(&[("x", 1)]);
    let m = meta(CheckpointSource::Update, 9);
    // Claim no parent this time: the stored parent must survive.
    let new_versions = again.channel_versions.clone();
    saver
        .put(&cfg(&t, ""), again.clone(), m.clone(), new_versions)
        .await?;
    let tuple = saver.get_tuple(&c[1]).await?.expect("stored");
    assert_eq!(tuple.parent_config, Some(c[0].clone()));
    assert_eq!(tuple.metadata, m);
    assert_eq!(tuple.checkpoint.channel_versions, again.channel_versions);
    Ok(())
}

/// NUL characters are stripped from top-level metadata strings, and the stripped form filters.
pub async fn metadata_nul_stripped(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let m = meta(CheckpointSource::Loop, 0)
        .with("my_key", "\u{0}abc")
        .with_run_id("r\u{0}1");
    let c = put_empty(saver, &cfg(&t, ""), m).await?;
    let tuple = saver.get_tuple(&c).await?.expect("stored");
    assert_eq!(tuple.metadata.extra["my_key"], json!("abc"));
    assert_eq!(tuple.metadata.run_id.as_deref(), Some("r1"));
    assert_eq!(
        matching(saver, &t, json!({"my_key": "abc"})).await?,
        [id_of(&c)]
    );
    Ok(())
}

/// A new version without a value is empty: it does not bring back the older value.
pub async fn empty_version_hides_older_value(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let c1 = saver
        .put(
            &cfg(&t, ""),
            checkpoint(0, &[("ch", json!("old"))], &[("ch", 1)]),
            meta(CheckpointSource::Loop, 0),
            versions(&[("ch", 1)]),
        )
        .await?;
    let c2 = saver
        .put(
            &c1,
            checkpoint(1, &[], &[("ch", 2)]),
            meta(CheckpointSource::Loop, 1),
            versions(&[("ch", 2)]),
        )
        .await?;
    let tuple = saver.get_tuple(&c2).await?.expect("stored");
    assert!(tuple.checkpoint.channel_values.is_empty());
    assert_eq!(tuple.checkpoint.channel_versions["ch"].counter(), Some(2));
    Ok(())
}

/// The same checkpoint id in two namespaces names two checkpoints; latest never crosses.
pub async fn namespaces_never_mix(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let shared = Checkpoint::new(0);
    let root = saver
        .put(
            &cfg(&t, ""),
            Checkpoint {
                channel_versions: versions(&[("a", 1)]),
                ..shared.clone()
            },
            meta(CheckpointSource::Loop, 0),
            versions(&[("a", 1)]),
        )
        .await?;
    put_empty(saver, &cfg(&t, "child:1"), meta(CheckpointSource::Loop, 5)).await?;
    let child_same_id = saver
        .put(
            &cfg(&t, "child:2"),
            shared,
            meta(CheckpointSource::Loop, 7),
            Default::default(),
        )
        .await?;
    let r = saver.get_tuple(&cfg(&t, "")).await?.expect("root");
    assert_eq!(r.config, root);
    assert_eq!(r.metadata.step, Some(0));
    let c = saver.get_tuple(&child_same_id).await?.expect("child");
    assert_eq!(c.metadata.step, Some(7));
    assert!(c.checkpoint.channel_versions.is_empty());
    Ok(())
}
