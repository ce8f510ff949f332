//! The documents say what the code is: README.md's layout names every source file.

use std::fs;
use std::path::{Path, PathBuf};

/// Every file under `dir`, relative to the repository's root.
fn files_under(root: &Path, dir: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![root.join(dir)];
    while let Some(folder) = pending.pop() {
        for entry in fs::read_dir(&folder).unwrap() {
            let path: PathBuf = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(root).unwrap();
                found.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    found.sort();
    found
}

#[test]
fn the_readme_layout_names_every_source_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = fs::read_to_string(root.join("README.md")).unwrap();
    let layout = readme
        .split("## Layout\n")
        .nth(1)
        .and_then(|rest| rest.split("```\n").nth(1))
        .expect("README.md has a Layout section with a code block");
    let listed: Vec<&str> = layout
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|word| word.starts_with("src/"))
        .collect();
    let unlisted: Vec<String> = files_under(root, "src")
        .into_iter()
        .filter(|file| {
            !listed
                .iter()
                .any(|entry| file == entry || (entry.ends_with('/') && file.starts_with(entry)))
        })
        .collect();
    assert!(
        unlisted.is_empty(),
        "README.md's layout leaves out {unlisted:?}"
    );
    let missing: Vec<&&str> = listed
        .iter()
        .filter(|entry| !root.join(entry).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "README.md's layout names files that do not exist: {missing:?}"
    );
}
