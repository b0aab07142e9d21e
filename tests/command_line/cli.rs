//! End-to-end runs through the CLI entry point, in-process (`Cli::parse_from` + `execute`),
//! exactly as the binary runs them.

use crate::support;
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
        "{}:4:14: step 2, expect: unknown field `phse`",
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
    // A row per world under each load step; the draws with their unit in a column.
    assert!(text.contains("  mesh  "), "{text}");
    assert!(text.contains("  no mesh  "), "{text}");
    assert!(text.contains("100000 req"), "{text}");
    assert!(text.contains("16 conn"), "{text}");
}

/// Issue 26: tables fit a 100-column terminal, and the prose beside them wraps there. Counted
/// in characters, as the terminal shows them (✔, ±, — are one column, several bytes).
fn assert_fits_100_columns(what: &str, text: &str) {
    for line in text.lines() {
        let width = line.chars().count();
        assert!(
            width <= 100,
            "{what}: a line of {width} columns:\n{line}\n\n{text}"
        );
    }
}

#[test]
fn compare_plan_and_the_walkthrough_report_fit_100_columns() {
    let (code, compare, err) = run(&["compare"]);
    assert_eq!(code, 0, "{err}");
    assert_fits_100_columns("canarysim compare", &compare);
    let (code, report, err) = run(&["run"]);
    assert_eq!(code, 0, "{err}");
    assert!(report.contains("ROLE    VERSION  SHARE %"), "{report}");
    assert_fits_100_columns("canarysim run", &report);
    let (code, plan, err) = run(&["plan", "20%"]);
    assert_eq!(code, 0, "{err}");
    assert_fits_100_columns("canarysim plan 20%", &plan);
}

#[test]
fn a_per_connection_load_step_fits_100_columns_with_its_connection_columns() {
    // Through kube-proxy each connection chooses: the table shows the connections and the
    // requests' share besides the connections' share.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/no-mesh-keepalive.yaml");
    let (code, report, err) = run(&["run", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{report}{err}");
    assert!(report.contains("CONN %"), "{report}");
    assert!(report.contains("REQ %"), "{report}");
    assert_fits_100_columns("canarysim run no-mesh-keepalive-skew", &report);
}

/// The keep-alive half of `scenarios/no-mesh-keepalive.yaml`, with `expect_split`'s keys
/// given: 20 keep-alive connections are 20 draws, an inconclusive split.
fn keepalive_split_scenario(keys: &str) -> String {
    format!(
        r#"name: keepalive-{keys_name}
seed: 12
manifests:
  - inline: |
      apiVersion: argoproj.io/v1alpha1
      kind: Rollout
      metadata: {{name: demo}}
      spec:
        replicas: 4
        selector: {{matchLabels: {{app: demo}}}}
        template:
          metadata: {{labels: {{app: demo}}}}
          spec: {{containers: [{{name: demo, image: "demo:blue"}}]}}
        strategy: {{canary: {{steps: [{{setWeight: 20}}, {{pause: {{}}}}]}}}}
      ---
      {{apiVersion: v1, kind: Service, metadata: {{name: demo}}, spec: {{selector: {{app: demo}}, ports: [{{port: 80}}]}}}}
traffic: {{host: demo, origin: plain, connections: 20}}
steps:
  - wait: {{until: healthy, timeout: 1m}}
  - set_image: {{rollout: demo, container: demo, image: "demo:yellow"}}
  - wait: {{until: paused, timeout: 1m}}
  - load: {{requests: 10000}}
  - expect_split: {{canary: 20%{keys}}}
"#,
        keys_name = keys.len()
    )
}

#[test]
fn expect_split_accepts_the_outcomes_it_names() {
    let check = |keys: &str| {
        let path = write_temp(
            &format!("split-accept-{}.yaml", keys.len()),
            &keepalive_split_scenario(keys),
        );
        run(&["run", path.to_str().unwrap()])
    };
    // Pass only by default: inconclusive fails the step, and says what would decide.
    let (code, out, _) = check("");
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("INCONCLUSIVE: split is made per connection"),
        "{out}"
    );
    assert!(
        out.contains("inconclusive counts as a failure here"),
        "{out}"
    );
    assert!(out.contains("more connections would decide"), "{out}");
    let (code, out, _) = check(", accept: [pass, inconclusive]");
    assert_eq!(code, 0, "{out}");
    let (code, out, _) = check(", accept: inconclusive");
    assert_eq!(code, 0, "{out}");
    // `accept: fail` asserts a wrong weight; 20 draws cannot show one.
    let (code, out, _) = check(", accept: fail");
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("outcome: inconclusive (accepted: fail): FAILED"),
        "{out}"
    );
    // The older `verdict: fail` meant "not shown within tolerance": it still holds.
    let (code, out, _) = check(", verdict: fail");
    assert_eq!(code, 0, "{out}");
    // Both forms at once: invalid input, named where it is written.
    let (code, _, err) = check(", verdict: fail, accept: fail");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not both"), "{err}");
}

