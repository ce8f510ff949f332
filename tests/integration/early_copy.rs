//! The early copy (`src/engine/early.rs`): an axis-0 join of small C-order .npy files into a .npy
//! file is written while the inputs are opened. It must be invisible: the same bytes as the
//! usual path whichever input stops it, the same refusals, and no file left behind.
//!
//! Every input holds values no other input holds, so that a dropped, repeated or misplaced
//! input shows in the output's bytes, which are compared whole against bytes built here.

use std::fs;
use std::path::Path;

use crate::util::{
    self, assert_mentions, describe_difference, dir_entries, f32_le, npy_bytes, npy_header,
    read_npy, write_npy,
};

/// Rows of a `<f4` input of 4 columns too large for the early copy to take (312.5 KiB).
const LARGE_ROWS: u64 = 20_000;

/// Inputs written into one folder, and what joining them along axis 0 must give.
struct Inputs<'a> {
    dir: &'a Path,
    /// The inputs' names, in order.
    names: Vec<String>,
    /// The value the next input starts at.
    next: u32,
    /// The logical (C-order) data of every input, in order.
    data: Vec<u8>,
    /// The sum of the inputs' first dimensions.
    rows: u64,
}

impl<'a> Inputs<'a> {
    fn new(dir: &'a Path) -> Inputs<'a> {
        Inputs {
            dir,
            names: Vec::new(),
            next: 1,
            data: Vec::new(),
            rows: 0,
        }
    }

    /// The next `count` values no input holds yet.
    fn values(&mut self, count: u64) -> Vec<f32> {
        let count = u32::try_from(count).unwrap();
        let values = (self.next..self.next + count).map(|v| v as f32).collect();
        self.next += count;
        values
    }

    fn add(&mut self, name: &str, shape: &[u64], logical: &[f32]) {
        self.names.push(name.to_string());
        self.data.extend(f32_le(logical));
        self.rows += shape[0];
    }

    /// A C-order `<f4` input of `shape`.
    fn c(&mut self, name: &str, shape: &[u64]) -> &mut Self {
        let values = self.values(shape.iter().product());
        write_npy(&self.dir.join(name), "<f4", shape, false, &f32_le(&values));
        self.add(name, shape, &values);
        self
    }

    /// A Fortran-order `<f4` input of `[rows, cols]`: its file holds the values column by
    /// column, the join takes them row by row.
    fn fortran(&mut self, name: &str, rows: u64, cols: u64) -> &mut Self {
        let logical = self.values(rows * cols);
        let (r, c) = (rows as usize, cols as usize);
        let column_major: Vec<f32> = (0..r * c).map(|k| logical[(k % r) * c + k / r]).collect();
        write_npy(
            &self.dir.join(name),
            "<f4",
            &[rows, cols],
            true,
            &f32_le(&column_major),
        );
        self.add(name, &[rows, cols], &logical);
        self
    }

    /// A big-endian `>f4` input of `shape`.
    fn big_endian(&mut self, name: &str, shape: &[u64]) -> &mut Self {
        let values = self.values(shape.iter().product());
        let data: Vec<u8> = values.iter().flat_map(|v| v.to_be_bytes()).collect();
        write_npy(&self.dir.join(name), ">f4", shape, false, &data);
        self.add(name, shape, &values);
        self
    }

    /// A JSON input of `shape`, written as `{"dtype": "float32", ...}`.
    fn json(&mut self, name: &str, shape: &[u64]) -> &mut Self {
        let values = self.values(shape.iter().product());
        let text: Vec<String> = values.iter().map(f32::to_string).collect();
        let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
        let json = format!(
            "{{\"dtype\": \"float32\", \"shape\": [{}], \"data\": [{}]}}\n",
            dims.join(", "),
            text.join(", ")
        );
        fs::write(self.dir.join(name), json).unwrap();
        self.add(name, shape, &values);
        self
    }

    /// The names, for a command line.
    fn args(&self) -> Vec<&str> {
        self.names.iter().map(String::as_str).collect()
    }

    /// The .npy file joining every input along axis 0 gives: `<f4`, C order, `cols` columns
    /// (`None` for 1-D inputs).
    fn expected(&self, cols: Option<u64>) -> Vec<u8> {
        match cols {
            Some(cols) => npy_bytes("<f4", &[self.rows, cols], false, &self.data),
            None => npy_bytes("<f4", &[self.rows], false, &self.data),
        }
    }
}

/// `tjoin <args> -o <out>` in `dir`: asserts success and that the folder holds exactly
/// `inputs` and `out` (no temporary file); returns the bytes of `out`.
fn join(dir: &Path, args: &[&str], inputs: &[&str], out: &str) -> Vec<u8> {
    util::succeeds(dir, &[args, &["-o", out]].concat());
    let mut expected: Vec<String> = inputs.iter().map(|n| n.to_string()).collect();
    if !expected.iter().any(|n| n == out) {
        expected.push(out.to_string());
    }
    expected.sort();
    assert_eq!(
        dir_entries(dir),
        expected,
        "tjoin {args:?} -o {out}: the folder should hold the inputs and the output only"
    );
    fs::read(dir.join(out)).unwrap()
}

#[track_caller]
fn assert_bytes(expected: &[u8], actual: &[u8], what: &str) {
    assert!(
        expected == actual,
        "{what}: {}",
        describe_difference(expected, actual)
    );
}

/// `tjoin <args>` in `dir`, refused cleanly with exit `code` (see [`util::refused`]); then
/// the same with `--backend auto`, which never takes the early copy: its stderr must be the
/// same. Returns stderr.
#[track_caller]
fn refused(dir: &Path, args: &[&str], code: i32) -> String {
    let early = util::refused(dir, args, code);
    let usual = util::refused(dir, &[&["--backend", "auto"][..], args].concat(), code);
    assert_eq!(
        early, usual,
        "tjoin {args:?}: the early copy's message differs from the usual path's"
    );
    early
}

// ---- joins the early copy takes whole or in part -------------------------------------------

#[test]
fn three_hundred_small_inputs_from_a_file_list_fill_several_buffers_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Inputs::new(dir.path());
    for i in 0..300 {
        inputs.c(&format!("shard-{i:03}.npy"), &[64, 64]);
    }
    let mut list = inputs.args().join("\n");
    list.push('\n');
    fs::write(dir.path().join("list.txt"), list).unwrap();
    let mut names = inputs.args();
    names.push("list.txt");
    let out = join(
        dir.path(),
        &["-a", "0", "--files-from", "list.txt"],
        &names,
        "out.npy",
    );
    assert_eq!(inputs.rows, 19_200);
    assert_bytes(
        &npy_bytes("<f4", &[19_200, 64], false, &inputs.data),
        &out,
        "300 shards of (64, 64)",
    );
}

