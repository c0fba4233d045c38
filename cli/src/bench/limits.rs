//! The machine's and the servers' limits, measured in the same run as the savers: `pgbench`
//! single-row INSERTs shaped like one PostgreSQL put, and writing the put's own rows (one
//! client and 16), `redis-benchmark -c 1` running the commands of one Redis put as a script,
//! a bare rusqlite loop writing the rows of SQLite puts in the same mode, the fdatasync rate
//! of the temporary directory's file system and memcpy bandwidth. A missing tool or server
//! leaves a note, not a failure.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use indicatif::ProgressBar;
use redis::AsyncCommands;
use redis::aio::ConnectionLike;
use rusqlite::types::Value as SqlValue;
use waypoint_checkpoint::{CheckpointSaver, SerializedValue};
use waypoint_checkpoint_sqlite::SqliteSaver;
use waypoint_workloads::checkpoints;
use waypoint_workloads::servers;

use super::Scale;
use super::checkpoint::{SEQUENTIAL, WRITERS, fresh_thread, sequential_puts};
use super::measure::{Table, per_second, throughput};
use super::targets::{Target, Targets};

/// Bytes each fdatasync round writes.
const SYNC_BYTES: usize = 4096;

/// Bytes each memcpy copies (well past the last-level cache).
const COPY_BYTES: usize = 64 << 20;

/// Steps this group reports to its progress bar.
pub(crate) fn steps(targets: &Targets) -> u64 {
    let servers = targets
        .list
        .iter()
        .map(|t| match t {
            Target::Postgres(_) => 4,
            Target::Redis(_) => 1,
            _ => 0,
        })
        .sum::<u64>();
    3 + servers
}

/// The suffix of the row holding our samples taken in turns with a limit's (see
/// [`Alternating`]); a share of that limit is ours from that row (`report`).
pub(crate) const ALTERNATING: &str = ", ours in turns";

/// Measures every limit the run can reach.
pub(crate) async fn run(targets: &Targets, scale: &Scale, bar: &ProgressBar) -> Result<Table> {
    let mut table = Table::new(
        "limits",
        "backend",
        format!(
            "What the same machine and servers do without Waypoint, for the share of the limit: \
             `pgbench -M prepared` single-row INSERTs of one put's checkpoint row and value \
             (1 client, then {WRITERS}; per-second tps, the first second dropped; \
             `{PUT_ROWS}`: the checkpoint row and the value row, as our put stores them, in \
             one statement into copies of the saver's tables with their keys and indexes); \
             `redis-benchmark -c 1` running one put's commands as EVALSHA ({} per sample); a \
             bare rusqlite loop writing the rows of {} SQLite puts per sample in the same \
             mode; fdatasync of {SYNC_BYTES}-byte appends in the temporary directory; memcpy \
             of {} MiB. Median of {} samples. `put (sequential){ALTERNATING}`: our saver's \
             sequential puts (as in the checkpoint group) taking turns with the SQLite and \
             Redis limits' samples, sample for sample; their shares of those limits are the \
             ones reported.",
            scale.puts,
            scale.puts,
            COPY_BYTES >> 20,
            scale.samples
        ),
    );
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;

    bar.set_message("limits · sqlite");
    let done = sqlite(dir.path(), scale).await;
    note_alternating(&mut table, "sqlite", done);
    bar.inc(1);

    for target in &targets.list {
        match target {
            Target::Postgres(url) => {
                for clients in [1, WRITERS] {
                    let workload = match clients {
                        1 => SEQUENTIAL.to_owned(),
                        n => format!("put ({n} writers)"),
                    };
                    for shape in [Shape::OneRow, Shape::PutRows] {
                        bar.set_message(format!(
                            "limits · postgres · pgbench -c {clients}{}",
                            shape.suffix()
                        ));
                        let done = pgbench(url, clients, shape, scale).await;
                        let workload = format!("{workload}{}", shape.suffix());
                        note(
                            &mut table,
                            "postgres",
                            done.map(|s| (workload.as_str(), "puts/s", s)),
                        );
                        bar.inc(1);
                    }
                }
            }
            Target::Redis(url) => {
                bar.set_message("limits · redis · redis-benchmark -c 1");
                let done = redis_benchmark(url, scale).await;
                note_alternating(&mut table, "redis", done);
                bar.inc(1);
            }
            Target::Memory | Target::Sqlite => {}
        }
    }
    for (name, url) in [("postgres", "POSTGRES"), ("redis", "REDIS")] {
        if !targets.list.iter().any(|t| t.name() == name) {
            table.notes.push(format!(
                "{name}: no limit measured, no reachable server (WAYPOINT_BENCH_{url}_URL)"
            ));
        }
    }

    bar.set_message("limits · fdatasync");
    let window = scale.serde_window;
    let samples = scale.samples;
    let path = dir.path().join("fdatasync");
    let done = tokio::task::spawn_blocking(move || fdatasync(&path, window, samples)).await?;
    note(
        &mut table,
        "machine",
        done.map(|s| ("fdatasync (4 KiB appends)", "syncs/s", s)),
    );
    bar.inc(1);

    bar.set_message("limits · memcpy");
    let done = tokio::task::spawn_blocking(move || memcpy(window, samples)).await?;
    note(
        &mut table,
        "machine",
        done.map(|s| ("memcpy (64 MiB)", "GB/s", s)),
    );
    bar.inc(1);
    Ok(table)
}

