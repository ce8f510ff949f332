//! Sources that are slices, on every path of the engine: each test joins sources that start
//! inside their tensor's round and end before its end, and compares the output with a naive
//! reference that picks every element by its index (`reference`), not with the engine.

use std::ops::Range;
use std::path::{Path, PathBuf};

use super::{FORCE_THREADS, stored_npz};
use crate::dtype::DType;
use crate::engine::execute;
use crate::error::Result;
use crate::format::Layout;
use crate::format::Sink;
use crate::input::{Input, OpenOptions, Tensor};
use crate::output::Scratch;
use crate::plan::{self, Source};
use crate::sys::spill::Spill;

/// A tensor written to a .npy file: its shape, layout, element size and data in file order.
struct Made {
    path: PathBuf,
    /// numpy's name of its element type, with the byte order: `<f4`, `>f4`.
    descr: String,
    shape: Vec<u64>,
    fortran: bool,
    size: usize,
    data: Vec<u8>,
}

impl Made {
    /// The bytes of the element at logical `index`, found by its layout's strides.
    fn element(&self, index: &[u64]) -> &[u8] {
        let mut offset = 0u64;
        let mut stride = 1u64;
        let mut place = |axis: usize| {
            offset += index[axis] * stride;
            stride *= self.shape[axis];
        };
        if self.fortran {
            (0..self.shape.len()).for_each(&mut place);
        } else {
            (0..self.shape.len()).rev().for_each(&mut place);
        }
        let at = offset as usize * self.size;
        &self.data[at..at + self.size]
    }
}

/// Writes a .npy file of `descr` (numpy's, with its byte order) and `shape`, whose data is
/// element `i` (in file order) `value(i)`, behind a header of `header_len` bytes: 4096
/// puts the data on a page, where the kernel copies it.
fn made(
    dir: &Path,
    name: &str,
    (descr, size): (&str, usize),
    shape: &[u64],
    fortran: bool,
    header_len: usize,
    value: impl Fn(usize) -> Vec<u8>,
) -> Made {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    let dims = match dims.len() {
        1 => format!("{},", dims[0]),
        _ => dims.join(", "),
    };
    let fortran_order = if fortran { "True" } else { "False" };
    let mut dict =
        format!("{{'descr': '{descr}', 'fortran_order': {fortran_order}, 'shape': ({dims}), }}");
    let pad = header_len - 10 - dict.len() - 1;
    dict.push_str(&" ".repeat(pad));
    dict.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    bytes.extend_from_slice(dict.as_bytes());
    let count: u64 = shape.iter().product();
    let data: Vec<u8> = (0..count as usize).flat_map(value).collect();
    assert_eq!(data.len(), count as usize * size);
    bytes.extend_from_slice(&data);
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("written");
    Made {
        path,
        descr: descr.to_string(),
        shape: shape.to_vec(),
        fortran,
        size,
        data,
    }
}

/// float32 values that name their tensor and element: `tensor * 100,000 + i`, exact.
fn f32_values(tensor: usize) -> impl Fn(usize) -> Vec<u8> {
    move |i| ((tensor * 100_000 + i) as f32).to_le_bytes().to_vec()
}

const F4: (&str, usize) = ("<f4", 4);

/// The output of joining the slices `parts` along `axis`, laid out in `layout`, each element
/// converted by `convert`: element by element, each found by its index in its tensor.
fn reference(
    parts: &[(&Made, Range<u64>)],
    axis: usize,
    layout: Layout,
    convert: impl Fn(&Made, &[u8]) -> Vec<u8>,
) -> Vec<u8> {
    let mut shape = parts[0].0.shape.clone();
    shape[axis] = parts.iter().map(|(_, r)| r.end - r.start).sum();
    let count: u64 = shape.iter().product();
    // The axes from the fastest-varying one in the output's layout.
    let order: Vec<usize> = match layout {
        Layout::C => (0..shape.len()).rev().collect(),
        Layout::Fortran => (0..shape.len()).collect(),
    };
    let mut out = Vec::new();
    for flat in 0..count {
        let mut index = vec![0u64; shape.len()];
        let mut rest = flat;
        for &a in &order {
            index[a] = rest % shape[a];
            rest /= shape[a];
        }
        // The part that holds this position along the axis, and where in its slice.
        let mut along = index[axis];
        for (made, range) in parts {
            let len = range.end - range.start;
            if along < len {
                index[axis] = range.start + along;
                out.extend_from_slice(&convert(made, made.element(&index)));
                break;
            }
            along -= len;
        }
    }
    out
}

