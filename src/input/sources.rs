//! The sources tjoin reads, by the scheme a location's text starts with: the one table a
//! remote source registers in ([`SCHEMES`]), and [`list`], which asks the source that serves
//! a location (what is at one is asked through `input::objects::head`). Apart from the seam (`src/input/source.rs`), so that a source
//! implements the seam without the seam naming it.

use std::io;
use std::sync::{Mutex, OnceLock};

use super::source::{Entry, LocalFiles, Source};
use crate::location::Location;

/// What is directly inside `prefix`, asked of its source.
pub fn list(prefix: &Location) -> io::Result<Vec<Entry>> {
    source_of(prefix)?.list(prefix)
}

/// Opens the source of a scheme, once per run (a client, its credentials from the
/// environment).
pub type OpenSource = fn() -> io::Result<Box<dyn Source>>;

/// The sources of locations that are not local paths, by the scheme their text starts with
/// (`s3` for `s3://bucket/key`). A remote source registers here, and nowhere else. A scheme
/// not listed is a local path, as it always was (`odd://name` is a relative path).
pub const SCHEMES: &[(&str, OpenSource)] = &[
    ("s3", super::remote::open),
    ("gs", super::remote::open),
    ("az", super::remote::open),
    ("https", super::remote::open),
    ("http", super::remote::open),
];

/// A scheme's source, once opened.
type Opened = (&'static str, &'static dyn Source);

/// The source that serves `location`: the registered one for its scheme, opened the first
/// time it is asked for, or the local files.
pub fn source_of(location: &Location) -> io::Result<&'static dyn Source> {
    let Some(scheme) = location.scheme() else {
        return Ok(&LocalFiles);
    };
    let Some(&(name, open)) = SCHEMES.iter().find(|(s, _)| *s == scheme) else {
        return Ok(&LocalFiles);
    };
    static OPENED: OnceLock<Mutex<Vec<Opened>>> = OnceLock::new();
    let mut opened = OPENED
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(&(_, source)) = opened.iter().find(|(s, _)| *s == name) {
        return Ok(source);
    }
    // Kept for the rest of the run, as a process keeps one client per store.
    let source: &'static dyn Source = Box::leak(open()?);
    opened.push((name, source));
    Ok(source)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn an_unregistered_scheme_is_a_local_path() {
        let odd = Location::new(Path::new("odd://name"));
        assert!(source_of(&odd).unwrap().is_local());
    }
}
