//! The commands the documents show run as shown: every `tjoin` command of README.md's code
//! blocks, and every example of `--help` and the man page (`tjoin::cli::EXAMPLES`, which both
//! are generated from), each in a fresh copy of the example files.
//!
//! The commands are read from README.md and `EXAMPLES` at test time, so a document that
//! changes a command or the output it shows, without the tool agreeing, fails here. Where a
//! document shows the output, the output (standard error merged into standard output, as a
//! terminal shows them) must be exactly that, and an output with an error must come with exit
//! status 2; elsewhere the command must succeed. A refusal or a dry run must leave the file
//! (or folder) its `-o` names as it was, any other run must write it; where a document says
//! what the file holds, it is checked (`WRITES`).
//!
//! Why snapbox and `sh -c` rather than trycmd's direct runs: the documents show what a user
//! types, pipelines (`find ... | sort | tjoin ...`, `echo ... | tjoin ...`), globs
//! (`tp*.safetensors`) and comments included, which only a shell runs as shown; trycmd would
//! also need README's blocks rewritten in its own syntax (exit codes as `? 2` lines), and
//! runs all of one file's commands in one folder, where an `--append` changes what the next
//! command reads. So each command runs through `sh` (these tests are Unix-only) in its own copy
//! of the files, and snapbox runs it and compares the output.
//!
//! The files: `fixtures/examples/` (made by `fixtures/make_example_fixtures.py`), the files
//! `BORROWED` from the other fixtures under the names the documents use, `rules/`, and, for the
//! refusal among 2,000 shards, `batches/`, written here because 2,000 files are too many to
//! commit.

use std::fs;
use std::path::Path;

use snapbox::cmd::Command;

use crate::util::{bin, read_npy, write_npy};

/// Files the documents name that other fixtures already hold: (name in the examples' folder,
/// fixture).
const BORROWED: &[(&str, &str)] = &[
    ("tp0.safetensors", "fixtures/merge/llama/tp0.safetensors"),
    ("tp1.safetensors", "fixtures/merge/llama/tp1.safetensors"),
    (
        "original.safetensors",
        "fixtures/merge/llama/expected.safetensors",
    ),
    (
        "model.safetensors",
        "fixtures/containers/tp/tp0.safetensors",
    ),
    ("day1.npz", "fixtures/containers/npz/day0.npz"),
    ("day2.npz", "fixtures/containers/npz/day1.npz"),
    ("day3.npz", "fixtures/containers/npz/day2.npz"),
    ("ckpt", "fixtures/sharded/model"),
    ("rank0", "fixtures/sharded/tp/rank0"),
    ("rank1", "fixtures/sharded/tp/rank1"),
    // The model the ranks were split from, sharded: a --like reference given as a folder.
    ("unsplit", "fixtures/sharded/tp/expected"),
    ("rules", "rules"),
    // A GGUF set gguf-py split by tensor count.
    (
        "model-00001-of-00003.gguf",
        "fixtures/gguf/by_count/model-00001-of-00003.gguf",
    ),
    (
        "model-00002-of-00003.gguf",
        "fixtures/gguf/by_count/model-00002-of-00003.gguf",
    ),
    (
        "model-00003-of-00003.gguf",
        "fixtures/gguf/by_count/model-00003-of-00003.gguf",
    ),
    // A PyTorch distributed checkpoint: four ranks of a 2x2 mesh (without its expected file).
    ("checkpoint", "fixtures/dcp/mesh2x2"),
    // FSDP2 rank files (torch.save of DTensors) of 4 ranks, named and in a folder.
    (
        "model_world_size_4_rank_0.pt",
        "fixtures/dtensor/fsdp2_ws4/model_world_size_4_rank_0.pt",
    ),
    (
        "model_world_size_4_rank_1.pt",
        "fixtures/dtensor/fsdp2_ws4/model_world_size_4_rank_1.pt",
    ),
    (
        "model_world_size_4_rank_2.pt",
        "fixtures/dtensor/fsdp2_ws4/model_world_size_4_rank_2.pt",
    ),
    (
        "model_world_size_4_rank_3.pt",
        "fixtures/dtensor/fsdp2_ws4/model_world_size_4_rank_3.pt",
    ),
    ("actor", "fixtures/dtensor/fsdp2_ws4"),
    // DCP's default form: a .metadata and two .distcp files; Megatron-Core's torch_dist.
    ("step-1000", "fixtures/dcp_default/ranks2"),
    ("iter_0000010", "fixtures/dcp_default/megatron"),
    // A DeepSpeed ZeRO stage-3 checkpoint of 2 ranks, as deepspeed saved it.
    ("zero", "fixtures/deepspeed/s3_bf16_ws2/ckpt"),
];

