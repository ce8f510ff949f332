//! Writes random join cases for a differential test: each case is a folder with the inputs
//! (`in0.*`, `in1.*`, ...) and `args.txt` (tjoin's arguments but the inputs and `-o`), to be
//! run once per engine and the outputs compared byte for byte. .ci/directml-wine.sh runs them
//! through DirectML under Wine against the CPU engine.
//!
//!     cargo run --example join_cases -- OUT_DIR [SEED]
//!     cargo run --release --example join_cases -- --huge OUT_DIR   # 2^32 + 256 elements
//!
//! The same seed writes the same files. No dependency but the standard library and
//! crc32fast, so the inputs do not come from the code under test.
//!
//! Most cases are tensors of multi-tensor .npz or .safetensors inputs, so that one run of
//! tjoin joins dozens of them (each with `--axis-for NAME=AXIS`), as starting a Direct3D 12
//! device under Wine costs seconds: ranks 1 to 8, every element width from 4 bits to 32
//! bytes (types DirectML has and types it lacks, both byte orders), C and Fortran order, axes
//! counted from either end, 1 to 5 inputs, zero-size dimensions. Single-tensor cases write
//! .npy and JSON outputs, and two large ones exceed the staging buffers and the buffer
//! budget of a software adapter, so that their join takes several dispatches.
#![allow(clippy::disallowed_macros)] // a tool for tests, not tjoin

use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

#[path = "../tests/integration/splitmix.rs"]
mod splitmix;

use splitmix::SplitMix as Rng;

