//! Several outputs written as one: the split command's, one per part or rank, each a file or a
//! sharded checkpoint planned by its kind (`src/output/kind/`). They are checked together
//! before anything is written, their files are the members of one [`OutputSet`], and they are
//! committed together: a failure or an interrupt leaves none of them, a success all.
//!
//! Outputs named by URL (every one of them, or none: the config stage refuses a mix, whose
//! renames and completions could not appear as one) are the uploads of one [`Uploads`]
//! instead, every file of every output in order: nothing is completed before every file is
//! written, a failure or an interrupt before then aborts them all, and the commit completes
//! them in order, each sharded output's index after its shards (`src/output/upload.rs`).

use std::path::PathBuf;

use super::kind::Planned;
use super::upload::{self, Uploads};
use super::{Member, OutputSet};
use crate::error::{Error, Refusal, Result};
use crate::format::{OutTensor, Sink};

/// Outputs planned each by its kind, written and committed together.
pub struct Several<'p> {
    outputs: Vec<&'p Planned>,
    no_clobber: bool,
}

impl<'p> Several<'p> {
    /// The outputs `outputs`, in the order their files are written; `no_clobber` refuses to
    /// replace an existing file.
    pub fn new(outputs: Vec<&'p Planned>, no_clobber: bool) -> Several<'p> {
        Several {
            outputs,
            no_clobber,
        }
    }

    /// Every file of every output, in the order they are written: each output's files, then
    /// its index.
    pub fn targets(&self) -> Vec<PathBuf> {
        self.outputs.iter().flat_map(|o| o.targets()).collect()
    }

    /// Whether the outputs are objects named by URL, uploaded as they are written.
    pub fn uploaded(&self) -> bool {
        let targets = self.targets();
        !targets.is_empty() && targets.iter().all(|t| upload::is_url(t))
    }

    /// Refuses, before anything is written, outputs that exist (`--no-clobber`), naming
    /// each. Objects are checked by [`Several::open`], before a byte of any is sent.
    pub fn check_no_clobber(&self) -> Result<()> {
        if !self.no_clobber || self.uploaded() {
            return Ok(());
        }
        let existing: Vec<String> = self
            .targets()
            .iter()
            .filter(|path| path.symlink_metadata().is_ok())
            .map(|path| crate::messages::path(path))
            .collect();
        if existing.is_empty() {
            return Ok(());
        }
        Err(Error::Refused(vec![Refusal {
            headline: format!(
                "--no-clobber: {} of the outputs exist already",
                existing.len()
            ),
            details: crate::error::capped(existing, 10),
            hint: Some(
                "remove them, name other outputs, or drop --no-clobber to replace them".to_string(),
            ),
        }]))
    }

    /// Opens every file of every output: objects named by URL as uploads, sized by their
    /// tensors (`described`: each output's job, as its writer sees it), else local files
    /// ([`Several::open`]).
    pub fn open_outputs(&self, described: &[&[OutTensor]]) -> Result<Opened> {
        if self.uploaded() {
            let targets: Vec<(PathBuf, u64)> = self
                .outputs
                .iter()
                .zip(described)
                .flat_map(|(output, described)| output.upload_targets(described))
                .collect();
            // Every output has the split's one --part-size.
            let part_size = self.outputs.first().and_then(|o| o.part_size());
            return Uploads::open(&targets, self.no_clobber, part_size).map(Opened::Objects);
        }
        self.open().map(Opened::Files)
    }

    /// Creates every file of every output, empty, under temporary names: the members of one
    /// set, in [`Several::targets`]' order, with the previous sets' files that the commit
    /// removes. The folders they go in must exist.
    pub fn open(&self) -> Result<OutputSet> {
        if let Some(url) = self.targets().into_iter().find(|t| upload::is_url(t)) {
            // The config stage refuses a mix; this keeps an object from being read as a path.
            return Err(Error::refused(
                format!(
                    "the outputs mix local files and objects ({})",
                    crate::messages::path(&url)
                ),
                "name every output in object storage, or every output as a local file",
            ));
        }
        let mut set = OutputSet::new(self.no_clobber);
        if self.outputs.iter().any(|o| o.in_own_folder()) {
            // A sharded checkpoint's files are written in its folder, never through a link.
            set = set.without_links();
        }
        for path in self.targets() {
            set.add(&path)?;
        }
        for path in self.outputs.iter().flat_map(|o| o.removes()) {
            set.remove_at_commit(path)?;
        }
        Ok(set)
    }
}

/// The files of several outputs, open: local files, or objects being uploaded.
pub enum Opened {
    /// Local files under temporary names, the members of one set.
    Files(OutputSet),
    /// Objects, each a multipart upload, written in order.
    Objects(Uploads),
}

impl Opened {
    /// The local files, when the outputs are local: what a split writes in lockstep.
    pub fn files_mut(&mut self) -> Option<&mut [Member]> {
        match self {
            Opened::Files(set) => Some(set.members_mut()),
            Opened::Objects(_) => None,
        }
    }

