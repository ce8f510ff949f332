//! The staging folders of a run that writes object storage: the output before its upload
//! (remote inputs are read by range, or copied into unnamed temporary files, by the input
//! stage). Removed when dropped, and, should SIGINT, SIGTERM or SIGHUP end the process
//! first, by the signal handler ([`on_signal`]), which also aborts the uploads under way: an
//! interrupted run leaves neither a staged output in `TMPDIR` nor a billed upload.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

static STAGING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn staging() -> MutexGuard<'static, Vec<PathBuf>> {
    STAGING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A staging folder in the temporary folder (`TMPDIR`), named `.{prefix}XXXXXX`.
pub struct Staging {
    folder: tempfile::TempDir,
}

impl Staging {
    /// Creates one, registered for removal on a signal before it exists (the registry is
    /// locked until then, so no signal finds it unregistered).
    pub fn new(prefix: &str) -> io::Result<Staging> {
        let mut registry = staging();
        let folder = tempfile::Builder::new().prefix(prefix).tempdir()?;
        registry.push(folder.path().to_path_buf());
        Ok(Staging { folder })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        self.folder.path()
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let mut registry = staging();
        if let Some(at) = registry.iter().position(|p| p == self.folder.path()) {
            registry.swap_remove(at);
        }
    }
}

/// What a signal that ends the process does first for object storage: every upload under
/// way aborted, every staging folder removed.
pub fn on_signal() {
    super::upload::abort_uploads();
    for folder in staging().drain(..) {
        let _ = std::fs::remove_dir_all(folder);
    }
}
