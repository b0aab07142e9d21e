//! `canarysim check`: a repository's manifests, no scenario; per Rollout the share each
//! pause sent, its verdict, the share without a mesh and the lint findings.

use crate::support;
use canarysim::cli::{Cli, execute};
use clap::Parser;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn run(args: &[&str]) -> (u8, String, String) {
    let mut argv = vec!["canarysim"];
    argv.extend_from_slice(args);
    execute(Cli::parse_from(argv))
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn rendered_chart() -> PathBuf {
    root().join("tests/fixtures/helm/rendered.yaml")
}

fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}\n{out}"))
}

/// The seed walkthrough's objects in a folder, the VirtualService as `vs` writes it.
fn repository_with_virtual_service(vs: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in ["rollout", "services", "gateway"] {
        let file = format!("seed-004-{name}.yaml");
        std::fs::copy(
            root().join("scenarios/manifests").join(&file),
            dir.path().join(&file),
        )
        .unwrap();
    }
    std::fs::write(dir.path().join("vs.yaml"), vs).unwrap();
    dir
}

const SEED_VS: &str = include_str!("../../scenarios/manifests/seed-004-virtualsvc.yaml");

#[test]
fn a_rendered_chart_is_rolled_out_step_by_step_and_every_share_passes() {
    let chart = rendered_chart();
    let (code, out, err) = run(&["check", chart.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    let report = json(&out);
    let rollouts = report["rollouts"].as_array().unwrap();
    assert_eq!(rollouts.len(), 1, "{out}");
    let ro = &rollouts[0];
    assert_eq!(ro["name"], "rollouts-demo");
    assert_eq!(ro["phase"], "Healthy", "{out}");
    assert!(
        ro["router"]
            .as_str()
            .unwrap()
            .contains("rollouts-demo-gateway"),
        "loads go through the gateway the VirtualService is bound to: {out}"
    );
    let rows = ro["rows"].as_array().unwrap();
    let set: Vec<i64> = rows
        .iter()
        .map(|r| r["set_weight"].as_i64().unwrap())
        .collect();
    assert_eq!(set, [20, 40, 60, 80]);
    for row in rows {
        assert_eq!(row["verdict"], "pass", "{row}");
        assert_eq!(row["router_weight"], row["set_weight"], "{row}");
        let share = row["observed"]["share"].as_f64().unwrap() * 100.0;
        assert!(
            (share - row["set_weight"].as_f64().unwrap()).abs() < 1.0,
            "{row}"
        );
        // Without a mesh the split is per connection: 16 draws.
        assert_eq!(row["no_mesh"]["unit"], "connection", "{row}");
        assert_eq!(row["no_mesh"]["effective_n"], 16, "{row}");
    }
    // The chart's other objects are named once, apart from the Rollout's findings.
    let other = report["other_findings"].as_array().unwrap();
    assert!(
        other.iter().any(|f| f["message"]
            .as_str()
            .unwrap()
            .contains("1 HorizontalPodAutoscaler")),
        "{out}"
    );
    assert!(
        ro["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["message"].as_str().unwrap().contains("not to `mesh`")),
        "{out}"
    );
    // Text: a table per Rollout, the template named from helm's `# Source:`.
    let (code, text, _) = run(&["check", chart.to_str().unwrap()]);
    assert_eq!(code, 0);
    // Lines wrap at the terminal's width, so a long checkout path moves the break.
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("rendered.yaml:104:1 (# Source: demo/templates/seed-004-rollout.yaml)"),
        "{text}"
    );
    assert!(text.contains(" 1/9   20      20    20.05"), "{text}");
    assert!(text.contains("PASSED: 1 Rollout checked"), "{text}");
}

#[test]
fn a_route_that_hides_the_canary_fails_every_step_though_the_rollout_ends_healthy() {
    // An unmanaged route first: every request matches it, none reaches the weighted one.
    let vs = SEED_VS.replace(
        "  http:\n",
        "  http:\n  - name: everything-else\n    route:\n    - destination:\n        host: rollouts-demo-stable\n",
    );
    let repo = repository_with_virtual_service(&vs);
    let (code, out, err) = run(&["check", repo.path().to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, 1, "{out}{err}");
    let ro = &json(&out)["rollouts"][0];
    assert_eq!(ro["phase"], "Healthy", "Argo sees nothing wrong: {out}");
    for row in ro["rows"].as_array().unwrap() {
        assert_eq!(row["verdict"], "fail", "{row}");
        assert_eq!(row["observed"]["share"], 0.0, "{row}");
    }
    assert_eq!(ro["passed"], false);
    let (_, text, _) = run(&["check", repo.path().to_str().unwrap()]);
    assert!(text.contains("FAILED: 1 of 1 Rollout"), "{text}");
}

#[test]
fn too_few_requests_cannot_tell_and_say_how_many_would() {
    let repo = repository_with_virtual_service(SEED_VS);
    let dir = repo.path().to_str().unwrap();
    let (code, text, err) = run(&["check", dir, "--requests", "200", "--seed", "3"]);
    assert_eq!(code, 1, "{text}{err}");
    assert!(text.contains("inconclusive"), "{text}");
    assert!(text.contains("requests in all would decide"), "{text}");
    assert!(text.contains("CANNOT TELL YET"), "{text}");
    assert!(
        !text.contains(" fail "),
        "200 requests prove nothing wrong: {text}"
    );
    // The same seed gives the same report.
    assert_eq!(
        run(&["check", dir, "--requests", "200", "--seed", "3"]).1,
        text
    );
}

#[test]
fn an_analysis_step_without_its_template_is_skipped_with_a_note_and_the_indexes_kept() {
    let repo = repository_with_virtual_service(SEED_VS);
    let rollout = repo.path().join("seed-004-rollout.yaml");
    let text = std::fs::read_to_string(&rollout).unwrap().replace(
        "      - setWeight: 40\n",
        "      - analysis: {templates: [{templateName: success-rate}]}\n      - setWeight: 40\n",
    );
    std::fs::write(&rollout, text).unwrap();
    let (code, out, err) = run(&["check", repo.path().to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    let ro = &json(&out)["rollouts"][0];
    let notes = ro["notes"].to_string();
    assert!(
        notes.contains("step 2: analysis skipped (the weight stays 20%): AnalysisTemplate 'success-rate' is not among the manifests"),
        "{notes}"
    );
    let steps: Vec<i64> = ro["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["step"].as_i64().unwrap())
        .collect();
    assert_eq!(steps, [1, 4, 6, 8], "the user's step numbers: {out}");
    assert_eq!(ro["steps"], 10);
}

#[test]
fn no_rollout_is_nothing_to_check() {
    let services = root().join("scenarios/manifests/seed-004-services.yaml");
    let (code, _, err) = run(&["check", services.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no Rollout among the manifests"), "{err}");
}

#[test]
fn a_blue_green_rollout_shows_the_switch_through_its_active_and_preview_services() {
    let repo = tempfile::tempdir().unwrap();
    std::fs::copy(
        root().join("scenarios/manifests/rollout-bluegreen.yaml"),
        repo.path().join("rollout.yaml"),
    )
    .unwrap();
    let dir = repo.path().to_str().unwrap();
    let (code, out, err) = run(&["check", dir, "--requests", "20000", "--format", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    let ro = &json(&out)["rollouts"][0];
    assert_eq!(ro["phase"], "Healthy", "{out}");
    let rows = ro["rows"].as_array().unwrap();
    let seen: Vec<(String, i64, f64, f64)> = rows
        .iter()
        .map(|r| {
            (
                r["service"].as_str().unwrap().to_string(),
                r["set_weight"].as_i64().unwrap(),
                r["observed"]["share"].as_f64().unwrap(),
                r["pod_ratio"].as_f64().unwrap(),
            )
        })
        .collect();
    // Paused before the switch: production traffic all old, the preview all new; after
    // the promotion, production traffic all new. The new pods' share is of the ready
    // endpoints of the Service loaded, not of all the rollout's pods.
    assert_eq!(
        seen,
        [
            ("active".to_string(), 0, 0.0, 0.0),
            ("preview".to_string(), 100, 1.0, 1.0),
            ("active".to_string(), 100, 1.0, 1.0)
        ],
        "{out}"
    );
    assert!(rows.iter().all(|r| r["verdict"] == "pass"), "{out}");
    let (_, text, _) = run(&["check", dir, "--requests", "20000"]);
    assert!(text.contains("preview  100"), "{text}");
    assert!(text.contains("PASSED: 1 Rollout checked"), "{text}");
}

/// Each step's load goes through the Gateway's listener (port 8080) for the route's host.
/// Steps 30 → 40 need no new pod (5 replicas: 2 canary pods either way), so only the
/// HTTPRoute changes: the proxies must be pushed for it alone.
#[test]
fn a_gateway_api_rollout_is_loaded_through_its_gateways_listener_at_each_step() {
    let repo = tempfile::tempdir().unwrap();
    for file in ["gateway-api-routes.yaml", "gateway-api-rollout.yaml"] {
        std::fs::copy(
            root().join("scenarios/manifests").join(file),
            repo.path().join(file),
        )
        .unwrap();
    }
    let dir = repo.path().to_str().unwrap();
    let (code, out, err) = run(&["check", dir, "--format", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    let ro = &json(&out)["rollouts"][0];
    assert_eq!(ro["phase"], "Healthy", "{out}");
    let rows = ro["rows"].as_array().unwrap();
    let set: Vec<i64> = rows
        .iter()
        .map(|r| r["set_weight"].as_i64().unwrap())
        .collect();
    assert_eq!(set, [30, 40, 60, 80], "{out}");
    assert_eq!(ro["router"], "gateway default/istio-gateway", "{out}");
    for r in rows {
        let share = r["observed"]["share"].as_f64().unwrap();
        let set = r["set_weight"].as_f64().unwrap() / 100.0;
        assert!((share - set).abs() < 0.02, "{r}");
        assert_eq!(r["verdict"], "pass", "{r}");
    }
}

/// An AnalysisTemplate `name` of one metric `name` measured by `provider`, nesting
/// `nested` templates.
fn template(name: &str, provider: &str, nested: &[&str]) -> String {
    let nested: Vec<String> = nested
        .iter()
        .map(|n| format!("{{templateName: {n}}}"))
        .collect();
    format!(
        "---\napiVersion: argoproj.io/v1alpha1\nkind: AnalysisTemplate\nmetadata: {{name: {name}}}\nspec:\n  templates: [{}]\n  metrics:\n  - {{name: {name}, successCondition: 'result == true', provider: {provider}}}\n",
        nested.join(", ")
    )
}

/// Checks the blue-green example with a pre-promotion analysis of template `smoke` (among
/// `templates`): the report's notes and its rows.
fn check_with_pre_promotion_analysis(templates: &str) -> (Value, String) {
    let repo = tempfile::tempdir().unwrap();
    let manifests =
        std::fs::read_to_string(root().join("scenarios/manifests/rollout-bluegreen.yaml"))
            .unwrap()
            .replace(
                "      autoPromotionEnabled: false\n",
                "      autoPromotionEnabled: false\n      prePromotionAnalysis: {templates: [{templateName: smoke}]}\n",
            );
    std::fs::write(repo.path().join("rollout.yaml"), manifests + templates).unwrap();
    let dir = repo.path().to_str().unwrap();
    let (code, out, err) = run(&["check", dir, "--requests", "20000", "--format", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    let ro = json(&out)["rollouts"][0].clone();
    assert_eq!(ro["phase"], "Healthy", "{out}");
    assert_eq!(ro["rows"].as_array().unwrap().len(), 3, "{out}");
    (ro["notes"].clone(), out)
}

/// A Job's outcome is assumed (init scripts it Successful), so the analysis runs and gates
/// the switch; a web call cannot be assumed, so that analysis is skipped.
#[test]
fn a_promotion_analysis_canarysim_cannot_measure_is_assumed_or_skipped_with_a_note() {
    let job = "{job: {spec: {template: {spec: {containers: [{name: c, image: curl}], restartPolicy: Never}}}}}";
    let (notes, out) = check_with_pre_promotion_analysis(&template("smoke", job, &[]));
    assert_eq!(
        notes[0],
        "pre-promotion analysis: AnalysisTemplate 'smoke': metric 'smoke' is a Job, which canarysim does not run: each job is assumed to succeed",
        "{out}"
    );
    let web = "{web: {url: 'http://smoke/'}}";
    let (notes, out) = check_with_pre_promotion_analysis(&template("smoke", web, &[]));
    assert_eq!(
        notes[0],
        "pre-promotion analysis skipped: AnalysisTemplate 'smoke': metric 'smoke' uses the web provider, which canarysim does not run",
        "{out}"
    );
    // What a nested template needs counts for the template that nests it.
    let prometheus = "{prometheus: {address: 'http://prometheus:9090', query: 'vector(1)'}}";
    let nesting = template("smoke", prometheus, &["probe"]) + &template("probe", web, &[]);
    let (notes, out) = check_with_pre_promotion_analysis(&nesting);
    assert_eq!(
        notes[0],
        "pre-promotion analysis skipped: AnalysisTemplate 'smoke': it nests AnalysisTemplate 'probe': metric 'probe' uses the web provider, which canarysim does not run",
        "{out}"
    );
}

#[test]
fn the_json_report_follows_its_committed_schema() {
    let generated = canarysim::scenario::check::json_schema();
    let path = root().join("schemas/check.schema.json");
    support::assert_committed_as_generated(
        &path,
        &(serde_json::to_string_pretty(&generated).unwrap() + "\n"),
        "cargo test --test command_line -- check::",
    );
    let validator = jsonschema::draft202012::new(&generated).unwrap();
    let chart = rendered_chart();
    let (_, out, _) = run(&["check", chart.to_str().unwrap(), "--format", "json"]);
    let report = json(&out);
    let errors: Vec<String> = validator
        .iter_errors(&report)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    // Strict enough to refuse a report without a field or with one it does not know.
    let mut broken = report.clone();
    broken["rollouts"][0]
        .as_object_mut()
        .unwrap()
        .remove("rows");
    assert!(!validator.is_valid(&broken));
    let mut extra = report;
    extra["rollouts"][0]["rows"][0]["surprise"] = 1.into();
    assert!(!validator.is_valid(&extra));
}

#[test]
fn a_basic_canary_is_judged_through_kube_proxy_and_a_weight_the_pods_cannot_make_fails() {
    let walkthrough =
        std::fs::read_to_string(root().join("scenarios/basic-canary-no-mesh.yaml")).unwrap();
    let start = walkthrough.find("      apiVersion").unwrap();
    let end = walkthrough.find("steps:\n  - wait").unwrap();
    let rollout: String = walkthrough[start..end]
        .lines()
        .map(|l| format!("{}\n", l.get(6..).unwrap_or("")))
        .collect();
    let service = "---\napiVersion: v1\nkind: Service\nmetadata: {name: rollouts-demo}\nspec:\n  selector: {app: rollouts-demo}\n  ports: [{port: 80, name: http}]\n";
    let shares = |replicas: &str| {
        let dir = tempfile::tempdir().unwrap();
        let text = rollout.replace("replicas: 4", replicas) + service;
        std::fs::write(dir.path().join("all.yaml"), text).unwrap();
        let (code, out, err) = run(&["check", dir.path().to_str().unwrap(), "--format", "json"]);
        let ro = json(&out)["rollouts"][0].clone();
        assert_eq!(ro["router"], "kube-proxy (iptables)", "{out}{err}");
        let rows: Vec<(String, f64)> = ro["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                // A new connection per request: every request is a draw.
                assert_eq!(r["observed"]["effective_n"], 100_000, "{r}");
                (
                    r["verdict"].as_str().unwrap().to_string(),
                    r["observed"]["share"].as_f64().unwrap(),
                )
            })
            .collect();
        (code, rows)
    };
    // 4 replicas and the surge pod: 1, 2, 3, 4 canary pods of 5 make every weight exact.
    let (code, rows) = shares("replicas: 4");
    assert_eq!(code, 0, "{rows:?}");
    assert!(rows.iter().all(|(v, _)| v == "pass"), "{rows:?}");
    // 3 replicas: setWeight 20 is one canary pod of four, 25 %.
    let (code, rows) = shares("replicas: 3");
    assert_eq!(code, 1, "{rows:?}");
    assert_eq!(rows[0].0, "fail", "{rows:?}");
    assert!((rows[0].1 - 0.25).abs() < 0.01, "{rows:?}");
}

#[test]
fn a_rollout_written_twice_is_left_out_naming_both_places() {
    let repo = repository_with_virtual_service(SEED_VS);
    std::fs::copy(
        repo.path().join("seed-004-rollout.yaml"),
        repo.path().join("copy.yaml"),
    )
    .unwrap();
    let (code, out, err) = run(&["check", repo.path().to_str().unwrap()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("Rollout default/rollouts-demo: left out, written 2 times"),
        "{err}"
    );
    assert!(
        err.contains("copy.yaml:3:1") && err.contains("seed-004-rollout.yaml:3:1"),
        "{err}"
    );
}

/// Through an Ingress with session affinity each connection is a client pinned by its
/// cookie: by default each pause's load comes from 100,000 clients and passes; 16 clients
/// cannot tell a share within a point, and say what would.
#[test]
fn behind_session_affinity_the_share_is_of_clients() {
    let text = std::fs::read_to_string(root().join("tests/fixtures/nginx/manifests.yaml"))
        .unwrap()
        .replace(
            "    nginx.ingress.kubernetes.io/proxy-body-size: 8m",
            "    nginx.ingress.kubernetes.io/proxy-body-size: 8m\n    nginx.ingress.kubernetes.io/affinity: cookie",
        );
    let file = support::write_temp("sticky.yaml", &text);
    let path = file.to_str().unwrap();
    let (code, out, err) = run(&["check", path, "--format", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    let r = json(&out);
    for row in r["rollouts"][0]["rows"].as_array().unwrap() {
        assert_eq!(row["observed"]["unit"], "client", "{row}");
        assert_eq!(row["observed"]["effective_n"], 100_000, "{row}");
    }
    let (code, out, err) = run(&["check", path, "--connections", "16"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("CANNOT TELL YET"), "{out}");
    assert!(out.contains("clients in all would decide"), "{out}");
    assert!(out.contains("SHARE is of clients"), "{out}");
}
