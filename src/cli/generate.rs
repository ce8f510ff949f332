//! The man page and the shell completion scripts, generated from the clap definition in
//! `cli/mod.rs` by the hidden `tjoin --generate KIND`. The results are checked in under `man/` and
//! `completions/`, and a test fails when they are stale.

use std::io::{self, Write};

use clap::{CommandFactory, ValueEnum};
use clap_complete::Shell;
use roff::{Roff, bold, roman};

use super::{Cli, EXAMPLES};

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
    let shell = match kind {
        Kind::Man => return man_page(out),
        Kind::Bash => return bash(out),
        Kind::Zsh => Shell::Zsh,
        Kind::Fish => Shell::Fish,
        Kind::Powershell => Shell::PowerShell,
        Kind::Elvish => Shell::Elvish,
    };
    clap_complete::generate(shell, &mut completed_command(), "tjoin", out);
    Ok(())
}

/// The command as completions present it: without hidden flags, which clap_complete would
/// otherwise offer.
fn completed_command() -> clap::Command {
    let full = Cli::command();
    let visible = full.get_arguments().filter(|arg| !arg.is_hide_set());
    let command = clap::Command::new("tjoin")
        .disable_help_flag(true)
        .version(env!("CARGO_PKG_VERSION"));
    command.args(visible.cloned())
}

/// clap_complete's bash script, with one change: after a flag's value, the next word is an
/// input file, but clap_complete offers every option there (so Tab inserts `-`). It now
/// offers options only for a word that starts with `-`, and bash's file completion (the
/// script's `-o default`) takes over otherwise.
fn bash(out: &mut dyn Write) -> io::Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(Shell::Bash, &mut completed_command(), "tjoin", &mut script);
    let script = String::from_utf8(script).map_err(io::Error::other)?;
    const OFFER_OPTIONS: &str = "            COMPREPLY=( $(compgen -W \"${opts}\" -- \"${cur}\") )
            return 0
            ;;";
    const OFFER_OPTIONS_TO_DASHES: &str = "            if [[ ${cur} == -* ]] ; then
                COMPREPLY=( $(compgen -W \"${opts}\" -- \"${cur}\") )
            fi
            return 0
            ;;";
    let at = script.rfind(OFFER_OPTIONS).ok_or_else(|| {
        io::Error::other("clap_complete's bash script changed: update generate::bash")
    })?;
    out.write_all(&script.as_bytes()[..at])?;
    out.write_all(OFFER_OPTIONS_TO_DASHES.as_bytes())?;
    out.write_all(&script.as_bytes()[at + OFFER_OPTIONS.len()..])
}

/// The fields of `--dry-run=json`, as src/report.rs writes them (a test compares the
/// two).
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

/// clap_mangen's sections, then the ones it has no source for: exit status and examples.
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
            "Bad usage, inputs that break the join rules (of --spec, or ONNX Concat-13's shape \
             rules), or inputs tjoin cannot join: an object array, JSON numpy would make an \
             object array of (null, an integer past uint64) or refuse (ragged arrays).",
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
         accepted. --format names the output's format, as without --dry-run. With \
         --dry-run=json the plan is one JSON object with the fields below; a refusal is then \
         also printed on standard output, as {\"error\": {\"exit_code\", \"refusals\": \
         [{\"headline\", \"details\", \"hint\"}]}}, beside the usual message on standard \
         error. The plan's fields:",
    )]);
    for (field, meaning) in DRY_RUN_FIELDS {
        roff.control("TP", [])
            .text([bold(*field)])
            .text([roman(*meaning)]);
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
