//! What canarysim does with every field of the objects it reads: each one is simulated,
//! inert (it can have no effect in the simulated cluster, with the reason), accepted with a
//! warning (kept in the object, but the simulation does not act on it), or rejected (the
//! scenario cannot be run honestly with it).
//!
//! The decisions are data: `fields/policy.txt`, one line per field path. The field paths
//! that the upstream types define (Argo's `types.go`, Istio's protos, core/v1) are listed in
//! `fields/<kind>.txt`; a test checks that every one of them has a decided treatment, and
//! at run time a field in neither list is reported as unknown (the API server would prune
//! it, so it cannot do what the user meant).
//!
//! Path syntax: dot-separated JSON names from the object root; `name[]` for the elements of
//! a list, `name{}` for the values of a free-form map (`spec.subsets[].labels{}`).

use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::LazyLock;

use super::object::Kind;
use super::stored_kind::StoredKind;
use super::yaml::{Location, Manifest};

/// What canarysim does with one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Treatment {
    /// Simulated; its sub-fields are decided one by one.
    Simulated,
    /// Simulated as a whole (hashed, copied, or interpreted entirely); sub-fields need no
    /// decision of their own.
    Whole,
    /// Has no effect on anything the simulated cluster does or measures (the reason says why).
    Inert(String),
    /// Kept in the object, not acted on: a warning says what the run does instead.
    Warn(String),
    /// The scenario is refused (exit 2) with this reason.
    Reject(String),
}

/// A field kept but not simulated, or unknown: reported by `run`, `lint` and the JSON
/// report, never dropped in silence.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Warning {
    pub file: String,
    pub line: usize,
    pub column: usize,
    /// The object and field, e.g. `VirtualService rollouts-demo-vsvc: spec.http[0].retries`
    /// (`field` alone is the path).
    pub object: String,
    pub field: String,
    pub message: String,
}

impl Warning {
    pub fn new(location: Location, object: String, field: String, message: String) -> Self {
        Warning {
            file: location.file,
            line: location.line,
            column: location.column,
            object,
            field,
            message,
        }
    }

    pub fn location(&self) -> Location {
        Location {
            file: self.file.clone(),
            line: self.line,
            column: self.column,
            template: None,
        }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: warning: {}", self.location(), self.text())
    }
}

impl Warning {
    /// The warning without its location: `Rollout "demo": spec.x: message`.
    pub fn text(&self) -> String {
        if self.object.is_empty() {
            self.message.clone()
        } else if self.field.is_empty() {
            format!("{}: {}", self.object, self.message)
        } else {
            format!("{}: {}: {}", self.object, self.field, self.message)
        }
    }
}

/// A field that makes the scenario impossible to run honestly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub location: Location,
    pub message: String,
}

/// What [`review`] found in one manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Review {
    pub warnings: Vec<Warning>,
    pub rejections: Vec<Rejection>,
}

/// The policy table and the upstream field lists, parsed once.
struct Policy {
    rules: BTreeMap<(Kind, String), Treatment>,
    /// Field paths the upstream types define, per kind (absent: no list for that kind).
    known: BTreeMap<Kind, BTreeSet<String>>,
}

const POLICY: &str = include_str!("fields/policy.txt");
const FIELD_LISTS: [(Kind, &str); 5] = [
    (Kind::Rollout, include_str!("fields/rollout.txt")),
    (
        Kind::VirtualService,
        include_str!("fields/virtualservice.txt"),
    ),
    (
        Kind::DestinationRule,
        include_str!("fields/destinationrule.txt"),
    ),
    (Kind::Gateway, include_str!("fields/gateway.txt")),
    (Kind::Service, include_str!("fields/service.txt")),
];

static TABLE: LazyLock<Policy> =
    LazyLock::new(|| parse_policy(POLICY).expect("fields/policy.txt parses (a unit test checks)"));

/// Lines of a field list or policy file that carry data.
fn data_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
}

