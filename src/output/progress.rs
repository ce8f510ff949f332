//! The progress bar, built in one place: on stderr, for jobs large enough to take a while,
//! shown only when stderr is a terminal unless asked for. It names the output it writes,
//! fits the terminal's width (the fields that do not fit are left out, never wrapped onto a
//! second line), gives way to one summary line on success, and on a signal is cleared and
//! replaced by one line saying the run was interrupted (through the signal handler's hook,
//! [`crate::output::on_signal`]).

use std::cell::Cell;
use std::fs::File;
use std::io::{self, IsTerminal};
use std::path::Path;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};

use crate::format::Sink;
use crate::output::on_signal;

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
    /// The output's name, as the bar and the summary show it.
    label: String,
    started: Instant,
    /// How long the data took, once written.
    took: Cell<Duration>,
}

impl Progress {
    /// Clears the bar once the data is written (or the writing failed), before the output is
    /// committed: from here a signal ends the run without a word about the bar.
    pub fn finish(&self) {
        self.took.set(self.started.elapsed());
        if !self.bar.is_hidden() {
            on_signal(None);
        }
        self.bar.finish_and_clear();
    }

    /// The summary line that replaces the bar once the output is committed: "wrote out.npy:
    /// 4.00 GiB in 3.21 s (1.25 GiB/s)". Nothing when the bar was not shown.
    pub fn summary(&self) {
        if !self.bar.is_hidden() {
            let (_, width) = console::Term::stderr().size();
            let (bytes, took) = (self.bar.position(), self.took.get());
            crate::messages::eprintln(summary(&self.label, bytes, took, usize::from(width)));
        }
    }
}

/// "wrote out.npy: 4.00 GiB in 3.2 s (1.25 GiB/s)", or, where that does not fit `width`
/// columns, "out.npy: 4.00 GiB in 3.2 s, 1.25 GiB/s".
fn summary(label: &str, bytes: u64, elapsed: Duration, width: usize) -> String {
    let seconds = elapsed.as_secs_f64();
    let rate = bytes as f64 / seconds.max(1e-3);
    let (bytes, rate) = (three_digits(bytes as f64), three_digits(rate));
    let long = format!("wrote {label}: {bytes} in {seconds:.1} s ({rate}/s)");
    if long.chars().count() < width {
        long
    } else {
        format!("{label}: {bytes} in {seconds:.1} s, {rate}/s")
    }
}

/// A size in binary units with three significant digits: "2.00 GiB", "380 MiB", "38.1 KiB".
fn three_digits(bytes: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let (mut value, mut unit) = (bytes, 0);
    while value >= 999.5 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    let decimals = match value {
        _ if unit == 0 => 0,
        v if v < 9.995 => 2,
        v if v < 99.95 => 1,
        _ => 0,
    };
    format!("{value:.decimals$} {}", units[unit])
}

/// The progress of a job that writes `total` bytes of data to `output` (`-` for standard
/// output), hidden when it should not show.
pub fn start(total: u64, when: When, output: &Path) -> Progress {
    start_all(total, when, &[output])
}

/// The progress of a job that writes `total` bytes of data to all of `outputs` together (a
/// split's parts), named by the first: "p0.npy and 7 more".
pub fn start_all(total: u64, when: When, outputs: &[&Path]) -> Progress {
    let first = outputs.first().copied().unwrap_or(Path::new("-"));
    let mut label = if first == Path::new("-") {
        "standard output".to_string()
    } else {
        // The bar draws it as it is: quoted here.
        crate::messages::path(Path::new(first.file_name().unwrap_or(first.as_os_str())))
    };
    if outputs.len() > 1 {
        label = format!("{label} and {} more", outputs.len() - 1);
    }
    let bar = bar(total, when, &label);
    if !bar.is_hidden() {
        let (_, width) = console::Term::stderr().size();
        let (shown, said) = (bar.clone(), interrupted(&label, usize::from(width)));
        on_signal(Some(Box::new(move || {
            shown.finish_and_clear();
            crate::messages::eprintln(&said);
        })));
    }
    Progress {
        bar,
        label,
        started: Instant::now(),
        took: Cell::new(Duration::ZERO),
    }
}

