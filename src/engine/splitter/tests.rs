//! The one-pass split (`super`): on random shapes, axes, element types, byte orders,
//! memory orders and part counts (empty parts included), every part's bytes are the
//! per-part path's, and joining the parts back gives the input; a failing sink and a
//! damaged .npz member fail the split.

use std::ops::Range;
use std::path::Path;

use super::{Part, execute};
use crate::engine::tests::{FORCE_THREADS, Memory, stored_npz};
use crate::error::Result;
use crate::format::{Layout, Sink};
use crate::input::{Input, OpenOptions, Tensor};
use crate::plan::{self, JoinPlan, Source};
use crate::sys::spill::Spill;

fn open(path: &Path) -> Input {
    let options = OpenOptions {
        format: None,
        keep_open: 0,
        read_whole_up_to: 0,
    };
    let (mut spill, mut head) = (Spill::default(), Vec::new());
    Input::open(1, path.into(), options, &mut spill, &mut head, None).unwrap()
}

/// A small random number generator (xorshift), so that a failing case can be run again.
struct Random(u64);

impl Random {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Writes a .npy file of `descr` (with its byte order), `shape` and memory order whose
/// bytes are random; returns the data in file order.
fn npy(path: &Path, descr: &str, size: usize, shape: &[u64], fortran: bool, r: &mut Random) {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    let dims = match dims.len() {
        1 => format!("{},", dims[0]),
        _ => dims.join(", "),
    };
    let order = if fortran { "True" } else { "False" };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': ({dims}), }}");
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    bytes.extend_from_slice(dict.as_bytes());
    let count = shape.iter().product::<u64>() as usize * size;
    bytes.extend((0..count).map(|_| r.below(256) as u8));
    std::fs::write(path, bytes).unwrap();
}

/// The plans of `ranges` of `tensor` along `axis`, each in the layout a split writes it in
/// (the tensor's, unless the part has fewer than two axes longer than 1 or is empty).
fn plans(tensor: &Tensor, axis: usize, ranges: &[Range<u64>]) -> Vec<JoinPlan> {
    ranges
        .iter()
        .map(|range| {
            let source = Source {
                info: &tensor.info,
                range: range.clone(),
            };
            let mut shape = tensor.info.shape.to_vec();
            shape[axis] = range.end - range.start;
            let long = shape.iter().filter(|&&d| d > 1).count();
            let layout = if shape.contains(&0) || long < 2 {
                Layout::C
            } else {
                tensor.info.layout
            };
            plan::plan_sources(&[source], axis, Some(layout), None)
        })
        .collect()
}

/// The parts of a split of the tensor in `sources` by `plans`.
fn parts_of<'p, 'a>(plans: &'p [JoinPlan], sources: &'p [&'a Tensor]) -> Vec<Part<'p, 'a>> {
    plans.iter().map(|plan| Part { plan, sources }).collect()
}

/// Each part's bytes.
type Bytes = Vec<Vec<u8>>;

/// Splits `tensor` by `plans` into memory, in one pass (or the per-part path where the pass
/// declines), and part after part by the per-part path; returns both.
fn split_both(tensor: &Tensor, plans: &[JoinPlan]) -> Result<(Bytes, Bytes)> {
    let sources = [tensor];
    let parts = parts_of(plans, &sources);
    // On this thread, then with the copies on a second one: the same bytes.
    let mut both = Vec::new();
    for threads in [false, true] {
        let mut memories: Vec<Memory> = plans.iter().map(|_| Memory::new()).collect();
        let mut outs: Vec<&mut dyn Sink> =
            memories.iter_mut().map(|m| m as &mut dyn Sink).collect();
        FORCE_THREADS.set(threads);
        let done = execute(&parts, &mut outs);
        FORCE_THREADS.set(false);
        done?;
        both.push(memories.into_iter().map(|m| m.bytes).collect::<Bytes>());
    }
    let threaded = both.pop().unwrap();
    let one = both.pop().unwrap();
    assert!(one == threaded, "the pass gave other bytes on two threads");
    let mut apart = Vec::new();
    for plan in plans {
        let mut out = Memory::new();
        crate::engine::execute(plan, &sources, &mut out)?;
        apart.push(out.bytes);
    }
    Ok((one, apart))
}

/// The mode of the pass that writes `plans` on two threads, if a pass does.
fn threaded_mode(tensor: &Tensor, plans: &[JoinPlan]) -> Option<&'static str> {
    let sources = [tensor];
    let parts = parts_of(plans, &sources);
    FORCE_THREADS.set(true);
    let mode = super::pass_mode(&parts);
    FORCE_THREADS.set(false);
    mode
}

/// Whether the pass (not the per-part path) writes `plans`.
fn in_one_pass(tensor: &Tensor, plans: &[JoinPlan]) -> bool {
    let sources = [tensor];
    let parts = parts_of(plans, &sources);
    super::takes_one_pass(&parts)
}

/// The parts joined back along the axis, by the storage order's rounds: storage dimensions
/// `dims`, the axis at `at` among them; each part's run per round is its length along the
/// axis times the elements after it.
fn joined(parts: &[Vec<u8>], lens: &[u64], dims: &[u64], at: usize, size: u64) -> Vec<u8> {
    let outer: u64 = dims[..at].iter().product();
    let inner: u64 = dims[at + 1..].iter().product::<u64>() * size;
    let mut out = Vec::new();
    for round in 0..outer {
        for (part, len) in parts.iter().zip(lens) {
            let run = (len * inner) as usize;
            let start = round as usize * run;
            out.extend_from_slice(&part[start..start + run]);
        }
    }
    out
}

#[test]
fn random_splits_match_the_per_part_path_and_join_back_to_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = Random(0x9e37_79b9_7f4a_7c15);
    let types = [
        ("<f4", 4),
        ("<i2", 2),
        ("|u1", 1),
        ("<f8", 8),
        (">f4", 4),
        ("<c8", 8),
    ];
    let (mut passes, mut halves, mut packers) = (0, 0, 0);
    for case in 0..300 {
        let rank = 1 + r.below(4) as usize;
        // Mostly short dimensions, sometimes long ones (runs past `DIRECT_RUN`), sometimes 0.
        let shape: Vec<u64> = (0..rank)
            .map(|_| match r.below(20) {
                0 => 0,
                1 => 300 + r.below(40_000),
                _ => 1 + r.below(9),
            })
            .collect();
        let count: u64 = shape.iter().product();
        if count > 1 << 19 {
            continue;
        }
        let (descr, size) = types[r.below(types.len() as u64) as usize];
        let fortran = r.below(3) == 0;
        let path = dir.path().join(format!("{case}.npy"));
        npy(&path, descr, size, &shape, fortran, &mut r);
        let input = open(&path);
        let tensor = &input.tensors[0];
        let axis = r.below(rank as u64) as usize;
        // Random cuts, empty parts included.
        let len = shape[axis];
        let parts = 1 + r.below(9);
        let mut cuts: Vec<u64> = (1..parts).map(|_| r.below(len + 1)).collect();
        cuts.sort_unstable();
        let bounds: Vec<u64> = std::iter::once(0).chain(cuts).chain([len]).collect();
        let ranges: Vec<Range<u64>> = bounds.windows(2).map(|w| w[0]..w[1]).collect();
        let plans = plans(tensor, axis, &ranges);
        passes += usize::from(in_one_pass(tensor, &plans));
        match threaded_mode(tensor, &plans) {
            Some("halves") => halves += 1,
            Some("packer") => packers += 1,
            _ => {}
        }
        let what =
            format!("case {case}: {descr} {shape:?} fortran {fortran}, {ranges:?} on {axis}");
        let (one, apart) = split_both(tensor, &plans).unwrap();
        for (k, (a, b)) in one.iter().zip(&apart).enumerate() {
            assert!(a == b, "{what}: part {k} differs from the per-part path");
        }
        // Joined back in the input's storage order, the parts are its data, when each part
        // kept that order (a part written in C order from a Fortran-order input did not).
        if plans
            .iter()
            .all(|p| p.layout == tensor.info.layout || p.bytes == 0)
        {
            let (dims, at) = match tensor.info.layout {
                Layout::C => (shape.clone(), axis),
                Layout::Fortran => (shape.iter().rev().copied().collect(), rank - 1 - axis),
            };
            let lens: Vec<u64> = ranges.iter().map(|r| r.end - r.start).collect();
            let data = std::fs::read(&path).unwrap();
            let data = &data[tensor.info.data_offset as usize..];
            let back = joined(&apart, &lens, &dims, at, size as u64);
            if descr.starts_with('>') {
                assert_eq!(back.len(), data.len(), "{what}");
            } else {
                assert!(
                    back == data,
                    "{what}: the parts joined back differ from the input"
                );
            }
        }
    }
    // The random cases reach the pass, not only the per-part path.
    assert!(passes > 50, "only {passes} cases took the one pass");
    // And both ways of running it on two threads.
    assert!(
        halves > 20 && packers > 20,
        "halves {halves}, packers {packers}"
    );
}

