//! Unit tests of the copy engine: every copy path, the threads and the packer's helpers.

use super::gather::offset_of;
use super::packer::{Side, pack_pair, strided_copy};
use super::*;
use crate::format::Layout;
use crate::input::{Input, OpenOptions};
use crate::plan::job::{self, JobOptions};
use crate::sys::spill::Spill;
use std::path::{Path, PathBuf};

mod sliced;

thread_local! {
    /// Makes every job that packs use a second thread, however small, on this thread.
    pub(super) static FORCE_THREADS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// An output in memory that declines kernel copies, as a pipe does, and fails once it
/// holds `fail_at` bytes.
pub(super) struct Memory {
    pub(super) bytes: Vec<u8>,
    pub(super) fail_at: usize,
}

impl Memory {
    /// An output in memory that never fails.
    pub(super) fn new() -> Memory {
        Memory {
            bytes: Vec::new(),
            fail_at: usize::MAX,
        }
    }
}

impl Sink for Memory {
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.bytes.len() + bytes.len() > self.fail_at {
            return Err(std::io::Error::other("the disk is full"));
        }
        self.bytes.extend_from_slice(bytes);
        Ok(())
    }

    fn name(&self) -> &Path {
        Path::new("memory")
    }
}

/// Writes a C-order .npy file of `descr` and `shape` whose data is `data`.
fn npy(dir: &Path, name: &str, descr: &str, shape: &[u64], data: &[u8]) -> PathBuf {
    let dtype = DType::from_name(descr).expect("a type");
    let mut bytes = crate::format::npy::header(&dtype, shape, Layout::C).expect("a header");
    bytes.extend_from_slice(data);
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("written");
    path
}

/// Joins `paths` along `axis` (cast to `cast`) with the engine, on one thread or on two,
/// into memory that fails at `fail_at` bytes or, for 0, into a file.
fn join(
    paths: &[PathBuf],
    axis: i64,
    cast: Option<&str>,
    two: bool,
    fail_at: usize,
) -> Result<Vec<u8>> {
    if fail_at == 0 {
        // A file, which takes kernel copies.
        let mut out = Scratch::new().unwrap();
        let done = join_into(paths, axis, cast, two, &mut out);
        return done.map(|()| contents(out));
    }
    let mut out = Memory {
        bytes: Vec::new(),
        fail_at,
    };
    join_into(paths, axis, cast, two, &mut out).map(|()| out.bytes)
}

/// Joins `paths` along `axis` (cast to `cast`) with the engine, on one thread or on two,
/// into `out`.
fn join_into(
    paths: &[PathBuf],
    axis: i64,
    cast: Option<&str>,
    two: bool,
    out: &mut dyn Sink,
) -> Result<()> {
    let mut head = Vec::new();
    let mut spill = Spill::default();
    let options = OpenOptions {
        format: None,
        keep_open: 0,
        read_whole_up_to: 0,
    };
    let inputs: Vec<Input> = paths
        .iter()
        .enumerate()
        .map(|(i, path)| {
            let path = path.as_path().into();
            Input::open(i + 1, path, options, &mut spill, &mut head, None).unwrap()
        })
        .collect();
    let cast = cast.map(|name| DType::from_name(name).expect("a type"));
    let job = job::build(&inputs, &JobOptions::along(axis, cast.as_ref())).unwrap();
    FORCE_THREADS.set(two);
    let done = execute(&job[0].plan, &job[0].sources, out);
    FORCE_THREADS.set(false);
    done
}

/// All the bytes of a temporary output.
fn contents(out: Scratch) -> Vec<u8> {
    let mut file = out.into_file();
    let mut bytes = Vec::new();
    std::io::Seek::rewind(&mut file).unwrap();
    std::io::Read::read_to_end(&mut file, &mut bytes).unwrap();
    bytes
}

/// Little-endian float32 bytes of `0, 1, 2, ...` plus `base`, `count` of them.
fn floats(count: usize, base: f32) -> Vec<u8> {
    (0..count)
        .flat_map(|i| (i as f32 + base).to_le_bytes())
        .collect()
}

