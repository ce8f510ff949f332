//! `--stack`: join along a new axis, as `numpy.stack`. Every input needs the same shape; a
//! dimension of size 1 is inserted at the axis of each, and they are joined along it. A unit
//! dimension changes no byte of the data, in C or Fortran order alike.

use crate::error::{Error, Refusal, Result};
use crate::format::shape_text;
use crate::input::Input;
use crate::spec::normalize_axis;

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
    let first = &inputs[0].tensors[0];
    let (shape, name) = (first.info.shape.clone(), first.name.clone());
    let differing: Vec<String> = inputs
        .iter()
        .flat_map(|i| &i.tensors)
        .filter(|t| t.name.tensor == name.tensor && t.info.shape != shape)
        .map(|t| format!("{} is {}", t.name, t.info.shape_text()))
        .collect();
    if !differing.is_empty() {
        let mut details = vec![format!("{name} is {}", shape_text(&shape))];
        details.extend(differing);
        return Err(refused(
            "--stack needs inputs of one shape (numpy.stack's rule)".to_string(),
            details,
            "inputs that differ along one dimension join along it without --stack",
        ));
    }
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
        tensor.info.shape.insert(at, 1);
    }
    Ok(())
}

fn refused(headline: String, details: Vec<String>, hint: &str) -> Error {
    Error::Refused(vec![Refusal {
        headline,
        details,
        hint: Some(hint.to_string()),
    }])
}
