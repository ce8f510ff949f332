//! The rank files of one checkpoint named one by one (or by a shell's glob), made one input
//! once every input is open: DCP's HF form (safetensors files whose metadata has
//! `DCP_SHARDING_INFO`, [`dcp::hf`]) and DTensor rank files (`torch.save` of DTensors,
//! [`dtensor`]). Rank files mixed with other inputs are refused: one set is consolidated at
//! a time.

use super::{Input, dcp, dtensor};
use crate::error::{Error, InputRef, Refusal, Result, capped};

/// A kind of rank files, and how its files become one input.
struct RankFiles {
    /// Whether an opened input is one of its files.
    is_member: fn(&Input) -> bool,
    /// Its files, all of them, as one input named as the first.
    combine: fn(InputRef, Vec<Input>) -> Result<Input>,
    /// What its files are, as the refusal of a mixture says.
    what: &'static str,
    /// What tjoin consolidates at a time.
    one: &'static str,
    /// The refusal's hint.
    hint: &'static str,
}

/// Every kind, in the order they are gathered.
const KINDS: [RankFiles; 2] = [
    RankFiles {
        is_member: dcp::hf::is_rank_file,
        combine: dcp::hf::combine,
        // `dcp::SHARDING_INFO`, spelled out: a test checks that it is.
        what: "files of a PyTorch distributed checkpoint (their metadata has DCP_SHARDING_INFO)",
        one: "one such checkpoint",
        hint: "name only the checkpoint's files (or its folder), and join the result with the \
               other inputs in a second run",
    },
    RankFiles {
        is_member: dtensor::is_rank_file,
        combine: dtensor::combine,
        what: "rank files of DTensors (FSDP2, torch.save of a distributed state dict)",
        one: "one set of rank files",
        hint: "name only the rank files (every rank's), and join the result with the other \
               inputs in a second run",
    },
];

/// Makes inputs that are all the rank files of one checkpoint into one input; leaves any
/// other inputs as they are. Refuses a mixture of rank files and other inputs.
pub fn gather(mut inputs: Vec<Input>) -> Result<Vec<Input>> {
    for kind in &KINDS {
        inputs = kind.gather(inputs)?;
    }
    Ok(inputs)
}

impl RankFiles {
    fn gather(&self, inputs: Vec<Input>) -> Result<Vec<Input>> {
        let ranks = inputs.iter().filter(|i| (self.is_member)(i)).count();
        if ranks == 0 {
            return Ok(inputs);
        }
        if ranks < inputs.len() {
            let others: Vec<String> = inputs
                .iter()
                .filter(|i| !(self.is_member)(i))
                .map(|i| i.name.to_string())
                .collect();
            return Err(Error::Refused(vec![Refusal {
                headline: format!(
                    "{ranks} of the {} inputs are {} and the others are not: tjoin \
                     consolidates {} at a time",
                    inputs.len(),
                    self.what,
                    self.one
                ),
                details: capped(others, 10),
                hint: Some(self.hint.to_string()),
            }]));
        }
        let name = inputs[0].name.clone();
        Ok(vec![(self.combine)(name, inputs)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_names_the_metadata_key_dcp_writes() {
        assert!(KINDS[0].what.contains(dcp::SHARDING_INFO));
    }
}