/// The rows of `a` (`wa` bytes each) and `b` (`wb` bytes each) side by side.
fn side_by_side(a: &[u8], wa: usize, b: &[u8], wb: usize) -> Vec<u8> {
    a.chunks(wa)
        .zip(b.chunks(wb))
        .flat_map(|(x, y)| [x, y].concat())
        .collect()
}

#[test]
fn two_threads_write_what_one_writes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rows = 50_000;
    // Tiny runs packed in bulk (a last-axis join of widths 3 and 5).
    let (a, b) = (floats(rows * 3, 0.0), floats(rows * 5, 0.5));
    let last = [
        npy(d, "a.npy", "float32", &[rows as u64, 3], &a),
        npy(d, "b.npy", "float32", &[rows as u64, 5], &b),
    ];
    // A run of 512 KiB copied as it is, beside a small one packed.
    let (c, e) = (floats(4 * 131_072, 1.0), floats(4 * 3, 2.0));
    let mixed = [
        npy(d, "c.npy", "float32", &[4, 131_072], &c),
        npy(d, "e.npy", "float32", &[4, 3], &e),
    ];
    // A cast, one input at a time.
    // Integers up to 2048, which float16 holds exactly.
    let small = |i: usize| (i % 2048) as f32;
    let half: Vec<u8> = (0..rows)
        .flat_map(|i| half::f16::from_f32(small(i)).to_le_bytes())
        .collect();
    let cast = [
        npy(d, "h.npy", "float16", &[rows as u64], &half),
        npy(d, "f.npy", "float32", &[rows as u64], &a[..rows * 4]),
    ];
    let widened: Vec<u8> = (0..rows).flat_map(|i| small(i).to_le_bytes()).collect();
    // Inputs, axis, cast, and the expected output.
    type Case<'p> = (&'p [PathBuf], i64, Option<&'static str>, Vec<u8>);
    let cases: [Case; 3] = [
        (&last, 1, None, side_by_side(&a, 12, &b, 20)),
        (&mixed, 1, None, side_by_side(&c, 4 * 131_072, &e, 12)),
        (
            &cast,
            0,
            Some("float32"),
            [widened, a[..rows * 4].to_vec()].concat(),
        ),
    ];
    for (paths, axis, cast, expected) in cases {
        for (two, fail_at) in [
            (false, usize::MAX),
            (true, usize::MAX),
            (false, 0),
            (true, 0),
        ] {
            let joined = join(paths, axis, cast, two, fail_at).unwrap();
            assert!(
                joined == expected,
                "{} on {} threads, into {}",
                crate::messages::path(&paths[0]),
                1 + two as u8,
                if fail_at == 0 { "a file" } else { "memory" }
            );
        }
    }
}

#[test]
fn inputs_read_through_the_buffer_keep_their_order_across_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A small input, one read in pieces (past the buffer, under `READ_INPUT`, into memory,
    // which declines kernel copies as a pipe does), and a small one again.
    let sizes = [1000, (BUFFER + BUFFER / 2) / 4, 10];
    let data: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| floats(n, i as f32 * 0.25))
        .collect();
    let paths: Vec<PathBuf> = data
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            let name = format!("{i}.npy");
            npy(d, &name, "float32", &[bytes.len() as u64 / 4], bytes)
        })
        .collect();
    for fail_at in [usize::MAX, 0] {
        let joined = join(&paths, 0, None, false, fail_at).unwrap();
        assert!(joined == data.concat(), "into {}", fail_at == 0);
    }
}

#[test]
fn a_failed_write_stops_both_threads_with_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let rows = 100_000;
    let paths = [
        npy(
            dir.path(),
            "a.npy",
            "float32",
            &[rows, 3],
            &floats(rows as usize * 3, 0.0),
        ),
        npy(
            dir.path(),
            "b.npy",
            "float32",
            &[rows, 5],
            &floats(rows as usize * 5, 0.0),
        ),
    ];
    for two in [false, true] {
        let Err(error) = join(&paths, 1, None, two, 3 << 20) else {
            panic!("the write did not fail");
        };
        assert!(error.to_string().contains("the disk is full"), "{error}");
    }
}

