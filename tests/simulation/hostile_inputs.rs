//! Inputs a typo or a generator's bug would make, that once hung, panicked or passed in
//! silence (issue 34). Each runs under a watchdog: a hang fails the test instead of holding
//! the suite (the runs take well under a second; the watchdog only catches a run that never
//! ends, so a slow machine does not fail it).

use canarysim::cli::{Cli, execute};
use clap::Parser;
use std::sync::mpsc;
use std::time::Duration;

use crate::support;

/// Far beyond any run here, even on a busy machine: only a run that never ends reaches it.
const WATCHDOG: Duration = Duration::from_secs(300);

/// `canarysim ARGS…` in-process, on a thread; panics if it has not answered by the watchdog.
fn canarysim(args: Vec<String>) -> (u8, String, String) {
    let (tx, rx) = mpsc::channel();
    let shown = args.join(" ");
    std::thread::spawn(move || {
        let mut argv = vec!["canarysim".to_string()];
        argv.extend(args);
        let _ = tx.send(execute(Cli::parse_from(argv)));
    });
    rx.recv_timeout(WATCHDOG)
        .unwrap_or_else(|_| panic!("`canarysim {shown}` did not end within {WATCHDOG:?}"))
}

/// The seed walkthrough's cluster, with `cluster`, `traffic` and `steps` as given.
fn scenario(cluster: &str, traffic: &str, steps: &str) -> String {
    let manifests = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/manifests");
    format!(
        "name: hostile\nnamespace: my-demo\nmanifests:\n\
         \x20 - file: {manifests}/seed-004-rollout.yaml\n\
         \x20 - file: {manifests}/seed-004-services.yaml\n\
         \x20 - file: {manifests}/seed-004-gateway.yaml\n\
         \x20 - file: {manifests}/seed-004-virtualsvc.yaml\n\
         cluster: {{{cluster}}}\ntraffic: {{host: rollouts-demo.local{traffic}}}\nsteps:\n\
         \x20 - wait: {{until: healthy, rollout: rollouts-demo, timeout: 2m}}\n{steps}"
    )
}

fn run_file(command: &str, path: &std::path::Path) -> (u8, String, String) {
    canarysim(vec![
        command.to_string(),
        path.to_str().unwrap().to_string(),
    ])
}

fn run_scenario(command: &str, text: &str) -> (u8, String, String) {
    let file = support::write_temp("hostile.yaml", text);
    run_file(command, &file)
}

/// The virtual clock off a whole microsecond (a nanosecond wait, a sub-microsecond push
/// delay) while simulated traffic runs: the load asked again and again to advance to where
/// it already was, at 100 % CPU, for good.
#[test]
fn traffic_while_the_clock_is_between_two_microseconds_runs_to_its_end() {
    let cases = [
        (
            "a 1 ns wait, then a timed load",
            scenario("", "", "  - wait: 1ns\n  - load: {duration: 1s}\n"),
        ),
        (
            "a 500 ns push delay, then a load",
            scenario("push_delay: 500ns", "", "  - load: {requests: 20000}\n"),
        ),
        (
            "background traffic through a 1500 ns wait and a 1 ns timeout",
            scenario(
                "",
                ", background: {rate: 50}",
                "  - wait: 1500ns\n  - wait: {until: paused, rollout: rollouts-demo, timeout: 1ns}\n  - wait: 2s\n",
            ),
        ),
    ];
    for (what, text) in cases {
        let (code, out, err) = run_scenario("run", &text);
        assert!(code <= 1, "{what}: exit {code}\n{out}{err}");
        assert!(out.contains("steps"), "{what}: a report\n{out}{err}");
    }
}

#[test]
fn compare_and_envoy_config_end_on_a_clock_between_two_microseconds() {
    let text = scenario(
        "",
        "",
        "  - wait: 1ns\n  - load: {requests: 20000}\n  - wait: 1ns\n",
    );
    let (code, out, err) = run_scenario("compare", &text);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("no mesh"), "{out}");
    let (code, out, err) = run_scenario("envoy-config", &text);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("weighted_clusters") || out.contains("\"cluster\""),
        "{out}"
    );
}