#[test]
fn plan_gives_the_sizes_that_decide() {
    let (code, out, err) = run(&["plan", "5%", "--within", "0.5", "--confidence", "99%"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("12607  the interval is ±0.5 points wide"),
        "{out}"
    );
    assert!(
        out.contains("a right split (5 %) passes with a 90 % chance"),
        "{out}"
    );
    let (code, out, _) = run(&[
        "plan",
        "20%",
        "--confidence",
        "99.9%",
        "--power",
        "99%",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0);
    let plan: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        plan["right_split"]["pass"].as_f64().unwrap() >= 0.99,
        "{plan}"
    );
    assert!(
        plan["wrong_split"]["fail"].as_f64().unwrap() >= 0.99,
        "{plan}"
    );
    assert_eq!(plan["wrong_share"], 0.22);
    for bad in [
        &["plan", "120%"][..],
        &["plan", "20%", "--within", "0"],
        &["plan", "20%", "--power", "1"],
    ] {
        let (code, _, err) = run(bad);
        assert_eq!(code, 2, "{bad:?}: {err}");
    }
}

#[test]
fn tui_without_a_terminal_is_exit_2_saying_so() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_canarysim"))
        .arg("tui")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("canarysim tui: needs a terminal"), "{err}");
}

#[test]
fn backend_takes_its_version_as_name_and_keeps_the_older_spelling() {
    for flag in ["--name", "--version"] {
        let cli = Cli::try_parse_from(["canarysim", "backend", flag, "yellow"])
            .unwrap_or_else(|e| panic!("{flag}: {e}"));
        match cli.command {
            canarysim::cli::Command::Backend(args) => {
                assert_eq!(args.version_name, "yellow", "{flag}")
            }
            other => panic!("{flag}: parsed as {other:?}"),
        }
    }
    let help = Cli::try_parse_from(["canarysim", "backend", "--help"])
        .unwrap_err()
        .to_string();
    assert!(help.contains("--name <NAME>"), "{help}");
}

