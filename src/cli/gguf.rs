//! GGUF's commands, told from the flags alone: a join whose output is a `.gguf` file (or
//! `--format gguf`), or whose inputs are all `.gguf` files and that writes nothing (a dry
//! run), is a GGUF merge; `tjoin split` of a `.gguf` input is a GGUF split. Both become a
//! `config::GgufConfig`; the join's and the split's flags that make no sense for them are
//! refused here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::split::SplitArgs;
use super::{Backend, JoinArgs};
use crate::config::{Action, GgufConfig, GgufJob, When};
use crate::error::{Error, Result};
use crate::format::gguf::is_gguf_name;
use crate::input::gguf_set::numbered;
use crate::plan::gguf_files::SplitBy;

/// The GGUF merge a join's flags ask for, if they ask for one.
pub fn merge(cli: &JoinArgs) -> Result<Option<GgufConfig>> {
    let forced = cli
        .format
        .as_deref()
        .is_some_and(|f| f.eq_ignore_ascii_case("gguf"));
    let to_gguf = forced || cli.output.as_deref().is_some_and(is_gguf_name);
    let all_gguf = !cli.inputs.is_empty() && cli.inputs.iter().all(|p| is_gguf_name(p));
    let dry_run_of_gguf = cli.output.is_none() && all_gguf && cli.files_from.is_none();
    if !(to_gguf || dry_run_of_gguf) {
        return Ok(None);
    }
    if let Some(flag) = misplaced_in_merge(cli) {
        return Err(Error::refused(
            format!(
                "{flag} does not apply to a GGUF merge, which carries every key and tensor of \
                 a GGUF set into one file as they are"
            ),
            format!(
                "drop {flag}; to split a GGUF file, use tjoin split --max-tensors N or \
                 --max-shard-size SIZE"
            ),
        ));
    }
    check_merge_files(cli)?;
    let uploaded = cli
        .output
        .as_deref()
        .is_some_and(crate::sys::remote::is_url);
    Ok(Some(GgufConfig {
        inputs: cli.inputs.iter().map(|p| Arc::from(p.as_path())).collect(),
        job: GgufJob::Merge(cli.output.clone()),
        no_clobber: cli.no_clobber,
        part_size: part_size(cli.part_size, uploaded)?,
        action: cli.dry_run.map_or(Action::Write, Action::DryRun),
        print_plan: cli.print_plan,
        progress: if cli.quiet { When::Never } else { cli.progress },
        quiet: cli.quiet,
    }))
}

/// `--part-size`, which sizes the parts of files uploaded (`uploaded`: -o names a URL).
fn part_size(part_size: Option<u64>, uploaded: bool) -> Result<Option<u64>> {
    if part_size.is_some() && !uploaded {
        return Err(Error::refused(
            "--part-size sizes the parts of files in object storage, and -o names none",
            "drop --part-size, or write to s3://BUCKET/KEY",
        ));
    }
    Ok(part_size)
}

