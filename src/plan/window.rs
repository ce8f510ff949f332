//! A join plan cut to a window of its output: what one worker of a job (`--worker I/N`,
//! `src/flow/join/workers/`) reads to write its share of a tensor. No I/O here.
//!
//! The cut plan makes a contiguous stretch of the tensor's output bytes that covers the
//! window, starting at [`Narrowed::start`]; the worker's sink drops what falls outside its
//! share, so a cut may cover more than the window but never less:
//!
//! - **One round** (`outer == 1`, an axis-0 join): the output is each source's bytes one
//!   after another. Sources wholly outside the window are left out; the ones at its edges
//!   are cut to the elements the window touches, as slices read in place
//!   ([`Runs::Sliced`], so every copy path reads them as it reads any slice).
//! - **Several rounds** (a last-axis join): the rounds the window touches, `r0..r1`, each
//!   source's runs then starting at its run of round `r0` (a slice whose `skip` is that
//!   run's place). A window inside one round reads that round whole.
//!
//! A plan whose bytes change on the way (a cast, whose refusal names an element by its
//! place in the input) or whose sources are gathered by strides is not cut: the worker runs
//! it whole and keeps its share, which reads more and writes the same bytes.

use std::ops::Range;

use super::runs::{InputPlan, JoinPlan, Runs};

/// A plan cut to a window, and where its bytes start in the tensor's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Narrowed {
    /// The cut plan.
    pub plan: JoinPlan,
    /// For each of its inputs, the position of the source it reads in the plan cut from.
    pub sources: Vec<usize>,
    /// Where its first byte lies in the whole tensor's output.
    pub start: u64,
}

/// `plan` cut to the bytes `window` of its output (a range within `0..plan.bytes`), or
/// `None` when it is not cut (see the module's documentation) or the window is empty.
pub fn narrow(plan: &JoinPlan, window: Range<u64>) -> Option<Narrowed> {
    let window = window.start..window.end.min(plan.bytes);
    let cuttable = plan
        .inputs
        .iter()
        .all(|p| p.gather().is_none() && p.dtype == plan.dtype);
    if window.is_empty() || !cuttable || plan.outer == 0 {
        return None;
    }
    if plan.outer == 1 {
        narrow_one_round(plan, window)
    } else {
        narrow_rounds(plan, window)
    }
}

/// The sources of a one-round plan that the window touches, each cut to whole elements.
fn narrow_one_round(plan: &JoinPlan, window: Range<u64>) -> Option<Narrowed> {
    let item = plan.dtype.itemsize().max(1);
    let mut inputs = Vec::new();
    let mut sources = Vec::new();
    let mut start = None;
    let mut at = 0u64;
    for (index, p) in plan.inputs.iter().enumerate() {
        let (skip, len) = p.one_round();
        let end = at.checked_add(len)?;
        let (from, to) = (window.start.max(at), window.end.min(end));
        if from < to {
            // Whole elements: the cut's edges round outward.
            let first = (from - at) / item * item;
            let last = (to - at).div_ceil(item) * item;
            start.get_or_insert(at + first);
            inputs.push(InputPlan {
                run_bytes: last - first,
                runs: Some(Box::new(Runs::Sliced {
                    skip: skip + first,
                    pitch: p.pitch(),
                })),
                ..p.clone()
            });
            sources.push(index);
        }
        at = end;
    }
    let bytes = inputs.iter().map(|p| p.run_bytes).sum();
    Some(Narrowed {
        plan: JoinPlan {
            inputs,
            bytes,
            ..plan.clone()
        },
        sources,
        start: start?,
    })
}

