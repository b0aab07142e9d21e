//! `canarysim compare`: the same scenario with and without the mesh.
//!
//! The scenario runs as written (traffic routing through Istio); then it runs again with
//! `trafficRouting` removed from every Rollout, so that Argo falls back to the basic canary
//! (the weight approximated by the ratio of pods) and clients without sidecars reach the pods
//! through a plain Service selecting the rollout's pods, kube-proxy choosing a pod per
//! connection. Same seed, same load steps. Per load step the report sets the set weight
//! beside what each world delivered.

use serde_json::{Value, json};

use super::plan::{Plan, StepKind};
use super::runner::{RunReport, Runner};
use crate::load::OriginChoice;
use crate::model::rollout::{RolloutSpec, RolloutStatus};
use crate::model::{Kind, Manifest, Object};
pub use crate::outcome::{CompareReport, CompareRow, Observed};
use crate::outcome::{LoadReport, StepReport};
use crate::rollout_info;

/// Service the no-mesh run adds in front of each rollout's pods.
pub(crate) fn plain_service_name(rollout: &str) -> String {
    format!("{rollout}-all")
}

/// Runs `plan` with and without traffic routing.
pub fn compare(plan: &Plan, seed: Option<u64>) -> CompareReport {
    compared(plan, seed, None).report
}

/// A comparison, with what `check` reads beside it.
pub(crate) struct Compared {
    pub report: CompareReport,
    /// Per row: the mesh run's load in its rollout's context.
    pub contexts: Vec<RowContext>,
    /// The run of the scenario as written.
    pub mesh: RunReport,
    /// The report's failures but those of `expect_split` steps (`check` judges each split
    /// in its row).
    pub failures_beside_splits: Vec<String>,
}

/// What a row's load met in the mesh run.
pub(crate) struct RowContext {
    /// The rollout's canary step (Argo's `currentStepIndex`) when the load ran.
    pub canary_step: Option<i64>,
    /// The data plane the load went through.
    pub path: String,
    /// For a blue-green rollout: the Service the load went to (`active`, `preview`).
    pub service: Option<String>,
    /// The version of the rollout's pod template (the new one during an update).
    pub version: String,
}

/// [`compare`] about `rollout` (default: the namespace's first): its weights, its new
/// version, and the plain Service the no-mesh loads are sent to.
pub(crate) fn compared(plan: &Plan, seed: Option<u64>, rollout: Option<&str>) -> Compared {
    let no_mesh_plan = without_traffic_routing(plan, rollout);
    let mesh = collect(plan, seed, true, rollout);
    let no_mesh = collect(&no_mesh_plan, seed, false, rollout);
    let mut notes: Vec<String> = mesh
        .1
        .into_iter()
        .map(|n| format!("mesh run: {n}"))
        .collect();
    notes.extend(no_mesh.1.into_iter().map(|n| format!("no-mesh run: {n}")));
    let failures_beside_splits = failures(&mesh.2, &no_mesh.2, |s| s.split.is_none());
    let failures = failures(&mesh.2, &no_mesh.2, |_| true);
    let contexts = mesh
        .0
        .iter()
        .map(|m| RowContext {
            canary_step: m.canary_step,
            path: m.load.path.clone(),
            service: m.service.clone(),
            version: m.version.clone(),
        })
        .collect();
    let rows = mesh
        .0
        .into_iter()
        .zip(no_mesh.0)
        .map(|(m, n)| CompareRow {
            step: m.step,
            time: m.time,
            set_weight: m.set_weight,
            virtual_service_weight: m.vs_weight,
            mesh: observed(&m.load, &m.version, m.set_weight),
            pod_ratio: n.pod_ratio,
            no_mesh: observed(&n.load, &n.version, m.set_weight),
        })
        .collect();
    Compared {
        report: CompareReport {
            name: plan.name.clone(),
            file: plan.file.clone(),
            seed: seed.unwrap_or(plan.seed),
            rows,
            notes,
            failures,
        },
        contexts,
        mesh: mesh.2,
        failures_beside_splits,
    }
}

/// Why `compare` exits 1, as `run` would: the scenario as written failed a step (or could
/// not start), or the no-mesh run's rollout aborted where the mesh run's did not (its rows
/// then stop early). The no-mesh run's missed splits are the comparison itself, not failures.
/// A failed step is listed when `listed` says so.
fn failures(
    mesh: &RunReport,
    no_mesh: &RunReport,
    listed: impl Fn(&StepReport) -> bool,
) -> Vec<String> {
    let failed: Vec<&StepReport> = mesh.steps.iter().filter(|s| !s.passed).collect();
    let mut out: Vec<String> = failed
        .iter()
        .filter(|s| listed(s))
        .map(|s| format!("mesh run: step {} ({}): {}", s.index, s.summary, s.detail))
        .collect();
    if failed.is_empty() && !mesh.passed {
        out.push("mesh run: the scenario did not run to its end".into());
    }
    for view in &no_mesh.final_views {
        let degraded_here = |r: &RunReport| {
            r.final_views
                .iter()
                .any(|v| v.name == view.name && v.status == "Degraded")
        };
        if degraded_here(no_mesh) && !degraded_here(mesh) {
            out.push(format!(
                "no-mesh run: rollout '{}' ended Degraded: {}",
                view.name, view.message
            ));
        }
    }
    out
}

