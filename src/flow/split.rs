//! The split command's flow (`tjoin split`): open the input and read its headers, plan every
//! output's tensors as slices of the input's (`plan::split`), check that every output's
//! format can hold them, then either report the plan (`--dry-run`) or write every output
//! under a temporary name and commit them together: a failure or an interrupt leaves none of
//! them, a success all.

use std::path::PathBuf;

use crate::backend::{Backend, Engine};
use crate::config::{Action, OpenConfig, SplitConfig};
use crate::error::{Error, Result};
use crate::format::{Format, OutTensor, Writer};
use crate::output::progress::{self, Counted};
use crate::output::{OutputSet, Sink};
use crate::plan::job::TensorJob;
use crate::plan::rules::{self, Matcher};
use crate::plan::split::{self, SplitOptions};
use crate::report::SplitReport;

/// Runs the split `config` describes.
pub fn run(config: &SplitConfig) -> Result<()> {
    let open = OpenConfig {
        paths: std::slice::from_ref(&config.input),
        format: config.input_format,
        any_order: true,
        stack: false,
        axis: None,
    };
    let inputs = super::join::open_inputs(&open, None)?;
    let input = &inputs[0];
    let formats = config
        .outputs
        .iter()
        .map(|path| Format::of_output(path, config.output.format))
        .collect::<Result<Vec<Format>>>()?;
    let matcher = Matcher::new(&config.tensor_rules);
    check_rules_match(input, &matcher)?;
    let options = SplitOptions {
        cut: &config.cut,
        axis: config.axis,
        rules: &matcher,
        formats: &formats,
    };
    let jobs = split::build(input, &options)?;
    let metadata = input.metadata();
    let mut writers = Vec::with_capacity(formats.len());
    let mut ordered = Vec::with_capacity(formats.len());
    for ((path, &format), jobs) in config.outputs.iter().zip(&formats).zip(jobs) {
        let writer = format.writer(&config.output.write_options(format, metadata)?)?;
        let jobs = in_writer_order(jobs, writer.as_ref());
        let described: Vec<OutTensor> = jobs.iter().map(|t| t.out.clone()).collect();
        writer.check(&described).map_err(|mut refusal| {
            let target = crate::messages::path(path);
            refusal.headline = format!("cannot write {target}: {}", refusal.headline);
            Error::Refused(vec![refusal])
        })?;
        writers.push(writer);
        ordered.push(jobs);
    }
    if let Action::DryRun(form) = config.action {
        let outputs: Vec<(String, &'static str)> = config
            .outputs
            .iter()
            .zip(&formats)
            .map(|(path, format)| (path.display().to_string(), format.name()))
            .collect();
        return SplitReport::new(input, &outputs, &ordered).print(form);
    }
    if config.output.no_clobber {
        check_no_clobber(&config.outputs)?;
    }
    let total = ordered.iter().flatten().map(|t| t.plan.bytes).sum();
    let progress = progress::start(total, config.progress, &config.outputs[0]);
    let folders = Folders::make(&config.outputs)?;
    let mut set = OutputSet::new(config.output.no_clobber);
    for path in &config.outputs {
        set.add(path)?;
    }
    let mut written = Ok(());
    for ((member, jobs), writer) in set.members_mut().iter_mut().zip(&ordered).zip(&mut writers) {
        written = write_output(jobs, writer.as_mut(), member, &progress.bar);
        if written.is_err() {
            break;
        }
    }
    progress.finish();
    written?;
    input.check_unchanged()?;
    // An output may replace the input, which Windows refuses while the input is mapped or
    // open: every map and handle goes before the commit.
    drop(ordered);
    drop(inputs);
    set.commit()?;
    folders.keep();
    progress.summary();
    Ok(())
}

/// Writes one output's tensors (in its writer's order) into `sink`, framed by the output
/// format's `writer`, their data by the CPU engine.
fn write_output(
    jobs: &[TensorJob],
    writer: &mut dyn Writer,
    sink: &mut dyn Sink,
    bar: &indicatif::ProgressBar,
) -> Result<()> {
    let mut engine = Engine::choose(Backend::Cpu, None, jobs)?;
    let failed = |e, sink: &dyn Sink| Error::io("write the output", sink.name(), e);
    let described: Vec<OutTensor> = jobs.iter().map(|t| t.out.clone()).collect();
    writer
        .start(sink, &described)
        .map_err(|e| failed(e, sink))?;
    for (index, tensor) in jobs.iter().enumerate() {
        writer
            .start_tensor(sink, &tensor.out)
            .map_err(|e| failed(e, sink))?;
        let mut data = writer.data_sink(sink);
        let mut counted = Counted {
            inner: data.as_mut(),
            bar,
        };
        engine.execute(index, tensor, &mut counted)?;
        drop(data);
        writer
            .end_tensor(sink, &tensor.out)
            .map_err(|e| failed(e, sink))?;
    }
    writer.finish(sink).map_err(|e| failed(e, sink))
}

/// The job's tensors in the order the output format lists them.
fn in_writer_order<'a>(jobs: Vec<TensorJob<'a>>, writer: &dyn Writer) -> Vec<TensorJob<'a>> {
    let described: Vec<OutTensor> = jobs.iter().map(|t| t.out.clone()).collect();
    let order = writer.order(&described);
    let mut slots: Vec<Option<TensorJob>> = jobs.into_iter().map(Some).collect();
    order
        .into_iter()
        .filter_map(|index| slots.get_mut(index).and_then(Option::take))
        .collect()
}

