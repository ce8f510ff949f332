//! `--stack`: join along a new axis, as `numpy.stack`. Every input needs the same shape; a
//! dimension of size 1 is inserted at the axis of each, and they are joined along it. A unit
//! dimension changes no byte of the data, in C or Fortran order alike.

use std::collections::HashMap;

use crate::error::{Error, Refusal, Result};
use crate::input::{Input, Tensor};
use crate::plan::spec::normalize_axis;

/// Inserts the new axis into every tensor's shape, after checking numpy.stack's rules: one
/// shape for all (per tensor name, for files that hold several) and an axis in `[-(r+1), r]`.
/// The join axis to use afterwards is `axis` as given.
pub fn insert_axis(inputs: &mut [Input], axis: Option<i64>) -> Result<()> {
    let Some(axis) = axis else {
        return Err(refused(
            "--stack needs an axis: name where the new dimension goes with -a/--axis".to_string(),
            Vec::new(),
            "-a 0 puts the new dimension first, -a -1 last",
        ));
    };
    check_one_shape(inputs)?;
    for tensor in inputs.iter_mut().flat_map(|i| &mut i.tensors) {
        let rank = tensor.info.shape.len();
        let at = normalize_axis(axis, rank + 1).ok_or_else(|| {
            refused(
                format!(
                    "--stack axis {axis} is out of range for {} of rank {rank} (valid: -{} to {rank})",
                    tensor.name,
                    rank + 1
                ),
                Vec::new(),
                "-a 0 puts the new dimension first, -a -1 last",
            )
        })?;
        let mut shape = std::mem::take(&mut tensor.info.shape).into_vec();
        shape.insert(at, 1);
        tensor.info.shape = shape.into();
    }
    Ok(())
}

/// Refuses tensors whose shape differs from that of the first tensor they are stacked with:
/// the first of their name when the inputs hold several (each is joined with its namesakes),
/// else the first input's.
fn check_one_shape(inputs: &[Input]) -> Result<()> {
    let single = inputs.iter().all(|i| i.tensors.len() == 1);
    // Per name: the first tensor, and those whose shape differs from it.
    let mut groups: Vec<(&Tensor, Vec<&Tensor>)> = Vec::new();
    let mut group_of: HashMap<Option<&str>, usize> = HashMap::new();
    for tensor in inputs.iter().flat_map(|i| &i.tensors) {
        let key = if single {
            None
        } else {
            tensor.name.tensor.as_deref()
        };
        let group = *group_of.entry(key).or_insert_with(|| {
            groups.push((tensor, Vec::new()));
            groups.len() - 1
        });
        let (first, differing) = &mut groups[group];
        if tensor.info.shape != first.info.shape {
            differing.push(tensor);
        }
    }
    let mut details = Vec::new();
    for (first, differing) in groups.iter().filter(|(_, d)| !d.is_empty()) {
        details.extend(
            std::iter::once(first)
                .chain(differing)
                .map(|t| format!("{} is {}", t.name, t.info.shape_text())),
        );
    }
    if details.is_empty() {
        return Ok(());
    }
    Err(refused(
        "--stack needs inputs of one shape (numpy.stack's rule)".to_string(),
        details,
        "inputs that differ along one dimension join along it without --stack",
    ))
}

fn refused(headline: String, details: Vec<String>, hint: &str) -> Error {
    Error::Refused(vec![Refusal {
        headline,
        details,
        hint: Some(hint.to_string()),
    }])
}
