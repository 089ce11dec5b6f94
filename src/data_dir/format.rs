//! Format versions: the data directory and the ingestion log each say which format they are in,
//! so a server never reads (or "repairs") files it does not understand.
//!
//! Why: the log's scan takes the first frame it cannot read for the torn end of a crash and
//! writes over it, and SQLite would happily open a database whose tables mean something else.
//! A file a newer airq wrote must stop an older one before it opens anything, with a message
//! that says so; the README's "Upgrades" states the policy: a release reads the formats of every
//! earlier release and upgrades them in place; it never reads a newer one.
//!
//! A directory's version is one line, the format number, in a small file beside what it
//! versions. A directory without the file is new (it is stamped with the current format), unless
//! it already holds data: then it was written before formats were stamped, by a pre-release
//! build no release reads.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Why a directory's format is not one this airq reads.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// A newer airq wrote it.
    #[error(
        "{path} is in format {found}, written by a newer airq; this airq ({version}) reads format \
         {known}: run the newer airq, or see the README's \"Upgrades\""
    )]
    Newer {
        /// The version file.
        path: PathBuf,
        /// The format it names.
        found: u32,
        /// The format this airq reads.
        known: u32,
        /// This airq's version.
        version: &'static str,
    },
    /// The version file does not hold a format number.
    #[error("{path} does not name a format this airq knows (it holds {text:?})")]
    Unknown {
        /// The version file.
        path: PathBuf,
        /// What it holds (the first few bytes).
        text: String,
    },
    /// The directory holds data but no version: a pre-release build wrote it.
    #[error(
        "{dir} holds data but no format version ({file}): it was written by a pre-release airq, \
         whose formats no release reads; move it aside and start with an empty directory"
    )]
    PreRelease {
        /// The directory.
        dir: PathBuf,
        /// The version file it lacks.
        file: &'static str,
    },
    /// The version file could not be read or written.
    #[error("format version {path}")]
    Io {
        /// The version file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Checks that `dir`'s version file `file` names format `current`, stamping a directory that
/// has none and holds no data (`holds_data`) with it.
pub fn check_or_stamp(
    dir: &Path,
    file: &'static str,
    current: u32,
    holds_data: bool,
) -> Result<(), FormatError> {
    let path = dir.join(file);
    let io = |source| FormatError::Io {
        path: path.clone(),
        source,
    };
    match std::fs::read(&path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            match text.trim().parse::<u32>() {
                Ok(found) if found == current => Ok(()),
                Ok(found) if found > current => Err(FormatError::Newer {
                    path,
                    found,
                    known: current,
                    version: env!("CARGO_PKG_VERSION"),
                }),
                _ => Err(FormatError::Unknown {
                    text: text.chars().take(32).collect(),
                    path,
                }),
            }
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            if holds_data {
                return Err(FormatError::PreRelease {
                    dir: dir.to_owned(),
                    file,
                });
            }
            stamp(dir, &path, current).map_err(io)
        }
        Err(error) => Err(io(error)),
    }
}

/// Writes the version file whole (a temporary file renamed over it) and makes it durable.
fn stamp(dir: &Path, path: &Path, current: u32) -> std::io::Result<()> {
    let temporary = path.with_extension("new");
    let mut file = std::fs::File::create(&temporary)?;
    writeln!(file, "{current}")?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)?;
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "FORMAT";

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"))
    }

    #[test]
    fn a_new_directory_is_stamped_with_the_current_format_and_then_reads() {
        let dir = dir();
        assert!(check_or_stamp(dir.path(), FILE, 3, false).is_ok());
        let stamped = std::fs::read_to_string(dir.path().join(FILE)).unwrap_or_default();
        assert_eq!(stamped, "3\n");
        assert!(check_or_stamp(dir.path(), FILE, 3, true).is_ok());
    }

    #[test]
    fn a_newer_format_is_refused_and_names_both_formats() {
        let dir = dir();
        std::fs::write(dir.path().join(FILE), "4\n").unwrap_or_else(|error| panic!("{error}"));
        let refused = check_or_stamp(dir.path(), FILE, 3, true);
        assert!(matches!(
            refused,
            Err(FormatError::Newer {
                found: 4,
                known: 3,
                ..
            })
        ));
    }

    #[test]
    fn an_unreadable_version_is_refused() {
        let dir = dir();
        for text in ["", "three", "0x3", "-1"] {
            std::fs::write(dir.path().join(FILE), text).unwrap_or_else(|error| panic!("{error}"));
            let refused = check_or_stamp(dir.path(), FILE, 3, true);
            assert!(
                matches!(refused, Err(FormatError::Unknown { .. })),
                "{text:?}"
            );
        }
    }

    #[test]
    fn data_without_a_version_is_refused_and_left_unstamped() {
        let dir = dir();
        let refused = check_or_stamp(dir.path(), FILE, 3, true);
        assert!(matches!(refused, Err(FormatError::PreRelease { .. })));
        assert!(!dir.path().join(FILE).exists());
    }
}
