//! Joins each case folder written by `join_cases` (or shaped like `fixtures/npy/dml_*`: the
//! inputs `in0.*`, `in1.*`, ... and `args.txt`) twice in this one process, through the
//! DirectML backend and through the CPU engine, and compares the two outputs byte for byte.
//! .ci/directml-wine.sh runs it under Wine: one Wine start for all the cases, where running
//! tjoin.exe once per engine and case started Wine twice per case.
//!
//!     cargo run --example dml_compare -- OUT_DIR CASE_DIR... [--suffix TEXT]
//!
//! The join runs as `tjoin` runs it: the same command line (`-q --backend directml` or
//! `--backend cpu`, the case's arguments, its inputs, `-o OUT_DIR/dml.EXT`), parsed by tjoin's
//! own `Cli` and run by `tjoin::run`. `TJOIN_DML_BUFFER_BUDGET` in this process's
//! environment applies to every DirectML join, as it does to tjoin's. Prints `ok` or `FAIL`
//! and the case, then a summary; exits 1 when a case failed.
#![allow(clippy::disallowed_macros)] // a tool for tests, not tjoin

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Parser as _;
use tjoin::cli::Cli;

/// Runs tjoin with `args` (without the program's name) in this process.
fn tjoin(args: &[String]) -> Result<(), String> {
    let argv = std::iter::once("tjoin".to_string()).chain(args.iter().cloned());
    let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
    tjoin::run(&cli).map_err(|e| tjoin::error::render(&e, false))
}

/// The case's inputs, `in0.*`, `in1.*`, ... in the order of their numbers.
fn inputs(case: &Path) -> Vec<PathBuf> {
    let mut inputs: Vec<(u64, PathBuf)> = fs::read_dir(case)
        .expect("read the case folder")
        .map(|entry| entry.expect("read the case folder").path())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?;
            let number = name.strip_prefix("in")?.split('.').next()?.parse().ok()?;
            Some((number, path))
        })
        .collect();
    inputs.sort();
    inputs.into_iter().map(|(_, path)| path).collect()
}

/// What one case came to: `Ok` with the joins it holds, or why it failed.
fn compare(case: &Path, out: &Path, name: &str) -> Result<(usize, String), String> {
    let text = fs::read_to_string(case.join("args.txt")).expect("read args.txt");
    let args: Vec<String> = text.split_whitespace().map(String::from).collect();
    let joins = args.iter().filter(|a| a.starts_with("--axis-for=")).count();
    let joins = joins.max(1);
    let ext = args
        .iter()
        .position(|a| a == "--format")
        .and_then(|at| args.get(at + 1))
        .map_or("npy", String::as_str);
    // The CPU engine refuses --dml-adapter.
    let mut cpu_args = Vec::new();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        if word == "--dml-adapter" {
            words.next();
        } else {
            cpu_args.push(word.clone());
        }
    }
    let inputs: Vec<String> = inputs(case)
        .iter()
        .map(|path| path.display().to_string())
        .collect();
    let run = |backend: &str, args: &[String], file: &str| {
        let output = out.join(file);
        let _ = fs::remove_file(&output);
        let mut all: Vec<String> = ["-q", "--backend", backend].map(String::from).to_vec();
        all.extend(args.iter().cloned());
        all.extend(inputs.iter().cloned());
        all.extend(["-o".to_string(), output.display().to_string()]);
        tjoin(&all)?;
        fs::read(&output).map_err(|e| format!("{}: {e}", output.display()))
    };
    let start = Instant::now();
    let dml = run("directml", &args, &format!("dml.{ext}"))
        .map_err(|why| format!("{name} ({joins} joins): DirectML failed: {why}"))?;
    let dml_time = start.elapsed();
    let start = Instant::now();
    let cpu = run("cpu", &cpu_args, &format!("cpu.{ext}"))
        .map_err(|why| format!("{name} ({joins} joins): the CPU engine failed: {why}"))?;
    let cpu_time = start.elapsed();
    if dml != cpu {
        let at = dml.iter().zip(&cpu).position(|(a, b)| a != b);
        let at = at.unwrap_or(dml.len().min(cpu.len()));
        return Err(format!(
            "{name} ({joins} joins): the outputs differ from byte {at} ({} bytes through \
             DirectML, {} through the CPU engine)",
            dml.len(),
            cpu.len()
        ));
    }
    let said = format!(
        "{name} ({joins} joins, .{ext}, {} bytes; DirectML {:.1} s, CPU {:.1} s)",
        cpu.len(),
        dml_time.as_secs_f64(),
        cpu_time.as_secs_f64()
    );
    Ok((joins, said))
}

fn main() {
    let mut argv = std::env::args().skip(1);
    let usage = "usage: dml_compare OUT_DIR CASE_DIR... [--suffix TEXT]";
    let out = PathBuf::from(argv.next().expect(usage));
    let mut cases = Vec::new();
    let mut suffix = String::new();
    while let Some(arg) = argv.next() {
        if arg == "--suffix" {
            suffix = format!(" {}", argv.next().expect(usage));
        } else {
            cases.push(PathBuf::from(arg));
        }
    }
    assert!(!cases.is_empty(), "{usage}");
    fs::create_dir_all(&out).expect("create OUT_DIR");
    let (mut passed, mut failed, mut joins) = (0, 0, 0);
    for case in &cases {
        let base = case
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into());
        match compare(case, &out, &format!("{base}{suffix}")) {
            Ok((count, said)) => {
                passed += 1;
                joins += count;
                println!("ok    {said}");
            }
            Err(why) => {
                failed += 1;
                println!("FAIL  {why}");
            }
        }
    }
    // Read by .ci/directml-wine.sh.
    println!("dml_compare: cases {passed} ok {failed} failed, joins {joins}");
    std::process::exit(i32::from(failed > 0));
}
