//! Inputs a typo or a generator's bug would make, that once hung, panicked or passed in
//! silence (issue 34). Each runs under a watchdog: a hang fails the test instead of holding
//! the suite (the runs take well under a second; the watchdog only catches a run that never
//! ends, so a slow machine does not fail it).

use canarysim::cli::{Cli, execute};
use clap::Parser;
use std::sync::mpsc;
use std::time::Duration;

mod support;

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

fn run_scenario(command: &str, text: &str) -> (u8, String, String) {
    let file = support::write_temp("hostile.yaml", text);
    canarysim(vec![
        command.to_string(),
        file.to_str().unwrap().to_string(),
    ])
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
