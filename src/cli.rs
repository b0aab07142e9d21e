//! The command line (clap). Thin: it parses, calls the library, prints, and maps results to
//! exit codes (0 passed, 1 an expectation failed, 2 invalid input).

use clap::{Parser, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::report;
use crate::scenario::{self, Disk, Embedded, Files, RunReport};

/// The bundled scenario: `canarysim run` with no path runs it from the binary itself.
pub const DEFAULT_SCENARIO: &str = "scenarios/seed-004-walkthrough.yaml";

/// Files compiled into the binary.
pub const EMBEDDED: Embedded = Embedded(&[
    (
        DEFAULT_SCENARIO,
        include_str!("../scenarios/seed-004-walkthrough.yaml"),
    ),
    (
        "scenarios/manifests/seed-004-rollout.yaml",
        include_str!("../scenarios/manifests/seed-004-rollout.yaml"),
    ),
    (
        "scenarios/manifests/seed-004-rollout-update.yaml",
        include_str!("../scenarios/manifests/seed-004-rollout-update.yaml"),
    ),
    (
        "scenarios/manifests/seed-004-services.yaml",
        include_str!("../scenarios/manifests/seed-004-services.yaml"),
    ),
    (
        "scenarios/manifests/seed-004-gateway.yaml",
        include_str!("../scenarios/manifests/seed-004-gateway.yaml"),
    ),
    (
        "scenarios/manifests/seed-004-virtualsvc.yaml",
        include_str!("../scenarios/manifests/seed-004-virtualsvc.yaml"),
    ),
]);

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
    }
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
            out.push_str(&serde_json::to_string_pretty(&reports).expect("reports serialize"));
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
