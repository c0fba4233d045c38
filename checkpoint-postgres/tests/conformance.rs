//! The conformance suite on PostgreSQL: every case on its own schema of one shared
//! database, directly, through `Arc<dyn CheckpointSaver>`, sealing values with AES-256-GCM,
//! and with an authenticated history.

mod common;

use std::sync::Arc;

use waypoint_checkpoint::{CheckpointSaver, Serde};

mod direct {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(optional common::saver(Serde::default()));
}

mod dyn_saver {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(optional async {
        Ok(common::saver(Serde::default())
            .await?
            .map(|s| Arc::new(s) as Arc<dyn CheckpointSaver>))
    });
}

mod encrypted {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(optional common::saver(common::keyed()?));
}

mod authenticated {
    use super::*;
    waypoint_checkpoint::checkpoint_conformance!(optional common::saver(
        common::keyed()?.authenticate_history(true)
    ));
}

/// The ordering cases on tables whose text columns sort by a locale, as in a database created
/// with one: writes still come in byte order, as LangGraph sorts them.
mod locale_collation {
    use super::*;
    use waypoint_checkpoint::conformance;
    use waypoint_checkpoint_postgres::PostgresSaver;

    /// A saver whose write task ids and paths collate by a locale; `None` without a server
    /// or without a locale collation on it.
    async fn saver() -> waypoint_checkpoint::Result<Option<PostgresSaver>> {
        let Some(saver) = common::saver(Serde::default()).await? else {
            return Ok(None);
        };
        let collation: Option<String> = sqlx::query_scalar(
            "SELECT collname::text FROM pg_collation
             WHERE collname IN ('en-x-icu', 'en_US.utf8', 'en_US') ORDER BY collname LIMIT 1",
        )
        .fetch_optional(saver.pool())
        .await
        .expect("collations");
        let Some(collation) = collation else {
            eprintln!("skipped: the server has no English locale collation");
            return Ok(None);
        };
        for column in ["task_id", "task_path"] {
            sqlx::query(&format!(
                r#"ALTER TABLE checkpoint_writes ALTER COLUMN {column} TYPE text COLLATE "{collation}""#
            ))
            .execute(saver.pool())
            .await
            .expect("collate the column");
        }
        Ok(Some(saver))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn pending_writes_ordered_by_task_path_first() -> waypoint_checkpoint::Result<()> {
        match saver().await? {
            Some(saver) => conformance::pending_writes_ordered_by_task_path_first(&saver).await,
            None => Ok(()),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn delta_history_orders_same_step_writes_by_task_path() -> waypoint_checkpoint::Result<()>
    {
        match saver().await? {
            Some(saver) => {
                conformance::delta_history_orders_same_step_writes_by_task_path(&saver).await
            }
            None => Ok(()),
        }
    }
}
