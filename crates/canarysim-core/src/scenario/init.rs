//! `canarysim init`: from a set of manifests, the scenario that rolls each canary Rollout
//! out to a new image through all its steps and, at each pause, sends traffic and judges
//! the share that reaches the canary against the step's weight. Written out for the user to
//! read, edit and keep (`run`, the TUI and `cargo test` take it as any scenario).

use serde_json::{Map, Value, json};

use crate::model::{Kind, Manifest, yaml};

/// Requests sent at each pause: enough for a share within one point at 99.9 % confidence.
pub const REQUESTS: u64 = 100_000;

/// Each pause's verdict: the share within this many points of the weight…
pub(crate) const WITHIN_POINTS: f64 = 1.0;
/// …at this confidence.
pub(crate) const CONFIDENCE: f64 = 0.999;

/// What the written scenario sends, and which Rollouts it rolls out.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Requests per pause (default [`REQUESTS`]).
    pub requests: Option<u64>,
    /// Connections each load opens (default: the scenario format's).
    pub connections: Option<u32>,
    /// Roll out only this Rollout, by namespace and name (the others are deployed and left
    /// alone).
    pub only: Option<(String, String)>,
    /// Replay an update in progress (`canarysim snapshot`) instead of rolling out a new
    /// image.
    pub resume: Option<Resume>,
}

/// An update in progress, as `canarysim snapshot` found it: the manifests hold the Rollout
/// as it was before (its stable template); the scenario applies `update` (the Rollout as it
/// stands), promotes the pauses before `step` without a load, checks at the first pause
/// from `step` on that the rollout stands there with that step's weight, and from there
/// judges every pause as `init` does.
#[derive(Debug, Clone, PartialEq)]
pub struct Resume {
    /// The Rollout's manifest file as it stands, relative to the scenario.
    pub update: String,
    /// `status.currentStepIndex` when it was read.
    pub step: usize,
}

/// Where the scenario reads one manifest file from.
#[derive(Debug, Clone)]
pub enum ManifestSource {
    /// A path, as the scenario writes it (relative to the scenario's folder).
    File(String),
    /// Text that has no file (standard input), embedded in the scenario.
    Inline(String),
}

/// The scenario, and what it leaves out and why.
#[derive(Debug, Clone)]
pub struct Written {
    pub text: String,
    pub notes: Vec<String>,
}

/// The scenario for the manifests of `sources` (each source with the objects it holds).
/// Err when there is no Rollout to roll out.
pub fn scenario(sources: &[(ManifestSource, Vec<Manifest>)]) -> Result<Written, String> {
    scenario_with(sources, &Options::default())
}

