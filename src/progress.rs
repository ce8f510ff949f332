//! The progress bar, built in one place: on stderr, for jobs large enough to take a while,
//! shown only when stderr is a terminal unless asked for.

use std::fs::File;
use std::io::{self, IsTerminal};
use std::path::Path;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::output::Sink;

/// When to show progress (`--progress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum When {
    /// For jobs of 512 MiB or more, when stderr is a terminal.
    #[default]
    Auto,
    /// Always, even when stderr is a file or a pipe.
    Always,
    /// Never.
    Never,
}

/// Jobs smaller than this finish in well under a second on these machines: no bar (keep
/// `When::Auto`'s doc in step).
const AUTO_MIN_BYTES: u64 = 512 << 20;
/// A few redraws a second are plenty, and cost the engine nothing measurable.
const REDRAWS_PER_SECOND: u8 = 4;

/// How much a kernel copy moves between updates of the bar.
const PIECE: u64 = 64 << 20;

/// The progress of one run.
pub struct Progress {
    /// The bar the copy engine's bytes are counted on.
    pub bar: ProgressBar,
    /// Whether the last state stays on stderr (asked for with `always`, as in a log).
    keep: bool,
}

impl Progress {
    /// Ends the bar: cleared from a terminal, or left as the last line of a log.
    pub fn finish(&self) {
        if self.keep {
            self.bar.finish();
        } else {
            self.bar.finish_and_clear();
        }
    }
}

/// The progress of a job that writes `total` bytes of data, hidden when it should not show.
pub fn start(total: u64, when: When) -> Progress {
    Progress {
        bar: bar(total, when),
        keep: when == When::Always,
    }
}

fn bar(total: u64, when: When) -> ProgressBar {
    let target = match when {
        When::Never => return ProgressBar::hidden(),
        When::Auto if total < AUTO_MIN_BYTES || !io::stderr().is_terminal() => {
            return ProgressBar::hidden();
        }
        When::Auto => ProgressDrawTarget::stderr_with_hz(REDRAWS_PER_SECOND),
        // A terminal-like target draws whether or not stderr is a terminal.
        When::Always => ProgressDrawTarget::term_like_with_hz(
            Box::new(console::Term::stderr()),
            REDRAWS_PER_SECOND,
        ),
    };
    let style = ProgressStyle::with_template(
        "{bar:30} {binary_bytes}/{binary_total_bytes}  {binary_bytes_per_sec}  eta {eta}",
    )
    .expect("the template is valid");
    let bar = ProgressBar::with_draw_target(Some(total), target).with_style(style);
    bar.enable_steady_tick(Duration::from_millis(250));
    bar
}

/// Counts the bytes written through it on a bar.
pub struct Counted<'a> {
    /// Where the bytes go.
    pub inner: &'a mut dyn Sink,
    /// Where they are counted.
    pub bar: &'a ProgressBar,
}

impl Sink for Counted<'_> {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.inner.write_all(bytes)?;
        self.bar.inc(bytes.len() as u64);
        Ok(())
    }

    /// Copies in pieces, so that a multi-GiB kernel copy moves the bar as it goes.
    fn copy_from(&mut self, file: &File, offset: u64, len: u64) -> io::Result<u64> {
        if self.bar.is_hidden() {
            return self.inner.copy_from(file, offset, len);
        }
        let mut copied = 0;
        while copied < len {
            let piece = (len - copied).min(PIECE);
            let done = self.inner.copy_from(file, offset + copied, piece)?;
            self.bar.inc(done);
            copied += done;
            if done < piece {
                break;
            }
        }
        Ok(copied)
    }

    fn name(&self) -> &Path {
        self.inner.name()
    }
}
