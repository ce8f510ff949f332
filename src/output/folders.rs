//! The folders a run makes for its outputs (a sharded checkpoint's folder, `-o
//! 'tp{rank}/model.safetensors'`'s `tp0`, `tp1`, ...): removed again, when still empty,
//! unless the outputs are committed.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The folders made so far, removed again (when empty) on drop unless kept.
#[derive(Debug, Default)]
pub struct Folders(Vec<PathBuf>);

impl Folders {
    /// No folder made yet.
    pub fn none() -> Folders {
        Folders(Vec::new())
    }

    /// Makes `folder` if it is missing, one level deep: a folder whose own folder does not
    /// exist is refused, as a typo is more likely than a wish for a tree.
    pub fn make_one(&mut self, folder: &Path) -> Result<()> {
        if folder.is_dir() || self.0.iter().any(|m| m == folder) {
            return Ok(());
        }
        let above = folder.parent().filter(|f| !f.as_os_str().is_empty());
        if above.is_some_and(|above| !above.is_dir()) {
            return Err(Error::refused(
                format!(
                    "cannot write into {}: neither it nor the folder above exists",
                    crate::messages::path(folder)
                ),
                "create the folders first (tjoin split makes only the last one)",
            ));
        }
        self.create(folder)
    }

    /// Creates `folder`, which does not exist yet.
    pub fn create(&mut self, folder: &Path) -> Result<()> {
        std::fs::create_dir(folder)
            .map_err(|e| Error::io("create the output folder", folder, e))?;
        self.0.push(folder.to_path_buf());
        Ok(())
    }

    /// The outputs are committed: the folders stay.
    pub fn keep(mut self) {
        self.0.clear();
    }
}

impl Drop for Folders {
    fn drop(&mut self) {
        for folder in self.0.iter().rev() {
            // Only an empty folder goes; anything else in it is not this run's to remove.
            let _ = std::fs::remove_dir(folder);
        }
    }
}
