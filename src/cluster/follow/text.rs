//! `watch`'s text table: a header, then each row as it is measured (rows are printed
//! live, so columns have fixed widths).

use super::StepRow;
use crate::verify::{Outcome, SplitUnit};

/// The text table's header (rows follow as they are measured).
pub fn text_header(rollout: &str, namespace: &str, url: &str) -> String {
    format!(
        "watch rollout {rollout} in {namespace}, verified at {url}\n{:<20} {:>5} {:>5} {:>7} {:<10} {:>8} {:<16} {:<12} {:<12} NOTE\n",
        "TIME", "STEP", "SET", "ROUTER", "VERSION", "SHARE %", "INTERVAL", "DRAWS", "VERDICT"
    )
}

/// One row of the text table.
pub fn text_row(row: &StepRow) -> String {
    let step = row
        .step
        .map_or("end".to_string(), |i| format!("{i}/{}", row.steps));
    let number = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    let observed = row.observed.map_or("-".to_string(), |v| format!("{v:.2}"));
    let interval = row
        .interval
        .map_or("-".to_string(), |[lo, hi]| format!("[{lo:.2}, {hi:.2}]"));
    let draws = match row.unit {
        Some(SplitUnit::Request) => format!("{} req", row.effective_n),
        Some(SplitUnit::Connection) => format!("{} conn", row.effective_n),
        Some(SplitUnit::Client) => format!("{} clients", row.effective_n),
        None => "-".to_string(),
    };
    let verdict = match row.verdict {
        Some(Outcome::Pass) => "pass",
        Some(Outcome::Fail) => "FAIL",
        Some(Outcome::Inconclusive) => "cannot tell",
        None => "-",
    };
    format!(
        "{:<20} {step:>5} {:>5} {:>7} {:<10} {observed:>8} {interval:<16} {draws:<12} {verdict:<12} {}\n",
        row.time,
        number(Some(row.set_weight)),
        number(row.router_weight),
        if row.version.is_empty() {
            "-"
        } else {
            &row.version
        },
        row.note
    )
}
