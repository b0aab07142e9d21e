//! Properties of the bundled scenario directory as a whole.

use canarysim::cli::{Cli, execute};
use canarysim::testing::{run_scenario, scenario_files};
use clap::Parser;
use std::path::Path;

fn bundled() -> Vec<std::path::PathBuf> {
    scenario_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")).unwrap()
}

#[test]
fn the_whole_directory_passes_with_a_summary_table() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let (code, out, err) = execute(Cli::parse_from(["canarysim", "run", dir.to_str().unwrap()]));
    assert_eq!(code, 0, "{out}{err}");
    let count = bundled().len();
    assert!(count >= 20, "{count} scenarios");
    assert!(out.contains(&format!("{count} passed, 0 failed")), "{out}");
}

/// A warning in a bundled scenario is either expected (`expect: {warnings: [...]}` makes the
/// runner check the exact set) or a mistake in the scenario.
#[test]
fn no_bundled_scenario_has_a_warning_it_does_not_expect() {
    let mut unexpected = Vec::new();
    for path in bundled() {
        let text = std::fs::read_to_string(&path).unwrap();
        let report = run_scenario(&path, None).unwrap();
        if !report.warnings.is_empty() && !text.contains("warnings:") {
            let warnings: Vec<String> = report.warnings.iter().map(ToString::to_string).collect();
            unexpected.push(format!("{}: {warnings:#?}", path.display()));
        }
    }
    assert!(unexpected.is_empty(), "{unexpected:#?}");
}

/// Issue 25: a DestinationRule whose subsets carry fields besides name and labels made the
/// rollout controller rewrite it at every round (the API server kept nothing of it), and the
/// world never settled. The general property: no controller writes an object again without
/// a change in what it reads. So once the world has settled, one more reconcile round of
/// every controller writes nothing — neither by its own account nor by the API server's
/// resourceVersion — at every instant of every bundled scenario (the clock stops after
/// each step and at each instant a wait reaches).
#[test]
fn once_the_world_has_settled_one_more_round_writes_nothing() {
    use canarysim::scenario::{Disk, Runner, load};
    use canarysim::sim::World;
    use std::cell::RefCell;

    fn check(world: &World, at: &str, breaches: &RefCell<Vec<String>>) {
        let mut world = world.clone();
        let before = world.api.resource_version();
        let wrote = world.reconcile_round();
        let after = world.api.resource_version();
        if !matches!(wrote, Ok(false)) || before != after {
            breaches.borrow_mut().push(format!(
                "{at}, {}: one more round: {wrote:?} (true: a controller wrote), resourceVersion {before} → {after}",
                world.now()
            ));
        }
    }

    let breaches = RefCell::new(Vec::new());
    let instants = std::cell::Cell::new(0);
    for path in bundled() {
        let plan = load(&path, &Disk).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let mut runner = Runner::new(&plan, None);
        runner.on_instant(|world| {
            instants.set(instants.get() + 1);
            check(world, &format!("{name}, during a step"), &breaches);
        });
        check(
            &runner.world,
            &format!("{name}, after the manifests"),
            &breaches,
        );
        while let Some(step) = runner.step() {
            let at = format!("{name}, after step {} ({})", step.index, step.action);
            check(&runner.world, &at, &breaches);
            instants.set(instants.get() + 1);
        }
    }
    let instants = instants.get();
    let breaches = breaches.into_inner();
    assert!(instants > 500, "{instants} instants checked");
    assert!(breaches.is_empty(), "{breaches:#?}");
}

/// The instant budget (`--instant-budget`, default 10,000 a step) stands far above real
/// scenarios: each bundled one passes with 100, four times its busiest step's 25.
#[test]
fn every_bundled_scenario_passes_within_100_instants_a_step() {
    use canarysim::scenario::{Disk, load, run};
    let mut failed = Vec::new();
    for path in bundled() {
        let mut plan = load(&path, &Disk).unwrap();
        plan.instant_budget = 100;
        let report = run(&plan, None);
        if !report.passed {
            failed.push(canarysim::report::text::render(&report));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
