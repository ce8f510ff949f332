//! The header parser on headers built byte by byte: each refusal, the requests for more
//! bytes, and the encoding back.

use super::*;

/// A header builder: magic, version, counts, then what the test appends.
struct Bytes(Vec<u8>);

impl Bytes {
    fn new(version: u32, tensors: u64, kvs: u64) -> Bytes {
        let mut b = Bytes(MAGIC.to_vec());
        b.u32(version).u64(tensors).u64(kvs);
        b
    }
    fn u32(&mut self, v: u32) -> &mut Bytes {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Bytes {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn text(&mut self, t: &str) -> &mut Bytes {
        self.u64(t.len() as u64);
        self.0.extend_from_slice(t.as_bytes());
        self
    }
    fn tensor(&mut self, name: &str, dims: &[u64], ggml: u32, offset: u64) -> &mut Bytes {
        self.text(name).u32(dims.len() as u32);
        for d in dims {
            self.u64(*d);
        }
        self.u32(ggml).u64(offset)
    }
    /// The bytes, padded with zeros to `len`.
    fn padded(&self, len: usize) -> Vec<u8> {
        let mut v = self.0.clone();
        v.resize(len.max(v.len()), 0);
        v
    }
}

fn parse(bytes: &[u8]) -> Result<Header, String> {
    match parse_header(bytes, bytes.len() as u64)? {
        Parsed::Header(h) => Ok(h),
        Parsed::Need(n) => panic!("asked for {n} bytes of a whole file"),
    }
}

fn refusal(bytes: &[u8]) -> String {
    parse(bytes).expect_err("refused")
}

#[test]
fn a_header_of_every_value_type_parses_and_encodes_back() {
    let mut b = Bytes::new(3, 1, 4);
    b.text("a.u16").u32(2);
    b.0.extend_from_slice(&7u16.to_le_bytes());
    b.text("a.text").u32(8).text("héllo");
    b.text("a.nested").u32(9).u32(9).u64(2);
    b.u32(5).u64(1).u32(-3i32 as u32);
    b.u32(8).u64(2).text("x").text("yz");
    b.text("general.alignment").u32(4).u32(64);
    b.tensor("w", &[3, 2], 0, 0);
    let header_len = b.0.len();
    let file = b.padded(64 + 24);
    let h = parse(&file).expect("parses");
    assert_eq!(h.alignment, 64);
    assert_eq!(h.data_offset, (header_len as u64).next_multiple_of(64));
    assert_eq!(h.get("a.u16"), Some(&Value::Unsigned(7)));
    assert_eq!(h.get("a.text"), Some(&Value::Text("héllo".into())));
    assert_eq!(h.get("a.nested"), Some(&Value::Array(ValueType::Array, 2)));
    assert_eq!(h.tensors[0].shape(), vec![2, 3]);
    assert_eq!(h.tensors[0].bytes, 24);
    let kvs: Vec<&[u8]> = h.kvs.iter().map(|kv| &kv.raw[..]).collect();
    let placed = [Placed {
        info: &h.tensors[0],
        offset: 0,
    }];
    assert_eq!(encode_header(3, &kvs, &placed), file[..header_len]);
}

#[test]
fn a_short_read_asks_for_the_bytes_it_needs_and_no_more_than_the_file_has() {
    let mut b = Bytes::new(3, 0, 1);
    b.text("k").u32(8).text(&"v".repeat(100));
    let file = b.0.clone();
    let mut have = 8;
    let header = loop {
        match parse_header(&file[..have], file.len() as u64).expect("well formed") {
            Parsed::Header(h) => break h,
            Parsed::Need(n) => {
                assert!(n as usize > have && n as usize <= file.len());
                have = n as usize;
            }
        }
    };
    assert_eq!(header.kvs.len(), 1);
}

#[test]
fn counts_and_lengths_past_the_file_are_refused_before_anything_is_allocated() {
    let why = refusal(&Bytes::new(3, 0, u64::MAX).0);
    assert!(why.contains("18446744073709551615 keys"), "{why}");
    let why = refusal(&Bytes::new(3, 1 << 40, 0).0);
    assert!(why.contains("tensors"), "{why}");
    let mut b = Bytes::new(3, 0, 1);
    b.u64(u64::MAX);
    assert!(refusal(&b.padded(64)).contains("truncated"));
    let mut b = Bytes::new(3, 0, 1);
    b.text("k").u32(9).u32(0).u64(1 << 50);
    assert!(refusal(&b.0).contains("more than the"));
}

#[test]
fn versions_one_and_big_endian_files_are_refused_by_name() {
    assert!(refusal(&Bytes::new(1, 0, 0).0).contains("version 1"));
    let mut b = Bytes(MAGIC.to_vec());
    b.0.extend_from_slice(&3u32.to_be_bytes());
    b.u64(0).u64(0);
    assert!(refusal(&b.0).contains("big-endian"));
    assert!(refusal(&Bytes::new(4, 0, 0).0).contains("version 4"));
    assert!(refusal(b"GGML\x03\0\0\0").contains("does not start"));
}

#[test]
fn unknown_types_deep_nesting_and_bad_values_are_refused() {
    let mut b = Bytes::new(3, 0, 1);
    b.text("k").u32(13).u64(0);
    assert!(refusal(&b.0).contains("unknown type 13"));
    let mut b = Bytes::new(3, 0, 1);
    b.text("k").u32(9);
    for _ in 0..MAX_NESTING + 1 {
        b.u32(9).u64(1);
    }
    b.u32(0).u64(1);
    b.0.push(0);
    let file = b.padded(b.0.len() + 64);
    assert!(refusal(&file).contains("nests arrays"));
    let mut b = Bytes::new(3, 0, 1);
    b.text("k").u32(7);
    b.0.push(2);
    assert!(refusal(&b.0).contains("bool"));
    let mut b = Bytes::new(3, 0, 2);
    b.text("k").u32(0);
    b.0.push(1);
    b.text("k").u32(0);
    b.0.push(1);
    assert!(refusal(&b.0).contains("twice"));
    let mut b = Bytes::new(3, 0, 1);
    b.text("general.alignment").u32(4).u32(48);
    assert!(refusal(&b.0).contains("power of two"));
}

#[test]
fn tensor_infos_are_checked() {
    let bad = |name: &str, dims: &[u64], ggml: u32, offset: u64| {
        let mut b = Bytes::new(3, 1, 0);
        b.tensor(name, dims, ggml, offset);
        refusal(&b.padded(b.0.len() + 4096))
    };
    assert!(bad(&"n".repeat(65), &[1], 0, 0).contains("at most 64"));
    assert!(bad("t", &[1, 1, 1, 1, 1], 0, 0).contains("at most 4"));
    assert!(bad("t", &[4], 4, 0).contains("unknown ggml type 4"));
    assert!(bad("t", &[4], 0, 8).contains("not a multiple of the alignment"));
    assert!(bad("t", &[33], 8, 0).contains("block of 32"));
    assert!(bad("t", &[u64::MAX, 4], 0, 0).contains("overflows"));
}

#[test]
fn data_past_the_end_of_the_file_is_refused() {
    let mut b = Bytes::new(3, 1, 0);
    b.tensor("t", &[100], 0, 0);
    let file = b.padded(b.0.len() + 64);
    let h = parse(&file).expect("the header is whole");
    let why = data_range(&h, &h.tensors[0], file.len() as u64).expect_err("past the end");
    assert!(why.contains("run past the end"), "{why}");
}
