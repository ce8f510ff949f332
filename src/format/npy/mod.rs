//! The .npy format: reading a header (versions 1.0, 2.0, 3.0) and writing one exactly as
//! `numpy.save` does. <https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html>

use std::io;

use crate::dtype::{ByteOrder, DType};
use crate::error::Refusal;
use crate::format::Sink;
use crate::format::{Contents, Descriptor, Found, Layout, Opened, OutTensor, Writer, Writing};

/// numpy's .npy: one tensor behind its magic and header; read and written.
pub const FORMAT: Descriptor = Descriptor {
    name: "npy",
    extensions: &[".npy"],
    files: ".npy files",
    magic: Some(|head| head.starts_with(b"\x93NUMPY")),
    looks_like: None,
    reader: Some(|opened, _, _| {
        let Opened {
            file,
            len,
            name,
            head,
        } = opened;
        Ok(Contents {
            tensors: vec![Found {
                name: None,
                info: read_header(
                    HeaderBytes {
                        head,
                        rest: &mut ReadAt {
                            file,
                            at: head.len() as u64,
                        },
                        start: 0,
                        len,
                        past_end: PastEnd::Unfinished,
                    },
                    name,
                )?,
                file: None,
                stored_crc: None,
            }],
            metadata: None,
            notes: Vec::new(),
            left_out: Vec::new(),
            format: None,
            distributed: Vec::new(),
        })
    }),
    archive: None,
    writing: Writing::By(|_| Box::new(NpyWriter)),
    holds_names: false,
    c_order_only: false,
    reads_in_place: true,
    cannot_grow: None,
};

mod header;

pub use header::{Header, HeaderBytes, Parse, PastEnd, ReadAt, extent, parse_header, read_header};

const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// numpy aligns the start of the data to this many bytes.
const ALIGN: usize = 64;
/// numpy leaves room for the growth axis to reach this many digits.
const GROWTH_AXIS_MAX_DIGITS: usize = 21;
/// A header longer than this is refused before it is read: numpy's own writer needs more only
/// for records of tens of thousands of fields (and `numpy.load` refuses headers over 10,000
/// bytes unless told to trust the file), and a lying length field must cost neither memory
/// nor the time of parsing megabytes of Python literal.
pub const MAX_HEADER_LEN: u64 = 1 << 20;

/// Writes one tensor as numpy.save would.
pub struct NpyWriter;

impl Writer for NpyWriter {
    fn check(&self, tensors: &[OutTensor]) -> std::result::Result<(), Refusal> {
        let problem = match tensors {
            [one] => check_dtype(one).err(),
            _ => Some(format!(
                "a .npy file holds one tensor, and this join makes {}",
                tensors.len()
            )),
        };
        super::cannot_hold(problem.into_iter().collect())
    }

    fn start_tensor(&mut self, sink: &mut dyn Sink, tensor: &OutTensor) -> io::Result<()> {
        sink.write_all(&header(&tensor.dtype, &tensor.shape, tensor.layout)?)
    }
}

/// Refuses element types numpy has no `descr` for.
pub fn check_dtype(tensor: &OutTensor) -> std::result::Result<(), String> {
    if tensor.dtype.in_npy() {
        Ok(())
    } else {
        let to = &tensor.dtype;
        let cast = if crate::dtype::cast::castable(to, to) {
            ", or convert it with --cast float32"
        } else {
            ""
        };
        Err(format!(
            "numpy has no {to} type, so .npy and .npz cannot hold it; write .safetensors \
             instead{cast}"
        ))
    }
}