/// Records the sequential put's limit and ours beside it ([`ALTERNATING`]) in `column`, or
/// why they are missing as a note.
fn note_alternating(table: &mut Table, column: &str, done: Result<Alternating>) {
    let (limit, ours) = match done {
        Ok(done) => (Ok(done.limit), Some(done.ours)),
        Err(e) => (Err(e), None),
    };
    note(table, column, limit.map(|s| (SEQUENTIAL, "puts/s", s)));
    if let Some(ours) = ours {
        table.rate(
            &format!("{SEQUENTIAL}{ALTERNATING}"),
            "puts/s",
            column,
            ours,
        );
    }
}

/// Records a limit's samples in `column`, or why it is missing as a note.
fn note(table: &mut Table, column: &str, done: Result<(&str, &str, Vec<f64>)>) {
    match done {
        Ok((workload, unit, samples)) => table.rate(workload, unit, column, samples),
        Err(e) => {
            let line = format!("{column}: limit not measured, {}", crate::one_line(&e));
            eprintln!("waypoint bench: {line}");
            table.notes.push(line);
        }
    }
}

/// Puts/s of a bare rusqlite loop writing, per put, the very rows our saver's put wrote
/// (read back from a scratch database the saver filled), each put one deferred transaction,
/// in a file with the saver's tables and its journal mode and `synchronous` setting, and of
/// our saver's puts of the same checkpoints, samples alternating (see [`Alternating`]). The
/// loop's WAL is never checkpointed during the loop (the saver checkpoints on another
/// connection).
async fn sqlite(dir: &Path, scale: &Scale) -> Result<Alternating> {
    let value = checkpoints::channel_value();
    let items = checkpoints::history(scale.puts, &value);
    // The value rows of each put, by `(channel, version)`, in order.
    let per_put: Vec<Vec<(String, String)>> = items
        .iter()
        .map(|(_, _, new)| {
            new.iter()
                .map(|(channel, version)| (channel.clone(), version.as_str().to_owned()))
                .collect()
        })
        .collect();
    let scratch = dir.join("scratch.db");
    let saver = SqliteSaver::from_path(&scratch).await?;
    let synchronous = if saver.config().fsync_commits {
        "FULL"
    } else {
        "NORMAL"
    };
    checkpoints::put_all(&saver, "limit", items).await?;
    drop(saver);
    let path = dir.join("bare.db");
    let mut bare =
        tokio::task::spawn_blocking(move || BareLoop::new(&scratch, &path, synchronous, per_put))
            .await??;
    let ours = SqliteSaver::from_path(dir.join("ours.db")).await?;
    let mut done = Alternating::default();
    for round in 0..=scale.samples {
        let rate = put_rate(&ours, scale.puts, &value).await?;
        let (back, sample) = tokio::task::spawn_blocking(move || {
            let sample = bare.sample();
            (bare, sample)
        })
        .await?;
        bare = back;
        let sample = sample?;
        // The first round warms both up.
        if round > 0 {
            done.ours.push(rate);
            done.limit.push(sample);
        }
    }
    Ok(done)
}

