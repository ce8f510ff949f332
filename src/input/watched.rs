//! The files an input was read from, watched: each checked unchanged before the output is
//! committed.

use std::fs::File;
use std::sync::Arc;

use super::source::Version;
use super::{DataFile, FileRecord, Stamp};
use crate::location::Location;

/// A file an input was read from, and what it was then, checked unchanged before the
/// output is committed. 16 bytes: a join may have 100,000 inputs.
pub(crate) struct Watched {
    /// Where it is (the input's own location, or one of its shards') and what it was when opened;
    /// shared with the tensors' [`DataFile`] when the file is closed.
    pub(super) record: Arc<FileRecord>,
    /// The file, while it is kept open.
    pub(super) open: Option<Arc<File>>,
}

impl Watched {
    /// The file or object at `location`, as `version` was when it was read, not kept open:
    /// checked again by its source's head (a copy of an object in a temporary file is not
    /// the input).
    pub(crate) fn closed(location: &Location, version: Version) -> Watched {
        Watched {
            record: Arc::new(FileRecord {
                location: location.clone(),
                version,
            }),
            open: None,
        }
    }

    /// What was opened at `location` for `file`, as `version` describes it: a local file as
    /// [`Watched::new`] watches it, an object by its source.
    pub(crate) fn of(location: &Location, file: &DataFile, version: Version) -> Watched {
        match version {
            Version::Local(stamp) => Watched::new(location, file, stamp),
            Version::Tag(_) => match file {
                DataFile::Remote(remote) => Watched {
                    record: Arc::clone(&remote.record),
                    open: None,
                },
                _ => Watched::closed(location, version),
            },
        }
    }

    /// `file`, found at `location` as `stamp` describes it.
    pub(crate) fn new(location: &Location, file: &DataFile, stamp: Stamp) -> Watched {
        match file {
            DataFile::Closed(record) => Watched {
                record: Arc::clone(record),
                open: None,
            },
            DataFile::Open(file) => Watched {
                record: Arc::new(FileRecord {
                    location: location.clone(),
                    version: Version::Local(stamp),
                }),
                open: Some(Arc::clone(file)),
            },
            DataFile::Remote(remote) => Watched {
                record: Arc::clone(&remote.record),
                open: None,
            },
            // A member's inflated copy is not the input: the input is watched by its path.
            DataFile::Inflated(_) => Watched {
                record: Arc::new(FileRecord {
                    location: location.clone(),
                    version: Version::Local(stamp),
                }),
                open: None,
            },
        }
    }
}