impl Rng {
    /// A number in `low..=high`.
    fn range(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low + 1)
    }

    /// True with probability `percent` / 100.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.next() as usize % items.len()]
    }

    fn fill(&mut self, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(8) {
            let word = self.next().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

/// An element type: how a file names it, and its size in bits.
#[derive(Clone, Copy)]
struct Type {
    /// The numpy `descr` after the byte-order character, or the safetensors dtype.
    name: &'static str,
    bits: u64,
    /// Whether numpy gives it a byte order (`<` or `>`), else `|`.
    ordered: bool,
    /// What its bytes may be: anything, or only some values.
    values: Values,
}

#[derive(Clone, Copy, PartialEq)]
enum Values {
    Any,
    /// 0 or 1.
    Bool,
    /// UTF-32 code units of printable characters.
    Chars,
}

const fn t(name: &'static str, bits: u64, ordered: bool) -> Type {
    Type {
        name,
        bits,
        ordered,
        values: Values::Any,
    }
}

/// A one-byte type whose bytes are 0 or 1.
const fn boolean(name: &'static str) -> Type {
    Type {
        values: Values::Bool,
        ..t(name, 8, false)
    }
}

/// numpy's types, every width from 1 to 32 bytes that tjoin reads.
const NPY_TYPES: [Type; 22] = [
    boolean("b1"),
    t("u1", 8, false),
    t("i1", 8, false),
    t("u2", 16, true),
    t("i2", 16, true),
    t("f2", 16, true),
    t("V3", 24, false),
    t("u4", 32, true),
    t("i4", 32, true),
    t("f4", 32, true),
    t("S5", 40, false),
    t("u8", 64, true),
    t("i8", 64, true),
    t("f8", 64, true),
    t("c8", 64, true),
    t("M8[ns]", 64, true),
    t("m8[s]", 64, true),
    Type {
        values: Values::Chars,
        ..t("U3", 96, true)
    },
    t("c16", 128, true),
    t("f16", 128, true),
    t("c32", 256, true),
    // A record of 5 bytes: written as a structured descr below.
    t("record", 40, false),
];

/// safetensors' types, from 4 bits to 8 bytes.
const SAFETENSORS_TYPES: [Type; 22] = [
    boolean("BOOL"),
    t("F4", 4, false),
    t("F6_E2M3", 6, false),
    t("F6_E3M2", 6, false),
    t("U8", 8, false),
    t("I8", 8, false),
    t("F8_E5M2", 8, false),
    t("F8_E4M3", 8, false),
    t("F8_E8M0", 8, false),
    t("F8_E4M3FNUZ", 8, false),
    t("F8_E5M2FNUZ", 8, false),
    t("I16", 16, false),
    t("U16", 16, false),
    t("F16", 16, false),
    t("BF16", 16, false),
    t("I32", 32, false),
    t("U32", 32, false),
    t("F32", 32, false),
    t("C64", 64, false),
    t("F64", 64, false),
    t("I64", 64, false),
    t("U64", 64, false),
];

/// One tensor of every input, and the axis they join on.
struct Tensor {
    name: String,
    ty: Type,
    /// Per input: its shape and whether its bytes are big-endian.
    inputs: Vec<(Vec<u64>, bool)>,
    fortran: bool,
    axis: i64,
}

impl Tensor {
    /// A random tensor of `ty` for `count` inputs.
    fn random(rng: &mut Rng, name: String, ty: Type, count: usize, fortran_ok: bool) -> Tensor {
        let rank = rng.range(1, 8) as usize;
        let axis = rng.range(0, rank as u64 - 1) as usize;
        // Up to about 3000 elements per input, whatever the rank.
        let most = (3000f64.powf(1.0 / rank as f64) as u64).max(1) + 1;
        let mut dims: Vec<u64> = (0..rank).map(|_| rng.range(1, most)).collect();
        if rank > 1 && rng.chance(6) {
            let zero = (axis + 1 + rng.range(0, rank as u64 - 2) as usize) % rank;
            dims[zero] = 0;
        }
        // Sub-byte types: every run a whole number of bytes.
        let group = match ty.bits {
            4 => 2,
            6 => 4,
            _ => 1,
        };
        dims[rank - 1] *= group;
        // numpy writes the join of Fortran-order inputs in Fortran order only when every
        // dimension exceeds 1 (else in C order, a re-layout the CPU engine alone does).
        let fortran = fortran_ok && group == 1 && rank > 1 && rng.chance(20);
        if fortran {
            dims.iter_mut().for_each(|d| *d = (*d).max(2));
        }
        let inputs = (0..count)
            .map(|_| {
                let mut shape = dims.clone();
                shape[axis] = if fortran {
                    rng.range(2, most.max(2))
                } else if rng.chance(8) {
                    0
                } else {
                    rng.range(1, most)
                };
                if axis == rank - 1 {
                    shape[axis] *= group;
                }
                (shape, ty.ordered && ty.bits > 8 && rng.chance(30))
            })
            .collect();
        let axis = if rng.chance(40) {
            axis as i64 - rank as i64
        } else {
            axis as i64
        };
        Tensor {
            name,
            ty,
            inputs,
            fortran,
            axis,
        }
    }

    /// Input `index`'s bytes, random within what its type allows.
    fn data(&self, rng: &mut Rng, index: usize) -> Vec<u8> {
        let elements: u64 = self.inputs[index].0.iter().product();
        let mut bytes = vec![0; (elements * self.ty.bits / 8) as usize];
        rng.fill(&mut bytes);
        match self.ty.values {
            Values::Any => {}
            Values::Bool => bytes.iter_mut().for_each(|b| *b &= 1),
            Values::Chars => {
                let big = self.inputs[index].1;
                for unit in bytes.chunks_mut(4) {
                    let c = 0x20 + u32::from_le_bytes(unit.try_into().unwrap()) % 0x2000;
                    let c = if big {
                        c.to_be_bytes()
                    } else {
                        c.to_le_bytes()
                    };
                    unit.copy_from_slice(&c);
                }
            }
        }
        bytes
    }

    /// Input `index`'s numpy `descr`.
    fn descr(&self, index: usize) -> String {
        if self.ty.name == "record" {
            return "[('a', '<i4'), ('b', '|u1')]".to_string();
        }
        let order = match (self.ty.ordered, self.inputs[index].1) {
            (false, _) => '|',
            (true, false) => '<',
            (true, true) => '>',
        };
        format!("'{order}{}'", self.ty.name)
    }

    /// Input `index` as a .npy file.
    fn npy(&self, rng: &mut Rng, index: usize) -> Vec<u8> {
        let shape = &self.inputs[index].0;
        let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
        let shape = match dims.len() {
            1 => format!("({},)", dims[0]),
            _ => format!("({})", dims.join(", ")),
        };
        let fortran = if self.fortran { "True" } else { "False" };
        let mut header = format!(
            "{{'descr': {}, 'fortran_order': {fortran}, 'shape': {shape}, }}",
            self.descr(index)
        );
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut file = b"\x93NUMPY\x01\x00".to_vec();
        file.extend((header.len() as u16).to_le_bytes());
        file.extend(header.as_bytes());
        file.extend(self.data(rng, index));
        file
    }
}

/// An uncompressed zip of `members`, as numpy.savez writes .npz files.
fn zip(members: &[(String, Vec<u8>)]) -> Vec<u8> {
    let (mut file, mut directory) = (Vec::new(), Vec::new());
    for (name, data) in members {
        let crc = crc32fast::hash(data);
        let offset = file.len() as u32;
        let fixed = |signature: u32| {
            let mut h = signature.to_le_bytes().to_vec();
            h.extend([20, 0, 0, 0, 0, 0, 0, 0, 0x21, 0]);
            h.extend(crc.to_le_bytes());
            h.extend((data.len() as u32).to_le_bytes());
            h.extend((data.len() as u32).to_le_bytes());
            h.extend((name.len() as u16).to_le_bytes());
            h
        };
        file.extend(fixed(0x0403_4b50));
        file.extend([0, 0]);
        file.extend(name.as_bytes());
        file.extend(data);
        directory.extend(0x0201_4b50u32.to_le_bytes());
        directory.extend([20, 0]);
        directory.extend(&fixed(0)[4..]);
        directory.extend([0; 12]);
        directory.extend(offset.to_le_bytes());
        directory.extend(name.as_bytes());
    }
    let (start, size) = (file.len() as u32, directory.len() as u32);
    file.extend(directory);
    file.extend(0x0605_4b50u32.to_le_bytes());
    file.extend([0, 0, 0, 0]);
    file.extend((members.len() as u16).to_le_bytes());
    file.extend((members.len() as u16).to_le_bytes());
    file.extend(size.to_le_bytes());
    file.extend(start.to_le_bytes());
    file.extend([0, 0]);
    file
}

/// A .safetensors file of `tensors`' input `index`.
fn safetensors(rng: &mut Rng, tensors: &[Tensor], index: usize) -> Vec<u8> {
    let (mut header, mut data) = (String::from("{"), Vec::new());
    for tensor in tensors {
        let bytes = tensor.data(rng, index);
        let dims: Vec<String> = tensor.inputs[index].0.iter().map(u64::to_string).collect();
        if header.len() > 1 {
            header.push(',');
        }
        let _ = write!(
            header,
            "\"{}\":{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
            tensor.name,
            tensor.ty.name,
            dims.join(","),
            data.len(),
            data.len() + bytes.len()
        );
        data.extend(bytes);
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend(header.as_bytes());
    file.extend(data);
    file
}

/// Writes one case folder: the inputs and `args.txt`.
fn case(dir: &Path, args: &[String], inputs: Vec<(String, Vec<u8>)>) {
    fs::create_dir_all(dir).expect("create a case folder");
    for (name, bytes) in inputs {
        fs::write(dir.join(name), bytes).expect("write an input");
    }
    fs::write(dir.join("args.txt"), args.join(" ") + "\n").expect("write args.txt");
}

/// A case of `count` inputs holding `size` random tensors of `types` each: .npz files for
/// numpy's types, else .safetensors files. Returns how many joins it holds.
fn batch(
    rng: &mut Rng,
    dir: &Path,
    types: &[Type],
    size: usize,
    count: usize,
    adapter: &str,
) -> usize {
    let npz = std::ptr::eq(types, &NPY_TYPES[..]);
    let tensors: Vec<Tensor> = (0..size)
        .map(|i| {
            let ty = *rng.pick(types);
            Tensor::random(rng, format!("t{i:03}"), ty, count, npz)
        })
        .collect();
    let format = if npz { "npz" } else { "safetensors" };
    let inputs = (0..count)
        .map(|index| {
            let file = if npz {
                let members: Vec<(String, Vec<u8>)> = tensors
                    .iter()
                    .map(|t| (format!("{}.npy", t.name), t.npy(rng, index)))
                    .collect();
                zip(&members)
            } else {
                safetensors(rng, &tensors, index)
            };
            (format!("in{index}.{format}"), file)
        })
        .collect();
    let mut args = batch_args(&tensors, adapter, format);
    // The formats' own options, on every other case: deflated .npz members, and metadata.
    if count % 2 == 0 {
        let option = if npz {
            "--compress"
        } else {
            "--metadata=source=join_cases"
        };
        args.push(option.to_string());
    }
    case(dir, &args, inputs);
    size
}

/// `--axis-for NAME=AXIS` for each tensor, the adapter and the output format, and
/// `--uneven`: the random sizes along each axis are no checkpoint's split, and meant.
fn batch_args(tensors: &[Tensor], adapter: &str, format: &str) -> Vec<String> {
    let mut args = vec!["-a".to_string(), "0".to_string(), "--uneven".to_string()];
    for tensor in tensors {
        args.push(format!("--axis-for={}={}", tensor.name, tensor.axis));
    }
    args.extend(["--dml-adapter", adapter, "--format", format].map(String::from));
    args
}

/// `--huge`: one case of more than 2^32 elements, uint8 `[4, 2^30]` + `[4, 64]` on axis 1
/// (4 GiB in, written a slab at a time).
fn huge(dir: &Path) {
    fs::create_dir_all(dir).expect("create the case folder");
    let mut rng = Rng(2 << 32);
    for (index, columns) in [(0, 1u64 << 30), (1, 64)] {
        let mut header =
            format!("{{'descr': '|u1', 'fortran_order': False, 'shape': (4, {columns}), }}");
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let path = dir.join(format!("in{index}.npy"));
        let mut file = std::io::BufWriter::new(fs::File::create(path).expect("create an input"));
        file.write_all(b"\x93NUMPY\x01\x00").expect("write");
        file.write_all(&(header.len() as u16).to_le_bytes())
            .expect("write");
        file.write_all(header.as_bytes()).expect("write");
        let mut slab = vec![0; 1 << 20];
        let mut left = 4 * columns;
        while left > 0 {
            let n = left.min(slab.len() as u64) as usize;
            rng.fill(&mut slab[..n]);
            file.write_all(&slab[..n]).expect("write an input");
            left -= n as u64;
        }
        file.flush().expect("write an input");
    }
    fs::write(dir.join("args.txt"), "-a 1\n").expect("write args.txt");
}

fn main() {
    let mut argv = std::env::args().skip(1).peekable();
    if argv.peek().map(String::as_str) == Some("--huge") {
        let dir = argv.nth(1).expect("usage: join_cases --huge OUT_DIR");
        huge(Path::new(&dir));
        return;
    }
    let Some(out) = argv.next().map(PathBuf::from) else {
        eprintln!("usage: join_cases OUT_DIR [SEED] | --huge OUT_DIR");
        std::process::exit(2);
    };
    let seed = argv
        .next()
        .map_or(17, |s| s.parse().expect("SEED is a number"));
    let mut rng = Rng(seed);
    let mut total = 0;
    let adapters = ["default", "0"];

    // numpy types in .npz files, then safetensors' types, 1 to 5 inputs each.
    for count in 1..=5 {
        let dir = out.join(format!("npz_{count}_inputs"));
        total += batch(&mut rng, &dir, &NPY_TYPES, 36, count, adapters[count % 2]);
    }
    for count in 1..=5 {
        let dir = out.join(format!("safetensors_{count}_inputs"));
        let adapter = adapters[(count + 1) % 2];
        total += batch(&mut rng, &dir, &SAFETENSORS_TYPES, 10, count, adapter);
    }

    // Single tensors in .npy files, written as .npy or JSON.
    let json_types: Vec<Type> = NPY_TYPES
        .iter()
        .copied()
        .filter(|t| !matches!(t.name, "V3" | "record" | "f16" | "c32"))
        .collect();
    for i in 0..12 {
        let json = i % 2 == 1;
        let ty = if json {
            *rng.pick(&json_types)
        } else {
            *rng.pick(&NPY_TYPES)
        };
        let count = rng.range(1, 5) as usize;
        // JSON holds C order only: Fortran-order inputs would need the re-layout DirectML
        // leaves to the CPU engine.
        let tensor = Tensor::random(&mut rng, String::new(), ty, count, !json);
        let inputs = (0..count)
            .map(|index| (format!("in{index}.npy"), tensor.npy(&mut rng, index)))
            .collect();
        let mut args = vec![format!("--axis={}", tensor.axis)];
        args.extend(["--dml-adapter", adapters[i % 2]].map(String::from));
        if json {
            let form = if i % 4 == 1 { "nested" } else { "object" };
            args.extend(["--format", "json", "--json-form", form].map(String::from));
        }
        case(&out.join(format!("single_{i:02}")), &args, inputs);
        total += 1;
    }

    // Larger than the 16 MiB staging buffers and the 32 MiB budget of a software adapter:
    // 48 MiB of float32 joined on axis 1 over 64 rounds (dispatches of whole rounds), and
    // 40 MiB of uint8 in one round on axis 0 (each round cut in pieces).
    let big = |rng: &mut Rng, ty: Type, shapes: Vec<Vec<u64>>, axis: i64| {
        let tensor = Tensor {
            name: String::new(),
            ty,
            inputs: shapes.into_iter().map(|s| (s, false)).collect(),
            fortran: false,
            axis,
        };
        (0..tensor.inputs.len())
            .map(|index| (format!("in{index}.npy"), tensor.npy(rng, index)))
            .collect::<Vec<_>>()
    };
    let f4 = t("f4", 32, true);
    let inputs = big(
        &mut rng,
        f4,
        vec![vec![64, 40, 1024], vec![64, 56, 1024], vec![64, 96, 1024]],
        1,
    );
    case(
        &out.join("large_rounds"),
        &["-a".into(), "1".into()],
        inputs,
    );
    let u1 = t("u1", 8, false);
    let shapes = vec![vec![24 << 20], vec![16 << 20]];
    let inputs = big(&mut rng, u1, shapes, 0);
    case(
        &out.join("large_pieces"),
        &["-a".into(), "0".into()],
        inputs,
    );
    total += 2;

    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "{total} random joins written to {}", out.display());
}
