//! The flags of a job that N workers run (`--workers N` with `--begin`, `--commit` or
//! `--abandon`; `--worker I/N`), and their turning into the job's step
//! (`output::job::Step`). The flow is `src/flow/join/workers/`.

use crate::error::{Error, Result};
use crate::output::job::Step;

const WORKERS: &str = "Workers";

/// The most workers a job has: a share each of at least a page of a 1 TB output.
pub const MOST_WORKERS: u32 = 65_536;

/// The flags of a job of several workers.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct WorkerArgs {
    /// Share the output between N workers (with --begin, --commit, --abandon or --dry-run).
    ///
    /// Three steps, each the same join (or split) command plus: --workers N --begin (once, first: plans
    /// and records the job beside the output), --worker I/N (for I from 0 to N-1, in any
    /// order, at once, on any machine that sees the same files: writes its share), then
    /// --workers N --commit (once, last: checks every worker finished and nothing changed,
    /// then puts the output in place). --dry-run with --workers N shows each worker's share.
    /// The output may be in S3 (-o s3://BUCKET/KEY, or a sharded set's s3://BUCKET/PREFIX/; a
    /// split's outputs too, all in one bucket): each file is then one multipart upload, each
    /// worker uploading its run of parts, and the job is recorded in the bucket. Inputs may be
    /// URLs (s3://, https://, ...): each worker reads its share by range, pinned to the ETags
    /// --begin recorded.
    #[arg(long, value_name = "N", help_heading = WORKERS)]
    pub workers: Option<u32>,

    /// Begin a job of --workers N: plan it, and record it beside the output (in the bucket).
    #[arg(long, requires = "workers", conflicts_with_all = ["commit", "abandon", "worker", "dry_run"], help_heading = WORKERS)]
    pub begin: bool,

    /// Write share I (from 0) of a job of N workers that --begin recorded; safe to run again.
    #[arg(long, value_name = "I/N", value_parser = parse_worker, conflicts_with_all = ["workers", "dry_run"], help_heading = WORKERS)]
    pub worker: Option<(u32, u32)>,

    /// Commit a job of --workers N: check that all finished and nothing changed, then publish.
    #[arg(long, requires = "workers", conflicts_with_all = ["abandon", "dry_run"], help_heading = WORKERS)]
    pub commit: bool,

    /// Abandon a job of --workers N: remove its files, abort its upload; the output stays.
    #[arg(long, requires = "workers", conflicts_with = "dry_run", help_heading = WORKERS)]
    pub abandon: bool,
}

/// `I/N`, with `I < N` and `N` between 1 and [`MOST_WORKERS`].
fn parse_worker(text: &str) -> std::result::Result<(u32, u32), String> {
    let usage = || format!("`{text}` is not I/N (a worker's number from 0, and the count)");
    let (i, n) = text.split_once('/').ok_or_else(usage)?;
    let i: u32 = i.trim().parse().map_err(|_| usage())?;
    let n: u32 = n.trim().parse().map_err(|_| usage())?;
    let n = count(n)?;
    if i >= n {
        return Err(format!(
            "worker {i} of {n}: workers are numbered from 0 to {}",
            n - 1
        ));
    }
    Ok((i, n))
}

/// A worker count between 1 and [`MOST_WORKERS`].
fn count(n: u32) -> std::result::Result<u32, String> {
    if (1..=MOST_WORKERS).contains(&n) {
        Ok(n)
    } else {
        Err(format!("{n} workers: a job has from 1 to {MOST_WORKERS}"))
    }
}

impl WorkerArgs {
    /// The step the flags ask for, if any; `dry_run` is whether `--dry-run` was given,
    /// `append` whether `--append` was (a file grown in place is not shared).
    pub fn step(&self, dry_run: bool, append: bool) -> Result<Option<Step>> {
        if append && (self.workers.is_some() || self.worker.is_some()) {
            return Err(Error::refused(
                "--append grows a file in place, which a job of several workers does not share",
                "drop --workers/--worker to append in one process, or join into a new output",
            ));
        }
        let n = match self.workers {
            Some(n) => Some(count(n).map_err(|why| {
                Error::refused(format!("--workers {why}"), "give --workers a count from 1")
            })?),
            None => None,
        };
        Ok(match (n, self.worker) {
            (_, Some((i, n))) => Some(Step::Worker(i, n)),
            (Some(n), None) if self.begin => Some(Step::Begin(n)),
            (Some(n), None) if self.commit => Some(Step::Commit(n)),
            (Some(n), None) if self.abandon => Some(Step::Abandon(n)),
            (Some(n), None) if dry_run => Some(Step::Shares(n)),
            (Some(n), None) => {
                return Err(Error::refused(
                    format!(
                        "--workers {n} says how many workers share the output, but not the step"
                    ),
                    "add --begin (first), --commit (last), --abandon, or --dry-run to see the \
                     shares; each worker runs --worker I/N",
                ));
            }
            (None, None) => None,
        })
    }
}

/// Refuses what a split into object storage cannot do. In one process (`step` is `None`):
/// outputs of which some are URLs and some local files (a set of local files is committed by
/// renames that a failure undoes, objects by completing uploads that nothing undoes: the two
/// cannot appear together, and the split into a local folder then an upload does the same),
/// and a URL tjoin does not write (`https://`, a query, no key). A split run as a job
/// (`step`) is checked by [`refuse_remote_split_job`] instead.
pub fn refuse_remote_split(step: Option<Step>, outputs: &[std::path::PathBuf]) -> Result<()> {
    if step.is_some() {
        return refuse_remote_split_job(outputs);
    }
    refuse_remote_outputs(outputs)
}

