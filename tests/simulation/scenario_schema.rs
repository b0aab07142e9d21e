//! `schemas/scenario.schema.json` (draft 2020-12), the schema editors use to complete and
//! check scenario files: it is the one generated from the scenario types
//! (`canarysim::scenario::format::json_schema`), every bundled scenario validates against
//! it, and files the parser refuses for their shape (an unknown key, a step that does not
//! exist, a value of the wrong form) do not.
//!
//! After a change to the scenario types, `CANARYSIM_WRITE_SCHEMA=1 cargo test --test
//! simulation -- scenario_schema::` writes the file anew.

use crate::support;
use jsonschema::Validator;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn schema_path() -> PathBuf {
    root().join("schemas/scenario.schema.json")
}

fn committed_schema() -> Value {
    let text = std::fs::read_to_string(schema_path()).expect("schemas/scenario.schema.json");
    serde_json::from_str(&text).expect("the schema is JSON")
}

fn validator() -> Validator {
    jsonschema::draft202012::new(&committed_schema()).expect("a valid draft 2020-12 schema")
}

/// A YAML file as the JSON value an editor's YAML language server checks.
fn as_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    let yaml: serde_yaml::Value =
        serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::to_value(yaml).unwrap()
}

fn errors(validator: &Validator, value: &Value) -> Vec<String> {
    validator
        .iter_errors(value)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

#[test]
fn the_committed_schema_is_the_one_generated_from_the_scenario_types() {
    let generated = canarysim::scenario::format::json_schema();
    support::assert_committed_as_generated(
        &schema_path(),
        &(serde_json::to_string_pretty(&generated).unwrap() + "\n"),
        "cargo test --test simulation -- scenario_schema::",
    );
    assert_eq!(
        generated["$schema"], "https://json-schema.org/draft/2020-12/schema",
        "draft 2020-12"
    );
}

#[test]
fn every_bundled_scenario_validates() {
    let validator = validator();
    let scenarios = support::files_with_extension(root().join("scenarios"), "yaml");
    assert!(scenarios.len() >= 40, "{} scenarios", scenarios.len());
    for path in scenarios {
        let errors = errors(&validator, &as_json(&path));
        assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
    }
}

#[test]
fn shapes_the_parser_refuses_do_not_validate() {
    let validator = validator();
    // Each of these is refused by `canarysim run` for its shape (tests/simulation/invalid_input.rs
    // checks the message); the schema must refuse it too, so an editor marks it.
    for name in [
        "a-manifest-not-a-scenario.yaml",
        "accept-unknown-outcome.yaml",
        "bad-percent.yaml",
        "unknown-expect-key.yaml",
        "unknown-step.yaml",
        "wait-until-typo.yaml",
    ] {
        let path = root().join("tests/fixtures/invalid").join(name);
        let errors = errors(&validator, &as_json(&path));
        assert!(!errors.is_empty(), "{name} validates, but run refuses it");
    }
}

#[test]
fn the_schema_knows_every_step_and_top_level_key() {
    let schema = committed_schema();
    let top: Vec<&str> = schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for key in [
        "name",
        "description",
        "seed",
        "namespace",
        "manifests",
        "cluster",
        "traffic",
        "steps",
    ] {
        assert!(top.contains(&key), "top-level key {key} missing: {top:?}");
    }
    let text = schema.to_string();
    for step in [
        "apply",
        "set_image",
        "promote",
        "abort",
        "retry",
        "pause",
        "undo",
        "restart",
        "status",
        "fail_pods",
        "wait",
        "load",
        "expect",
        "expect_split",
    ] {
        assert!(text.contains(&format!("\"{step}\"")), "step {step} missing");
    }
}
