//! Progress and messages: a bar on a terminal only, `-q` / `-v`.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How chatty to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Verbosity {
    /// `-q`: errors only.
    Quiet,
    /// Default: progress on a terminal, a summary line.
    #[default]
    Normal,
    /// `-v`: also details and warnings.
    Verbose,
}

/// A progress reporter shared by the build threads.
#[derive(Clone)]
pub struct Progress {
    bar: ProgressBar,
    /// Verbosity in force.
    pub verbosity: Verbosity,
}

impl Progress {
    /// A reporter; draws only when stderr is a terminal and not quiet.
    pub fn new(verbosity: Verbosity) -> Self {
        let bar = if verbosity > Verbosity::Quiet && std::io::stderr().is_terminal() {
            let b = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} {bytes}/{total_bytes} {binary_bytes_per_sec} {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            b
        } else {
            ProgressBar::hidden()
        };
        Progress { bar, verbosity }
    }

    /// A reporter that never prints.
    pub fn hidden() -> Self {
        Progress {
            bar: ProgressBar::hidden(),
            verbosity: Verbosity::Quiet,
        }
    }

    /// Sets the total number of bytes.
    pub fn set_total(&self, bytes: u64) {
        self.bar.set_length(bytes);
    }

    /// Adds to the total number of bytes (the scan finds them as it goes).
    pub fn add_total(&self, bytes: u64) {
        self.bar.inc_length(bytes);
    }

    /// Adds processed bytes.
    pub fn add_bytes(&self, n: u64) {
        self.bar.inc(n);
    }

    /// Shows the number of files read so far.
    pub fn files(&self, done: u64) {
        if !self.bar.is_hidden() {
            self.bar.set_message(format!("{done} files"));
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }

    /// Prints a line (not in quiet mode) without garbling the bar.
    pub fn info(&self, msg: &str) {
        if self.verbosity >= Verbosity::Normal {
            self.bar.suspend(|| eprintln!("{msg}"));
        }
    }

    /// Prints a line in verbose mode only.
    pub fn detail(&self, msg: &str) {
        if self.verbosity >= Verbosity::Verbose {
            self.bar.suspend(|| eprintln!("{msg}"));
        }
    }
}