#[test]
fn small_inputs_of_uneven_sizes_are_joined_across_buffer_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Inputs::new(dir.path());
    // 1 to 64 rows of 60 floats (240 B to 15 KiB): the 1 MiB buffer fills mid-input.
    for i in 0..200u64 {
        inputs.c(&format!("s{i:03}.npy"), &[1 + i * 37 % 64, 60]);
    }
    let args = [&["-a", "0"][..], &inputs.args()].concat();
    let out = join(dir.path(), &args, &inputs.args(), "out.npy");
    assert_bytes(&inputs.expected(Some(60)), &out, "uneven shards");
}

#[test]
fn inputs_at_and_just_past_the_whole_file_limit_are_joined_exactly() {
    let dir = tempfile::tempdir().unwrap();
    // `|u1` rows of one byte, so file sizes can be set to the byte: 64 KiB is read whole,
    // 64 KiB + 1 is not.
    let header_len = npy_header("|u1", &[65_000, 1], false).len() as u64;
    let sizes = [
        ("a.npy", 100),
        ("at-limit.npy", (64 << 10) - header_len),
        ("b.npy", 7),
        ("past-limit.npy", (64 << 10) + 1 - header_len),
        ("c.npy", 3),
    ];
    let mut data = Vec::new();
    for (i, (name, rows)) in sizes.iter().enumerate() {
        let bytes: Vec<u8> = (0..*rows)
            .map(|k| (k as u8).wrapping_mul(7) ^ i as u8)
            .collect();
        write_npy(&dir.path().join(name), "|u1", &[*rows, 1], false, &bytes);
        data.extend(bytes);
    }
    assert_eq!(
        fs::metadata(dir.path().join("at-limit.npy")).unwrap().len(),
        64 << 10
    );
    let names: Vec<&str> = sizes.iter().map(|(name, _)| *name).collect();
    let args = [&["-a", "0"][..], &names].concat();
    let out = join(dir.path(), &args, &names, "out.npy");
    let rows = sizes.iter().map(|(_, rows)| rows).sum();
    assert_bytes(
        &npy_bytes("|u1", &[rows, 1], false, &data),
        &out,
        "around 64 KiB",
    );
}

