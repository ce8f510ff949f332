//! Property tests: random joins against a naive element-by-element reference,
//! split-then-join giving back the original file, and `tjoin split` then join giving back
//! the input.
//!
//! The expected output is what `np.save(path, np.concatenate(inputs, axis))` writes with
//! numpy 2.x (these rules were checked against numpy 2.4.6):
//! - byte order: `np.concatenate` makes the result dtype canonical (`PyArray_ResultType`), so the
//!   output is in native, i.e. little-endian, order even when every input is big-endian;
//! - memory order: see [`numpy_writes_fortran`].

use std::fs;
use std::path::Path;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;

use crate::splitmix::SplitMix;
use crate::util::{describe_difference, npy_bytes, parse_npy, read_npy, tjoin, write_npy};

/// An element type under test.
#[derive(Clone, Copy, Debug)]
struct Kind {
    /// The type string without its byte-order character.
    code: &'static str,
    /// Bytes per element.
    size: usize,
    /// Bytes reversed together in a big-endian file; 0 for types without byte order (`|`).
    swap_unit: usize,
}

const KINDS: [Kind; 8] = [
    Kind {
        code: "u1",
        size: 1,
        swap_unit: 0,
    },
    Kind {
        code: "b1",
        size: 1,
        swap_unit: 0,
    },
    Kind {
        code: "S3",
        size: 3,
        swap_unit: 0,
    },
    Kind {
        code: "i2",
        size: 2,
        swap_unit: 2,
    },
    Kind {
        code: "f4",
        size: 4,
        swap_unit: 4,
    },
    Kind {
        code: "f8",
        size: 8,
        swap_unit: 8,
    },
    Kind {
        code: "c16",
        size: 16,
        swap_unit: 8,
    },
    Kind {
        code: "U2",
        size: 8,
        swap_unit: 4,
    },
];

impl Kind {
    fn descr(self, big_endian: bool) -> String {
        let order = match (self.swap_unit, big_endian) {
            (0, _) => '|',
            (_, true) => '>',
            (_, false) => '<',
        };
        format!("{order}{}", self.code)
    }

    /// One element's bytes in a file of the given byte order, from its little-endian bytes (or
    /// back: the swap is its own inverse). Complex numbers swap each half, strings each character.
    fn in_order(self, element: &[u8], big_endian: bool) -> Vec<u8> {
        let mut out = element.to_vec();
        if big_endian && self.swap_unit > 1 {
            out.chunks_mut(self.swap_unit).for_each(<[u8]>::reverse);
        }
        out
    }

    /// A random element, little-endian, valid for the type: bools are 0 or 1, and unicode
    /// strings hold real code points (including the NUL padding).
    fn random_element(self, rng: &mut SplitMix) -> Vec<u8> {
        const CHARS: [char; 6] = ['\0', 'a', 'z', 'é', '€', '😀'];
        match self.code {
            "b1" => vec![(rng.next() & 1) as u8],
            "U2" => (0..2)
                .flat_map(|_| {
                    u32::from(CHARS[rng.below(CHARS.len() as u64) as usize]).to_le_bytes()
                })
                .collect(),
            _ => (0..self.size).map(|_| rng.next() as u8).collect(),
        }
    }
}

