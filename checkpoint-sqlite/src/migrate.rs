//! The one migration runner of the crate, for the saver's tables and the store's.
//!
//! A [`Ledger`] is a list of migrations and the table that records which of them a database
//! has applied (one row per version). [`migrate`] applies what is missing of several ledgers
//! in one `IMMEDIATE` transaction that re-reads the versions: processes migrating at once
//! serialize on SQLite's write lock and the later ones find nothing to do, and a crash or a
//! refusal leaves the schema as it was.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use crate::error::Failure;

/// One migration.
pub(crate) struct Migration {
    /// The statements.
    pub(crate) sql: &'static str,
    /// The `(table, column)` an `ALTER TABLE ... ADD COLUMN` adds: skipped (but recorded) when
    /// the table already has it, so a half-recorded schema still migrates.
    pub(crate) adds_column: Option<(&'static str, &'static str)>,
}

impl Migration {
    /// A migration of plain statements.
    pub(crate) const fn sql(sql: &'static str) -> Self {
        Migration {
            sql,
            adds_column: None,
        }
    }
}

/// What a ledger does with versions newer than it knows.
#[derive(Clone, Copy)]
pub(crate) enum Newer {
    /// Refuses the database, naming the schema ("" or "store ") in the error.
    Refuse(&'static str),
    /// Leaves them be (another library's migrations that only add to its schema).
    #[cfg_attr(not(feature = "store"), allow(dead_code))]
    Ignore,
}

/// Migrations and the table recording them.
pub(crate) struct Ledger {
    /// The table recording applied versions, one row each in its column `v`.
    pub(crate) table: &'static str,
    /// The statement creating that table if it is missing.
    pub(crate) create: &'static str,
    /// The version of the first migration.
    pub(crate) first: i64,
    /// The migrations, in order: a migration's version is `first` plus its position.
    pub(crate) migrations: &'static [Migration],
    /// What versions past the last migration mean.
    pub(crate) newer: Newer,
}

impl Ledger {
    /// The newest version this build knows.
    pub(crate) fn latest(&self) -> i64 {
        self.first + self.migrations.len() as i64 - 1
    }

    /// The newest applied version; `None` before the first (no table, or an empty one).
    pub(crate) fn applied(&self, conn: &Connection) -> Result<Option<i64>, Failure> {
        if !has_table(conn, self.table)? {
            return Ok(None);
        }
        Ok(conn
            .query_row(
                &format!("SELECT v FROM {} ORDER BY v DESC LIMIT 1", self.table),
                [],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Refuses a database migrated past this build, when this ledger refuses newer versions.
    pub(crate) fn refuse_newer(&self, conn: &Connection) -> Result<(), Failure> {
        let Newer::Refuse(what) = self.newer else {
            return Ok(());
        };
        match self.applied(conn)? {
            Some(found) if found > self.latest() => Err(Failure::Newer {
                what,
                found,
                latest: self.latest(),
            }),
            _ => Ok(()),
        }
    }

    /// Applies the missing migrations within the caller's transaction.
    fn apply(&self, tx: &Connection) -> Result<(), Failure> {
        self.refuse_newer(tx)?;
        tx.execute_batch(self.create)?;
        let next = self.applied(tx)?.map_or(self.first, |v| v + 1);
        let position = usize::try_from(next - self.first)
            .map_err(|_| Failure::Corrupt(format!("`{}` records version {next}", self.table)))?;
        for (offset, migration) in self.migrations.iter().enumerate().skip(position) {
            let present = match migration.adds_column {
                Some((table, column)) => has_column(tx, table, column)?,
                None => false,
            };
            if !present {
                tx.execute_batch(migration.sql)?;
            }
            tx.execute(
                &format!("INSERT INTO {} (v) VALUES (?1)", self.table),
                [self.first + offset as i64],
            )?;
        }
        Ok(())
    }
}

/// Applies the missing migrations of `ledgers` in order, in one `IMMEDIATE` transaction,
/// after `check` (which may refuse the database) ran in it. Idempotent.
pub(crate) fn migrate(
    conn: &mut Connection,
    check: fn(&Connection) -> Result<(), Failure>,
    ledgers: &[&Ledger],
) -> Result<(), Failure> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Dropped without commit on an error: nothing is changed.
    check(&tx)?;
    for ledger in ledgers {
        ledger.apply(&tx)?;
    }
    Ok(tx.commit()?)
}

/// Whether the database has a table called `name`.
pub(crate) fn has_table(conn: &Connection, name: &str) -> Result<bool, Failure> {
    Ok(conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
        [name],
        |r| r.get(0),
    )?)
}

/// Whether `table` has `column`.
fn has_column(conn: &Connection, table: &str, column: &str) -> Result<bool, Failure> {
    Ok(conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2)",
        [table, column],
        |r| r.get(0),
    )?)
}
