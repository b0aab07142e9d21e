//! The human-readable report of a scenario run.

use std::fmt::Write as _;

use crate::scenario::RunReport;

/// Renders a run: each step with its time and verdict, the `get rollout` view at each
/// pause, invariant violations, and the verdict.
pub fn render(report: &RunReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "scenario {} (seed {}) — {}",
        report.name, report.seed, report.file
    );
    for line in report.description.lines() {
        let _ = writeln!(out, "  {line}");
    }
    let _ = writeln!(out);
    for step in &report.steps {
        let mark = if step.passed { "✔" } else { "✖" };
        let _ = writeln!(
            out,
            "{mark} {:>2}  {:<9} {}",
            step.index, step.time, step.summary
        );
        if step.passed && step.action == "expect" {
            // A passing expectation lists what held in the JSON report; here a count does.
            let held = step.detail.split(", ").filter(|s| !s.is_empty()).count();
            let _ = writeln!(out, "        {held} check(s) held");
        } else {
            for line in step.detail.lines().filter(|l| !l.is_empty()) {
                let _ = writeln!(out, "        {line}");
            }
        }
        for view in &step.views {
            let _ = writeln!(out);
            for line in view.lines() {
                let _ = writeln!(out, "        {line}");
            }
            let _ = writeln!(out);
        }
    }
    let _ = writeln!(out);
    if report.violations.is_empty() {
        let _ = writeln!(out, "invariants: held at every event");
    } else {
        let _ = writeln!(out, "invariants: {} violation(s)", report.violations.len());
        for v in &report.violations {
            let _ = writeln!(out, "  {} {}", v.time, v.message);
        }
    }
    let failed = report.steps.iter().filter(|s| !s.passed).count();
    if report.passed {
        let _ = writeln!(out, "PASSED: {} steps", report.steps.len());
    } else {
        let _ = writeln!(
            out,
            "FAILED: {failed} of {} steps failed",
            report.steps.len()
        );
    }
    out
}

/// The summary table of a directory run.
pub fn summary(reports: &[RunReport]) -> String {
    let width = reports
        .iter()
        .map(|r| r.name.len())
        .max()
        .unwrap_or(8)
        .max(8);
    let mut out = String::new();
    let _ = writeln!(out, "{:<width$}  RESULT  STEPS  FAILED", "SCENARIO");
    for r in reports {
        let failed = r.steps.iter().filter(|s| !s.passed).count();
        let _ = writeln!(
            out,
            "{:<width$}  {:<6}  {:>5}  {:>6}",
            r.name,
            if r.passed { "pass" } else { "FAIL" },
            r.steps.len(),
            failed
        );
    }
    let passed = reports.iter().filter(|r| r.passed).count();
    let _ = writeln!(out, "{passed} passed, {} failed", reports.len() - passed);
    out
}
