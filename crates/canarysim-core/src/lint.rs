//! Static checks over manifests, without running them: Argo's spec validation, references
//! between resources (Services, VirtualServices, DestinationRules, Gateways), route
//! validation in Argo's words, VirtualServices that in-mesh callers bypass, and weights that
//! Istio cannot express. Each finding names `file:line:column`.

use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt;

use crate::apiserver::admission::{self, IstioWeightRules};
use crate::controller::{istio, validation};
use crate::model::rollout::RolloutSpec;
use crate::model::yaml::Location;
use crate::model::{Kind, Manifest};

/// How bad a finding is: errors stop the rollout (Argo rejects the spec or cannot patch the
/// routes); warnings are configurations that run but likely do not do what was meant.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    /// `error` or `warning`, as the reports print it.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub location: Location,
    pub severity: Severity,
    /// What kind of check found it: references are the ones a scenario cannot run without.
    pub check: Check,
    pub message: String,
}

/// The family of check that produced a [`Diagnostic`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Argo's spec validation (`validation.go`).
    Spec,
    /// A referenced Service, VirtualService, DestinationRule or Gateway is missing.
    Reference,
    /// Argo's route validation of a referenced VirtualService.
    Routes,
    /// A managed VirtualService that in-mesh callers do not use.
    MeshBinding,
    /// A weight Istio cannot express.
    Weights,
    /// A VirtualService istiod's admission webhook would refuse.
    Admission,
    /// A field canarysim keeps but does not simulate, an unknown field, or one it refuses
    /// (`model::support`).
    Support,
    /// A value of the wrong type: the API server refuses the object (the CRD's schema).
    Schema,
    /// The Gateway API plugin's configuration against the routes it names.
    GatewayApiPlugin,
    /// What a Gateway API implementation makes of the HTTPRoutes: parents that do not
    /// accept them, backends that do not resolve.
    GatewayApiRoutes,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let template = self.location.template_note();
        write!(
            f,
            "{}: {}: {}{template}",
            self.location,
            self.severity.as_str(),
            self.message
        )
    }
}

impl Diagnostic {
    /// The order `canarysim lint` prints in: file, line, column, then errors first.
    pub fn sort_key(&self) -> (&Location, Severity, &str) {
        (&self.location, self.severity, &self.message)
    }
}

/// Every check, over one set of manifests (objects refer to each other within the set).
/// Findings come in discovery order (rollout by rollout), each reported once even when
/// several rollouts (or two versions of one rollout) lead to it.
pub fn check(manifests: &[Manifest], istio: IstioWeightRules) -> Vec<Diagnostic> {
    let review = crate::model::support::review_all(manifests);
    check_reviewed(manifests, istio, &review)
}

/// [`check`], with what canarysim supports of each field already reviewed (the scenario
/// loader has the review in hand for its own use).
pub(crate) fn check_reviewed(
    manifests: &[Manifest],
    istio: IstioWeightRules,
    review: &crate::model::support::Review,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    // A value of the wrong type (the Rollout's is found by its own checks, below; a
    // fractional weight by the weights' check, which says what Istio can set instead).
    for m in manifests.iter().filter(|m| match m.object.kind {
        Kind::Rollout => false,
        Kind::VirtualService => fractional_weights(&m.object.value).is_empty(),
        _ => true,
    }) {
        if let Err(e) = crate::model::typed::check_spec(m.object.kind, m.object.spec()) {
            out.push(schema_error(m, &e));
        }
    }
    let mut managed: Vec<&Manifest> = Vec::new();
    for m in manifests.iter().filter(|m| m.object.kind == Kind::Rollout) {
        check_rollout(m, manifests, &mut out, &mut managed);
    }
    let mut seen_vs = BTreeSet::new();
    for vs in managed {
        if seen_vs.insert(vs.object.key()) {
            check_gateways(vs, manifests, &mut out);
        }
    }
    // Istio rejects a fractional weight in any VirtualService, managed or not.
    for vs in manifests
        .iter()
        .filter(|m| m.object.kind == Kind::VirtualService)
    {
        for (pointer, w) in fractional_weights(&vs.object.value) {
            out.push(Diagnostic {
                location: vs.locate(&pointer),
                severity: Severity::Error,
                check: Check::Weights,
                message: format!("weight {w} is not a whole percent: {}", closest_weights(w)),
            });
        }
    }
    out.extend(admission_denials(manifests, istio));
    out.extend(gateway_api_routes(manifests));
    for r in &review.rejections {
        out.push(Diagnostic {
            location: r.location.clone(),
            severity: Severity::Error,
            check: Check::Support,
            message: r.message.clone(),
        });
    }
    for w in &review.warnings {
        out.push(Diagnostic {
            location: w.location(),
            severity: Severity::Warning,
            check: Check::Support,
            message: w.text(),
        });
    }
    let mut seen = BTreeSet::new();
    out.retain(|d| seen.insert((d.location.clone(), d.severity, d.message.clone())));
    out
}