/// Nesting deeper than canarysim reads is refused at its place, in one pass: block nesting
/// 25,000 deep overflowed the stack (exit 134), flow nesting 150,000 deep took minutes.
#[test]
fn deep_nesting_is_refused_at_its_place_without_recursion() {
    let block = format!("name: x\nsteps:\n{}a\n", "- ".repeat(25_000));
    let flow = format!(
        "name: x\nsteps:\n  - wait: {}{}\n",
        "[".repeat(150_000),
        "]".repeat(150_000)
    );
    let flow_maps = format!(
        "name: x\nsteps:\n  - wait: {}1{}\n",
        "{a: ".repeat(150_000),
        "}".repeat(150_000)
    );
    for (what, text, line) in [
        ("block", block, 3),
        ("flow", flow, 3),
        ("flow maps", flow_maps, 3),
    ] {
        let file = support::write_temp("deep.yaml", &text);
        for command in ["run", "lint"] {
            let (code, out, err) = run_file(command, &file);
            assert_eq!(code, 2, "{what} {command}: {out}{err}");
            assert!(
                err.contains(&format!(":{line}:"))
                    && err.contains("nested more than 100 levels deep"),
                "{what} {command}: {err}"
            );
        }
    }
    // At the bound it is read (and judged on what it says).
    let fine = format!(
        "name: x\nsteps:\n  - wait: {}{}\n",
        "[".repeat(90),
        "]".repeat(90)
    );
    let file = support::write_temp("fine.yaml", &fine);
    let (code, _, err) = run_file("run", &file);
    assert_eq!(code, 2);
    assert!(!err.contains("nested more than"), "{err}");
}

#[test]
fn a_file_past_64_mib_is_refused_without_reading_it_all() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.yaml");
    // Sparse: 65 MiB of zeros costs no disk.
    std::fs::File::create(&path)
        .unwrap()
        .set_len(65 * 1024 * 1024)
        .unwrap();
    for command in ["run", "lint"] {
        let (code, out, err) = run_file(command, &path);
        assert_eq!(code, 2, "{command}: {out}{err}");
        assert!(err.contains("larger than 64 MiB"), "{command}: {err}");
    }
}

#[test]
fn a_million_nodes_is_the_most_one_file_holds() {
    let list = format!("name: x\nseed: [{}1]\nsteps: []\n", "1,".repeat(1_000_000));
    let file = support::write_temp("wide.yaml", &list);
    let (code, out, err) = run_file("run", &file);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("more than 1000000 YAML nodes"), "{err}");
}

#[test]
fn a_huge_value_is_not_echoed_whole_into_the_error() {
    let text = format!("name: x\nseed: \"{}\"\nsteps: []\n", "9".repeat(1_000_000));
    let file = support::write_temp("long.yaml", &text);
    let (code, _, err) = run_file("run", &file);
    assert_eq!(code, 2);
    assert!(err.len() < 500, "{} bytes: {}", err.len(), &err[..300]);
    assert!(err.contains(":2:"), "{err}");
}

#[test]
fn a_byte_order_mark_is_read_past_as_kubernetes_does() {
    let manifests = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/manifests");
    let text = format!("\u{feff}{}", scenario("", "", "  - wait: 1s\n"));
    let file = support::write_temp("bom.yaml", &text);
    let (code, out, err) = run_file("run", &file);
    assert_eq!(code, 0, "{out}{err}");
    let manifest = std::fs::read_to_string(format!("{manifests}/seed-004-services.yaml")).unwrap();
    let file = support::write_temp("services.yaml", &format!("\u{feff}{manifest}"));
    let (code, out, err) = run_file("lint", &file);
    assert!(code <= 1 && !err.contains("did not find"), "{out}{err}");
}

/// 28 waits of Go's longest duration, each within its bound, carried the clock past year
/// 9999, where writing a timestamp panicked.
#[test]
fn waits_that_add_up_past_year_9999_do_not_panic() {
    let waits = "  - wait: 2562047h\n".repeat(28);
    let text = scenario("", "", &format!("{waits}  - expect: {{phase: Healthy}}\n"));
    let (code, out, err) = run_scenario("run", &text);
    assert!(code <= 1, "exit {code}: {out}{err}");
    assert!(out.contains("29"), "every step ran: {out}");
}

