//! The flows of tjoin's commands, each open -> plan -> write and commit, or report: a join
//! (`join.rs`), an append that grows its first input in place (`append.rs`), and a split of one
//! input into several outputs (`split.rs`).

pub(crate) mod append;
pub mod gguf;
pub mod join;
pub mod rules;
pub mod split;