/// Samples of a limit and of our saver doing the same work, taken in turns (ours, then the
/// limit's), so that the share compares figures of the same moments on a machine whose
/// speed swings between minutes.
#[derive(Default)]
struct Alternating {
    limit: Vec<f64>,
    ours: Vec<f64>,
}

/// Puts/s of the checkpoint group's sequential puts on `saver`, on the limit's schedule; the
/// thread is deleted after.
async fn put_rate(
    saver: &dyn CheckpointSaver,
    puts: usize,
    value: &SerializedValue,
) -> Result<f64> {
    let thread = fresh_thread();
    let rate = sequential_puts(saver, &thread, puts, value).await?;
    saver.delete_thread(&thread).await?;
    Ok(rate)
}

/// The bare loop of [`sqlite`]: its connection, the rows to write and their statements.
struct BareLoop {
    conn: rusqlite::Connection,
    checkpoint_rows: (Vec<String>, Vec<Vec<SqlValue>>),
    blob_rows: (Vec<String>, Vec<Vec<SqlValue>>),
    /// The value rows of each put, in order.
    per_put: Vec<usize>,
    checkpoint_sql: String,
    blob_sql: String,
}

impl BareLoop {
    /// A loop writing into a new file at `path` the rows the saver wrote into `scratch` for
    /// puts of `per_put` values each, in the saver's mode.
    fn new(
        scratch: &Path,
        path: &Path,
        synchronous: &str,
        per_put: Vec<Vec<(String, String)>>,
    ) -> Result<Self> {
        let conn = rusqlite::Connection::open(scratch)?;
        // Ids grow with each put: key order is the puts' order.
        let checkpoint_rows = rows(&conn, "checkpoints", "checkpoint_id")?;
        let (columns, values) = rows(&conn, "checkpoint_blobs", "channel, version")?;
        ensure!(
            checkpoint_rows.1.len() == per_put.len()
                && values.len() == per_put.iter().map(Vec::len).sum::<usize>(),
            "the saver wrote {} checkpoint rows and {} value rows for {} puts, not one checkpoint \
             row and one row per new version each",
            checkpoint_rows.1.len(),
            values.len(),
            per_put.len()
        );
        // Value rows by key, then in the order the puts wrote them.
        let column = |name: &str| columns.iter().position(|c| c == name);
        let (Some(channel), Some(version)) = (column("channel"), column("version")) else {
            bail!("checkpoint_blobs has no channel or version column");
        };
        let text = |v: &SqlValue| match v {
            SqlValue::Text(t) => t.clone(),
            _ => String::new(),
        };
        let mut by_key: HashMap<(String, String), Vec<SqlValue>> = values
            .into_iter()
            .map(|row| ((text(&row[channel]), text(&row[version])), row))
            .collect();
        let ordered = per_put
            .iter()
            .flatten()
            .map(|key| {
                by_key
                    .remove(key)
                    .with_context(|| format!("the saver wrote no value row for {key:?}"))
            })
            .collect::<Result<Vec<_>>>()?;
        let blob_rows = (columns, ordered);
        let per_put = per_put.iter().map(Vec::len).collect();
        let bare = rusqlite::Connection::open(path)?;
        let mode: String = bare.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        ensure!(
            mode.eq_ignore_ascii_case("wal"),
            "no WAL: journal_mode={mode}"
        );
        bare.execute_batch(&format!(
            "PRAGMA synchronous={synchronous}; PRAGMA wal_autocheckpoint=0;"
        ))?;
        let mut ddl = conn.prepare(
            "SELECT sql FROM sqlite_master WHERE tbl_name IN ('checkpoints', 'checkpoint_blobs')
             AND sql IS NOT NULL ORDER BY type DESC",
        )?;
        for sql in ddl.query_map([], |r| r.get::<_, String>(0))? {
            bare.execute_batch(&sql?)?;
        }
        // The statements are built once, as a program writing these rows would (and as the
        // saver's are, prepared once per connection); building their text per row cost the
        // loop ~13% of its instructions.
        let checkpoint_sql = insert_sql("checkpoints", &checkpoint_rows.0);
        let blob_sql = insert_sql("checkpoint_blobs", &blob_rows.0);
        drop(ddl);
        Ok(BareLoop {
            conn: bare,
            checkpoint_rows,
            blob_rows,
            per_put,
            checkpoint_sql,
            blob_sql,
        })
    }