/// An output in memory, which declines kernel copies as a pipe does.
struct Memory(Vec<u8>);

impl Sink for Memory {
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.0.extend_from_slice(bytes);
        Ok(())
    }

    fn name(&self) -> &Path {
        Path::new("memory")
    }
}

/// A file output that counts the bytes the kernel copied into it.
struct Counted {
    file: Scratch,
    in_kernel: u64,
}

impl Sink for Counted {
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.file.write_all(bytes)
    }

    fn copy_from(&mut self, file: &std::fs::File, offset: u64, len: u64) -> std::io::Result<u64> {
        let copied = self.file.copy_from(file, offset, len)?;
        self.in_kernel += copied;
        Ok(copied)
    }

    fn name(&self) -> &Path {
        self.file.name()
    }
}

fn open(paths: &[&Path]) -> Vec<Input> {
    let mut head = Vec::new();
    let mut spill = Spill::default();
    let options = OpenOptions {
        format: None,
        keep_open: 0,
        read_whole_up_to: 0,
    };
    paths
        .iter()
        .enumerate()
        .map(|(i, path)| {
            Input::open(i + 1, (*path).into(), options, &mut spill, &mut head, None).unwrap()
        })
        .collect()
}

/// How a join went: its bytes, and how many of them the kernel copied.
struct Joined {
    bytes: Vec<u8>,
    in_kernel: u64,
}

/// Plans the join of `parts` (tensors of .npy files and slices of them) along `axis` in
/// `layout`, cast to `cast`, and runs it on one thread or on two (`two`), into memory or
/// into a file (`file`). Fails the test unless the plan reads `parts` as slices.
fn join(
    parts: &[(&Path, Range<u64>)],
    axis: usize,
    layout: Option<Layout>,
    cast: Option<&str>,
    two: bool,
    file: bool,
) -> Result<Joined> {
    let paths: Vec<&Path> = parts.iter().map(|(p, _)| *p).collect();
    let inputs = open(&paths);
    let tensors: Vec<&Tensor> = inputs.iter().map(|i| &i.tensors[0]).collect();
    let sources: Vec<Source> = tensors
        .iter()
        .zip(parts)
        .map(|(t, (_, range))| Source {
            info: &t.info,
            range: range.clone(),
        })
        .collect();
    let cast = cast.map(|name| DType::from_name(name).expect("a type"));
    let plan = plan::plan_sources(&sources, axis, layout, cast.as_ref());
    for (p, source) in plan.inputs.iter().zip(&sources) {
        let range = &source.range;
        let whole = range.start == 0 && range.end == source.info.shape[axis];
        assert!(
            p.runs.is_some() || whole,
            "{range:?} is not planned as a slice"
        );
    }
    FORCE_THREADS.set(two);
    let done = if file {
        let mut out = Counted {
            file: Scratch::new().unwrap(),
            in_kernel: 0,
        };
        let done = execute(&plan, &tensors, &mut out);
        let mut file = out.file.into_file();
        let mut bytes = Vec::new();
        std::io::Seek::rewind(&mut file).unwrap();
        std::io::Read::read_to_end(&mut file, &mut bytes).unwrap();
        done.map(|()| Joined {
            bytes,
            in_kernel: out.in_kernel,
        })
    } else {
        let mut out = Memory(Vec::new());
        execute(&plan, &tensors, &mut out).map(|()| Joined {
            bytes: out.0,
            in_kernel: 0,
        })
    };
    FORCE_THREADS.set(false);
    done
}

/// Joins `parts` on one thread and on two, into memory and into a file, and checks every
/// output against `expected`. Returns the bytes the kernel copied into the files.
fn joins_as_expected(
    parts: &[(&Made, Range<u64>)],
    axis: usize,
    layout: Option<Layout>,
    cast: Option<&str>,
    expected: &[u8],
) -> u64 {
    let parts: Vec<(&Path, Range<u64>)> = parts
        .iter()
        .map(|(m, r)| (m.path.as_path(), r.clone()))
        .collect();
    let mut in_kernel = 0;
    for two in [false, true] {
        for file in [false, true] {
            let joined = join(&parts, axis, layout, cast, two, file).unwrap();
            let first_difference = joined.bytes.iter().zip(expected).position(|(x, y)| x != y);
            assert!(
                joined.bytes == expected,
                "{} threads, into {}: {} bytes, {} expected, first differing at {:?}",
                1 + two as u8,
                if file { "a file" } else { "memory" },
                joined.bytes.len(),
                expected.len(),
                first_difference
            );
            in_kernel += joined.in_kernel;
        }
    }
    in_kernel
}