/// VirtualServices that istiod's admission webhook (with `rules`) would refuse: the cluster
/// never stores them, so nothing the scenario shows could happen.
fn admission_denials(manifests: &[Manifest], rules: IstioWeightRules) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for vs in manifests
        .iter()
        .filter(|m| m.object.kind == Kind::VirtualService)
    {
        for (pointer, error) in admission::virtual_service_errors(&vs.object.value["spec"], rules) {
            out.push(diag(
                vs,
                &format!("/spec{pointer}"),
                Severity::Error,
                Check::Admission,
                format!(
                    "VirtualService {:?}: istiod's admission webhook ({}) would deny it: {error}",
                    vs.object.name(),
                    admission::ISTIO_WEBHOOK
                ),
            ));
        }
    }
    out
}

/// Whole percents: Istio weights are integers (and Argo rejects maxTrafficWeight with Istio),
/// so 23.5 % cannot be set. Checked on the raw values; the spec returned has the whole part,
/// so that the decode error does not bury this message and the other checks still run.
fn whole_set_weights(m: &Manifest, out: &mut Vec<Diagnostic>) -> Value {
    let mut spec_json = m.object.spec().clone();
    let fractional: Vec<(usize, f64)> = spec_json["strategy"]["canary"]["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, step)| {
            let w = step.get("setWeight").and_then(Value::as_f64)?;
            (w.fract() != 0.0).then_some((i, w))
        })
        .collect();
    for (i, w) in fractional {
        let pointer = format!("/strategy/canary/steps/{i}/setWeight");
        out.push(diag(
            m,
            &format!("/spec{pointer}"),
            Severity::Error,
            Check::Weights,
            format!(
                "setWeight {w} is not a whole percent: {}",
                closest_weights(w)
            ),
        ));
        floor_at(&mut spec_json, &pointer);
    }
    spec_json
}

