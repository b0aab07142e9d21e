//! Colour for the terminal, added at the edge: the reports are plain text everywhere
//! (tests, JSON, files), and `paint` styles the few marks a reader scans for — a step's ✔
//! or ✖, a verdict's PASS, FAIL or INCONCLUSIVE — just before they are written. Whether the
//! styles reach the terminal is anstream's decision, as in cargo: `--color always|never`,
//! else `NO_COLOR` / `CLICOLOR_FORCE` and whether the stream is a terminal.

use anstyle::{AnsiColor, Style};

const GREEN: Style = AnsiColor::Green.on_default();
const RED: Style = AnsiColor::Red.on_default();
const YELLOW: Style = AnsiColor::Yellow.on_default();

/// The marks styled when they begin a line (after its indentation), so that text inside a
/// JSON string or a message is never touched.
const MARKS: &[(&str, Style)] = &[
    ("✔", GREEN),
    ("✖", RED),
    ("PASSED:", GREEN.bold()),
    ("FAILED:", RED.bold()),
    ("PASS", GREEN.bold()),
    ("FAIL", RED.bold()),
    ("INCONCLUSIVE", YELLOW.bold()),
    ("verdict: PASS", GREEN.bold()),
    ("verdict: FAIL", RED.bold()),
    ("verdict: INCONCLUSIVE", YELLOW.bold()),
];

/// `text` with ANSI styles around the marks that begin its lines.
pub fn paint(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        // The longest mark that begins the line wins (`verdict: PASS` over nothing,
        // `PASSED:` over `PASS`).
        let mark = MARKS
            .iter()
            .filter(|(mark, _)| body.starts_with(mark) && ends_a_word(&body[mark.len()..]))
            .max_by_key(|(mark, _)| mark.len());
        match mark {
            Some((mark, style)) => {
                out.push_str(indent);
                out.push_str(&format!("{style}{mark}{style:#}"));
                out.push_str(&body[mark.len()..]);
            }
            None => out.push_str(line),
        }
    }
    out
}

/// A mark is a whole word: `PASS` in `PASS:` or `PASS —`, not in `PASSING`.
fn ends_a_word(rest: &str) -> bool {
    rest.chars().next().is_none_or(|c| !c.is_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strip(text: &str) -> String {
        let mut out = Vec::new();
        let mut stream = anstream::StripStream::new(&mut out);
        std::io::Write::write_all(&mut stream, text.as_bytes()).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn marks_at_a_line_start_are_styled_and_nothing_else_changes() {
        let text = "✔  1  t+5s  wait\n        PASS: split is made per request\nverdict: INCONCLUSIVE — n = 4\n  \"detail\": \"FAIL: x\"\nPASSING by\n";
        let painted = paint(text);
        assert_eq!(strip(&painted), text, "only styles are added");
        assert!(painted.starts_with("\u{1b}[32m✔\u{1b}[0m"), "{painted:?}");
        assert!(
            painted.contains("        \u{1b}[1m\u{1b}[32mPASS\u{1b}[0m: split"),
            "{painted:?}"
        );
        assert!(
            painted.contains("\u{1b}[33mverdict: INCONCLUSIVE\u{1b}[0m"),
            "{painted:?}"
        );
        assert!(
            painted.contains("  \"detail\": \"FAIL: x\"\n"),
            "inside JSON: untouched"
        );
        assert!(
            painted.ends_with("PASSING by\n"),
            "not a whole word: untouched"
        );
    }
}