struct Sample {
    step: usize,
    time: String,
    set_weight: i32,
    vs_weight: Option<i32>,
    canary_step: Option<i64>,
    /// Image tag of the rollout's current pod template.
    version: String,
    /// Ready pods of the current template / ready pods of the rollout.
    pod_ratio: f64,
    /// Blue-green: which of the rollout's Services the load went to.
    service: Option<String>,
    load: LoadReport,
}

/// Runs a plan step by step and keeps, for each load step, the load report and the
/// rollout's weights at that moment.
fn collect(
    plan: &Plan,
    seed: Option<u64>,
    mesh: bool,
    rollout: Option<&str>,
) -> (Vec<Sample>, Vec<String>, RunReport) {
    let mut runner = Runner::new(plan, seed);
    let mut samples = Vec::new();
    let mut notes = Vec::new();
    while let Some(step) = runner.step() {
        let step = step.clone();
        if step.action == "wait" && !step.passed {
            notes.push(format!(
                "step {} ({}): {}",
                step.index, step.summary, step.detail
            ));
        }
        let Some(load) = step.load else { continue };
        let ro = the_rollout(&runner, &plan.namespace, rollout);
        let host = match plan.steps.get(step.index.wrapping_sub(1)).map(|s| &s.kind) {
            Some(StepKind::Load(w)) => w.traffic.host.clone(),
            _ => String::new(),
        };
        let blue_green = ro.and_then(|ro| blue_green_service(ro, &host));
        let (set_weight, vs_weight) = match &blue_green {
            Some(bg) => (bg.expected, None),
            None => ro.map(rollout_weights).unwrap_or((0, None)),
        };
        let (version, mut pod_ratio) = ro
            .map(|ro| new_version(&runner, ro))
            .unwrap_or((String::new(), 0.0));
        if let (Some(ro), Some(bg)) = (ro, &blue_green) {
            // A client of one Service reaches that Service's endpoints only.
            let current = ro.status()["currentPodHash"].as_str().unwrap_or_default();
            pod_ratio =
                rollout_info::endpoint_share(&runner.world.api, ro.namespace(), &bg.name, current)
                    .unwrap_or(0.0);
        }
        samples.push(Sample {
            step: step.index,
            time: step.time.clone(),
            set_weight,
            vs_weight: vs_weight.filter(|_| mesh),
            canary_step: ro.and_then(|ro| ro.status()["currentStepIndex"].as_i64()),
            version,
            pod_ratio,
            service: blue_green.map(|bg| bg.role.to_string()),
            load,
        });
    }
    (samples, notes, runner.finish())
}

/// The rollout named (or the namespace's first).
fn the_rollout<'r>(runner: &'r Runner, ns: &str, name: Option<&str>) -> Option<&'r Object> {
    runner
        .world
        .api
        .list(Kind::Rollout, Some(ns), None)
        .into_iter()
        .find(|ro| name.is_none_or(|n| ro.name() == n))
}

/// The blue-green Service a load goes through.
struct BlueGreenService {
    /// "active" or "preview".
    role: &'static str,
    /// The Service's name.
    name: String,
    /// The share of the new version it should send.
    expected: i32,
}

/// For a blue-green rollout loaded through its active or preview Service: which one, and
/// the share of the new version it should send — the preview always all; the active none
/// before the switch, all after (the switch is the rollout's, as its status records it).
fn blue_green_service(ro: &Object, host: &str) -> Option<BlueGreenService> {
    let spec: RolloutSpec = ro.spec_as().ok()?;
    let bg = spec.blue_green()?.ok().filter(|_| spec.is_blue_green())?;
    let short = host.split('.').next().unwrap_or(host);
    if short.is_empty() {
        return None;
    }
    let status = ro.status();
    let current = status["currentPodHash"].as_str().unwrap_or_default();
    let (role, expected) = if bg.preview_service == short {
        ("preview", 100)
    } else if bg.active_service == short {
        let switched = status["blueGreen"]["activeSelector"].as_str() == Some(current);
        ("active", if switched { 100 } else { 0 })
    } else {
        return None;
    };
    Some(BlueGreenService {
        role,
        name: short.to_string(),
        expected,
    })
}

/// SetWeight and the canary weight written to the VirtualService.
fn rollout_weights(ro: &Object) -> (i32, Option<i32>) {
    let spec: RolloutSpec = ro.spec_as().unwrap_or_default();
    let status: RolloutStatus = ro.status_as().unwrap_or_default();
    let vs = status.canary.weights.as_ref().map(|w| w.canary.weight);
    (rollout_info::set_weight(&spec, &status), vs)
}

