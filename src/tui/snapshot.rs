//! What the TUI shows of a running scenario, taken from the world at one instant: plain
//! data the session sends to the draw loop (nothing here renders).

use std::collections::BTreeMap;

use crate::endpoints::Role;
use crate::managed_routes::RouterObject;
use crate::model::{Kind, ObjectKey};
use crate::outcome::LoadReport;
use crate::rollout_info::{self, RolloutView};
use crate::sim::World;
use crate::verify::SplitVerdict;

/// Where a plan step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepState {
    Done { passed: bool },
    Current,
    Next,
}

/// One line of the step timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct StepLine {
    pub index: usize,
    pub summary: String,
    pub state: StepState,
}

/// The four weights people confuse, for one VirtualService route (or, blue-green, one of
/// the rollout's Services), in percent of traffic to the canary (the new version).
#[derive(Debug, Clone, PartialEq)]
pub struct RouteWeights {
    /// `rollouts-demo-vsvc http/primary`, `HTTPRoute web rules/0`, or
    /// `Service rollout-bluegreen-active`
    pub route: String,
    /// The object whose weights these are.
    pub object: WeightedBy,
    /// The share the step's set weight means, in percent (of `maxTrafficWeight`);
    /// blue-green: all when the rollout points the Service at the new ReplicaSet, else none.
    pub set: f64,
    /// The canary's weight in the routing object, VirtualService or HTTPRoute, in percent
    /// of its route (none for a Service).
    pub virtual_service: Option<f64>,
    /// The canary pods' share of the split the proxies have received (after the push
    /// delay), or of the Service's ready endpoints; None before any table reached them.
    pub router: Option<f64>,
}

/// One version's figures from the last load.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionLine {
    pub role: String,
    pub version: String,
    /// Share of the draws (answers, or connections when the split is made per connection),
    /// with its interval, in percent.
    pub share: f64,
    pub interval: (f64, f64),
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub error_rate: f64,
}

/// The state of a run at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub scenario: String,
    pub time: String,
    pub time_s: f64,
    pub steps: Vec<StepLine>,
    /// A paused rollout's remaining pause, when it has a duration (`1m20s`).
    pub pause_left: Option<String>,
    pub rollout: Option<RolloutView>,
    pub weights: Vec<RouteWeights>,
    /// The canary share of the last load's draws, with its interval (percent).
    pub observed: Option<(f64, f64, f64)>,
    /// The last load's draws were connections (the split was made per connection), so
    /// `observed` is a share of connections.
    pub observed_per_connection: bool,
    /// The canary's share of ready pods: what kube-proxy would give it without a mesh.
    pub no_mesh: Option<f64>,
    pub versions: Vec<VersionLine>,
    pub violations: Vec<String>,
    /// Controller events and step results, oldest first, in Argo's words.
    pub events: Vec<String>,
    /// Each load's verdict and each expect_split's, as they land.
    pub verdicts: Vec<String>,
    /// Some(passed) once every step has run.
    pub finished: Option<bool>,
    /// Live mode: the router's address (and the gateways' TLS/TCP listeners).
    pub live: Option<String>,
}

/// What the session knows besides the world.
pub struct RunFacts<'a> {
    pub scenario: &'a str,
    pub namespace: &'a str,
    pub steps: Vec<StepLine>,
    pub last_load: Option<&'a LoadReport>,
    pub verdicts: Vec<String>,
    pub violations: Vec<String>,
    /// Step results, verdicts and actions, with their virtual time (ms).
    pub step_events: &'a [(u64, String)],
    pub finished: Option<bool>,
}