/// The Services the strategy names (canary, stable, ping and pong; active and preview)
/// exist, as Argo's `getReferencedServices` requires.
fn check_services(
    m: &Manifest,
    all: &[Manifest],
    services: Vec<(&'static str, &str)>,
    out: &mut Vec<Diagnostic>,
) {
    let ns = m.object.namespace();
    for (field, svc) in services {
        if find(all, Kind::Service, ns, svc).is_none() {
            let pointer = format!("/{}", field.replace('.', "/"));
            out.push(diag(
                m,
                &pointer,
                Severity::Error,
                Check::Reference,
                crate::controller::rollout::service_not_found(field, svc),
            ));
        }
    }
}

/// The AnalysisTemplates (and ClusterAnalysisTemplates) each analysis names exist, as Argo's
/// `getReferencedRolloutAnalyses` requires (the rollout is InvalidSpec otherwise).
fn check_analysis_templates(
    m: &Manifest,
    all: &[Manifest],
    refs: Vec<(String, crate::controller::rollout_analysis::RolloutAnalysis)>,
    out: &mut Vec<Diagnostic>,
) {
    let ns = m.object.namespace();
    let missing = crate::controller::rollout::missing_analysis_templates(refs, |kind, name| {
        if kind == Kind::ClusterAnalysisTemplate {
            all.iter()
                .any(|x| x.object.kind == kind && x.object.name() == name)
        } else {
            find(all, kind, ns, name).is_some()
        }
    });
    for (path, message) in missing {
        // `spec.strategy.canary.steps[1].analysis.templates` → its JSON pointer.
        let pointer = format!("/{}", path.replace(['.', '['], "/").replace(']', ""));
        out.push(diag(
            m,
            &pointer,
            Severity::Error,
            Check::Reference,
            message,
        ));
    }
}

/// A promotion analysis that names no template: Argo creates no run for it, yet still waits
/// for one to succeed (`completedPrePromotionAnalysis`, `shouldFullPromote`).
fn promotion_analyses_without_templates(
    m: &Manifest,
    bg: &crate::model::rollout::BlueGreenStrategy,
    out: &mut Vec<Diagnostic>,
) {
    let name = m.object.name();
    for (field, analysis, consequence) in [
        (
            "prePromotionAnalysis",
            &bg.pre_promotion_analysis,
            "the active Service never switches to a new ReplicaSet",
        ),
        (
            "postPromotionAnalysis",
            &bg.post_promotion_analysis,
            "no update ever completes (the new ReplicaSet never becomes stable)",
        ),
    ] {
        let Some(analysis) = analysis else { continue };
        let templates = analysis["templates"].as_array().map_or(0, Vec::len);
        if templates == 0 {
            out.push(diag(
                m,
                &format!("/spec/strategy/blueGreen/{field}"),
                Severity::Warning,
                Check::Reference,
                format!(
                    "Rollout {name:?}: spec.strategy.blueGreen.{field} names no template: Argo creates no AnalysisRun for it, yet waits for one to succeed, so {consequence}"
                ),
            ));
        }
    }
}

/// The VirtualServices (with Argo's route validation) and the DestinationRule the Istio
/// traffic routing names; the VirtualServices found are recorded as managed.
fn check_istio_references<'a>(
    m: &Manifest,
    all: &'a [Manifest],
    canary: &crate::model::rollout::CanaryStrategy,
    out: &mut Vec<Diagnostic>,
    managed_vs: &mut Vec<&'a Manifest>,
) {
    let name = m.object.name();
    let ns = m.object.namespace();
    let Some(istio_cfg) = canary
        .traffic_routing
        .as_ref()
        .and_then(|t| t.istio.as_ref())
    else {
        return;
    };
    let managed = crate::controller::rollout::managed_routes(canary);
    // Before the first promotion (no status), pong is stable and ping the canary.
    let services = crate::controller::rollout::stable_and_canary_services(canary, "", false);
    let ctx =
        crate::controller::rollout::istio_context(name, canary, &services, managed.as_deref());
    let (list_ptr, single) = if istio_cfg.virtual_service.is_some() {
        (
            "/spec/strategy/canary/trafficRouting/istio/virtualService",
            true,
        )
    } else {
        (
            "/spec/strategy/canary/trafficRouting/istio/virtualServices",
            false,
        )
    };
    for (i, vs_ref) in istio_cfg.virtual_service_list().into_iter().enumerate() {
        let ref_ptr = if single {
            list_ptr.to_string()
        } else {
            format!("{list_ptr}/{i}")
        };
        let (vs_ns, vs_name) = istio::virtual_service_namespace_name(&vs_ref.name, ns);
        let vs = find(all, Kind::VirtualService, &vs_ns, &vs_name);
        // Fractional weights are reported once per VirtualService (in `check`); validate
        // the routes as if they were whole, so the report is that message and not also
        // Argo's "Unable to get HTTP routes" for the same field.
        let whole = vs.map(|v| {
            let mut value = v.object.value.clone();
            for (pointer, _) in fractional_weights(&v.object.value) {
                floor_at(&mut value, &pointer);
            }
            value
        });
        let field = istio_cfg.virtual_service_field();
        if let Err(e) = istio::validate_virtual_service(whole.as_ref(), vs_ref, field, &ctx) {
            let check = if vs.is_none() {
                Check::Reference
            } else {
                Check::Routes
            };
            // Argo names the VirtualService field; a route name the VirtualService lacks
            // is shown where the user wrote it.
            let pointer = vs_ref
                .routes
                .iter()
                .position(|r| e.contains(&format!("HTTP Route '{r}' is not found")))
                .map_or_else(
                    || format!("{ref_ptr}/name"),
                    |r| format!("{ref_ptr}/routes/{r}"),
                );
            out.push(diag(m, &pointer, Severity::Error, check, e));
        }
        if let Some(vs) = vs {
            if managed.is_some() {
                check_repeated_route_names(vs, out);
            }
            managed_vs.push(vs);
        }
    }
    if let Some(dr) = &istio_cfg.destination_rule {
        if find(all, Kind::DestinationRule, ns, &dr.name).is_none() {
            out.push(diag(
                m,
                "/spec/strategy/canary/trafficRouting/istio/destinationRule/name",
                Severity::Error,
                Check::Reference,
                format!(
                    "spec.strategy.canary.trafficRouting.istio.destinationRule.name: Invalid value: \"{0}\": destinationrules.networking.istio.io \"{0}\" not found",
                    dr.name
                ),
            ));
        }
    }
}

