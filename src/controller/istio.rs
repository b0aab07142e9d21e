//! PLACEHOLDER until the full port lands: host-level http weights only.
use crate::model::rollout::*;
use serde_json::Value;

pub struct IstioContext<'a> {
    pub rollout_name: &'a str,
    pub canary_service: &'a str,
    pub stable_service: &'a str,
    pub destination_rule: Option<&'a IstioDestinationRule>,
    pub managed_routes: &'a [String],
    pub steps: &'a [CanaryStep],
}
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrafficRoutingError(pub String);
impl std::fmt::Display for TrafficRoutingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
pub enum RemoveOutcome {
    Unchanged,
    Write(Value),
    StopNoHttp,
}
pub fn set_weight(
    vs: &Value,
    _r: &IstioVirtualService,
    ctx: &IstioContext,
    desired: i32,
    _a: &[WeightDestination],
) -> Result<Option<Value>, TrafficRoutingError> {
    let mut next = vs.clone();
    let mut changed = false;
    if let Some(http) = next["spec"]["http"].as_array_mut() {
        for route in http {
            if let Some(dests) = route["route"].as_array_mut() {
                for d in dests {
                    let host = d["destination"]["host"]
                        .as_str()
                        .unwrap_or("")
                        .split('.')
                        .next()
                        .unwrap_or("")
                        .to_string();
                    let w = if host == ctx.canary_service {
                        desired
                    } else if host == ctx.stable_service {
                        100 - desired
                    } else {
                        continue;
                    };
                    if d["weight"] != w {
                        d["weight"] = Value::from(w);
                        changed = true;
                    }
                }
            }
        }
    }
    Ok(changed.then_some(next))
}
pub fn set_header_route(
    vs: &Value,
    _r: &IstioVirtualService,
    _c: &IstioContext,
    _s: &SetHeaderRoute,
    _h: Option<&str>,
) -> Result<Value, TrafficRoutingError> {
    Ok(vs.clone())
}
pub fn set_mirror_route(
    vs: &Value,
    _r: &IstioVirtualService,
    _c: &IstioContext,
    _s: &SetMirrorRoute,
    _h: Option<&str>,
) -> Result<Value, TrafficRoutingError> {
    Ok(vs.clone())
}
pub fn remove_managed_routes(
    _vs: &Value,
    _c: &IstioContext,
) -> Result<RemoveOutcome, TrafficRoutingError> {
    Ok(RemoveOutcome::Unchanged)
}
pub fn update_destination_rule(
    _dr: &Value,
    _c: &IstioContext,
    _a: &str,
    _b: &str,
    _x: &[WeightDestination],
) -> Result<Option<Value>, TrafficRoutingError> {
    Ok(None)
}
pub fn validate_virtual_service(
    vs: Option<&Value>,
    r: &IstioVirtualService,
    field: &str,
    _c: &IstioContext,
) -> Result<(), String> {
    match vs {
        None => Err(format!(
            "{field}: Invalid value: \"{0}\": virtualservices.networking.istio.io \"{0}\" not found",
            r.name
        )),
        Some(_) => Ok(()),
    }
}
pub fn virtual_service_namespace_name(reference: &str, ns: &str) -> (String, String) {
    (ns.to_string(), reference.to_string())
}