/// `Kind path treatment [reason…]` per line.
fn parse_policy(text: &str) -> Result<Policy, String> {
    let mut rules = BTreeMap::new();
    for (n, line) in data_lines(text) {
        let mut words = line.splitn(4, char::is_whitespace);
        let (Some(kind), Some(path), Some(treatment)) = (words.next(), words.next(), words.next())
        else {
            return Err(format!(
                "policy.txt:{n}: expected `Kind path treatment [reason]`"
            ));
        };
        let kind = Kind::parse(kind).ok_or(format!("policy.txt:{n}: unknown kind {kind}"))?;
        let reason = words.next().unwrap_or("").trim().to_string();
        let needs_reason = |t: Treatment| {
            if reason.is_empty() {
                Err(format!("policy.txt:{n}: {treatment} needs a reason"))
            } else {
                Ok(t)
            }
        };
        let t = match treatment {
            "sim" => Treatment::Simulated,
            "whole" => Treatment::Whole,
            "inert" => needs_reason(Treatment::Inert(reason.clone()))?,
            "warn" => needs_reason(Treatment::Warn(reason.clone()))?,
            "reject" => needs_reason(Treatment::Reject(reason.clone()))?,
            other => return Err(format!("policy.txt:{n}: unknown treatment {other}")),
        };
        if rules.insert((kind, path.to_string()), t).is_some() {
            return Err(format!("policy.txt:{n}: {kind} {path} is listed twice"));
        }
    }
    let known = FIELD_LISTS
        .iter()
        .map(|(kind, text)| {
            let paths: BTreeSet<String> = data_lines(text).map(|(_, l)| l.to_string()).collect();
            (*kind, paths)
        })
        .filter(|(_, paths)| !paths.is_empty())
        .collect();
    Ok(Policy { rules, known })
}

/// The treatment of a kind's field path (generic form), as the policy decides it: its own
/// rule, else the nearest ancestor whose rule covers its subtree (`whole`, `inert`, `warn`,
/// `reject`). None: undecided.
pub(crate) fn treatment(kind: Kind, path: &str) -> Option<Treatment> {
    treatment_in(&TABLE, kind, path)
}

fn treatment_in(policy: &Policy, kind: Kind, path: &str) -> Option<Treatment> {
    if let Some(t) = policy.rules.get(&(kind, path.to_string())) {
        return Some(t.clone());
    }
    let mut p = path;
    while let Some(i) = p.rfind(['.', '[', '{']) {
        p = &p[..i];
        if let Some(t) = policy.rules.get(&(kind, p.to_string())) {
            return (*t != Treatment::Simulated).then(|| t.clone());
        }
    }
    None
}

/// Field paths that the upstream types define for `kind` and the policy leaves undecided.
pub fn undecided(kind: Kind) -> Vec<String> {
    let Some(known) = TABLE.known.get(&kind) else {
        return Vec::new();
    };
    known
        .iter()
        .filter(|p| treatment(kind, p).is_none())
        .cloned()
        .collect()
}

/// Rules whose path the upstream types do not define (a typo in the policy).
pub fn stray_rules() -> Vec<String> {
    TABLE
        .rules
        .keys()
        .filter(|(kind, path)| {
            // A rule for one key of a map stands for the map's `{}`.
            let generic = match path.rsplit_once('{') {
                Some((map, key)) if key.ends_with('}') => format!("{map}{{}}"),
                _ => path.clone(),
            };
            TABLE
                .known
                .get(kind)
                .is_some_and(|known| !known.contains(&generic) && path != "spec" && path != "-")
        })
        .map(|(kind, path)| format!("{kind} {path}"))
        .collect()
}

/// The most pods one workload may ask for: canarysim simulates every pod on its own.
pub(crate) const MAX_REPLICAS: i64 = 100_000;

/// The most canary steps one Rollout may list. Every step change writes the Rollout's status,
/// and each write costs the whole object, as a real controller's does: 1,000 steps run in
/// about 3 s, 5,000 took over 30 s. Real strategies hold tens.
pub(crate) const MAX_CANARY_STEPS: usize = 1_000;

