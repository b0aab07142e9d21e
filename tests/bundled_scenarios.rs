//! Properties of the bundled scenario directory as a whole.

use canarysim::cli::{Cli, execute};
use canarysim::testing::{run_scenario, scenario_files};
use clap::Parser;
use std::path::Path;

fn bundled() -> Vec<std::path::PathBuf> {
    scenario_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")).unwrap()
}

#[test]
fn the_whole_directory_passes_with_a_summary_table() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let (code, out, err) = execute(Cli::parse_from(["canarysim", "run", dir.to_str().unwrap()]));
    assert_eq!(code, 0, "{out}{err}");
    let count = bundled().len();
    assert!(count >= 20, "{count} scenarios");
    assert!(out.contains(&format!("{count} passed, 0 failed")), "{out}");
}

/// A warning in a bundled scenario is either expected (`expect: {warnings: [...]}` makes the
/// runner check the exact set) or a mistake in the scenario.
#[test]
fn no_bundled_scenario_has_a_warning_it_does_not_expect() {
    let mut unexpected = Vec::new();
    for path in bundled() {
        let text = std::fs::read_to_string(&path).unwrap();
        let report = run_scenario(&path, None).unwrap();
        if !report.warnings.is_empty() && !text.contains("warnings:") {
            let warnings: Vec<String> = report.warnings.iter().map(ToString::to_string).collect();
            unexpected.push(format!("{}: {warnings:#?}", path.display()));
        }
    }
    assert!(unexpected.is_empty(), "{unexpected:#?}");
}