#[test]
fn which_splits_take_one_pass() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.npy");
    npy(&path, "<f4", 4, &[6, 16], false, &mut Random(7));
    let input = open(&path);
    let tensor = &input.tensors[0];
    let last = plans(tensor, 1, &[0..4, 4..4, 4..10, 10..16]);
    assert!(in_one_pass(tensor, &last));
    // On the first axis, from one map of the tensor, whose data start 128 bytes into a page.
    let first = plans(tensor, 0, &[0..2, 2..6]);
    assert!(in_one_pass(tensor, &first));
    // Out of order or overlapping slices go part after part.
    let crossed = plans(tensor, 1, &[4..8, 0..4]);
    assert!(!in_one_pass(tensor, &crossed));
    let overlapping = plans(tensor, 1, &[0..8, 4..16]);
    assert!(!in_one_pass(tensor, &overlapping));
    let (one, apart) = split_both(tensor, &overlapping).unwrap();
    assert_eq!(one, apart);

    // Data that start on a page go part after part on the first axis (the kernel may copy
    // them), in one pass on the last.
    let bytes = std::fs::read(&path).unwrap();
    let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let (header, data) = bytes[10..].split_at(header_len);
    let mut header = header.trim_ascii_end().to_vec();
    header.resize(4096 - 10 - 1, b' ');
    header.push(b'\n');
    let mut aligned = b"\x93NUMPY\x01\x00".to_vec();
    aligned.extend_from_slice(&(header.len() as u16).to_le_bytes());
    aligned.extend_from_slice(&header);
    aligned.extend_from_slice(data);
    let path = dir.path().join("aligned.npy");
    std::fs::write(&path, aligned).unwrap();
    let input = open(&path);
    let tensor = &input.tensors[0];
    assert_eq!(tensor.info.data_offset, 4096);
    assert!(!in_one_pass(tensor, &plans(tensor, 0, &[0..2, 2..6])));
    assert!(in_one_pass(tensor, &plans(tensor, 1, &[0..4, 4..16])));
}