#[test]
fn a_refused_cast_on_the_packing_thread_is_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let rows = 300_000usize;
    let mut data: Vec<u8> = (0..rows)
        .flat_map(|i| ((i % 100) as i32).to_le_bytes())
        .collect();
    data[rows * 4 - 4..].copy_from_slice(&1000i32.to_le_bytes());
    let paths = [npy(dir.path(), "a.npy", "int32", &[rows as u64], &data)];
    for two in [false, true] {
        let Err(error) = join(&paths, 0, Some("int8"), two, usize::MAX) else {
            panic!("the cast was not refused");
        };
        assert!(
            error.to_string().contains(&format!("number {}", rows - 1)),
            "{error}"
        );
    }
}

/// Writes an .npz archive holding one member `x.npy`, stored: a float32 .npy file of
/// `shape` whose data is `data` followed by `zeros` zero bytes (left a hole in the file,
/// so that a large member costs no writing). Its recorded CRC-32 is right, or, when
/// `damaged`, one bit off.
pub(super) fn stored_npz(
    dir: &Path,
    name: &str,
    shape: &[u64],
    data: &[u8],
    zeros: u64,
    damaged: bool,
) -> PathBuf {
    use std::io::{Seek, SeekFrom, Write};
    const NAME: &[u8] = b"x.npy";
    let header = crate::format::npy::header(&DType::Float32, shape, Layout::C).unwrap();
    let mut crc = crc32fast::Hasher::new();
    crc.update(&header);
    crc.update(data);
    let block = vec![0u8; 1 << 20];
    let mut left = zeros;
    while left > 0 {
        let n = left.min(block.len() as u64);
        crc.update(&block[..n as usize]);
        left -= n;
    }
    let crc = crc.finalize() ^ u32::from(damaged);
    let size = (header.len() + data.len()) as u64 + zeros;
    // The fields a local header and a central directory entry share, from the version
    // needed to the extra field's length.
    let mut fields = Vec::new();
    for half in [20u16, 0, 0, 0, 0x21] {
        fields.extend_from_slice(&half.to_le_bytes()); // version, flags, stored, time, date
    }
    fields.extend_from_slice(&crc.to_le_bytes());
    fields.extend_from_slice(&(size as u32).to_le_bytes());
    fields.extend_from_slice(&(size as u32).to_le_bytes());
    fields.extend_from_slice(&(NAME.len() as u16).to_le_bytes());
    fields.extend_from_slice(&0u16.to_le_bytes());
    let path = dir.join(name);
    let mut file = std::fs::File::create(&path).unwrap();
    file.write_all(&[b"PK\x03\x04", &fields[..], NAME, &header, data].concat())
        .unwrap();
    let directory_at = 4 + fields.len() as u64 + NAME.len() as u64 + size;
    file.set_len(directory_at).unwrap();
    file.seek(SeekFrom::Start(directory_at)).unwrap();
    let mut directory = [b"PK\x01\x02", &20u16.to_le_bytes()[..], &fields].concat();
    directory.extend_from_slice(&[0; 14]); // comment, disk, attributes, local header at 0
    directory.extend_from_slice(NAME);
    let mut end = b"PK\x05\x06\0\0\0\0\x01\0\x01\0".to_vec();
    end.extend_from_slice(&(directory.len() as u32).to_le_bytes());
    end.extend_from_slice(&(directory_at as u32).to_le_bytes());
    end.extend_from_slice(&0u16.to_le_bytes());
    file.write_all(&[directory, end].concat()).unwrap();
    path
}

/// Joins `paths` on `axis` on one thread and on two, into memory and into a file, and
/// checks that each join fails the CRC-32 check of input 2's member.
fn refused_for_its_crc(paths: &[PathBuf], axis: i64) {
    for (two, fail_at) in [
        (false, usize::MAX),
        (true, usize::MAX),
        (false, 0),
        (true, 0),
    ] {
        let Err(error) = join(paths, axis, None, two, fail_at) else {
            let into = if fail_at == 0 { "a file" } else { "memory" };
            panic!("a damaged member was joined, two threads: {two}, into {into}");
        };
        let error = error.to_string();
        assert!(error.starts_with("input 2 ("), "{error}");
        assert!(error.contains("bad.npz:x)"), "{error}");
        assert!(error.contains("x.npy fails its CRC-32 check"), "{error}");
    }
}