fn same(_: &Made, bytes: &[u8]) -> Vec<u8> {
    bytes.to_vec()
}

#[test]
fn slices_of_long_runs_are_copied_in_the_kernel_and_from_the_map() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Runs of 384 and 256 KiB, past `DIRECT_RUN`, whose starts in the files (data on a
    // page, skips and pitches of whole pages) and in the output are all on pages: the
    // kernel copies them into a file, and they are written from the map into memory.
    let a = made(d, "a.npy", F4, &[2, 196_608], false, 4096, f32_values(1));
    let b = made(d, "b.npy", F4, &[2, 163_840], false, 4096, f32_values(2));
    let parts = [(&a, 16_384..114_688), (&b, 32_768..98_304)];
    let expected = reference(&parts, 1, Layout::C, same);
    let in_kernel = joins_as_expected(&parts, 1, None, None, &expected);
    if cfg!(target_os = "linux") {
        assert!(in_kernel > 0, "the kernel copied nothing");
    }
    // One round (axis 0): each slice is one run, copied whole in the kernel, or from its map.
    let c = made(d, "c.npy", F4, &[8, 65_536], false, 4096, f32_values(3));
    let parts = [(&c, 1..5), (&a, 0..1)];
    let expected = reference(&parts, 0, Layout::C, same);
    let in_kernel = joins_as_expected(&parts, 0, None, None, &expected);
    if cfg!(target_os = "linux") {
        assert!(in_kernel > 0, "the kernel copied nothing");
    }
}

#[test]
fn slices_of_small_inputs_are_read_through_the_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // One round of slices under `SMALL_INPUT`, read with positional reads, then one that
    // the kernel copies into a file and, into memory (which declines, as a pipe does), is
    // read in pieces past the buffer.
    let a = made(d, "a.npy", F4, &[10, 3], false, 128, f32_values(1));
    let b = made(d, "b.npy", F4, &[600_000, 3], false, 128, f32_values(2));
    let parts = [(&a, 2..7), (&b, 1..200_000), (&a, 9..10)];
    let expected = reference(&parts, 0, Layout::C, same);
    joins_as_expected(&parts, 0, None, None, &expected);
    // One past `READ_INPUT`: into memory, written from its map.
    let parts = [(&b, 1..400_000), (&a, 3..4)];
    let expected = reference(&parts, 0, Layout::C, same);
    joins_as_expected(&parts, 0, None, None, &expected);
    // Several rounds of runs of a few KiB: through the buffer as they are.
    let c = made(d, "c.npy", F4, &[20, 3000], false, 128, f32_values(3));
    let e = made(d, "e.npy", F4, &[20, 2000], false, 128, f32_values(4));
    let parts = [(&c, 100..2900), (&e, 1..1999)];
    let expected = reference(&parts, 1, Layout::C, same);
    joins_as_expected(&parts, 1, None, None, &expected);
}

#[test]
fn slices_of_tiny_runs_are_packed_in_bulk() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A last-axis join of runs of 12 bytes taken 28 and 20 bytes apart, and a whole input
    // between them: several buffers' worth of rounds.
    let rows = 100_000;
    let a = made(d, "a.npy", F4, &[rows, 7], false, 128, f32_values(1));
    let b = made(d, "b.npy", F4, &[rows, 2], false, 128, f32_values(2));
    let c = made(d, "c.npy", F4, &[rows, 5], false, 128, f32_values(3));
    let parts = [(&a, 2..5), (&b, 0..2), (&c, 1..4)];
    let expected = reference(&parts, 1, Layout::C, same);
    joins_as_expected(&parts, 1, None, None, &expected);
    // Runs of a size no copy loop is specialised on (11 elements of 4 bytes).
    let e = made(d, "e.npy", F4, &[1000, 13], false, 128, f32_values(4));
    let parts = [(&e, 1..12), (&a, 6..7)];
    let expected = reference(&parts, 1, Layout::C, same);
    joins_as_expected(&parts, 1, None, None, &expected);
}

