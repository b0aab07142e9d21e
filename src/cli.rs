//! The command line (clap). Thin: it parses, calls the library, prints, and maps results to
//! exit codes (`run`: 0 passed, 1 an expectation failed, 2 invalid input; `lint`: 0 no
//! errors, 1 errors, 2 a file cannot be read).

use crate::apiserver::admission::IstioWeightRules;
use clap::{Parser, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::lint::{self, Diagnostic, Severity};
use crate::model::{Manifest, yaml};
use crate::report;
use crate::scenario::{self, Disk, Files, RunReport};

pub use crate::seed::{DEFAULT_SCENARIO, EMBEDDED};

#[derive(Debug, Parser)]
#[command(
    name = "canarysim",
    version,
    about = "Simulate and verify Argo Rollouts + Istio canary traffic splits"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a scenario's rollout with its trafficRouting and again without it (same seed,
    /// same load), and compare, per load step, the set weight with what each delivered.
    Compare {
        /// Scenario file (default: the bundled seed walkthrough).
        path: Option<PathBuf>,
        #[arg(long)]
        seed: Option<u64>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Run a scenario file, or every scenario in a directory (default: the bundled seed
    /// walkthrough).
    Run {
        /// Scenario file or directory.
        path: Option<PathBuf>,
        /// Override the scenario's seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Check manifests without running them: Argo's spec validation, references between
    /// Rollouts, Services, VirtualServices, DestinationRules and Gateways, route validation,
    /// mesh binding and whole-percent weights. Prints `file:line:column: severity: message`;
    /// exits 1 on any error.
    Lint {
        /// Manifest files (checked together: objects may refer to each other across files)
        /// or scenario files (each checked with all the manifests it applies).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// Entry point used by `main.rs`.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let (code, out, err) = execute(cli);
    print!("{out}");
    eprint!("{err}");
    ExitCode::from(code)
}

/// Runs a parsed command; returns (exit code, stdout, stderr). In-process, so tests can call
/// it as the binary would.
pub fn execute(cli: Cli) -> (u8, String, String) {
    match cli.command {
        Command::Run { path, seed, format } => run(path.as_deref(), seed, format),
        Command::Compare { path, seed, format } => compare(path.as_deref(), seed, format),
        Command::Lint { files } => lint_files(&files),
    }
}

/// The namespace of manifest objects that name none (as `kubectl apply` without `-n`).
const LINT_NAMESPACE: &str = "default";

/// `canarysim lint FILE…`.
fn lint_files(paths: &[PathBuf]) -> (u8, String, String) {
    // Plain manifest files form one set; a scenario is its own world, so its manifests are
    // checked apart from everything else (two scenarios may define the same objects).
    let mut pooled: Vec<Manifest> = Vec::new();
    // Each set with the istiod that checks its VirtualServices (a scenario's `istio_version`).
    let mut sets: Vec<(Vec<Manifest>, IstioWeightRules)> = Vec::new();
    let mut err = String::new();
    for path in paths {
        let loaded = if is_scenario(path) {
            scenario::parse(path, &Disk)
                .map(|plan| sets.push((plan.all_manifests(), plan.istio_weight_rules)))
                .map_err(|e| e.to_string())
        } else {
            yaml::load_file(path, LINT_NAMESPACE)
                .map(|m| pooled.extend(m))
                .map_err(|e| e.to_string())
        };
        if let Err(e) = loaded {
            err.push_str(&e);
            err.push('\n');
        }
    }
    // Checking the rest while a file is unreadable would report its objects as missing.
    if !err.is_empty() {
        return (2, String::new(), err);
    }
    sets.push((pooled, IstioWeightRules::default()));
    let mut diagnostics: Vec<Diagnostic> = sets
        .iter()
        .flat_map(|(manifests, istio)| lint::check(manifests, *istio))
        .collect();
    diagnostics.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    diagnostics.dedup_by(|a, b| a.sort_key() == b.sort_key());
    let errors = diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    let warnings = diagnostics.len() - errors;
    let mut out = String::new();
    for d in &diagnostics {
        out.push_str(&format!("{d}\n"));
    }
    out.push_str(&format!(
        "{}, {}\n",
        plural(errors, "error"),
        plural(warnings, "warning")
    ));
    (u8::from(errors > 0), out, String::new())
}

/// `1 error`, `2 errors`, `0 errors`.
fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// A scenario file is one YAML mapping with `name` and `steps` and no `kind`; anything else
/// (including YAML that does not parse) is read as manifests, which reports the problem.
fn is_scenario(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    let file = path.display().to_string();
    match yaml::parse_documents(&file, &text) {
        Ok(docs) => docs.first().is_some_and(|(v, _)| {
            v.get("name").is_some() && v.get("steps").is_some() && v.get("kind").is_none()
        }),
        Err(_) => false,
    }
}

fn compare(path: Option<&Path>, seed: Option<u64>, format: Format) -> (u8, String, String) {
    let (files, path): (&dyn Files, PathBuf) = match path {
        None => (&EMBEDDED, PathBuf::from(DEFAULT_SCENARIO)),
        Some(p) => (&Disk, p.to_path_buf()),
    };
    let plan = match scenario::load(&path, files) {
        Ok(plan) => plan,
        Err(e) => return (2, String::new(), format!("{e}\n")),
    };
    let report = scenario::compare::compare(&plan, seed);
    let out = match format {
        Format::Text => report::text::compare(&report),
        Format::Json => serde_json::to_string_pretty(&report).unwrap_or_default() + "\n",
    };
    (0, out, String::new())
}

fn run(path: Option<&Path>, seed: Option<u64>, format: Format) -> (u8, String, String) {
    let files: (&dyn Files, PathBuf) = match path {
        None => (&EMBEDDED, PathBuf::from(DEFAULT_SCENARIO)),
        Some(p) => (&Disk, p.to_path_buf()),
    };
    let scenario_paths = if files.1.is_dir() {
        match scenario_files(&files.1) {
            Ok(p) => p,
            Err(e) => return (2, String::new(), format!("{}: {e}\n", files.1.display())),
        }
    } else {
        vec![files.1.clone()]
    };
    let mut reports: Vec<RunReport> = Vec::new();
    let mut err = String::new();
    let mut invalid = false;
    for p in &scenario_paths {
        match scenario::load(p, files.0) {
            Ok(plan) => reports.push(scenario::run(&plan, seed)),
            Err(e) => {
                err.push_str(&format!("{e}\n"));
                invalid = true;
            }
        }
    }
    let mut out = String::new();
    match format {
        Format::Json if scenario_paths.len() == 1 => {
            if let Some(r) = reports.first() {
                out.push_str(&report::json(r));
                out.push('\n');
            }
        }
        Format::Json => {
            out.push_str(&report::json_many(&reports));
            out.push('\n');
        }
        Format::Text => {
            for r in &reports {
                out.push_str(&report::text::render(r));
                out.push('\n');
            }
            if scenario_paths.len() > 1 {
                out.push_str(&report::text::summary(&reports));
            }
        }
    }
    let code = if invalid {
        2
    } else if reports.iter().all(|r| r.passed) {
        0
    } else {
        1
    };
    (code, out, err)
}

/// The scenario files of a directory: its `*.yaml` / `*.yml` files (not subdirectories,
/// where manifests live), sorted.
fn scenario_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file() && matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
        })
        .collect();
    files.sort();
    Ok(files)
}
