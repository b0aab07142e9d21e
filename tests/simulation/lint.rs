//! `canarysim lint`, in-process. Every fixture in tests/fixtures/lint/ holds one problem and
//! starts with the exact `# expect: path:line:column: severity: message` line(s) it must
//! produce — nothing more; `clean.yaml` must produce none. The seed manifests must give
//! only the warning about their gateway-only VirtualService.

use crate::support;
use support::write_temp;

use canarysim::cli::{Cli, execute};
use clap::Parser;
use std::path::{Path, PathBuf};

fn lint(files: &[&str]) -> (u8, String, String) {
    let mut argv = vec!["canarysim", "lint"];
    argv.extend_from_slice(files);
    execute(Cli::parse_from(argv))
}

/// Relative paths are shown as given, so the fixtures' `# expect:` lines name them from the
/// crate root.
fn at_crate_root() {
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
}

/// The diagnostics of a lint run (stdout without the summary line).
fn diagnostics(out: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = out.lines().collect();
    lines.pop();
    lines
}

fn fixtures() -> Vec<PathBuf> {
    support::files_with_extension("tests/fixtures/lint", "yaml")
}

#[test]
fn every_fixture_gives_exactly_its_expected_diagnostics() {
    at_crate_root();
    let fixtures = fixtures();
    assert!(fixtures.len() >= 14, "fixtures: {fixtures:?}");
    let mut failures = Vec::new();
    for path in fixtures.iter().filter(|p| !p.ends_with("clean.yaml")) {
        let text = std::fs::read_to_string(path).unwrap();
        let want: Vec<&str> = text
            .lines()
            .map_while(|l| l.strip_prefix("# expect: "))
            .collect();
        assert!(
            !want.is_empty(),
            "{} lacks its `# expect:` line",
            path.display()
        );
        let (code, out, err) = lint(&[path.to_str().unwrap()]);
        let errors = want.iter().filter(|l| l.contains(": error: ")).count();
        let warnings = want.len() - errors;
        let summary = format!(
            "{errors} error{}, {warnings} warning{}",
            if errors == 1 { "" } else { "s" },
            if warnings == 1 { "" } else { "s" }
        );
        let want_code = u8::from(errors > 0);
        if diagnostics(&out) != want
            || out.lines().last() != Some(summary.as_str())
            || code != want_code
            || !err.is_empty()
        {
            failures.push(format!(
                "{}: exit {code} (want {want_code})\n  want: {}\n  got:  {}{err}",
                path.display(),
                want.join("\n        "),
                out.trim_end().replace('\n', "\n        ")
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn the_clean_fixture_gives_no_diagnostics() {
    at_crate_root();
    let (code, out, err) = lint(&["tests/fixtures/lint/clean.yaml"]);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (0, "0 errors, 0 warnings\n", "")
    );
}

/// The fixtures pin whole lines; this pins that the messages are Argo's own words
/// (ARGO-BEHAVIOR.md §7), so an expect line cannot drift to a paraphrase.
#[test]
fn messages_are_argos_words() {
    at_crate_root();
    let cases = [
        (
            "missing-canary-service",
            "spec.strategy.canary.canaryService: Invalid value: \"demo-canary\": service \"demo-canary\" not found",
        ),
        (
            "missing-virtualservice",
            "virtualservices.networking.istio.io \"demo-vsvc\" not found",
        ),
        (
            "route-not-in-vs",
            "HTTP Route 'main' is not found in the defined Virtual Service.",
        ),
        (
            "tls-route-not-matching",
            "No matching TLS routes found in the defined Virtual Service.",
        ),
        (
            "missing-destinationrule",
            "destinationrules.networking.istio.io \"demo-destrule\" not found",
        ),
        (
            "subset-missing-from-route",
            "Canary DestinationRule subset 'canary' not found in route",
        ),
        ("setweight-150", "SetWeight needs to be between 0 and 100"),
        (
            "same-service",
            "This rollout uses the same service for the stable and canary services, but two different services are required.",
        ),
        (
            "header-route-without-managed-routes",
            "Rollout has missing field 'spec.strategy.canary.trafficRouting.managedRoutes'",
        ),
    ];
    for (fixture, words) in cases {
        let path = format!("tests/fixtures/lint/{fixture}.yaml");
        let (code, out, _) = lint(&[&path]);
        assert_eq!(code, 1, "{out}");
        assert!(out.contains(words), "{fixture}: {out}");
        assert!(out.contains("The Rollout \"demo\" is invalid: ") == fixture_is_spec(fixture));
    }
}

/// Spec validation errors carry the InvalidSpec condition's prefix; reference and route
/// errors are the bare field errors Argo's reference validation returns.
fn fixture_is_spec(fixture: &str) -> bool {
    matches!(
        fixture,
        "setweight-150" | "same-service" | "header-route-without-managed-routes"
    )
}

#[test]
fn a_fractional_weight_is_not_hidden_behind_a_decode_error() {
    at_crate_root();
    for fixture in ["setweight-fractional", "vs-weight-fractional"] {
        let (_, out, _) = lint(&[&format!("tests/fixtures/lint/{fixture}.yaml")]);
        assert!(out.contains("is not a whole percent"), "{out}");
        assert!(!out.contains("cannot be decoded"), "{out}");
        assert!(!out.contains("Unable to get"), "{out}");
    }
}

#[test]
fn seed_004_manifests_give_only_the_gateway_binding_warning() {
    at_crate_root();
    let mut files: Vec<String> = std::fs::read_dir("scenarios/manifests")
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|p| p.contains("/seed-004-"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 5, "{files:?}");
    let args: Vec<&str> = files.iter().map(String::as_str).collect();
    let (code, out, err) = lint(&args);
    let want = "scenarios/manifests/seed-004-virtualsvc.yaml:7:5: warning: VirtualService \"rollouts-demo-vsvc\" is bound to gateways [rollouts-demo-gateway] but not to `mesh`: in-mesh callers bypass its weights and split by the Services' endpoints (add `mesh` to spec.gateways)\n0 errors, 1 warning\n";
    assert_eq!((code, out.as_str(), err.as_str()), (0, want, ""));

    // The walkthrough scenario applies the same manifests (two versions of the Rollout):
    // the same single warning, reported once.
    let (code, scenario_out, _) = lint(&["scenarios/seed-004-walkthrough.yaml"]);
    assert_eq!((code, scenario_out.as_str()), (0, want));
}

#[test]
fn objects_refer_to_each_other_across_files() {
    at_crate_root();
    let rollout = "scenarios/manifests/seed-004-rollout.yaml";
    let (code, out, _) = lint(&[rollout]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("service \"rollouts-demo-canary\" not found"),
        "{out}"
    );
    assert!(out.ends_with("3 errors, 0 warnings\n"), "{out}");
    let (code, out, _) = lint(&[
        rollout,
        "scenarios/manifests/seed-004-services.yaml",
        "scenarios/manifests/seed-004-virtualsvc.yaml",
        "scenarios/manifests/seed-004-gateway.yaml",
    ]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn diagnostics_are_sorted_by_file_line_and_column() {
    at_crate_root();
    // Files whose objects do not collide (the fixtures all define `demo`), given unsorted.
    let (code, out, _) = lint(&[
        "tests/fixtures/lint/vs-weight-fractional.yaml",
        "scenarios/manifests/seed-004-virtualsvc.yaml",
        "scenarios/manifests/seed-004-rollout.yaml",
    ]);
    assert_eq!(code, 1, "{out}");
    let got = diagnostics(&out);
    let key = |l: &str| {
        let mut parts = l.splitn(4, ':');
        let file = parts.next().unwrap_or("").to_string();
        let line: usize = parts.next().unwrap_or("0").parse().unwrap_or(0);
        let col: usize = parts.next().unwrap_or("0").parse().unwrap_or(0);
        (file, line, col)
    };
    let mut sorted = got.clone();
    sorted.sort_by_key(|l| key(l));
    assert_eq!(got, sorted);
    assert!(got[0].starts_with("scenarios/manifests/seed-004-rollout.yaml:11:22: error: "));
    assert!(got[1].starts_with("scenarios/manifests/seed-004-rollout.yaml:12:22: error: "));
    assert!(out.ends_with("4 errors, 2 warnings\n"), "{out}");
}

#[test]
fn a_scenario_with_a_missing_reference_is_linted_not_rejected() {
    at_crate_root();
    // `run` refuses this scenario (exit 2); `lint` reports the same finding as a diagnostic.
    let path = "tests/fixtures/invalid/missing-service.yaml";
    let text = std::fs::read_to_string(path).unwrap();
    let want = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("# expect: "))
        .unwrap();
    let (code, out, _) = lint(&[path]);
    assert_eq!(code, 1, "{out}");
    let (location, message) = want.split_once(": ").unwrap();
    assert!(
        out.contains(&format!("{location}: error: {message}")),
        "{out}"
    );
}

#[test]
fn an_invalid_scenario_exits_2_with_its_error() {
    at_crate_root();
    let path = "tests/fixtures/invalid/unknown-step.yaml";
    let text = std::fs::read_to_string(path).unwrap();
    let want = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("# expect: "))
        .unwrap();
    let (code, out, err) = lint(&[path]);
    assert_eq!(code, 2);
    assert!(out.is_empty(), "{out}");
    assert!(err.starts_with(want), "{err}");
}

#[test]
fn an_unparsable_manifest_exits_2_with_path_line_column() {
    at_crate_root();
    let path = write_temp(
        "broken.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: [a\n",
    );
    let (code, out, err) = lint(&[path.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(out.is_empty(), "{out}");
    assert!(
        err.starts_with(&format!("{}:5:1: ", path.display())),
        "{err}"
    );

    let missing = Path::new("tests/fixtures/lint/no-such-file.yaml");
    let (code, _, err) = lint(&[missing.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.starts_with("tests/fixtures/lint/no-such-file.yaml: cannot read"),
        "{err}"
    );
}

/// A scenario's `cluster.istio_version` decides which istiod checks its VirtualServices,
/// in `lint` as in `run`: 80/10 is refused by Istio 1.14 (weights must sum to 100).
#[test]
fn lint_checks_a_scenario_with_its_istio_version() {
    at_crate_root();
    let path = "tests/fixtures/invalid/vs-weights-istio-denies.yaml";
    let (code, out, _) = lint(&[path]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("would deny it: total destination weight 90 != 100"),
        "{out}"
    );
}