/// Every field of `manifest` that is not simulated: warnings for fields kept but not acted
/// on (and for unknown fields), rejections for fields canarysim refuses. A kind with a
/// whole-object rule (path `-`) gets one finding for the object.
pub fn review(manifest: &Manifest) -> Review {
    let mut out = Review::default();
    let kind = manifest.object.kind;
    let object = format!("{kind} \"{}\"", manifest.object.name());
    // What the API server would refuse before any controller saw the object.
    for invalid in super::kube_validation::validate(&manifest.object) {
        out.rejections.push(Rejection {
            location: manifest.locate(&invalid.pointer),
            message: format!("{object} is invalid: {}", invalid.message),
        });
    }
    if kind == Kind::Rollout {
        duplicate_managed_routes(manifest, &object, &mut out);
        gateway_api_plugin_fields(manifest, &object, &mut out);
        canary_scale_beyond_bound(manifest, &object, &mut out);
        too_many_steps(manifest, &object, &mut out);
    }
    if matches!(
        kind,
        Kind::AnalysisTemplate | Kind::ClusterAnalysisTemplate | Kind::AnalysisRun
    ) {
        intervals_under_a_second(manifest, &object, &mut out);
    }
    if matches!(kind, Kind::Rollout | Kind::ReplicaSet) {
        if let Some(n) = manifest.object.value["spec"]["replicas"].as_i64() {
            if n > MAX_REPLICAS {
                out.rejections.push(Rejection {
                    location: manifest.locate("/spec/replicas"),
                    message: format!(
                        "{object}: spec.replicas: {n} is more pods than canarysim simulates (at most {MAX_REPLICAS} per workload)"
                    ),
                });
            }
        }
    }
    if let Some(t) = TABLE.rules.get(&(kind, "-".to_string())) {
        report(&mut out, manifest, &object, "", "", t);
        return out;
    }
    // Kinds with no `spec` rule (Pods, ReplicaSets) are the simulation's own objects.
    if !TABLE.rules.contains_key(&(kind, "spec".to_string())) {
        return out;
    }
    if let Some(spec) = manifest.object.value.get("spec") {
        let mut walk = Walk {
            manifest,
            kind,
            object: &object,
            out: &mut out,
        };
        walk.node(spec, "spec", "spec", "/spec", Some(&Treatment::Simulated));
    }
    out
}

fn report(out: &mut Review, m: &Manifest, object: &str, field: &str, pointer: &str, t: &Treatment) {
    match t {
        Treatment::Warn(reason) => out.warnings.push(Warning::new(
            m.locate(pointer),
            object.to_string(),
            field.to_string(),
            reason.clone(),
        )),
        Treatment::Reject(reason) => out.rejections.push(Rejection {
            location: m.locate(pointer),
            message: if field.is_empty() {
                format!("{object}: {reason}")
            } else {
                format!("{object}: {field}: {reason}")
            },
        }),
        _ => {}
    }
}

struct Walk<'a> {
    manifest: &'a Manifest,
    kind: Kind,
    object: &'a str,
    out: &'a mut Review,
}