#[test]
fn a_large_input_between_small_ones_ends_the_taking_and_the_engine_writes_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Inputs::new(dir.path());
    inputs
        .c("a.npy", &[3, 4])
        .c("b.npy", &[5, 4])
        .c("large.npy", &[LARGE_ROWS, 4])
        .c("c.npy", &[2, 4])
        .c("d.npy", &[1, 4]);
    let args = [&["-a", "0"][..], &inputs.args()].concat();
    let out = join(dir.path(), &args, &inputs.args(), "out.npy");
    assert_bytes(&inputs.expected(Some(4)), &out, "small, large, small");
}

#[test]
fn a_large_first_input_means_the_early_copy_never_starts() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Inputs::new(dir.path());
    inputs
        .c("large.npy", &[LARGE_ROWS, 4])
        .c("a.npy", &[3, 4])
        .c("b.npy", &[2, 4]);
    let args = [&["-a", "0"][..], &inputs.args()].concat();
    let out = join(dir.path(), &args, &inputs.args(), "out.npy");
    assert_bytes(&inputs.expected(Some(4)), &out, "large, small");
}

#[test]
fn a_fortran_order_input_after_small_ones_is_gathered_into_a_c_order_output() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Inputs::new(dir.path());
    inputs
        .c("a.npy", &[3, 4])
        .c("b.npy", &[2, 4])
        .fortran("f.npy", 5, 4)
        .c("c.npy", &[2, 4]);
    let args = [&["-a", "0"][..], &inputs.args()].concat();
    let out = join(dir.path(), &args, &inputs.args(), "out.npy");
    assert_bytes(&inputs.expected(Some(4)), &out, "C, C, Fortran, C");
    assert!(!read_npy(&dir.path().join("out.npy")).fortran);
    let header = String::from_utf8_lossy(&out[..npy_header("<f4", &[12, 4], false).len()]);
    assert!(
        header.contains("'fortran_order': False"),
        "the output header should say fortran_order False: {header}"
    );
}

/// One-row C inputs have no say in the output's order (as in numpy): Fortran inputs make it
/// Fortran, so the early copy's C-order data does not fit and must be discarded.
#[test]
fn fortran_inputs_that_make_the_output_fortran_discard_what_was_taken() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Inputs::new(dir.path());
    inputs
        .c("a.npy", &[1, 4])
        .c("b.npy", &[1, 4])
        .fortran("f.npy", 3, 4)
        .fortran("g.npy", 2, 4);
    let args = [&["-a", "0"][..], &inputs.args()].concat();
    let out = join(dir.path(), &args, &inputs.args(), "out.npy");
    // The logical (7, 4) result, column by column.
    let logical: Vec<f32> = inputs
        .data
        .chunks(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let column_major: Vec<f32> = (0..28).map(|k| logical[(k % 7) * 4 + k / 7]).collect();
    assert_bytes(
        &npy_bytes("<f4", &[7, 4], true, &f32_le(&column_major)),
        &out,
        "C (one row), C (one row), Fortran, Fortran",
    );
}