/// `wait: 5` (and `wait: 0.5`) was refused, though the message offered "a number of seconds" and every other
/// duration field reads a bare number as seconds.
#[test]
fn a_bare_number_waits_that_many_seconds() {
    let text = scenario("", "", "  - wait: 5\n  - wait: \"7\"\n  - wait: 0.5\n");
    let (code, out, err) = run_scenario("run", &text);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("wait 5s") && out.contains("wait 7s") && out.contains("wait 500ms"),
        "{out}"
    );
    let (code, out, err) = run_scenario("run", &scenario("", "", "  - wait: -5\n"));
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("number of seconds"), "{err}");
}

/// Background traffic through a wait of Go's longest duration (a `wait: {until}` whose
/// rollout never gets there, with a 292-year timeout) simulated 2×10¹¹ requests: a hang the
/// fuzzer found. The wait is refused up front, as a load above the request budget is.
#[test]
fn background_traffic_through_an_endless_wait_is_refused_by_the_request_budget() {
    let steps = "  - wait: 1m\n  - wait: {until: degraded, rollout: rollouts-demo, timeout: 2562047h}\n  - wait: 2562047h\n";
    let text = scenario("", ", background: {rate: 20}", steps);
    let (code, out, err) = run_scenario("run", &text);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("✔  2"),
        "a minute of background traffic runs: {out}"
    );
    assert_eq!(
        out.matches("refused: traffic.background").count(),
        2,
        "{out}"
    );
}

/// A wait of Go's longest duration after `promote --full` of a canary whose pods crash-loop,
/// with progressDeadlineAbort: the deadline aborts the update every minute and the full
/// promotion clears the abort again, as Argo's controller does; played instant by instant,
/// 292 years took hours (a hang the fuzzer found). The step fails at the instant budget,
/// saying what keeps the clock busy, and the budget is the user's to raise.
#[test]
fn a_wait_of_years_through_a_deadline_firing_every_minute_fails_at_the_instant_budget() {
    let manifests = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/manifests/");
    let bundled = include_str!("../../scenarios/progress-deadline.yaml")
        .replace("file: manifests/", &format!("file: {manifests}"));
    let text = format!(
        "{bundled}  - promote: rollouts-demo\n  - promote: {{rollout: rollouts-demo, full: true}}\n  - wait: {{until: healthy, timeout: 2562047h}}\n"
    );
    let file = support::write_temp("deadline-every-minute.yaml", &text);
    let path = file.to_str().unwrap().to_string();
    let run = |budget: &str| {
        let (code, out, err) = canarysim(vec![
            "run".into(),
            "--format".into(),
            "json".into(),
            "--instant-budget".into(),
            budget.into(),
            path.clone(),
        ]);
        assert_eq!(code, 1, "{out}{err}");
        let report: serde_json::Value = serde_json::from_str(&out).expect("a JSON report");
        let steps = report["steps"].as_array().expect("steps").clone();
        let failed: Vec<_> = steps.iter().filter(|s| s["passed"] == false).collect();
        assert_eq!(failed.len(), 1, "only the long wait fails: {out}");
        assert_eq!(failed[0]["index"], steps.len(), "{out}");
        let detail = failed[0]["detail"].as_str().unwrap_or("").to_string();
        let time_ms = |s: &serde_json::Value| s["time_ms"].as_u64().unwrap_or(0);
        let began = time_ms(&steps[steps.len() - 2]);
        (time_ms(failed[0]) - began, detail)
    };
    let (near, detail) = run("100");
    assert!(
        detail.starts_with("this step stopped the clock at 100 instants")
            && detail.contains("RolloutAborted")
            && detail.contains("--instant-budget"),
        "{detail}"
    );
    // Twice the budget reaches about twice as far into the step: the clock's instants, not
    // the wall clock, bound it.
    let (far, _) = run("200");
    assert!(
        far > near * 19 / 10 && far < near * 21 / 10,
        "{near} ms then {far} ms into the step"
    );
}