impl Walk<'_> {
    /// `generic`: the policy path; `concrete`: the same with indices and keys (for messages);
    /// `pointer`: the JSON pointer (for the location). `inherited`: the treatment in force.
    fn node(
        &mut self,
        value: &Value,
        generic: &str,
        concrete: &str,
        pointer: &str,
        inherited: Option<&Treatment>,
    ) {
        let own = TABLE.rules.get(&(self.kind, generic.to_string()));
        let known = TABLE.known.get(&self.kind);
        let t = match (own, inherited) {
            (Some(t), _) => t.clone(),
            (None, Some(Treatment::Simulated)) => {
                if known.is_some_and(|k| !k.contains(generic)) {
                    let message = format!(
                        "unknown field: {} does not define it (the API server would prune it), so it has no effect",
                        self.kind
                    );
                    report(
                        self.out,
                        self.manifest,
                        self.object,
                        concrete,
                        pointer,
                        &Treatment::Warn(message),
                    );
                    return;
                }
                // Defined upstream but undecided here: never silent (a test keeps this empty).
                Treatment::Warn("not simulated".into())
            }
            (None, Some(t)) => t.clone(),
            (None, None) => return,
        };
        match t {
            Treatment::Simulated => {}
            Treatment::Warn(_) | Treatment::Reject(_) => {
                report(self.out, self.manifest, self.object, concrete, pointer, &t);
                return;
            }
            Treatment::Whole | Treatment::Inert(_) => return,
        }
        match value {
            Value::Object(map) => {
                let is_map = known.is_some_and(|k| k.contains(&format!("{generic}{{}}")));
                for (k, v) in map {
                    let g = if is_map {
                        // A rule may decide one key of a map (`plugins{argoproj-labs/gatewayAPI}`).
                        let key = format!("{generic}{{{k}}}");
                        if TABLE.rules.contains_key(&(self.kind, key.clone())) {
                            key
                        } else {
                            format!("{generic}{{}}")
                        }
                    } else {
                        format!("{generic}.{k}")
                    };
                    let p = format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1"));
                    self.node(v, &g, &format!("{concrete}.{k}"), &p, Some(&t));
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    self.node(
                        v,
                        &format!("{generic}[]"),
                        &format!("{concrete}[{i}]"),
                        &format!("{pointer}/{i}"),
                        Some(&t),
                    );
                }
            }
            _ => {}
        }
    }
}

/// Reviews every manifest; warnings in file order, each once.
/// A managed route named twice: each name is one route written into the VirtualService and
/// found again by that name, so a repeated name has no single meaning (and the routes it
/// generated grew without bound: 60 repeats took 1.9 GB).
fn duplicate_managed_routes(manifest: &Manifest, object: &str, out: &mut Review) {
    let Some(routes) =
        manifest.object.value["spec"]["strategy"]["canary"]["trafficRouting"]["managedRoutes"]
            .as_array()
    else {
        return;
    };
    let mut seen = BTreeSet::new();
    for (i, route) in routes.iter().enumerate() {
        let Some(name) = route["name"].as_str() else {
            continue;
        };
        if !seen.insert(name) {
            out.rejections.push(Rejection {
                location: manifest.locate(&format!(
                    "/spec/strategy/canary/trafficRouting/managedRoutes/{i}/name"
                )),
                message: format!(
                    "{object}: spec.strategy.canary.trafficRouting.managedRoutes[{i}].name: Duplicate value: {name:?} (each managed route names one route of the VirtualService)"
                ),
            });
        }
    }
}

/// The Gateway API plugin's configuration: a key the plugin does not define is ignored by
/// it (its `json.Unmarshal` drops unknown keys), and so are a selector's expressions here.
fn gateway_api_plugin_fields(manifest: &Manifest, object: &str, out: &mut Review) {
    const SIMULATED: &[&str] = &[
        "httpRoute",
        "httpRoutes",
        "httpRouteSelector",
        "grpcRoute",
        "grpcRoutes",
        "grpcRouteSelector",
        "tcpRoute",
        "tcpRoutes",
        "tcpRouteSelector",
        "tlsRoute",
        "tlsRoutes",
        "tlsRouteSelector",
        "namespace",
        "disableInProgressLabel",
        "inProgressLabelKey",
        "inProgressLabelValue",
    ];
    let plugin = super::gateway_api::PLUGIN;
    let config =
        &manifest.object.value["spec"]["strategy"]["canary"]["trafficRouting"]["plugins"][plugin];
    let Some(config) = config.as_object() else {
        return;
    };
    let base = "spec.strategy.canary.trafficRouting.plugins.argoproj-labs/gatewayAPI";
    let pointer = "/spec/strategy/canary/trafficRouting/plugins/argoproj-labs~1gatewayAPI";
    for key in config.keys() {
        if SIMULATED.contains(&key.as_str()) {
            continue;
        }
        let message = "unknown field: the plugin does not define it, so it has no effect";
        out.warnings.push(Warning::new(
            manifest.locate(&format!("{pointer}/{key}")),
            object.to_string(),
            format!("{base}.{key}"),
            message.to_string(),
        ));
    }
    for selector in ["http", "grpc", "tcp", "tls"].map(|k| format!("{k}RouteSelector")) {
        let expressions = config
            .get(&selector)
            .and_then(|s| s.get("matchExpressions"));
        if expressions.is_some() {
            out.warnings.push(Warning::new(
                manifest.locate(&format!("{pointer}/{selector}/matchExpressions")),
                object.to_string(),
                format!("{base}.{selector}.matchExpressions"),
                "not simulated: routes are found by matchLabels only".to_string(),
            ));
        }
    }
}

