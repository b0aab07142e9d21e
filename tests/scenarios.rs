//! Every scenario in scenarios/ runs as its own test, through the same code path as
//! `canarysim run FILE`; a guard test fails when a scenario file is added without a test.

use canarysim::cli::{Cli, execute};
use clap::Parser;
use std::path::Path;

fn run_scenario(file: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(file);
    let (code, out, err) = execute(Cli::parse_from([
        "canarysim",
        "run",
        path.to_str().unwrap(),
    ]));
    assert_eq!(code, 0, "{file} did not pass:\n{out}{err}");
}

macro_rules! scenarios {
    ($($test:ident => $file:literal,)*) => {
        $(#[test] fn $test() { run_scenario($file); })*
        const LISTED: &[&str] = &[$($file),*];
    };
}

scenarios! {
    seed_004_walkthrough => "seed-004-walkthrough.yaml",
    seed_003_two_virtualservices_http_tls_tcp => "seed-003-multi-vs.yaml",
    seed_003_verbatim_sni_mismatch_is_reported_as_argo_does => "seed-003-verbatim-sni-mismatch.yaml",
    seed_003_subset_level_split => "seed-003-subset-level.yaml",
    abort_and_retry => "abort-and-retry.yaml",
    promote_full => "promote-full.yaml",
    header_route => "header-route.yaml",
    mirror_route => "mirror-route.yaml",
    dynamic_stable_scale => "dynamic-stable-scale.yaml",
    set_canary_scale => "set-canary-scale.yaml",
    basic_canary_approximates_the_weight_with_pods => "basic-canary-no-mesh.yaml",
    gateway_only_virtualservice_is_bypassed_by_mesh_callers => "gateway-only-virtualservice.yaml",
    no_mesh_keepalive_skew => "no-mesh-keepalive.yaml",
    canary_returns_errors => "canary-errors.yaml",
    fast_rollout_against_push_delay => "fast-rollout-push-delay.yaml",
    sequential_test_stops_the_load_early => "sequential-test.yaml",
    canary_pod_crash => "canary-pod-crash.yaml",
    missing_virtualservice_is_reported_on_the_rollout => "missing-virtualservice.yaml",
    analysis_is_warned_about_not_refused_nor_silently_passed => "analysis-not-simulated.yaml",
    route_translation_notes_reach_the_user => "route-notes.yaml",
}

#[test]
fn every_scenario_file_has_a_test() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if path.is_file() && name.ends_with(".yaml") && !LISTED.contains(&name.as_str()) {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "add these to tests/scenarios.rs: {missing:?}"
    );
}

#[test]
fn the_whole_directory_passes_with_a_summary_table() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let (code, out, err) = execute(Cli::parse_from(["canarysim", "run", dir.to_str().unwrap()]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!("{} passed, 0 failed", LISTED.len())),
        "{out}"
    );
}

/// A warning in a bundled scenario is either expected (`expect: {warnings: [...]}` makes the
/// runner check the exact set) or a mistake in the scenario.
#[test]
fn no_bundled_scenario_has_a_warning_it_does_not_expect() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut unexpected = Vec::new();
    for file in LISTED {
        let path = dir.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let (code, out, err) = execute(Cli::parse_from([
            "canarysim",
            "run",
            path.to_str().unwrap(),
            "--format",
            "json",
        ]));
        assert_eq!(code, 0, "{file}: {err}");
        let report: serde_json::Value = serde_json::from_str(&out).unwrap();
        let warnings = report["warnings"].as_array().unwrap();
        if !warnings.is_empty() && !text.contains("warnings:") {
            unexpected.push(format!("{file}: {warnings:?}"));
        }
    }
    assert!(unexpected.is_empty(), "{unexpected:#?}");
}