    /// Puts/s of one pass over the rows, under a new thread id.
    fn sample(&mut self) -> Result<f64> {
        let thread = SqlValue::Text(uuid::Uuid::new_v4().to_string());
        let start = Instant::now();
        let mut blobs = self.blob_rows.1.iter();
        for (checkpoint, values) in self.checkpoint_rows.1.iter().zip(&self.per_put) {
            let tx = self.conn.transaction()?;
            for row in blobs.by_ref().take(*values) {
                insert(&tx, &self.blob_sql, &self.blob_rows.0, row, &thread)?;
            }
            insert(
                &tx,
                &self.checkpoint_sql,
                &self.checkpoint_rows.0,
                checkpoint,
                &thread,
            )?;
            tx.commit()?;
        }
        Ok(per_second(self.per_put.len(), start.elapsed()))
    }
}

/// The column names and rows of `table`, ordered by `order`.
fn rows(
    conn: &rusqlite::Connection,
    table: &str,
    order: &str,
) -> Result<(Vec<String>, Vec<Vec<SqlValue>>)> {
    let mut stmt = conn.prepare(&format!("SELECT * FROM {table} ORDER BY {order}"))?;
    let columns: Vec<String> = stmt.column_names().map(str::to_owned).collect();
    let n = columns.len();
    let rows = stmt
        .query_map([], |r| (0..n).map(|i| r.get::<_, SqlValue>(i)).collect())?
        .collect::<rusqlite::Result<Vec<Vec<SqlValue>>>>()?;
    Ok((columns, rows))
}

/// `INSERT INTO table (columns) VALUES (?1, ...)`.
fn insert_sql(table: &str, columns: &[String]) -> String {
    let marks: Vec<String> = (1..=columns.len()).map(|i| format!("?{i}")).collect();
    format!(
        "INSERT INTO {table} ({}) VALUES ({})",
        columns.join(", "),
        marks.join(", ")
    )
}

/// Inserts `row` with `sql` (of [`insert_sql`] over `columns`), `thread` as its thread id.
fn insert(
    tx: &rusqlite::Transaction<'_>,
    sql: &str,
    columns: &[String],
    row: &[SqlValue],
    thread: &SqlValue,
) -> Result<()> {
    let mut stmt = tx.prepare_cached(sql)?;
    let values = columns
        .iter()
        .zip(row)
        .map(|(c, v)| if c == "thread_id" { thread } else { v });
    stmt.execute(rusqlite::params_from_iter(values))?;
    Ok(())
}

/// What each transaction of a pgbench limit writes.
#[derive(Clone, Copy)]
enum Shape {
    /// One put's checkpoint row and value as one row of a table with one key: the limit
    /// of a put's share.
    OneRow,
    /// One put's rows, as our saver's put stores them: its checkpoint row and its value's
    /// row (each put of the workload versions one channel anew), in one statement, into
    /// copies of the saver's `checkpoints` and `checkpoint_blobs` with their keys, indexes
    /// and storage settings (not our triggers): what the rows themselves cost the server.
    PutRows,
}

