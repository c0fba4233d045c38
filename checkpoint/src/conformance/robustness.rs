//! Cases no LangGraph suite has: deletes racing writes, concurrency, odd and large values.

use serde_json::json;

use super::*;
use crate::ListOptions;

/// A write that arrives after `delete_thread` does not bring the thread back, and a new
/// checkpoint on the same thread id starts clean.
pub async fn write_after_delete_does_not_revive_thread(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let c = chain(saver, &t, "", 2).await?;
    saver.delete_thread(&t).await?;
    saver
        .put_writes(&c[1], vec![("ch".into(), val(json!("late")))], "task", "")
        .await?;
    assert!(saver.get_tuple(&cfg(&t, "")).await?.is_none());
    assert!(saver.get_tuple(&c[1]).await?.is_none());
    assert!(
        saver
            .list(Some(&CheckpointConfig::new(&t)), &ListOptions::default())
            .await?
            .is_empty()
    );
    let listed = saver.list(None, &ListOptions::default()).await?;
    assert!(listed.iter().all(|x| x.config.thread_id != t));
    let fresh = put_empty(saver, &cfg(&t, ""), meta(CheckpointSource::Input, -1)).await?;
    let tuple = saver.get_tuple(&cfg(&t, "")).await?.expect("fresh");
    assert_eq!(tuple.config, fresh);
    assert!(tuple.pending_writes.is_empty() && tuple.parent_config.is_none());
    Ok(())
}

/// 16 tasks putting concurrently on distinct threads lose nothing.
pub async fn concurrent_puts_lose_nothing(saver: &dyn CheckpointSaver) -> Result<()> {
    const TASKS: usize = 16;
    const PUTS: i64 = 25;
    let threads: Vec<String> = (0..TASKS).map(|_| thread()).collect();
    let work = threads.iter().map(|t| async move {
        let mut parent = cfg(t, "");
        for step in 0..PUTS {
            let cp = checkpoint(
                step,
                &[("n", json!(step)), ("t", json!(t))],
                &[("n", step as u64 + 1), ("t", 1)],
            );
            let new = if step == 0 {
                versions(&[("n", 1), ("t", 1)])
            } else {
                versions(&[("n", step as u64 + 1)])
            };
            parent = saver
                .put(&parent, cp, meta(CheckpointSource::Loop, step), new)
                .await?;
            saver
                .put_writes(&parent, vec![("n".into(), val(json!(step)))], "task", "")
                .await?;
        }
        Result::Ok(())
    });
    for r in futures::future::join_all(work).await {
        r?;
    }
    for t in &threads {
        let all = saver
            .list(Some(&CheckpointConfig::new(t)), &ListOptions::default())
            .await?;
        assert_eq!(all.len(), PUTS as usize, "thread {t}");
        for (i, tuple) in all.iter().enumerate() {
            let step = PUTS - 1 - i as i64;
            assert_eq!(
                values_of(tuple),
                [("n".into(), json!(step)), ("t".into(), json!(t))].into()
            );
            assert_eq!(writes_of(tuple), [("task".into(), "n".into(), json!(step))]);
        }
    }
    Ok(())
}

/// Tags and bytes come back exactly, whatever they hold (NUL, invalid UTF-8, empty).
pub async fn values_keep_tag_and_bytes(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let odd = [
        (
            "bin",
            SerializedValue::new("bytes", vec![0u8, 255, 0, 1, 0xC3, 0x28]),
        ),
        ("nil", SerializedValue::new("null", Vec::<u8>::new())),
        (
            "mp",
            SerializedValue::new("msgpack", vec![0x92, 0x01, 0xA1, 0x61]),
        ),
        ("pc", SerializedValue::new("postcard", vec![0x00])),
    ];
    let mut cp = Checkpoint::new(0);
    for (ch, v) in &odd {
        cp.channel_values.insert((*ch).to_owned(), v.clone());
        cp.channel_versions
            .insert((*ch).to_owned(), ChannelVersion::from(1u64));
    }
    let new = cp.channel_versions.clone();
    let c = saver
        .put(&cfg(&t, ""), cp, meta(CheckpointSource::Loop, 0), new)
        .await?;
    saver
        .put_writes(&c, vec![("bin".into(), odd[0].1.clone())], "task", "")
        .await?;
    let tuple = saver.get_tuple(&c).await?.expect("stored");
    for (ch, v) in &odd {
        assert_eq!(&tuple.checkpoint.channel_values[*ch], v, "channel {ch}");
    }
    assert_eq!(tuple.pending_writes[0].value, odd[0].1);
    Ok(())
}

