//! `expect:` — assertions on the cluster state, evaluated against the live objects.

use serde_json::Value;
use std::collections::BTreeMap;

use super::format::{Expect, ReplicaExpect};
use crate::model::rollout::RolloutStatus;
use crate::model::vocabulary::HASH_LABEL;
use crate::model::{Kind, ObjectKey};
use crate::rollout_info;
use crate::sim::World;

/// The `$canary_hash`, `$stable_hash`, `$canary_rs`, `$stable_rs` values of a rollout.
pub(crate) fn variables(world: &World, ns: &str, rollout: &str) -> BTreeMap<&'static str, String> {
    let status: RolloutStatus = world
        .api
        .get(Kind::Rollout, ns, rollout)
        .ok()
        .and_then(|r| r.status_as().ok())
        .unwrap_or_default();
    let mut vars = BTreeMap::new();
    vars.insert(
        "$canary_rs",
        format!("{rollout}-{}", status.current_pod_hash),
    );
    vars.insert("$stable_rs", format!("{rollout}-{}", status.stable_r_s));
    vars.insert("$canary_hash", status.current_pod_hash);
    vars.insert("$stable_hash", status.stable_r_s);
    vars
}

/// Replaces every `$name` in `text`.
pub(crate) fn expand(text: &str, vars: &BTreeMap<&'static str, String>) -> String {
    let mut out = text.to_string();
    // Longest names first, so `$canary_rs` is not read as `$canary` + `_rs`.
    let mut names: Vec<_> = vars.keys().collect();
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    for name in names {
        out = out.replace(*name, &vars[name]);
    }
    out
}

/// Checks every key of `e`; returns the failures (empty: passed) and what was checked.
pub fn check(
    world: &World,
    ns: &str,
    rollout: Option<&str>,
    e: &Expect,
    violations: usize,
) -> (Vec<String>, Vec<String>) {
    let mut out = Findings::default();
    let vars = match rollout {
        Some(name) => {
            let Ok(ro) = world.api.get(Kind::Rollout, ns, name) else {
                out.failures
                    .push(format!("rollouts.argoproj.io \"{name}\" not found"));
                return (out.failures, out.checked);
            };
            let status: RolloutStatus = ro.status_as().unwrap_or_default();
            let vars = variables(world, ns, name);
            check_rollout(&mut out, world, ns, name, &status, &vars, e);
            if let Some(a) = &e.analysis {
                check_analysis(&mut out, world, ns, name, a, &vars);
            }
            vars
        }
        None => {
            let needs_rollout = e.phase.is_some()
                || e.message.is_some()
                || e.step.is_some()
                || e.set_weight.is_some()
                || e.actual_weight.is_some()
                || e.replicas.is_some()
                || e.error.is_some()
                || e.analysis.is_some();
            if needs_rollout {
                out.failures
                    .push("no rollout to check (name one with `rollout:`)".into());
            }
            BTreeMap::new()
        }
    };
    if let Some(v) = e.violations {
        out.compare("violations", v.to_string(), violations.to_string());
    }
    if let Some(weights) = &e.weights {
        check_weights(&mut out, world, ns, weights);
    }
    if let Some(objects) = &e.objects {
        check_objects(&mut out, world, ns, objects, &vars);
    }
    (out.failures, out.checked)
}

/// The rollout's phase, message, step, weights, replicas and controller error.
fn check_rollout(
    out: &mut Findings,
    world: &World,
    ns: &str,
    name: &str,
    status: &RolloutStatus,
    vars: &BTreeMap<&'static str, String>,
    e: &Expect,
) {
    if let Some(p) = &e.phase {
        out.compare("phase", p.clone(), status.phase.clone());
    }
    if let Some(m) = &e.message {
        let m = expand(m, vars);
        if status.message.contains(&m) {
            out.checked.push(format!("message contains \"{m}\""));
        } else {
            out.failures.push(format!(
                "message: expected to contain \"{m}\", got \"{}\"",
                status.message
            ));
        }
    }
    if let Some(s) = e.step {
        out.compare(
            "step",
            s.to_string(),
            status
                .current_step_index
                .map(|i| i.to_string())
                .unwrap_or_else(|| "none".into()),
        );
    }
    if e.set_weight.is_some() || e.actual_weight.is_some() {
        if let Ok(view) = rollout_info::view(&world.api, ns, name, world.now()) {
            if let Some(w) = e.set_weight {
                out.compare("set_weight", w.to_string(), view.set_weight.to_string());
            }
            if let Some(w) = e.actual_weight {
                out.compare(
                    "actual_weight",
                    w.to_string(),
                    view.actual_weight.to_string(),
                );
            }
        }
    }
    if let Some(r) = &e.replicas {
        for (what, want, got) in replica_checks(world, ns, status, r) {
            out.compare(
                &format!("replicas.{what}"),
                want.to_string(),
                got.to_string(),
            );
        }
    }
    if let Some(err) = &e.error {
        let actual = world.errors.get(&ObjectKey::new(Kind::Rollout, ns, name));
        check_error(out, err, actual.map(String::as_str), vars);
    }
}