#[test]
fn zero_row_inputs_anywhere_in_the_list_add_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Inputs::new(dir.path());
    inputs
        .c("z0.npy", &[0, 4])
        .c("a.npy", &[2, 4])
        .c("z1.npy", &[0, 4])
        .c("b.npy", &[3, 4])
        .c("z2.npy", &[0, 4])
        .c("large.npy", &[LARGE_ROWS, 4])
        .c("z3.npy", &[0, 4])
        .c("c.npy", &[1, 4]);
    let args = [&["-a", "0"][..], &inputs.args()].concat();
    let out = join(dir.path(), &args, &inputs.args(), "out.npy");
    assert_bytes(&inputs.expected(Some(4)), &out, "with zero-row inputs");
}

#[test]
fn one_dimensional_inputs_are_joined_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Inputs::new(dir.path());
    inputs
        .c("p.npy", &[5])
        .c("q.npy", &[0])
        .c("r.npy", &[7])
        .c("large.npy", &[80_000])
        .c("s.npy", &[3]);
    let args = [&["-a", "0"][..], &inputs.args()].concat();
    let out = join(dir.path(), &args, &inputs.args(), "out.npy");
    assert_bytes(&inputs.expected(None), &out, "1-D inputs");
    let all_small = ["p.npy", "q.npy", "r.npy", "s.npy"];
    let out = join(
        dir.path(),
        &[&["-a", "-1"][..], &all_small].concat(),
        &[&inputs.args()[..], &["out.npy"]].concat(),
        "small.npy",
    );
    let mut small = inputs.data[..12 * 4].to_vec();
    small.extend_from_slice(&inputs.data[inputs.data.len() - 12..]);
    assert_bytes(
        &npy_bytes("<f4", &[15], false, &small),
        &out,
        "small 1-D inputs, -a -1",
    );
}

#[test]
fn minus_the_rank_as_the_axis_gives_the_same_bytes_as_axis_0() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Inputs::new(dir.path());
    inputs
        .c("a.npy", &[3, 4])
        .c("b.npy", &[2, 4])
        .c("c.npy", &[4, 4]);
    let minus = join(
        dir.path(),
        &[&["-a", "-2"][..], &inputs.args()].concat(),
        &inputs.args(),
        "minus.npy",
    );
    let names = [&inputs.args()[..], &["minus.npy"]].concat();
    let zero = join(
        dir.path(),
        &[&["-a", "0"][..], &inputs.args()].concat(),
        &names,
        "zero.npy",
    );
    assert_bytes(&inputs.expected(Some(4)), &minus, "-a -2");
    assert_bytes(&zero, &minus, "-a -2 against -a 0");

    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Inputs::new(dir.path());
    inputs.c("a.npy", &[2, 3, 2]).c("b.npy", &[1, 3, 2]);
    let out = join(
        dir.path(),
        &[&["-a", "-3"][..], &inputs.args()].concat(),
        &inputs.args(),
        "out.npy",
    );
    assert_bytes(
        &npy_bytes("<f4", &[3, 3, 2], false, &inputs.data),
        &out,
        "-a -3 on rank 3",
    );
}

/// An output that is one of the inputs is refused (a join would read the old output as
/// data), though the early copy may have started on the first inputs: nothing is left behind
/// and the input is untouched, whether the early copy took it or not.
#[test]
fn an_output_that_is_one_of_the_inputs_is_refused_with_nothing_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Inputs::new(dir.path());
    inputs
        .c("a.npy", &[3, 4])
        .c("large.npy", &[LARGE_ROWS, 4])
        .c("c.npy", &[1, 4]);
    for out in ["a.npy", "large.npy", "c.npy"] {
        let before = fs::read(dir.path().join(out)).unwrap();
        let args = [&["-a", "0"][..], &inputs.args(), &["-o", out]].concat();
        let stderr = util::refused(dir.path(), &args, 2);
        util::assert_mentions(&stderr, &["the join would read the old output as data"]);
        assert!(
            fs::read(dir.path().join(out)).unwrap() == before,
            "{out} changed"
        );
    }
}