impl Snapshot {
    /// The snapshot of `world` now.
    pub fn take(world: &World, facts: RunFacts<'_>) -> Snapshot {
        let ns = facts.namespace;
        let rollout_name = world
            .api
            .list(Kind::Rollout, Some(ns), None)
            .first()
            .map(|r| r.name().to_string());
        let rollout = rollout_name
            .as_deref()
            .and_then(|name| rollout_info::view(&world.api, ns, name, world.now()).ok());
        let weights = rollout_name
            .as_deref()
            .map(|name| route_weights(world, ns, name))
            .unwrap_or_default();
        // The controller's events and the run's, in time order (stable: a step's result
        // follows the events it caused).
        let mut timed: Vec<(u64, String)> = world
            .events
            .iter()
            .map(|e| {
                (
                    e.time.as_duration().as_millis() as u64,
                    format!("{} {} {}", e.time, e.reason, e.message),
                )
            })
            .collect();
        timed.extend(facts.step_events.iter().cloned());
        timed.sort_by_key(|(t, _)| *t);
        let keep = timed.len().saturating_sub(200);
        let events: Vec<String> = timed.into_iter().skip(keep).map(|(_, e)| e).collect();
        let (observed, versions) = match facts.last_load {
            Some(load) => load_figures(load),
            None => (None, Vec::new()),
        };
        Snapshot {
            scenario: facts.scenario.to_string(),
            time: world.now().to_string(),
            time_s: world.now().as_duration().as_secs_f64(),
            steps: facts.steps,
            pause_left: rollout_name
                .as_deref()
                .and_then(|name| pause_left(world, ns, name)),
            rollout,
            weights,
            observed,
            observed_per_connection: facts
                .last_load
                .is_some_and(|l| l.unit == crate::verify::SplitUnit::Connection),
            no_mesh: no_mesh_share(world, ns),
            versions,
            violations: facts.violations,
            events,
            verdicts: facts.verdicts,
            finished: facts.finished,
            live: None,
        }
    }
}

/// An expect_split's verdict, in a line.
pub fn split_line(step: usize, v: &SplitVerdict) -> String {
    format!(
        "step {step} expect_split: {} — {}",
        v.outcome.heading(),
        v.explanation.lines().next().unwrap_or("")
    )
}

fn load_figures(load: &LoadReport) -> (Option<(f64, f64, f64)>, Vec<VersionLine>) {
    let versions: Vec<VersionLine> = load
        .versions
        .iter()
        .map(|v| VersionLine {
            role: v.role.clone(),
            version: v.version.clone(),
            share: v.unit_share * 100.0,
            interval: (v.interval.lo * 100.0, v.interval.hi * 100.0),
            p50_ms: v.latency.p50 as f64 / 1000.0,
            p99_ms: v.latency.p99 as f64 / 1000.0,
            error_rate: v.error_rate * 100.0,
        })
        .collect();
    let canary: Vec<&VersionLine> = versions.iter().filter(|v| v.role == "canary").collect();
    let observed = (!canary.is_empty()).then(|| {
        let share = canary.iter().map(|v| v.share).sum::<f64>();
        let lo = canary.iter().map(|v| v.interval.0).sum::<f64>();
        let hi = canary.iter().map(|v| v.interval.1).sum::<f64>().min(100.0);
        (share, lo, hi)
    });
    (observed, versions)
}

/// The rollout's managed VirtualService routes: set weight, the object's canary weight, and
/// the share the route table in force gives the canary pods.
fn route_weights(world: &World, ns: &str, rollout: &str) -> Vec<RouteWeights> {
    let Ok(ro) = world.api.get(Kind::Rollout, ns, rollout) else {
        return Vec::new();
    };
    if let Some(services) = blue_green_service_weights(world, ro) {
        return services;
    }
    // The share the step means: its weight of `maxTrafficWeight`.
    let max_traffic_weight = ro
        .spec_as::<crate::model::rollout::RolloutSpec>()
        .ok()
        .and_then(|spec| spec.canary().map(|c| c.max_traffic_weight()))
        .unwrap_or(100);
    let set = f64::from(
        rollout_info::view(&world.api, ns, rollout, world.now())
            .map(|v| v.set_weight)
            .unwrap_or(0),
    ) * 100.0
        / f64::from(max_traffic_weight.max(1));
    let table = world.mesh.table_at(world.now());
    let get = |key: &ObjectKey| world.api.get(key.kind, &key.namespace, &key.name).ok();
    crate::managed_routes::canary_weights(ro, get)
        .into_iter()
        .map(|w| RouteWeights {
            route: w.label,
            object: match w.by {
                RouterObject::VirtualService => WeightedBy::VirtualService,
                RouterObject::GatewayApiRoute => WeightedBy::GatewayApiRoute,
                RouterObject::CanaryIngress => WeightedBy::CanaryIngress,
            },
            set,
            virtual_service: w.canary_percent,
            router: table.and_then(|t| router_canary_share(t, &w.object, &w.route)),
        })
        .collect()
}

/// The canary pods' share, in percent, of the split the table in force has for a route of
/// a VirtualService or HTTPRoute.
fn router_canary_share(
    table: &crate::mesh::RouteTable,
    key: &ObjectKey,
    route: &str,
) -> Option<f64> {
    let split = table.route_split(key, route)?;
    let shares = table.role_shares(split);
    Some(
        shares
            .iter()
            .filter(|(r, _)| *r == Role::Canary)
            .map(|(_, s)| s * 100.0)
            // An empty sum is −0.0; the panel shows 0.
            .sum::<f64>()
            + 0.0,
    )
}