/// An 8 MiB value round-trips intact.
pub async fn large_value_roundtrip(saver: &dyn CheckpointSaver) -> Result<()> {
    let t = thread();
    let big: Vec<u8> = (0..8 * 1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let value = SerializedValue::new("bytes", big);
    let mut cp = Checkpoint::new(0);
    cp.channel_values.insert("big".into(), value.clone());
    cp.channel_versions
        .insert("big".into(), ChannelVersion::from(1u64));
    let c = saver
        .put(
            &cfg(&t, ""),
            cp,
            meta(CheckpointSource::Loop, 0),
            versions(&[("big", 1)]),
        )
        .await?;
    let tuple = saver.get_tuple(&c).await?.expect("stored");
    assert_eq!(tuple.checkpoint.channel_values["big"], value);
    Ok(())
}

/// Ids with a NUL character or over [`crate::raw::MAX_ID_BYTES`] are refused with
/// `InvalidConfig` before anything is written, on every backend alike; ids at the limit are
/// stored and read back.
pub async fn ids_with_nul_or_over_the_limit_are_refused(saver: &dyn CheckpointSaver) -> Result<()> {
    let refused = |r: Result<CheckpointConfig>, what: &str| {
        assert!(
            matches!(r, Err(crate::Error::InvalidConfig(_))),
            "{what}: {r:?}"
        );
    };
    let t = thread();
    let long = "x".repeat(crate::raw::MAX_ID_BYTES + 1);
    let meta = || meta(CheckpointSource::Loop, 0);
    let nul_thread = format!("{t}\0x");
    refused(
        put_empty(saver, &cfg(&nul_thread, ""), meta()).await,
        "NUL in thread_id",
    );
    refused(
        put_empty(saver, &cfg(&long, ""), meta()).await,
        "long thread_id",
    );
    refused(
        put_empty(saver, &cfg(&t, "a\0b"), meta()).await,
        "NUL in namespace",
    );
    refused(
        put_empty(saver, &cfg(&t, &long), meta()).await,
        "long namespace",
    );
    let mut cp = checkpoint(0, &[("ok", json!(1))], &[("ok", 1)]);
    cp.channel_versions
        .insert("bad\0channel".to_owned(), ChannelVersion::from(1));
    refused(
        saver
            .put(&cfg(&t, ""), cp, meta(), versions(&[("ok", 1)]))
            .await,
        "NUL in a channel name",
    );
    assert!(
        saver.get_tuple(&cfg(&t, "")).await?.is_none(),
        "something was written"
    );
    let stored = put_empty(saver, &cfg(&t, ""), meta()).await?;
    let writes = |task: &str| vec![(task.to_owned(), val(json!("w")))];
    let nul_task = saver.put_writes(&stored, writes("c"), "task\0x", "").await;
    assert!(
        matches!(nul_task, Err(crate::Error::InvalidConfig(_))),
        "{nul_task:?}"
    );
    let long_channel = saver.put_writes(&stored, writes(&long), "task", "").await;
    assert!(
        matches!(long_channel, Err(crate::Error::InvalidConfig(_))),
        "{long_channel:?}"
    );
    // At the limit everything is stored and read back.
    let max = format!("{t}{}", "y".repeat(crate::raw::MAX_ID_BYTES - t.len()));
    let at_limit = put_empty(saver, &cfg(&max, &max), meta()).await?;
    saver.put_writes(&at_limit, writes(&max), &max, "").await?;
    let tuple = saver
        .get_tuple(&at_limit)
        .await?
        .expect("stored at the limit");
    assert_eq!(tuple.pending_writes.len(), 1);
    Ok(())
}
