//! Where an input is: its identity, as the user wrote it. A path today (a file, a folder,
//! `-` for standard input); a URL (`s3://bucket/key`) once a source for its scheme is
//! registered (`src/input/source.rs`). It shows itself exactly as it was written, so that
//! messages name a local path as they always have.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// What the command line names standard input as.
pub const STDIN: &str = "-";

/// An input's identity: the text the user wrote (or a file named, for a shard an index
/// lists), shared between the input's tensors and the files it is checked by. 16 bytes, as
/// the path it replaces: a join may name 100,000 inputs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Location(Arc<Path>);

impl Location {
    /// The location a path names (or, for a registered scheme, a URL written as one).
    pub fn new(text: impl Into<Arc<Path>>) -> Location {
        Location(text.into())
    }

    /// Whether it is standard input (`-`).
    pub fn is_stdin(&self) -> bool {
        self.0.as_os_str() == STDIN
    }

    /// The scheme before `://` (`s3` in `s3://bucket/key`), if it starts with one: letters,
    /// digits, `+`, `-`, `.`, starting with a letter, at least two long (so that a Windows
    /// drive, `C://x`, is no scheme). Whether a source serves it is the registry's to say
    /// (`input::sources::source_of`); an unregistered one is a local path, as it always was.
    pub fn scheme(&self) -> Option<&str> {
        let text = self.0.to_str()?;
        let (scheme, _) = text.split_once("://")?;
        let mut chars = scheme.chars();
        let first = chars.next()?;
        let valid = first.is_ascii_alphabetic()
            && scheme.len() >= 2
            && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        valid.then_some(scheme)
    }

    /// The location as written, as a path: a local file's path. A remote location's text is
    /// shown through it too, but no file-system call may be given it: sources are reached
    /// through `input::sources::source_of`, which knows which is which.
    pub fn as_path(&self) -> &Path {
        &self.0
    }

    /// The shared path it holds (for the local source and for messages).
    pub fn shared_path(&self) -> &Arc<Path> {
        &self.0
    }

    /// The location of `name` inside it (a folder's file, a prefix's object): joined as a
    /// path for a local location, after a `/` for a URL.
    pub fn child(&self, name: &str) -> Location {
        match self.scheme() {
            Some(_) => {
                let text = self.0.to_string_lossy();
                let text = text.trim_end_matches('/');
                Location::new(Path::new(&format!("{text}/{name}")))
            }
            None => Location::new(self.0.join(name)),
        }
    }

    /// The text it was written as, with the tensor's name after a colon when there is one:
    /// `b.npy`, `b.safetensors:embed.weight` (for JSON; a message quotes it).
    pub fn label(&self, tensor: Option<&str>) -> String {
        match tensor {
            Some(tensor) => format!("{}:{tensor}", self.0.display()),
            None => self.0.display().to_string(),
        }
    }
}

impl From<&Path> for Location {
    fn from(path: &Path) -> Location {
        Location::new(path)
    }
}

impl From<std::path::PathBuf> for Location {
    fn from(path: std::path::PathBuf) -> Location {
        Location::new(path)
    }
}

impl From<Arc<Path>> for Location {
    fn from(path: Arc<Path>) -> Location {
        Location(path)
    }
}

impl fmt::Display for Location {
    /// Quoted as every message quotes a path ([`crate::messages::path`]): the text may come
    /// from a file (a shard an index names).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::messages::path(&self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_knows_its_scheme_and_a_local_path_has_none() {
        let s3 = Location::new(Path::new("s3://bucket/a.npy"));
        assert_eq!(s3.scheme(), Some("s3"));
        assert_eq!(
            s3.child("b.npy").as_path(),
            Path::new("s3://bucket/a.npy/b.npy")
        );
        for local in ["a.npy", "C://x.npy", "dir/a:b.npy", "-", "1s://x", ":///x"] {
            assert_eq!(Location::new(Path::new(local)).scheme(), None, "{local}");
        }
        let folder = Location::new(Path::new("ckpt"));
        assert_eq!(
            folder.child("a.safetensors").as_path(),
            Path::new("ckpt/a.safetensors")
        );
        assert!(Location::new(Path::new(STDIN)).is_stdin());
        assert_eq!(std::mem::size_of::<Location>(), 16);
    }

    #[test]
    fn a_location_shows_itself_as_the_path_it_was_written_as() {
        let local = Location::new(Path::new("dir/a b.npy"));
        assert_eq!(
            local.to_string(),
            crate::messages::path(Path::new("dir/a b.npy"))
        );
        assert_eq!(local.label(Some("w")), "dir/a b.npy:w");
    }
}
