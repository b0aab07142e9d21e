//! Scenario suites in your own `cargo test`.
//!
//! Keep your Rollouts, VirtualServices and scenario files in your repository and let
//! `cargo test` (or `cargo nextest run`) fail when a change breaks a canary: every scenario
//! file under a directory becomes a test of its own, named after the file
//! (`scenarios/seed-004-walkthrough.yaml` → `seed_004_walkthrough`), filterable as any test,
//! with the failing steps (expected vs actual) as the failure message.
//!
//! In `Cargo.toml`:
//! ```toml
//! [dev-dependencies]
//! canarysim = "0.1"
//!
//! [[test]]
//! name = "scenarios"
//! harness = false
//! ```
//! and in `tests/scenarios.rs`:
//! ```no_run
//! fn main() -> std::process::ExitCode {
//!     canarysim::testing::run_suites(&["scenarios"])
//! }
//! ```
//! Directories are relative to the crate's root (where `cargo test` runs tests). YAML files
//! that are Kubernetes manifests (a document with `kind` or `apiVersion`) are not tests; a
//! scenario file that does not load fails its test with `path:line:column: message`, and a
//! directory with no scenario file fails as one test saying so.
//!
//! To assert on figures yourself (shares, intervals, verdicts):
//! ```
//! use canarysim::testing::{check_scenario, run_scenario};
//! use std::path::Path;
//!
//! let path = Path::new("scenarios/seed-004-walkthrough.yaml");
//! check_scenario(path).expect("the walkthrough passes");
//! let report = run_scenario(path, Some(7)).expect("the file is valid");
//! let load = report.steps.iter().find_map(|s| s.load.as_ref()).expect("it has a load");
//! let canary = load.versions.iter().find(|v| v.role == "canary").expect("a canary answered");
//! assert!(canary.interval.lo <= canary.share && canary.share <= canary.interval.hi);
//! ```

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use libtest_mimic::{Arguments, Failed, Trial};

use crate::scenario::{self, Disk};

/// What a run produced: every step with its detail, load figures (`steps[].load`: shares,
/// intervals, latencies), split verdicts (`steps[].split`), invariant violations and
/// warnings — the same data as `canarysim run --format json`.
pub use crate::scenario::RunReport as Report;

/// Why a scenario did not pass.
#[derive(Debug, Clone)]
pub enum ScenarioFailure {
    /// The file (or a manifest it names) cannot be loaded: `path:line:column: message`.
    Invalid(String),
    /// It ran, and at least one step failed or an invariant broke.
    Failed(Box<Report>),
}

impl fmt::Display for ScenarioFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScenarioFailure::Invalid(message) => write!(f, "{message}"),
            ScenarioFailure::Failed(report) => {
                let how = if self.only_inconclusive() {
                    "is inconclusive: the data cannot decide a split yet"
                } else {
                    "failed"
                };
                writeln!(
                    f,
                    "scenario {} (seed {}) {how} — {}",
                    report.name, report.seed, report.file
                )?;
                for step in report.steps.iter().filter(|s| !s.passed) {
                    writeln!(
                        f,
                        "✘ step {} at {}: {}",
                        step.index, step.time, step.summary
                    )?;
                    for line in crate::report::text::step_detail(step).lines() {
                        writeln!(f, "    {line}")?;
                    }
                }
                for v in &report.violations {
                    writeln!(f, "✘ invariant at {}: {}", v.time, v.message)?;
                }
                for w in &report.warnings {
                    writeln!(f, "{w}")?;
                }
                Ok(())
            }
        }
    }
}

impl ScenarioFailure {
    /// Whether every failing step is an `expect_split` whose outcome was inconclusive (and
    /// not accepted), with no invariant broken: more draws would decide, no weight was
    /// shown wrong.
    pub fn only_inconclusive(&self) -> bool {
        let ScenarioFailure::Failed(report) = self else {
            return false;
        };
        let mut failing = report.steps.iter().filter(|s| !s.passed).peekable();
        failing.peek().is_some()
            && report.violations.is_empty()
            && failing.all(|s| {
                s.split
                    .as_ref()
                    .is_some_and(|v| v.outcome == crate::verify::Outcome::Inconclusive)
            })
    }
}

impl std::error::Error for ScenarioFailure {}

/// Runs a scenario file as `canarysim run FILE` does, with the file's seed.
pub fn check_scenario(path: &Path) -> Result<(), ScenarioFailure> {
    check(path, None)
}

/// [`check_scenario`] with another seed (as `canarysim run FILE --seed N`).
pub fn check_scenario_with_seed(path: &Path, seed: u64) -> Result<(), ScenarioFailure> {
    check(path, Some(seed))
}