/// With `managedRoutes`, Argo's `orderRoutes` rebuilds `spec.http` by name on every write,
/// taking every route of a name once for each route of that name: N routes sharing a name
/// (or N unnamed ones) become N² on each write, until the API server refuses the object.
fn check_repeated_route_names(vs: &Manifest, out: &mut Vec<Diagnostic>) {
    let Some(routes) = vs.object.value["spec"]["http"].as_array() else {
        return;
    };
    // Named as orderRoutes groups them: a route without a string name is "".
    let names: Vec<&str> = routes.iter().map(istio::raw_route_name).collect();
    let (mut seen, mut warned) = (BTreeSet::new(), BTreeSet::new());
    for (i, &name) in names.iter().enumerate() {
        if seen.insert(name) || !warned.insert(name) {
            continue;
        }
        let count = names.iter().filter(|&&n| n == name).count();
        let who = if name.is_empty() {
            format!("{count} http routes have no name")
        } else {
            format!("{count} http routes are named \"{name}\"")
        };
        out.push(diag(
            vs,
            &format!("/spec/http/{i}"),
            Severity::Warning,
            Check::Routes,
            format!(
                "{who}; with managedRoutes, Argo Rollouts re-orders the routes by name on every write and repeats each of them once per route of that name ({count} become {}), so the VirtualService grows with every weight change until the API server refuses it (etcdserver: request is too large). Give each route its own name",
                count * count
            ),
        ));
    }
}

/// Why a fractional weight cannot be set, and what can.
fn closest_weights(w: f64) -> String {
    format!(
        "Istio VirtualService weights are integers, so the closest settable weights are {} and {}",
        w.floor(),
        w.ceil()
    )
}

/// `(pointer, weight)` of every destination weight in the http/tls/tcp routes of a
/// VirtualService (the whole object) that is not a whole number.
fn fractional_weights(vs: &Value) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for section in ["http", "tls", "tcp"] {
        let Some(routes) = vs["spec"][section].as_array() else {
            continue;
        };
        for (r, route) in routes.iter().enumerate() {
            for (d, dest) in route["route"].as_array().into_iter().flatten().enumerate() {
                if let Some(w) = dest.get("weight").and_then(Value::as_f64) {
                    if w.fract() != 0.0 {
                        out.push((format!("/spec/{section}/{r}/route/{d}/weight"), w));
                    }
                }
            }
        }
    }
    out
}

/// Replaces the number at `pointer` in `value` by its whole part, so that typed decoding
/// (Argo decodes weights as integers) does not fail on a problem already reported in plainer
/// words, and the other checks still run.
fn floor_at(value: &mut Value, pointer: &str) {
    if let Some(v) = value.pointer_mut(pointer) {
        if let Some(w) = v.as_f64() {
            *v = Value::from(w.floor() as i64);
        }
    }
}