/// The line a signal leaves: nothing was written to a file (its temporary is removed and the
/// target left as it was); standard output has what was sent. Without the name where the
/// line would not fit `width` columns.
fn interrupted(label: &str, width: usize) -> String {
    let line = if label == "standard output" {
        "tjoin: interrupted; standard output got part of the output".to_string()
    } else {
        format!("tjoin: interrupted; nothing was written to {label}")
    };
    if line.chars().count() < width {
        line
    } else if label == "standard output" {
        "tjoin: interrupted; output incomplete".to_string()
    } else {
        "tjoin: interrupted; nothing was written".to_string()
    }
}

fn bar(total: u64, when: When, label: &str) -> ProgressBar {
    match when {
        When::Never => return ProgressBar::hidden(),
        When::Auto if total < AUTO_MIN_BYTES || !io::stderr().is_terminal() => {
            return ProgressBar::hidden();
        }
        When::Auto | When::Always => {}
    }
    // A terminal-like target draws whether or not stderr is a terminal (`always`).
    let stderr = Narrower(console::Term::stderr());
    let (template, label) = layout(label, usize::from(stderr.width()));
    let target = ProgressDrawTarget::term_like_with_hz(Box::new(stderr), REDRAWS_PER_SECOND);
    let style = ProgressStyle::with_template(template).expect("the templates are valid");
    let bar = ProgressBar::with_draw_target(Some(total), target)
        .with_style(style)
        .with_prefix(label);
    bar.enable_steady_tick(Duration::from_millis(250));
    bar
}

/// The bar's fields, widest first, each with the most columns its text around the bar takes
/// ("1023.99 MiB/1023.99 MiB", "1023.99 MiB/s", "eta 59m"); the label is added to that.
const LAYOUTS: &[(&str, usize)] = &[
    (
        "{prefix}  {wide_bar}  {binary_bytes}/{binary_total_bytes}  {binary_bytes_per_sec}  eta {eta}",
        2 + 2 + 23 + 2 + 13 + 2 + 7,
    ),
    (
        "{prefix}  {wide_bar}  {binary_bytes}/{binary_total_bytes}  eta {eta}",
        2 + 2 + 23 + 2 + 7,
    ),
    (
        "{prefix} {wide_bar} {percent:>3}% {eta:>3}",
        1 + 1 + 4 + 1 + 3,
    ),
    ("{prefix} {wide_bar} {percent:>3}%", 1 + 1 + 4),
];

/// The narrowest bar worth drawing.
const MIN_BAR: usize = 10;

/// The columns the bar leaves free at the end of its line: a line that filled the width
/// would leave the cursor at its end, where the `^C` a terminal echoes on Ctrl-C wraps onto
/// a new line, and the bar could no longer be cleared.
const MARGIN: u16 = 2;

/// Standard error as the bar's terminal, [`MARGIN`] columns narrower than it is (a file or a
/// pipe has no width: console's default, 79 columns).
#[derive(Debug)]
struct Narrower(console::Term);

impl TermLike for Narrower {
    fn width(&self) -> u16 {
        self.0.size().1.saturating_sub(MARGIN).max(1)
    }
    fn height(&self) -> u16 {
        self.0.size().0
    }
    fn move_cursor_up(&self, n: usize) -> io::Result<()> {
        self.0.move_cursor_up(n)
    }
    fn move_cursor_down(&self, n: usize) -> io::Result<()> {
        self.0.move_cursor_down(n)
    }
    fn move_cursor_right(&self, n: usize) -> io::Result<()> {
        self.0.move_cursor_right(n)
    }
    fn move_cursor_left(&self, n: usize) -> io::Result<()> {
        self.0.move_cursor_left(n)
    }
    fn write_line(&self, s: &str) -> io::Result<()> {
        self.0.write_line(s)
    }
    fn write_str(&self, s: &str) -> io::Result<()> {
        self.0.write_str(s)
    }
    fn clear_line(&self) -> io::Result<()> {
        self.0.clear_line()
    }
    fn flush(&self) -> io::Result<()> {
        self.0.flush()
    }
}