/// A metric's `interval` under a second: Argo keeps a measurement's `finishedAt` to the
/// second and measures again once `finishedAt + interval` has passed, so it would measure
/// over and over, as fast as it can, until the second turns: a loop canarysim's virtual
/// clock, which moves only between instants, cannot run (1ns never settled).
fn intervals_under_a_second(manifest: &Manifest, object: &str, out: &mut Review) {
    let Some(metrics) = manifest.object.value["spec"]["metrics"].as_array() else {
        return;
    };
    for (i, metric) in metrics.iter().enumerate() {
        let text = match &metric["interval"] {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(n) => n.to_string(),
            _ => continue,
        };
        let Ok(interval) = super::duration::parse(&text) else {
            continue; // Argo's own validation names the syntax error.
        };
        if interval < std::time::Duration::from_secs(1) {
            out.rejections.push(Rejection {
                location: manifest.locate(&format!("/spec/metrics/{i}/interval")),
                message: format!(
                    "{object}: spec.metrics[{i}].interval: {text} is under a second, which canarysim does not simulate: Argo records when a measurement finished to the second, so it would measure again at once, as fast as it can, until that second ends (at least 1s)"
                ),
            });
        }
    }
}

fn too_many_steps(manifest: &Manifest, object: &str, out: &mut Review) {
    let Some(steps) = manifest.object.value["spec"]["strategy"]["canary"]["steps"].as_array()
    else {
        return;
    };
    if steps.len() > MAX_CANARY_STEPS {
        out.rejections.push(Rejection {
            location: manifest.locate(&format!("/spec/strategy/canary/steps/{MAX_CANARY_STEPS}")),
            message: format!(
                "{object}: spec.strategy.canary.steps: {} steps are more than canarysim simulates (at most {MAX_CANARY_STEPS})",
                steps.len()
            ),
        });
    }
}

/// A `setCanaryScale` step asks for its pods whatever `spec.replicas` says (a count, or a
/// weight of `spec.replicas` that Argo does not cap at 100): beyond [`MAX_REPLICAS`] it is
/// refused as `spec.replicas` is (2147483647 pods took minutes and gigabytes).
fn canary_scale_beyond_bound(manifest: &Manifest, object: &str, out: &mut Review) {
    let Some(steps) = manifest.object.value["spec"]["strategy"]["canary"]["steps"].as_array()
    else {
        return;
    };
    // Argo: `spec.replicas` nil is 1; a canary weight is ceil(replicas × weight / 100).
    let replicas = manifest.object.value["spec"]["replicas"]
        .as_i64()
        .unwrap_or(1);
    for (i, step) in steps.iter().enumerate() {
        let scale = &step["setCanaryScale"];
        let field = format!("spec.strategy.canary.steps[{i}].setCanaryScale");
        let pointer = format!("/spec/strategy/canary/steps/{i}/setCanaryScale");
        let refuse = |out: &mut Review, key: &str, what: String| {
            out.rejections.push(Rejection {
                location: manifest.locate(&format!("{pointer}/{key}")),
                message: format!(
                    "{object}: {field}.{key}: {what}, more pods than canarysim simulates (at most {MAX_REPLICAS} per workload)"
                ),
            });
        };
        if let Some(n) = scale["replicas"].as_i64().filter(|n| *n > MAX_REPLICAS) {
            refuse(out, "replicas", format!("{n} pods"));
        } else if let Some(w) = scale["weight"].as_i64() {
            let pods = (i128::from(replicas.max(0)) * i128::from(w) + 99).div_euclid(100);
            if pods > i128::from(MAX_REPLICAS) {
                refuse(
                    out,
                    "weight",
                    format!("{w} % of spec.replicas ({replicas}) is {pods} pods"),
                );
            }
        }
    }
}

