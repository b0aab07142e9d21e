//! `canarysim compare --ingress2gateway`: would the split survive a move from ingress-nginx
//! to the Gateway API? The scenario runs as written; before each load step that goes
//! through ingress-nginx, the world is forked, the HTTPRoutes ingress2gateway would write
//! from the Ingresses of that moment ([`ingress2gateway`]) are added beside them, and the
//! same load (same seed) is sent through their Gateway. Per load the report sets what each
//! was configured for and observed, and whether the two splits differ.

pub mod ingress2gateway;

use super::plan::{Plan, StepKind};
use super::runner::Runner;
use crate::load::OriginChoice;
use crate::mesh::ingress_nginx::{BACKENDS_SYNC_INTERVAL, CONTROLLER_NAME, CONTROLLER_NAMESPACE};
use crate::model::gateway_api;
use crate::outcome::{LoadReport, MigrationReport, MigrationRow, MigrationSide};
use crate::sim::World;

/// Runs `plan`, and each of its loads through ingress-nginx again through the HTTPRoutes
/// ingress2gateway would write.
pub fn migration_check(plan: &Plan, seed: Option<u64>) -> MigrationReport {
    let seed = seed.unwrap_or(plan.seed);
    let mut runner = Runner::new(plan, Some(seed));
    let mut report = MigrationReport {
        name: plan.name.clone(),
        file: plan.file.clone(),
        seed,
        rows: Vec::new(),
        warnings: Vec::new(),
        notes: Vec::new(),
        failures: Vec::new(),
    };
    let through_ingress = format!("gateway {CONTROLLER_NAMESPACE}/{CONTROLLER_NAME}");
    while let Some(step) = runner.next_step() {
        let fork = matches!(step.kind, StepKind::Load(_)).then(|| runner.world.clone());
        let Some(done) = runner.step() else { break };
        if !done.passed {
            report
                .failures
                .push(format!("step {} ({}) failed", done.index, done.action));
        }
        let (Some(world), StepKind::Load(workload), Some(load)) =
            (fork, &step.kind, done.load.clone())
        else {
            continue;
        };
        if load.path != through_ingress {
            report.notes.push(format!(
                "step {}: the load went {}, not through ingress-nginx; not compared",
                step.index, load.path
            ));
            continue;
        }
        match migrated_load(plan, seed, step.index, world, workload) {
            Ok((migrated, mut warnings)) => {
                if load.unit == crate::load::SplitUnit::Client
                    && migrated.unit != crate::load::SplitUnit::Client
                {
                    // ingress2gateway writes no session persistence: each request draws.
                    warnings.push("session affinity (nginx.ingress.kubernetes.io/affinity: cookie) is lost: ingress-nginx pins each user to the version of their first draw, the HTTPRoute draws every request; the rows compare the share of users with the share of requests".to_string());
                }
                for w in warnings {
                    if !report.warnings.contains(&w) {
                        report.warnings.push(w);
                    }
                }
                report
                    .rows
                    .push(row(step.index, done.time.clone(), &load, &migrated));
            }
            Err(e) => report.notes.push(format!("step {}: {e}", step.index)),
        }
    }
    report
}

/// The same load through the HTTPRoutes ingress2gateway writes for `world`'s Ingresses.
fn migrated_load(
    plan: &Plan,
    seed: u64,
    index: usize,
    mut world: World,
    workload: &crate::load::Workload,
) -> Result<(LoadReport, Vec<String>), String> {
    let converted = ingress2gateway::convert(&world.api);
    if !converted.errors.is_empty() {
        return Err(format!(
            "ingress2gateway writes nothing for these Ingresses: {}",
            converted.errors.join("; ")
        ));
    }
    let gateway = converted
        .objects
        .iter()
        .find(|o| o.kind == gateway_api::kind("Gateway") && serves(o, &workload.traffic.host))
        .map(|g| format!("{}/{}", g.namespace(), g.name()))
        .ok_or_else(|| {
            format!(
                "ingress2gateway writes no route for host {:?}",
                workload.traffic.host
            )
        })?;
    for object in converted.objects {
        let (kind, name) = (object.kind, object.name().to_string());
        world
            .api
            .create(object)
            .map_err(|e| format!("the {kind} {name} ingress2gateway writes is refused: {e}"))?;
    }
    // The new routes take effect after ingress-nginx's sync (the table holds both).
    let delay = world.config.push_delay.max(BACKENDS_SYNC_INTERVAL);
    world.advance(delay).map_err(|e| e.to_string())?;
    let mut workload = workload.clone();
    workload.origin = OriginChoice::Gateway(Some(gateway));
    let (lb, mode) = plan.data_plane();
    let mut streams = crate::load::Streams::new(seed, &format!("load/{index}"));
    let result = world
        .run_load(&workload, &plan.backends, lb, mode, &mut streams)
        .map_err(|e| e.to_string())?;
    Ok((super::split::load_report(&result), converted.warnings))
}

/// Whether a Gateway has a listener for `host` (or for every host).
fn serves(gateway: &crate::model::Object, host: &str) -> bool {
    let host = host.split(':').next().unwrap_or(host);
    gateway.spec()["listeners"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|l| l["hostname"].as_str().is_none_or(|h| h == host))
}

/// One row: the canary's share through each, and the test of whether they differ.
fn row(step: usize, time: String, nginx: &LoadReport, route: &LoadReport) -> MigrationRow {
    let side = |r: &LoadReport| MigrationSide {
        configured: r
            .configured
            .iter()
            .filter(|s| s.role == "canary")
            .map(|s| s.share)
            .sum::<f64>()
            + 0.0, // no "-0.00"
        observed: r
            .versions
            .iter()
            .filter(|v| v.role == "canary")
            .map(|v| v.unit_share)
            .sum::<f64>()
            + 0.0,
        effective_n: r.effective_n,
    };
    let counts = |r: &LoadReport| {
        let canary = r.versions.iter().filter(|v| v.role == "canary");
        let k = (canary.map(|v| v.unit_share).sum::<f64>() * r.effective_n as f64).round() as u64;
        [k, r.effective_n.saturating_sub(k)]
    };
    let (a, b) = (counts(nginx), counts(route));
    let test = crate::verify::chi_square_homogeneity_of(&[&a, &b]);
    let (ingress_nginx, http_route) = (side(nginx), side(route));
    // Exact shares of the two configurations: a difference there is a difference, however
    // small, whatever a sample could tell apart.
    let configured_differ = (ingress_nginx.configured - http_route.configured).abs() > 1e-9;
    MigrationRow {
        step,
        time,
        ingress_nginx,
        http_route,
        p_value: test.p_value,
        configured_differ,
        differ: configured_differ || test.p_value < 1.0 - crate::outcome::REPORT_CONFIDENCE,
    }
}
