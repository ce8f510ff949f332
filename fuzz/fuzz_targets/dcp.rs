//! A PyTorch distributed checkpoint (`src/input/dcp/`) and its grid check
//! (`src/plan/grid.rs`): up to eight fuzzed rank files, each a `.safetensors` header (whose
//! `__metadata__` carries `DCP_SHARDING_INFO`) and its data, consolidated through the same
//! `join::run` a user's command line reaches. It must return an output or an error, never
//! panic, hang or allocate without bound, whatever the offsets, shapes, names and dtypes the
//! headers give.
//!
//! The input's layout: byte 0 the run's options (bit 0: the rank files named one by one or
//! their folder; bit 1: `--keep '*norm*'`; bit 2: `--cast float64`; bits 3-4: the output
//! format), then records of a rank file each: its header's length (u16, little-endian,
//! folded into the rest), the header's JSON text, its data's length (the same), the data. The
//! target writes the safetensors length prefix itself, so a mutated header still reaches the
//! DCP reader rather than failing the prefix check. `seed.sh` seeds it with the rank files
//! of every case of `fixtures/dcp/` in this form.
#![no_main]

use std::path::PathBuf;

use libfuzzer_sys::fuzz_target;
use tjoin::config::JoinRules;
use tjoin::dtype::DType;
use tjoin::format::Format;
use tjoin::plan::rules::{Origin, Rule, Treatment};

#[path = "whole_run.rs"]
mod whole_run;

const FORMATS: [Format; 4] = [Format::SafeTensors, Format::Npz, Format::Npy, Format::Json];
const MAX_RANKS: usize = 8;

/// Splits off a field given by its u16 length, folded into what is left.
fn field(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let [lo, hi, rest @ ..] = data else {
        return None;
    };
    let len = usize::from(u16::from_le_bytes([*lo, *hi])) % (rest.len() + 1);
    Some(rest.split_at(len))
}

/// The rank files the records describe, as safetensors bytes.
fn rank_files(mut records: &[u8]) -> Vec<Vec<u8>> {
    let mut files = Vec::new();
    while files.len() < MAX_RANKS {
        let Some((header, rest)) = field(records) else {
            break;
        };
        let (data, rest) = field(rest).unwrap_or((&[], &[]));
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(header);
        file.extend_from_slice(data);
        files.push(file);
        records = rest;
    }
    files
}

fuzz_target!(|data: &[u8]| {
    let [options, records @ ..] = data else {
        return;
    };
    let files = rank_files(records);
    if files.is_empty() {
        return;
    }
    let ranks = whole_run::folder().join("checkpoint");
    std::fs::create_dir_all(&ranks).expect("the checkpoint folder");
    let mut paths = Vec::new();
    for (index, bytes) in files.iter().enumerate() {
        let path = ranks.join(format!("rank{index}.safetensors"));
        std::fs::write(&path, bytes).expect("the rank file is written");
        paths.push(path);
    }
    let named = if options & 1 == 0 {
        paths.iter().map(PathBuf::as_path).collect()
    } else {
        vec![ranks.as_path()]
    };
    let keep = Rule {
        glob: "*norm*".to_string(),
        treatment: Treatment::Keep,
        parts: Default::default(),
        origin: Origin::KeepFlag,
        required: false,
        optional: false,
    };
    let rules = JoinRules {
        tensor_rules: if options & 2 == 0 { vec![] } else { vec![keep] },
        cast: (options & 4 != 0).then_some(DType::Float64),
        ..Default::default()
    };
    let format = FORMATS[usize::from((options >> 3) & 3)];
    whole_run::join(&paths, named, rules, format);
});