/// The first of the join's flags given that a GGUF merge has no use for, if any.
fn misplaced_in_merge(cli: &JoinArgs) -> Option<&'static str> {
    // Every flag named, none by `..`: a flag added to the join must be placed here (used, or
    // refused), never ignored by a merge that then writes something other than asked.
    let JoinArgs {
        inputs: _,
        files_from: _,
        null: _,
        input_format: _,
        axis,
        stack,
        cast,
        output: _,
        format: _,
        name,
        no_clobber: _,
        part_size: _,
        append,
        recover: _,
        metadata,
        compress,
        json_form: _,
        spec,
        expect_shape,
        like,
        config,
        strict,
        allow_unmatched,
        any_order,
        uneven,
        dry_run: _,
        print_plan: _,
        rules,
        axis_for,
        keep,
        exclude,
        only,
        join_identical,
        max_shard_size,
        prefix,
        names_from,
        engine,
        workers,
        progress: _,
        quiet: _,
    } = cli;
    let misplaced = [
        (axis.is_some(), "-a/--axis"),
        (*stack, "--stack"),
        (cast.is_some(), "--cast"),
        (name.is_some(), "--name"),
        (!metadata.is_empty(), "--metadata"),
        (*compress, "--compress"),
        (spec.is_some(), "--spec"),
        (!like.is_empty(), "--like"),
        (config.is_some(), "--config"),
        (*strict, "--strict"),
        (*allow_unmatched, "--allow-unmatched"),
        (*any_order, "--any-order"),
        (*uneven, "--uneven"),
        (!rules.is_empty(), "--rules"),
        (!axis_for.is_empty(), "--axis-for"),
        (!keep.is_empty(), "--keep"),
        (!exclude.is_empty(), "--exclude"),
        (!only.is_empty(), "--only"),
        (*join_identical, "--join-identical"),
        (expect_shape.is_some(), "--expect-shape"),
        (max_shard_size.is_some(), "--max-shard-size"),
        (prefix.is_some(), "--prefix"),
        (names_from.is_some(), "--names-from"),
        (
            engine.backend != Backend::Cpu || engine.dml_adapter.is_some(),
            "--backend",
        ),
        (*append, "--append"),
        (
            workers.workers.is_some() || workers.worker.is_some(),
            "--workers/--worker",
        ),
    ];
    misplaced
        .iter()
        .find(|(given, _)| *given)
        .map(|&(_, flag)| flag)
}

/// Refuses what a GGUF merge cannot write from or to: `--print-plan` with `-o -`,
/// `--files-from`, an input not named `.gguf`.
fn check_merge_files(cli: &JoinArgs) -> Result<()> {
    if cli.print_plan.is_some() && cli.output.as_deref() == Some(Path::new("-")) {
        return Err(Error::refused(
            "--print-plan prints on standard output, which -o - fills with the GGUF file",
            "write the file to a path, or drop --print-plan",
        ));
    }
    if cli.files_from.is_some() {
        return Err(Error::refused(
            "--files-from does not apply to a GGUF merge",
            "name the set's first file, or every file of it in order",
        ));
    }
    if let Some(bad) = cli.inputs.iter().find(|p| !is_gguf_name(p)) {
        return Err(Error::refused(
            format!(
                "a GGUF output is written only from GGUF inputs, but {} is not named .gguf",
                crate::messages::path(bad)
            ),
            "name the GGUF set's first file (or all its files), or write .npy or .safetensors \
             from GGUF's plain tensors",
        ));
    }
    Ok(())
}

/// The GGUF split `tjoin split`'s flags ask for, if its input is a `.gguf` file; refuses
/// `--max-tensors` for any other input.
pub fn split(args: &SplitArgs) -> Result<Option<GgufConfig>> {
    let forced = args
        .input_format
        .as_deref()
        .is_some_and(|f| f.eq_ignore_ascii_case("gguf"));
    if !forced && !is_gguf_name(&args.input) {
        if args.max_tensors.is_some() {
            return Err(Error::refused(
                "--max-tensors splits GGUF files, but the input is not named .gguf",
                "split other files with --parts, --sizes or --ranks",
            ));
        }
        return Ok(None);
    }
    let by = match (args.max_tensors, args.max_shard_size) {
        (Some(n), None) => SplitBy::Tensors(n),
        (None, Some(bytes)) => SplitBy::Bytes(bytes),
        _ => {
            return Err(Error::refused(
                "a GGUF split needs one of --max-tensors N and --max-shard-size SIZE",
                "add --max-tensors 128 (gguf-split's default) or --max-shard-size 4GB",
            ));
        }
    };
    if let Some(flag) = misplaced_in_split(args) {
        return Err(Error::refused(
            format!(
                "{flag} does not apply to a GGUF split, which cuts a file between tensors, each \
                 carried whole"
            ),
            format!("drop {flag}"),
        ));
    }
    let [output] = args.output.as_slice() else {
        return Err(Error::refused(
            "a GGUF split takes one -o: a folder (out/) or the files' stem (out/model.gguf)",
            "give -o once; the files are named STEM-00001-of-0000N.gguf, as gguf-split names \
             them",
        ));
    };
    let (folder, stem) = names(&args.input, output);
    Ok(Some(GgufConfig {
        inputs: vec![Arc::from(args.input.as_path())],
        job: GgufJob::Split { folder, stem, by },
        no_clobber: args.no_clobber,
        part_size: part_size(args.part_size, crate::sys::remote::is_url(output))?,
        action: args.dry_run.map_or(Action::Write, Action::DryRun),
        print_plan: args.print_plan,
        progress: if args.quiet {
            When::Never
        } else {
            args.progress
        },
        quiet: args.quiet,
    }))
}

