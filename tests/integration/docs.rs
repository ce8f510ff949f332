//! The documents say what the code is: README.md's layout names every source file, and every
//! path into the repository that README.md and docs/ name exists. And the files stay a size a
//! reader can hold: none over 900 lines. And the stages stay in their order: no import runs
//! up or across them.

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

/// The most lines a source file under src/ or tests/ may have, tests included: past it a file
/// holds more than one concern, and long tests move to a `tests.rs` beside their module.
const MOST_LINES: usize = 900;

/// Generated, not written: its length is the generator's.
const GENERATED: &[&str] = &["src/backend/directml/bindings.rs"];

#[test]
fn no_source_file_is_over_900_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut over = Vec::new();
    for file in [files_under(root, "src"), files_under(root, "tests")].concat() {
        if file.ends_with(".rs") && !GENERATED.contains(&file.as_str()) {
            let lines = fs::read_to_string(root.join(&file))
                .unwrap()
                .lines()
                .count();
            if lines > MOST_LINES {
                over.push(format!("{file} ({lines} lines)"));
            }
        }
    }
    assert!(
        over.is_empty(),
        "over {MOST_LINES} lines: {over:?}; split them by concern, or move long tests into a \
         tests.rs beside the module (`#[cfg(test)] mod tests;`)"
    );
}

/// Files are named for what they do, in one module style and one test-file convention: no
/// base name but `mod.rs` and `tests.rs` is used by more than two files under src/ (nine
/// `split.rs` once said nothing of what each held); a module with files of its own is a
/// folder with `mod.rs`, never `NAME.rs` beside `NAME/`; and a module's unit tests that have a
/// file are its folder's `tests.rs` (or `tests/mod.rs`), never `NAME_tests.rs` or `#[path]`.
#[test]
fn source_files_are_named_by_role_in_one_style() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files: Vec<String> = files_under(root, "src")
        .into_iter()
        .filter(|f| f.ends_with(".rs"))
        .collect();
    let mut by_name: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for file in &files {
        let name = file.rsplit('/').next().unwrap();
        by_name.entry(name).or_default().push(file);
    }
    let crowded: Vec<_> = by_name
        .iter()
        .filter(|(name, files)| !["mod.rs", "tests.rs"].contains(name) && files.len() > 2)
        .collect();
    assert!(
        crowded.is_empty(),
        "base names used by more than two files: {crowded:?}; name each file for what it does"
    );
    let beside: Vec<&String> = files
        .iter()
        .filter(|f| root.join(f.trim_end_matches(".rs")).is_dir())
        .collect();
    assert!(
        beside.is_empty(),
        "modules written as NAME.rs beside their folder NAME/: {beside:?}; move each to NAME/mod.rs"
    );
    let tests: Vec<&String> = files
        .iter()
        .filter(|f| {
            f.ends_with("_tests.rs")
                || fs::read_to_string(root.join(f))
                    .unwrap()
                    .lines()
                    .any(|line| line.trim_start().starts_with("#[path"))
        })
        .collect();
    assert!(
        tests.is_empty(),
        "unit tests named or placed another way: {tests:?}; a module's tests with a file of \
         their own are its folder's tests.rs (`#[cfg(test)] mod tests;` in its mod.rs)"
    );
}

/// The folders of the repository whose paths the documents name.
const TREE: [&str; 11] = [
    "src/",
    "tests/",
    "tools/",
    "examples/",
    "benches/",
    "fuzz/",
    "fixtures/",
    "docs/",
    "man/",
    "completions/",
    ".ci/",
];

/// Every path into the repository's folders (`src/spec/mod.rs`, `src/format/`) that `text`
/// names, without a sentence's closing punctuation. A path that continues another
/// (`/usr/share/man/man1/tjoin.1`) is the reader's, not the repository's.
fn paths_named(text: &str) -> Vec<String> {
    let part = |c: char| c.is_ascii_alphanumeric() || "_./-".contains(c);
    let mut found = Vec::new();
    for (at, _) in text.char_indices() {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| part(c) || c == '~') {
            continue;
        }
        let rest = &text[at..];
        if !TREE.iter().any(|folder| rest.starts_with(folder)) {
            continue;
        }
        let end = rest.find(|c: char| !part(c)).unwrap_or(rest.len());
        // A glob (`src/format/*.rs`) names its folder.
        let path = if rest[end..].starts_with('*') {
            &rest[..=rest[..end].rfind('/').unwrap_or(0)]
        } else {
            rest[..end].trim_end_matches(['.', ','])
        };
        found.push(path.to_string());
    }
    found
}