/// Named gateways of a managed VirtualService: bound without `mesh`, or missing.
fn check_gateways(vs: &Manifest, all: &[Manifest], out: &mut Vec<Diagnostic>) {
    let vs_name = vs.object.name();
    // In-mesh callers use the implicit `mesh` gateway: a VirtualService bound only to
    // named gateways does not apply to them (argo-rollouts issue 3383).
    let gateways: Vec<&str> = vs.object.spec()["gateways"]
        .as_array()
        .map(|g| g.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !gateways.is_empty() && !gateways.contains(&"mesh") {
        out.push(Diagnostic {
            location: vs.locate("/spec/gateways"),
            severity: Severity::Warning,
            check: Check::MeshBinding,
            message: format!(
                "VirtualService \"{vs_name}\" is bound to gateways [{}] but not to `mesh`: in-mesh callers bypass its weights and split by the Services' endpoints (add `mesh` to spec.gateways)",
                gateways.join(", ")
            ),
        });
    }
    for (g, gw) in gateways.iter().enumerate() {
        if *gw == "mesh" {
            continue;
        }
        let (gw_ns, gw_name) = match gw.split_once('/') {
            Some((n, g)) => (n.to_string(), g.to_string()),
            None => (vs.object.namespace().to_string(), gw.to_string()),
        };
        if find(all, Kind::Gateway, &gw_ns, &gw_name).is_none() {
            out.push(Diagnostic {
                location: vs.locate(&format!("/spec/gateways/{g}")),
                severity: Severity::Warning,
                check: Check::Reference,
                message: format!("gateways.networking.istio.io \"{gw_name}\" not found in namespace {gw_ns}: no traffic enters through it"),
            });
        }
    }
}

fn find<'a>(manifests: &'a [Manifest], kind: Kind, ns: &str, name: &str) -> Option<&'a Manifest> {
    manifests
        .iter()
        .find(|m| m.object.kind == kind && m.object.namespace() == ns && m.object.name() == name)
}

fn check_rollout<'a>(
    m: &Manifest,
    all: &'a [Manifest],
    out: &mut Vec<Diagnostic>,
    managed_vs: &mut Vec<&'a Manifest>,
) {
    let name = m.object.name();

    let spec_json = whole_set_weights(m, out);

    let decoded = if spec_json.is_null() {
        Ok(RolloutSpec::default())
    } else {
        crate::model::typed::decode::<RolloutSpec>(&spec_json)
    };
    let spec = match decoded {
        Ok(s) => s,
        Err(e) => {
            out.push(schema_error(m, &e));
            return;
        }
    };
    for err in validation::validate_rollout(&spec_json, &spec) {
        out.push(diag(
            m,
            &err.pointer(),
            Severity::Error,
            Check::Spec,
            validation::invalid_spec_message(name, &err),
        ));
    }
    if let (Some(Ok(bg)), None) = (spec.blue_green(), spec.canary()) {
        let services = crate::controller::rollout::blue_green_services(&bg);
        check_services(m, all, services, out);
        let refs = crate::controller::rollout::blue_green_analysis_refs(&bg);
        check_analysis_templates(m, all, refs, out);
        promotion_analyses_without_templates(m, &bg, out);
    }
    let Some(canary) = spec.canary() else { return };

    let services = crate::controller::rollout::referenced_services(canary);
    check_services(m, all, services, out);
    let refs = crate::controller::rollout::analysis_refs(canary);
    check_analysis_templates(m, all, refs, out);
    check_gateway_api_plugin(m, all, &spec_json, out);
    check_stable_ingresses(m, all, canary, name, out);

    if canary
        .traffic_routing
        .as_ref()
        .and_then(|t| t.istio.as_ref())
        .is_none()
    {
        return;
    }
    if let Some(err) = validation::validate_virtual_services_config(&spec) {
        out.push(diag(
            m,
            &err.pointer(),
            Severity::Error,
            Check::Spec,
            validation::invalid_spec_message(name, &err),
        ));
        return;
    }
    check_istio_references(m, all, canary, out, managed_vs);
}

