//! Planning: from the inputs' headers to what the engine does, reading no tensor data but
//! the bytes a comparison needs. `runs` plans one tensor's join (rounds and runs), `job`
//! every output tensor of a run under the rules (`rules`), the spec (`spec`), a reference
//! (`reference`), stacking (`stack`) and grids of blocks (`grid`).

pub mod chunks;
pub mod compare;
pub mod grid;
pub mod job;
pub mod ranks;
pub mod reference;
pub mod rules;
pub mod runs;
pub mod spec;
pub mod stack;

pub use runs::*;
