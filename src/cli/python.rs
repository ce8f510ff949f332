//! The table of long flags that the Python module (`python/tjoin/`) takes as keyword
//! arguments, generated from the clap definition by `tjoin --generate python` and checked in
//! as `python/tjoin/_flags.py`: a keyword the table lacks is refused by Python's `TypeError`
//! before tjoin runs, and a flag added here reaches Python when the file is regenerated (a
//! test fails while it is stale).

use std::io::{self, Write};

use clap::{ArgAction, CommandFactory};

use super::Cli;

/// How a keyword argument becomes the flag's words.
fn kind(arg: &clap::Arg) -> Option<&'static str> {
    let optional = arg.get_num_args().is_some_and(|n| n.min_values() == 0);
    match arg.get_action() {
        ArgAction::SetTrue => Some("bare"),
        ArgAction::Append => Some("repeat"),
        ArgAction::Set if optional => Some("optional"),
        ArgAction::Set => Some("value"),
        // --help, --version: nothing for a function to ask for.
        _ => None,
    }
}

/// `NAME = {keyword: (flag, kind), ...}` for the long flags of `command` that are not hidden,
/// in the order of their keywords.
fn table(name: &str, command: &clap::Command) -> String {
    let mut rows: Vec<(String, String, &str)> = command
        .get_arguments()
        .filter(|arg| !arg.is_hide_set())
        .filter_map(|arg| {
            let long = arg.get_long()?;
            Some((long.replace('-', "_"), format!("--{long}"), kind(arg)?))
        })
        .collect();
    rows.sort();
    let mut text = format!("{name} = {{\n");
    for (keyword, flag, kind) in rows {
        text.push_str(&format!("    \"{keyword}\": (\"{flag}\", \"{kind}\"),\n"));
    }
    text.push_str("}\n");
    text
}

/// Writes `python/tjoin/_flags.py`: the version, and the join's and the split's flags.
pub fn flags(out: &mut dyn Write) -> io::Result<()> {
    let command = Cli::command();
    let split = command
        .find_subcommand("split")
        .expect("the split subcommand");
    write!(
        out,
        "\"\"\"tjoin's long flags, as tjoin.join, tjoin.split and tjoin.plan take them.

Generated from tjoin's clap definition (src/cli/) by `tjoin --generate python`; do not edit.
A test fails when it is stale, and `TJOIN_REGENERATE=1 cargo test generated` rewrites it.
Each table maps a keyword argument to (the flag, its kind): \"bare\" takes True (the flag) or
False (nothing), \"value\" one value (--flag=VALUE), \"repeat\" a list (--flag=ITEM for each),
\"optional\" a value or True (--flag alone).
\"\"\"

# tjoin --version's number.
VERSION = \"{version}\"

# tjoin [FLAGS] INPUT...
{join}
# tjoin split [FLAGS] INPUT
{split}",
        version = env!("CARGO_PKG_VERSION"),
        join = table("JOIN", &command),
        split = table("SPLIT", split),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind of flag the join has comes out as its kind: a bare flag, a value, a
    /// repeatable one and one whose value is optional; --help and the hidden --generate not.
    #[test]
    fn each_kind_of_flag_is_told() {
        let mut out = Vec::new();
        flags(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        for row in [
            "\"no_clobber\": (\"--no-clobber\", \"bare\")",
            "\"cast\": (\"--cast\", \"value\")",
            "\"keep\": (\"--keep\", \"repeat\")",
            "\"dry_run\": (\"--dry-run\", \"optional\")",
            "\"axis_for\": (\"--axis-for\", \"repeat\")",
            "\"parts\": (\"--parts\", \"value\")",
        ] {
            assert!(text.contains(row), "{row} in\n{text}");
        }
        for absent in ["\"help\"", "\"generate\"", "\"version\""] {
            assert!(!text.contains(absent), "{absent} in\n{text}");
        }
    }
}
