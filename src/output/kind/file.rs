//! One file, or standard output (`-`): the output of every run that names a path and asks
//! for no other kind. Last in the table of kinds, it claims every path the kinds before it
//! leave.

use std::path::Path;

use super::{Asked, How, OutputKind, Planned, PlannedFile, Tensors};

/// The kind of the output asked: one file, whenever `-o` names one.
pub(super) fn claim<'c>(asked: &Asked<'c>) -> Option<OutputKind<'c>> {
    asked.path.map(OutputKind::File)
}

/// One file of every tensor, in the job's order (the writer's: a file's kind plans from it).
pub(super) fn plan(path: &Path, tensors: &Tensors) -> Planned {
    Planned {
        path: Some(path.to_path_buf()),
        shown_as: path.to_path_buf(),
        files: vec![PlannedFile {
            target: path.to_path_buf(),
            tensors: (0..tensors.described.len()).collect(),
        }],
        no_clobber: tensors.no_clobber,
        part_size: tensors.part_size,
        how: How::File,
    }
}