// The test data comes from one seed that proptest picks, so that a case stays small.
impl SplitMix {
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Element strides of `shape` in C or Fortran order. A 0-sized axis steps like a 1-sized one,
/// as in numpy's `_array_fill_strides`; it makes no difference to an empty array's layout.
fn strides(shape: &[u64], fortran: bool) -> Vec<u64> {
    let mut axes: Vec<usize> = (0..shape.len()).collect();
    if !fortran {
        axes.reverse();
    }
    let mut out = vec![0; shape.len()];
    let mut step = 1;
    for axis in axes {
        out[axis] = step;
        step *= shape[axis].max(1);
    }
    out
}

/// The multi-index of the `flat`-th element in C order.
fn unravel(mut flat: u64, shape: &[u64]) -> Vec<u64> {
    let mut index = vec![0; shape.len()];
    for axis in (0..shape.len()).rev() {
        index[axis] = flat % shape[axis];
        flat /= shape[axis];
    }
    index
}

fn offset(index: &[u64], strides: &[u64]) -> usize {
    index.iter().zip(strides).map(|(i, s)| i * s).sum::<u64>() as usize
}

/// An array by value: its elements in C order, each as little-endian bytes.
struct Array {
    shape: Vec<u64>,
    elements: Vec<Vec<u8>>,
}

impl Array {
    fn random(shape: Vec<u64>, kind: Kind, rng: &mut SplitMix) -> Array {
        let count = shape.iter().product();
        let elements = (0..count).map(|_| kind.random_element(rng)).collect();
        Array { shape, elements }
    }

    fn get(&self, index: &[u64]) -> &[u8] {
        &self.elements[offset(index, &strides(&self.shape, false))]
    }

    /// The data bytes of a .npy file holding this array in the given memory and byte order.
    fn to_data(&self, kind: Kind, fortran: bool, big_endian: bool) -> Vec<u8> {
        let file_strides = strides(&self.shape, fortran);
        let mut data = vec![0; self.elements.len() * kind.size];
        for (flat, element) in self.elements.iter().enumerate() {
            let at = offset(&unravel(flat as u64, &self.shape), &file_strides) * kind.size;
            data[at..at + kind.size].copy_from_slice(&kind.in_order(element, big_endian));
        }
        data
    }

    /// The inverse of [`Array::to_data`]; `data` must hold exactly the shape's elements.
    fn from_data(shape: &[u64], data: &[u8], kind: Kind, fortran: bool, big_endian: bool) -> Array {
        let file_strides = strides(shape, fortran);
        let count = shape.iter().product::<u64>();
        let elements = (0..count)
            .map(|flat| {
                let at = offset(&unravel(flat, shape), &file_strides) * kind.size;
                kind.in_order(&data[at..at + kind.size], big_endian)
            })
            .collect();
        Array {
            shape: shape.to_vec(),
            elements,
        }
    }