/// A Rollout routed by NGINX: its stable Ingresses must exist and forward to the stable
/// Service, or the rollout is `InvalidSpec` (Argo's message).
fn check_stable_ingresses(
    m: &Manifest,
    all: &[Manifest],
    canary: &crate::model::rollout::CanaryStrategy,
    name: &str,
    out: &mut Vec<Diagnostic>,
) {
    let Some(cfg) = canary
        .traffic_routing
        .as_ref()
        .and_then(|t| t.nginx.as_ref())
    else {
        return;
    };
    let ns = m.object.namespace();
    let kind = crate::model::ingress::ingress_kind();
    for stable in cfg.stable_ingress_list() {
        let Some(ingress) = find(all, kind, ns, stable) else {
            continue;
        };
        if let Some(field) = crate::controller::nginx::nil_pointer_in(ingress.object.spec()) {
            out.push(diag(
                ingress,
                &format!("/spec/{}", field.replace(['.', '['], "/").replace(']', "")),
                Severity::Error,
                Check::Reference,
                format!(
                    "Argo's NGINX router reads spec.{field} of this stable Ingress of Rollout \"{name}\" without checking that it is there, and panics: the rollout never progresses"
                ),
            ));
            return;
        }
    }
    let found =
        crate::controller::nginx::stable_ingresses_error(cfg, &canary.stable_service, |i| {
            let ingress = find(all, kind, ns, i)?;
            Some(ingress.object.spec_as().unwrap_or_default())
        });
    if let Some((pointer, message)) = found {
        out.push(diag(
            m,
            &pointer,
            Severity::Error,
            Check::Reference,
            format!("The Rollout \"{name}\" is invalid: {message}"),
        ));
    }
}

use crate::controller::gateway_api::{PluginContext, RouteKind, set_weight};
use crate::model::gateway_api::PLUGIN as GATEWAY_API_PLUGIN;