/// The richest layout that fits `width` columns (the terminal's less [`MARGIN`]) with a bar
/// of at least [`MIN_BAR`], and the label shortened to fit: at most a third of the width,
/// its end kept.
fn layout(label: &str, width: usize) -> (&'static str, String) {
    let label = shorten(label, (width / 3).max(12));
    let chars = label.chars().count();
    let template = LAYOUTS
        .iter()
        .find(|(_, fixed)| chars + fixed + MIN_BAR <= width)
        .map_or("{wide_bar}", |(template, _)| template);
    (template, label)
}

/// `text` in at most `max` characters: its end, after an ellipsis, when it is longer.
fn shorten(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.to_string();
    }
    let tail: String = text.chars().skip(count + 1 - max).collect();
    format!("…{tail}")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_of_several_outputs_is_named_by_the_first_and_how_many_more() {
        let (a, b, c) = (
            Path::new("out/p0.npy"),
            Path::new("p1.npy"),
            Path::new("p2.npy"),
        );
        assert_eq!(
            start_all(10, When::Never, &[a, b, c]).label,
            "p0.npy and 2 more"
        );
        assert_eq!(start_all(10, When::Never, &[a]).label, "p0.npy");
        assert_eq!(
            start(10, When::Never, Path::new("-")).label,
            "standard output"
        );
    }

    /// The widest line a layout can draw at `width`, with its bar at the narrowest.
    fn widest(template: &str, label: &str) -> usize {
        match LAYOUTS.iter().find(|(t, _)| *t == template) {
            Some((_, fixed)) => label.chars().count() + fixed + MIN_BAR,
            // The bare bar: it takes whatever width there is.
            None => 0,
        }
    }

    #[test]
    fn the_bar_fits_narrow_terminals_and_names_the_output() {
        for width in [20, 40, 45, 50, 60, 80, 120, 200] {
            for name in [
                "out.npy",
                "a-rather-long-output-name-for-a-model.safetensors",
            ] {
                let (template, label) = layout(name, width);
                assert!(
                    widest(template, &label) <= width,
                    "{width}: {template} {label}"
                );
                assert!(
                    label.chars().count() <= (width / 3).max(12),
                    "{width}: {label}"
                );
                assert!(name.ends_with(label.trim_start_matches('…')), "{label}");
            }
        }
        assert_eq!(layout("out.npy", 45).1, "out.npy");
        assert!(layout("out.npy", 45).0.contains("{percent"));
        assert!(layout("out.npy", 80).0.contains("{binary_bytes_per_sec}"));
        assert_eq!(
            interrupted("out.npy", 80),
            "tjoin: interrupted; nothing was written to out.npy"
        );
        assert_eq!(
            interrupted("joined.npy", 45),
            "tjoin: interrupted; nothing was written"
        );
    }

    #[test]
    fn the_summary_says_what_how_much_and_how_fast() {
        let took = Duration::from_millis(3200);
        let line = summary("out.npy", 4 << 30, took, 80);
        assert_eq!(line, "wrote out.npy: 4.00 GiB in 3.2 s (1.25 GiB/s)");
        let line = summary("joined.npy", 2 << 30, Duration::from_millis(5390), 45);
        assert_eq!(line, "joined.npy: 2.00 GiB in 5.4 s, 380 MiB/s");
        assert_eq!(three_digits(0.0), "0 B");
        assert_eq!(three_digits(999.0), "999 B");
        assert_eq!(three_digits(1000.0), "0.98 KiB");
        assert_eq!(three_digits(39014.0), "38.1 KiB");
        assert_eq!(shorten("a-rather-long-name.npy", 10), "…-name.npy");
    }
}
