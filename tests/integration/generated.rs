//! The man page and completion scripts are generated from the clap definition and checked
//! in; this fails when they are stale. `TJOIN_REGENERATE=1 cargo test generated` rewrites them.

use std::fs;
use std::path::Path;

use clap::ValueEnum;
use tjoin::cli::generate::Kind;

use crate::util::tjoin;

#[test]
fn checked_in_man_page_and_completions_are_current() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let regenerate = std::env::var_os("TJOIN_REGENERATE").is_some();
    let mut stale = Vec::new();
    for kind in Kind::value_variants() {
        let name = kind.to_possible_value().unwrap().get_name().to_string();
        let output = tjoin().args(["--generate", &name]).output().unwrap();
        assert!(output.status.success(), "--generate {name} failed");
        let path = root.join(kind.path());
        if regenerate {
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, &output.stdout).unwrap();
        } else if fs::read(&path).ok().as_deref() != Some(&output.stdout[..]) {
            stale.push(kind.path());
        }
    }
    assert!(
        stale.is_empty(),
        "stale generated files {stale:?}: run `TJOIN_REGENERATE=1 cargo test generated` and commit"
    );
}

#[test]
fn the_man_page_documents_exit_status_and_examples() {
    let output = tjoin().args(["--generate", "man"]).output().unwrap();
    assert!(output.status.success(), "--generate man failed");
    let page = String::from_utf8(output.stdout).unwrap();
    for section in [
        ".SH NAME",
        ".SH SYNOPSIS",
        ".SH DESCRIPTION",
        ".SH OPTIONS",
        ".SH \"EXIT STATUS\"",
        ".SH EXAMPLES",
    ] {
        assert!(page.contains(section), "the man page lacks {section}");
    }
    assert!(page.contains("\\-\\-spec"), "the man page lacks --spec");
}

/// The DRY RUN section of the man page lists exactly the fields `--dry-run=json`
/// prints, and names every field of the objects nested in them.
#[test]
fn the_man_page_lists_the_fields_of_the_json_plan() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/npy/dml_ex1_axis3");
    let plan = tjoin()
        .args(["--dry-run=json", "-a", "3"])
        .args([root.join("in0.npy"), root.join("in1.npy")])
        .args(["-o", "out.npy"])
        .output()
        .unwrap();
    assert!(plan.status.success(), "the dry run failed");
    let plan: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    let page = tjoin().args(["--generate", "man"]).output().unwrap();
    let page = String::from_utf8(page.stdout).unwrap();
    let section = page
        .split(".SH \"DRY RUN\"")
        .nth(1)
        .and_then(|rest| rest.split("\n.SH ").next())
        .expect("the man page has a DRY RUN section");
    // Each field is a `.TP` entry: the name in bold on its own line, then its meaning.
    let documented: std::collections::BTreeMap<String, String> = section
        .split(".TP\n")
        .skip(1)
        .filter_map(|entry| {
            let (name, meaning) = entry.split_once('\n')?;
            let name = name.trim_start_matches("\\fB").trim_end_matches("\\fR");
            Some((name.replace("\\_", "_"), meaning.replace("\\_", "_")))
        })
        .collect();
    let printed = plan.as_object().unwrap();
    let names = |keys: Vec<&String>| keys.into_iter().cloned().collect::<Vec<String>>();
    assert_eq!(
        names(printed.keys().collect()),
        names(documented.keys().collect()),
        "the fields the plan prints and the fields the man page lists differ"
    );
    for (field, value) in printed {
        let nested = match value {
            serde_json::Value::Array(items) => items.first().and_then(|v| v.as_object()),
            serde_json::Value::Object(object) => Some(object),
            _ => None,
        };
        for key in nested.into_iter().flat_map(|object| object.keys()) {
            assert!(
                documented[field].contains(key.as_str()),
                "the man page's entry for `{field}` does not mention its field `{key}`"
            );
        }
    }
}

/// What the checked-in bash script offers after `words` (the last one being completed), as
/// when Tab is pressed after them ([`bash_completes_line`]).
#[cfg(unix)]
fn bash_completions(words: &[&str]) -> Vec<String> {
    bash_completes_line(&words.join(" "))
}