/// A Rollout routed by the Gateway API plugin: the routes its configuration names must exist
/// (in its `namespace`, else the Rollout's) and forward to both the stable and the canary
/// Service, or the plugin fails every weight change with the error given here (its own, or
/// the API client's) and the rollout never moves traffic by weight.
fn check_gateway_api_plugin(
    m: &Manifest,
    all: &[Manifest],
    spec: &Value,
    out: &mut Vec<Diagnostic>,
) {
    let canary = &spec["strategy"]["canary"];
    let config = &canary["trafficRouting"]["plugins"][GATEWAY_API_PLUGIN];
    if !config.is_object() {
        return;
    }
    let base = "/spec/strategy/canary/trafficRouting/plugins/argoproj-labs~1gatewayAPI";
    let services = [&canary["stableService"], &canary["canaryService"]]
        .map(|s| s.as_str().unwrap_or_default());
    let namespace = config["namespace"]
        .as_str()
        .filter(|n| !n.is_empty())
        .unwrap_or(m.object.namespace());
    let managed: Vec<String> = canary["trafficRouting"]["managedRoutes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str().map(str::to_string))
        .collect();
    let ctx = PluginContext {
        stable: services[0],
        canary: services[1],
        managed: &managed,
    };
    let mut configured = false;
    for route_kind in RouteKind::ALL {
        let (kind, field) = (route_kind.kind(), route_kind.field());
        let (one, many, selector) = (
            format!("{field}Route"),
            format!("{field}Routes"),
            format!("{field}RouteSelector"),
        );
        let (one, many, selector) = (one.as_str(), many.as_str(), selector.as_str());
        let mut named: Vec<(String, &str)> = Vec::new();
        if let Some(name) = config[one].as_str().filter(|n| !n.is_empty()) {
            named.push((format!("{base}/{one}"), name));
        }
        for (i, route) in config[many].as_array().into_iter().flatten().enumerate() {
            if let Some(name) = route["name"].as_str() {
                named.push((format!("{base}/{many}/{i}/name"), name));
            }
        }
        configured |= !named.is_empty() || config[selector].is_object();
        let Some(stored) = crate::model::stored_kind::known(crate::model::gateway_api::GROUP, kind)
        else {
            continue;
        };
        for (pointer, name) in named {
            let message = match find(all, Kind::Stored(stored), namespace, name) {
                None => format!(
                    "{GATEWAY_API_PLUGIN}: {}.{} {name:?} not found in namespace {namespace:?}: the plugin fails every weight change",
                    stored.info().plural,
                    crate::model::gateway_api::GROUP
                ),
                // The plugin's own SetWeight, on the route as written.
                Some(route) => match set_weight(&route.object.value, route_kind, &ctx, 0, None) {
                    Err(not_found) => format!(
                        "{GATEWAY_API_PLUGIN}: {not_found}: no rule of {kind} {name:?} forwards to {:?} and {:?} both; the plugin fails every weight change",
                        services[0], services[1]
                    ),
                    Ok(_) => continue,
                },
            };
            out.push(diag(
                m,
                &pointer,
                Severity::Error,
                Check::GatewayApiPlugin,
                message,
            ));
        }
    }
    if !configured {
        out.push(diag(
            m,
            base,
            Severity::Error,
            Check::GatewayApiPlugin,
            format!(
                "{GATEWAY_API_PLUGIN}: No routes configured. At least one of 'httpRoutes', 'grpcRoutes', 'tcpRoutes', 'tlsRoutes', 'httpRoute', 'grpcRoute', 'tcpRoute' or 'tlsRoute' must be set"
            ),
        ));
    }
}

/// The route table's notes on the Gateway API's objects, at each object: a route whose
/// parent does not exist or does not accept it, a backendRef that does not resolve, a rule
/// filter not simulated. Warnings: the API server takes the objects, and the Gateway may
/// live in another repository.
fn gateway_api_routes(manifests: &[Manifest]) -> Vec<Diagnostic> {
    const ROUTES: [&str; 4] = ["HTTPRoute", "GRPCRoute", "TCPRoute", "TLSRoute"];
    let of = |kinds: &[&str], kind: Kind| {
        kinds
            .iter()
            .any(|k| kind == crate::model::gateway_api::kind(k))
    };
    let objects: Vec<&Manifest> = manifests
        .iter()
        .filter(|m| of(&ROUTES, m.object.kind) || of(&["Gateway"], m.object.kind))
        .collect();
    if !objects.iter().any(|m| of(&ROUTES, m.object.kind)) {
        return Vec::new();
    }
    let set = crate::model::ObjectSet::new(manifests.iter().map(|m| m.object.clone()).collect());
    let table = crate::mesh::translate(&set);
    table
        .notes()
        .iter()
        .filter_map(|note| {
            let m = objects.iter().find(|m| m.object.key() == note.object)?;
            Some(diag(
                m,
                "",
                Severity::Warning,
                Check::GatewayApiRoutes,
                format!("{} {:?}: {}", m.object.kind, m.object.name(), note.message),
            ))
        })
        .collect()
}

/// A spec value of the wrong type, where it is written, as the API server refuses it.
fn schema_error(m: &Manifest, e: &crate::model::typed::FieldError) -> Diagnostic {
    diag(
        m,
        &format!("/spec{}", e.pointer),
        Severity::Error,
        Check::Schema,
        format!(
            "{} {:?}: spec.{}: {} (the API server refuses it: the field's type is fixed by the {} schema)",
            m.object.kind,
            m.object.name(),
            e.path,
            e.message,
            if m.object.kind == crate::model::Kind::Rollout {
                "CRD's"
            } else {
                "kind's"
            }
        ),
    )
}

/// A finding at `pointer` in `m`.
fn diag(
    m: &Manifest,
    pointer: &str,
    severity: Severity,
    check: Check,
    message: String,
) -> Diagnostic {
    Diagnostic {
        location: m.locate(pointer),
        severity,
        check,
        message,
    }
}
