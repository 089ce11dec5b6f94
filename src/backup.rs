//! `airq backup DEST`: a consistent copy of an embedded data directory while its server runs.
//!
//! Why it is consistent without stopping anything: a reading is durable in the ingestion log
//! before its 201, and leaves the log only once the fold has put it into `airq.db` and moved the
//! watermark past it. So the log is copied first — every reading acknowledged before the backup
//! began is in it, or already folded — and `airq.db` second, through SQLite's online backup API
//! (a snapshot of one moment, taken page by page while the server goes on writing): whatever left
//! the log between the two copies is in the database copy, since the fold moved it there before
//! the log let it go. The restored directory is then a data directory like after a crash: its
//! start folds what the copied log holds past the copied watermark, once.
//!
//! The copy is written to a temporary directory beside `DEST` and renamed into place when
//! complete and synced, so `DEST` is either a whole backup or not there. Restoring is starting a
//! server on it (`airq serve --data-dir DEST`), or moving it where the data directory belongs.
//! Only the data directory is copied: with PostgreSQL or QuestDB, back those up with their own
//! tools.

use std::fs::File;
use std::path::{Path, PathBuf};

use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};

use crate::auth::LocalIssuer;
use crate::data_dir::FORMAT_FILE;
use crate::store::ingest_log::{self, IngestLog};
use crate::store::sqlite::Sqlite;

/// SQLite pages copied per step of the online backup: all of them in one step, one read
/// transaction. In WAL mode a reader never holds up the writer, and a copy in several steps
/// would start over each time the fold commits between two of them.
const PAGES_PER_STEP: i32 = -1;

/// Why a backup failed; nothing is left at `DEST` then.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// The source is not a data directory this airq wrote.
    #[error("{0} is not an airq data directory (it has no {FORMAT_FILE})")]
    NotADataDir(PathBuf),
    /// The destination exists and is not an empty directory.
    #[error("{0} exists and is not an empty directory; a backup never overwrites anything")]
    DestinationInUse(PathBuf),
    /// A file could not be read, written or synced.
    #[error("{path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The database copy failed.
    #[error("copying {0}")]
    Database(PathBuf, #[source] rusqlite::Error),
    /// The copied log could not be read back.
    #[error("reading the copied ingestion log")]
    Log(#[source] crate::store::StoreError),
}

/// What a backup holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackupReport {
    /// The highest receipt id in the copied database (its fold watermark).
    pub folded_through: i64,
    /// Readings in the copied log past that watermark (folded at the restored start).
    pub unfolded: usize,
    /// The highest receipt id in the copy: every reading acknowledged before the backup began
    /// has an id up to it.
    pub through: i64,
}

/// Copies the data directory `source` to `destination`.
pub fn run(source: &Path, destination: &Path) -> Result<BackupReport, BackupError> {
    if !source.join(FORMAT_FILE).is_file() {
        return Err(BackupError::NotADataDir(source.to_owned()));
    }
    let in_use = destination.exists()
        && (!destination.is_dir()
            || std::fs::read_dir(destination)
                .map_err(failed_at(destination))?
                .next()
                .is_some());
    if in_use {
        return Err(BackupError::DestinationInUse(destination.to_owned()));
    }
    let parent = destination
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = destination
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "backup".to_owned());
    let partial = parent.join(format!(".{name}.partial-{}", std::process::id()));
    let written = copy(source, &partial).and_then(|report| {
        sync(&partial)?;
        if destination.exists() {
            std::fs::remove_dir(destination).map_err(failed_at(destination))?;
        }
        std::fs::rename(&partial, destination).map_err(failed_at(destination))?;
        sync(parent)?;
        Ok(report)
    });
    if written.is_err() {
        let _ = std::fs::remove_dir_all(&partial);
    }
    written
}

/// The copy itself, into `into` (created): the log, then the database, then the rest.
fn copy(source: &Path, into: &Path) -> Result<BackupReport, BackupError> {
    let log_into = into.join(IngestLog::DIR);
    std::fs::create_dir_all(&log_into).map_err(failed_at(&log_into))?;
    let log = source.join(IngestLog::DIR);
    if log.is_dir() {
        let mut segments: Vec<PathBuf> = std::fs::read_dir(&log)
            .map_err(failed_at(&log))?
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| {
                path.extension().is_some_and(|extension| extension == "log")
                    || path
                        .file_name()
                        .is_some_and(|name| name == IngestLog::FORMAT_FILE)
            })
            .collect();
        segments.sort();
        for segment in segments {
            let Some(name) = segment.file_name() else {
                continue;
            };
            let target = log_into.join(name);
            match std::fs::copy(&segment, &target) {
                Ok(_) => sync(&target)?,
                // Pruned meanwhile: everything in it was folded, so the database copy has it.
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(failed_at(&segment)(error)),
            }
        }
    }
    sync(&log_into)?;

    let database = source.join(Sqlite::FILE);
    let database_into = into.join(Sqlite::FILE);
    let failed = |error| BackupError::Database(database.clone(), error);
    let from = Connection::open_with_flags(
        &database,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(failed)?;
    let mut to = Connection::open(&database_into).map_err(failed)?;
    {
        let backup = Backup::new(&from, &mut to).map_err(failed)?;
        // Busy or Locked only while another connection holds a lock this step needs: wait a
        // moment and step again.
        while backup.step(PAGES_PER_STEP).map_err(failed)? != StepResult::Done {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    let folded_through: i64 = to
        .query_row(
            "SELECT coalesce(max(value), 0) FROM counters WHERE name = 'folded_id'",
            [],
            |row| row.get(0),
        )
        .map_err(failed)?;
    drop(to);
    sync(&database_into)?;

    for file in [LocalIssuer::FILE, FORMAT_FILE] {
        let from = source.join(file);
        if from.is_file() {
            let target = into.join(file);
            std::fs::copy(&from, &target).map_err(failed_at(&from))?;
            sync(&target)?;
        }
    }

    let (logged, _) = ingest_log::unconsumed(into).map_err(BackupError::Log)?;
    let past: Vec<i64> = logged
        .iter()
        .map(|stored| i64::try_from(stored.id.get()).unwrap_or(i64::MAX))
        .filter(|id| *id > folded_through)
        .collect();
    Ok(BackupReport {
        folded_through,
        unfolded: past.len(),
        through: past.iter().copied().max().unwrap_or(0).max(folded_through),
    })
}

/// The error of a failed read, write or sync of `path`.
fn failed_at(path: &Path) -> impl FnOnce(std::io::Error) -> BackupError {
    let path = path.to_owned();
    move |source| BackupError::Io { path, source }
}

/// Makes a file, or a directory's entries, durable.
fn sync(path: &Path) -> Result<(), BackupError> {
    File::open(path)
        .and_then(|file| file.sync_all())
        .map_err(failed_at(path))
}