/// [`scenario`], sending and rolling out what `options` say.
pub fn scenario_with(
    sources: &[(ManifestSource, Vec<Manifest>)],
    options: &Options,
) -> Result<Written, String> {
    let requests = options.requests.unwrap_or(REQUESTS);
    let mut notes = Vec::new();
    let kept: Vec<&(ManifestSource, Vec<Manifest>)> = sources.iter().collect();
    let manifests: Vec<Manifest> = kept.iter().flat_map(|(_, m)| m.iter().cloned()).collect();
    let rollouts: Vec<&Manifest> = manifests
        .iter()
        .filter(|m| m.object.kind == Kind::Rollout)
        .filter(|m| {
            options
                .only
                .as_ref()
                .is_none_or(|(ns, name)| m.object.namespace() == ns && m.object.name() == name)
        })
        .collect();
    let twice = written_twice(&rollouts, &mut notes);
    let rollouts: Vec<&Manifest> = rollouts
        .into_iter()
        .filter(|r| !twice.contains(&r.object.key()))
        .collect();
    let Some(first) = rollouts.first() else {
        if twice.is_empty() {
            notes.insert(
                0,
                "no Rollout among the manifests: nothing to roll out".into(),
            );
        }
        return Err(notes.join("; "));
    };
    let namespace = first.object.namespace().to_string();
    let mut steps = Vec::new();
    let mut walked = Vec::new();
    for rollout in &rollouts {
        let name = rollout.object.name();
        if rollout.object.namespace() != namespace {
            notes.push(format!(
                "Rollout {}/{name}: left out, the scenario's namespace is {namespace}",
                rollout.object.namespace()
            ));
            continue;
        }
        match rollout_steps(rollout, &manifests, requests, options) {
            Ok(s) => {
                steps.extend(s);
                walked.push(name.to_string());
            }
            Err(why) => notes.push(format!("Rollout {name}: left out, {why}")),
        }
    }
    if walked.is_empty() {
        return Err(format!(
            "no Rollout canarysim can roll out: {}",
            notes.join("; ")
        ));
    }
    let files: Vec<Value> = kept
        .iter()
        .map(|(s, _)| match s {
            ManifestSource::File(path) => json!({"file": path}),
            ManifestSource::Inline(text) => json!({"inline": text}),
        })
        .collect();
    let jobs = job_metrics(&manifests);
    let mut description = describe(&walked, requests, options.resume.as_ref());
    if !jobs.is_empty() {
        description.push_str(
            " canarysim runs no Jobs: each job metric's measurements are scripted Successful \
             in cluster.analysis_results (script Failed to try a failure).",
        );
    }
    let mut scenario = json!({
        "name": format!(
            "{}-{}",
            if options.resume.is_some() { "snapshot" } else { "check" },
            walked.join("-")
        ),
        "description": description,
        "namespace": namespace,
        "manifests": files,
        "steps": steps,
    });
    if !jobs.is_empty() {
        let results: Map<String, Value> = jobs
            .into_iter()
            .map(|metric| (metric, json!(["Successful"])))
            .collect();
        scenario["cluster"] = json!({"analysis_results": results});
    }
    let text = yaml::to_text(&scenario).map_err(|e| e.to_string())?;
    Ok(Written { text, notes })
}

/// What the written scenario does, in its `description`.
fn describe(walked: &[String], requests: u64, resume: Option<&Resume>) -> String {
    let rollouts = walked.join(", ");
    let confidence = CONFIDENCE * 100.0;
    match resume {
        Some(resume) => format!(
            "Written by `canarysim snapshot`: {rollouts} replayed from where it stood in the \
             cluster (the stable version deployed, {} applied, the pauses before step {} \
             promoted without a load); from there, at each pause {requests} requests are sent \
             and the share that reaches the canary must be the step's weight within \
             {WITHIN_POINTS} point at {confidence} % confidence.",
            resume.update, resume.step
        ),
        None => format!(
            "Written by `canarysim init`: {rollouts} rolled out to a new image through every \
             canary step (blue-green: through the switch); at each pause {requests} requests \
             are sent and the share that reaches the canary must be the step's weight \
             (blue-green: through the active Service, none before the switch and all after; \
             through the preview Service, all) within {WITHIN_POINTS} point at {confidence} % \
             confidence."
        ),
    }
}

/// The names of the metrics measured by a Job in the manifests' analysis templates, each
/// once: canarysim runs no Jobs, so a scenario scripts their outcome.
pub(crate) fn job_metrics(manifests: &[Manifest]) -> std::collections::BTreeSet<String> {
    template_metrics(manifests)
        .filter(|(_, metric)| crate::analysis::provider::kind(&metric["provider"]) == Some("job"))
        .filter_map(|(_, metric)| metric["name"].as_str().map(str::to_string))
        .collect()
}

/// Each metric of each AnalysisTemplate and ClusterAnalysisTemplate, beside its template.
pub(crate) fn template_metrics(
    manifests: &[Manifest],
) -> impl Iterator<Item = (&Manifest, &serde_json::Value)> {
    manifests
        .iter()
        .filter(|m| {
            matches!(
                m.object.kind,
                Kind::AnalysisTemplate | Kind::ClusterAnalysisTemplate
            )
        })
        .flat_map(|m| {
            let metrics = m.object.spec()["metrics"].as_array().into_iter().flatten();
            metrics.map(move |metric| (m, metric))
        })
}

