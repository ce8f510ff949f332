//! docs/design.md's "Adding things" checklists, held against the tree: every subcommand has
//! its clap variant, its arm in `Command::from_cli`, its flow and its test file; every
//! `config::Command` is dispatched by `crate::run` to a flow; every registered format has its
//! module, a reader, a fuzz target, fixtures and tests; every output kind is its own file and
//! its registration in the table of kinds, and no other file names it. And CI's own list:
//! README.md starts with the two commands CI runs, and every stage file of `.ci/` is run and
//! described. The source is read as text, as `docs.rs` reads
//! it, and each failure says what to add.

use std::fs;
use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The text of `file`, relative to the repository's root.
fn read(file: &str) -> String {
    fs::read_to_string(Path::new(ROOT).join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// `line` without its comment and without what its string literals hold, so that braces in
/// doc comments (`-o 'tp{rank}/'`) and attributes' strings do not count.
fn code_of(line: &str) -> String {
    let mut code = String::new();
    let mut in_string = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if in_string => {
                chars.next();
            }
            '"' => in_string = !in_string,
            '/' if !in_string && chars.peek() == Some(&'/') => break,
            _ if !in_string => code.push(c),
            _ => {}
        }
    }
    code
}

/// The variants of the enum that `declaration` (`pub enum Command`) opens in `text`, in order.
fn variants(text: &str, declaration: &str) -> Vec<String> {
    let start = text
        .find(declaration)
        .unwrap_or_else(|| panic!("no `{declaration}`"));
    let mut depth = 0usize;
    let mut found = Vec::new();
    for line in text[start..].lines() {
        let code = code_of(line);
        let word: String = code
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if depth == 1 && word.starts_with(|c: char| c.is_ascii_uppercase()) {
            found.push(word);
        }
        for c in code.chars() {
            match c {
                '{' | '(' => depth += 1,
                '}' | ')' => depth -= 1,
                _ => {}
            }
        }
        if depth == 0 && code.contains('}') {
            break;
        }
    }
    found
}

/// The modules `mod.rs` text declares (`pub mod join;`, `pub(crate) mod append;`).
fn modules(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let code = code_of(line);
            let rest = code.trim().split("mod ").nth(1)?;
            rest.strip_suffix(';').map(str::to_string)
        })
        .filter(|module| module != "tests")
        .collect()
}

