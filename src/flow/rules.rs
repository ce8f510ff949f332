//! `tjoin rules [FAMILY]`: print a model family's built-in rules file (`plan::families`),
//! the file `rules/FAMILY.rules` holds, or list the families.

use std::path::Path;

use crate::error::{Error, Result};
use crate::plan::families::{self, FAMILIES};

/// Prints the rules file of `family` on standard output, or, without one, the families'
/// names, one a line. An unknown name is refused with the names.
pub fn run(family: Option<&str>) -> Result<()> {
    let names: Vec<&str> = FAMILIES.iter().map(|f| f.name).collect();
    let text = match family {
        None => format!("{}\n", names.join("\n")),
        Some(name) => match families::by_name(name) {
            Some(family) => family.text.to_string(),
            None => {
                return Err(Error::refused(
                    format!(
                        "tjoin knows no model family named {}",
                        crate::messages::quote(name)
                    ),
                    format!("name one of {}", names.join(", ")),
                ));
            }
        },
    };
    crate::messages::print_exact(&text)
        .map_err(|e| Error::io("write", Path::new("standard output"), e))
}