/// The image tag of the rollout's current template, and the share of its ready pods that
/// run it.
fn new_version(runner: &Runner, ro: &Object) -> (String, f64) {
    let api = &runner.world.api;
    let ns = ro.namespace();
    let image = ro.spec()["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or("");
    let hash = ro.status()["currentPodHash"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let selector = crate::model::object::string_map(ro.spec()["selector"].get("matchLabels"));
    let pods: Vec<_> = api
        .pod_facts(Some(ns), Some(&selector))
        .into_iter()
        .filter(|(_, pod)| pod.serving)
        .collect();
    let new = pods
        .iter()
        .filter(|(_, pod)| pod.labels.get(crate::controller::replicaset::HASH_LABEL) == Some(&hash))
        .count();
    let ratio = if pods.is_empty() {
        0.0
    } else {
        new as f64 / pods.len() as f64
    };
    (crate::endpoints::image_version(image).to_string(), ratio)
}

fn observed(load: &LoadReport, version: &str, set_weight: i32) -> Observed {
    let canary: Vec<_> = load
        .versions
        .iter()
        .filter(|v| v.version == version)
        .collect();
    // In the unit of randomisation, so that the share and its interval agree.
    let share: f64 = canary.iter().map(|v| v.unit_share).sum();
    let interval = match canary.as_slice() {
        [one] => one.interval,
        _ => {
            let k = (share * load.effective_n as f64).round() as u64;
            crate::verify::proportion_interval(
                k,
                load.effective_n,
                crate::outcome::REPORT_CONFIDENCE,
            )
            .interval
        }
    };
    Observed {
        share: share + 0.0, // no "-0.00"

        interval,
        unit: load.unit,
        effective_n: load.effective_n,
        error_points: share * 100.0 - f64::from(set_weight),
    }
}

/// A Rollout the no-mesh plan has met, in a manifest or an `apply` step.
struct MetRollout {
    name: String,
    selector: Value,
    /// Reached through its own active and preview Services, mesh or not.
    blue_green: bool,
}

/// The plan without a mesh: every Rollout loses `trafficRouting`, a plain Service selects
/// each canary rollout's pods, and every load comes from pods without sidecars to that
/// Service (a blue-green rollout's loads keep their Service).
pub(crate) fn without_traffic_routing(plan: &Plan, rollout: Option<&str>) -> Plan {
    let mut p = plan.clone();
    let mut rollouts: Vec<MetRollout> = Vec::new();
    let strip = |m: &mut Manifest, rollouts: &mut Vec<MetRollout>| {
        if m.object.kind != Kind::Rollout {
            return;
        }
        // Read by pointer: a spec of another shape (the fuzzer grafted a list onto
        // `strategy`, which the run reports as Argo's InvalidSpec) is left as it is.
        if let Some(canary) = m
            .object
            .value
            .pointer_mut("/spec/strategy/canary")
            .and_then(Value::as_object_mut)
        {
            canary.remove("trafficRouting");
            // Header and mirror routes need a mesh: without one the steps would be invalid.
            if let Some(steps) = canary.get_mut("steps").and_then(Value::as_array_mut) {
                steps.retain(|s| {
                    s.get("setHeaderRoute").is_none() && s.get("setMirrorRoute").is_none()
                });
            }
        }
        let met = MetRollout {
            name: m.object.name().to_string(),
            selector: m.object.value["spec"]["selector"]["matchLabels"].clone(),
            blue_green: m
                .object
                .spec_as::<RolloutSpec>()
                .is_ok_and(|s| s.is_blue_green()),
        };
        // A later apply of the same Rollout may change its strategy.
        match rollouts.iter_mut().find(|r| r.name == met.name) {
            Some(seen) => *seen = met,
            None => rollouts.push(met),
        }
    };
    for m in &mut p.manifests {
        strip(m, &mut rollouts);
    }
    for step in &mut p.steps {
        match &mut step.kind {
            StepKind::Apply(ms) => {
                for m in ms {
                    strip(m, &mut rollouts);
                }
            }
            StepKind::Load(w) => {
                w.origin = OriginChoice::Plain;
                let target = rollouts
                    .iter()
                    .find(|r| rollout.is_none_or(|name| r.name == name))
                    .or(rollouts.first());
                if let Some(target) = target.filter(|r| !r.blue_green) {
                    w.traffic.host = plain_service_name(&target.name);
                }
            }
            _ => {}
        }
    }
    rollouts.sort_by(|a, b| a.name.cmp(&b.name));
    for r in rollouts {
        let svc = json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": plain_service_name(&r.name), "namespace": plan.namespace},
            "spec": {"selector": r.selector, "ports": [{"name": "http", "port": 80}]},
        });
        p.manifests.push(Manifest {
            object: Object::new(Kind::Service, svc),
            source: std::sync::Arc::new(crate::model::SourceMap::synthetic("canarysim compare")),
        });
    }
    p
}