    /// Every file, in the order they are written.
    pub fn sinks(&mut self) -> Vec<&mut dyn Sink> {
        match self {
            Opened::Files(set) => set.members_mut().iter_mut().map(as_sink).collect(),
            Opened::Objects(uploads) => uploads.members_mut().iter_mut().map(as_sink).collect(),
        }
    }

    /// Puts every file in place (renamed, or its upload completed), or none.
    pub fn commit(self) -> Result<()> {
        match self {
            Opened::Files(set) => set.commit(),
            Opened::Objects(uploads) => uploads.commit(),
        }
    }
}

fn as_sink<S: Sink>(sink: &mut S) -> &mut dyn Sink {
    sink
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Format, Sink, WriteOptions};
    use crate::output::kind::tests::tensor;
    use crate::output::kind::{OutputKind, Tensors};
    use crate::output::shards::ShardedOutput;

    #[test]
    fn a_file_and_a_sharded_folder_are_one_set_committed_together() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p0.safetensors");
        let folder = dir.path().join("p1");
        std::fs::create_dir(&folder).unwrap();
        let sharded = ShardedOutput {
            folder: folder.clone(),
            name: None,
            // Two shards of one tensor each, and their index.
            max_shard_size: 12,
            names_from: None,
        };
        let described = [tensor("a", 3), tensor("b", 3)];
        let mut writer = Format::SafeTensors
            .writer(&WriteOptions::default())
            .unwrap();
        let tensors = Tensors {
            described: &described,
            named: true,
            set_name: None,
            no_clobber: true,
            part_size: None,
        };
        let one = OutputKind::File(&file).plan(&tensors, writer.as_ref());
        let set = OutputKind::Sharded {
            path: &folder,
            set: &sharded,
        };
        let set = set.plan(&tensors, writer.as_ref());
        let (one, set) = (one.unwrap(), set.unwrap());
        let several = Several::new(vec![&one, &set], true);
        let targets = [
            file.clone(),
            folder.join("model-00001-of-00002.safetensors"),
            folder.join("model-00002-of-00002.safetensors"),
            folder.join("model.safetensors.index.json"),
        ];
        assert_eq!(several.targets(), targets);
        several.check_no_clobber().unwrap();
        let described_by = [&described[..], &described[..]];
        let mut opened = several.open_outputs(&described_by).unwrap();
        {
            let mut sinks = opened.sinks();
            let mut members = sinks.iter_mut().map(|s| &mut **s);
            let mut data = |index: usize, sink: &mut dyn Sink| {
                let bytes = vec![index as u8; 12];
                sink.write_all(&bytes)
                    .map_err(|e| Error::io("write", sink.name(), e))
            };
            for planned in [&one, &set] {
                planned
                    .write_into(&mut members, writer.as_mut(), &described, &mut data)
                    .unwrap();
            }
        }
        assert!(
            targets.iter().all(|t| !t.exists()),
            "nothing before the commit"
        );
        opened.commit().unwrap();
        assert!(targets.iter().all(|t| t.is_file()), "everything after it");
        // Written, the outputs refuse to be written again under --no-clobber, naming each.
        let again = several.check_no_clobber().unwrap_err().to_string();
        assert!(again.contains("4 of the outputs exist already"), "{again}");
    }
}
