//! The flows of tjoin's commands, each open -> plan -> write and commit, or report: a join
//! (`join.rs`), and an append that grows its first input in place (`append.rs`).

pub(crate) mod append;
pub mod join;