/// `set_image` on a Rollout whose template is not an object panicked ("cannot access key
/// \"template\" in JSON string"); it is refused, or reports that it found no container.
#[test]
fn set_image_on_a_rollout_whose_template_is_a_string_does_not_panic() {
    for spec in [
        "{replicas: 1, selector: {matchLabels: {app: a}}, template: oops, strategy: {canary: {}}}",
        "just-a-string",
    ] {
        let text = format!(
            "name: s\nmanifests:\n  - inline: |\n      apiVersion: argoproj.io/v1alpha1\n      kind: Rollout\n      metadata: {{name: a}}\n      spec: {spec}\nsteps:\n  - set_image: {{rollout: a, container: a, image: a:2}}\n"
        );
        let (code, out, err) = run_scenario("run", &text);
        assert!(code == 1 || code == 2, "{spec}: exit {code}: {out}{err}");
    }
}

/// `run DIR` of a folder with nothing to run exited 0 and printed nothing.
#[test]
fn a_folder_with_no_scenario_is_bad_input_not_a_pass() {
    let dir = support::temp_dir();
    let (code, out, err) = run_file("run", dir.path());
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("no scenario files"), "{err}");
    std::fs::write(
        dir.path().join("svc.yaml"),
        "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
    )
    .unwrap();
    let (code, _, err) = run_file("run", dir.path());
    assert_eq!(code, 2);
    assert!(
        err.contains("its one YAML file is a Kubernetes manifest"),
        "{err}"
    );
}

/// `run DIR` dropped a broken file from its summary and ran a manifest as a (broken)
/// scenario: the manifest is passed over with a note, the broken file is a row of its own.
#[test]
fn a_folder_run_lists_its_broken_files_and_passes_over_its_manifests() {
    let dir = support::temp_dir();
    let good = scenario("", "", "  - expect: {phase: Healthy}\n");
    std::fs::write(dir.path().join("a-good.yaml"), good).unwrap();
    std::fs::write(
        dir.path().join("b-broken.yaml"),
        "name: b\nsteps:\n  - wiat: 5s\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("c-svc.yaml"),
        "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
    )
    .unwrap();
    let (code, out, err) = run_file("run", dir.path());
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("c-svc.yaml: a Kubernetes manifest, not a scenario: skipped"),
        "{err}"
    );
    assert!(err.contains("b-broken.yaml:3:"), "{err}");
    assert!(
        out.contains("b-broken.yaml") && out.contains("ERROR"),
        "{out}"
    );
    assert!(out.contains("1 passed, 0 failed, 1 invalid"), "{out}");
}

/// `fail_pods` asking for more pods than there are crashed what there was and said nothing.
#[test]
fn failing_more_pods_than_exist_is_clamped_with_a_warning() {
    let text = scenario(
        "",
        "",
        "  - fail_pods: {rollout: rollouts-demo, role: stable, count: 1000000}\n",
    );
    let (code, out, err) = run_scenario("run", &text);
    assert_eq!(code, 0, "{out}{err}");
    let said = "asked to crash 1000000 pod(s), but the stable had 4: 4 crashed";
    assert!(
        out.matches(said).count() >= 2,
        "in the step and among the warnings: {out}"
    );
}

/// An empty image (or container) in `set_image` was sent as written.
#[test]
fn set_image_without_an_image_is_refused_at_its_place() {
    for (field, step) in [
        (
            "image",
            "{rollout: rollouts-demo, container: rollouts-demo, image: ''}",
        ),
        (
            "container",
            "{rollout: rollouts-demo, container: ' ', image: a:2}",
        ),
    ] {
        let text = scenario("", "", &format!("  - set_image: {step}\n"));
        let (code, out, err) = run_scenario("run", &text);
        assert_eq!(code, 2, "{out}{err}");
        assert!(err.contains("hostile.yaml:12:"), "{err}");
        assert!(err.contains(&format!("`{field}` is empty")), "{err}");
    }
}

/// `compare` exited 0 whatever happened: it fails as `run` does when the scenario as written
/// fails a step.
#[test]
fn compare_exits_1_when_the_scenario_fails() {
    let text = scenario("", "", "  - expect: {phase: Degraded}\n");
    let (code, out, err) = run_scenario("compare", &text);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("FAIL: mesh run: step 2"), "{out}");
    let text = scenario("", "", "  - expect: {phase: Healthy}\n");
    let (code, out, err) = run_scenario("compare", &text);
    assert_eq!(code, 0, "{out}{err}");
}

