//! The man page and the shell completion scripts, generated from the clap definition in
//! `cli.rs` by the hidden `tjoin --generate KIND`. The results are checked in under `man/` and
//! `completions/`, and a test fails when they are stale.

use std::io::{self, Write};

use clap::{CommandFactory, ValueEnum};
use clap_complete::Shell;
use roff::{Roff, bold, roman};

use crate::cli::{Cli, EXAMPLES};

/// What `--generate` can produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// The man page, `man/tjoin.1`.
    Man,
    /// `completions/tjoin.bash`.
    Bash,
    /// `completions/_tjoin`.
    Zsh,
    /// `completions/tjoin.fish`.
    Fish,
    /// `completions/_tjoin.ps1`.
    Powershell,
    /// `completions/tjoin.elv`.
    Elvish,
}

impl Kind {
    /// Where the generated file is checked in, relative to the repository's root.
    pub fn path(self) -> &'static str {
        match self {
            Kind::Man => "man/tjoin.1",
            Kind::Bash => "completions/tjoin.bash",
            Kind::Zsh => "completions/_tjoin",
            Kind::Fish => "completions/tjoin.fish",
            Kind::Powershell => "completions/_tjoin.ps1",
            Kind::Elvish => "completions/tjoin.elv",
        }
    }
}

/// Writes the file of `kind` to `out`.
pub fn generate(kind: Kind, out: &mut dyn Write) -> io::Result<()> {
    let mut command = Cli::command();
    let shell = match kind {
        Kind::Man => return man_page(out),
        Kind::Bash => Shell::Bash,
        Kind::Zsh => Shell::Zsh,
        Kind::Fish => Shell::Fish,
        Kind::Powershell => Shell::PowerShell,
        Kind::Elvish => Shell::Elvish,
    };
    clap_complete::generate(shell, &mut command, "tjoin", out);
    Ok(())
}

/// The fields of `--dry-run --format json` (src/report.rs writes them).
const DRY_RUN_FIELDS: &[(&str, &str)] = &[
    (
        "rules",
        "the rules the join passed, e.g. \"ONNX Concat-13's shape rules\".",
    ),
    ("spec", "the --spec profile's name, or null without --spec."),
    ("axis_given", "the -a/--axis value as given, or null."),
    (
        "backend",
        "why --backend chose its engine, or null for the CPU engine.",
    ),
    (
        "inputs",
        "one object per input: position (from 1), path, format (npy, npz, safetensors, json), and tensors: each tensor's name (null for single-tensor files), dtype, shape and bytes.",
    ),
    (
        "tensors",
        "one object per output tensor, in output order: name, kept (copied by --keep), axis (counted from 0; null when kept), dtype, shape, bytes, inputs (the positions it comes from) and engine (what DirectML does with it, or null).",
    ),
    (
        "output",
        "path and format (null without -o), and bytes: the data the output would hold.",
    ),
];

/// The DIRECTML section: how a Windows user checks their machine, and what is tested where.
const DIRECTML: &[&str] = &[
    "To check a Windows machine, run tjoin --backend auto --dry-run with the axis and inputs of \
     a join: it opens DirectML on the default adapter, plans every tensor and writes nothing. \
     Its backend: line names the adapter and DirectML's feature level, or says why the CPU \
     engine would run instead. Add --dml-adapter N (an index in DXGI's list) or warp to try \
     another adapter, and --format json to see what DirectML does with each tensor. Then \
     compare the outputs of --backend directml and --backend cpu (fc /b): they must be the \
     same bytes.",
    "tjoin.exe loads dxgi.dll, d3d12.dll and DirectML.dll only when --backend directml or auto \
     asks for them, so it runs --backend cpu where they are missing. DirectML.dll ships with \
     Windows 10 version 1903 and later; elsewhere, put the DirectML.dll of the \
     Microsoft.AI.DirectML NuGet package (DirectML's redistributable) beside tjoin.exe.",
    "TJOIN_DML_BUFFER_BUDGET=BYTES lowers the largest buffer tjoin creates on the device, so \
     that a join takes several dispatches, as very large ones do; for tests.",
    "What is tested where: the DirectML planning on every platform; the device path in tjoin's \
     CI on Linux, where the Windows build runs under Wine, whose Direct3D 12 runs on lavapipe \
     (Mesa's software Vulkan device): the real DirectML.dll on a software device, every output \
     compared byte for byte with the CPU engine's. Not tested: GPU vendors' drivers, and WARP, \
     which Wine lacks.",
];

/// clap_mangen's sections, then the ones it has no source for: exit status, dry run, DirectML
/// and examples.
fn man_page(out: &mut dyn Write) -> io::Result<()> {
    let man = clap_mangen::Man::new(Cli::command()).date("");
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    let mut roff = Roff::default();
    roff.control("SH", ["EXIT STATUS"]);
    for (code, meaning) in [
        (
            "0",
            "The output was written (with --dry-run: the join would be accepted).",
        ),
        (
            "1",
            "Reading an input or writing the output failed: a missing, unreadable, damaged or changing file, a full disk.",
        ),
        (
            "2",
            "Bad usage, or inputs that break the join rules (of --spec, or ONNX Concat-13's shape rules).",
        ),
    ] {
        roff.control("TP", [])
            .text([bold(code)])
            .text([roman(meaning)]);
    }
    roff.control("SH", ["DRY RUN"]);
    roff.text([roman(
        "--dry-run reads every header, checks every rule and plans every tensor, then prints the \
         plan on standard output and writes nothing. It exits 0 when the join would be \
         accepted. With --format json the plan is one JSON object with these fields:",
    )]);
    for (field, meaning) in DRY_RUN_FIELDS {
        roff.control("TP", [])
            .text([bold(*field)])
            .text([roman(*meaning)]);
    }
    roff.control("SH", ["DIRECTML"]);
    for paragraph in DIRECTML {
        roff.control("PP", []).text([roman(*paragraph)]);
    }
    roff.control("SH", ["EXAMPLES"]);
    for (what, command) in EXAMPLES {
        roff.control("TP", []).text([roman(*what)]);
        roff.control("nf", [])
            .text([bold(*command)])
            .control("fi", []);
    }
    roff.control("SH", ["SEE ALSO"]);
    roff.text([roman(
        "numpy.concatenate(3), ONNX Concat, OpenVINO Concat-1, DirectML DML_JOIN_OPERATOR_DESC.",
    )]);
    out.write_all(roff.render().as_bytes())?;
    man.render_version_section(out)
}