#[test]
fn slices_are_cast_on_the_way() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // float16 integers up to 2048, which it holds exactly, widened to float32.
    let small = |i: usize| (i % 2048) as f32;
    let rows = 3000;
    let h = made(d, "h.npy", ("<f2", 2), &[rows, 6], false, 128, |i| {
        half::f16::from_f32(small(i)).to_le_bytes().to_vec()
    });
    let f = made(d, "f.npy", F4, &[rows, 4], false, 128, f32_values(1));
    let widen = |_: &Made, bytes: &[u8]| match bytes.len() {
        2 => half::f16::from_le_bytes([bytes[0], bytes[1]])
            .to_f32()
            .to_le_bytes()
            .to_vec(),
        _ => bytes.to_vec(),
    };
    let parts = [(&h, 1..4), (&f, 1..3)];
    let expected = reference(&parts, 1, Layout::C, widen);
    joins_as_expected(&parts, 1, None, Some("float32"), &expected);
    // One round: each slice cast as one run.
    let g = made(d, "g.npy", F4, &[10, 6], false, 128, f32_values(2));
    let parts = [(&h, 5..2000), (&g, 7..9)];
    let expected = reference(&parts, 0, Layout::C, widen);
    joins_as_expected(&parts, 0, None, Some("float32"), &expected);
}

#[test]
fn a_refused_cast_in_a_slice_names_the_element_in_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // int32 [4, 5], where element [2, 3] (number 13) does not fit int8; the slice 1..4 of
    // axis 1 holds it, in its third round.
    let a = made(d, "a.npy", ("<i4", 4), &[4, 5], false, 128, |i| {
        let value = if i == 13 { 1000 } else { i as i32 };
        value.to_le_bytes().to_vec()
    });
    for two in [false, true] {
        let parts = [(a.path.as_path(), 1..4), (a.path.as_path(), 0..1)];
        let Err(error) = join(&parts, 1, None, Some("int8"), two, false) else {
            panic!("the cast was not refused");
        };
        let error = error.to_string();
        assert!(error.contains("[2, 3] (number 13 "), "{error}");
    }
}

#[test]
fn slices_of_big_endian_inputs_are_byte_swapped() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rows = 5000;
    let big = made(d, "big.npy", (">f4", 4), &[rows, 6], false, 128, |i| {
        ((100_000 + i) as f32).to_be_bytes().to_vec()
    });
    let little = made(d, "little.npy", F4, &[rows, 4], false, 128, f32_values(2));
    let convert = |made: &Made, bytes: &[u8]| match made.descr.as_str() {
        ">f4" => bytes.iter().rev().copied().collect(),
        _ => bytes.to_vec(),
    };
    let parts = [(&big, 2..5), (&little, 1..3)];
    let expected = reference(&parts, 1, Layout::C, convert);
    joins_as_expected(&parts, 1, None, None, &expected);
    // Several rounds of long runs, swapped in the buffer.
    let wide = made(d, "wide.npy", (">f4", 4), &[3, 100_000], false, 128, |i| {
        ((100_000 + i % 30_000) as f32).to_be_bytes().to_vec()
    });
    let parts = [(&wide, 3..99_000), (&wide, 0..1)];
    let expected = reference(&parts, 1, Layout::C, convert);
    joins_as_expected(&parts, 1, None, None, &expected);
    // One round: a row, swapped as one run.
    let parts = [(&wide, 1..2), (&wide, 0..1)];
    let expected = reference(&parts, 0, Layout::C, convert);
    joins_as_expected(&parts, 0, None, None, &expected);
}

#[test]
fn slices_of_fortran_inputs_are_gathered_into_c_order() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A Fortran-ordered input, sliced along axis 1 and along axis 0, beside a C-ordered one.
    let rows = 4000;
    let f = made(d, "f.npy", F4, &[rows, 6], true, 128, f32_values(1));
    let c = made(d, "c.npy", F4, &[rows, 3], false, 128, f32_values(2));
    let parts = [(&f, 1..5), (&c, 1..2)];
    let expected = reference(&parts, 1, Layout::C, same);
    joins_as_expected(&parts, 1, Some(Layout::C), None, &expected);
    // Left to numpy's choice, that join is in Fortran order (the C-ordered slice, one column
    // wide, has no say), and the C-ordered input is the one gathered.
    let expected = reference(&parts, 1, Layout::Fortran, same);
    joins_as_expected(&parts, 1, None, None, &expected);
    let g = made(d, "g.npy", F4, &[7, 3, 5], true, 128, f32_values(3));
    let h = made(d, "h.npy", F4, &[7, 3, 2], false, 128, f32_values(4));
    let parts = [(&g, 1..4), (&h, 0..1)];
    let expected = reference(&parts, 2, Layout::C, same);
    joins_as_expected(&parts, 2, Some(Layout::C), None, &expected);
    // Along the first axis, which for a Fortran input is its fastest.
    let k = made(d, "k.npy", F4, &[6, 3, 5], false, 128, f32_values(5));
    let parts = [(&g, 2..6), (&k, 3..5)];
    let expected = reference(&parts, 0, Layout::C, same);
    joins_as_expected(&parts, 0, Some(Layout::C), None, &expected);
    // Gathered and cast.
    let parts = [(&f, 2..3), (&c, 0..2)];
    let widen = |_: &Made, bytes: &[u8]| {
        let value = f32::from_le_bytes(bytes.try_into().unwrap());
        f64::from(value).to_le_bytes().to_vec()
    };
    let expected = reference(&parts, 1, Layout::C, widen);
    joins_as_expected(&parts, 1, Some(Layout::C), Some("float64"), &expected);
}