/// The one-process half of [`refuse_remote_split`]: every output a URL tjoin writes, or none.
fn refuse_remote_outputs(outputs: &[std::path::PathBuf]) -> Result<()> {
    use crate::sys::remote::{Location, Scheme, is_url};
    let urls = outputs.iter().filter(|p| is_url(p)).count();
    if urls == 0 {
        return Ok(());
    }
    if urls < outputs.len() {
        let local = outputs.iter().find(|p| !is_url(p));
        let url = outputs.iter().find(|p| is_url(p));
        let (local, url) = (local.expect("a local output"), url.expect("a URL output"));
        return Err(Error::refused(
            format!(
                "the outputs mix local files ({}) and objects ({}): a split commits its outputs \
                 together, local files by renames and objects by completing their uploads, \
                 which cannot appear as one",
                crate::messages::path(local),
                crate::messages::path(url)
            ),
            "name every output in object storage (one template, -o 's3://BUCKET/p{part}.npy'), \
             or every output as a local file",
        ));
    }
    for url in outputs {
        let why = match Location::parse(&url.to_string_lossy()) {
            Ok(location) if location.scheme == Scheme::Http => {
                "an https:// URL is read, not written".to_string()
            }
            // `s3://B/` is a sharded output at the bucket's top; `s3://B` names nothing.
            Ok(location) if location.key.is_empty() && !url.to_string_lossy().ends_with('/') => {
                "it names no key".to_string()
            }
            Ok(_) => continue,
            Err(why) => why,
        };
        return Err(Error::refused(
            format!(
                "the output {} is not a URL tjoin writes: {why}",
                crate::messages::path(url)
            ),
            "name each output as s3://BUCKET/KEY (gs://, az://), or a sharded output's prefix \
             as s3://BUCKET/PREFIX/ (-o 's3://BUCKET/tp{rank}/')",
        ));
    }
    Ok(())
}

/// Refuses a split run as a job of several workers whose outputs a job cannot keep
/// together: some named by URL and some not, URLs not in S3 (a job uploads each output file
/// as one multipart upload's parts, and keeps its objects beside its first output), or in
/// several buckets. Its input may be a URL: each worker reads its share by range, pinned to
/// the ETags `--begin` recorded, as a join's workers do (`flow::join::workers`).
pub fn refuse_remote_split_job(outputs: &[std::path::PathBuf]) -> Result<()> {
    use crate::sys::remote::{Location, Scheme, is_url};
    let Some(first) = outputs.iter().find(|p| is_url(p)) else {
        return Ok(());
    };
    let shown = crate::messages::path(first);
    if let Some(local) = outputs.iter().find(|p| !is_url(p)) {
        return Err(Error::refused(
            format!(
                "the outputs {shown} and {} are one in object storage and one not, and a job \
                 of several workers keeps its files beside its first output",
                crate::messages::path(local)
            ),
            "name every output in S3 (-o 's3://BUCKET/tp{rank}.safetensors'), or every one on \
             a file system the workers share",
        ));
    }
    let mut bucket = None;
    for url in outputs {
        let location = Location::parse(&url.to_string_lossy());
        let Some(location) = location.ok().filter(|l| l.scheme == Scheme::S3) else {
            return Err(Error::refused(
                format!(
                    "the output {} is not in S3, and a split run by several workers uploads \
                     its outputs to S3 as multipart uploads' parts (gs:// and az:// are not \
                     shared yet)",
                    crate::messages::path(url)
                ),
                "name the outputs in S3 (-o 's3://BUCKET/tp{rank}.safetensors', or an \
                 S3-compatible store through AWS_ENDPOINT_URL)",
            ));
        };
        match &bucket {
            Some(first_bucket) if *first_bucket != location.bucket => {
                return Err(Error::refused(
                    format!(
                        "the outputs {shown} and {} are in different buckets, and a job of \
                         several workers keeps its objects in one, beside its first output",
                        crate::messages::path(url)
                    ),
                    "name every output in one bucket (and copy them elsewhere once the job \
                     is committed)",
                ));
            }
            Some(_) => {}
            None => bucket = Some(location.bucket),
        }
    }
    Ok(())
}

/// Refuses a join run as a job (`step`) whose output is a URL not in S3 (a job uploads each
/// output file as one multipart upload's parts, a run of them per worker). Inputs named by
/// URL are shared: each worker reads its share's ranges, pinned to the ETags `--begin`
/// recorded (`flow::join::workers`).
pub fn refuse_remote_join(step: Option<Step>, output: Option<&std::path::Path>) -> Result<()> {
    use crate::sys::remote::{Location, Scheme, is_url};
    if step.is_none() {
        return Ok(());
    }
    let Some(url) = output.filter(|p| is_url(p)) else {
        return Ok(());
    };
    let location = Location::parse(&url.to_string_lossy());
    if location.is_ok_and(|l| l.scheme == Scheme::S3) {
        return Ok(());
    }
    Err(Error::refused(
        format!(
            "the output {} is not in S3, and a job of several workers uploads its output to S3 \
             as multipart uploads' parts (gs:// and az:// are not shared yet)",
            crate::messages::path(url)
        ),
        "name an object as s3://BUCKET/KEY or a sharded set's prefix as s3://BUCKET/PREFIX/ \
         (an S3-compatible store through AWS_ENDPOINT_URL), or run the join in one process",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_is_i_of_n_counted_from_0() {
        assert_eq!(parse_worker("3/4"), Ok((3, 4)));
        assert!(parse_worker("4/4").unwrap_err().contains("from 0 to 3"));
        assert!(parse_worker("0/0").unwrap_err().contains("from 1"));
        assert!(parse_worker("1").is_err());
    }
}
