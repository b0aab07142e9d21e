//! The seed walkthrough in live mode (`canarysim run … --live --time-scale 60`): real pod
//! servers, the live router and 300,000 real requests on loopback, about a minute of wall
//! time. Ignored in the hermetic `cargo test`; `.ci/run` runs it with
//! `cargo test --release --test real_tools -- --ignored live_walkthrough::`.

use canarysim::cli::{Cli, execute};
use clap::Parser;

fn run(extra: &[&str]) -> serde_json::Value {
    run_scenario("scenarios/seed-004-walkthrough.yaml", extra)
}

fn run_scenario(path: &str, extra: &[&str]) -> serde_json::Value {
    let mut argv = vec!["canarysim", "run", path, "--format", "json"];
    argv.extend_from_slice(extra);
    let (code, out, err) = execute(Cli::parse_from(argv.clone()));
    assert_eq!(code, 0, "{argv:?}: {out}{err}");
    serde_json::from_str(&out).unwrap()
}

/// (step index, canary share, its 99 % interval) of every load.
fn canary_shares(report: &serde_json::Value) -> Vec<(u64, f64, f64, f64)> {
    report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| {
            let load = s["load"].as_object()?;
            let canary = load["versions"]
                .as_array()?
                .iter()
                .filter(|v| v["role"] == "canary")
                .fold((0.0, 0.0, 0.0), |acc, v| {
                    (
                        acc.0 + v["unit_share"].as_f64().unwrap(),
                        v["interval"]["lo"].as_f64().unwrap(),
                        v["interval"]["hi"].as_f64().unwrap(),
                    )
                });
            Some((s["index"].as_u64()?, canary.0, canary.1, canary.2))
        })
        .collect()
}

#[test]
#[ignore = "a minute of real load on loopback (the live suite: .ci/run)"]
fn the_walkthrough_passes_live_and_agrees_with_the_simulation() {
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
    let simulated = run(&[]);
    let live = run(&["--live", "--time-scale", "60"]);
    assert_eq!(live["mode"], "live (time scale 60)");
    assert_eq!(live["passed"], true);
    let (sim, real) = (canary_shares(&simulated), canary_shares(&live));
    assert_eq!(sim.len(), 3, "{sim:?}");
    assert_eq!(sim.len(), real.len());
    for ((i, s, s_lo, s_hi), (j, l, l_lo, l_hi)) in sim.iter().zip(&real) {
        assert_eq!(i, j);
        println!(
            "step {i}: simulated canary {:.2} % [{:.2}, {:.2}], live {:.2} % [{:.2}, {:.2}]",
            s * 100.0,
            s_lo * 100.0,
            s_hi * 100.0,
            l * 100.0,
            l_lo * 100.0,
            l_hi * 100.0
        );
        // The two 99 % intervals overlap: the figures agree within statistics.
        assert!(l_lo <= s_hi && s_lo <= l_hi, "step {i}: {s} vs {l}");
    }
}

#[test]
#[ignore = "real load on loopback (the live suite: .ci/run)"]
fn the_gateway_api_plugins_example_passes_live() {
    // 120,000 real requests through the live router serving the HTTPRoute's weights.
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
    let live = run_scenario(
        "scenarios/gateway-api-plugin.yaml",
        &["--live", "--time-scale", "60"],
    );
    assert_eq!(live["passed"], true);
    let shares = canary_shares(&live);
    assert_eq!(shares.len(), 2, "{shares:?}");
    let (_, canary, lo, hi) = shares[0];
    println!(
        "30 % set: live canary {:.2} % [{:.2}, {:.2}]",
        canary * 100.0,
        lo * 100.0,
        hi * 100.0
    );
    assert!(lo <= 0.30 && 0.30 <= hi, "{shares:?}");
}

#[test]
#[ignore = "real load on loopback (the live suite: .ci/run)"]
fn the_other_gateway_api_scenarios_pass_live() {
    // Header rules, the pruned field's 50/50, a deleted backend's 500s, Traefik's turns,
    // gRPC, TCP and TLS routes (the last two at the gateway's own ports):
    // each scenario's own expectations, met by real requests through the live router.
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
    for scenario in [
        "gateway-api-header-route.yaml",
        "gateway-api-pruned-field.yaml",
        "gateway-api-missing-backend.yaml",
        "gateway-api-traefik-round-robin.yaml",
        "gateway-api-grpc-tcp-tls-routes.yaml",
    ] {
        let live = run_scenario(
            &format!("scenarios/{scenario}"),
            &["--live", "--time-scale", "60"],
        );
        assert_eq!(live["passed"], true, "{scenario}");
        for (step, canary, lo, hi) in canary_shares(&live) {
            println!(
                "{scenario} step {step}: live canary {:.2} % [{:.2}, {:.2}]",
                canary * 100.0,
                lo * 100.0,
                hi * 100.0
            );
        }
    }
}
