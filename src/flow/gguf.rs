//! The GGUF flow: open a GGUF input (one file or a split set) and check every file of it,
//! plan the output files from the headers alone (`plan::gguf_files`), then either report the plan
//! or write each file under a temporary name (its header, then every tensor's bytes as they
//! are, padded) and commit them together once every input is checked unchanged. A refusal
//! writes nothing; a failure or an interrupt leaves no file behind. Files named by URL are
//! uploaded as they are written (`output::upload`) and completed together.

use std::path::{Path, PathBuf};

use crate::config::{Action, GgufConfig, GgufJob, PlanForm};
use crate::engine::ranges::{Piece, copy_pieces};
use crate::error::{Error, InputRef, Result};
use crate::format::Sink;
use crate::input::gguf_set::{GgufSet, split_name};
use crate::output::folders::Folders;
use crate::output::progress;
use crate::output::upload::{self, Uploads};
use crate::output::{Output, OutputSet};
use crate::plan::gguf_files::{self, OutFile};
use crate::report::{Warning, Warnings};

/// Runs the GGUF merge or split `config` describes.
pub fn run(config: &GgufConfig) -> Result<()> {
    let set = GgufSet::open(&config.inputs)?;
    let mut warnings = Warnings::new(config.quiet);
    let planned: Vec<(PathBuf, OutFile)> = match &config.job {
        GgufJob::Merge(output) => {
            let path = output.clone().unwrap_or_else(|| PathBuf::from("-"));
            vec![(path, gguf_files::merge(&set)?)]
        }
        GgufJob::Split { folder, stem, by } => {
            let files = gguf_files::split(&set, *by)?;
            let count = files.len() as u64;
            if count > LLAMA_OPEN_FILES {
                warnings.push(Warning::ManyGgufFiles { count });
            }
            files
                .into_iter()
                .enumerate()
                .map(|(no, file)| (folder.join(split_name(stem, no as u64, count)), file))
                .collect()
        }
    };
    let form = match (config.action, &config.job) {
        (Action::DryRun(form), _) => Some(form),
        // A merge without -o writes nothing: the plan, as a join without -o prints it.
        (Action::Write, GgufJob::Merge(None)) => Some(PlanForm::Text),
        (Action::Write, _) => None,
    };
    if let Some(form) = form {
        return report(&set, &planned, form);
    }
    check_outputs_not_inputs(&set, &planned)?;
    write(config, &set, &planned)?;
    match config.print_plan {
        Some(form) => report(&set, &planned, form),
        None => Ok(()),
    }
}

/// Refuses a merge or split of a set of several files that would write over one of them, as a
/// join of several inputs is refused (`flow::join`): the set would be lost half replaced, and
/// a glob that names the output among the set's files would, run again, read it as data.
fn check_outputs_not_inputs(set: &GgufSet, planned: &[(PathBuf, OutFile)]) -> Result<()> {
    if set.files.len() < 2 {
        return Ok(());
    }
    for (output, _) in planned {
        if let Some(at) = super::input_written_over(output, set.files.iter().map(|f| &*f.path)) {
            return Err(Error::refused(
                format!(
                    "the output {} is file {} of the set ({}): writing it would replace a file \
                     the set is read from",
                    crate::messages::path(output),
                    at + 1,
                    crate::messages::path(&set.files[at].path),
                ),
                "name an output that is not one of the set's files",
            ));
        }
    }
    Ok(())
}

/// llama.cpp keeps every file of a set open and mapped; past 1024, the usual limit of open
/// files, it cannot load them.
const LLAMA_OPEN_FILES: u64 = 1024;