/// `helm template . | canarysim lint -`: standard input is linted like a file, named STDIN
/// in messages (as kubectl names it), and may be given beside files.
/// `lint DIR` reads a repository as it is: every manifest and scenario at any depth (JSON
/// too), the rest passed over with the reason on stderr, dot-folders skipped; a folder with
/// nothing to check is bad input.
#[test]
fn lint_reads_a_folder_at_every_depth_and_says_what_it_passed_over() {
    let repo = tempfile::tempdir().unwrap();
    let dir = repo.path();
    let write = |path: &str, text: &str| {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    let rendered = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/helm/rendered.yaml"
    );
    write(
        "deploy/base/all.yaml",
        &std::fs::read_to_string(rendered).unwrap(),
    );
    write(
        "deploy/extra/settings.json",
        r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}}"#,
    );
    write(
        "chart/Chart.yaml",
        "apiVersion: v2\nname: demo\nversion: 0.1.0\n",
    );
    write("chart/values.yaml", "replicas: 3\n");
    write(
        "chart/templates/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n",
    );
    write(".github/workflows/ci.yml", "on: push\njobs: {}\n");
    write("notes.txt", "kind: ConfigMap\n");
    let shown = dir.to_str().unwrap();
    let (code, out, err) = run(&["lint", shown]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("warning: not simulated: 1 ServiceAccount, 1 Secret, 2 ConfigMaps,"),
        "the JSON file's ConfigMap is counted with the chart's: {out}"
    );
    let passed_over: Vec<&str> = err.lines().collect();
    assert_eq!(
        passed_over,
        [
            format!(
                "{shown}/chart/Chart.yaml: passed over: no document has a `kind`: not Kubernetes objects"
            ),
            format!(
                "{shown}/chart/templates/cm.yaml: passed over: a template, not manifests until rendered (`helm template … | canarysim lint -`)"
            ),
            format!(
                "{shown}/chart/values.yaml: passed over: no document has a `kind`: not Kubernetes objects"
            ),
        ],
        "{err}"
    );
    // A broken manifest in the tree is an error at its place, as a file named would be.
    write("deploy/extra/broken.yaml", "apiVersion: v1\nkind: [\n");
    let (code, _, err) = run(&["lint", shown]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!("{shown}/deploy/extra/broken.yaml:3:1: ")),
        "{err}"
    );
    // Nothing to check: exit 2, said so.
    let empty = tempfile::tempdir().unwrap();
    std::fs::write(empty.path().join("values.yaml"), "replicas: 3\n").unwrap();
    let (code, _, err) = run(&["lint", empty.path().to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(
            "no Kubernetes manifests or scenarios (*.yaml, *.yml, *.json) in this folder or below"
        ),
        "{err}"
    );
}