/// Rollouts written more than once (the same namespace and name), each said in a note.
/// Two objects to the reader are one to `kubectl apply` (the last wins): which one the user
/// means cannot be told.
fn written_twice(
    rollouts: &[&Manifest],
    notes: &mut Vec<String>,
) -> std::collections::BTreeSet<crate::model::ObjectKey> {
    let written_at = |r: &Manifest| -> Vec<String> {
        rollouts
            .iter()
            .filter(|o| o.object.key() == r.object.key())
            .map(|o| o.locate("").to_string())
            .collect()
    };
    let mut twice = std::collections::BTreeSet::new();
    for r in rollouts {
        let at = written_at(r);
        if at.len() > 1 && twice.insert(r.object.key()) {
            notes.push(format!(
                "Rollout {}/{}: left out, written {} times ({}): `kubectl apply` keeps only the last; check each file apart",
                r.object.namespace(),
                r.object.name(),
                at.len(),
                at.join(", ")
            ));
        }
    }
    twice
}

fn map(pairs: Vec<(&str, Value)>) -> Value {
    Value::Object(
        pairs
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect::<Map<_, _>>(),
    )
}

fn step(action: &str, body: Value) -> Value {
    map(vec![(action, body)])
}

/// The verdict after each load: `version` (or the role `canary`) at `share` percent.
fn expect_split(version: &str, share: f64) -> Value {
    step(
        "expect_split",
        map(vec![
            (version, format!("{share}%").into()),
            ("within", format!("{WITHIN_POINTS}%").into()),
            ("confidence", format!("{}%", CONFIDENCE * 100.0).into()),
        ]),
    )
}

/// The steps that roll `rollout` out, or why it cannot be.
fn rollout_steps(
    rollout: &Manifest,
    manifests: &[Manifest],
    requests: u64,
    options: &Options,
) -> Result<Vec<Value>, String> {
    let connections = options.connections;
    let name = rollout.object.name().to_string();
    let spec = rollout.object.spec();
    let canary = &spec["strategy"]["canary"];
    let blue_green = &spec["strategy"]["blueGreen"];
    if canary.is_null() && blue_green.is_null() {
        return Err("it names neither the canary nor the blue-green strategy".into());
    }
    let container = &spec["template"]["spec"]["containers"][0];
    let (Some(container_name), Some(image)) =
        (container["name"].as_str(), container["image"].as_str())
    else {
        return Err("its template names no container with an image (a workloadRef?)".into());
    };
    let target = load_target(rollout, manifests);
    let until = |phase: &str, timeout: &str| {
        step(
            "wait",
            map(vec![
                ("until", phase.into()),
                ("rollout", name.clone().into()),
                ("timeout", timeout.into()),
            ]),
        )
    };
    let update = match &options.resume {
        Some(resume) => step("apply", resume.update.clone().into()),
        None => step(
            "set_image",
            map(vec![
                ("rollout", name.clone().into()),
                ("container", container_name.into()),
                ("image", next_image(image).into()),
            ]),
        ),
    };
    let mut out = vec![until("healthy", "10m"), update];
    if canary.is_null() {
        let versions = (image, next_image(image));
        out.extend(blue_green_steps(
            &name,
            blue_green,
            versions,
            requests,
            connections,
            until,
        ));
        return Ok(out);
    }
    let mut weight = 0.0;
    let max_weight = max_traffic_weight(rollout);
    let mut checked_where_it_stood = false;
    for (index, s) in canary["steps"].as_array().into_iter().flatten().enumerate() {
        if let Some(w) = s["setWeight"].as_f64() {
            weight = w;
        }
        if s.get("pause").is_none() {
            continue;
        }
        out.push(until("paused", "30m"));
        match &options.resume {
            // Where the rollout stood: passed through as it was, promoted without a load.
            Some(resume) if index < resume.step => {
                out.push(step("promote", name.clone().into()));
                continue;
            }
            Some(resume) if !checked_where_it_stood => {
                checked_where_it_stood = true;
                out.push(step(
                    "expect",
                    map(vec![
                        ("rollout", name.clone().into()),
                        ("step", (index as u64).into()),
                        ("set_weight", (weight.round() as i64).into()),
                    ]),
                ));
            }
            _ => {}
        }
        if let Some(target) = &target {
            out.push(step("wait", "1s".into()));
            out.push(load_step(target, requests, connections));
            out.push(expect_split("canary", weight * 100.0 / max_weight));
        }
        out.push(step("promote", name.clone().into()));
    }
    out.push(until("healthy", "30m"));
    out.push(step(
        "expect",
        map(vec![("rollout", name.into()), ("phase", "Healthy".into())]),
    ));
    Ok(out)
}