/// A blue-green rollout's active and preview Services: whether the rollout points each at
/// the new (not yet stable) ReplicaSet, and the new pods' share of its ready endpoints.
fn blue_green_service_weights(
    world: &World,
    ro: &crate::model::Object,
) -> Option<Vec<RouteWeights>> {
    let spec: crate::model::rollout::RolloutSpec = ro.spec_as().ok()?;
    let bg = spec.blue_green()?.ok().filter(|_| spec.is_blue_green())?;
    let status = ro.status();
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    let (current, stable) = (text(&status["currentPodHash"]), text(&status["stableRS"]));
    let new = |hash: &str| !hash.is_empty() && hash == current && hash != stable;
    let mut out = Vec::new();
    for (service, pointed) in [
        (&bg.active_service, &status["blueGreen"]["activeSelector"]),
        (&bg.preview_service, &status["blueGreen"]["previewSelector"]),
    ] {
        if world
            .api
            .get(Kind::Service, ro.namespace(), service)
            .is_err()
        {
            continue;
        }
        // The new pods: the current template's, until it is the stable one.
        let new_hash = if new(&current) { current.as_str() } else { "" };
        let router =
            crate::rollout_info::endpoint_share(&world.api, ro.namespace(), service, new_hash)
                .map(|share| share * 100.0);
        out.push(RouteWeights {
            route: format!("Service {service}"),
            object: WeightedBy::Service,
            set: if new(pointed.as_str().unwrap_or_default()) {
                100.0
            } else {
                0.0
            },
            virtual_service: None,
            router,
        });
    }
    Some(out)
}

/// The canary's share of the ready pods of the rollout's app (kube-proxy's split).
fn no_mesh_share(world: &World, ns: &str) -> Option<f64> {
    let mut ready: BTreeMap<&'static str, usize> = BTreeMap::new();
    let ro = world
        .api
        .list(Kind::Rollout, Some(ns), None)
        .into_iter()
        .next()?;
    let stable = ro.status()["stableRS"].as_str().unwrap_or("").to_string();
    let current = ro.status()["currentPodHash"]
        .as_str()
        .unwrap_or("")
        .to_string();
    // The pods' facts: this runs at every frame, for every pod.
    for (_, pod) in world.api.pod_facts(Some(ns), None) {
        if !pod.ready {
            continue;
        }
        let hash = pod
            .labels
            .get(crate::model::vocabulary::HASH_LABEL)
            .cloned()
            .unwrap_or_default();
        if hash == current && hash != stable {
            *ready.entry("canary").or_default() += 1;
        } else if hash == stable {
            *ready.entry("stable").or_default() += 1;
        }
    }
    let total: usize = ready.values().sum();
    (total > 0).then(|| ready.get("canary").copied().unwrap_or(0) as f64 * 100.0 / total as f64)
}

/// A timed pause's remaining time.
fn pause_left(world: &World, ns: &str, rollout: &str) -> Option<String> {
    let ro = world.api.get(Kind::Rollout, ns, rollout).ok()?;
    if ro.status()["phase"] != "Paused" {
        return None;
    }
    let index = ro.status()["currentStepIndex"].as_u64()? as usize;
    let step = &ro.spec()["strategy"]["canary"]["steps"][index]["pause"]["duration"];
    let duration = match step {
        serde_json::Value::String(s) => crate::model::duration::go_parse_duration(s)
            .or_else(|| s.parse::<i64>().ok().map(|n| n * 1_000_000_000))?,
        serde_json::Value::Number(n) => n.as_i64()? * 1_000_000_000,
        _ => return None,
    };
    let started = ro.status()["pauseConditions"][0]["startTime"].as_str()?;
    let started = crate::clock::SimTime::parse_rfc3339(started)?;
    let end = started.after(std::time::Duration::from_nanos(duration.max(0) as u64));
    let left = end.as_duration().saturating_sub(world.now().as_duration());
    Some(humantime::format_duration(std::time::Duration::from_secs(left.as_secs())).to_string())
}

/// What sets a route's weights: a VirtualService, a Gateway API route, or (blue-green) a
/// Service's selector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightedBy {
    VirtualService,
    GatewayApiRoute,
    /// An NGINX canary Ingress's `canary-weight`.
    CanaryIngress,
    Service,
}