pub fn review_all<'a>(manifests: impl IntoIterator<Item = &'a Manifest>) -> Review {
    let mut out = Review::default();
    let mut manifests_of_stored_kinds = Vec::new();
    for m in manifests {
        if let Kind::Stored(kind) = m.object.kind {
            if !super::gateway_api::is_simulated(kind) && !super::ingress::is_simulated(kind) {
                manifests_of_stored_kinds.push((kind, m));
            }
        }
        let r = review(m);
        out.warnings.extend(r.warnings);
        out.rejections.extend(r.rejections);
    }
    let mut seen = BTreeSet::new();
    out.warnings.retain(|w| seen.insert(w.clone()));
    if let Some(w) = not_simulated_kinds(manifests_of_stored_kinds) {
        out.warnings.push(w);
    }
    out
}

/// One warning for every object of a kind canarysim only stores ("not simulated: 3
/// ConfigMaps, 1 HorizontalPodAutoscaler"), at the first such object.
fn not_simulated_kinds(manifests: Vec<(StoredKind, &Manifest)>) -> Option<Warning> {
    let (_, first) = manifests.first()?;
    let mut counts: Vec<(StoredKind, usize)> = Vec::new();
    for (kind, _) in &manifests {
        match counts.iter_mut().find(|(k, _)| k == kind) {
            Some((_, n)) => *n += 1,
            None => counts.push((*kind, 1)),
        }
    }
    let listed: Vec<String> = counts
        .into_iter()
        .map(|(kind, n)| {
            let info = kind.info();
            let name = if n == 1 {
                info.kind.to_string()
            } else {
                super::stored_kind::plural_as_written(info)
            };
            if info.built_in || info.group.is_empty() {
                format!("{n} {name}")
            } else {
                format!("{n} {name} ({})", info.group)
            }
        })
        .collect();
    Some(Warning::new(
        first.locate(""),
        String::new(),
        String::new(),
        format!(
            "not simulated: {}; kept and served as written, but nothing in the simulated cluster acts on them",
            listed.join(", ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_parses_and_names_only_upstream_fields() {
        parse_policy(POLICY).unwrap();
        assert_eq!(stray_rules(), Vec::<String>::new());
    }

    #[test]
    fn every_upstream_field_has_a_decided_treatment() {
        for (kind, _) in FIELD_LISTS {
            assert_eq!(undecided(kind), Vec::<String>::new(), "{kind}");
        }
    }

    #[test]
    fn a_reason_is_required_for_fields_not_simulated() {
        assert!(parse_policy("Rollout spec.x warn").is_err());
        assert!(parse_policy("Rollout spec.x inert because").is_ok());
        assert!(parse_policy("Rollout spec.x sometimes").is_err());
        assert!(parse_policy("Rollout spec.x sim\nRollout spec.x sim").is_err());
    }

    #[test]
    fn a_subtree_rule_decides_its_descendants_but_simulated_does_not() {
        let p = parse_policy("Rollout spec.a sim\nRollout spec.b whole\nRollout spec.c warn w")
            .unwrap();
        assert_eq!(treatment_in(&p, Kind::Rollout, "spec.a.x"), None);
        assert_eq!(
            treatment_in(&p, Kind::Rollout, "spec.b.x[].y"),
            Some(Treatment::Whole)
        );
        assert_eq!(
            treatment_in(&p, Kind::Rollout, "spec.c{}"),
            Some(Treatment::Warn("w".into()))
        );
    }
}