// Long: one check per AnalysisRun field a step may expect, each a few lines.
/// An AnalysisRun of the rollout: its phase, message, a metric's counts and last value,
/// and when it completed.
fn check_analysis(
    out: &mut Findings,
    world: &World,
    ns: &str,
    rollout: &str,
    e: &super::format::AnalysisExpect,
    vars: &BTreeMap<&'static str, String>,
) {
    let Ok(ro) = world.api.get(Kind::Rollout, ns, rollout) else {
        return;
    };
    let runs = crate::controller::rollout_analysis::owned_runs(&world.api, ro);
    if let Some(n) = e.runs {
        out.compare("analysis.runs", n.to_string(), runs.len().to_string());
    }
    let run = match &e.run {
        Some(name) => {
            let name = expand(name, vars);
            match runs.iter().find(|r| r.name() == name) {
                Some(r) => r,
                None => {
                    let names: Vec<&str> = runs.iter().map(|r| r.name()).collect();
                    out.failures.push(format!(
                        "analysis: no AnalysisRun \"{name}\" (the rollout has: {})",
                        if names.is_empty() {
                            "none".to_string()
                        } else {
                            names.join(", ")
                        }
                    ));
                    return;
                }
            }
        }
        None => match runs.last() {
            Some(r) => r,
            None => {
                if e.phase.is_some()
                    || e.message.is_some()
                    || e.metric.is_some()
                    || e.measurements.is_some()
                    || e.value.is_some()
                    || e.completed_at.is_some()
                    || e.successful.is_some()
                    || e.failed.is_some()
                    || e.inconclusive.is_some()
                    || e.error.is_some()
                {
                    out.failures
                        .push(format!("analysis: rollout '{rollout}' has no AnalysisRun"));
                }
                return;
            }
        },
    };
    let status: crate::analysis::types::RunStatus =
        serde_json::from_value(run.value["status"].clone()).unwrap_or_default();
    let label = format!("analysis {}", run.name());
    if let Some(p) = &e.phase {
        out.compare(&format!("{label} phase"), p.clone(), status.phase.clone());
    }
    if let Some(m) = &e.message {
        let m = expand(m, vars);
        if status.message.contains(&m) {
            out.checked
                .push(format!("{label} message contains \"{m}\""));
        } else {
            out.failures.push(format!(
                "{label} message: expected to contain \"{m}\", got \"{}\"",
                status.message
            ));
        }
    }
    let wants_metric = e.measurements.is_some()
        || e.successful.is_some()
        || e.failed.is_some()
        || e.inconclusive.is_some()
        || e.error.is_some()
        || e.value.is_some();
    if wants_metric {
        let result = match &e.metric {
            Some(m) => status.metric_results.iter().find(|r| &r.name == m),
            None => status.metric_results.first(),
        };
        match result {
            None => out.failures.push(format!(
                "{label}: no measurement of metric {} yet",
                e.metric.as_deref().unwrap_or("(first)")
            )),
            Some(r) => {
                let l = format!("{label} metric {}", r.name);
                if let Some(n) = e.measurements {
                    out.compare(
                        &format!("{l} measurements"),
                        n.to_string(),
                        (r.count + r.error).to_string(),
                    );
                }
                for (what, want, got) in [
                    ("successful", e.successful, r.successful),
                    ("failed", e.failed, r.failed),
                    ("inconclusive", e.inconclusive, r.inconclusive),
                    ("error", e.error, r.error),
                ] {
                    if let Some(w) = want {
                        out.compare(&format!("{l} {what}"), w.to_string(), got.to_string());
                    }
                }
                if let Some(v) = &e.value {
                    let got = r
                        .measurements
                        .last()
                        .map(|m| m.value.clone())
                        .unwrap_or_default();
                    out.compare(&format!("{l} value"), v.clone(), got);
                }
            }
        }
    }
    if let Some(at) = &e.completed_at {
        let got = status
            .completed_at
            .as_deref()
            .and_then(crate::clock::SimTime::parse_rfc3339)
            .map(|t| crate::model::duration::format(t.as_duration()))
            .unwrap_or_else(|| "none".into());
        let want = if at == "none" {
            "none".to_string()
        } else {
            crate::model::duration::parse(at)
                .map(crate::model::duration::format)
                .unwrap_or_else(|_| at.clone())
        };
        out.compare(&format!("{label} completed_at"), want, got);
    }
}