fn check(path: &Path, seed: Option<u64>) -> Result<(), ScenarioFailure> {
    let report = run_scenario(path, seed)?;
    if report.passed {
        Ok(())
    } else {
        Err(ScenarioFailure::Failed(Box::new(report)))
    }
}

/// Runs a scenario and returns its report whether or not its expectations held; only a
/// file that cannot be loaded (or has no step to run) is an error.
pub fn run_scenario(path: &Path, seed: Option<u64>) -> Result<Report, ScenarioFailure> {
    let plan = scenario::load_runnable(path, &Disk)
        .map_err(|e| ScenarioFailure::Invalid(e.to_string()))?;
    Ok(scenario::run(&plan, seed))
}

/// The test harness: one test per scenario file under each directory (recursively), run
/// with libtest's command line (filters, `--exact`, `--list`, `--nocapture`…), so
/// `cargo test seed_004` runs only the matching files.
pub fn run_suites<P: AsRef<Path>>(dirs: &[P]) -> ExitCode {
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    for dir in dirs {
        match suite(dir.as_ref()) {
            Ok(t) => trials.extend(t),
            Err(message) => {
                let name = test_name(dir.as_ref(), dir.as_ref());
                trials.push(Trial::test(name, move || Err(Failed::from(message))));
            }
        }
    }
    libtest_mimic::run(&args, trials).exit_code()
}

/// The tests of one directory, named after their files.
pub fn suite(dir: &Path) -> Result<Vec<Trial>, String> {
    let (files, manifests) = scenario::discover::scenarios_in(dir, true)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    // An empty suite would pass in silence (a misspelt folder, files not yet moved in).
    if files.is_empty() {
        return Err(scenario::discover::nothing_to_run(dir, manifests.len()));
    }
    Ok(files
        .into_iter()
        .map(|path| {
            let name = test_name(dir, &path);
            Trial::test(name, move || {
                check_scenario(&path).map_err(|e| Failed::from(e.to_string()))
            })
        })
        .collect())
}

/// Every scenario file under `dir` and its subfolders, sorted: YAML files that are not
/// manifests (a file that does not parse is kept, so that its test reports why).
pub fn scenario_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    scenario::discover::scenarios_in(dir, true).map(|(run, _)| run)
}

/// `dir/sub/seed-004-walkthrough.yaml` → `sub::seed_004_walkthrough`: the path below the
/// directory without its extension, as an identifier-like test name.
fn test_name(dir: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(dir).unwrap_or(path).with_extension("");
    let parts: Vec<String> = relative
        .components()
        .map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .chars()
                .map(|ch| if ch.is_ascii_alphanumeric() { ch } else { '_' })
                .collect()
        })
        .collect();
    if parts.is_empty() || parts.iter().all(String::is_empty) {
        path.display().to_string()
    } else {
        parts.join("::")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tests_are_named_after_their_files() {
        let dir = Path::new("scenarios");
        assert_eq!(
            test_name(dir, Path::new("scenarios/seed-004-walkthrough.yaml")),
            "seed_004_walkthrough"
        );
        assert_eq!(
            test_name(dir, Path::new("scenarios/team a/canary.v2.yml")),
            "team_a::canary_v2"
        );
    }

    #[test]
    fn manifests_are_not_tests_and_broken_files_are() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let files = scenario_files(&root.join("scenarios")).unwrap();
        assert!(
            files
                .iter()
                .any(|f| f.ends_with("seed-004-walkthrough.yaml"))
        );
        assert!(
            !files
                .iter()
                .any(|f| f.to_string_lossy().contains("manifests")),
            "{files:?}"
        );
        let invalid = scenario_files(&root.join("tests/fixtures/invalid")).unwrap();
        assert!(invalid.iter().any(|f| f.ends_with("yaml-syntax.yaml")));
    }

    #[test]
    fn a_folder_without_scenarios_is_a_failing_suite_not_an_empty_one() {
        let dir = tempfile::tempdir().unwrap();
        let err = suite(dir.path()).expect_err("an empty folder fails");
        assert!(err.contains("no scenario files"), "{err}");
        std::fs::write(
            dir.path().join("svc.yaml"),
            "apiVersion: v1\nkind: Service\n",
        )
        .unwrap();
        let err = suite(dir.path()).expect_err("manifests alone fail");
        assert!(err.contains("is a Kubernetes manifest"), "{err}");
    }

    #[test]
    fn an_invalid_file_fails_with_its_location() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let err = check_scenario(&root.join("tests/fixtures/invalid/unknown-step.yaml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown-step.yaml:"), "{err}");
        assert!(matches!(
            err.split(':').nth(1).map(str::parse::<u32>),
            Some(Ok(_))
        ));
    }
}
