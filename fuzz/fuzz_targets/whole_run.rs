//! What the targets that go through a whole run share: a folder per process for their files,
//! and the run itself, through the same `join::run` a user's command line reaches.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use tjoin::config::{JoinConfig, JoinRules, OutputConfig};
use tjoin::format::Format;
use tjoin::config::When;

/// One folder per process, its files rewritten for each input.
pub fn folder() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("a temporary folder").keep())
}

/// Joins the inputs `named` (the `files` the target wrote, or a folder of them) by `rules`
/// into `out.EXTENSION` in [`folder`], in `format`, quietly; then removes the files and the
/// output. Any error is an answer: only a panic, a hang or an allocation past the limit is a
/// finding.
pub fn join(files: &[PathBuf], named: Vec<&Path>, rules: JoinRules, format: Format) {
    let output = folder().join(format!("out{}", format.extension()));
    let config = JoinConfig {
        inputs: named.into_iter().map(Into::into).collect(),
        rules,
        output: OutputConfig {
            path: Some(output.clone()),
            format: Some(format),
            ..Default::default()
        },
        progress: When::Never,
        ..Default::default()
    };
    let _ = tjoin::flow::join::run(&config);
    for path in files.iter().chain([&output]) {
        let _ = std::fs::remove_file(path);
    }
}