/// The controller's error: `none`, or one containing the expected text.
fn check_error(
    out: &mut Findings,
    expected: &str,
    actual: Option<&str>,
    vars: &BTreeMap<&'static str, String>,
) {
    if expected == "none" {
        match actual {
            None => out.checked.push("error none".into()),
            Some(a) => out
                .failures
                .push(format!("error: expected none, got \"{a}\"")),
        }
        return;
    }
    let want = expand(expected, vars);
    match actual {
        Some(a) if a.contains(&want) => out.checked.push(format!("error \"{a}\"")),
        Some(a) => out.failures.push(format!(
            "error: expected to contain \"{want}\", got \"{a}\""
        )),
        None => out.failures.push(format!(
            "error: expected to contain \"{want}\", but the controller reports none"
        )),
    }
}

/// Each VirtualService route's destinations and weights, exactly.
fn check_weights(
    out: &mut Findings,
    world: &World,
    ns: &str,
    weights: &BTreeMap<String, super::format::RouteWeights>,
) {
    for (vs_name, routes) in weights {
        let Ok(vs) = world.api.get(Kind::VirtualService, ns, vs_name) else {
            out.failures.push(format!(
                "weights: virtualservices.networking.istio.io \"{vs_name}\" not found"
            ));
            continue;
        };
        for (route_key, want) in routes {
            match route_weights(vs.spec(), route_key) {
                None => out
                    .failures
                    .push(format!("weights: {vs_name} has no route {route_key}")),
                Some(got) => {
                    let want: BTreeMap<String, i64> = want.clone().into_iter().collect();
                    out.compare(
                        &format!("weights {vs_name} {route_key}"),
                        format_weights(&want),
                        format_weights(&got),
                    );
                }
            }
        }
    }
}

/// Objects matched partially (with `$canary_hash` and the like expanded).
fn check_objects(
    out: &mut Findings,
    world: &World,
    ns: &str,
    objects: &[Value],
    vars: &BTreeMap<&'static str, String>,
) {
    for (i, want) in objects.iter().enumerate() {
        let want = expand_value(want, vars);
        let kind = match (
            want.get("apiVersion").and_then(Value::as_str),
            want.get("kind").and_then(Value::as_str),
        ) {
            (Some(api_version), Some(kind)) => {
                crate::model::yaml::kind_of(api_version, kind, &[]).ok()
            }
            (None, Some(kind)) => Kind::parse(kind),
            (_, None) => None,
        };
        let name = want["metadata"]["name"].as_str().unwrap_or("");
        let obj_ns = want["metadata"]["namespace"].as_str().unwrap_or(ns);
        let Some(kind) = kind else {
            out.failures
                .push(format!("objects[{i}]: unknown or missing kind"));
            continue;
        };
        match world.api.get(kind, obj_ns, name) {
            Err(err) => out.failures.push(format!("objects[{i}]: {err}")),
            Ok(obj) => {
                let mut diffs = Vec::new();
                partial_match(&want, &obj.value, "", &mut diffs);
                if diffs.is_empty() {
                    out.checked.push(format!("{kind}/{name} matches"));
                } else {
                    out.failures
                        .push(format!("{kind}/{name}: {}", diffs.join("; ")));
                }
            }
        }
    }
}

/// What an expectation found: failures, and what held.
#[derive(Default)]
struct Findings {
    failures: Vec<String>,
    checked: Vec<String>,
}

impl Findings {
    fn compare(&mut self, what: &str, expected: String, actual: String) {
        if expected == actual {
            self.checked.push(format!("{what} {actual}"));
        } else {
            self.failures
                .push(format!("{what}: expected {expected}, got {actual}"));
        }
    }
}