/// The suffix of the limit rows of [`Shape::PutRows`].
const PUT_ROWS: &str = ", one put's rows";

impl Shape {
    /// The suffix of this shape's limit rows.
    fn suffix(self) -> &'static str {
        match self {
            Shape::OneRow => "",
            Shape::PutRows => PUT_ROWS,
        }
    }
}

/// Per-second tps of `pgbench -M prepared` with `clients` clients, one transaction each
/// time writing `shape`'s rows (copied from the latest put of our saver on the same server;
/// fresh ids from a sequence, one thread); the first second (connections, warm-up) is
/// dropped.
async fn pgbench(url: &str, clients: usize, shape: Shape, scale: &Scale) -> Result<Vec<f64>> {
    let saver = servers::postgres_saver(url, 1).await?;
    let value = checkpoints::channel_value();
    checkpoints::put_all(&saver, "limit", checkpoints::history(6, &value)).await?;
    let schema = format!("limit_{}", uuid::Uuid::new_v4().simple());
    let pool = saver.pool();
    let (tables, statement) = match shape {
        Shape::OneRow => (
            format!(
                "CREATE TABLE {schema}.t (thread_id text NOT NULL, checkpoint_ns text NOT NULL,
                     checkpoint_id text NOT NULL, parent_checkpoint_id text,
                     checkpoint jsonb NOT NULL, metadata jsonb NOT NULL, type text NOT NULL,
                     blob bytea, PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id));
                 CREATE TABLE {schema}.one AS
                     SELECT c.thread_id, c.checkpoint_ns, c.parent_checkpoint_id,
                         c.checkpoint, c.metadata, b.type, b.blob
                     FROM checkpoints c, checkpoint_blobs b
                     ORDER BY c.checkpoint_id DESC, length(b.blob) DESC NULLS LAST LIMIT 1;"
            ),
            format!(
                "INSERT INTO {schema}.t SELECT thread_id, checkpoint_ns, \
                 lpad(nextval('{schema}.ids')::text, 36, '0'), parent_checkpoint_id, \
                 checkpoint, metadata, type, blob FROM {schema}.one;"
            ),
        ),
        Shape::PutRows => {
            // Every column of the saver's rows, the key's id from the sequence.
            let columns = |table: &'static str| async move {
                sqlx::query_scalar::<_, String>(
                    "SELECT column_name::text FROM information_schema.columns
                     WHERE table_schema = current_schema() AND table_name = $1
                     ORDER BY ordinal_position",
                )
                .bind(table)
                .fetch_all(pool)
                .await
                .with_context(|| format!("cannot read the columns of {table}"))
            };
            let insert = |table: &str, columns: &[String], id: &str| {
                let named: Vec<String> = columns.iter().map(|c| format!("\"{c}\"")).collect();
                let values: Vec<String> = columns
                    .iter()
                    .map(|c| {
                        if c == id {
                            "id.v".to_owned()
                        } else {
                            format!("o.\"{c}\"")
                        }
                    })
                    .collect();
                format!(
                    "INSERT INTO {schema}.{table} ({}) SELECT {} FROM {schema}.one_{table} o, id",
                    named.join(", "),
                    values.join(", ")
                )
            };
            let rows = insert(
                "checkpoints",
                &columns("checkpoints").await?,
                "checkpoint_id",
            );
            let values = insert(
                "checkpoint_blobs",
                &columns("checkpoint_blobs").await?,
                "version",
            );
            (
                format!(
                    "CREATE TABLE {schema}.checkpoints (LIKE checkpoints INCLUDING ALL);
                     CREATE TABLE {schema}.checkpoint_blobs (LIKE checkpoint_blobs INCLUDING ALL);
                     CREATE TABLE {schema}.one_checkpoints AS
                         SELECT * FROM checkpoints ORDER BY checkpoint_id DESC LIMIT 1;
                     CREATE TABLE {schema}.one_checkpoint_blobs AS
                         SELECT * FROM checkpoint_blobs ORDER BY length(blob) DESC NULLS LAST LIMIT 1;"
                ),
                format!(
                    "WITH id AS (SELECT lpad(nextval('{schema}.ids')::text, 36, '0') AS v), \
                     value AS ({values}) {rows};"
                ),
            )
        }
    };
    sqlx::raw_sql(&format!(
        "CREATE SCHEMA {schema}; CREATE SEQUENCE {schema}.ids; {tables}"
    ))
    .execute(pool)
    .await
    .context("cannot create the pgbench tables")?;
    let script = tempfile::NamedTempFile::new()?;
    writeln!(script.as_file(), "{statement}")?;
    let threads = if clients == 1 { 1 } else { 2 };
    let seconds = scale.samples + 1;
    let run = Command::new("pgbench")
        .args(["-n", "-M", "prepared", "-P", "1"])
        .args(["-c", &clients.to_string(), "-j", &threads.to_string()])
        .args(["-T", &seconds.to_string(), "-f"])
        .arg(script.path())
        .arg(url)
        .output();
    let dropped = sqlx::raw_sql(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(pool)
        .await;
    let out = ran("pgbench", run)?;
    dropped.context("cannot drop the pgbench tables")?;
    pgbench_rates(
        &String::from_utf8_lossy(&out.stderr),
        &String::from_utf8_lossy(&out.stdout),
    )
}