#[test]
fn a_failing_sink_fails_the_split() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.npy");
    // Runs of 512 KiB (past `DIRECT_RUN`) and of 4 bytes: both ways of writing fail.
    for shape in [[4u64, 262_144], [4096, 2]] {
        npy(&path, "<f4", 4, &shape, false, &mut Random(11));
        let input = open(&path);
        let tensor = &input.tensors[0];
        let half = shape[1] / 2;
        let plans = plans(tensor, 1, &[0..half, half..shape[1]]);
        assert!(in_one_pass(tensor, &plans));
        let sources = [tensor];
        let parts = parts_of(&plans, &sources);
        // On this thread and with the copies on a second one.
        for threads in [false, true] {
            let mut good = Memory::new();
            let mut failing = Memory::new();
            failing.fail_at = 1000;
            let mut outs: Vec<&mut dyn Sink> = vec![&mut good, &mut failing];
            FORCE_THREADS.set(threads);
            let done = execute(&parts, &mut outs);
            FORCE_THREADS.set(false);
            let error = done.unwrap_err().to_string();
            assert!(error.contains("memory"), "{error}");
            assert!(error.contains("the disk is full"), "{error}");
        }
    }
}

#[test]
fn a_damaged_member_is_refused_and_a_sound_one_split() {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..64u32 * 48)
        .flat_map(|i| (i as f32).to_le_bytes())
        .collect();
    for damaged in [false, true] {
        let path = stored_npz(dir.path(), "x.npz", &[64, 48], &data, 0, damaged);
        let input = open(&path);
        let tensor = &input.tensors[0];
        assert!(tensor.stored_crc.is_some());
        // The last part leaves the end of every row out: the check still reads it.
        // On the first axis the per-part path reads the check apart from the writes.
        assert!(!in_one_pass(tensor, &plans(tensor, 0, &[0..32, 32..64])));
        let plans = plans(tensor, 1, &[0..16, 16..30, 30..40]);
        assert!(in_one_pass(tensor, &plans));
        let sources = [tensor];
        let parts = parts_of(&plans, &sources);
        let mut memories = [Memory::new(), Memory::new(), Memory::new()];
        let mut outs: Vec<&mut dyn Sink> =
            memories.iter_mut().map(|m| m as &mut dyn Sink).collect();
        // The copies on a second thread when damaged: the check runs there.
        FORCE_THREADS.set(damaged);
        let done = execute(&parts, &mut outs);
        FORCE_THREADS.set(false);
        if damaged {
            let error = done.unwrap_err().to_string();
            assert!(error.contains("x.npy fails its CRC-32 check"), "{error}");
        } else {
            done.unwrap();
            let cols = |cols: Range<usize>| -> Vec<u8> {
                let row =
                    |r: usize| data[(r * 48 + cols.start) * 4..(r * 48 + cols.end) * 4].to_vec();
                (0..64).flat_map(row).collect()
            };
            assert_eq!(memories[0].bytes, cols(0..16));
            assert_eq!(memories[1].bytes, cols(16..30));
            assert_eq!(memories[2].bytes, cols(30..40));
        }
    }
}

