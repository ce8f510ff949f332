//! The OS layer: memory maps, raw copies of interleaved rows, positional I/O, page-cache probes, opening without waiting,
//! reads with a limit, the append lock, file identity, the process's resources and the
//! SIGBUS handler. Its files and the DirectML backend's are the only ones allowed `unsafe`
//! (each allows it itself; the crate denies it), and every `unsafe` block says why it is sound,
//! or, for a map, what risk is accepted (the doc of `sys/map.rs`).
//!
//! Callers name everything as `crate::sys::X`: the files are private and re-exported here.

mod cache;
mod copy;
mod fs;
mod io;
mod lock;
mod map;
mod open;
mod process;
pub mod remote;
mod signal;
pub mod spill;
#[cfg(windows)]
pub mod windows;

pub use cache::*;
pub use copy::*;
pub use fs::*;
pub use io::*;
pub use lock::*;
pub use map::*;
pub use open::*;
pub use process::*;
pub use signal::*;
