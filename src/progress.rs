//! Progress of long work on a terminal (indicatif): requests done, rate and the shares so
//! far. Drawn on stderr, and only when stdout is a terminal, so piped output stays clean.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::load::http::Snapshot;

/// The progress bar of a real load (absent when off).
pub struct LoadProgress {
    bar: Option<ProgressBar>,
    by_time: bool,
}

impl LoadProgress {
    /// A bar over the requests when a count is given, else over the duration; off with
    /// `quiet` or when stdout is not a terminal.
    pub fn new(quiet: bool, requests: Option<u64>, duration: Option<std::time::Duration>) -> Self {
        if quiet || !std::io::stdout().is_terminal() {
            return LoadProgress {
                bar: None,
                by_time: false,
            };
        }
        let (len, by_time) = match (requests, duration) {
            (Some(n), _) => (n, false),
            (None, Some(d)) => (d.as_millis() as u64, true),
            (None, None) => (0, false),
        };
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
        let template = if by_time {
            "{elapsed_precise} [{bar:30}] {msg}"
        } else {
            "{elapsed_precise} [{bar:30}] {pos}/{len} {msg}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        LoadProgress {
            bar: Some(bar),
            by_time,
        }
    }

    pub fn update(&self, s: &Snapshot) {
        let Some(bar) = &self.bar else { return };
        if self.by_time {
            bar.set_position(s.elapsed.as_millis() as u64);
        } else {
            bar.set_position(s.done);
        }
        let answered: u64 = s.versions.iter().map(|(_, n)| n).sum();
        let secs = s.elapsed.as_secs_f64();
        let mut msg = format!(
            "{} req/s",
            if secs > 0.0 {
                (s.done as f64 / secs).round()
            } else {
                0.0
            }
        );
        for (version, n) in &s.versions {
            msg.push_str(&format!(
                " · {version} {:.1} %",
                100.0 * *n as f64 / answered.max(1) as f64
            ));
        }
        bar.set_message(msg);
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