#[test]
#[allow(clippy::disallowed_macros)] // its note of a skip is the test's, not tjoin's
fn jobs_that_change_bytes_or_pack_tiny_runs_take_a_second_thread_from_thread_min() {
    if !std::thread::available_parallelism().is_ok_and(|n| n.get() > 1) {
        eprintln!("skipped: one core, where no job takes a second thread");
        return;
    }
    let f32 = DType::from_name("float32").unwrap();
    let input = |dtype: &str, run_bytes: u64, swaps: Swaps| InputPlan {
        data_offset: 128,
        data_len: THREAD_MIN,
        run_bytes,
        dtype: DType::from_name(dtype).unwrap(),
        swaps,
        runs: None,
    };
    let plan = |inputs: Vec<InputPlan>, bytes: u64| JoinPlan {
        axis: 1,
        dtype: f32.clone(),
        shape: vec![bytes / 4],
        layout: Layout::C,
        outer: THREAD_MIN / 4096,
        inputs,
        bytes,
    };
    let decide = |inputs: Vec<InputPlan>, bytes| threads(&plan(inputs, bytes), true);
    let kib = |k: u64| k << 10;
    // A cast (float16 to float32) and a byte swap, beside an input as it is.
    let cast = || {
        vec![
            input("float16", kib(2), Swaps::None),
            input("float32", kib(4), Swaps::None),
        ]
    };
    let swap = || {
        vec![
            input("float32", kib(4), Swaps::Uniform(4)),
            input("float32", kib(4), Swaps::None),
        ]
    };
    assert!(decide(cast(), THREAD_MIN));
    assert!(decide(swap(), THREAD_MIN));
    // Tiny runs as they are, packed in bulk.
    assert!(decide(
        vec![
            input("float32", 12, Swaps::None),
            input("float32", 20, Swaps::None)
        ],
        THREAD_MIN
    ));
    // Below THREAD_MIN a thread costs more than it saves.
    assert!(!decide(cast(), THREAD_MIN - 1));
    // Runs of a few KiB as they are: too long to pack in bulk, and nothing to change.
    let plain = vec![
        input("float32", kib(200), Swaps::None),
        input("float32", kib(200), Swaps::None),
    ];
    assert!(!decide(plain, THREAD_MIN));
}

#[test]
fn a_damaged_member_is_refused_by_the_packing_thread_of_a_large_join() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A last-axis join of widths 3 and 5 of at least THREAD_MIN bytes: the size at which
    // the packing moves to a second thread of its own (with a second core).
    let rows = THREAD_MIN / 32;
    let good = stored_npz(d, "good.npz", &[rows, 3], &[], rows * 12, false);
    let bad = stored_npz(d, "bad.npz", &[rows, 5], &[], rows * 20, true);
    refused_for_its_crc(&[good.clone(), bad], 1);
    let fixed = stored_npz(d, "bad.npz", &[rows, 5], &[], rows * 20, false);
    let joined = join(&[good, fixed], 1, None, false, usize::MAX).unwrap();
    assert_eq!(joined.len() as u64, THREAD_MIN);
}

#[test]
fn a_damaged_member_is_refused_where_long_runs_take_a_kernel_copy() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Runs of 512 KiB, long enough to be copied inside the kernel, beside tiny ones.
    let (c, e) = (floats(4 * 131_072, 1.0), floats(4 * 3, 2.0));
    let tiny = stored_npz(d, "tiny.npz", &[4, 3], &e, 0, false);
    let bad = stored_npz(d, "bad.npz", &[4, 131_072], &c, 0, true);
    refused_for_its_crc(&[tiny.clone(), bad], 1);
    // Each joined whole, on axis 0, as one copy of each input.
    let first = stored_npz(d, "first.npz", &[4, 131_072], &c, 0, false);
    let bad = stored_npz(d, "bad.npz", &[4, 131_072], &c, 0, true);
    refused_for_its_crc(&[first.clone(), bad], 0);
    let fixed = stored_npz(d, "bad.npz", &[4, 131_072], &c, 0, false);
    let joined = join(&[tiny, fixed], 1, None, false, 0).unwrap();
    assert!(joined == side_by_side(&e, 12, &c, 4 * 131_072));
}