/// The tps of pgbench's `progress:` lines but the first, else its final `tps = ` figure.
fn pgbench_rates(progress: &str, summary: &str) -> Result<Vec<f64>> {
    let seconds: Vec<f64> = progress
        .lines()
        .filter(|l| l.starts_with("progress:"))
        .filter_map(|l| {
            l.split(", ")
                .find_map(|part| part.strip_suffix(" tps")?.trim().parse().ok())
        })
        .skip(1)
        .collect();
    if !seconds.is_empty() {
        return Ok(seconds);
    }
    let total = summary
        .lines()
        .find_map(|l| l.strip_prefix("tps = ")?.split(' ').next()?.parse().ok())
        .context("pgbench printed no tps figure")?;
    Ok(vec![total])
}

/// Puts/s of `redis-benchmark -c 1` sending, per request, EVALSHA of a script making the
/// writes of one put's MULTI/EXEC (the same commands, keys of the same shape, values of the
/// sizes our put stored; fresh checkpoint keys, fields and members every request). A put of
/// the workload hands over every channel's value and sends each (`HSETNX`: a value already
/// stored at its version is left as it is, and one that is not is never dropped): the new
/// channel's under a fresh field, the others' under fields stored already.
/// redis-benchmark sends one command per request, so the transaction is a script; its server
/// time is a little above MULTI/EXEC's, which makes this limit a little lower. Our saver's
/// puts take turns with it (see [`Alternating`]).
async fn redis_benchmark(url: &str, scale: &Scale) -> Result<Alternating> {
    let saver = servers::redis_saver(url).await?;
    let value = checkpoints::channel_value();
    let items = checkpoints::history(6, &value);
    // The values one put hands over (every channel's).
    let values = items.last().map_or(1, |(cp, _, _)| cp.channel_values.len());
    checkpoints::put_all(&saver, "limit", items).await?;
    let mut conn = saver.connection();
    let prefix = saver.config().prefix.clone();
    let fields = |pattern: String| {
        let mut conn = conn.clone();
        async move {
            let keys = scan(&mut conn, &pattern).await?;
            let key = keys.first().with_context(|| format!("no key {pattern}"))?;
            let hash: BTreeMap<Vec<u8>, Vec<u8>> = redis::cmd("HGETALL")
                .arg(key)
                .query_async(&mut conn)
                .await?;
            Ok::<_, anyhow::Error>(hash)
        }
    };
    let record = fields(format!("{prefix}:*checkpoint:*")).await?;
    let blobs = fields(format!("{prefix}:*blobs:*")).await?;
    let size = |field: &str| record.get(field.as_bytes()).map_or(0, Vec::len);
    let blob = blobs
        .iter()
        .max_by_key(|(_, v)| v.len())
        .context("no value")?;
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(PUT_SCRIPT)
        .query_async(&mut conn)
        .await?;
    saver.delete_thread("limit").await?;

    let base = format!("limit-{}:{{t}}:", uuid::Uuid::new_v4().simple());
    // A placeholder redis-benchmark replaces by 12 random digits per request (with -r).
    let id = |len: usize| format!("__rand_int__{}", "0".repeat(len.saturating_sub(12)));
    let fill = |len: usize| "x".repeat(len.max(1));
    let id_len = 36;
    let mut args: Vec<String> = vec![
        "EVALSHA".into(),
        sha,
        "7".into(),
        format!("{base}checkpoint:0::{}", id(id_len)),
        format!("{base}ns:0:"),
        format!("{base}index"),
        format!("{base}blobs:0:"),
        format!("{base}registry"),
        format!("{base}meta"),
        format!("{base}global"),
        fill(size("p")),
        fill(size("c")),
        fill(size("m")),
        fill(size("b")),
        id(id_len),
        id(id_len + 2),
        id(id_len + 2 + 36),
        id(blob.0.len()),
        fill(blob.1.len()),
    ];
    // The values of the channels the put does not version anew, under fields that the first
    // request stores and later ones find.
    for carried in 1..values {
        args.push(format!("{carried:0>len$}", len = blob.0.len()));
        args.push(fill(blob.1.len()));
    }
    let server = url::Url::parse(url).context("the Redis URL does not parse")?;
    let mut command = Command::new("redis-benchmark");
    command
        .args(["-h", server.host_str().unwrap_or("127.0.0.1")])
        .args(["-p", &server.port().unwrap_or(6379).to_string()])
        .args(["-c", "1", "-r", "1000000000000", "-q"])
        .args(["-n", &scale.puts.max(100).to_string()]);
    if let Some(password) = server.password() {
        command.args(["-a", password]);
        if !server.username().is_empty() {
            command.args(["--user", server.username()]);
        }
    }
    if let Ok(db) = server.path().trim_matches('/').parse::<u32>() {
        command.args(["--dbnum", &db.to_string()]);
    }
    if server.scheme() == "rediss" {
        command.args(["--tls", "--insecure"]);
    }
    command.args(&args);
    let mut done = Alternating::default();
    for round in 0..=scale.samples {
        let ours = put_rate(&saver, scale.puts, &value).await?;
        let out = ran("redis-benchmark", command.output());
        for key in scan(&mut conn, &format!("{base}*")).await? {
            redis::cmd("UNLINK").arg(key).exec_async(&mut conn).await?;
        }
        let rate = redis_rate(&String::from_utf8_lossy(&out?.stdout))?;
        // The first round warms both up.
        if round > 0 {
            done.ours.push(ours);
            done.limit.push(rate);
        }
    }
    Ok(done)
}