/// The rounds the window touches, every source's runs starting at that of the first.
fn narrow_rounds(plan: &JoinPlan, window: Range<u64>) -> Option<Narrowed> {
    let round: u64 = plan.inputs.iter().map(|p| p.run_bytes).sum();
    if round == 0 || plan.bytes != round.checked_mul(plan.outer)? {
        return None;
    }
    let first = window.start / round;
    let last = window.end.div_ceil(round).min(plan.outer);
    let inputs = plan
        .inputs
        .iter()
        .map(|p| InputPlan {
            runs: Some(Box::new(Runs::Sliced {
                skip: p.run_at(first),
                pitch: p.pitch(),
            })),
            ..p.clone()
        })
        .collect();
    Some(Narrowed {
        plan: JoinPlan {
            inputs,
            outer: last - first,
            bytes: (last - first) * round,
            ..plan.clone()
        },
        sources: (0..plan.inputs.len()).collect(),
        start: first * round,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::{DType, Swaps};
    use crate::format::Layout;

    fn float32() -> DType {
        DType::from_name("float32").expect("a type")
    }

    /// A plan of `outer` rounds over whole float32 inputs of `runs` bytes a round each.
    fn plan(outer: u64, runs: &[u64]) -> JoinPlan {
        let inputs = runs
            .iter()
            .map(|&run| InputPlan {
                data_offset: 128,
                data_len: run * outer,
                run_bytes: run,
                dtype: float32(),
                swaps: Swaps::None,
                runs: None,
            })
            .collect();
        JoinPlan {
            axis: 0,
            dtype: float32(),
            shape: vec![],
            layout: Layout::C,
            outer,
            inputs,
            bytes: outer * runs.iter().sum::<u64>(),
        }
    }

    /// The output bytes of `plan` as (source, byte of its data) pairs, read as the engine
    /// reads them: round by round, each input's run in turn.
    fn output(plan: &JoinPlan, sources: &[usize]) -> Vec<(usize, u64)> {
        let mut out = Vec::new();
        for round in 0..plan.outer {
            for (p, &source) in plan.inputs.iter().zip(sources) {
                let at = p.run_at(round);
                out.extend((at..at + p.run_bytes).map(|b| (source, b)));
            }
        }
        out
    }

    /// Every window of `plan`'s output: the cut's bytes are the whole plan's from its start,
    /// and cover the window.
    fn check_every_window(plan: &JoinPlan) {
        let all: Vec<usize> = (0..plan.inputs.len()).collect();
        let whole = output(plan, &all);
        for lo in 0..plan.bytes {
            for hi in lo + 1..=plan.bytes {
                let cut = narrow(plan, lo..hi).expect("a cut");
                let got = output(&cut.plan, &cut.sources);
                assert_eq!(got.len() as u64, cut.plan.bytes);
                let start = cut.start as usize;
                assert!(
                    cut.start <= lo && hi <= cut.start + cut.plan.bytes,
                    "{lo}..{hi}"
                );
                assert_eq!(got, whole[start..start + got.len()], "{lo}..{hi}");
            }
        }
    }

    #[test]
    fn a_cut_of_one_round_reads_the_sources_the_window_touches_in_whole_elements() {
        let plan = plan(1, &[8, 4, 12]);
        check_every_window(&plan);
        let cut = narrow(&plan, 9..13).unwrap();
        // Input 2 (bytes 8..12) from its element 0, input 3 (12..24) for its element 0.
        assert_eq!((cut.start, cut.plan.bytes, cut.sources), (8, 8, vec![1, 2]));
    }

    #[test]
    fn a_cut_of_several_rounds_reads_the_rounds_the_window_touches() {
        let plan = plan(3, &[4, 8]);
        check_every_window(&plan);
        let cut = narrow(&plan, 13..14).unwrap();
        assert_eq!((cut.start, cut.plan.outer), (12, 1));
    }

    #[test]
    fn a_slice_is_cut_within_its_slice() {
        let mut plan = plan(2, &[4, 4]);
        plan.inputs[1].runs = Some(Box::new(Runs::Sliced { skip: 4, pitch: 12 }));
        plan.inputs[1].data_len = 24;
        check_every_window(&plan);
        let mut one = self::plan(1, &[8]);
        one.inputs[0].runs = Some(Box::new(Runs::Sliced {
            skip: 16,
            pitch: 40,
        }));
        check_every_window(&one);
    }

    #[test]
    fn a_cast_an_empty_window_or_a_gather_is_not_cut() {
        let mut plan = plan(1, &[8]);
        assert_eq!(narrow(&plan, 3..3), None);
        plan.inputs[0].dtype = DType::from_name("float16").unwrap();
        assert_eq!(narrow(&plan, 0..4), None);
    }
}