// ---- the same result as the usual path -----------------------------------------------------

/// Joins the inputs with the CPU backend (early copy) into `early.npy` and with
/// `--backend auto` (never early) into `usual.npy`; asserts the same bytes and returns them.
fn same_as_usual_path(dir: &Path, inputs: &Inputs) -> Vec<u8> {
    let args = [&["-a", "0"][..], &inputs.args()].concat();
    let early = join(dir, &args, &inputs.args(), "early.npy");
    let auto = [&["--backend", "auto"][..], &args].concat();
    let names = [&inputs.args()[..], &["early.npy"]].concat();
    let usual = join(dir, &auto, &names, "usual.npy");
    assert_bytes(&usual, &early, "the early copy against the usual path");
    early
}

#[test]
fn a_mixed_list_gives_the_same_bytes_with_and_without_the_early_copy() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Inputs::new(dir.path());
    inputs
        .c("a.npy", &[3, 4])
        .c("b.npy", &[2, 4])
        .c("large.npy", &[LARGE_ROWS, 4])
        .c("c.npy", &[5, 4]);
    let out = same_as_usual_path(dir.path(), &inputs);
    assert_bytes(
        &inputs.expected(Some(4)),
        &out,
        "small, small, large, small",
    );
}

#[test]
fn a_big_endian_input_after_small_ones_gives_the_usual_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Inputs::new(dir.path());
    inputs
        .c("a.npy", &[3, 4])
        .c("b.npy", &[2, 4])
        .big_endian("be.npy", &[2, 4])
        .c("c.npy", &[1, 4]);
    let out = same_as_usual_path(dir.path(), &inputs);
    // As numpy.concatenate: the values in the native (little-endian) order.
    assert_bytes(&inputs.expected(Some(4)), &out, "<f4, <f4, >f4, <f4");
}

#[test]
fn a_json_input_after_small_ones_gives_the_usual_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Inputs::new(dir.path());
    inputs
        .c("a.npy", &[3, 4])
        .c("b.npy", &[2, 4])
        .json("j.json", &[2, 4])
        .c("c.npy", &[1, 4]);
    let out = same_as_usual_path(dir.path(), &inputs);
    assert_bytes(&inputs.expected(Some(4)), &out, "npy, npy, json, npy");
}

// ---- refusals after inputs were taken -----------------------------------------------------

#[test]
fn a_third_input_with_other_trailing_dims_is_refused_and_nothing_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Inputs::new(dir.path());
    inputs
        .c("a.npy", &[2, 4])
        .c("b.npy", &[3, 4])
        .c("c.npy", &[2, 5])
        .c("d.npy", &[2, 4]);
    let args = [&["-a", "0"][..], &inputs.args(), &["-o", "out.npy"]].concat();
    let stderr = refused(dir.path(), &args, 2);
    assert_mentions(
        &stderr,
        &[
            "cannot join along axis 0: input 3 (c.npy) has shape [2, 5]; the other 3 inputs \
             have [*, 4]",
            "5 != 4",
        ],
    );
}

#[test]
fn a_third_input_of_another_type_is_refused_with_the_cast_hint() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Inputs::new(dir.path());
    inputs.c("a.npy", &[2, 4]).c("b.npy", &[3, 4]);
    write_npy(&dir.path().join("c.npy"), "<f8", &[2, 4], false, &[0; 64]);
    inputs.c("d.npy", &[2, 4]);
    let args = [
        "-a", "0", "a.npy", "b.npy", "c.npy", "d.npy", "-o", "out.npy",
    ];
    let stderr = refused(dir.path(), &args, 2);
    assert_mentions(&stderr, &["float32", "float64", "c.npy", "--cast"]);
}

