//! The limits on files tjoin reads whole, one place for all of them: the man page's LIMITS
//! section is written from these. A file longer than its limit is refused with a message that
//! names it, the limit and what to do, before it is read (a regular file) or as soon as the
//! limit is passed (a pipe or a device: `/dev/zero` stops there), so that no file can make
//! tjoin run out of memory.

use crate::sys::Limit;

/// A sharded checkpoint's index (`*.safetensors.index.json`), wherever it is read: an input,
/// `--like`, `--names-from`, the previous index in an output folder, the indexes beside
/// inputs that look like shards. The largest published models' indexes take a few MB.
pub const INDEX: Limit = Limit {
    bytes: 100_000_000,
    of: "an index",
    advice: "no model's index comes near it: check that it is the index you meant",
};

/// A `--rules` file. 100,000 rules of 160 bytes each fit.
pub const RULES: Limit = Limit {
    bytes: 16 << 20,
    of: "a rules file",
    advice: "check that it is the rules file you meant; rules that share a prefix can be one \
             glob",
};

/// A `--files-from` list, read line by line (never held whole): only the paths are kept, so
/// memory grows with the list's length and this is its bound. 100,000 inputs of 2,600 bytes
/// each fit, or a million of 260 bytes; an endless device (`/dev/zero` with `--null`) stops
/// here.
pub const FILE_LIST: Limit = Limit {
    bytes: 256 << 20,
    of: "a --files-from list",
    advice: "check that it is the list you meant, or join the inputs in batches (join each \
             batch, then join the outputs)",
};

/// One entry (a path) of a `--files-from` list: longer than any path a system opens (Linux's
/// PATH_MAX is 4,096 bytes), so that a list that is not one (`/dev/zero`) stops early.
pub const FILE_LIST_ENTRY: usize = 64 << 10;

/// An append's journal: its title, identity and lengths, and two .npy headers (at most
/// 1 MiB each) in hex.
pub const JOURNAL: Limit = Limit {
    bytes: 5 << 20,
    of: "an append journal",
    advice: "tjoin writes none that long, so another program wrote it: look at it, and \
             remove it if the file beside it is as it should be",
};

/// A job's manifest (`--workers N --begin`): the inputs' versions and paths, the output's
/// files and each worker's share. 100,000 inputs of a 400-byte path each fit.
pub const JOB_MANIFEST: Limit = Limit {
    bytes: 64 << 20,
    of: "a job's manifest",
    advice: "tjoin writes none that long, so another program wrote it: abandon the job \
             (--workers N --abandon) and begin it again",
};

/// A worker's record of its finish in a job: a few hundred bytes.
pub const JOB_RECORD: Limit = Limit {
    bytes: 4 << 10,
    of: "a worker's record",
    advice: "tjoin writes none that long, so another program wrote it: run the worker again",
};

/// The pickle of a PyTorch checkpoint (`data.pkl`, or the pickles before a legacy file's
/// storages): tensors' names, shapes and storages, not their data. A state dict of 100,000
/// tensors takes about 10 MB.
pub const PICKLE: Limit = Limit {
    bytes: 256 << 20,
    of: "a checkpoint's pickle",
    advice: "a state dict's pickle holds no tensor data and comes nowhere near it: the file \
             holds something else, such as an optimizer state of Python objects",
};