#[test]
fn long_gathered_runs_are_read_in_tiles() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Runs of more than a MiB are read by positional reads of tiles (`gather::Tiles`): here
    // 500 columns of a slice that starts 3 rows in take two tiles of 2,097 rows and a short
    // last one of 890, beside a C-ordered input.
    let f = made(d, "f.npy", F4, &[3000, 500], true, 128, f32_values(1));
    let c = made(d, "c.npy", F4, &[10, 500], false, 128, f32_values(2));
    let parts = [(&f, 3..2990), (&c, 0..10)];
    let expected = reference(&parts, 0, Layout::C, same);
    joins_as_expected(&parts, 0, Some(Layout::C), None, &expected);
    // Byte-swapped and cast as they come out of the tiles.
    let big = made(d, "big.npy", (">f4", 4), &[2100, 520], true, 128, |i| {
        ((100_000 + i) as f32).to_be_bytes().to_vec()
    });
    let widen = |made: &Made, bytes: &[u8]| {
        let mut element: [u8; 4] = bytes.try_into().unwrap();
        if made.descr == ">f4" {
            element.reverse();
        }
        f64::from(f32::from_le_bytes(element))
            .to_le_bytes()
            .to_vec()
    };
    let c = made(d, "c2.npy", F4, &[10, 520], false, 128, f32_values(2));
    let parts = [(&c, 0..10), (&big, 0..2100)];
    let expected = reference(&parts, 0, Layout::C, widen);
    joins_as_expected(&parts, 0, Some(Layout::C), Some("float64"), &expected);
}

#[test]
fn slices_of_fortran_inputs_join_in_fortran_order_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // All-Fortran inputs give a Fortran output; along axis 0 (the fastest in storage) each
    // input's slice is one run per round, read in place.
    let a = made(d, "a.npy", F4, &[9, 5, 4], true, 128, f32_values(1));
    let b = made(d, "b.npy", F4, &[6, 5, 4], true, 128, f32_values(2));
    let parts = [(&a, 2..7), (&b, 1..4)];
    let expected = reference(&parts, 0, Layout::Fortran, same);
    joins_as_expected(&parts, 0, None, None, &expected);
    let parts = [(&a, 0..3), (&a, 4..9)];
    let expected = reference(&parts, 0, Layout::Fortran, same);
    joins_as_expected(&parts, 0, None, None, &expected);
}

#[test]
fn slices_of_a_stored_npz_member_check_its_crc_over_all_of_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let shape = [4u64, 131_072];
    let data: Vec<u8> = (0..4 * 131_072).flat_map(f32_values(1)).collect();
    let member = |name: &str, damaged: bool| Made {
        path: stored_npz(d, name, &shape, &data, 0, damaged),
        descr: "<f4".to_string(),
        shape: shape.to_vec(),
        fortran: false,
        size: 4,
        data: data.clone(),
    };
    let good = member("good.npz", false);
    let bad = member("bad.npz", true);
    // Several rounds of long runs and of short ones, and one round: each slice leaves bytes
    // out at both ends of the member, which its check must still read.
    let cases = [(1, 10..100_000), (1, 5..9), (0, 1..3)];
    for (axis, range) in cases {
        let parts = [(&good, range.clone()), (&good, 0..1)];
        let expected = reference(&parts, axis, Layout::C, same);
        joins_as_expected(&parts, axis, None, None, &expected);
        for two in [false, true] {
            for file in [false, true] {
                let parts = [
                    (good.path.as_path(), 0..1),
                    (bad.path.as_path(), range.clone()),
                ];
                let Err(error) = join(&parts, axis, None, None, two, file) else {
                    panic!("a damaged member was joined: axis {axis}, {range:?}");
                };
                let error = error.to_string();
                assert!(error.contains("x.npy fails its CRC-32 check"), "{error}");
            }
        }
    }
}