/// A pause's load to `target`: `requests` over `connections` (the format's default when
/// None).
fn load_step(target: &LoadTarget, requests: u64, connections: Option<u32>) -> Value {
    // Per client, each of the connections is one draw: as many as a share within a point
    // needs, each sending five requests.
    let (requests, connections) = match (target.per_client, connections) {
        (true, None) => (requests.max(5 * u64::from(CLIENTS)), Some(CLIENTS)),
        _ => (requests, connections),
    };
    let mut load = vec![
        ("requests", requests.into()),
        ("host", target.host.clone().into()),
    ];
    if let Some(port) = target.port {
        load.push(("port", port.into()));
    }
    if let Some(path) = &target.path {
        load.push(("path", path.clone().into()));
    }
    if target.through_service {
        // kube-proxy draws per connection: a new one per request makes each request a
        // draw, so that the share is judged as sharply as the mesh's.
        load.push(("keepalive", false.into()));
    }
    if let Some(c) = connections {
        load.push(("connections", c.into()));
    }
    step("load", map(load))
}

/// The Rollout's `MaxTrafficWeight`: a step's share of the traffic is its weight over it.
fn max_traffic_weight(rollout: &Manifest) -> f64 {
    let spec = rollout
        .object
        .spec_as::<crate::model::rollout::RolloutSpec>();
    let canary = spec.ok().and_then(|s| s.canary().cloned());
    canary.map_or(100.0, |c| f64::from(c.max_traffic_weight()))
}

/// A blue-green Rollout's steps after the new image: at the pause (when it makes one) the
/// active Service must send all its requests to the old version and the preview Service all
/// to the new one; after the promotion the active Service all to the new one.
fn blue_green_steps(
    name: &str,
    blue_green: &Value,
    versions: (&str, String),
    requests: u64,
    connections: Option<u32>,
    until: impl Fn(&str, &str) -> Value,
) -> Vec<Value> {
    let mut out = Vec::new();
    let load = |host: &str, version: &str| {
        let mut load = vec![
            ("requests", requests.into()),
            ("host", host.into()),
            ("keepalive", false.into()),
        ];
        if let Some(c) = connections {
            load.push(("connections", c.into()));
        }
        [
            step("wait", "1s".into()),
            step("load", map(load)),
            expect_split(version, 100.0),
        ]
    };
    let active = blue_green["activeService"].as_str().unwrap_or_default();
    let (old, new) = (
        crate::model::vocabulary::image_version(versions.0).to_string(),
        crate::model::vocabulary::image_version(&versions.1).to_string(),
    );
    // Paused before the switch: production traffic (the active Service) still all old, and
    // the preview Service all new. Only a gate that waits for `promote`: a pause that
    // autoPromotionSeconds ends could end during the loads.
    if blue_green["autoPromotionEnabled"] == false {
        out.push(until("paused", "30m"));
        out.extend(load(active, &old));
        if let Some(preview) = blue_green["previewService"].as_str() {
            out.extend(load(preview, &new));
        }
        out.push(step("promote", name.into()));
    }
    out.push(until("healthy", "30m"));
    out.extend(load(active, &new));
    out.push(step(
        "expect",
        map(vec![("rollout", name.into()), ("phase", "Healthy".into())]),
    ));
    out
}

/// Where a canary's loads go.
struct LoadTarget {
    host: String,
    /// The port, when not the load's default (80).
    port: Option<u32>,
    /// The path, when not the load's default (`/`).
    path: Option<String>,
    /// A plain Service (no VirtualService or HTTPRoute): kube-proxy's split.
    through_service: bool,
    /// An Ingress with session affinity: the share is of clients, one per connection.
    per_client: bool,
}