/// The writes of one put's MULTI/EXEC on a standalone server (`put_pipeline` and the global
/// index entry), as a script: KEYS checkpoint, ns index, thread index, blobs, registry, meta,
/// global index; ARGV parent, checkpoint, metadata, fields, id, index member, global member,
/// then each value's blob field and value.
const PUT_SCRIPT: &str = "redis.call('HSETNX', KEYS[1], 'p', ARGV[1])
redis.call('HSET', KEYS[1], 'c', ARGV[2], 'm', ARGV[3], 'b', ARGV[4])
redis.call('ZADD', KEYS[2], 0, ARGV[5])
redis.call('ZADD', KEYS[3], 0, ARGV[6])
for i = 8, #ARGV - 1, 2 do redis.call('HSETNX', KEYS[4], ARGV[i], ARGV[i + 1]) end
redis.call('SADD', KEYS[5], KEYS[1], KEYS[2], KEYS[3], KEYS[4])
redis.call('HINCRBY', KEYS[6], 'gen', 1)
redis.call('ZADD', KEYS[7], 0, ARGV[7])
return 1";

/// Every key matching `pattern`.
async fn scan(
    conn: &mut (impl ConnectionLike + Send + Sync),
    pattern: &str,
) -> Result<Vec<String>> {
    let mut found = conn.scan_match::<_, String>(pattern).await?;
    let mut keys = Vec::new();
    while let Some(key) = found.next_item().await {
        keys.push(key?);
    }
    Ok(keys)
}

