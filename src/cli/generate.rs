//! The man page and the shell completion scripts, generated from the clap definition in
//! `cli/mod.rs` by the hidden `tjoin --generate KIND` (and the Python module's table of flags,
//! `python.rs`). The results are checked in under `man/`, `completions/` and `python/tjoin/`,
//! and a test fails when they are stale.

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
    /// `python/tjoin/_flags.py`: the flags the Python module takes as keyword arguments.
    Python,
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
            Kind::Python => "python/tjoin/_flags.py",
        }
    }
}

/// Writes the file of `kind` to `out`.
pub fn generate(kind: Kind, out: &mut dyn Write) -> io::Result<()> {
    let shell = match kind {
        Kind::Man => return man_page(out),
        Kind::Bash => return bash(out),
        Kind::Zsh => return zsh(out),
        Kind::Python => return super::python::flags(out),
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
    command
        .args(visible.cloned())
        .subcommands(full.get_subcommands().cloned())
}

/// clap_complete's zsh script, with the join's inputs completed as files in every position.
///
/// For a command with subcommands, clap_complete takes the first positional word as one input
/// and the second as the subcommand (`tjoin INPUT split`), where tjoin takes a subcommand
/// only as the first word and every other word as an input: after one input, zsh offered
/// subcommands instead of files. The inputs are made a list again and the subcommand state is
/// left unentered: zsh completes a subcommand's words as a join's (a known gap).
fn zsh(out: &mut dyn Write) -> io::Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(Shell::Zsh, &mut completed_command(), "tjoin", &mut script);
    let script = String::from_utf8(script).map_err(io::Error::other)?;
    const SUBCOMMANDS: &str = "\":: :_tjoin_commands\" \\\n\"*::: :->tjoin\" \\\n";
    const ONE_INPUT: &str = "\n'::inputs -- The tensors to join";
    const INPUTS: &str = "\n'*::inputs -- The tensors to join";
    if script.matches(SUBCOMMANDS).count() != 1 || script.matches(ONE_INPUT).count() != 1 {
        return Err(io::Error::other(
            "clap_complete's zsh script changed: update generate::zsh",
        ));
    }
    let script = script
        .replacen(SUBCOMMANDS, "", 1)
        .replacen(ONE_INPUT, INPUTS, 1);
    out.write_all(script.as_bytes())
}

