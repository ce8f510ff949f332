//! The flows of tjoin's commands, one module each, the only code that sees a command's whole
//! config: a join (`join/`), an append that grows its first input in place (`append.rs`,
//! which also hands `--recover` to the output stage's `output::recovery`), a split of one
//! input into several outputs (`split.rs`) and GGUF's merge and split (`gguf.rs`), each open
//! -> plan -> write and commit, or report; and `tjoin rules` (`rules.rs`), which prints a
//! built-in table and opens nothing.

pub(crate) mod append;
pub mod gguf;
pub mod join;
pub mod rules;
pub mod split;

use std::path::Path;

/// Which of `inputs` (0-based) is the file `output` names, by device and inode whatever the
/// names (`./x`, a symbolic link, a hard link), or the object a URL names, by bucket and key
/// whatever the spelling (`S3://`): a run of several inputs that wrote over one of them
/// would, run again, read its old output as data.
fn input_written_over<'p>(
    output: &Path,
    inputs: impl IntoIterator<Item = &'p Path>,
) -> Option<usize> {
    use crate::sys::remote::{Location, is_url};
    if is_url(output) {
        let object = |path: &Path| Location::parse(&path.to_string_lossy()).ok();
        let target = object(output)?;
        return inputs
            .into_iter()
            .position(|input| is_url(input) && object(input).as_ref() == Some(&target));
    }
    let target = crate::sys::path_id(output)?;
    inputs
        .into_iter()
        .position(|input| crate::sys::path_id(input) == Some(target))
}