/// A key written twice was read as one of the two (a scenario's at 1:1, a manifest's in
/// silence: `lint` said "0 errors"); kubectl refuses it, and so does canarysim, at the second.
#[test]
fn a_key_written_twice_is_refused_where_it_is_repeated() {
    let manifest = "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  name: t\nspec:\n  ports: [{port: 80}]\n";
    let file = support::write_temp("svc.yaml", manifest);
    let (code, out, err) = run_file("lint", &file);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("svc.yaml:5:3: key \"name\" already set in this mapping, at line 4"),
        "{err}"
    );
    // Merge keys may repeat.
    let merged = "name: m\nbase: &b {x: 1}\nsteps: []\nother:\n  <<: *b\n  <<: *b\n";
    let (_, _, err) = run_scenario("run", merged);
    assert!(!err.contains("already set"), "{err}");
}

/// Service ports, names and replica counts a cluster refuses were accepted (ports 0 and
/// 70000 without a word, -1, `"http"` and null with a warning, `lint` silent for all five;
/// names `../../x`, `a/b`, `Bad_Name`; a VirtualService weight of 2^40, an int32 field):
/// `lint` and `run` refuse them in the API server's words.
#[test]
fn what_the_api_server_refuses_lint_and_run_refuse() {
    let service = |port: &str| {
        format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: s}}\nspec:\n  ports: [{{port: {port}}}]\n"
        )
    };
    let cases = [
        (service("0"), "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive"),
        (service("70000"), "spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535"),
        (service("-1"), "spec.ports[0].port: Invalid value: -1: must be between 1 and 65535"),
        (service("http"), "spec.ports[0].port"),
        (service("null"), "spec.ports[0].port: Required value"),
        (
            "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata: {name: ../../x}\nspec: {replicas: 1}\n".to_string(),
            "metadata.name: Invalid value: \"../../x\": may not contain '/'",
        ),
        (
            "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata: {name: Bad_Name}\nspec: {replicas: 1}\n".to_string(),
            "a lowercase RFC 1123 subdomain must consist of",
        ),
        (
            "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata: {name: r}\nspec: {replicas: -1}\n".to_string(),
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            "apiVersion: networking.istio.io/v1beta1\nkind: VirtualService\nmetadata: {name: v}\nspec:\n  hosts: [a]\n  http:\n  - route:\n    - {destination: {host: a}, weight: 1099511627776}\n    - {destination: {host: b}, weight: 0}\n".to_string(),
            "spec.http[0].route[0].weight: invalid value: integer `1099511627776`, expected a whole number from -2,147,483,648 to 2,147,483,647",
        ),
    ];
    for (manifest, says) in cases {
        let file = support::write_temp("m.yaml", &manifest);
        let (code, out, err) = run_file("lint", &file);
        assert!(code >= 1, "lint passed {manifest}: {out}{err}");
        assert!(
            out.contains(says) || err.contains(says),
            "{manifest}: {out}{err}"
        );
        let text = format!(
            "name: k\nmanifests:\n  - file: {}\nsteps:\n  - wait: 1s\n",
            file.display()
        );
        let (code, out, err) = run_scenario("run", &text);
        assert_eq!(code, 2, "run took {manifest}: {out}{err}");
        assert!(err.contains(says), "{manifest}: {err}");
        assert!(err.contains("m.yaml:"), "at its place: {err}");
    }
}

/// A Gateway API route its API server refuses (the CRDs' bounds and CEL rules) was stored
/// as written: `lint` and `run` now refuse it at its place, in the API server's words.
#[test]
fn a_gateway_api_route_the_api_server_refuses_is_refused_at_its_place() {
    let route = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r}\nspec:\n  parentRefs: [{name: gw}]\n  rules:\n  - backendRefs:\n    - {name: stable, port: 80, weight: 2000000}\n    - {name: canary}\n";
    let file = support::write_temp("route.yaml", route);
    let (code, out, err) = run_file("lint", &file);
    assert!(code >= 1, "{out}{err}");
    let said = format!("{out}{err}");
    assert!(
        said.contains("route.yaml:8:")
            && said.contains("spec.rules[0].backendRefs[0].weight: Invalid value: 2000000: spec.rules[0].backendRefs[0].weight in body should be less than or equal to 1000000"),
        "{said}"
    );
    assert!(
        said.contains("route.yaml:9:")
            && said.contains("spec.rules[0].backendRefs[1]: Invalid value: \"object\": Must have port for Service reference"),
        "{said}"
    );
    let text = format!(
        "name: k\nmanifests:\n  - file: {}\nsteps:\n  - wait: 1s\n",
        file.display()
    );
    let (code, out, err) = run_scenario("run", &text);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("route.yaml:8:")
            && err.contains("in body should be less than or equal to 1000000"),
        "{err}"
    );
    // Within the bounds, the route is kept as written.
    let valid = route
        .replace("2000000", "1000000")
        .replace("{name: canary}", "{name: canary, port: 80}");
    let file = support::write_temp("route.yaml", &valid);
    let (_, out, err) = run_file("lint", &file);
    assert!(!format!("{out}{err}").contains("is invalid"), "{out}{err}");
}