#[test]
fn offsets_follow_strides_in_c_order() {
    // A 2x3 Fortran-ordered float32 block read in C order.
    let offsets: Vec<u64> = (0..6).map(|i| offset_of(i, &[2, 3], &[4, 8])).collect();
    assert_eq!(offsets, [0, 8, 16, 4, 12, 20]);
}

#[test]
fn strided_copies_interleave_runs_for_every_size() {
    for run in [1, 3, 12, 17, 20, 128, 200] {
        let src: Vec<u8> = (0..run * 5).map(|b| b as u8).collect();
        let stride = run + 3;
        let mut dst = vec![0xAA; stride * 5];
        strided_copy(&mut dst, stride, &src, run, run);
        for k in 0..5 {
            assert_eq!(
                dst[k * stride..k * stride + run],
                src[k * run..(k + 1) * run]
            );
            assert!(
                dst[k * stride + run..(k + 1) * stride]
                    .iter()
                    .all(|&b| b == 0xAA)
            );
        }
    }
}

/// One input's side of `pack_pair`.
fn side(bytes: &[u8], span: usize, pitch: usize, run: usize) -> Side<'_> {
    let rows = crate::sys::Rows { bytes, pitch };
    Side { rows, span, run }
}

#[test]
fn pairs_of_runs_pack_exactly_whatever_their_widened_words_carry() {
    // Every pair of run lengths `pack_pair` takes, runs back to back and a slice's (pitch
    // past the run), inputs that end at their last run (so the last rounds are copied
    // exactly) and inputs with bytes after it: the rounds equal two exact strided copies,
    // and no byte past them is touched.
    for a_run in [1, 4, 12, 16, 17, 20, 33, 48] {
        for b_run in [1, 3, 12, 20, 31, 32, 47, 48] {
            for (a_gap, b_gap) in [(0, 0), (5, 0), (0, 16), (40, 3)] {
                for tail in [0, 64] {
                    for rounds in [1, 2, 3, 9] {
                        let (a_pitch, b_pitch) = (a_run + a_gap, b_run + b_gap);
                        let a_span = (rounds - 1) * a_pitch + a_run;
                        let b_span = (rounds - 1) * b_pitch + b_run;
                        let a: Vec<u8> = (0..a_span + tail).map(|i| (i * 7 + 1) as u8).collect();
                        let b: Vec<u8> = (0..b_span + tail).map(|i| (i * 13 + 5) as u8).collect();
                        let stride = a_run + b_run;
                        let mut want = vec![0xAA; rounds * stride + 8];
                        strided_copy(&mut want, stride, &a[..a_span], a_pitch, a_run);
                        strided_copy(&mut want[a_run..], stride, &b[..b_span], b_pitch, b_run);
                        let mut got = vec![0xAA; rounds * stride + 8];
                        pack_pair(
                            &mut got[..rounds * stride],
                            rounds,
                            side(&a, a_span, a_pitch, a_run),
                            side(&b, b_span, b_pitch, b_run),
                        );
                        let case = format!(
                            "runs {a_run}+{b_run} gaps {a_gap}+{b_gap} tail {tail} rounds {rounds}"
                        );
                        assert_eq!(got[..rounds * stride], want[..rounds * stride], "{case}");
                        assert!(got[rounds * stride..].iter().all(|&x| x == 0xAA), "{case}");
                    }
                }
            }
        }
    }
}