#[cfg(unix)]
#[test]
fn bash_offers_values_for_flags_files_for_inputs_and_no_hidden_flag() {
    let offers = |words: &[&str]| bash_completions(words);
    let spec = offers(&["tjoin", "--spec", ""]);
    assert!(spec.contains(&"onnx-13".into()) && spec.contains(&"directml:3.0".into()));
    assert_eq!(
        offers(&["tjoin", "--cast", "float"]),
        ["float16", "float32", "float64"]
    );
    assert_eq!(
        offers(&["tjoin", "--format", ""]),
        ["npy", "json", "npz", "safetensors"]
    );
    assert_eq!(offers(&["tjoin", "--input-format", "s"]), ["safetensors"]);
    assert_eq!(
        offers(&["tjoin", "--backend", ""]),
        ["cpu", "directml", "auto"]
    );
    assert_eq!(offers(&["tjoin", "--json-form", ""]), ["nested", "object"]);
    assert_eq!(
        offers(&["tjoin", "--progress", ""]),
        ["auto", "always", "never"]
    );
    // After a flag's value comes an input: nothing offered, so bash completes file names.
    assert!(offers(&["tjoin", "-a", "0", ""]).is_empty());
    assert!(offers(&["tjoin", "-a", "0", "a.npy", ""]).is_empty());
    assert_eq!(offers(&["tjoin", "--sp"]), ["--spec"]);
    assert!(
        offers(&["tjoin", "--gen"]).is_empty(),
        "the hidden --generate"
    );
}

/// Whether bash runs here; when it does not, says so, for a test to skip.
#[cfg(unix)]
fn bash_runs(test: &str) -> bool {
    let runs = std::process::Command::new("bash")
        .args(["-c", "true"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !runs {
        crate::util::cannot_run(&format!(
            "{test}: bash is not installed, so its completion cannot be tried"
        ));
    }
    runs
}

/// What the checked-in bash script offers when Tab is pressed at the end of `line`, called
/// as bash calls it: bash splits the line's words at blanks and at `:` (in its default
/// `COMP_WORDBREAKS`), so `tjoin --spec directml:3` gives `COMP_WORDS` `tjoin`, `--spec`,
/// `directml`, `:`, `3`, the word completed (`$2`) is `3`, the text after the last `:`, and
/// the one before (`$3`) is `:` (as bash 5 does, seen through a terminal).
#[cfg(unix)]
fn bash_completes_line(line: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for word in line.split([' ', '\t']).filter(|w| !w.is_empty()) {
        let mut piece = String::new();
        for c in word.chars() {
            if c == ':' {
                words.extend((!piece.is_empty()).then(|| std::mem::take(&mut piece)));
                words.push(":".into());
            } else {
                piece.push(c);
            }
        }
        words.extend((!piece.is_empty()).then_some(piece));
    }
    if line.ends_with([' ', '\t']) {
        words.push(String::new());
    }
    let completed = line.rsplit([' ', '\t', ':']).next().unwrap_or_default();
    let before = &words[words.len() - 2];
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(Kind::Bash.path());
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source '{}'; COMP_WORDS=({}); COMP_CWORD={}; COMP_LINE='{line}'; COMP_POINT={}; \
         _tjoin tjoin '{completed}' '{before}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        quoted.join(" "),
        words.len() - 1,
        line.len(),
    );
    let output = std::process::Command::new("bash")
        .args(["-c", &program])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let offered = String::from_utf8(output.stdout).unwrap();
    offered
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// Issue 27, item 16: bash split `directml:` at the `:`, and listed files.
#[cfg(unix)]
#[test]
fn bash_completes_spec_values_that_hold_a_colon() {
    if !bash_runs("bash_completes_spec_values_that_hold_a_colon") {
        return;
    }
    // bash keeps the text up to the last `:`; the candidates are what follows it.
    assert_eq!(
        bash_completes_line("tjoin --spec directml:"),
        ["4.1", "3.0", "2.1", "1.0"]
    );
    assert_eq!(bash_completes_line("tjoin --spec directml:3"), ["3.0"]);
    assert_eq!(bash_completes_line("tjoin -a 0 --spec directml:1"), ["1.0"]);
    // Words without a `:` complete as before.
    assert_eq!(
        bash_completes_line("tjoin --spec dir"),
        [
            "directml",
            "directml:4.1",
            "directml:3.0",
            "directml:2.1",
            "directml:1.0"
        ]
    );
    assert_eq!(bash_completes_line("tjoin --cast float1"), ["float16"]);
    assert!(bash_completes_line("tjoin -a 0 a.npy ").is_empty());
}

#[test]
fn zsh_offers_values_for_flags_and_files_for_inputs() {
    let script =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(Kind::Zsh.path())).unwrap();
    for needle in [
        ":PROFILE:(onnx directml onnx-13",
        ":FORMAT:(npy json npz safetensors)",
        ":DTYPE:(bool int8",
        "*::inputs -- The tensors to join",
        "standard input:_files' \\",
        ":OUTPUT:_files",
        ":FILE:_files",
    ] {
        assert!(script.contains(needle), "the zsh script lacks {needle:?}");
    }
    assert!(
        !script.contains("--generate"),
        "the zsh script offers a hidden flag"
    );
}