/// The first of `tjoin split`'s flags given that a GGUF split has no use for, if any.
fn misplaced_in_split(args: &SplitArgs) -> Option<&'static str> {
    // Every flag named, none by `..`, as in `misplaced_in_merge`.
    let SplitArgs {
        input: _,
        axis,
        parts,
        exact,
        sizes,
        ranks,
        output: _,
        max_shard_size: _,
        max_tensors: _,
        format,
        input_format: _,
        no_clobber: _,
        part_size: _,
        compress,
        json_form: _,
        metadata,
        rules,
        axis_for,
        keep,
        heads,
        spec,
        allow_unmatched,
        dry_run: _,
        print_plan: _,
        engine,
        workers,
        progress: _,
        quiet: _,
        help: _,
    } = args;
    let misplaced = [
        (axis.is_some(), "-a/--axis"),
        (parts.is_some(), "--parts"),
        (*exact, "--exact"),
        (sizes.is_some(), "--sizes"),
        (ranks.is_some(), "--ranks"),
        (!rules.is_empty(), "--rules"),
        (!axis_for.is_empty(), "--axis-for"),
        (!keep.is_empty(), "--keep"),
        (heads.is_some(), "--heads"),
        (spec.is_some(), "--spec"),
        (*allow_unmatched, "--allow-unmatched"),
        (
            workers.workers.is_some() || workers.worker.is_some(),
            "--workers/--worker",
        ),
        (!metadata.is_empty(), "--metadata"),
        (*compress, "--compress"),
        (format.is_some(), "--format"),
        (
            engine.backend != Backend::Cpu || engine.dml_adapter.is_some(),
            "--backend",
        ),
    ];
    misplaced
        .iter()
        .find(|(given, _)| *given)
        .map(|&(_, flag)| flag)
}

/// The folder and stem of a split's files: `-o out/` (or an existing folder) puts them in
/// `out/` after the input's stem (less a set's numbering); `-o out/model.gguf` or
/// `-o out/model` names the stem, as gguf-split's output argument does.
fn names(input: &Path, output: &Path) -> (PathBuf, String) {
    let text = output.to_string_lossy();
    let is_folder =
        text.ends_with('/') || (cfg!(windows) && text.ends_with('\\')) || output.is_dir();
    if is_folder {
        let name = input
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        let stem = match numbered(input) {
            Some(_) => name
                .rsplit_once("-of-")
                .and_then(|(rest, _)| rest.rsplit_once('-'))
                .map_or(name.to_string(), |(stem, _)| stem.to_string()),
            None => strip_gguf(&name).to_string(),
        };
        return (output.to_path_buf(), stem);
    }
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let folder = output.parent().map(Path::to_path_buf).unwrap_or_default();
    (folder, strip_gguf(&name).to_string())
}

fn strip_gguf(name: &str) -> &str {
    name.strip_suffix(".gguf")
        .or_else(|| name.strip_suffix(".GGUF"))
        .unwrap_or(name)
}