#[test]
fn every_path_the_documents_name_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut documents = vec![root.join("README.md")];
    documents.extend(files_under(root, "docs").iter().map(|file| root.join(file)));
    let mut checked = 0;
    let mut missing = Vec::new();
    for document in &documents {
        let text = fs::read_to_string(document).unwrap();
        for path in paths_named(&text) {
            checked += 1;
            if !root.join(&path).exists() {
                let name = document.strip_prefix(root).unwrap().display().to_string();
                missing.push(format!("{name}: {path}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "the documents name paths that do not exist: {missing:#?}"
    );
    // The scan finds what it should: README's layout alone names over 40 files.
    assert!(checked > 40, "only {checked} paths found");
}

#[test]
fn paths_are_read_as_a_reader_would() {
    let text = "See `src/spec/mod.rs`, then src/format/. Globs: src/format/*.rs; \
                install man/tjoin.1 /usr/share/man/man1/tjoin.1 ~/.config/fish/completions/x \
                (tests/integration/docs.rs) and xsrc/not.rs.";
    assert_eq!(
        paths_named(text),
        [
            "src/spec/mod.rs",
            "src/format/",
            "src/format/",
            "man/tjoin.1",
            "tests/integration/docs.rs",
        ]
    );
}

/// The stage of a module under `src/`, by its first path component, from the ground up, as
/// docs/design.md draws them ("Stages, and what each one's config holds"). Stages of one
/// rank do not import each other.
fn stage(module: &str) -> Option<(u8, &str)> {
    let rank = match module {
        "dtype" | "messages" | "outliers" => 1,
        "location" => 2,
        "error" => 3,
        "sys" => 4,
        "limits" => 5,
        "format" => 6,
        "input" | "output" => 7,
        "plan" => 8,
        "engine" => 9,
        "backend" => 10,
        "report" => 11,
        "config" => 12,
        "cli" | "flow" => 13,
        "lib" | "run" => 14,
        "main" => 15,
        _ => return None,
    };
    Some((rank, module))
}

/// The modules `line` names as `crate::NAME` (and `crate::{a, b}`).
fn crate_modules(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in line.match_indices("crate::") {
        let rest = &line[at + "crate::".len()..];
        let names = match rest.strip_prefix('{') {
            Some(group) => group.split('}').next().unwrap_or("").to_string(),
            None => rest.to_string(),
        };
        for name in names.split(',') {
            let name: String = name
                .trim()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.push(name);
            }
        }
    }
    found
}

#[test]
fn no_stage_imports_a_stage_above_it_or_beside_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut wrong = Vec::new();
    for file in files_under(root, "src") {
        let name = file.trim_start_matches("src/");
        let top = name.split(['/', '.']).next().unwrap();
        let Some((rank, own)) = stage(top) else {
            wrong.push(format!("{file}: a stage docs/design.md does not place"));
            continue;
        };
        // Tests see every stage: unit-test files, and a module's tests below `#[cfg(test)]`.
        if name.ends_with("tests.rs") {
            continue;
        }
        let text = fs::read_to_string(root.join(&file)).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        for (number, line) in code.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for module in crate_modules(line) {
                let Some((theirs, other)) = stage(&module) else {
                    continue;
                };
                if theirs > rank || (theirs == rank && other != own) {
                    wrong.push(format!("{file}:{}: crate::{module}", number + 1));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that run up or across the stages (see docs/design.md):\n{}",
        wrong.join("\n")
    );
}

/// CI runs the integration suite against the tjoin a wheel installed (`TJOIN_TEST_BIN`, see
/// `util::bin`): a test that starts cargo's own build directly would test that one instead.
#[test]
fn every_test_runs_the_binary_under_test_through_util() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let direct: Vec<String> = files_under(root, "tests")
        .into_iter()
        .filter(|file| file.ends_with(".rs") && file != "tests/integration/util.rs")
        .filter(|file| {
            let text = fs::read_to_string(root.join(file)).unwrap();
            // Spelled in pieces, so that this file does not name them.
            text.contains(concat!("CARGO_BIN_", "EXE_tjoin"))
                || text.contains(concat!("cargo_", "bin!"))
        })
        .collect();
    assert!(
        direct.is_empty(),
        "tests that start cargo's tjoin instead of util::bin(): {direct:?}"
    );
}

/// README's "Installing" says what works today: tjoin is not on PyPI, so no command there
/// installs it from PyPI as if it were, and the command that does work (a wheel built with
/// maturin) is shown with the tag it gave, which the text explains.
#[test]
fn the_readme_installs_only_what_works() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = fs::read_to_string(root.join("README.md")).unwrap();
    let section = readme
        .split("\n## Installing\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("README.md has an Installing section");
    let commands: Vec<&str> = section
        .split("```")
        .skip(1)
        .step_by(2)
        .flat_map(str::lines)
        .collect();
    for command in &commands {
        for registry in [
            "pip install tjoin",
            "uv tool install tjoin",
            "pipx install tjoin",
        ] {
            assert!(
                !command.starts_with(registry),
                "README's Installing runs `{command}`, but tjoin is not on PyPI"
            );
        }
        assert!(!command.contains("--no-binary tjoin"), "{command}");
    }
    assert!(section.contains("tjoin is not on PyPI yet"), "{section}");
    assert!(
        commands
            .iter()
            .any(|c| c.starts_with("maturin build --release ")
                && c.contains("-manylinux_2_34_x86_64.whl")),
        "{section}"
    );
    assert!(section.contains("the tag `manylinux_2_34`"), "{section}");
}