/// `init` writes the scenario that rolls a repository's Rollout out through every step and
/// judges the share at each pause; `run` passes it, as written, from where it is written.
#[test]
fn init_writes_a_scenario_that_rolls_the_rollout_out_and_run_passes_it() {
    let repo = tempfile::tempdir().unwrap();
    let deploy = repo.path().join("deploy");
    std::fs::create_dir_all(&deploy).unwrap();
    let rendered = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/helm/rendered.yaml"
    );
    std::fs::copy(rendered, deploy.join("all.yaml")).unwrap();
    let out_dir = repo.path().join("checks");
    std::fs::create_dir_all(&out_dir).unwrap();
    let scenario = out_dir.join("rollout.yaml");
    let (code, out, err) = run(&[
        "init",
        deploy.to_str().unwrap(),
        "-o",
        scenario.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let text = std::fs::read_to_string(&scenario).unwrap();
    assert!(text.contains("- file: ../deploy/all.yaml"), "{text}");
    let expected_splits: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("canary: "))
        .collect();
    assert_eq!(expected_splits, ["20%", "40%", "60%", "80%"], "{text}");
    let (code, out, err) = run(&["run", scenario.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("PASSED: 24 steps"), "{out}");
    // A repository with no Rollout has nothing to roll out.
    let (code, _, err) = run(&[
        "init",
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scenarios/manifests/seed-004-services.yaml"
        ),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no Rollout among the manifests"), "{err}");
}

#[test]
fn lint_reads_standard_input_for_a_dash() {
    use std::io::Write;
    let manifests = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/manifests");
    let lint = |args: &[&str], stdin: &str| {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_canarysim"))
            .arg("lint")
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // The seed walkthrough's manifest files, as one stream.
    let stream_of = |files: &[&str]| -> String {
        files
            .iter()
            .map(|f| {
                std::fs::read_to_string(format!("{manifests}/seed-004-{f}.yaml")).unwrap()
                    + "\n---\n"
            })
            .collect()
    };
    let stream = stream_of(&["rollout", "services", "gateway", "virtualsvc"]);
    let (code, out, err) = lint(&["-"], &stream);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.ends_with("0 errors, 1 warning\n"), "{out}");
    assert!(
        out.starts_with("STDIN:"),
        "the gateway-only binding, at its line: {out}"
    );

    // The stream without its Services: references into it are checked as for a file.
    let services = format!("{manifests}/seed-004-services.yaml");
    let without = stream_of(&["rollout", "gateway", "virtualsvc"]);
    let (code, out, _) = lint(&["-"], &without);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("STDIN:"), "{out}");
    let (code, out, err) = lint(&["-", &services], &without);
    assert_eq!(code, Some(0), "{out}{err}");

    // Broken input is named STDIN with its line and column.
    let (code, _, err) = lint(&["-"], "apiVersion: v1\nkind: [\n");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.starts_with("STDIN:"), "{err}");

    // A chart's rendering: the kinds canarysim only stores are named once, and pass.
    let rendered = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/helm/rendered.yaml"
    );
    let (code, out, err) = lint(&["-"], &std::fs::read_to_string(rendered).unwrap());
    assert_eq!(code, Some(0), "{out}{err}");
    let stored: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("not simulated:"))
        .collect();
    assert_eq!(
        stored,
        [
            "STDIN:5:1: warning: not simulated: 1 ServiceAccount, 1 Secret, 1 ConfigMap, \
          1 NetworkPolicy, 1 Deployment, 1 HorizontalPodAutoscaler; kept and served \
          as written, but nothing in the simulated cluster acts on them"
        ],
        "{out}"
    );
    assert!(out.ends_with("0 errors, 2 warnings\n"), "{out}");
    // A finding in a rendered document names the chart template helm's `# Source:` gives.
    let wrong = std::fs::read_to_string(rendered)
        .unwrap()
        .replace("setWeight: 20", "setWeight: 120");
    let (code, out, _) = lint(&["-"], &wrong);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("SetWeight needs to be between 0 and 100 (# Source: demo/templates/seed-004-rollout.yaml)\n"),
        "{out}"
    );
    // A misspelt kind is an error where it is written, not an object stored.
    let misspelt = std::fs::read_to_string(rendered)
        .unwrap()
        .replace("kind: ConfigMap", "kind: ConfigMpa");
    let (code, _, err) = lint(&["-"], &misspelt);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(
            "no matches for kind \"ConfigMpa\" in version \"v1\"; did you mean ConfigMap? \
             (# Source: demo/templates/configmap.yaml)"
        ),
        "{err}"
    );
}

#[test]
fn compare_keeps_a_blue_green_rollout_applied_by_a_step_on_its_own_services() {
    let manifest =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/manifests/rollout-bluegreen.yaml");
    let text = format!(
        "name: applied-blue-green\nnamespace: default\ntraffic: {{host: rollout-bluegreen-active, keepalive: false}}\nsteps:\n  - apply: {{file: {}}}\n  - wait: {{until: healthy, timeout: 1m}}\n  - set_image: {{rollout: rollout-bluegreen, container: rollouts-demo, image: argoproj/rollouts-demo:green}}\n  - wait: {{until: paused, timeout: 1m}}\n  - load: {{requests: 2000}}\n  - load: {{requests: 2000, host: rollout-bluegreen-preview}}\n",
        manifest.display()
    );
    let path = write_temp("applied-blue-green.yaml", &text);
    let (code, out, err) = run(&["compare", path.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let shares: Vec<(f64, f64)> = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["mesh"]["share"].as_f64().unwrap(),
                r["no_mesh"]["share"].as_f64().unwrap(),
            )
        })
        .collect();
    // At the pause the active Service holds the old pods, the preview the new, mesh or not
    // (through a Service over all the pods the no-mesh loads would see half of each).
    assert_eq!(shares, [(0.0, 0.0), (1.0, 1.0)], "{out}");
}
