//! The JSON report (`canarysim run --format json`) against `schemas/report.schema.json`
//! (draft 2020-12): every bundled scenario's report validates, a directory run is an array of
//! valid reports, and reports with a missing field, a wrong type or an unknown key do not.

use crate::support;
use canarysim::cli::{Cli, execute};
use clap::Parser;
use jsonschema::Validator;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn schema() -> Value {
    let text = std::fs::read_to_string(root().join("schemas/report.schema.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn validator() -> Validator {
    jsonschema::draft202012::new(&schema()).unwrap()
}

/// `canarysim run PATH --format json`, parsed; the run must not be invalid input.
fn json_report(path: &Path) -> Value {
    let (code, out, err) = execute(Cli::parse_from([
        "canarysim",
        "run",
        path.to_str().unwrap(),
        "--format",
        "json",
    ]));
    assert!(code < 2, "{}: exit {code}: {err}", path.display());
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{}: {e}\n{out}", path.display()))
}

/// Every way `report` breaks the schema, with where.
fn errors(validator: &Validator, report: &Value) -> Vec<String> {
    validator
        .iter_errors(report)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

fn scenarios() -> Vec<PathBuf> {
    support::files_with_extension(root().join("scenarios"), "yaml")
}

/// The walkthrough's report: it has pauses (so steps with `views`) and final views.
fn walkthrough() -> Value {
    json_report(&root().join("scenarios/seed-004-walkthrough.yaml"))
}

#[test]
fn the_schema_is_a_valid_draft_2020_12_schema() {
    let schema = schema();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    if let Err(e) = jsonschema::meta::validate(&schema) {
        panic!("{e}");
    }
}

#[test]
fn every_scenario_report_matches_the_schema() {
    let validator = validator();
    let files = scenarios();
    assert!(files.len() >= 10, "{files:?}");
    let mut failures = Vec::new();
    let mut steps_with_views = 0;
    for path in &files {
        let report = json_report(path);
        steps_with_views += report["steps"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s.get("views").is_some())
            .count();
        for e in errors(&validator, &report) {
            failures.push(format!("{}: {e}", path.display()));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    assert!(steps_with_views > 0, "no report exercised steps[].views");
}

#[test]
fn a_directory_run_is_an_array_of_valid_reports() {
    let validator = validator();
    let reports = json_report(&root().join("scenarios"));
    let reports = reports.as_array().expect("a directory run prints an array");
    assert_eq!(reports.len(), scenarios().len());
    for report in reports {
        assert_eq!(errors(&validator, report), Vec::<String>::new());
    }
}

/// A change that makes a valid report invalid.
type Breaker = Box<dyn Fn(&mut Value)>;

#[test]
fn reports_that_break_the_contract_fail_validation() {
    let validator = validator();
    let valid = walkthrough();
    assert!(validator.is_valid(&valid));

    // (what, the instance path the validator must name, how to break a valid report)
    let broken: Vec<(&str, &str, Breaker)> = vec![
        (
            "missing top-level field",
            "",
            Box::new(|r| {
                r.as_object_mut().unwrap().remove("seed");
            }),
        ),
        (
            "missing step field",
            "/steps/0",
            Box::new(|r| {
                r["steps"][0].as_object_mut().unwrap().remove("detail");
            }),
        ),
        (
            "wrong type",
            "/steps/0/time_ms",
            Box::new(|r| r["steps"][0]["time_ms"] = json!("1000")),
        ),
        (
            "negative seed",
            "/seed",
            Box::new(|r| r["seed"] = json!(-1)),
        ),
        (
            "passed as a string",
            "/passed",
            Box::new(|r| r["passed"] = json!("true")),
        ),
        (
            "unknown top-level key",
            "",
            Box::new(|r| r["verdict"] = json!("ok")),
        ),
        (
            "unknown step key",
            "/steps/0",
            Box::new(|r| r["steps"][0]["weights"] = json!({})),
        ),
        (
            "unknown action",
            "/steps/0/action",
            Box::new(|r| r["steps"][0]["action"] = json!("deploy")),
        ),
        (
            "time not in virtual-time form",
            "/steps/0/time",
            Box::new(|r| r["steps"][0]["time"] = json!("00:01:05")),
        ),
        (
            "violation without a message",
            "/violations/0",
            Box::new(|r| r["violations"] = json!([{"time": "t+1s", "time_ms": 1000}])),
        ),
    ];
    for (what, path, breaks) in broken {
        let mut report = valid.clone();
        breaks(&mut report);
        let found = errors(&validator, &report);
        assert!(
            found.iter().any(|e| e.starts_with(&format!("{path}: "))),
            "{what}: want an error at `{path}`, got {found:?}"
        );
    }
}

#[test]
fn load_steps_carry_their_report_and_a_broken_one_fails() {
    let validator = validator();
    let report = walkthrough();
    let load_step = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .position(|s| s["action"] == "load")
        .expect("the walkthrough has load steps");
    assert!(report["steps"][load_step]["load"]["sent"].as_u64().unwrap() > 0);
    let mut broken = report.clone();
    broken["steps"][load_step]["load"]
        .as_object_mut()
        .unwrap()
        .remove("sent");
    assert!(!validator.is_valid(&broken), "a load report without `sent`");
    let mut broken = report;
    broken["steps"][load_step]["load"]["unit"] = json!("packet");
    assert!(!validator.is_valid(&broken), "an unknown unit");
}