    /// The elements with `start <= index[axis] < start + len`.
    fn slice(&self, axis: usize, start: u64, len: u64) -> Array {
        let mut shape = self.shape.clone();
        shape[axis] = len;
        let count = shape.iter().product();
        let elements = (0..count)
            .map(|flat| {
                let mut index = unravel(flat, &shape);
                index[axis] += start;
                self.get(&index).to_vec()
            })
            .collect();
        Array { shape, elements }
    }
}

/// The join, element by element: each output index looks up which input it falls in.
fn reference_join(inputs: &[Array], axis: usize) -> Array {
    let mut shape = inputs[0].shape.clone();
    shape[axis] = inputs.iter().map(|a| a.shape[axis]).sum();
    let count = shape.iter().product();
    let elements = (0..count)
        .map(|flat| {
            let mut index = unravel(flat, &shape);
            let mut input = 0;
            while index[axis] >= inputs[input].shape[axis] {
                index[axis] -= inputs[input].shape[axis];
                input += 1;
            }
            inputs[input].get(&index).to_vec()
        })
        .collect();
    Array { shape, elements }
}

/// Whether `np.save` writes Fortran order for the join of inputs with these shapes and
/// `fortran_order` flags (as `np.load` returns them).
///
/// `np.concatenate` lays its result out in the axis order that numpy's
/// `PyArray_CreateMultiSortedStridePerm` reads off the inputs' strides: a stable insertion sort
/// of the axes, largest stride first, where an input abstains on a pair of axes if either has
/// size 1, and C order wins any disagreement. `np.save` then writes Fortran order only for an
/// array that is Fortran- but not C-contiguous (an empty one is both). So all-Fortran inputs
/// usually give a Fortran output, but not when the output has one axis longer than 1 or is
/// empty, nor when an empty Fortran input's strides tie; and a C input with a single axis
/// longer than 1 does not stop the others from giving a Fortran output.
/// This port agreed with numpy 2.4.6 on 20,000 random cases.
fn numpy_writes_fortran(inputs: &[(&[u64], bool)], out_shape: &[u64]) -> bool {
    if out_shape.contains(&0) {
        return false;
    }
    let rank = out_shape.len();
    let input_strides: Vec<Vec<u64>> = inputs.iter().map(|(shape, f)| strides(shape, *f)).collect();
    let mut perm: Vec<usize> = (0..rank).collect();
    for i0 in 1..rank {
        let j0 = perm[i0];
        let mut pos = i0;
        for i1 in (0..i0).rev() {
            let j1 = perm[i1];
            // Some(true): axis j0 has the larger stride and moves in front of j1.
            let mut vote = None;
            for ((shape, _), s) in inputs.iter().zip(&input_strides) {
                if shape[j0] != 1 && shape[j1] != 1 {
                    if s[j0] <= s[j1] {
                        vote = Some(false);
                    } else if vote.is_none() {
                        vote = Some(true);
                    }
                }
            }
            match vote {
                Some(true) => pos = i1,
                Some(false) => break,
                None => {}
            }
        }
        let axis = perm.remove(i0);
        perm.insert(pos, axis);
    }
    let mut out_strides = vec![0; rank];
    let mut step = 1;
    for &axis in perm.iter().rev() {
        out_strides[axis] = step;
        step *= out_shape[axis];
    }
    let contiguous = |fortran| {
        let want = strides(out_shape, fortran);
        (0..rank).all(|k| out_shape[k] == 1 || want[k] == out_strides[k])
    };
    !contiguous(false) && contiguous(true)
}

/// Whether `np.save` writes this array in Fortran order when it is laid out in Fortran order:
/// not when it is also C-contiguous (at most one axis longer than 1, or empty).
fn saved_as_fortran(shape: &[u64], fortran: bool) -> bool {
    fortran && !shape.contains(&0) && shape.iter().filter(|&&d| d > 1).count() >= 2
}

/// Runs `tjoin -a <axis> <names> -o out.npy` in `dir` and returns the output file.
fn run_join(dir: &Path, axis: i64, names: &[String]) -> Result<Vec<u8>, TestCaseError> {
    let output = tjoin()
        .current_dir(dir)
        .args(["-a", &axis.to_string()])
        .args(names)
        .args(["-o", "out.npy"])
        .output()
        .unwrap();
    prop_assert!(
        output.status.success(),
        "tjoin -a {} {:?} failed with {}:\n{}",
        axis,
        names,
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(fs::read(dir.join("out.npy")).unwrap())
}

/// A dimension: mostly 1 to 4, sometimes 0.
fn dim() -> impl Strategy<Value = u64> {
    prop_oneof![1 => Just(0u64), 6 => 1u64..=4]
}

/// Lowers the largest dims other than `axis` until the rest of the shape holds at most `max`
/// elements, so that a case stays quick however high its rank.
fn cap(dims: &mut [u64], axis: usize, max: u64) {
    let other = |dims: &[u64]| {
        (0..dims.len())
            .filter(|&k| k != axis)
            .map(|k| dims[k])
            .product::<u64>()
    };
    while other(dims) > max {
        let largest = (0..dims.len())
            .filter(|&k| k != axis)
            .max_by_key(|&k| dims[k])
            .unwrap();
        dims[largest] -= 1;
    }
}

/// One input of a [`JoinCase`].
#[derive(Clone, Debug)]
struct Input {
    /// Its size along the join axis.
    len: u64,
    fortran: bool,
    big_endian: bool,
}

#[derive(Clone, Debug)]
struct JoinCase {
    kind: Kind,
    /// The dims all inputs share; the one at the axis is replaced by each input's `len`.
    dims: Vec<u64>,
    axis: i64,
    inputs: Vec<Input>,
    seed: u64,
}

prop_compose! {
    fn join_case()(rank in 1usize..=6)(
        mut dims in vec(dim(), rank),
        axis in -(rank as i64)..rank as i64,
        inputs in vec((dim(), any::<bool>(), any::<bool>()), 1..=5),
        kind in select(&KINDS[..]),
        seed in any::<u64>(),
    ) -> JoinCase {
        let axis_index = axis.rem_euclid(dims.len() as i64) as usize;
        cap(&mut dims, axis_index, 36);
        let inputs = inputs
            .into_iter()
            .map(|(len, fortran, big_endian)| Input { len, fortran, big_endian })
            .collect();
        JoinCase { kind, dims, axis, inputs, seed }
    }
}

fn check_join(case: &JoinCase) -> Result<(), TestCaseError> {
    let kind = case.kind;
    let axis = case.axis.rem_euclid(case.dims.len() as i64) as usize;
    let mut rng = SplitMix(case.seed);
    let dir = tempfile::tempdir().unwrap();
    let mut arrays = Vec::new();
    let mut names = Vec::new();
    for (i, input) in case.inputs.iter().enumerate() {
        let mut shape = case.dims.clone();
        shape[axis] = input.len;
        let array = Array::random(shape, kind, &mut rng);
        let name = format!("in{i}.npy");
        let data = array.to_data(kind, input.fortran, input.big_endian);
        write_npy(
            &dir.path().join(&name),
            &kind.descr(input.big_endian),
            &array.shape,
            input.fortran,
            &data,
        );
        arrays.push(array);
        names.push(name);
    }
    let bytes = run_join(dir.path(), case.axis, &names)?;

    let want = reference_join(&arrays, axis);
    let got = parse_npy(&bytes)
        .map_err(|e| TestCaseError::fail(format!("out.npy does not parse: {e}")))?;
    prop_assert_eq!(&got.shape, &want.shape, "output shape");
    prop_assert_eq!(&got.descr[1..], kind.code, "output element type");
    prop_assert_eq!(
        got.data.len(),
        want.elements.len() * kind.size,
        "output data length"
    );

    // Values first, read back through the output's own header, then the exact layout.
    let values = Array::from_data(
        &got.shape,
        &got.data,
        kind,
        got.fortran,
        got.descr.starts_with('>'),
    );
    if let Some(flat) = (0..want.elements.len()).find(|&i| values.elements[i] != want.elements[i]) {
        prop_assert!(
            false,
            "element {:?} is {:?}, the reference says {:?}",
            unravel(flat as u64, &want.shape),
            values.elements[flat],
            want.elements[flat]
        );
    }
    prop_assert_eq!(
        got.descr,
        kind.descr(false),
        "numpy writes the joined array in native, little-endian order"
    );
    let orders: Vec<(&[u64], bool)> = arrays
        .iter()
        .zip(&case.inputs)
        .map(|(a, input)| (a.shape.as_slice(), input.fortran))
        .collect();
    let fortran = numpy_writes_fortran(&orders, &want.shape);
    prop_assert_eq!(
        got.fortran,
        fortran,
        "fortran_order (numpy's choice of memory order)"
    );
    let expected = npy_bytes(
        &kind.descr(false),
        &want.shape,
        fortran,
        &want.to_data(kind, fortran, false),
    );
    prop_assert!(
        bytes == expected,
        "{}",
        describe_difference(&expected, &bytes)
    );
    Ok(())
}

#[derive(Clone, Debug)]
struct SplitCase {
    kind: Kind,
    shape: Vec<u64>,
    axis: i64,
    pieces: usize,
    /// Stored in Fortran order; only where `np.save` would do so (see [`saved_as_fortran`]).
    fortran: bool,
    seed: u64,
}

prop_compose! {
    fn split_case()(rank in 1usize..=6)(
        mut shape in vec(dim(), rank),
        axis in -(rank as i64)..rank as i64,
        axis_len in 0u64..=8,
        pieces in 1usize..=4,
        fortran in any::<bool>(),
        kind in select(&KINDS[..]),
        seed in any::<u64>(),
    ) -> SplitCase {
        let axis_index = axis.rem_euclid(shape.len() as i64) as usize;
        shape[axis_index] = axis_len;
        cap(&mut shape, axis_index, 36);
        let fortran = saved_as_fortran(&shape, fortran);
        SplitCase { kind, shape, axis, pieces, fortran, seed }
    }
}

/// Lengths of the pieces that `total` is cut into.
///
/// numpy keeps Fortran order through a join only when the pieces themselves are stored in
/// Fortran order, which `np.save` does not do for a piece of length 1 or 0 along the axis when
/// that leaves it with a single axis longer than 1. So Fortran arrays are cut into pieces of at
/// least 2; C arrays anywhere, empty pieces included.
fn piece_lengths(total: u64, wanted: usize, fortran: bool, rng: &mut SplitMix) -> Vec<u64> {
    let (count, min) = if fortran {
        (wanted.min(total as usize / 2).max(1), 2)
    } else {
        (wanted, 0)
    };
    if count == 1 {
        return vec![total];
    }
    let mut lengths = vec![min; count];
    for _ in 0..total - min * count as u64 {
        lengths[rng.below(count as u64) as usize] += 1;
    }
    lengths
}

fn check_split_then_join(case: &SplitCase) -> Result<(), TestCaseError> {
    let kind = case.kind;
    let axis = case.axis.rem_euclid(case.shape.len() as i64) as usize;
    let mut rng = SplitMix(case.seed);
    let original = Array::random(case.shape.clone(), kind, &mut rng);
    let descr = kind.descr(false);
    let expected = npy_bytes(
        &descr,
        &original.shape,
        case.fortran,
        &original.to_data(kind, case.fortran, false),
    );

    let dir = tempfile::tempdir().unwrap();
    let mut names = Vec::new();
    let mut orders = Vec::new();
    let mut start = 0;
    for (i, len) in piece_lengths(case.shape[axis], case.pieces, case.fortran, &mut rng)
        .into_iter()
        .enumerate()
    {
        let piece = original.slice(axis, start, len);
        start += len;
        let fortran = saved_as_fortran(&piece.shape, case.fortran);
        let name = format!("in{i}.npy");
        write_npy(
            &dir.path().join(&name),
            &descr,
            &piece.shape,
            fortran,
            &piece.to_data(kind, fortran, false),
        );
        names.push(name);
        orders.push((piece.shape, fortran));
    }
    let orders: Vec<(&[u64], bool)> = orders.iter().map(|(s, f)| (s.as_slice(), *f)).collect();
    prop_assert_eq!(
        numpy_writes_fortran(&orders, &case.shape),
        case.fortran,
        "test bug: numpy would not give back the original's memory order"
    );

    let bytes = run_join(dir.path(), case.axis, &names)?;
    prop_assert!(
        bytes == expected,
        "{}",
        describe_difference(&expected, &bytes)
    );
    Ok(())
}

#[derive(Clone, Debug)]
struct TjoinSplitCase {
    kind: Kind,
    shape: Vec<u64>,
    axis: i64,
    parts: u64,
    /// Stored in Fortran order; only where `np.save` would do so (see [`saved_as_fortran`]).
    fortran: bool,
    big_endian: bool,
    seed: u64,
}

prop_compose! {
    fn tjoin_split_case()(rank in 1usize..=6)(
        mut shape in vec(dim(), rank),
        axis in -(rank as i64)..rank as i64,
        axis_len in 0u64..=9,
        parts in 1u64..=5,
        fortran in any::<bool>(),
        big_endian in any::<bool>(),
        kind in select(&KINDS[..]),
        seed in any::<u64>(),
    ) -> TjoinSplitCase {
        let axis_index = axis.rem_euclid(shape.len() as i64) as usize;
        shape[axis_index] = axis_len;
        cap(&mut shape, axis_index, 36);
        let fortran = saved_as_fortran(&shape, fortran);
        TjoinSplitCase { kind, shape, axis, parts, fortran, big_endian, seed }
    }
}

/// `tjoin split --parts N` cuts as numpy.array_split, each part the file `np.save` writes
/// of it (little-endian, Fortran order where numpy keeps it); joining the parts gives back
/// the input's values, and its very bytes when it is little-endian and numpy's join keeps
/// its memory order.
fn check_tjoin_split_then_join(case: &TjoinSplitCase) -> Result<(), TestCaseError> {
    let kind = case.kind;
    let axis = case.axis.rem_euclid(case.shape.len() as i64) as usize;
    let original = Array::random(case.shape.clone(), kind, &mut SplitMix(case.seed));
    let dir = tempfile::tempdir().unwrap();
    let data = original.to_data(kind, case.fortran, case.big_endian);
    let input = npy_bytes(
        &kind.descr(case.big_endian),
        &case.shape,
        case.fortran,
        &data,
    );
    fs::write(dir.path().join("x.npy"), &input).unwrap();
    let split = tjoin()
        .current_dir(dir.path())
        .args(["split", "-a", &case.axis.to_string()])
        .args([
            "--parts",
            &case.parts.to_string(),
            "x.npy",
            "-o",
            "p{part:02}.npy",
        ])
        .output()
        .unwrap();
    prop_assert!(
        split.status.success(),
        "{}",
        String::from_utf8_lossy(&split.stderr)
    );
    let len = case.shape[axis];
    let (each, longer) = (len / case.parts, len % case.parts);
    let (mut start, mut names, mut orders) = (0, Vec::new(), Vec::new());
    for part in 0..case.parts {
        let size = each + u64::from(part < longer);
        let want = original.slice(axis, start, size);
        start += size;
        let name = format!("p{part:02}.npy");
        let got = read_npy(&dir.path().join(&name));
        let fortran = saved_as_fortran(&want.shape, case.fortran);
        prop_assert_eq!(&got.descr, &kind.descr(false), "{}", name);
        prop_assert_eq!(
            (&got.shape, got.fortran),
            (&want.shape, fortran),
            "{}",
            name
        );
        let expected = want.to_data(kind, fortran, false);
        prop_assert!(
            got.data == expected,
            "{name}: {}",
            describe_difference(&expected, &got.data)
        );
        orders.push((want.shape, fortran));
        names.push(name);
    }
    let bytes = run_join(dir.path(), case.axis, &names)?;
    let orders: Vec<(&[u64], bool)> = orders.iter().map(|(s, f)| (s.as_slice(), *f)).collect();
    let fortran = numpy_writes_fortran(&orders, &case.shape);
    let expected = npy_bytes(
        &kind.descr(false),
        &case.shape,
        fortran,
        &original.to_data(kind, fortran, false),
    );
    prop_assert!(
        bytes == expected,
        "{}",
        describe_difference(&expected, &bytes)
    );
    if !case.big_endian && fortran == case.fortran {
        prop_assert!(bytes == input, "the join is not the input byte for byte");
    }
    Ok(())
}

proptest! {
    // Each case spawns the binary, so keep the count modest.
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn join_matches_a_naive_reference(case in join_case()) {
        check_join(&case)?;
    }

    #[test]
    fn split_then_join_gives_back_the_original(case in split_case()) {
        check_split_then_join(&case)?;
    }

    #[test]
    fn tjoin_split_then_join_gives_back_the_input(case in tjoin_split_case()) {
        check_tjoin_split_then_join(&case)?;
    }
}