/// 60 managed routes of one name with a `setHeaderRoute` took 1.9 GB (200: 10 GB) and
/// `lint` said nothing: a name given twice is refused where it repeats.
#[test]
fn a_managed_route_named_twice_is_refused() {
    let rollout = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scenarios/manifests/header-route-rollout.yaml"
    ))
    .unwrap();
    let repeated = "        - name: header-route\n".repeat(60);
    let rollout = rollout.replacen(
        "        managedRoutes:\n        - name: header-route\n",
        &format!("        managedRoutes:\n{repeated}"),
        1,
    );
    assert!(rollout.matches("- name: header-route").count() == 60);
    let file = support::write_temp("ro.yaml", &rollout);
    let says = "spec.strategy.canary.trafficRouting.managedRoutes[1].name: Duplicate value: \"header-route\"";
    let (code, out, err) = run_file("lint", &file);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains(says) && out.contains("ro.yaml:15:"), "{out}");
    let text = format!(
        "name: m\nmanifests:\n  - file: {}\nsteps:\n  - wait: 1s\n",
        file.display()
    );
    let (code, _, err) = run_scenario("run", &text);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(says), "{err}");
}

/// A DestinationRule without subsets (or with `subsets: []`) under a subset-level Rollout
/// made every step "controllers did not settle after 1000 rounds". Argo writes nothing to
/// such a rule (its new subset list is the old one): the run settles, and says why the
/// routes find no endpoints.
#[test]
fn a_destination_rule_without_subsets_settles_and_says_why() {
    let root = env!("CARGO_MANIFEST_DIR");
    let manifests =
        std::fs::read_to_string(format!("{root}/scenarios/manifests/seed-003-subset.yaml"))
            .unwrap();
    let scenario =
        std::fs::read_to_string(format!("{root}/scenarios/seed-003-subset-level.yaml")).unwrap();
    let start = manifests.find("kind: DestinationRule").unwrap();
    let subsets = start + manifests[start..].find("  subsets:").unwrap();
    let end = subsets + manifests[subsets..].find("\n---").unwrap();
    for replacement in ["  subsets: []", ""] {
        let dir = support::temp_dir();
        let m = dir.path().join("m.yaml");
        let text = format!(
            "{}{replacement}{}",
            &manifests[..subsets],
            &manifests[end..]
        );
        std::fs::write(&m, text).unwrap();
        let s = dir.path().join("s.yaml");
        std::fs::write(
            &s,
            scenario.replace("manifests/seed-003-subset.yaml", m.to_str().unwrap()),
        )
        .unwrap();
        let (code, out, err) = run_file("run", &s);
        assert_eq!(
            code, 1,
            "the subset expectations fail, nothing else: {out}{err}"
        );
        assert!(!out.contains("did not settle"), "{replacement:?}: {out}");
        assert!(
            out.contains("subset \"canary\" is not defined in DestinationRule"),
            "{out}"
        );
        assert!(out.contains("Paused after"), "the steps played: {out}");
    }
}

/// A pod latency of 1 ns silently ran as 1 µs: pods answer in whole microseconds, and a
/// latency or jitter between them is refused at its place.
#[test]
fn a_pod_latency_finer_than_a_microsecond_is_refused() {
    for (field, value) in [("latency", "1ns"), ("jitter", "1500ns")] {
        let text = scenario(
            &format!("backends: {{\"argoproj/rollouts-demo:blue\": {{{field}: {value}}}}}"),
            "",
            "",
        );
        let (code, out, err) = run_scenario("run", &text);
        assert_eq!(code, 2, "{out}{err}");
        assert!(
            err.contains(&format!(
                "{field} {value}: pods answer in whole microseconds"
            )),
            "{err}"
        );
        assert!(err.contains("hostile.yaml:8:"), "{err}");
    }
}