/// Refuses rules that match no tensor of the input: a rule the user wrote for a tensor the
/// input does not hold is most likely a typo or the wrong rules file.
fn check_rules_match(input: &crate::input::Input, matcher: &Matcher) -> Result<()> {
    let names: Vec<&str> = input
        .tensors
        .iter()
        .map(|t| {
            t.name
                .tensor
                .as_deref()
                .unwrap_or(crate::plan::job::DEFAULT_NAME)
        })
        .collect();
    let unmatched: Vec<_> = matcher
        .unmatched(&names)
        .into_iter()
        .filter(|rule| rule.required)
        .collect();
    if unmatched.is_empty() {
        return Ok(());
    }
    Err(Error::Refused(vec![rules::unmatched_refusal(
        &unmatched, &names, false,
    )]))
}

/// Refuses, before anything is written, outputs that exist (`--no-clobber`), naming each.
fn check_no_clobber(outputs: &[PathBuf]) -> Result<()> {
    let existing: Vec<String> = outputs
        .iter()
        .filter(|path| path.symlink_metadata().is_ok())
        .map(|path| crate::messages::path(path))
        .collect();
    if existing.is_empty() {
        return Ok(());
    }
    Err(Error::Refused(vec![crate::error::Refusal {
        headline: format!(
            "--no-clobber: {} of the outputs exist already",
            existing.len()
        ),
        details: crate::error::capped(existing, 10),
        hint: Some(
            "remove them, name other outputs, or drop --no-clobber to replace them".to_string(),
        ),
    }]))
}

/// The folders a split made for its outputs (`-o 'tp{rank}/model.safetensors'` makes `tp0`,
/// `tp1`, ...): removed again, when still empty, unless the outputs are committed.
struct Folders(Vec<PathBuf>);

impl Folders {
    /// Makes the missing folders the outputs are in, one level deep: a folder whose own
    /// folder does not exist is refused, as a typo is more likely than a wish for a tree.
    fn make(outputs: &[PathBuf]) -> Result<Folders> {
        let mut made = Folders(Vec::new());
        for path in outputs {
            let Some(folder) = path.parent().filter(|f| !f.as_os_str().is_empty()) else {
                continue;
            };
            if folder.is_dir() || made.0.iter().any(|m| m == folder) {
                continue;
            }
            let above = folder.parent().filter(|f| !f.as_os_str().is_empty());
            if above.is_some_and(|above| !above.is_dir()) {
                return Err(Error::refused(
                    format!(
                        "cannot write {}: neither its folder nor the folder above exists",
                        crate::messages::path(path)
                    ),
                    "create the folders first (tjoin split makes only the last one)",
                ));
            }
            std::fs::create_dir(folder)
                .map_err(|e| Error::io("create the output folder", folder, e))?;
            made.0.push(folder.to_path_buf());
        }
        Ok(made)
    }

    /// The outputs are committed: the folders stay.
    fn keep(mut self) {
        self.0.clear();
    }
}

impl Drop for Folders {
    fn drop(&mut self) {
        for folder in self.0.iter().rev() {
            // Only an empty folder goes; anything else in it is not this run's to remove.
            let _ = std::fs::remove_dir(folder);
        }
    }
}