/// With session affinity, clients (connections) each pause's load opens: enough for a
/// share within one point at 99.9 % confidence, each sending a few requests.
pub(crate) const CLIENTS: u32 = 100_000;

/// Where the loads go: the first host of the rollout's VirtualService, or of the first
/// HTTPRoute the Gateway API plugin manages (on its Gateway's listener port); else a
/// Service that selects all the rollout's pods (not its stable or canary Service, which
/// Argo narrows to one ReplicaSet), as clients of a basic canary reach it. None when there
/// is neither.
fn load_target(rollout: &Manifest, manifests: &[Manifest]) -> Option<LoadTarget> {
    let spec = rollout.object.spec();
    let canary = &spec["strategy"]["canary"];
    let namespace = rollout.object.namespace();
    if let Some(host) = routed_host(canary, manifests, namespace) {
        return Some(LoadTarget {
            host,
            port: None,
            path: None,
            through_service: false,
            per_client: false,
        });
    }
    if let Some(target) = http_route_target(canary, manifests, namespace) {
        return Some(target);
    }
    if let Some(target) = ingress_target(canary, manifests, namespace) {
        return Some(target);
    }
    let labels = &spec["template"]["metadata"]["labels"];
    let narrowed = [
        canary["stableService"].as_str(),
        canary["canaryService"].as_str(),
    ];
    manifests
        .iter()
        .filter(|m| m.object.kind == Kind::Service && m.object.namespace() == namespace)
        .filter(|m| !narrowed.contains(&Some(m.object.name())))
        .find(|m| {
            let selector = m.object.spec()["selector"].as_object();
            selector.is_some_and(|sel| {
                !sel.is_empty() && sel.iter().all(|(k, v)| labels.get(k) == Some(v))
            })
        })
        .map(|m| LoadTarget {
            host: m.object.name().to_string(),
            port: None,
            path: None,
            through_service: true,
            per_client: false,
        })
}

/// The first HTTPRoute the Gateway API plugin manages, where the route table installs it
/// on a Gateway (the translation's attachment: parentRefs, listeners, hostnames): the host
/// (a wildcard's name in its place; any name for a listener that takes every host) and
/// that listener's port. None when it attaches to no Gateway among the manifests.
fn http_route_target(
    canary: &serde_json::Value,
    manifests: &[Manifest],
    namespace: &str,
) -> Option<LoadTarget> {
    use crate::model::gateway_api;
    let plugins = &canary["trafficRouting"]["plugins"];
    let config = crate::world::controller::gateway_api::PluginConfig::of(Some(plugins), namespace)?;
    let http = crate::world::controller::gateway_api::RouteKind::Http;
    let managed = config.named(http).next()?;
    let route = crate::model::ObjectKey::new(
        gateway_api::kind("HTTPRoute"),
        &config.namespace,
        &managed.name,
    );
    let set = crate::model::ObjectSet::new(manifests.iter().map(|m| m.object.clone()).collect());
    let table = crate::mesh::translate(&set);
    let (host, port) = table.gateway_attachments(&route).into_iter().next()?;
    let host = match host.strip_prefix('*') {
        None => host,
        Some("") => format!("{}.example", managed.name),
        Some(rest) => format!("www{rest}"),
    };
    Some(LoadTarget {
        host,
        port: port.filter(|p| *p != 80),
        path: None,
        through_service: false,
        per_client: false,
    })
}

