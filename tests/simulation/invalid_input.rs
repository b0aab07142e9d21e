//! Every fixture in tests/fixtures/invalid/ is a malformed scenario whose first line says the
//! exact `path:line:column: message` it must produce; each must exit 2, run nothing, and
//! never panic.

use crate::support;
use canarysim::cli::{Cli, execute};
use clap::Parser;
use std::path::Path;

#[test]
fn every_invalid_fixture_exits_2_with_its_expected_location_and_message() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::env::set_current_dir(root).unwrap();
    let fixtures = support::files_with_extension("tests/fixtures/invalid", "yaml");
    assert!(fixtures.len() >= 10, "fixtures: {fixtures:?}");
    let mut failures = Vec::new();
    for path in &fixtures {
        let text = std::fs::read_to_string(path).unwrap();
        let want = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{} lacks its `# expect:` line", path.display()));
        let (code, out, err) = execute(Cli::parse_from([
            "canarysim",
            "run",
            path.to_str().unwrap(),
        ]));
        if code != 2 || !out.is_empty() || !err.starts_with(want) {
            failures.push(format!(
                "{}: exit {code}\n  want: {want}\n  got:  {}",
                path.display(),
                err.trim_end()
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
