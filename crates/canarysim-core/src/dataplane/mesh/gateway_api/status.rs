//! The status an implementation writes on the Gateway API objects it programs
//! (`apis/v1/shared_types.go`, `gateway_types.go`, `gatewayclass_types.go`), so that
//! `kubectl get httproute -o yaml` on a simulated cluster shows what a real one would:
//!
//! * a GatewayClass: `Accepted`;
//! * a Gateway: `Accepted` and `Programmed`, and per listener its `supportedKinds`,
//!   `attachedRoutes` and `Accepted`/`ResolvedRefs`/`Programmed`;
//! * a route: one `parents` entry per parentRef it names (a Gateway or a Service), with the
//!   controller's name, `Accepted` (or why not: `NoMatchingParent`, `NotAllowedByListeners`,
//!   `NoMatchingListenerHostname`) and `ResolvedRefs` (or the first backendRef that does not
//!   resolve: `BackendNotFound`, `RefNotPermitted`, `InvalidKind`).
//!
//! The translation records what it decided; [`StatusBook::into_writes`] turns it into the
//! status objects, and the world stamps `lastTransitionTime` ([`stamp_transitions`]) when it
//! writes them.

use serde_json::{Map, Value, json};

use crate::model::gateway_api::{self, GatewayListener, ParentRef};
use crate::model::{Object, ObjectKey, Objects};

/// The controller named in a route's parent status for the mesh (GAMMA), as Istio's.
const MESH_CONTROLLER: &str = "istio.io/mesh-controller";

/// One object's new status.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StatusWrite {
    pub key: ObjectKey,
    pub status: Value,
}