fn replica_checks(
    world: &World,
    ns: &str,
    status: &RolloutStatus,
    r: &ReplicaExpect,
) -> Vec<(&'static str, i32, i32)> {
    let rs_size = |hash: &str| -> i32 {
        world
            .api
            .list(Kind::ReplicaSet, Some(ns), None)
            .into_iter()
            .find(|rs| {
                !hash.is_empty() && rs.labels().get(HASH_LABEL).map(String::as_str) == Some(hash)
            })
            .and_then(|rs| rs.spec()["replicas"].as_i64())
            .unwrap_or(0) as i32
    };
    let desired = world
        .api
        .list(Kind::Rollout, Some(ns), None)
        .into_iter()
        .find(|ro| ro.status()["currentPodHash"] == status.current_pod_hash.as_str())
        .and_then(|ro| ro.spec()["replicas"].as_i64())
        .unwrap_or(1) as i32;
    let canary_size = if status.current_pod_hash == status.stable_r_s {
        0
    } else {
        rs_size(&status.current_pod_hash)
    };
    let mut out = Vec::new();
    let mut add = |name, want: Option<i32>, got| {
        if let Some(w) = want {
            out.push((name, w, got));
        }
    };
    add("desired", r.desired, desired);
    add("current", r.current, status.replicas);
    add("updated", r.updated, status.updated_replicas);
    add("ready", r.ready, status.ready_replicas);
    add("available", r.available, status.available_replicas);
    add("stable", r.stable, rs_size(&status.stable_r_s));
    add("canary", r.canary, canary_size);
    out
}

/// Destination → weight of the route `http/primary`, `http/0`, `tls/0`, `tcp/0`. Destinations
/// are named `host` or `host/subset`; a lone destination without a weight has 100.
pub fn route_weights(spec: &Value, key: &str) -> Option<BTreeMap<String, i64>> {
    let (section, which) = key.split_once('/')?;
    let routes = spec.get(section)?.as_array()?;
    let route = match which.parse::<usize>() {
        Ok(i) if section != "http" || !routes.iter().any(|r| r["name"] == which) => {
            routes.get(i)?
        }
        _ => routes.iter().find(|r| r["name"] == which)?,
    };
    let dests = route.get("route")?.as_array()?;
    let lone = dests.len() == 1;
    Some(
        dests
            .iter()
            .map(|d| {
                let host = d["destination"]["host"].as_str().unwrap_or("");
                let name = match d["destination"]["subset"].as_str() {
                    Some(s) if !s.is_empty() => format!("{host}/{s}"),
                    _ => host.to_string(),
                };
                let w = d["weight"].as_i64().unwrap_or(if lone { 100 } else { 0 });
                (name, w)
            })
            .collect(),
    )
}

fn format_weights(w: &BTreeMap<String, i64>) -> String {
    let inner: Vec<String> = w.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    format!("{{{}}}", inner.join(", "))
}

fn expand_value(v: &Value, vars: &BTreeMap<&'static str, String>) -> Value {
    match v {
        Value::String(s) if s != "$absent" => Value::String(expand(s, vars)),
        Value::Array(a) => Value::Array(a.iter().map(|x| expand_value(x, vars)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), expand_value(x, vars)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// SCENARIOS.md's partial match: a map matches when every key given matches; a list only
/// when it has the same length and each element matches in order; `$absent` asserts that a
/// key does not exist.
pub(crate) fn partial_match(want: &Value, got: &Value, path: &str, diffs: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                let p = format!("{path}.{k}");
                match (wv, g.get(k)) {
                    (Value::String(s), None) if s == "$absent" => {}
                    (Value::String(s), Some(gv)) if s == "$absent" => {
                        diffs.push(format!("{p}: expected absent, got {gv}"))
                    }
                    (_, None) => diffs.push(format!("{p}: missing (expected {wv})")),
                    (_, Some(gv)) => partial_match(wv, gv, &p, diffs),
                }
            }
        }
        (Value::Array(w), Value::Array(g)) => {
            if w.len() != g.len() {
                diffs.push(format!(
                    "{path}: expected {} element(s), got {}",
                    w.len(),
                    g.len()
                ));
                return;
            }
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                partial_match(wv, gv, &format!("{path}[{i}]"), diffs);
            }
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {}
        (a, b) if a == b => {}
        // A scalar written in YAML as `80` may be compared with "80" in a selector.
        (a, Value::String(b)) if scalar_text(a).as_deref() == Some(b.as_str()) => {}
        (a, b) => diffs.push(format!("{path}: expected {a}, got {b}")),
    }
}

fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}
