//! Static checks over manifests, without running them: Argo's spec validation, references
//! between resources (Services, VirtualServices, DestinationRules, Gateways), route
//! validation in Argo's words, VirtualServices that in-mesh callers bypass, and weights that
//! Istio cannot express. Each finding names `file:line:column`.

use serde_json::Value;
use std::fmt;

use crate::controller::{istio, validation};
use crate::model::rollout::RolloutSpec;
use crate::model::yaml::Location;
use crate::model::{Kind, Manifest};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    Spec,
    Reference,
    Routes,
    MeshBinding,
    Weights,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{}: {sev}: {}", self.location, self.message)
    }
}

/// Every check, over one set of manifests (objects refer to each other within the set).
pub fn check(manifests: &[Manifest]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for m in manifests.iter().filter(|m| m.object.kind == Kind::Rollout) {
        check_rollout(m, manifests, &mut out);
    }
    out
}

fn find<'a>(manifests: &'a [Manifest], kind: Kind, ns: &str, name: &str) -> Option<&'a Manifest> {
    manifests
        .iter()
        .find(|m| m.object.kind == kind && m.object.namespace() == ns && m.object.name() == name)
}

fn check_rollout(m: &Manifest, all: &[Manifest], out: &mut Vec<Diagnostic>) {
    let name = m.object.name();
    let ns = m.object.namespace();

    // Whole percents: Istio weights are integers (and Argo rejects maxTrafficWeight with
    // Istio), so 23.5 % cannot be set. Checked on the raw values, before typed decoding.
    if let Some(steps) = m.object.spec()["strategy"]["canary"]["steps"].as_array() {
        for (i, step) in steps.iter().enumerate() {
            if let Some(w) = step.get("setWeight").and_then(Value::as_f64) {
                if w.fract() != 0.0 {
                    out.push(diag(
                        m,
                        &format!("/spec/strategy/canary/steps/{i}/setWeight"),
                        Severity::Error,
                        Check::Weights,
                        format!("setWeight {w} is not a whole percent: Istio VirtualService weights are integers, so the closest settable weights are {} and {}", w.floor(), w.ceil()),
                    ));
                }
            }
        }
    }

    let spec: RolloutSpec = match m.object.spec_as() {
        Ok(s) => s,
        Err(e) => {
            out.push(diag(
                m,
                "/spec",
                Severity::Error,
                Check::Spec,
                format!("the Rollout spec cannot be decoded: {e}"),
            ));
            return;
        }
    };
    for err in validation::validate_rollout(m.object.spec(), &spec) {
        out.push(diag(
            m,
            &err.pointer(),
            Severity::Error,
            Check::Spec,
            validation::invalid_spec_message(name, &err),
        ));
    }
    let Some(canary) = spec.canary() else { return };

    for (field, svc) in [
        ("canaryService", &canary.canary_service),
        ("stableService", &canary.stable_service),
    ] {
        if !svc.is_empty() && find(all, Kind::Service, ns, svc).is_none() {
            out.push(diag(
                m,
                &format!("/spec/strategy/canary/{field}"),
                Severity::Error,
                Check::Reference,
                format!("spec.strategy.canary.{field}: Invalid value: \"{svc}\": service \"{svc}\" not found"),
            ));
        }
    }

    let Some(istio_cfg) = canary
        .traffic_routing
        .as_ref()
        .and_then(|t| t.istio.as_ref())
    else {
        return;
    };
    let managed = crate::controller::rollout::managed_routes(canary);
    let ctx = crate::controller::rollout::istio_context(name, canary, managed.as_deref());
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
        let pointer = if single {
            format!("{list_ptr}/name")
        } else {
            format!("{list_ptr}/{i}/name")
        };
        let (vs_ns, vs_name) = istio::virtual_service_namespace_name(&vs_ref.name, ns);
        let vs = find(all, Kind::VirtualService, &vs_ns, &vs_name);
        let field = istio_cfg.virtual_service_field();
        if let Err(e) =
            istio::validate_virtual_service(vs.map(|v| &v.object.value), vs_ref, field, &ctx)
        {
            let check = if vs.is_none() {
                Check::Reference
            } else {
                Check::Routes
            };
            out.push(diag(m, &pointer, Severity::Error, check, e));
        }
        let Some(vs) = vs else { continue };
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
        for section in ["http", "tls", "tcp"] {
            let Some(routes) = vs.object.spec()[section].as_array() else {
                continue;
            };
            for (r, route) in routes.iter().enumerate() {
                for (d, dest) in route["route"].as_array().into_iter().flatten().enumerate() {
                    if let Some(w) = dest.get("weight").and_then(Value::as_f64) {
                        if w.fract() != 0.0 {
                            out.push(Diagnostic {
                                location: vs
                                    .locate(&format!("/spec/{section}/{r}/route/{d}/weight")),
                                severity: Severity::Error,
                                check: Check::Weights,
                                message: format!(
                                    "weight {w} is not a whole percent: Istio weights are integers"
                                ),
                            });
                        }
                    }
                }
            }
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