/// Any duration, anywhere a scenario takes one, ends in a report or a refusal at its place:
/// never a panic, an overflow or a hang (issue 34: clock arithmetic over the whole range).
mod every_duration_field {
    use super::*;
    use proptest::prelude::*;

    const UNITS: [&str; 7] = ["ns", "us", "µs", "ms", "s", "m", "h"];

    fn duration_text() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec![
                "0s",
                "1ns",
                "999ns",
                "2562047h",
                "2562048h",
                "9223372036854775807ns",
                "18446744073709551615ns",
                "99999999999999999999h",
                "1h1ns",
            ])
            .prop_map(str::to_string),
            (any::<u64>(), prop::sample::select(UNITS.to_vec()))
                .prop_map(|(n, unit)| format!("{n}{unit}")),
            (0u64..100_000, prop::sample::select(UNITS.to_vec()))
                .prop_map(|(n, unit)| format!("{n}{unit}")),
        ]
    }

    /// The scenario's cluster keys and steps with `d` in field `field`.
    fn with_duration(field: usize, d: &str) -> String {
        let (cluster, steps) = match field {
            0 => (format!("pod_ready_after: {d}"), String::new()),
            1 => (format!("push_delay: {d}"), String::new()),
            2 => (
                format!(
                    "backends: {{\"argoproj/rollouts-demo:blue\": {{latency: {d}, jitter: {d}}}}}"
                ),
                "  - load: {requests: 200}\n".to_string(),
            ),
            3 => (
                String::new(),
                format!("  - wait: {d}\n  - load: {{requests: 200}}\n"),
            ),
            4 => (
                String::new(),
                format!("  - wait: {{until: paused, rollout: rollouts-demo, timeout: {d}}}\n"),
            ),
            5 => (
                String::new(),
                format!("  - restart: {{rollout: rollouts-demo, in: {d}}}\n  - wait: 1m\n"),
            ),
            _ => (
                String::new(),
                format!("  - status: {{rollout: rollouts-demo, timeout: {d}}}\n"),
            ),
        };
        scenario(&cluster, "", &steps)
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 64,
            rng_seed: proptest::test_runner::RngSeed::Fixed(34),
            failure_persistence: None,
            ..ProptestConfig::default()
        })]
        #[test]
        fn ends_in_a_report_or_a_refusal_at_its_place(field in 0usize..7, d in duration_text()) {
            let (code, out, err) = run_scenario("run", &with_duration(field, &d));
            prop_assert!(code <= 2, "{d} in field {field}: exit {code}\n{out}{err}");
            if code == 2 {
                prop_assert!(err.contains("hostile.yaml:"), "{d} in field {field}: {err}");
            } else {
                prop_assert!(out.contains("steps"), "{d} in field {field}: {out}");
            }
        }
    }
}

/// The live run's warning about `traffic.background` was reported at 1:1 of the scenario;
/// it is where the key is written.
#[test]
fn the_background_warning_points_at_the_background_key() {
    let text = scenario("", ", background: {rate: 50}", "  - wait: 1s\n");
    let file = support::write_temp("hostile.yaml", &text);
    let plan = canarysim::scenario::load(&file, &canarysim::scenario::Disk).unwrap();
    let mut runner = canarysim::scenario::Runner::new(&plan, None);
    runner.load_with("live", |_, _, _| Err("no sockets in this test".into()));
    let warning = runner
        .finish()
        .warnings
        .into_iter()
        .find(|w| w.field == "traffic.background")
        .expect("a live run warns about background traffic");
    assert_eq!(
        text.lines()
            .nth(warning.line - 1)
            .map(|l| l.starts_with("traffic:")),
        Some(true)
    );
    assert!(warning.column > 1, "{warning:?}");
}