/// With NGINX: the first path of the first stable Ingress that forwards to the stable
/// Service (its host, any name for a rule without one; its path, a prefix as it is). None
/// when no such Ingress is among the manifests.
fn ingress_target(
    canary: &serde_json::Value,
    manifests: &[Manifest],
    namespace: &str,
) -> Option<LoadTarget> {
    let nginx: crate::model::rollout::NginxTrafficRouting =
        serde_json::from_value(canary["trafficRouting"]["nginx"].clone()).ok()?;
    let stable_service = canary["stableService"].as_str()?;
    let kind = crate::model::ingress::ingress_kind();
    nginx.stable_ingress_list().into_iter().find_map(|name| {
        let ingress = manifests.iter().find(|m| {
            m.object.kind == kind && m.object.namespace() == namespace && m.object.name() == name
        })?;
        let spec: crate::model::ingress::IngressSpec = ingress.object.spec_as().ok()?;
        let p = spec
            .paths()
            .find(|p| p.service.is_some_and(|s| s.name == stable_service))?;
        let host = match p.host.strip_prefix('*') {
            _ if p.host.is_empty() => format!("{name}.example"),
            None => p.host.to_string(),
            Some(rest) => format!("www{rest}"),
        };
        let affinity = crate::model::ingress::SessionAffinity::parse_noting(
            &ingress.object.annotations(),
            crate::model::ingress::DEFAULT_ANNOTATION_PREFIX,
            &mut Vec::new(),
        );
        Some(LoadTarget {
            host,
            port: None,
            path: (p.path != "/").then(|| p.path.to_string()),
            through_service: false,
            per_client: affinity.is_sticky(),
        })
    })
}

/// The host a load reaches the rollout's VirtualService by: its first host. None when the
/// rollout routes through no VirtualService found among the manifests.
fn routed_host(
    canary: &serde_json::Value,
    manifests: &[Manifest],
    namespace: &str,
) -> Option<String> {
    let istio = &canary["trafficRouting"]["istio"];
    let vs_name = istio["virtualService"]["name"]
        .as_str()
        .or_else(|| istio["virtualServices"][0]["name"].as_str())?;
    let vs_name = vs_name.split('.').next().unwrap_or(vs_name);
    manifests
        .iter()
        .find(|m| {
            m.object.kind == Kind::VirtualService
                && m.object.name() == vs_name
                && m.object.namespace() == namespace
        })
        .and_then(|vs| vs.object.spec()["hosts"][0].as_str())
        .map(str::to_string)
}

/// A new image for the rollout to roll out to: the tag with `-next` added.
fn next_image(image: &str) -> String {
    let name_start = image.rfind('/').map_or(0, |i| i + 1);
    match image[name_start..].rfind(':') {
        Some(_) => format!("{image}-next"),
        None => format!("{image}:next"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_new_image_keeps_the_repository_and_changes_the_tag() {
        assert_eq!(
            next_image("argoproj/rollouts-demo:blue"),
            "argoproj/rollouts-demo:blue-next"
        );
        assert_eq!(next_image("registry:5000/app"), "registry:5000/app:next");
        assert_eq!(next_image("nginx"), "nginx:next");
    }

    /// The plugin's route on a Gateway that lists a TLS port first and takes every name on
    /// its HTTP listener under a wildcard: the load goes to that listener's port, with a
    /// name the wildcard takes.
    #[test]
    fn a_gateway_api_rollouts_load_goes_where_the_route_table_installs_its_route() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let routes = std::fs::read_to_string(root.join("scenarios/manifests/gateway-api-routes.yaml"))
            .unwrap()
            .replace(
                "    - protocol: HTTP\n      name: http\n      port: 8080\n",
                "    - {protocol: TLS, name: tls, port: 443, tls: {mode: Passthrough}}\n    - {protocol: HTTP, name: http, port: 8080, hostname: \"*.example.com\"}\n",
            );
        assert!(routes.contains("*.example.com"), "the fixture changed");
        let rollout =
            std::fs::read_to_string(root.join("scenarios/manifests/gateway-api-rollout.yaml"))
                .unwrap();
        let sources: Vec<(ManifestSource, Vec<Manifest>)> = [routes, rollout]
            .into_iter()
            .map(|text| {
                let manifests = crate::model::yaml::load_str("m.yaml", &text, "default").unwrap();
                (ManifestSource::Inline(text), manifests)
            })
            .collect();
        let written = scenario(&sources).unwrap();
        assert!(
            written.text.contains("host: www.example.com"),
            "{}",
            written.text
        );
        assert!(written.text.contains("port: 8080"), "{}", written.text);
    }
}
