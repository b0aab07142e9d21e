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

/// A simulated run's progress: a spinner on stderr with the step running and the scenario
/// time reached, so a long run visibly moves. Off when stdout is not a terminal (and so in
/// tests and pipes).
pub struct RunProgress {
    bar: Option<ProgressBar>,
    steps: usize,
}

impl RunProgress {
    pub fn new(scenario: &str, steps: usize) -> RunProgress {
        if !std::io::stdout().is_terminal() {
            return RunProgress { bar: None, steps };
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {elapsed} {prefix} {msg}") {
            bar.set_style(style);
        }
        bar.set_prefix(scenario.to_string());
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        RunProgress {
            bar: Some(bar),
            steps,
        }
    }

    /// A handle to show the scenario time from the runner's hook (None when off).
    pub fn clock(&self) -> Option<impl Fn(&dyn std::fmt::Display) + use<>> {
        let bar = self.bar.clone()?;
        Some(move |now: &dyn std::fmt::Display| {
            let message = bar.message();
            let step = message.split(" · ").next().unwrap_or("").to_string();
            bar.set_message(format!("{step} · {now}"));
        })
    }

    /// The step about to run (1-based).
    pub fn step(&self, number: usize, summary: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(format!("step {number}/{}: {summary}", self.steps));
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