/// Writes every planned file and commits them together.
fn write(config: &GgufConfig, set: &GgufSet, planned: &[(PathBuf, OutFile)]) -> Result<()> {
    let tensors: Vec<_> = set.tensors().collect();
    let names: Vec<InputRef> = set
        .files
        .iter()
        .enumerate()
        .map(|(at, file)| InputRef {
            position: at + 1,
            location: file.path.clone().into(),
            tensor: None,
        })
        .collect();
    let total: u64 = planned.iter().map(|(_, f)| f.len).sum();
    let paths: Vec<&Path> = planned.iter().map(|(p, _)| p.as_path()).collect();
    let bar = progress::start_all(total, config.progress, &paths);
    let pieces = |file: &OutFile| -> Vec<Piece<'_>> {
        let mut pieces = vec![Piece::Zeros(file.header_pad)];
        for &(index, pad) in &file.tensors {
            let t = &tensors[index];
            pieces.push(Piece::Range {
                file: &set.files[t.file].file,
                name: &names[t.file],
                offset: t.start,
                len: t.info.bytes,
            });
            pieces.push(Piece::Zeros(pad));
        }
        pieces
    };
    let write_one = |out: &mut dyn Sink, file: &OutFile| -> Result<()> {
        out.write_all(&file.header)
            .map_err(|e| Error::io("write", out.name(), e))?;
        bar.bar.inc(file.header.len() as u64);
        copy_pieces(pieces(file), out, |n| bar.bar.inc(n))
    };
    // Writes each file into its sink in turn, up to the first failure, and checks that the
    // inputs did not change meanwhile: what every kind of output commits after.
    let write_files = |sinks: Vec<&mut dyn Sink>| -> Result<()> {
        let written = sinks
            .into_iter()
            .zip(planned)
            .try_for_each(|(sink, (_, file))| write_one(sink, file));
        bar.finish();
        written?;
        set.check_unchanged()
    };
    // Files named by URL (one `-o` names them all): uploaded as they are written, completed
    // together once every input is checked unchanged; a failure before leaves none of them.
    if planned.iter().any(|(path, _)| upload::is_url(path)) {
        let targets: Vec<(PathBuf, u64)> =
            planned.iter().map(|(p, f)| (p.clone(), f.len)).collect();
        // --part-size as for a join (`cli::gguf` takes it only with -o naming a URL).
        let mut uploads = Uploads::open(&targets, config.no_clobber, config.part_size)?;
        write_files(sinks(uploads.members_mut()))?;
        uploads.commit()?;
        bar.summary();
        return Ok(());
    }
    if let [(path, _)] = planned {
        if matches!(config.job, GgufJob::Merge(_)) {
            let mut out = Output::create(path, config.no_clobber)?;
            write_files(vec![&mut out])?;
            out.commit()?;
            bar.summary();
            return Ok(());
        }
    }
    let mut folders = Folders::none();
    if let GgufJob::Split { folder, .. } = &config.job
        && !folder.as_os_str().is_empty()
    {
        folders.make_one(folder)?;
    }
    // The set's files are written in their folder itself, never through a link elsewhere.
    let mut outputs = OutputSet::new(config.no_clobber).without_links();
    for (path, _) in planned {
        outputs.add(path)?;
    }
    write_files(sinks(outputs.members_mut()))?;
    outputs.commit()?;
    folders.keep();
    bar.summary();
    Ok(())
}

/// Each of `members` as the sink its file is written into.
fn sinks<S: Sink>(members: &mut [S]) -> Vec<&mut dyn Sink> {
    members.iter_mut().map(|m| m as &mut dyn Sink).collect()
}

/// Prints what would be written: each file, its tensors and its length.
fn report(set: &GgufSet, planned: &[(PathBuf, OutFile)], form: PlanForm) -> Result<()> {
    let inputs: Vec<String> = set
        .files
        .iter()
        .map(|f| f.path.display().to_string())
        .collect();
    let tensors: Vec<_> = set.tensors().collect();
    let text = match form {
        PlanForm::Json => {
            let files: Vec<serde_json::Value> = planned
                .iter()
                .map(|(path, file)| {
                    let names: Vec<&str> = file
                        .tensors
                        .iter()
                        .map(|&(i, _)| tensors[i].info.name.as_str())
                        .collect();
                    serde_json::json!({
                        "path": path.display().to_string(),
                        "bytes": file.len,
                        "tensors": names,
                    })
                })
                .collect();
            let value = serde_json::json!({"format": "gguf", "inputs": inputs, "outputs": files});
            format!("{value}\n")
        }
        PlanForm::Text => {
            let mut text = format!(
                "gguf: {} input file(s), {} tensors\n",
                inputs.len(),
                tensors.len()
            );
            for (path, file) in planned {
                text.push_str(&format!(
                    "  {}  {} tensors, {} bytes\n",
                    crate::messages::path(path),
                    file.tensors.len(),
                    file.len
                ));
                for &(i, _) in &file.tensors {
                    let info = tensors[i].info;
                    text.push_str(&format!(
                        "    {}  {} {}\n",
                        crate::messages::name(&info.name),
                        info.ggml_type.name(),
                        crate::messages::shape_text(&info.shape())
                    ));
                }
            }
            text
        }
    };
    crate::messages::print(&text).map_err(|e| Error::io("write", Path::new("standard output"), e))
}