#[test]
fn a_damaged_member_is_refused_where_its_pieces_are_hashed_beside_the_write() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Rows of 1.5 MiB (at least HASH_APART): each run of each member is written from its
    // map while a second thread hashes it, whole inputs (axis 0) and runs (axis 1) alike.
    let cols = 393_216;
    let (a, b) = (floats(2 * cols, 1.0), floats(2 * cols, 5.0));
    let good = stored_npz(d, "good.npz", &[2, cols as u64], &a, 0, false);
    let bad = stored_npz(d, "bad.npz", &[2, cols as u64], &b, 0, true);
    refused_for_its_crc(&[good.clone(), bad.clone()], 0);
    refused_for_its_crc(&[good.clone(), bad], 1);
    let fixed = stored_npz(d, "bad.npz", &[2, cols as u64], &b, 0, false);
    let joined = join(&[good.clone(), fixed.clone()], 0, None, false, 0).unwrap();
    assert!(joined == [a.as_slice(), b.as_slice()].concat());
    let joined = join(&[good, fixed], 1, None, false, 0).unwrap();
    assert!(joined == side_by_side(&a, 4 * cols, &b, 4 * cols));
}

/// A file output whose kernel copies stop after `limit` bytes each, as a kernel or a file
/// system that declines a copy midway leaves them; counts the bytes the kernel copied.
#[cfg(target_os = "linux")]
struct Declining {
    file: Scratch,
    limit: u64,
    in_kernel: u64,
}

#[cfg(target_os = "linux")]
impl Sink for Declining {
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.file.write_all(bytes)
    }

    fn copy_from(&mut self, file: &File, offset: u64, len: u64) -> std::io::Result<u64> {
        let copied = self.file.copy_from(file, offset, len.min(self.limit))?;
        self.in_kernel += copied;
        Ok(copied)
    }

    fn name(&self) -> &Path {
        self.file.name()
    }
}

/// `n` bytes that repeat nowhere a page, an element or a run apart (xorshift), so that a
/// copy from or to a wrong offset differs.
#[cfg(target_os = "linux")]
fn scrambled(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

// The kernel copies only on Linux (copy_file_range); elsewhere every run is written from the
// map, which the other engine tests cover.
#[cfg(target_os = "linux")]
#[test]
fn long_runs_at_odd_offsets_are_copied_in_the_kernel_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Axis 0: whole inputs whose data start 128 bytes into their files, the last one at an
    // odd offset of the output (after 300,007 + 5 bytes), lengths multiples of nothing.
    let (a, b, c) = (
        scrambled(300_007, 1),
        scrambled(5, 2),
        scrambled(400_009, 3),
    );
    let first = [
        npy(d, "a.npy", "uint8", &[300_007], &a),
        npy(d, "b.npy", "uint8", &[5], &b),
        npy(d, "c.npy", "uint8", &[400_009], &c),
    ];
    // Axis 1: 3 rounds of runs past `DIRECT_RUN`, which start at odd offsets of both their
    // file (128 + 300,007 r) and the output (562,154 r + 300,007).
    let (e, f) = (scrambled(3 * 300_007, 4), scrambled(3 * 262_147, 5));
    let last = [
        npy(d, "e.npy", "uint8", &[3, 300_007], &e),
        npy(d, "f.npy", "uint8", &[3, 262_147], &f),
    ];
    let cases: [(&[PathBuf], i64, Vec<u8>); 2] = [
        (&first, 0, [a, b, c].concat()),
        (&last, 1, side_by_side(&e, 300_007, &f, 262_147)),
    ];
    for (paths, axis, expected) in cases {
        // The kernel copying every long run whole, and declining each after 100,003 bytes:
        // the engine writes the rest from the input's map.
        for (limit, two) in [(u64::MAX, false), (100_003, false), (100_003, true)] {
            let mut out = Declining {
                file: Scratch::new().unwrap(),
                limit,
                in_kernel: 0,
            };
            join_into(paths, axis, None, two, &mut out).unwrap();
            let in_kernel = out.in_kernel;
            let bytes = contents(out.file);
            let first_difference = bytes.iter().zip(&expected).position(|(x, y)| x != y);
            assert!(
                bytes == expected,
                "axis {axis}, kernel copies of at most {limit} bytes: {} bytes, {} expected, \
                 first differing at {first_difference:?}",
                bytes.len(),
                expected.len(),
            );
            assert!(in_kernel > 0, "axis {axis}: the kernel copied nothing");
        }
    }
}