#[test]
fn a_truncated_third_input_fails_the_run_and_nothing_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Inputs::new(dir.path());
    inputs.c("a.npy", &[2, 4]).c("b.npy", &[3, 4]);
    // The header declares 32 bytes of data; the file holds 20.
    write_npy(&dir.path().join("c.npy"), "<f4", &[2, 4], false, &[1; 20]);
    inputs.c("d.npy", &[2, 4]);
    let args = [
        "-a", "0", "a.npy", "b.npy", "c.npy", "d.npy", "-o", "out.npy",
    ];
    let stderr = refused(dir.path(), &args, 1);
    assert_mentions(&stderr, &["c.npy", "truncated"]);
}

#[test]
fn a_missing_or_mismatched_input_after_taken_ones_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Inputs::new(dir.path());
    inputs
        .c("a.npy", &[2, 4])
        .c("b.npy", &[3, 4])
        .c("large.npy", &[LARGE_ROWS, 4])
        .c("rank3.npy", &[1, 2, 4]);
    let missing = ["-a", "0", "a.npy", "b.npy", "missing.npy", "-o", "out.npy"];
    let stderr = refused(dir.path(), &missing, 1);
    assert_mentions(&stderr, &["missing.npy", "No such file"]);
    let rank = [
        "-a",
        "0",
        "a.npy",
        "b.npy",
        "large.npy",
        "rank3.npy",
        "-o",
        "out.npy",
    ];
    let stderr = refused(dir.path(), &rank, 2);
    assert_mentions(&stderr, &["rank", "rank3.npy", "[1, 2, 4]"]);
}

#[test]
fn no_clobber_refuses_an_existing_target_and_leaves_it_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Inputs::new(dir.path());
    inputs
        .c("a.npy", &[2, 4])
        .c("b.npy", &[3, 4])
        .c("c.npy", &[1, 4]);
    let precious = npy_bytes("<f4", &[1, 1], false, &f32_le(&[42.0]));
    fs::write(dir.path().join("out.npy"), &precious).unwrap();
    let args = [
        "--no-clobber",
        "-a",
        "0",
        "a.npy",
        "b.npy",
        "c.npy",
        "-o",
        "out.npy",
    ];
    let stderr = refused(dir.path(), &args, 1);
    assert_mentions(
        &stderr,
        &["out.npy: it exists, and --no-clobber forbids replacing it"],
    );
    assert_eq!(fs::read(dir.path().join("out.npy")).unwrap(), precious);
}

#[test]
fn an_output_that_cannot_be_created_is_refused_as_on_the_usual_path() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Inputs::new(dir.path());
    inputs.c("a.npy", &[2, 4]).c("b.npy", &[3, 4]);
    let stderr = refused(
        dir.path(),
        &["-a", "0", "a.npy", "b.npy", "-o", "nowhere/out.npy"],
        1,
    );
    assert_mentions(&stderr, &["nowhere/out.npy", "does not exist"]);
    fs::create_dir(dir.path().join("folder.npy")).unwrap();
    let stderr = refused(
        dir.path(),
        &["-a", "0", "a.npy", "b.npy", "-o", "folder.npy"],
        1,
    );
    assert_mentions(&stderr, &["folder.npy", "it is a directory"]);
}

#[test]
fn a_small_npy_on_standard_input_joins_with_small_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Inputs::new(dir.path());
    inputs.c("a.npy", &[2, 4]).c("b.npy", &[3, 4]);
    let piped = inputs.values(4);
    let stdin = npy_bytes("<f4", &[1, 4], false, &f32_le(&piped));
    let args = ["-a", "0", "-", "a.npy", "b.npy", "-o", "out.npy"];
    util::succeeds_with_stdin(dir.path(), &args, &stdin);
    assert_eq!(dir_entries(dir.path()), ["a.npy", "b.npy", "out.npy"]);
    let mut data = f32_le(&piped);
    data.extend_from_slice(&inputs.data);
    assert_bytes(
        &npy_bytes("<f4", &[6, 4], false, &data),
        &fs::read(dir.path().join("out.npy")).unwrap(),
        "stdin, a.npy, b.npy",
    );
}