/// The requests per second of redis-benchmark's `-q` output (its last figure).
fn redis_rate(out: &str) -> Result<f64> {
    out.split(['\r', '\n'])
        .filter_map(|line| {
            let (before, _) = line.split_once(" requests per second")?;
            before.rsplit(' ').next()?.parse().ok()
        })
        .next_back()
        .context("redis-benchmark printed no requests per second")
}

/// A finished tool's output, or why it did not run or failed.
fn ran(tool: &str, out: std::io::Result<Output>) -> Result<Output> {
    match out {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!("{tool} is not installed"),
        Err(e) => Err(e).with_context(|| format!("cannot run {tool}")),
        Ok(out) if !out.status.success() => bail!(
            "{tool} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Ok(out) => Ok(out),
    }
}

/// fdatasync calls per second, each after appending `SYNC_BYTES` to a file in `path`'s
/// directory.
fn fdatasync(path: &Path, window: Duration, samples: usize) -> Result<Vec<f64>> {
    let mut file = std::fs::File::create(path)?;
    let block = vec![7u8; SYNC_BYTES];
    let rates = throughput(window.max(Duration::from_millis(100)), samples, || {
        file.write_all(&block)?;
        file.sync_data()?;
        Ok(1)
    });
    drop(file);
    let _ = std::fs::remove_file(path);
    rates
}

/// GB/s of copying `COPY_BYTES` from one buffer to another.
fn memcpy(window: Duration, samples: usize) -> Result<Vec<f64>> {
    let source = vec![1u8; COPY_BYTES];
    let mut target = vec![0u8; COPY_BYTES];
    let rates = throughput(window.max(Duration::from_millis(100)), samples, || {
        target.copy_from_slice(std::hint::black_box(&source));
        std::hint::black_box(&mut target);
        Ok(COPY_BYTES)
    })?;
    Ok(rates.into_iter().map(|r| r / 1e9).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pgbench_progress_lines_give_the_samples_but_the_first() -> Result<()> {
        let progress = "starting vacuum...end.\n\
            progress: 1.0 s, 1200.5 tps, lat 0.8 ms stddev 0.1, 0 failed\n\
            progress: 2.0 s, 1500.0 tps, lat 0.6 ms stddev 0.1, 0 failed\n\
            progress: 3.0 s, 1400.0 tps, lat 0.7 ms stddev 0.1\n";
        assert_eq!(pgbench_rates(progress, "")?, [1500.0, 1400.0]);
        let summary = "number of failed transactions: 0 (0.000%)\n\
            tps = 1525.123456 (without initial connection time)\n";
        assert_eq!(pgbench_rates("", summary)?, [1525.123456]);
        assert!(pgbench_rates("", "nothing").is_err());
        Ok(())
    }

    #[test]
    fn redis_benchmark_quiet_output_gives_the_last_rate() -> Result<()> {
        let out = "EVALSHA abc: rps=0.0 (overall: nan) avg_msec=nan\r\
            EVALSHA abc 7 k: 15432.10 requests per second, p50=0.063 msec\n\n";
        assert_eq!(redis_rate(out)?, 15432.10);
        assert!(redis_rate("ERROR").is_err());
        Ok(())
    }
}