/// Whether a route was accepted by one parent, or why not (a reason of the spec's, and words).
pub(super) type Acceptance = Result<(), (&'static str, String)>;

/// What the translation decided about the Gateway API objects, as their status will say.
#[derive(Debug, Default)]
pub(crate) struct StatusBook {
    gateways: Vec<GatewayRecord>,
    routes: Vec<RouteRecord>,
    /// (route, Gateway, listener) already counted in `attachedRoutes`.
    counted: std::collections::BTreeSet<(ObjectKey, ObjectKey, String)>,
}

#[derive(Debug)]
struct GatewayRecord {
    key: ObjectKey,
    generation: i64,
    class: String,
    listeners: Vec<ListenerRecord>,
}

#[derive(Debug)]
struct ListenerRecord {
    name: String,
    /// Whether some simulated route kind is served by its protocol.
    protocol_supported: bool,
    /// The kinds it takes: its protocol's, narrowed by `allowedRoutes.kinds`.
    kinds: Vec<&'static str>,
    attached: u32,
}

#[derive(Debug)]
struct RouteRecord {
    key: ObjectKey,
    generation: i64,
    parents: Vec<(Value, String, Acceptance)>,
    /// The first backendRef that does not resolve: reason and words.
    unresolved: Option<(&'static str, String)>,
}

/// The route kinds a listener of `protocol` takes (none: a protocol no implementation
/// canarysim models supports).
fn kinds_for(protocol: &str) -> &'static [&'static str] {
    match protocol {
        "HTTP" | "HTTPS" => &["HTTPRoute", "GRPCRoute"],
        "TLS" => &["TLSRoute"],
        "TCP" => &["TCPRoute"],
        _ => &[],
    }
}

impl StatusBook {
    /// A Gateway the route table programs, with its listeners.
    pub(super) fn gateway(&mut self, gw: &Object, class: &str, listeners: &[GatewayListener]) {
        let listeners = listeners
            .iter()
            .map(|l| ListenerRecord {
                name: l.name.clone(),
                protocol_supported: !kinds_for(&l.protocol).is_empty(),
                kinds: kinds_for(&l.protocol)
                    .iter()
                    .copied()
                    .filter(|k| l.allowed_routes.admits(k))
                    .collect(),
                attached: 0,
            })
            .collect();
        self.gateways.push(GatewayRecord {
            key: gw.key(),
            generation: gw.generation(),
            class: class.to_string(),
            listeners,
        });
    }

    /// Route `route` was taken by listener `listener` of `gateway`; counted once per route
    /// and listener however many parentRefs select it.
    pub(super) fn attached(&mut self, route: &ObjectKey, gateway: &ObjectKey, listener: &str) {
        let pair = (route.clone(), gateway.clone(), listener.to_string());
        if !self.counted.insert(pair) {
            return;
        }
        let gw = self.gateways.iter_mut().find(|g| g.key == *gateway);
        if let Some(l) = gw.and_then(|g| g.listeners.iter_mut().find(|l| l.name == listener)) {
            l.attached += 1;
        }
    }

    fn route_mut(&mut self, route: &Object) -> &mut RouteRecord {
        let key = route.key();
        match self.routes.iter().position(|r| r.key == key) {
            Some(i) => &mut self.routes[i],
            None => {
                self.routes.push(RouteRecord {
                    key,
                    generation: route.generation(),
                    parents: Vec::new(),
                    unresolved: None,
                });
                self.routes.last_mut().expect("just pushed")
            }
        }
    }

    /// What parentRef `index` of `route` came to. `controller`: the implementation that
    /// decided (the Gateway's class's controller, or the mesh's).
    pub(super) fn parent(
        &mut self,
        route: &Object,
        index: usize,
        controller: Option<&str>,
        acceptance: Acceptance,
    ) {
        let parent_ref = parent_ref_as_written(route, index);
        let controller = controller.unwrap_or(MESH_CONTROLLER).to_string();
        self.route_mut(route)
            .parents
            .push((parent_ref, controller, acceptance));
    }

    /// A route seen by the translation, whatever its parents (so that a route that lost
    /// its last programmed parent has its stale entries cleared).
    pub(super) fn route(&mut self, route: &Object) {
        self.route_mut(route);
    }

    /// A backendRef of route `key` does not resolve; the first one found is reported.
    pub(super) fn unresolved(&mut self, key: &ObjectKey, reason: &'static str, message: String) {
        let r = self.routes.iter_mut().find(|r| r.key == *key);
        if let Some(r) = r.filter(|r| r.unresolved.is_none()) {
            r.unresolved = Some((reason, message));
        }
    }

    /// The status of every GatewayClass, Gateway and route, as the implementation writes it
    /// (without `lastTransitionTime`: [`stamp_transitions`] adds it). A route none of whose
    /// parents canarysim programs gets `parents: []`, which the writer skips unless it
    /// clears entries written before (a Gateway deleted, a parentRef renamed).
    pub(crate) fn into_writes(self, api: &dyn Objects) -> Vec<StatusWrite> {
        let mut out = Vec::new();
        for class in api.objects(gateway_api::kind("GatewayClass")) {
            let condition = condition(
                "Accepted",
                Ok(()),
                "Accepted",
                "Gateways of this class are programmed (simulated by canarysim)",
                class.generation(),
            );
            out.push(StatusWrite {
                key: class.key(),
                status: json!({"conditions": [condition]}),
            });
        }
        for g in self.gateways {
            out.push(gateway_status(g));
        }
        for r in self.routes {
            out.push(route_status(r));
        }
        out
    }
}

/// The controller of a Gateway's class: the GatewayClass's `controllerName`, else the one
/// its name stands for in the implementations canarysim models.
pub(super) fn controller_of(api: &dyn Objects, class: &str) -> String {
    let written = api
        .objects(gateway_api::kind("GatewayClass"))
        .into_iter()
        .find(|c| c.name() == class)
        .and_then(|c| c.spec()["controllerName"].as_str().map(str::to_string));
    written.unwrap_or_else(|| match class {
        "istio" | "istio-waypoint" => "istio.io/gateway-controller".to_string(),
        "eg" | "envoy-gateway" => "gateway.envoyproxy.io/gatewayclass-controller".to_string(),
        _ => format!("canarysim.io/{class}"),
    })
}

fn parent_ref_as_written(route: &Object, index: usize) -> Value {
    let written = &route.spec()["parentRefs"][index];
    let parent: ParentRef = serde_json::from_value(written.clone()).unwrap_or_default();
    // The API server's defaults, as a status shows them.
    let mut out = Map::new();
    out.insert(
        "group".into(),
        json!(parent.group.as_deref().unwrap_or(gateway_api::GROUP)),
    );
    out.insert(
        "kind".into(),
        json!(parent.kind.as_deref().unwrap_or("Gateway")),
    );
    out.insert("name".into(), json!(parent.name));
    if let Some(ns) = &parent.namespace {
        out.insert("namespace".into(), json!(ns));
    }
    if let Some(s) = &parent.section_name {
        out.insert("sectionName".into(), json!(s));
    }
    if let Some(p) = parent.port {
        out.insert("port".into(), json!(p));
    }
    Value::Object(out)
}

fn condition(
    kind: &str,
    outcome: Result<(), ()>,
    reason: &str,
    message: &str,
    generation: i64,
) -> Value {
    json!({
        "type": kind,
        "status": if outcome.is_ok() { "True" } else { "False" },
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
    })
}

fn gateway_status(g: GatewayRecord) -> StatusWrite {
    let generation = g.generation;
    let listeners: Vec<Value> = g
        .listeners
        .iter()
        .map(|l| {
            let (accepted, reason, message) = if l.protocol_supported {
                (Ok(()), "Accepted", "the listener is programmed")
            } else {
                (
                    Err(()),
                    "UnsupportedProtocol",
                    "no route kind canarysim simulates is served by this protocol",
                )
            };
            let programmed_reason = if l.protocol_supported {
                "Programmed"
            } else {
                "Invalid"
            };
            // Kinds named in allowedRoutes that the protocol does not serve: none is left.
            let resolved = if l.protocol_supported && l.kinds.is_empty() {
                condition(
                    "ResolvedRefs",
                    Err(()),
                    "InvalidRouteKinds",
                    "allowedRoutes.kinds names no kind this protocol serves",
                    generation,
                )
            } else {
                condition(
                    "ResolvedRefs",
                    Ok(()),
                    "ResolvedRefs",
                    "references are resolved",
                    generation,
                )
            };
            json!({
                "name": l.name,
                "supportedKinds": l.kinds.iter()
                    .map(|k| json!({"group": gateway_api::GROUP, "kind": k}))
                    .collect::<Vec<_>>(),
                "attachedRoutes": l.attached,
                "conditions": [
                    condition("Accepted", accepted, reason, message, generation),
                    resolved,
                    condition("Programmed", accepted, programmed_reason, message, generation),
                ],
            })
        })
        .collect();
    let message = format!("programmed by canarysim as class {:?}", g.class);
    StatusWrite {
        key: g.key,
        status: json!({
            "conditions": [
                condition("Accepted", Ok(()), "Accepted", &message, generation),
                condition("Programmed", Ok(()), "Programmed", &message, generation),
            ],
            "listeners": listeners,
        }),
    }
}

fn route_status(r: RouteRecord) -> StatusWrite {
    let generation = r.generation;
    let resolved = match &r.unresolved {
        None => condition(
            "ResolvedRefs",
            Ok(()),
            "ResolvedRefs",
            "every backendRef resolves",
            generation,
        ),
        Some((reason, message)) => condition("ResolvedRefs", Err(()), reason, message, generation),
    };
    let parents: Vec<Value> = r
        .parents
        .into_iter()
        .map(|(parent_ref, controller, acceptance)| {
            let accepted = match &acceptance {
                Ok(()) => condition(
                    "Accepted",
                    Ok(()),
                    "Accepted",
                    "the route is accepted",
                    generation,
                ),
                Err((reason, message)) => {
                    condition("Accepted", Err(()), reason, message, generation)
                }
            };
            json!({
                "parentRef": parent_ref,
                "controllerName": controller,
                "conditions": [accepted, resolved.clone()],
            })
        })
        .collect();
    StatusWrite {
        key: r.key,
        status: json!({"parents": parents}),
    }
}

/// Gives each condition of `new` its `lastTransitionTime`: the one in `old` (the status
/// stored now, same place, same type) when its status did not change, else `now`, as
/// `meta.SetStatusCondition` does.
pub(crate) fn stamp_transitions(new: &mut Value, old: &Value, now: &str) {
    match new {
        Value::Object(map) => {
            for (field, value) in map.iter_mut() {
                if field == "conditions" {
                    stamp_conditions(value, &old[field.as_str()], now);
                } else {
                    stamp_transitions(value, &old[field.as_str()], now);
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                stamp_transitions(item, &old[i], now);
            }
        }
        _ => {}
    }
}

fn stamp_conditions(new: &mut Value, old: &Value, now: &str) {
    for c in new.as_array_mut().into_iter().flatten() {
        let before = old
            .as_array()
            .into_iter()
            .flatten()
            .find(|o| o["type"] == c["type"]);
        let time = match before {
            Some(o) if o["status"] == c["status"] => o["lastTransitionTime"].clone(),
            _ => json!(now),
        };
        c["lastTransitionTime"] = if time.is_null() { json!(now) } else { time };
    }
}
