//! The data directory's lock: one server per data directory.
//!
//! Why: everything a server keeps in its data directory (the ingestion log's segments, SQLite's
//! `airq.db`, the receipt ids) assumes a single writer. A second server on the same directory
//! numbered its receipts from the same counter and overwrote the first one's log segments, so
//! about half of what both acknowledged was gone after a restart. The lock is an advisory
//! exclusive lock (`flock`) on the directory itself, taken before anything else is opened and
//! held for the life of the process; the kernel releases it when the process ends, `kill -9`
//! included, so a crash never leaves a stale lock behind. It is the directory's, not a file's
//! inside it: a lock file can be deleted while its server runs (an age-based cleaner under
//! `/tmp` removes an empty file nobody writes), and the next server then locked a new file of
//! the same name and ran beside the first. `airq token` takes no lock: it only reads the issuer's
//! secret, which a running server never changes.
//!
//! The directory also carries its format version ([`format`], [`FORMAT_FILE`]), checked once the
//! lock is held and before anything in it is opened.

pub mod format;

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};

use self::format::FormatError;

/// The file holding the data directory's format version.
pub const FORMAT_FILE: &str = "airq-format";
/// The data directory's format: the layout of everything in it (`airq.db`, whose schema
/// `PRAGMA user_version` also counts, the ingestion log, the spool, the token secret). A release
/// that changes any of them raises it and upgrades earlier formats at start.
pub const FORMAT: u32 = 1;

/// Why the data directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    /// Another process holds the lock.
    #[error(
        "{0} is in use by another airq process (it holds the data directory's lock); \
         each server needs a data directory of its own"
    )]
    InUse(PathBuf),
    /// The path names something else than a directory.
    #[error("{0} is not a directory")]
    NotADirectory(PathBuf),
    /// The directory's format is not one this airq reads.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// The directory could not be created or locked.
    #[error("locking the data directory {path}")]
    Io {
        /// The data directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The held lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct DataDirLock {
    path: PathBuf,
    _directory: File,
}

impl DataDirLock {
    /// Creates `data_dir` if missing and takes its lock, or says who has it.
    pub fn acquire(data_dir: &Path) -> Result<Self, DataDirError> {
        let io = |source| DataDirError::Io {
            path: data_dir.to_owned(),
            source,
        };
        if data_dir.exists() && !data_dir.is_dir() {
            return Err(DataDirError::NotADirectory(data_dir.to_owned()));
        }
        std::fs::create_dir_all(data_dir).map_err(io)?;
        let directory = File::open(data_dir).map_err(io)?;
        exclusive(&directory, data_dir)?;
        Ok(Self {
            path: data_dir.to_owned(),
            _directory: directory,
        })
    }

    /// Checks that the directory is in [`FORMAT`], stamping a new one; `holds_data` says whether
    /// it holds anything a server wrote (a directory with data but no version is refused).
    pub fn check_format(&self, holds_data: bool) -> Result<(), DataDirError> {
        Ok(format::check_or_stamp(
            &self.path,
            FORMAT_FILE,
            FORMAT,
            holds_data,
        )?)
    }
}

/// Takes `file`'s exclusive lock without waiting, or says that the data directory is in use.
fn exclusive(file: &File, data_dir: &Path) -> Result<(), DataDirError> {
    file.try_lock().map_err(|error| match error {
        TryLockError::WouldBlock => DataDirError::InUse(data_dir.to_owned()),
        TryLockError::Error(source) => DataDirError::Io {
            path: data_dir.to_owned(),
            source,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_same_directory_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"));
        let first = DataDirLock::acquire(dir.path());
        assert!(first.is_ok());
        assert!(matches!(
            DataDirLock::acquire(dir.path()),
            Err(DataDirError::InUse(_))
        ));
        drop(first);
        assert!(DataDirLock::acquire(dir.path()).is_ok());
    }
}
