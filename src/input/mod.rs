//! Opening the inputs: each file, the tensors its header declares, and the identity that is
//! checked again before the output is committed.
//!
//! Inputs whose data cannot be mapped where it lies (JSON text, standard input) are
//! converted or copied into a temporary file first, so that the copy engine sees every
//! tensor as bytes of a mappable file. Beyond a budget of open files, inputs are closed
//! after their header is read and reopened when the engine gets to them: a join of 100,000
//! files must not run out of file descriptors.

pub mod dcp;
pub mod deepspeed;
pub mod dtensor;
mod fetch;
pub mod gguf_set;
pub(crate) mod objects;
mod open;
mod ranks;
pub mod reference;
pub mod remote;
pub mod sharded;
pub mod source;
pub mod sources;
mod stream;
mod types;
mod watched;

pub use open::{Observer, OpenAll, OpenOptions, open_all};
pub use source::Stamp;
pub use types::{Consolidated, DataFile, Extras, FileRecord, Input, RemoteFile, Tensor};
pub(crate) use watched::Watched;

#[cfg(test)]
mod tests {
    use std::mem::size_of;

    use super::*;
    use crate::dtype::{DType, Swaps};
    use crate::plan::InputPlan;

    /// What a join keeps of each input until the commit, part by part (the integration test
    /// `the_memory_kept_per_input_stays_under_720_bytes` measures the whole): a join may have
    /// 100,000 inputs. A block of n bytes costs malloc n + 8 rounded up to 16: a
    /// `FileRecord` of 56 bytes behind an `Arc` takes 80, a `Tensor` of 136 takes 144.
    #[test]
    fn what_a_join_keeps_of_each_input_stays_small() {
        assert_eq!(size_of::<DType>(), 16);
        assert_eq!(size_of::<Swaps>(), 16);
        assert!(size_of::<Tensor>() <= 136, "{}", size_of::<Tensor>());
        assert!(size_of::<Input>() <= 88, "{}", size_of::<Input>());
        assert!(size_of::<InputPlan>() <= 64, "{}", size_of::<InputPlan>());
        assert!(size_of::<FileRecord>() <= 56, "{}", size_of::<FileRecord>());
        assert_eq!(size_of::<Watched>(), 16);
    }
}