/// What a document says an output file holds.
enum Holds {
    /// Exactly the bytes of this fixture.
    Fixture(&'static str),
    /// A .npy array of this type string and shape.
    Npy(&'static str, &'static [u64]),
}

/// Commands whose output file the documents describe: (command, without a trailing comment;
/// the file; what it holds). Each must be among the commands shown.
const WRITES: &[(&str, &str, Holds)] = &[
    (
        "tjoin --axis 3 a.npy b.npy -o out.npy",
        "out.npy",
        Holds::Fixture("fixtures/npy/dml_ex1_axis3/expected.npy"),
    ),
    (
        "tjoin ckpt/model.safetensors.index.json -o model.safetensors",
        "model.safetensors",
        Holds::Fixture("fixtures/sharded/expected/model.safetensors"),
    ),
    (
        "tjoin --rules rules/llama.rules --like original.safetensors tp*.safetensors -o model.safetensors",
        "model.safetensors",
        Holds::Fixture("fixtures/merge/llama/expected.safetensors"),
    ),
    // "converted to float32": three float64 [2, 4] shards.
    (
        "find shards -name '*.npy' | sort | tjoin -a 0 --files-from - --cast float32 -o train.npy",
        "train.npy",
        Holds::Npy("<f4", &[6, 4]),
    ),
    // "grows by today's shards": [4, 3] and two [2, 3].
    (
        "tjoin --append -a 0 train.npy day-2024-06-*.npy",
        "train.npy",
        Holds::Npy("<f4", &[8, 3]),
    ),
    (
        "tjoin --append -a 0 train.npy day-*.npy",
        "train.npy",
        Holds::Npy("<f4", &[8, 3]),
    ),
    // "along a new first axis": three [2, 2] frames.
    (
        "tjoin --stack -a 0 frame-*.npy -o video.npy",
        "video.npy",
        Holds::Npy("|u1", &[3, 2, 2]),
    ),
    // "Convert a file in place": [2, 3] int32 rewritten as int64.
    (
        "tjoin x.npy --cast int64 -o x.npy",
        "x.npy",
        Holds::Npy("<i8", &[2, 3]),
    ),
];

/// A command without the comment at its end.
fn uncommented(command: &str) -> &str {
    command.split(" #").next().unwrap_or(command).trim_end()
}

/// Commands that need what the test machine lacks, and why; they are skipped. The DirectML
/// backend has its own tests (tests/integration/directml.rs, and CI's run under Wine).
const SKIPPED: &[(&str, &str)] = &[
    ("--backend directml", "needs Windows and a DirectML device"),
    (
        " install tjoin",
        "installs the wheel from PyPI, which the tests do not reach",
    ),
];

/// A command a document shows, and the output it shows after it, if any.
#[derive(Debug)]
struct Shown {
    /// Where: the document and line.
    place: String,
    command: String,
    output: Option<String>,
}

/// The commands of a Markdown document's code blocks. A block with `$ ` prompts is a session:
/// each prompt's command, with the lines up to the next prompt as its output. In a `sh` block
/// each line is a command (going on over lines that end in `\`), with no output shown. Only
/// commands that run `tjoin` are kept.
fn shown_in_markdown(document: &str, text: &str) -> Vec<Shown> {
    let mut shown = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((_, fence)) = lines.next() {
        let Some(info) = fence.strip_prefix("```") else {
            continue;
        };
        let block: Vec<(usize, &str)> = lines
            .by_ref()
            .take_while(|(_, line)| !line.starts_with("```"))
            .map(|(index, line)| (index + 1, line))
            .collect();
        let session = block.iter().any(|(_, line)| line.starts_with("$ "));
        if !session && info != "sh" {
            continue;
        }
        for (line, command, output) in commands_of_block(&block, session) {
            let place = format!("{document}:{line}");
            shown.push(Shown {
                place,
                command,
                output,
            });
        }
    }
    shown.retain(|shown| runs_tjoin(&shown.command));
    shown
}

/// A block's commands: (line, command, output). In a session the commands are the prompted
/// lines and the output every other line (`Some` even when empty); otherwise every line is a
/// command and the output `None`.
fn commands_of_block(
    block: &[(usize, &str)],
    session: bool,
) -> Vec<(usize, String, Option<String>)> {
    let mut commands: Vec<(usize, String, Option<String>)> = Vec::new();
    let mut continued = false;
    for &(number, line) in block {
        if continued {
            let last = commands.last_mut().expect("a command goes on");
            last.1.push('\n');
            last.1.push_str(line);
        } else if let Some(command) = line.strip_prefix("$ ") {
            commands.push((number, command.to_string(), Some(String::new())));
        } else if session {
            if let Some((_, _, Some(output))) = commands.last_mut() {
                output.push_str(line);
                output.push('\n');
            }
        } else if !line.trim().is_empty() {
            commands.push((number, line.to_string(), None));
        }
        continued = line.ends_with('\\');
    }
    commands
}

/// Whether `command` runs tjoin (a word of it before any comment is `tjoin`).
fn runs_tjoin(command: &str) -> bool {
    command
        .split_whitespace()
        .take_while(|word| !word.starts_with('#'))
        .any(|word| word == "tjoin")
}

/// The examples of `--help` and the man page: commands with no output shown.
fn shown_in_help() -> Vec<Shown> {
    tjoin::cli::EXAMPLES
        .iter()
        .map(|&(what, command)| Shown {
            place: format!("EXAMPLES: {}", what.trim_end_matches(':')),
            command: command.to_string(),
            output: None,
        })
        .collect()
}

/// Copies a fixture file or folder to `to`.
fn copy(from: &Path, to: &Path) {
    if from.is_dir() {
        snapbox::dir::copy_template(from, to).unwrap();
    } else {
        fs::copy(from, to).unwrap_or_else(|e| panic!("cannot copy {}: {e}", from.display()));
    }
}

/// A fresh folder holding every file the examples name.
fn example_files(command: &str) -> tempfile::TempDir {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    snapbox::dir::copy_template(root.join("fixtures/examples"), dir.path()).unwrap();
    for (name, fixture) in BORROWED {
        copy(&root.join(fixture), &dir.path().join(name));
    }
    // The folder holds the rank files only, as DCP writes it.
    let _ = fs::remove_file(dir.path().join("checkpoint/expected.safetensors"));
    let _ = fs::remove_file(dir.path().join("actor/expected.safetensors"));
    if command.contains("batches") {
        write_batches(&dir.path().join("batches"));
    }
    dir
}

/// 2,000 float32 shards [1, 128], but for batch-01236.npy, [5, 127].
fn write_batches(dir: &Path) {
    fs::create_dir(dir).unwrap();
    for index in 0..2000 {
        let shape: &[u64] = if index == 1236 { &[5, 127] } else { &[1, 128] };
        let data = vec![0; 4 * shape.iter().product::<u64>() as usize];
        let path = dir.join(format!("batch-{index:05}.npy"));
        write_npy(&path, "<f4", shape, false, &data);
    }
}

/// The paths a command's `-o` names, but standard output and `tjoin split`'s templates
/// (`'part-{part}.npy'`), which name no file themselves.
fn outputs(command: &str) -> Vec<&str> {
    let words: Vec<&str> = command.split_whitespace().collect();
    words
        .windows(2)
        .filter(|pair| pair[0] == "-o" && pair[1] != "-" && !pair[1].contains('{'))
        .map(|pair| pair[1])
        .collect()
}

/// What a file holds, or the names in a folder; `None` when there is neither.
fn contents(path: &Path) -> Option<Vec<u8>> {
    if path.is_dir() {
        let mut names: Vec<String> = fs::read_dir(path)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Some(names.join("\n").into_bytes())
    } else {
        fs::read(path).ok()
    }
}

/// Runs a shown command in a fresh copy of the files and checks what the document says.
fn check(shown: &Shown) {
    // Captured, and shown when the check fails.
    println!("{}: {}", shown.place, shown.command);
    let dir = example_files(&shown.command);
    // The binary under test first on PATH: cargo's build, or the one TJOIN_TEST_BIN names.
    let bin = bin();
    let bin_dir = bin.parent().unwrap();
    let path = std::env::join_paths(std::iter::once(bin_dir.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let targets: Vec<(&str, Option<Vec<u8>>)> = outputs(&shown.command)
        .into_iter()
        .map(|output| (output, contents(&dir.path().join(output))))
        .collect();
    let run = Command::new("sh")
        .arg("-c")
        .arg(&shown.command)
        .current_dir(dir.path())
        .env("PATH", path)
        .stderr_to_stdout()
        .assert();
    let refused = shown
        .output
        .as_ref()
        .is_some_and(|out| out.contains("error:"));
    match &shown.output {
        Some(output) if refused => {
            run.code(2).stdout_eq(output.as_str());
        }
        Some(output) => {
            run.success().stdout_eq(output.as_str());
        }
        None => {
            run.success();
        }
    }
    // A refusal or a dry run leaves the target as it was; any other run writes it.
    let writes = !refused && !shown.command.contains("--dry-run");
    for (output, before) in targets {
        let after = contents(&dir.path().join(output));
        assert!(
            if writes {
                after.is_some()
            } else {
                after == before
            },
            "{}: `{}` {} {output}",
            shown.place,
            shown.command,
            if writes { "wrote no" } else { "changed" }
        );
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let described = WRITES
        .iter()
        .filter(|(command, ..)| *command == uncommented(&shown.command));
    for (_, output, holds) in described {
        let written = dir.path().join(output);
        let place = format!("{}: `{}` wrote {output}", shown.place, shown.command);
        match holds {
            Holds::Fixture(fixture) => assert!(
                fs::read(&written).unwrap() == fs::read(root.join(fixture)).unwrap(),
                "{place}, which differs from {fixture}"
            ),
            Holds::Npy(descr, shape) => {
                let npy = read_npy(&written);
                assert_eq!(
                    (npy.descr.as_str(), npy.shape.as_slice()),
                    (*descr, *shape),
                    "{place}"
                );
            }
        }
    }
}

/// Runs every command but those `SKIPPED`, saying which were skipped and why.
fn check_all(shown: &[Shown]) {
    for shown in shown {
        match SKIPPED
            .iter()
            .find(|(flag, _)| shown.command.contains(flag))
        {
            Some((_, why)) => eprintln!("skipped ({why}): {}", shown.command),
            None => check(shown),
        }
    }
}

#[test]
fn every_tjoin_command_of_the_readme_runs_as_shown() {
    let readme = include_str!("../../README.md");
    let shown = shown_in_markdown("README.md", readme);
    assert!(
        shown.iter().filter(|shown| shown.output.is_some()).count() >= 5,
        "README.md's sessions were not found: {shown:#?}"
    );
    check_all(&shown);
}

#[test]
fn every_example_of_the_help_and_the_man_page_runs() {
    let help = crate::util::tjoin().arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let help = help.replace("\n    ", "\n");
    for (_, command) in &tjoin::cli::EXAMPLES[..4] {
        assert!(help.contains(command), "--help lacks the example {command}");
    }
    check_all(&shown_in_help());
}

/// Issue 27, item 17: README says its tour runs on the files of `fixtures/examples/`, where a
/// reader goes to try it; every `.npy` file its commands read must be there, not only in the
/// copy the tests make.
#[test]
fn every_npy_file_the_readme_reads_is_in_fixtures_examples() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = include_str!("../../README.md");
    assert!(readme.contains("on the files of\n`fixtures/examples/`"));
    let mut missing = Vec::new();
    for shown in shown_in_markdown("README.md", readme) {
        let command = uncommented(&shown.command);
        let written = outputs(command);
        let words: Vec<&str> = command.split_whitespace().collect();
        for (at, word) in words.iter().enumerate() {
            let redirected = at > 0 && words[at - 1].starts_with('>');
            let read = word.ends_with(".npy")
                && !word.contains(['*', '?', '/', '>'])
                && !redirected
                && !written.contains(word);
            if read && !root.join("fixtures/examples").join(word).is_file() {
                missing.push(format!("{}: {word}", shown.place));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "README reads files fixtures/examples/ lacks (add them in \
         fixtures/make_example_fixtures.py): {missing:?}"
    );
}

/// Issue 27, item 17: the file README's first command writes, at the repository's root, is
/// ignored by git.
#[test]
fn the_readmes_first_output_is_ignored_by_git() {
    let readme = include_str!("../../README.md");
    let first = readme
        .lines()
        .find(|line| line.starts_with("cargo run"))
        .expect("README starts with a cargo run command");
    let [output] = outputs(first)[..] else {
        panic!("README's first command names one output: {first}");
    };
    let ignored = include_str!("../../.gitignore");
    assert!(
        ignored.lines().any(|line| line == format!("/{output}")),
        ".gitignore lacks /{output}, which README's first command writes"
    );
}

#[test]
fn the_commands_whose_output_is_compared_are_shown() {
    let readme = include_str!("../../README.md");
    let mut shown = shown_in_markdown("README.md", readme);
    shown.extend(shown_in_help());
    for (command, ..) in WRITES {
        assert!(
            shown
                .iter()
                .any(|shown| uncommented(&shown.command) == *command),
            "no document shows `{command}` any more: update WRITES"
        );
    }
}