/// clap_complete's bash script, with two changes.
///
/// After a flag's value, the next word is an input file, but clap_complete offers every
/// option there (in tjoin's case and in each subcommand's) (so Tab inserts `-`). It now offers options only for a word that starts with
/// `-`, and bash's file completion (the script's `-o default`) takes over otherwise.
///
/// bash splits the words it hands a completion function at every character of
/// `COMP_WORDBREAKS`, `:` included, so `tjoin --spec directml:<Tab>` reached clap_complete's
/// function with `:` as the word before the cursor, not `--spec`, and bash listed files. The
/// function is renamed `_tjoin_words`, and `_tjoin` calls it with the word and the one before
/// it as the command line holds them (up to the cursor, split at blanks), then drops from
/// each candidate the part up to the last `:`, which bash keeps (what bash-completion's
/// `__ltrim_colon_completions` does, without needing that package).
fn bash(out: &mut dyn Write) -> io::Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(Shell::Bash, &mut completed_command(), "tjoin", &mut script);
    let script = String::from_utf8(script).map_err(io::Error::other)?;
    let changed = || io::Error::other("clap_complete's bash script changed: update generate::bash");
    const OFFER_OPTIONS: &str = "            COMPREPLY=( $(compgen -W \"${opts}\" -- \"${cur}\") )
            return 0
            ;;";
    const OFFER_OPTIONS_TO_DASHES: &str = "            if [[ ${cur} == -* ]] ; then
                COMPREPLY=( $(compgen -W \"${opts}\" -- \"${cur}\") )
            fi
            return 0
            ;;";
    const WORDS: &str = "    if [[ \"${BASH_VERSINFO[0]}\" -ge 4 ]]; then
        cur=\"$2\"
    else
        cur=\"${COMP_WORDS[COMP_CWORD]}\"
    fi
    prev=\"$3\"
";
    const WORDS_GIVEN: &str = "    cur=\"$2\"
    prev=\"$3\"
";
    const FUNCTION: &str = "_tjoin() {\n";
    const WHOLE_WORDS: &str = r#"# bash splits words at `:` (COMP_WORDBREAKS), so `tjoin --spec directml:3` reaches a
# completion function as `directml`, `:` and `3`. _tjoin hands _tjoin_words the word being
# completed and the one before it whole, as the command line holds them up to the cursor,
# and drops from each candidate the part up to the word's last `:`, which bash keeps.
_tjoin() {
    local cur prev line word before colon i status
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    line="${COMP_LINE:0:COMP_POINT}"
    word="${line##*[[:blank:]]}"
    if [[ "${word}" != *:* || "${COMP_WORDBREAKS}" != *:* ]]; then
        _tjoin_words "$1" "${cur}" "${prev}"
        return
    fi
    before="${line%"${word}"}"
    before="${before%"${before##*[![:blank:]]}"}"
    prev="${before##*[[:blank:]]}"
    _tjoin_words "$1" "${word}" "${prev}"
    status=$?
    colon="${word%"${word##*:}"}"
    for i in "${!COMPREPLY[@]}"; do
        COMPREPLY[i]="${COMPREPLY[i]#"${colon}"}"
    done
    return ${status}
}

"#;
    // Each command's (tjoin's and each subcommand's) last case.
    if !script.contains(OFFER_OPTIONS) {
        return Err(changed());
    }
    let script = script.replace(OFFER_OPTIONS, OFFER_OPTIONS_TO_DASHES);
    if !script.starts_with(FUNCTION) || script.matches(WORDS).count() != 1 {
        return Err(changed());
    }
    let script = script
        .replacen(FUNCTION, "_tjoin_words() {\n", 1)
        .replacen(WORDS, WORDS_GIVEN, 1);
    out.write_all(WHOLE_WORDS.as_bytes())?;
    out.write_all(script.as_bytes())
}

/// The fields of `--dry-run=json`, as src/report/plan.rs's `PlanReport` serializes them (a
/// test compares the two).
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
        "filtered",
        "one object per --exclude (and one for the --only flags together): filter (as written) and removed (the names of the tensors it removed); empty without them.",
    ),
    (
        "family",
        "the model family whose built-in rules a merge given no axis and no rules used, and \
         what told it (\"llama, by the tensor names ...\"), or null.",
    ),
    (
        "inputs",
        "one object per input: position (from 1), path, format (npy, npz, safetensors, json, pt, or dcp for a DCP checkpoint of .metadata and .distcp files), tensors: each tensor's name (null for single-tensor files), dtype, shape and bytes, and index: for a sharded checkpoint its path, files (the shards, in the order read), total_size (what the index says, or null) and tensor_bytes (what the tensors hold); null for other inputs; and notes: what its reader noted (a checkpoint's values that are not tensors, its tensors that share a storage).",
    ),
    (
        "tensors",
        "one object per output tensor, in output order: name, kept (copied from the first input: by --keep, or as the only input), axis (counted from 0; null when kept or made from blocks), chunks (the proportions of a chunked join's parts, [1, 1, 1] for `chunks 3`; null otherwise), plain (true when the rule says `plain`), replicas (K of `replicas K`; null otherwise), blocks (for a distributed checkpoint's tensor: grid, its axes and the segments along each, and blocks, each block's path, offsets and shape, in the order they are placed; null otherwise), rule (the tensor rule that decided it, as written: \"--keep '*norm*'\", \"llama.rules:8: *.o_proj.weight = 1\"; null when -a did), dtype, counter (true for a step counter --cast left in its own type, exact), shape, bytes, inputs (the positions it comes from, in join order: once per chunk, and the first of each replica group) and engine (what DirectML does with it, or null).",
    ),
    (
        "output",
        "path and format (null without -o), and bytes: the data the output would hold. With \
         --append, the path is the first input's, and append says where the new data goes: \
         offset (the byte after the file's old end) and bytes (how many are added).",
    ),
    (
        "shards",
        "for a sharded output: folder, max_shard_size (bytes), files (each shard's name, tensors (their names, in the file's order) and bytes), index (its file name; null for a set of one file) removes (the previous set's files the commit removes) and left_alone (the other files the previous index lists, which the commit leaves as they are: each with its name, as listed, and why: a path, not a shard's name, a symbolic link, a folder); null for other outputs.",
    ),
];

/// How a subcommand is told from an input: only the first argument can name one.
fn subcommands_section(roff: &mut Roff) {
    roff.control("SH", ["SUBCOMMANDS"]);
    let subcommands: Vec<String> = Cli::command()
        .get_subcommands()
        .map(|sub| sub.get_name().to_string())
        .collect();
    let which = if subcommands.is_empty() {
        "This version has none: every argument is an option or an input, and tjoin -a 0 a.npy \
         b.npy -o out.npy is a join."
            .to_string()
    } else {
        format!("This version has: {}.", subcommands.join(", "))
    };
    roff.text([roman(format!(
        "Without a subcommand, tjoin joins, as this page describes. {which} A word is taken as \
         a subcommand only when it is the first argument; anywhere else it is an input or a \
         value. To join a file whose name is a subcommand's as the first argument, name it with \
         its folder, ./NAME, or put an option before it (tjoin -a 0 NAME ...)."
    ))]);
    for sub in Cli::command().get_subcommands() {
        subcommand(roff, sub);
    }
}

/// A subcommand's description and options, as its --help gives them.
fn subcommand(roff: &mut Roff, sub: &clap::Command) {
    roff.control("SS", [format!("tjoin {}", sub.get_name()).as_str()]);
    let about = sub.get_long_about().or(sub.get_about());
    for (at, paragraph) in about
        .map(|a| a.to_string())
        .unwrap_or_default()
        .split("\n\n")
        .enumerate()
    {
        if at > 0 {
            roff.control("PP", []);
        }
        roff.text([roman(paragraph.replace('\n', " "))]);
    }
    for arg in sub.get_arguments().filter(|arg| !arg.is_hide_set()) {
        let values: Vec<String> = arg
            .get_value_names()
            .unwrap_or_default()
            .iter()
            .map(|name| name.to_string())
            .collect();
        let mut flag = match (arg.get_short(), arg.get_long()) {
            (Some(short), Some(long)) => format!("-{short}, --{long}"),
            (None, Some(long)) => format!("--{long}"),
            (Some(short), None) => format!("-{short}"),
            (None, None) => values.join(" "),
        };
        if arg.get_long().is_some() && arg.get_action().takes_values() {
            flag.push_str(&format!(" {}", values.join(" ")));
        }
        let help = arg.get_long_help().or(arg.get_help());
        roff.control("TP", []);
        roff.text([bold(flag)]);
        roff.text([roman(
            help.map(|h| h.to_string())
                .unwrap_or_default()
                .replace('\n', " "),
        )]);
    }
}

/// What --append does, and the crash-safety contract of an append (`src/output/grow.rs`
/// keeps it; keep the two in step).
fn append_section(roff: &mut Roff) {
    roff.control("SH", ["APPEND AND RECOVER"]);
    roff.text([roman(
        "tjoin --append -a 0 train.npy new1.npy new2.npy grows train.npy in place by the \
         other inputs, in time proportional to the bytes added, not to the file's size. The \
         join is checked as any join, with the target as input 1: the shapes, the element type \
         (refused unless --cast names the file's own type), --spec and --expect-shape; the \
         new elements are stored in the file's own byte order. Only the growth axis grows in \
         place: axis 0 of a C-order file, the last axis of a Fortran-order one; another axis, \
         an .npz, .safetensors or JSON target, and -o are refused, with the normal join (a \
         rewrite) as the hint. The header is rewritten in place only when its length does not \
         change: numpy and tjoin leave room in it for the growth axis to reach 21 digits, and \
         a file whose writer did not is refused, with the hint to rewrite it once with a \
         normal join. --dry-run checks everything and says where the new bytes would go.",
    )]);
    roff.control("PP", []);
    roff.text([roman("An append is crash-safe. In order:")]);
    for (step, what) in [
        (
            "1",
            "The target's lock is taken (flock on Unix; on Windows LockFileEx on a byte past \
             any file's end, so that readers are not kept out); a second appender, or \
             --recover while an append runs, is refused with a message that names the file.",
        ),
        (
            "2",
            "A journal, .NAME.tjoin-journal beside the target, records the target's identity, \
             its old and new lengths and its old and new headers; it and its folder are \
             flushed (fsync) before the target changes.",
        ),
        (
            "3",
            "The new data is written after the old end of the file and flushed (fdatasync). \
             The old bytes are not touched.",
        ),
        (
            "4",
            "The header is rewritten with the new shape and flushed: this is the commit.",
        ),
        ("5", "The journal is removed."),
    ] {
        roff.control("TP", [])
            .text([bold(step)])
            .text([roman(what)]);
    }
    roff.control("PP", []);
    roff.text([roman(
        "An error, SIGINT, SIGTERM or SIGHUP (or SIGBUS from an input that shrinks) before step \
         4 cuts the target back to its old length and removes the journal: the file is byte \
         for byte what it was, and a signal then kills tjoin (status 128 + its number). A \
         signal during step 4 waits for it to end. A SIGKILL or a power loss before step 4 \
         leaves the file with extra bytes after the end its header declares, and the journal: \
         numpy.load still reads the old array, tjoin's readers refuse the file with a hint, and \
         tjoin --recover FILE repairs it, saying what it removed: it cuts the file back to its \
         old length (and puts the old header back, should the crash have come during step 4), \
         or, when the new header had reached the disk, keeps the grown file and removes the \
         journal. A journal left empty or cut short (the append was killed while writing it, \
         before the file changed) is removed, when the file ends where its header says. \
         Without a journal, --recover cuts the file back to the shape its header declares. \
         --recover checks everything before it writes anything, and acts on a journal only if \
         it is a regular file (not a symbolic link or a FIFO), of at most 5 MiB, owned (on \
         Unix) by the file's owner, the user running tjoin or root, whose lengths and headers \
         agree with each other and with the file: the old header declares exactly the old \
         length and the new header the new one, the file lies between the two lengths, and it \
         starts with the old header, the new one, or a mix of the two byte by byte. Any other \
         journal is refused, naming what disagrees, and nothing is changed; --append refuses \
         with the same reason. A reader that opens the file during an append sees the old header, whose \
         data never moves, or the new one, written only once the data it declares is flushed: \
         the old shape or the new, never a header that promises bytes not yet written.",
    )]);
}

/// The LIMITS section: what tjoin reads whole, and how much of it at most (`src/limits.rs`),
/// and which files it opens without waiting.
fn limits_section(roff: &mut Roff) {
    use crate::format::pickle::vm as pickle;
    use crate::limits;
    let bytes = |n: u64| crate::outliers::thousands(n as usize);
    roff.control("SH", ["LIMITS"]);
    roff.text([roman(
        "tjoin reads these files to their end, and refuses one longer than its limit (a regular \
         file before reading it, a pipe or a device such as /dev/zero once the limit is \
         passed) with exit status 1 and a message that names the file and the limit:",
    )]);
    let limited = [
        (
            &limits::INDEX,
            "A sharded checkpoint's index, wherever it is read: an INPUT, --like, --names-from, \
             the previous index in an output folder.",
        ),
        (&limits::RULES, "Each --rules file."),
        (
            &limits::FILE_LIST,
            "The --files-from list, read a piece at a time: only its paths stay in memory \
             (100,000 inputs of 2,600 bytes each fit).",
        ),
        (
            &limits::JOURNAL,
            "An append's journal (.NAME.tjoin-journal).",
        ),
        (
            &limits::JOB_MANIFEST,
            "A job's manifest beside its output (.NAME.tjoin-job, or DIR/.tjoin-job), which \
             every step of a job of --workers reads.",
        ),
        (
            &limits::JOB_RECORD,
            "A worker's record of its finish (the manifest's name and .done-I).",
        ),
        (
            &limits::PICKLE,
            "A PyTorch checkpoint's pickle (ARCHIVE/data.pkl, or the pickles before a legacy \
             file's storages): names, shapes and storage keys, not tensor data.",
        ),
    ];
    for (limit, what) in limited {
        roff.control("TP", [])
            .text([bold(format!("{} bytes", bytes(limit.bytes)))])
            .text([roman(what)]);
    }
    roff.control("PP", []);
    roff.text([roman(format!(
        "One path in a --files-from list may be {} bytes long. Headers have their own limits: \
         a .npy header {} bytes, a .safetensors header {} bytes. A checkpoint's pickle is run \
         by an allowlist that only builds data, and is refused with exit status 2 past {} \
         opcodes, {} values, memo index {}, {} open marks, a string of {} bytes or {} bytes \
         of values held in all (what one value makes from another, set(L) or \
         OrderedDict(d), shares it rather than copying it), so that reading one takes under \
         1 GiB. The walk of what it built visits at most {} values per value made (plus {}): \
         a list nested in itself is refused, not named 2^28 times; its names and tensors may \
         take {} bytes.",
        bytes(limits::FILE_LIST_ENTRY as u64),
        bytes(crate::format::npy::MAX_HEADER_LEN),
        bytes(crate::format::safetensors::MAX_HEADER_LEN),
        bytes(pickle::LIMITS.opcodes),
        bytes(pickle::LIMITS.nodes as u64),
        bytes(u64::from(pickle::LIMITS.memo)),
        bytes(pickle::LIMITS.marks as u64),
        bytes(pickle::LIMITS.string),
        bytes(pickle::LIMITS.bytes),
        crate::format::pickle::state::VISITS_PER_VALUE,
        bytes(crate::format::pickle::state::VISITS_FLOOR),
        bytes(crate::format::pickle::state::HELD_BYTES),
    ))]);
    roff.control("PP", []);
    roff.text([roman(format!(
        "A PyTorch distributed checkpoint's .metadata may list at most {} chunks for one \
         tensor, and no more chunks in all than its storage_data has entries (each chunk's \
         bytes have one), and the names it copies out of the pickle (keys, file names) may \
         take {} bytes; the problems its check finds are kept up to the 20 shown. A ZIP \
         archive (.npz, .pt) is refused if two of its members share a name, if their records \
         overlap, or if a local header names its member otherwise than the central directory: \
         no byte of the file is read as two members. A deflated .npz member inflates to at \
         most the size its header declares, into a temporary file, when its data is first \
         read: --dry-run reads its .npy header alone.",
        bytes(crate::input::dcp::metadata::MAX_CHUNKS_PER_TENSOR as u64),
        bytes(crate::input::dcp::metadata::TEXT_BYTES),
    ))]);
    roff.control("PP", []);
    roff.text([roman(
        "Files that another file names (a shard an index lists, a shard a --like index lists, \
         an append's journal, the previous index in an output folder) are opened without \
         waiting and must be regular files: a FIFO, a device or a socket there is refused, \
         naming it (and the index that lists it). An INPUT that is a pipe or a device other \
         than a terminal (tjoin -a 0 <(zcat a.npy.gz) <(zcat b.npy.gz) -o out.npy) is read \
         once into an unnamed temporary file, as - (standard input) is; a FIFO that no program \
         writes to when tjoin opens it is refused as empty rather than waited on. --rules, \
         --names-from, --like's index and --files-from may be pipes too (--rules <(grep ...)).",
    )]);
}

/// The DIRECTML section: how a Windows user checks their machine, and what is tested where.
const DIRECTML: &[&str] = &[
    "To check a Windows machine, run tjoin --backend auto --dry-run with the axis and inputs of \
     a join: it opens DirectML on the default adapter, plans every tensor and writes nothing. \
     Its backend: line names the adapter and DirectML's feature level, or says why the CPU \
     engine would run instead. Add --dml-adapter N (an index in DXGI's list) or warp to try \
     another adapter, and --dry-run=json to see what DirectML does with each tensor. Then \
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
    subcommands_section(&mut roff);
    roff.control("SH", ["EXIT STATUS"]);
    for (code, meaning) in [
        (
            "0",
            "The output was written (with --dry-run: the join would be accepted).",
        ),
        (
            "1",
            "Reading an input or writing the output failed: a missing, unreadable, damaged or changing file (a sharded checkpoint whose index and shards disagree too), a full disk. Also a reader of standard output that went away before everything was written (`tjoin --dry-run ... | head`, `-o - | head`): tjoin then stops quietly. A closed standard error changes no status: a warning or a message it cannot take is dropped, and a join that would succeed still writes its output; a refusal printed as JSON keeps its status when standard output is closed.",
        ),
        (
            "2",
            "Bad usage, inputs that break the join rules (of --spec, or ONNX Concat-13's shape \
             rules), or inputs tjoin cannot join: an object array, JSON numpy would make an \
             object array of (null, an integer past uint64) or refuse (ragged arrays).",
        ),
        (
            "128 + N",
            "Killed by signal N: SIGINT, SIGTERM or SIGHUP, after tjoin removed its temporary \
             output (and cut an append back). tjoin then dies by the signal itself, so a shell \
             shows 130 for Ctrl-C and 143 for SIGTERM, and a shell loop stops.",
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
         error (a usage mistake too, when --dry-run=json was typed). --print-plan[=json] \
         prints the same plan once the output is written (a refusal or failure, with =json, \
         as above): what a run wrote, for a script. The plan's fields:",
    )]);
    for (field, meaning) in DRY_RUN_FIELDS {
        roff.control("TP", [])
            .text([bold(*field)])
            .text([roman(*meaning)]);
    }
    roff.control("SH", ["INPUTS THAT CHANGE"]);
    roff.text([roman(
        "Each input file (and each shard of a sharded checkpoint) is recorded when it is \
         opened: on Unix its device and inode, its length and its change time (ctime); on \
         Windows its length and its modification time. It is checked again when a closed \
         file is reopened and before the output is committed; any difference fails the run \
         with status 1 and writes no output. The change time alone is enough on Unix: the \
         kernel sets it on every write and on every change of the times, so it also catches a \
         rewrite whose modification time was set back afterwards (touch -r, cp -p, rsync). \
         What the check cannot see: a change undone by someone who also sets the clock back; \
         on Windows, which offers tjoin neither a file id nor a change time, a file replaced \
         by another of the same length and modification time, or a rewrite that keeps the \
         length and sets the modification time back; and a change \
         made and committed by another program between the check and the rename (read \
         inputs that nothing else writes to). An input shortened while it is read ends the \
         run at once (SIGBUS) with the same promise: no output. On Windows an input cannot be \
         shortened while tjoin has it mapped: Windows refuses the truncation \
         (ERROR_USER_MAPPED_FILE) to the program that tries it, the input stays whole and so \
         does the output. One input may be rewritten in place (the output of a join of \
         several is never one of its inputs): the input is checked, then closed and \
         unmapped, then the output is renamed over its target.",
    )]);
    append_section(&mut roff);
    limits_section(&mut roff);
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
