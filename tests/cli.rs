//! End-to-end runs through the CLI entry point, in-process (`Cli::parse_from` + `execute`),
//! exactly as the binary runs them.

mod support;
use support::write_temp;

use canarysim::cli::{Cli, execute};
use clap::Parser;
use std::path::Path;

fn run(args: &[&str]) -> (u8, String, String) {
    let mut argv = vec!["canarysim"];
    argv.extend_from_slice(args);
    execute(Cli::parse_from(argv))
}

#[test]
fn run_without_a_path_runs_the_bundled_walkthrough_and_passes() {
    let (code, out, err) = run(&["run"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("scenario seed-004-istio-walkthrough"));
    assert!(out.contains("  Step:          1/9"), "{out}");
    assert!(out.contains("  Step:          3/9"), "{out}");
    assert!(out.contains("rollouts-demo-5cf4fb69f8"), "{out}");
    assert!(out.contains("PASSED: 20 steps"), "{out}");
}

#[test]
fn the_same_seed_gives_the_same_report_byte_for_byte() {
    let a = run(&["run", "--format", "json"]);
    let b = run(&["run", "--format", "json"]);
    assert_eq!(a, b);
    let c = run(&["run", "--format", "json", "--seed", "2"]);
    assert_ne!(a.1, c.1, "another seed names pods differently");
}

#[test]
fn bundled_scenario_runs_the_same_from_disk() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/seed-004-walkthrough.yaml");
    let (code, out, _) = run(&["run", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn a_failed_expectation_exits_1_and_says_expected_vs_actual() {
    let manifests = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/manifests");
    let text = format!(
        "name: wrong-weight\nnamespace: my-demo\nmanifests:\n  - file: {0}/seed-004-rollout.yaml\n  - file: {0}/seed-004-services.yaml\n  - file: {0}/seed-004-virtualsvc.yaml\nsteps:\n  - wait: {{until: healthy}}\n  - expect: {{phase: Paused}}\n",
        manifests.display()
    );
    let path = write_temp("wrong.yaml", &text);
    let (code, out, _) = run(&["run", path.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("phase: expected Paused, got Healthy"), "{out}");
}

#[test]
fn an_unknown_key_exits_2_with_path_line_column() {
    let path = write_temp(
        "typo.yaml",
        "name: t\nsteps:\n  - wait: 1s\n  - expect: {phse: Paused}\n",
    );
    let (code, out, err) = run(&["run", path.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    let want = format!(
        "{}:4:14: steps[1].expect: unknown field `phse`",
        path.display()
    );
    assert!(err.starts_with(&want), "{err}");
}

#[test]
fn compare_shows_the_mesh_at_the_set_weight_and_the_no_mesh_split_at_the_pod_ratio() {
    let (code, out, err) = run(&["compare", "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = report["rows"].as_array().unwrap();
    let set: Vec<i64> = rows
        .iter()
        .map(|r| r["set_weight"].as_i64().unwrap())
        .collect();
    assert_eq!(set, [20, 40, 100]);
    for row in rows {
        let set = row["set_weight"].as_f64().unwrap();
        // Through the mesh: within ±1 point of the set weight, per request.
        assert!(
            row["mesh"]["error_points"].as_f64().unwrap().abs() <= 1.0,
            "{row}"
        );
        assert_eq!(row["mesh"]["unit"], "request");
        // Without it: the basic canary's pods are at the set weight here (1 of 5, 2 of 5,
        // all), and the split is per connection, 16 of them: a much wider interval.
        assert!(
            (row["pod_ratio"].as_f64().unwrap() * 100.0 - set).abs() < 1e-9,
            "{row}"
        );
        assert_eq!(row["no_mesh"]["unit"], "connection");
        assert_eq!(row["no_mesh"]["effective_n"], 16);
        let width = |o: &serde_json::Value| {
            o["interval"]["hi"].as_f64().unwrap() - o["interval"]["lo"].as_f64().unwrap()
        };
        assert!(width(&row["no_mesh"]) > 10.0 * width(&row["mesh"]), "{row}");
    }
    let (code, text, _) = run(&["compare"]);
    assert_eq!(code, 0);
    assert!(text.contains("NO MESH OBSERVED"), "{text}");
}