/// The complete header `numpy.save` writes for an array of this type, shape and layout:
/// version 1.0 when it fits, 2.0 when it is too long, 3.0 when it needs UTF-8.
pub fn header(dtype: &DType, shape: &[u64], layout: Layout) -> io::Result<Vec<u8>> {
    let fortran = layout == Layout::Fortran;
    let mut text = format!(
        "{{'descr': {}, 'fortran_order': {}, 'shape': {}, }}",
        dtype.npy_descr(ByteOrder::Little),
        if fortran { "True" } else { "False" },
        crate::dtype::python_tuple(shape),
    );
    let growth_dim = if fortran { shape.last() } else { shape.first() };
    if let Some(dim) = growth_dim {
        let digits = dim.to_string().len();
        text.extend(std::iter::repeat_n(
            ' ',
            GROWTH_AXIS_MAX_DIGITS.saturating_sub(digits),
        ));
    }
    let latin1: Option<Vec<u8>> = text.chars().map(|c| u8::try_from(c as u32).ok()).collect();
    let (major, encoded) = match latin1 {
        Some(bytes) if wrapped_len(10, bytes.len()) <= usize::from(u16::MAX) + 10 => (1, bytes),
        Some(bytes) => (2, bytes),
        None => (3, text.into_bytes()),
    };
    let preamble = if major == 1 { 10 } else { 12 };
    let total = wrapped_len(preamble, encoded.len());
    let header_len = total - preamble;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[major, 0]);
    if major == 1 {
        out.extend_from_slice(&(header_len as u16).to_le_bytes());
    } else {
        let len = u32::try_from(header_len)
            .map_err(|_| io::Error::other("the .npy header would exceed 4 GiB"))?;
        out.extend_from_slice(&len.to_le_bytes());
    }
    out.extend_from_slice(&encoded);
    out.resize(total - 1, b' ');
    out.push(b'\n');
    Ok(out)
}

/// The header `old` (a whole .npy header: preamble, text, padding and newline) with its
/// shape replaced by `shape` and its padding shortened to keep its length: the header an
/// in-place append writes over the old one, whose data stays where it is. Everything else is
/// kept byte for byte (the type's byte order, the key order, the version). For a header
/// numpy or tjoin wrote, which leaves room for the growth axis to reach 21 digits, it is the
/// header `numpy.save` writes for the new shape. `None` when the new shape does not fit, or
/// the header has no shape tuple where numpy puts it.
pub fn reshaped_header(old: &[u8], shape: &[u64]) -> Option<Vec<u8>> {
    let preamble = match (old.get(..6)?, old.get(6)?) {
        (magic, 1) if magic == MAGIC => 10,
        (magic, 2 | 3) if magic == MAGIC => 12,
        _ => return None,
    };
    let text = old.get(preamble..)?;
    let (start, end) = shape_span(text)?;
    let dict_end = text.iter().rposition(|&b| b == b'}')? + 1;
    let mut new = old[..preamble + start].to_vec();
    new.extend_from_slice(crate::dtype::python_tuple(shape).as_bytes());
    new.extend_from_slice(&text[end..dict_end]);
    if new.len() >= old.len() {
        return None;
    }
    new.resize(old.len() - 1, b' ');
    new.push(b'\n');
    Some(new)
}