#[test]
fn long_and_short_runs_of_one_round_reach_their_parts_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.npy");
    // Runs of 400,000 bytes (past `DIRECT_RUN`: written from the map) beside runs of 4 and
    // 396 bytes (copied into buffers), three rounds, each way of writing in every round.
    npy(&path, "<f4", 4, &[3, 200_100], false, &mut Random(5));
    let input = open(&path);
    let tensor = &input.tensors[0];
    let plans = plans(tensor, 1, &[0..100_000, 100_000..100_001, 100_001..200_100]);
    assert!(in_one_pass(tensor, &plans));
    let (one, apart) = split_both(tensor, &plans).unwrap();
    assert!(one == apart, "the pass differs from the per-part path");
    let data = std::fs::read(&path).unwrap();
    let data = &data[tensor.info.data_offset as usize..];
    let lens = [100_000, 1, 100_099];
    assert!(joined(&one, &lens, &[3, 200_100], 1, 4) == data);
}

/// A sink that waits before its first write, then fails it: the copying thread fills every
/// buffer meanwhile and waits for one back.
struct LateFailure;

impl Sink for LateFailure {
    fn write_all(&mut self, _: &[u8]) -> std::io::Result<()> {
        std::thread::sleep(std::time::Duration::from_millis(300));
        Err(std::io::Error::other("the disk is full"))
    }

    fn name(&self) -> &Path {
        Path::new("late")
    }
}

/// A sink in memory that takes 100 ms for each write: still writing when the other fails.
struct Slow(Memory);

impl Sink for Slow {
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        std::thread::sleep(std::time::Duration::from_millis(100));
        self.0.write_all(bytes)
    }

    fn name(&self) -> &Path {
        Path::new("slow")
    }
}

#[test]
fn a_write_that_fails_late_on_either_thread_ends_the_split_with_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.npy");
    // 12 MiB in rows of 32 float32: parts of many 1 MiB buffers each.
    npy(&path, "<f4", 4, &[98_304, 32], false, &mut Random(13));
    // Uneven parts take a copying thread, which fills every buffer while the failing write
    // waits, then waits for one back; even ones take two halves, and the other half stops.
    // The failing output first or second (the other half's thread, or this one's).
    for (cut, mode, at) in [(4, "packer", 0), (16, "halves", 0), (16, "halves", 1)] {
        let path = path.clone();
        let (done, waited) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let input = open(&path);
            let tensor = &input.tensors[0];
            let plans = plans(tensor, 1, &[0..cut, cut..32]);
            assert_eq!(threaded_mode(tensor, &plans), Some(mode));
            let sources = [tensor];
            let parts = parts_of(&plans, &sources);
            let (mut failing, mut good) = (LateFailure, Slow(Memory::new()));
            let mut outs: Vec<&mut dyn Sink> = vec![&mut failing, &mut good];
            outs.rotate_left(at);
            FORCE_THREADS.set(true);
            let _ = done.send(execute(&parts, &mut outs).map_err(|e| e.to_string()));
        });
        let result = waited
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("{mode}: the split waits for a buffer never given back"));
        let error = result.unwrap_err();
        assert!(
            error.contains("late") && error.contains("the disk is full"),
            "{mode}: {error}"
        );
    }
}
