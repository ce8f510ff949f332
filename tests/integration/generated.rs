//! The man page and completion scripts are generated from the clap definition and checked
//! in; this fails when they are stale. `TJOIN_REGENERATE=1 cargo test generated` rewrites them.

use std::fs;
use std::path::Path;

use clap::ValueEnum;
use tjoin::generate::Kind;

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