/// Where the shape's tuple is in a header's text: the bytes from `(` to `)` of the value of
/// the key `'shape'` in the outer dictionary. Quoted text is skipped (a record's field may be
/// called `shape`); the text is latin-1 or UTF-8, in which no byte of another character is
/// a quote or a bracket.
fn shape_span(text: &[u8]) -> Option<(usize, usize)> {
    let mut depth = 0usize;
    let mut at = 0;
    while at < text.len() {
        match text[at] {
            quote @ (b'\'' | b'"') => {
                let close = at + 1 + text[at + 1..].iter().position(|&b| b == quote)?;
                if depth == 1 && &text[at + 1..close] == b"shape" {
                    let after = |from: usize| {
                        from + text[from..]
                            .iter()
                            .take_while(|b| b.is_ascii_whitespace())
                            .count()
                    };
                    let colon = after(close + 1);
                    let open = after(colon + 1);
                    if text.get(colon) != Some(&b':') || text.get(open) != Some(&b'(') {
                        return None;
                    }
                    let end = open + text[open..].iter().position(|&b| b == b')')? + 1;
                    return Some((open, end));
                }
                at = close;
            }
            b'{' | b'[' | b'(' => depth += 1,
            b'}' | b']' | b')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        at += 1;
    }
    None
}

/// The length of preamble, text, padding and newline, padded as numpy pads: a whole number
/// of `ALIGN` blocks, always with at least one space of padding before the newline.
fn wrapped_len(preamble: usize, text_len: usize) -> usize {
    let unpadded = preamble + text_len + 1;
    unpadded + (ALIGN - unpadded % ALIGN)
}

#[cfg(test)]
mod tests {
    use super::header::{Dict, drop_long_suffixes, nesting_depth, parse_canonical, parse_dict};
    use super::*;
    use crate::error::{Error, InputRef};

    #[test]
    fn header_matches_numpy_save_byte_for_byte() {
        // np.save(f, np.zeros((1, 1, 2, 7), np.float32)) with numpy 2.4
        let expected = b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, \
'shape': (1, 1, 2, 7), }                                                    \
                                       \n";
        let written = header(&DType::Float32, &[1, 1, 2, 7], Layout::C).unwrap();
        assert_eq!(written.len() % ALIGN, 0);
        assert_eq!(
            String::from_utf8_lossy(&written),
            String::from_utf8_lossy(expected)
        );
    }

    #[test]
    fn the_canonical_fast_path_agrees_with_npyz() {
        let general = |text: &str| {
            let mut bytes = b"\x93NUMPY\x03\x00".to_vec();
            bytes.extend_from_slice(&(text.len() as u32).to_le_bytes());
            bytes.extend_from_slice(text.as_bytes());
            let header = npyz::NpyHeader::from_reader(&bytes[..]).unwrap();
            Dict {
                dtype: header.dtype(),
                fortran: header.order() == npyz::Order::Fortran,
                shape: header.shape().to_vec(),
            }
        };
        for (dtype, shape, layout) in [
            (DType::Float32, &[16u64, 64][..], Layout::C),
            (DType::Int64, &[5], Layout::Fortran),
            (DType::Bool, &[], Layout::C),
            (
                DType::Unicode(3),
                &[0, 2, 18446744073709551615],
                Layout::Fortran,
            ),
            (
                DType::DateTime64("ns".into()),
                &[1, 2, 3, 4, 5, 6],
                Layout::C,
            ),
        ] {
            let written = header(&dtype, shape, layout).unwrap();
            let text = std::str::from_utf8(&written[10..]).unwrap();
            let fast = parse_canonical(text).expect("numpy's own form takes the fast path");
            assert_eq!(fast, general(text), "{text}");
        }
        for other in [
            "{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (2,), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2L,), }",
            "{'fortran_order': False, 'descr': '<f4', 'shape': (2,), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}",
        ] {
            assert_eq!(parse_canonical(other), None, "{other}");
        }
    }

    #[test]
    fn the_fast_path_reads_what_numpy_writes_and_passes_on_the_rest() {
        // From the pipelines branch, written against its own fast path; main's
        // `parse_canonical` replaced that one and must meet the same expectations.
        let written = header(&DType::Float32, &[1, 1, 2, 7], Layout::C).unwrap();
        let parsed = parse_canonical(std::str::from_utf8(&written[10..]).unwrap()).unwrap();
        assert_eq!(parsed.dtype.descr(), "'<f4'");
        assert_eq!((parsed.shape, parsed.fortran), (vec![1, 1, 2, 7], false));
        let f = "{'descr': '>u2', 'fortran_order': True, 'shape': (5,), }   \n";
        let f = parse_canonical(f).unwrap();
        assert_eq!((f.shape, f.fortran), (vec![5], true));
        let scalar = "{'descr': '|b1', 'fortran_order': False, 'shape': (), } \n";
        assert_eq!(parse_canonical(scalar).unwrap().shape, Vec::<u64>::new());
        // Other key orders, records and odd spacing go to npyz.
        assert!(
            parse_canonical("{'fortran_order': False, 'descr': '<f4', 'shape': (2,), }").is_none()
        );
        assert!(
            parse_canonical("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (2,), }")
                .is_none()
        );
        assert!(
            parse_canonical("{'descr': '<f4', 'fortran_order': False, 'shape': (5), }").is_none()
        );
    }

    #[test]
    fn python_2_long_suffixes_are_dropped_outside_strings_only() {
        assert_eq!(
            drop_long_suffixes("{'descr': '<i8', 'shape': (2L, 3L), }"),
            "{'descr': '<i8', 'shape': (2, 3), }"
        );
        assert_eq!(
            drop_long_suffixes("[('a1L', '<i4'), (\"b2l\", '<f8')]"),
            "[('a1L', '<i4'), (\"b2l\", '<f8')]"
        );
        assert_eq!(drop_long_suffixes("(12Lx,)"), "(12Lx,)");
    }

    #[test]
    fn deeply_nested_headers_are_refused_before_parsing() {
        // A record whose one field is a record, `levels` deep: a list and a tuple each.
        let nested = |levels: usize| {
            let mut descr = "'<f4'".to_string();
            for _ in 0..levels {
                descr = format!("[('f', {descr})]");
            }
            format!("{{'descr': {descr}, 'fortran_order': False, 'shape': (1,), }}")
        };
        assert_eq!(nesting_depth(nested(4).as_bytes()), (9, 1));
        assert!(parse_dict(1, nested(4).into_bytes()).is_ok());
        let refused = parse_dict(1, nested(50).into_bytes()).unwrap_err();
        assert!(refused.contains("101 levels deep"), "{refused}");
        assert_eq!(nesting_depth(b"{'a[[[[': '(((('}"), (1, 1));
        assert_eq!(nesting_depth(br#"{'it\'s: {': "a\"{"}"#), (1, 1));
        let dicts = parse_dict(1, b"{'descr': {{{{{{{{{".to_vec()).unwrap_err();
        assert!(dicts.contains("holds 10 dictionaries"), "{dicts}");
    }

    #[test]
    fn tjoins_headers_leave_room_for_the_growth_axis_to_reach_21_digits() {
        for (dtype, shape, layout) in [
            (DType::Float32, vec![3u64, 4], Layout::C),
            (DType::Int64, vec![7], Layout::C),
            (DType::Unicode(3), vec![2, 3, 5], Layout::Fortran),
            (DType::Bool, vec![0, 9], Layout::C),
        ] {
            let written = header(&dtype, &shape, layout).unwrap();
            let mut grown = shape.clone();
            let growth = if layout == Layout::C {
                0
            } else {
                shape.len() - 1
            };
            for size in [10, 123_456, u64::MAX] {
                grown[growth] = size;
                // numpy.save's header for the grown shape has the same length...
                let expected = header(&dtype, &grown, layout).unwrap();
                assert_eq!(expected.len(), written.len(), "{dtype} {grown:?}");
                // ...and rewriting the shape in place gives it byte for byte.
                assert_eq!(reshaped_header(&written, &grown), Some(expected));
            }
        }
    }

    #[test]
    fn a_reshaped_header_keeps_everything_but_the_shape() {
        let wrap = |text: &str, pad: usize| {
            let mut out = b"\x93NUMPY\x01\x00".to_vec();
            out.extend_from_slice(&((text.len() + pad + 1) as u16).to_le_bytes());
            out.extend_from_slice(text.as_bytes());
            out.extend(std::iter::repeat_n(b' ', pad));
            out.push(b'\n');
            out
        };
        // Big-endian, another key order, a record field named `shape`, Python 2's `L`.
        let old = "{'shape': (2L, 3L), 'fortran_order': False, 'descr': [('shape', '>i4')]}";
        let new = "{'shape': (12, 3), 'fortran_order': False, 'descr': [('shape', '>i4')]}";
        assert_eq!(reshaped_header(&wrap(old, 6), &[12, 3]), Some(wrap(new, 7)));
        // One space of padding takes one more digit, not two.
        let old = "{'descr': '<f4', 'fortran_order': False, 'shape': (9,), }";
        let fits = "{'descr': '<f4', 'fortran_order': False, 'shape': (10,), }";
        assert_eq!(reshaped_header(&wrap(old, 1), &[10]), Some(wrap(fits, 0)));
        assert_eq!(reshaped_header(&wrap(old, 1), &[100]), None);
        // Not a header, or no shape where numpy puts it.
        assert_eq!(reshaped_header(b"\x93NUMPY\x09\x00", &[1]), None);
        let shapeless = "{'descr': '<f4', 'fortran_order': False, 'dims': (9,), }";
        assert_eq!(reshaped_header(&wrap(shapeless, 9), &[10]), None);
    }

    #[test]
    fn bytes_after_the_data_are_an_unfinished_append_in_a_file_and_damage_in_a_member() {
        let input = InputRef {
            position: 1,
            location: std::path::Path::new("x.npy").into(),
            tensor: None,
        };
        let mut file = header(&DType::UInt8, &[2], Layout::C).unwrap();
        file.extend_from_slice(&[1, 2, 3]);
        let len = file.len() as u64;
        let read = |past_end| {
            let from = HeaderBytes {
                head: &[],
                rest: &mut &file[..],
                start: 0,
                len,
                past_end,
            };
            read_header(from, &input)
        };
        let member = read(PastEnd::Malformed).unwrap_err();
        assert!(matches!(member, Error::Malformed { .. }), "{member}");
        let whole = read(PastEnd::Unfinished).unwrap_err().to_string();
        assert!(whole.contains("holds 1 bytes after the end"), "{whole}");
        assert!(whole.contains("tjoin --recover x.npy"), "{whole}");
        let allowed = read(PastEnd::Allowed).unwrap();
        assert_eq!((allowed.data_offset, allowed.data_len), (len - 3, 2));
    }

    /// The pure parser asks for more until it has the whole header, whichever version; the
    /// driver gives the same header however much of it was read ahead.
    #[test]
    fn a_header_is_parsed_from_bytes_asking_for_more_until_it_has_them() {
        let input = InputRef {
            position: 1,
            location: std::path::Path::new("x.npy").into(),
            tensor: None,
        };
        let mut long = header(&DType::Float32, &[2, 3], Layout::C).unwrap();
        // Version 2.0: a 4-byte length field after a 12-byte preamble.
        let text = long.split_off(10);
        let mut v2 = b"\x93NUMPY\x02\x00".to_vec();
        v2.extend_from_slice(&(text.len() as u32).to_le_bytes());
        v2.extend_from_slice(&text);
        for file in [header(&DType::Float32, &[2, 3], Layout::C).unwrap(), v2] {
            let data_offset = file.len() as u64;
            let mut have = 0;
            while let Err(Parse::Need(needed)) = parse_header(&file[..have]) {
                assert!(needed as usize > have && needed <= data_offset);
                have = needed as usize;
            }
            let parsed = parse_header(&file[..have]).ok().unwrap().info;
            assert_eq!(
                (have as u64, parsed.data_offset),
                (data_offset, data_offset)
            );
            assert_eq!((&*parsed.shape, parsed.data_len), (&[2, 3][..], 24));
            let mut data = file.clone();
            data.resize(file.len() + 24, 0);
            for split in 0..=file.len() {
                let from = HeaderBytes {
                    head: &data[..split],
                    rest: &mut &data[split..],
                    start: 5,
                    len: data.len() as u64,
                    past_end: PastEnd::Unfinished,
                };
                let info = read_header(from, &input).unwrap();
                assert_eq!(info.data_offset, data_offset + 5, "split at {split}");
            }
        }
        let short = &header(&DType::Float32, &[2], Layout::C).unwrap()[..20];
        let from = HeaderBytes {
            head: short,
            rest: &mut std::io::empty(),
            start: 0,
            len: 20,
            past_end: PastEnd::Unfinished,
        };
        let why = read_header(from, &input).unwrap_err().to_string();
        assert!(
            why.contains("but the file has only 10 after the preamble"),
            "{why}"
        );
    }

    #[test]
    fn header_round_trips_through_npyz() {
        let written = header(&DType::Unicode(3), &[5], Layout::Fortran).unwrap();
        let parsed = npyz::NpyHeader::from_reader(&written[..]).unwrap();
        assert_eq!(parsed.shape(), &[5]);
        assert_eq!(parsed.order(), npyz::Order::Fortran);
    }
}
