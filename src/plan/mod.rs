//! Planning: from the inputs' headers to what the engine does, reading no tensor data but
//! the bytes a comparison needs. `runs` plans one tensor's join (rounds and runs), `job`
//! every output tensor of a run under the rules (`rules`), the spec (`spec`), a reference
//! (`reference`), stacking (`stack`) and grids of blocks (`grid`).

pub(crate) mod chunks;
pub(crate) mod compare;
pub(crate) mod complete;
pub(crate) mod families;
pub mod filter;
pub mod gguf_files;
pub(crate) mod globs;
pub(crate) mod grid;
pub(crate) mod groups;
pub(crate) mod heads;
pub(crate) mod job;
pub(crate) mod ranks;
pub(crate) mod reference;
pub mod rules;
pub(crate) mod runs;
pub(crate) mod sizes;
pub(crate) mod slices;
pub(crate) mod spec;
pub(crate) mod stack;
pub(crate) mod tensor_job;
pub(crate) mod window;

pub use runs::*;
