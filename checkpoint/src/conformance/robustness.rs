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