/// A file listed many times: the fuzzer's generator listed a 3.8 MB manifest 99 times and
/// planning parsed it 99 times (4 s; 22 s under the fuzzer). It is read once, and all
/// listings together are bounded like one file, since each listing's objects are kept.
#[test]
fn a_manifest_listed_many_times_is_read_once_and_bounded_in_total() {
    use canarysim::scenario::{Disk, Files, load};
    use std::cell::RefCell;
    use std::path::{Path, PathBuf};

    struct Counting(RefCell<Vec<PathBuf>>);
    impl Files for Counting {
        fn read(&self, path: &Path) -> std::io::Result<String> {
            self.0.borrow_mut().push(path.to_path_buf());
            Disk.read(path)
        }
    }

    let manifests = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/manifests");
    let listed = |file: &str, times: usize| format!("\x20 - file: {file}\n").repeat(times);
    let text = scenario("", "", "").replace(
        "manifests:\n",
        &format!(
            "manifests:\n{}",
            listed(&format!("{manifests}/seed-004-services.yaml"), 3)
        ),
    );
    let path = support::write_temp("listed-thrice.yaml", &text);
    let files = Counting(RefCell::new(Vec::new()));
    let plan = load(&path, &files).expect("a file listed thrice is fine");
    let services = files
        .0
        .borrow()
        .iter()
        .filter(|p| p.ends_with("seed-004-services.yaml"))
        .count();
    assert_eq!(services, 1, "read {services} times");
    let canary_services = plan
        .manifests
        .iter()
        .filter(|m| m.object.name() == "rollouts-demo-canary")
        .count();
    assert_eq!(canary_services, 4, "each listing still counts");

    // A file just under one MiB, listed 65 times: past 64 MiB at the 65th listing.
    let big = support::write_temp(
        "one-mib-service.yaml",
        &format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: big\n  annotations: {{note: \"{}\"}}\n\
             spec:\n  ports: [{{port: 80}}]\n",
            "x".repeat((1 << 20) - 200)
        ),
    );
    let text = format!(
        "name: x\nmanifests:\n{}steps: []\n",
        listed(big.to_str().unwrap(), 65)
    );
    let path = support::write_temp("listed-65-times.yaml", &text);
    let err = load(&path, &Disk)
        .expect_err("65 MiB of listings")
        .to_string();
    assert!(err.contains(":67:"), "{err}");
    assert!(
        err.contains(
            "the manifests listed come to more than 64 MiB (a file counts each time it is listed)"
        ),
        "{err}"
    );
}

/// The fuzzer (scenario_hostile, 38c1998) grafted a DestinationRule's subset list onto a
/// Rollout's `strategy`: serde filled the struct by position, so `run` reported Argo's
/// InvalidSpec (two strategies) and `compare`'s no-mesh copy, indexing
/// `spec.strategy.canary` as a mapping, panicked. The CRD's schema refuses a list there.
#[test]
fn a_rollout_whose_strategy_is_a_list_is_refused_as_the_api_server_refuses_it() {
    let manifests = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/manifests");
    let rollout = "apiVersion: argoproj.io/v1alpha1\\nkind: Rollout\\nmetadata: {name: rollouts-demo}\\n\
                   spec:\\n  replicas: 2\\n  selector: {matchLabels: {app: rollouts-demo}}\\n  \
                   template:\\n    metadata: {labels: {app: rollouts-demo}}\\n    \
                   spec: {containers: [{name: rollouts-demo, image: 'argoproj/rollouts-demo:blue'}]}\\n  \
                   strategy:\\n  - {name: canary}\\n  - {name: stable}\\n";
    let text = format!(
        "name: listed-strategy\nnamespace: my-demo\nmanifests:\n\
         \x20 - inline: \"{rollout}\"\n\
         \x20 - file: {manifests}/seed-004-services.yaml\n\
         traffic: {{host: rollouts-demo-stable}}\nsteps:\n\
         \x20 - wait: {{until: healthy, rollout: rollouts-demo, timeout: 1m}}\n\
         \x20 - load: {{requests: 100}}\n"
    );
    for command in ["run", "compare"] {
        let (code, out, err) = run_scenario(command, &text);
        assert_eq!(code, 2, "{command}: {out}{err}");
        assert!(
            err.contains(
                "hostile.yaml:14:17: Rollout \"rollouts-demo\": spec.strategy: invalid type: \
                 sequence, expected a mapping (the API server refuses it"
            ),
            "{command}: {out}{err}"
        );
    }
}