/// `CamelCase` as a file's name: `camel_case`.
fn snake(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// Whether `folder/name.rs` or `folder/name/mod.rs` exists.
fn module_file(folder: &str, name: &str) -> Option<String> {
    [
        format!("{folder}/{name}.rs"),
        format!("{folder}/{name}/mod.rs"),
    ]
    .into_iter()
    .find(|file| Path::new(ROOT).join(file).is_file())
}

#[test]
fn every_subcommand_has_its_arm_its_flow_and_its_tests() {
    let subcommands = variants(&read("src/cli/mod.rs"), "pub enum Subcommand");
    assert!(
        subcommands.len() >= 2,
        "cli::Subcommand has {subcommands:?}"
    );
    let from_cli = read("src/cli/config.rs");
    let flows = modules(&read("src/flow/mod.rs"));
    let dispatch = read("src/lib.rs");
    let tests = modules(&read("tests/integration/main.rs"));
    let readme = read("README.md");
    let mut missing = Vec::new();
    for variant in &subcommands {
        let name = snake(variant);
        let mut lacks = |what: String| missing.push(format!("`tjoin {name}` lacks {what}"));
        if !from_cli.contains(&format!("Subcommand::{variant}(")) {
            lacks("its arm in Command::from_cli (src/cli/config.rs)".into());
        }
        if module_file("src/flow", &name).is_none() || !flows.contains(&name) {
            lacks(format!(
                "its flow, src/flow/{name}.rs declared in src/flow/mod.rs"
            ));
        }
        if !dispatch.contains(&format!("{name}::run(")) {
            lacks(format!(
                "the arm of crate::run (src/lib.rs) that calls {name}::run"
            ));
        }
        if module_file("tests/integration", &name).is_none() || !tests.contains(&name) {
            lacks(format!(
                "its tests, tests/integration/{name}.rs declared in tests/integration/main.rs"
            ));
        }
        if !readme.contains(&format!("tjoin {name}")) {
            lacks(format!("a word in README.md (`tjoin {name}`)"));
        }
    }
    assert!(
        missing.is_empty(),
        "docs/design.md, \"Adding things\", a subcommand:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_command_is_dispatched_to_a_flow_and_every_flow_is_reached() {
    let commands = variants(&read("src/config.rs"), "pub enum Command");
    assert!(commands.len() >= 4, "config::Command has {commands:?}");
    let flows = modules(&read("src/flow/mod.rs"));
    let lib = read("src/lib.rs");
    let run = lib
        .split("pub fn run(")
        .nth(1)
        .expect("src/lib.rs has crate::run");
    let mut wrong = Vec::new();
    let mut reached = Vec::new();
    for command in &commands {
        let arm = run
            .lines()
            .find(|line| line.contains(&format!("Command::{command}(")));
        // `Command::Join(config) => join::run(&config),`: the flow is the module it calls.
        let flow = arm
            .and_then(|line| line.split("=>").nth(1))
            .map(|call| call.trim().trim_start_matches("flow::"))
            .and_then(|call| call.split("::").next())
            .filter(|module| flows.iter().any(|flow| flow == module));
        match flow {
            Some(flow) => reached.push(flow.to_string()),
            None => wrong.push(format!(
                "Command::{command} has no arm in crate::run (src/lib.rs) that calls a flow of \
                 src/flow/mod.rs ({flows:?})"
            )),
        }
    }
    for flow in &flows {
        if !reached.contains(flow) {
            wrong.push(format!(
                "src/flow/{flow}.rs is no command's flow: crate::run never calls it"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The block of the `Descriptor` a format's module declares (`pub const FORMAT: Descriptor`).
fn descriptor(text: &str) -> Option<&str> {
    let start = text.find("FORMAT: Descriptor = Descriptor {")?;
    let end = text[start..].find("\n};")?;
    Some(&text[start..start + end])
}

/// The extensions a `Descriptor` block lists (`extensions: &[".pt", ".pth", ".bin"]`).
fn extensions(block: &str) -> Vec<String> {
    let line = block
        .lines()
        .find(|line| line.trim_start().starts_with("extensions:"))
        .unwrap_or("");
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Every file under `dir` (relative to the root), recursively.
fn files_under(dir: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![Path::new(ROOT).join(dir)];
    while let Some(folder) = pending.pop() {
        for entry in fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(ROOT).unwrap();
                found.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    found
}

/// What a registered format is missing of its checklist, each as a sentence.
fn format_lacks(
    module: &str,
    fuzz_manifest: &str,
    fixtures: &[String],
    fixtures_readme: &str,
) -> Vec<String> {
    let mut lacks = Vec::new();
    let Some(file) = module_file("src/format", module) else {
        return vec![format!("its module, src/format/{module}.rs")];
    };
    let text = read(&file);
    let Some(block) = descriptor(&text) else {
        return vec![format!("`pub const FORMAT: Descriptor` in {file}")];
    };
    // A reader of its own files, or of its members when they are a ZIP archive's.
    let reads = block.lines().any(|line| {
        let line = line.trim_start();
        (line.starts_with("reader:") || line.starts_with("archive:")) && !line.contains("None")
    });
    if !reads {
        lacks.push(format!(
            "a reader (`reader` or `archive`) in {file}'s Descriptor"
        ));
    }
    // Its fuzz target: fuzz/fuzz_targets/MODULE_*.rs, a [[bin]] of fuzz/, calling the module.
    let calls = format!("format::{module}");
    let fuzzed = files_under("fuzz/fuzz_targets").iter().any(|target| {
        let name = target
            .trim_start_matches("fuzz/fuzz_targets/")
            .trim_end_matches(".rs");
        name.starts_with(&format!("{module}_"))
            && fuzz_manifest.contains(&format!("name = \"{name}\""))
            && read(target).contains(&calls)
    });
    if !fuzzed {
        lacks.push(format!(
            "a fuzz target, fuzz/fuzz_targets/{module}_*.rs calling tjoin::{calls}, listed in \
             fuzz/Cargo.toml"
        ));
    }
    let extensions = extensions(block);
    assert!(!extensions.is_empty(), "{file}: no extensions");
    let has = |extension: &String| fixtures.iter().any(|f| f.ends_with(extension.as_str()));
    if !extensions.iter().any(has) {
        lacks.push(format!("a fixture (a {extensions:?} file under fixtures/)"));
    }
    if !extensions
        .iter()
        .any(|e| fixtures_readme.contains(e.as_str()))
    {
        lacks.push(format!(
            "a word in fixtures/README.md on its {extensions:?} files"
        ));
    }
    let tested = files_under("tests/integration").iter().any(|test| {
        let text = read(test);
        extensions.iter().any(|e| text.contains(e.as_str()))
    });
    if !tested {
        lacks.push(format!(
            "a test in tests/integration/ of its {extensions:?} files"
        ));
    }
    lacks
}

#[test]
fn every_format_has_its_reader_its_fuzz_target_and_its_fixtures() {
    let registry = read("src/format/mod.rs");
    let table = registry
        .split("pub const REGISTERED")
        .nth(1)
        .and_then(|rest| rest.split("];").next())
        .expect("src/format/mod.rs has REGISTERED");
    let registered: Vec<&str> = table
        .split('&')
        .filter_map(|entry| entry.trim().strip_suffix("::FORMAT,"))
        .collect();
    assert!(registered.len() >= 6, "REGISTERED holds {registered:?}");
    let fuzz_manifest = read("fuzz/Cargo.toml");
    let fixtures = files_under("fixtures");
    let fixtures_readme = read("fixtures/README.md");
    let mut missing = Vec::new();
    for module in &registered {
        for lack in format_lacks(module, &fuzz_manifest, &fixtures, &fixtures_readme) {
            missing.push(format!("the format `{module}` lacks {lack}"));
        }
    }
    assert!(
        missing.is_empty(),
        "docs/design.md, \"Adding things\", a format:\n{}",
        missing.join("\n")
    );
}

/// The modules of the kinds `KINDS` registers in `text` (`src/output/kind/mod.rs`), in
/// order: `NAME` of each entry `NAME::claim`; `None` for an entry of another form (a claim
/// from elsewhere, `super::x::claim`, is not a kind's file).
fn registered_kinds(text: &str) -> Vec<Option<String>> {
    let table = text
        .split("pub const KINDS: &[Claim] = &[")
        .nth(1)
        .and_then(|rest| rest.split("];").next())
        .expect("src/output/kind/mod.rs has `pub const KINDS: &[Claim]`");
    let plain = |module: &&str| {
        module
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    table
        .split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            let module = entry.strip_suffix("::claim").filter(plain);
            module.map(str::to_string)
        })
        .collect()
}

/// `text` without its unit tests (what follows `#[cfg(test)]`): they build kinds by hand.
fn without_tests(text: &str) -> &str {
    text.split("#[cfg(test)]").next().unwrap_or(text)
}

/// What a new output kind touches, held to two files: its own, `src/output/kind/NAME.rs`,
/// and `src/output/kind/mod.rs`, which declares it, registers its claim in `KINDS` and its
/// variant in `OutputKind`. So every variant but `None` (no output, the table's fallback) is
/// a registered module with its file, every kind module is registered, and no other source
/// file names a variant or a kind's module: the config stage says what was asked
/// (`output::kind::Asked`) and `OutputKind::choose` asks the table.
#[test]
fn every_output_kind_is_its_own_file_and_its_registration() {
    let table = read("src/output/kind/mod.rs");
    let kinds = variants(&table, "pub enum OutputKind");
    assert!(kinds.len() >= 3, "OutputKind has {kinds:?}");
    let registered = registered_kinds(&table);
    let declared = modules(&table);
    let mut wrong = Vec::new();
    for entry in &registered {
        match entry {
            Some(module) if module_file("src/output/kind", module).is_some() => {}
            _ => wrong.push(format!(
                "KINDS registers {entry:?}: each entry is NAME::claim, NAME a module of \
                 src/output/kind/ in its own file, src/output/kind/NAME.rs"
            )),
        }
    }
    let registered: Vec<&String> = registered.iter().flatten().collect();
    for module in &declared {
        if !registered.contains(&module) {
            wrong.push(format!(
                "src/output/kind/{module}.rs is declared but not registered in KINDS"
            ));
        }
    }
    for kind in kinds.iter().filter(|kind| *kind != "None") {
        if !registered.contains(&&snake(kind)) {
            wrong.push(format!(
                "OutputKind::{kind} has no file of its own registered in KINDS \
                 (src/output/kind/{}.rs, `{}::claim`)",
                snake(kind),
                snake(kind)
            ));
        }
    }
    let names: Vec<String> = kinds
        .iter()
        .map(|kind| format!("OutputKind::{kind}"))
        .chain(registered.iter().map(|module| format!("kind::{module}")))
        .collect();
    for file in files_under("src") {
        if file.starts_with("src/output/kind/") || !file.ends_with(".rs") {
            continue;
        }
        let text = read(&file);
        let code = without_tests(&text);
        for name in names.iter().filter(|name| code.contains(name.as_str())) {
            wrong.push(format!(
                "{file} names {name}: a third file a kind touches (the config stage says what \
                 was asked, output::kind::Asked, and OutputKind::choose asks KINDS)"
            ));
        }
    }
    assert!(
        read("src/config.rs").matches("OutputKind::choose(").count() >= 2,
        "the join's and the split's targets (src/config.rs) choose their kind by the table"
    );
    assert!(
        wrong.is_empty(),
        "docs/design.md, \"Adding things\", an output kind:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_readme_starts_with_the_two_commands_ci_runs() {
    let readme = read("README.md");
    let first = readme
        .split("```")
        .nth(1)
        .expect("README.md has a code block");
    let commands: Vec<&str> = first.lines().skip(1).filter(|l| !l.is_empty()).collect();
    assert!(
        readme.starts_with("# tjoin\n\n```sh\n") && commands.len() == 2,
        "README.md must start with exactly two commands: {commands:?}"
    );
    assert!(commands[0].starts_with("cargo run "), "{}", commands[0]);
    assert!(
        commands[1] == "cargo test" || commands[1].starts_with("cargo test "),
        "README.md's second command runs the tests: {}",
        commands[1]
    );
    // CI runs that very line itself (`stage_test` in .ci/run, `readme_test_command` in
    // .ci/lib.sh), as `cargo test` with README's arguments.
    let run = read(".ci/run");
    assert!(run.contains("command=$(readme_test_command)") && run.contains("    cargo test "));
    assert!(read(".ci/lib.sh").contains("readme_test_command()"));
}

#[test]
fn every_ci_stage_file_is_run_and_described() {
    let run = read(".ci/run");
    let table = read(".ci/README.md");
    let listed: Vec<String> = run
        .lines()
        .filter(|line| line.starts_with("BEFORE_WINE=(") || line.starts_with("WITH_WINE=("))
        .flat_map(|line| {
            let inside = line.split(['(', ')']).nth(1).unwrap_or("");
            inside
                .split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .chain(
            run.lines()
                .filter_map(|line| line.strip_prefix("WINE="))
                .map(str::to_string),
        )
        .collect();
    let mut wrong = Vec::new();
    for file in files_under(".ci") {
        let Some(stage) = file
            .strip_prefix(".ci/")
            .and_then(|f| f.strip_suffix(".sh"))
        else {
            continue;
        };
        // lib.sh is sourced by every stage, a subfolder's files by one (.ci/wine/setup.sh).
        if stage == "lib" || stage.contains('/') {
            continue;
        }
        if !listed.iter().any(|s| s == stage) {
            wrong.push(format!("{file} is not a stage .ci/run runs"));
        }
        if !table.contains(&format!("| {stage} | `{stage}.sh` |")) {
            wrong.push(format!("{file} has no row in .ci/README.md's table"));
        }
        if !read(&file).contains("lib.sh") && stage != "directml-wine" {
            wrong.push(format!("{file} does not start from .ci/lib.sh"));
        }
    }
    for stage in &listed {
        let inline = run.contains(&format!("\nstage_{stage}() {{"));
        if inline && !table.contains(&format!("| {stage} | `.ci/run` (`stage_{stage}`) |")) {
            wrong.push(format!(
                ".ci/run's stage {stage} has no row in .ci/README.md's table"
            ));
        }
        if !inline && !Path::new(ROOT).join(format!(".ci/{stage}.sh")).is_file() {
            wrong.push(format!(
                ".ci/run runs {stage}, which has no .ci/{stage}.sh nor stage_{stage}"
            ));
        }
    }
    assert!(listed.len() >= 10, ".ci/run runs {listed:?}");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_checks_above_read_the_source_as_written() {
    let text = "pub enum Kind {\n    /// A `{brace}` in a comment.\n    One(&'c Path),\n    \
                #[arg(help = \"}\")]\n    Two {\n        path: u8,\n    },\n    Three,\n}\n\
                const AFTER: u8 = 0;";
    assert_eq!(variants(text, "pub enum Kind"), ["One", "Two", "Three"]);
    assert_eq!(
        modules("pub mod join;\npub(crate) mod append;\n// mod old;\nmod rules;\nmod tests;"),
        ["join", "append", "rules"]
    );
    assert_eq!(snake("DcpDefault"), "dcp_default");
    let block = "FORMAT: Descriptor = Descriptor {\n    extensions: &[\".pt\", \".bin\"],\n";
    assert_eq!(extensions(block), [".pt", ".bin"]);
    let table = "pub const KINDS: &[Claim] = &[sharded::claim, super::x::claim,\n    file::claim];";
    let registered = [Some("sharded".to_string()), None, Some("file".to_string())];
    assert_eq!(registered_kinds(table), registered);
    assert_eq!(without_tests("a\n#[cfg(test)]\nmod tests {}"), "a\n");
}
