//! Istio traffic routing for the canary path: a pure, I/O-free port of the Argo Rollouts Istio
//! reconciler. The controller reads the objects from its store, calls these functions, writes
//! what they return and records the events built by the `*_event` helpers.
//!
//! What mirrors what (paths in `github.com/argoproj/argo-rollouts`; behaviour as described in
//! `ARGO-BEHAVIOR.md` §2–§8, which was read from the current master):
//!
//! * [`set_weight`] — `rollout/trafficrouting/istio/istio.go`: `SetWeight`,
//!   `reconcileVirtualService`, `generateVirtualServicePatches`, `processRoutes`,
//!   `patchVirtualService` (§2), route selection `getHttpRouteIndexesToPatch`,
//!   `searchTlsRoute`, `searchTcpRoute` (§3) and `ValidateHTTPRoutes` / `ValidateTlsRoutes` /
//!   `ValidateTcpRoutes` (§7).
//! * [`set_header_route`], [`set_mirror_route`], [`remove_managed_routes`] — `istio.go`:
//!   `SetHeaderRoute`, `createHeaderRoute`, `SetMirrorRoute`, `createMirrorRoute`,
//!   `removeRoute`, `orderRoutes`, `splitManagedRoutesAndNonManagedRoutes`,
//!   `getOrderedVirtualServiceRoutes`, `RemoveManagedRoutes` (§6).
//! * [`update_destination_rule`] — `istio.go`: `UpdateHash`, `updateDestinationRule`,
//!   `destinationRuleReplaceExtraMarshal` and the ReplicaSet availability delay (§8).
//! * [`validate_virtual_service`], [`validate_virtual_services_config`] —
//!   `pkg/apis/rollouts/validation/validation_references.go`: `ValidateVirtualService`,
//!   `ValidateRolloutVirtualServicesConfig` (§7).
//! * [`virtual_service_namespace_name`] — `utils/istio/istio.go`:
//!   `GetVirtualServiceNamespaceName` (§4).
//! * The typed views Argo decodes the unstructured routes into (`istio_types.go`) are emulated
//!   by a small `encoding/json` type checker, so malformed objects give Argo's own
//!   `json: cannot unmarshal …` messages instead of panics.
//!
//! Objects are `serde_json::Value`s with key order preserved. Only the interpreted parts change;
//! everything else survives byte for byte. Where Argo re-serialises (the mirror route's copy of
//! the weight route's destinations, DestinationRule subsets) the re-serialised content is what
//! Argo writes, but original key order is kept where Argo's output has no order (Go maps).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use crate::apiserver::ApiError;
use serde_json::{Map, Number, Value};

use crate::model::rollout::{
    CanaryStep, IstioDestinationRule, IstioTrafficRouting, IstioVirtualService, RouteMatch,
    SetHeaderRoute, SetMirrorRoute, TcpRoute, TlsRoute, WeightDestination,
};

use crate::model::vocabulary::{HASH_LABEL, MANAGED_BY};
/// Argo's `SpecHttpNotFound` error text.
pub(crate) const SPEC_HTTP_NOT_FOUND: &str = "spec.http not found";

const NO_TLS_ROUTE: &str = "No matching TLS routes found in the defined Virtual Service.";
const NO_TCP_ROUTE: &str = "No matching TCP routes found in the defined Virtual Service.";
const HTTP_AMBIGUOUS: &str = "spec.http[] should be set in VirtualService and it must have exactly one route when omitting spec.strategy.canary.trafficRouting.istio.virtualService.routes";
const TLS_AMBIGUOUS: &str = "spec.tls[] should be set in VirtualService and it must have exactly one route when omitting spec.strategy.canary.trafficRouting.istio.virtualService.tlsRoutes";
const TCP_AMBIGUOUS: &str = "spec.tcp[] should be set in VirtualService and it must have exactly one route when omitting spec.strategy.canary.trafficRouting.istio.virtualService.tcpRoutes";
const CANNOT_CAST_ROUTE: &str =
    "Could not cast type to map[string]any to find route name in Istio Virtual Service";

// ---------------------------------------------------------------------------------------------
// Inputs, errors, events.

/// An error of the Istio reconciler. `Display` is the exact message Argo produces (what ends up
/// in the `TrafficRoutingError` Warning event and in the controller log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrafficRoutingError(pub String);

impl fmt::Display for TrafficRoutingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TrafficRoutingError {}

impl From<String> for TrafficRoutingError {
    fn from(s: String) -> Self {
        TrafficRoutingError(s)
    }
}

impl From<&str> for TrafficRoutingError {
    fn from(s: &str) -> Self {
        TrafficRoutingError(s.to_string())
    }
}

/// What the reconciler needs from the Rollout.
#[derive(Debug, Clone, Copy)]
pub struct IstioContext<'a> {
    /// `metadata.name` of the Rollout (managed-by annotation value).
    pub rollout_name: &'a str,
    /// Canary service as matched against destination hosts; already resolved for ping-pong
    /// by the caller (§5). Header/mirror routes use it too when no DestinationRule is set.
    pub canary_service: &'a str,
    /// Stable service, resolved for ping-pong like `canary_service`.
    pub stable_service: &'a str,
    /// `trafficRouting.istio.destinationRule`.
    pub destination_rule: Option<&'a IstioDestinationRule>,
    /// `trafficRouting.managedRoutes` names in order; `None` when the field is absent (Argo only
    /// re-orders routes when the field is present, even if it is an empty list).
    pub managed_routes: Option<&'a [String]>,
    /// `spec.strategy.canary.steps` (RemoveManagedRoutes removes the routes they name).
    pub steps: &'a [CanaryStep],
}

impl<'a> IstioContext<'a> {
    fn canary_subset(&self) -> &'a str {
        self.destination_rule
            .map(|d| d.canary_subset_name.as_str())
            .unwrap_or("")
    }

    fn stable_subset(&self) -> &'a str {
        self.destination_rule
            .map(|d| d.stable_subset_name.as_str())
            .unwrap_or("")
    }

    fn additional_subsets(&self) -> &'a [String] {
        self.destination_rule
            .map(|d| d.additional_subset_names.as_slice())
            .unwrap_or(&[])
    }

    fn managed(&self) -> &'a [String] {
        self.managed_routes.unwrap_or(&[])
    }
}

/// The reconciler operations, for [`virtual_service_not_found_error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IstioOperation {
    SetWeight,
    SetHeaderRoute,
    SetMirrorRoute,
    RemoveManagedRoutes,
}

/// Kubernetes event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// An event Argo records on the Rollout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IstioEvent {
    pub event_type: EventType,
    pub reason: &'static str,
    pub message: String,
}

fn normal(reason: &'static str, message: String) -> IstioEvent {
    IstioEvent {
        event_type: EventType::Normal,
        reason,
        message,
    }
}

fn warning(reason: &'static str, message: String) -> IstioEvent {
    IstioEvent {
        event_type: EventType::Warning,
        reason,
        message,
    }
}

/// After a [`set_weight`] write: ``VirtualService `<vs>` set to desiredWeight '<n>'``.
pub fn set_weight_event(vs_name: &str, desired_weight: i32) -> IstioEvent {
    normal(
        "Updated VirtualService",
        format!("VirtualService `{vs_name}` set to desiredWeight '{desired_weight}'"),
    )
}

/// After a [`set_header_route`] write.
pub fn set_header_route_event(vs_name: &str, route_name: &str) -> IstioEvent {
    normal(
        "Updated VirtualService",
        format!("VirtualService `{vs_name}` set headerRoute '{route_name}'"),
    )
}

/// After a [`set_mirror_route`] write.
pub fn set_mirror_route_event(vs_name: &str, route_name: &str) -> IstioEvent {
    normal(
        "Updated VirtualService",
        format!("VirtualService `{vs_name}` set mirrorRoute '{route_name}'"),
    )
}

/// After a [`remove_managed_routes`] write.
pub fn removed_managed_routes_event(vs_name: &str) -> IstioEvent {
    normal(
        "Updated VirtualService",
        format!("VirtualService `{vs_name}` removed all managed routes."),
    )
}

/// After an [`update_destination_rule`] write.
pub fn destination_rule_updated_event(
    dr: &IstioDestinationRule,
    canary_hash: &str,
    stable_hash: &str,
) -> IstioEvent {
    normal(
        "UpdatedDestinationRule",
        format!(
            "DestinationRule {} subset updated ({}: {}, {}: {})",
            dr.name, dr.canary_subset_name, canary_hash, dr.stable_subset_name, stable_hash
        ),
    )
}

/// Warning recorded whenever a referenced VirtualService is missing (all operations).
pub(crate) fn virtual_service_not_found_event(vs_name: &str) -> IstioEvent {
    warning(
        "VirtualServiceNotFound",
        format!("VirtualService `{vs_name}` not found"),
    )
}

/// Warning recorded whenever the DestinationRule is missing.
pub fn destination_rule_not_found_event(dr_name: &str) -> IstioEvent {
    warning(
        "DestinationRuleNotFound",
        format!("DestinationRule `{dr_name}` not found"),
    )
}

/// The API server's NotFound message for a VirtualService.
pub(crate) fn virtual_service_not_found_message(vs_name: &str) -> String {
    format!("virtualservices.networking.istio.io \"{vs_name}\" not found")
}

/// The API server's NotFound message for a DestinationRule.
pub(crate) fn destination_rule_not_found_message(dr_name: &str) -> String {
    format!("destinationrules.networking.istio.io \"{dr_name}\" not found")
}

/// The error an operation returns when a referenced VirtualService does not exist. `None` for
/// [`IstioOperation::RemoveManagedRoutes`], which skips missing VirtualServices.
pub fn virtual_service_not_found_error(
    op: IstioOperation,
    vs_name: &str,
) -> Option<TrafficRoutingError> {
    let nf = virtual_service_not_found_message(vs_name);
    match op {
        IstioOperation::SetWeight => Some(nf.into()),
        IstioOperation::SetHeaderRoute => {
            Some(format!("[SetHeaderRoute] failed to get istio virtual service: {nf}").into())
        }
        IstioOperation::SetMirrorRoute => {
            Some(format!("[SetMirrorRoute] failed to get virtual service: {nf}").into())
        }
        IstioOperation::RemoveManagedRoutes => None,
    }
}

// ---------------------------------------------------------------------------------------------
// §4 VirtualService references.

/// `GetVirtualServiceNamespaceName`: `(namespace, name)` of a `virtualService(s)[].name`
/// reference. A trailing `.cluster.local` is stripped; the last dot-separated part is the
/// namespace and the rest the name (so `test.ns.svc.cluster.local` is `svc`/`test.ns`, as in
/// Argo). Without a dot (or with an empty namespace part) the rollout namespace is used.
pub fn virtual_service_namespace_name(
    reference: &str,
    rollout_namespace: &str,
) -> (String, String) {
    let trimmed = reference
        .strip_suffix(".cluster.local")
        .unwrap_or(reference);
    match trimmed.rsplit_once('.') {
        Some((name, ns)) if !ns.is_empty() => (ns.to_string(), name.to_string()),
        Some((name, _)) => (rollout_namespace.to_string(), name.to_string()),
        None => (rollout_namespace.to_string(), trimmed.to_string()),
    }
}

fn vs_name(vs_ref: &IstioVirtualService) -> String {
    virtual_service_namespace_name(&vs_ref.name, "").1
}

// ---------------------------------------------------------------------------------------------
// Go `encoding/json` / `unstructured` emulation.
//
// Argo decodes the unstructured routes into typed structs (istio_types.go); a type mismatch
// is returned as Go's UnmarshalTypeError. Go marshals maps with sorted keys before decoding, so
// the first error is the first one in sorted key order.

#[derive(Clone, Copy)]
enum Ty {
    Str,
    I64,
    U32,
    F64,
    Any,
    Struct(&'static StructTy),
    Slice(&'static Ty),
    Map(&'static Ty),
    Ptr(&'static Ty),
}

struct StructTy {
    name: &'static str,
    pkg: &'static str,
    fields: &'static [(&'static str, Ty)],
}

impl StructTy {
    /// encoding/json field lookup: exact name, else case-insensitive.
    fn field(&self, key: &str) -> Option<(&'static str, Ty)> {
        self.fields
            .iter()
            .find(|(n, _)| *n == key)
            .or_else(|| {
                self.fields
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(key))
            })
            .copied()
    }
}

impl Ty {
    fn go_name(self) -> String {
        match self {
            Ty::Str => "string".into(),
            Ty::I64 => "int64".into(),
            Ty::U32 => "uint32".into(),
            Ty::F64 => "float64".into(),
            Ty::Any => "interface {}".into(),
            Ty::Struct(s) => format!("{}.{}", s.pkg, s.name),
            Ty::Slice(t) => format!("[]{}", t.go_name()),
            Ty::Map(t) => format!("map[string]{}", t.go_name()),
            // Decoding errors name the pointed-to type.
            Ty::Ptr(t) => t.go_name(),
        }
    }
}

static T_STR: Ty = Ty::Str;
static T_I64: Ty = Ty::I64;
static T_ANY: Ty = Ty::Any;

static STRING_MATCH: StructTy = StructTy {
    name: "StringMatch",
    pkg: "v1alpha1",
    fields: &[("exact", Ty::Str), ("prefix", Ty::Str), ("regex", Ty::Str)],
};
static T_STRING_MATCH: Ty = Ty::Struct(&STRING_MATCH);
static ROUTE_MATCH: StructTy = StructTy {
    name: "RouteMatch",
    pkg: "istio",
    fields: &[
        ("method", Ty::Ptr(&T_STRING_MATCH)),
        ("uri", Ty::Ptr(&T_STRING_MATCH)),
        ("headers", Ty::Map(&T_STRING_MATCH)),
    ],
};
static T_ROUTE_MATCH: Ty = Ty::Struct(&ROUTE_MATCH);
static PORT: StructTy = StructTy {
    name: "Port",
    pkg: "istio",
    fields: &[("number", Ty::U32)],
};
static T_PORT: Ty = Ty::Struct(&PORT);
static DESTINATION: StructTy = StructTy {
    name: "VirtualServiceDestination",
    pkg: "istio",
    fields: &[
        ("host", Ty::Str),
        ("subset", Ty::Str),
        ("port", Ty::Ptr(&T_PORT)),
    ],
};
static T_DESTINATION: Ty = Ty::Struct(&DESTINATION);
static ROUTE_DESTINATION: StructTy = StructTy {
    name: "VirtualServiceRouteDestination",
    pkg: "istio",
    fields: &[
        ("destination", Ty::Struct(&DESTINATION)),
        ("weight", Ty::I64),
    ],
};
static T_ROUTE_DESTINATION: Ty = Ty::Struct(&ROUTE_DESTINATION);
static PERCENT: StructTy = StructTy {
    name: "Percent",
    pkg: "istio",
    fields: &[("value", Ty::F64)],
};
static T_PERCENT: Ty = Ty::Struct(&PERCENT);
static HTTP_ROUTE: StructTy = StructTy {
    name: "VirtualServiceHTTPRoute",
    pkg: "istio",
    fields: &[
        ("name", Ty::Str),
        ("match", Ty::Slice(&T_ROUTE_MATCH)),
        ("route", Ty::Slice(&T_ROUTE_DESTINATION)),
        ("mirror", Ty::Ptr(&T_DESTINATION)),
        ("mirrorPercentage", Ty::Ptr(&T_PERCENT)),
    ],
};
static TLS_MATCH: StructTy = StructTy {
    name: "TLSMatchAttributes",
    pkg: "istio",
    fields: &[
        ("sniHosts", Ty::Slice(&T_STR)),
        ("destinationSubnets", Ty::Slice(&T_STR)),
        ("port", Ty::I64),
        ("sourceLabels", Ty::Map(&T_STR)),
        ("gateways", Ty::Slice(&T_STR)),
        ("sourceNamespace", Ty::Str),
    ],
};
static T_TLS_MATCH: Ty = Ty::Struct(&TLS_MATCH);
static TLS_ROUTE: StructTy = StructTy {
    name: "VirtualServiceTLSRoute",
    pkg: "istio",
    fields: &[
        ("match", Ty::Slice(&T_TLS_MATCH)),
        ("route", Ty::Slice(&T_ROUTE_DESTINATION)),
    ],
};
static L4_MATCH: StructTy = StructTy {
    name: "L4MatchAttributes",
    pkg: "istio",
    fields: &[
        ("destinationSubnets", Ty::Slice(&T_STR)),
        ("port", Ty::I64),
        ("sourceLabels", Ty::Map(&T_STR)),
        ("gateways", Ty::Slice(&T_STR)),
        ("sourceNamespace", Ty::Str),
    ],
};
static T_L4_MATCH: Ty = Ty::Struct(&L4_MATCH);
static TCP_ROUTE: StructTy = StructTy {
    name: "VirtualServiceTCPRoute",
    pkg: "istio",
    fields: &[
        ("match", Ty::Slice(&T_L4_MATCH)),
        ("route", Ty::Slice(&T_ROUTE_DESTINATION)),
    ],
};
static OBJECT_META: StructTy = StructTy {
    name: "ObjectMeta",
    pkg: "v1",
    fields: &[
        ("name", Ty::Str),
        ("generateName", Ty::Str),
        ("namespace", Ty::Str),
        ("selfLink", Ty::Str),
        ("uid", Ty::Str),
        ("resourceVersion", Ty::Str),
        ("generation", Ty::I64),
        ("creationTimestamp", Ty::Any),
        ("deletionTimestamp", Ty::Any),
        ("deletionGracePeriodSeconds", Ty::Ptr(&T_I64)),
        ("labels", Ty::Map(&T_STR)),
        ("annotations", Ty::Map(&T_STR)),
        ("ownerReferences", Ty::Any),
        ("finalizers", Ty::Slice(&T_STR)),
        ("managedFields", Ty::Any),
    ],
};
static SUBSET: StructTy = StructTy {
    name: "Subset",
    pkg: "istio",
    fields: &[
        ("name", Ty::Str),
        ("labels", Ty::Map(&T_STR)),
        ("Extra", Ty::Map(&T_ANY)),
    ],
};
static T_SUBSET: Ty = Ty::Struct(&SUBSET);
static DESTINATION_RULE_SPEC: StructTy = StructTy {
    name: "DestinationRuleSpec",
    pkg: "istio",
    fields: &[("host", Ty::Str), ("subsets", Ty::Slice(&T_SUBSET))],
};
static DESTINATION_RULE: StructTy = StructTy {
    name: "DestinationRule",
    pkg: "istio",
    fields: &[
        ("metadata", Ty::Struct(&OBJECT_META)),
        ("spec", Ty::Struct(&DESTINATION_RULE_SPEC)),
    ],
};

/// encoding/json's error context: the innermost struct and the JSON field path.
#[derive(Default)]
struct ErrCx {
    struct_name: Option<&'static str>,
    path: Vec<&'static str>,
}

impl ErrCx {
    fn err(&self, value: &str, ty: Ty) -> String {
        match self.struct_name {
            Some(s) => format!(
                "json: cannot unmarshal {value} into Go struct field {s}.{} of type {}",
                self.path.join("."),
                ty.go_name()
            ),
            None => format!(
                "json: cannot unmarshal {value} into Go value of type {}",
                ty.go_name()
            ),
        }
    }
}

/// The JSON kind word encoding/json uses in type errors.
fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn number_fits_i64(n: &Number) -> bool {
    if n.is_i64() {
        return true;
    }
    if n.is_u64() {
        return false;
    }
    n.as_f64().is_some_and(|f| {
        f.fract() == 0.0 && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f)
    })
}

fn number_fits_u32(n: &Number) -> bool {
    if let Some(u) = n.as_u64() {
        return u <= u64::from(u32::MAX);
    }
    if n.is_i64() {
        return false;
    }
    n.as_f64()
        .is_some_and(|f| f.fract() == 0.0 && (0.0..=4_294_967_295.0).contains(&f))
}

/// Go's JSON rendering of a float64 (used for `number <literal>` in type errors): plain
/// decimal below 1e21, else exponent form (`1e+21`).
fn go_json_float(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let s = format!("{f:e}");
        match s.split_once('e') {
            Some((m, e)) if !e.starts_with('-') => format!("{m}e+{e}"),
            _ => s,
        }
    } else {
        format!("{f}")
    }
}

fn go_json_number(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else if let Some(u) = n.as_u64() {
        u.to_string()
    } else {
        go_json_float(n.as_f64().unwrap_or(0.0))
    }
}

/// Type-check `v` as encoding/json would decode it into `ty`; the first error wins.
fn go_check(v: &Value, ty: Ty, cx: &mut ErrCx) -> Result<(), String> {
    if v.is_null() {
        // null leaves the target at its zero value.
        return Ok(());
    }
    match ty {
        Ty::Any => Ok(()),
        Ty::Ptr(t) => go_check(v, *t, cx),
        Ty::Str => match v {
            Value::String(_) => Ok(()),
            _ => Err(cx.err(json_kind(v), ty)),
        },
        Ty::I64 | Ty::U32 => match v {
            Value::Number(n) => {
                let fits = if matches!(ty, Ty::I64) {
                    number_fits_i64(n)
                } else {
                    number_fits_u32(n)
                };
                if fits {
                    Ok(())
                } else {
                    Err(cx.err(&format!("number {}", go_json_number(n)), ty))
                }
            }
            _ => Err(cx.err(json_kind(v), ty)),
        },
        Ty::F64 => match v {
            Value::Number(_) => Ok(()),
            _ => Err(cx.err(json_kind(v), ty)),
        },
        Ty::Struct(s) => match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                for k in keys {
                    let Some((fname, fty)) = s.field(k) else {
                        continue;
                    };
                    let saved_struct = cx.struct_name;
                    let saved_len = cx.path.len();
                    cx.path.push(fname);
                    cx.struct_name = Some(s.name);
                    let r = go_check(&m[k.as_str()], fty, cx);
                    cx.path.truncate(saved_len);
                    cx.struct_name = saved_struct;
                    r?;
                }
                Ok(())
            }
            _ => Err(cx.err(json_kind(v), ty)),
        },
        Ty::Slice(t) => match v {
            Value::Array(a) => a.iter().try_for_each(|e| go_check(e, *t, cx)),
            _ => Err(cx.err(json_kind(v), ty)),
        },
        Ty::Map(t) => match v {
            Value::Object(m) => m.values().try_for_each(|e| go_check(e, *t, cx)),
            _ => Err(cx.err(json_kind(v), ty)),
        },
    }
}

/// The value encoding/json decodes into a struct field: the last matching key in sorted order
/// (exact or case-insensitive); null counts as absent.
fn go_field<'v>(m: &'v Map<String, Value>, name: &str) -> Option<&'v Value> {
    m.iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case(name))
        .max_by(|a, b| a.0.cmp(b.0))
        .map(|(_, v)| v)
        .filter(|v| !v.is_null())
}

fn go_str(m: Option<&Map<String, Value>>, name: &str) -> String {
    m.and_then(|m| go_field(m, name))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn go_int(v: Option<&Value>) -> i64 {
    match v {
        Some(Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .unwrap_or(0),
        _ => 0,
    }
}

fn go_string_map(v: Option<&Value>) -> Option<BTreeMap<String, String>> {
    v.and_then(Value::as_object).map(|m| {
        m.iter()
            .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
            .collect()
    })
}

/// Go's `%T` of an unstructured value.
fn go_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// Go's `%v` of a float64 (`%g`, shortest digits, exponent form below 1e-4 and from 1e6).
fn go_fmt_float(f: f64) -> String {
    if f == 0.0 {
        return "0".into();
    }
    let e = format!("{f:e}");
    let (mantissa, exp) = e.split_once('e').unwrap_or((e.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..6).contains(&exp) {
        format!("{f}")
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    }
}

/// Go's `%v` of an unstructured value.
fn go_fmt_value(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => go_fmt_float(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => s.clone(),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(go_fmt_value).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k}:{}", go_fmt_value(&m[k.as_str()])))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

/// `unstructured.NestedSlice(obj, "spec", key)`: `Ok(None)` when not found, `Err` with the
/// accessor error when something on the path has the wrong type (including `null`).
fn nested_slice<'v>(obj: &'v Value, key: &str) -> Result<Option<&'v Vec<Value>>, String> {
    let Some(root) = obj.as_object() else {
        return Ok(None);
    };
    let spec = match root.get("spec") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(m)) => m,
        Some(other) => {
            return Err(format!(
                ".spec.{key} accessor error: {} is of the type {}, expected map[string]interface{{}}",
                go_fmt_value(other),
                go_type_name(other)
            ));
        }
    };
    match spec.get(key) {
        None => Ok(None),
        Some(Value::Array(a)) => Ok(Some(a)),
        Some(other) => Err(format!(
            ".spec.{key} accessor error: {} is of the type {}, expected []interface{{}}",
            go_fmt_value(other),
            go_type_name(other)
        )),
    }
}

/// `GetHttpRoutesI` & co: any failure of `NestedSlice` counts as "section not found".
fn routes_i<'v>(obj: &'v Value, key: &str) -> Option<&'v Vec<Value>> {
    nested_slice(obj, key).ok().flatten()
}

/// Replace `spec.http` in place (key position kept). Only called after it was found.
fn set_http(obj: &mut Value, routes: Vec<Value>) {
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("http".into(), Value::Array(routes));
    }
}

/// Argo writes an emptied route list as a nil slice (`http: null`), which the API server
/// prunes; the stored object then has no `spec.http`.
fn prune_empty_http(obj: &mut Value) {
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        if matches!(spec.get("http"), Some(Value::Array(a)) if a.is_empty()) {
            spec.shift_remove("http");
        }
    }
}

/// `routeMap["name"].(string)` with Go's zero value.
pub(crate) fn raw_route_name(v: &Value) -> &str {
    v.get("name").and_then(Value::as_str).unwrap_or("")
}

// ---------------------------------------------------------------------------------------------
// Typed views (istio_types.go).

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct VsDestination {
    host: String,
    subset: String,
    /// `Port *Port`: `Some(0)` for `port: {}`.
    port: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct VsRouteDestination {
    destination: VsDestination,
    /// `Weight int64`: absent → 0.
    weight: i64,
}

#[derive(Debug, Clone, Default)]
struct VsHttpRoute {
    name: String,
    route: Vec<VsRouteDestination>,
    has_mirror: bool,
}

/// A TLS or TCP route: the port of each match entry, the SNI hosts of all entries.
#[derive(Debug, Clone, Default)]
struct VsL4Route {
    match_ports: Vec<i64>,
    sni_hosts: Vec<String>,
    route: Vec<VsRouteDestination>,
}

fn decode_destination(v: Option<&Value>) -> VsDestination {
    let m = v.and_then(Value::as_object);
    VsDestination {
        host: go_str(m, "host"),
        subset: go_str(m, "subset"),
        port: m.and_then(|m| go_field(m, "port")).map(|p| {
            let n = go_int(p.as_object().and_then(|p| go_field(p, "number")));
            u32::try_from(n).unwrap_or(0)
        }),
    }
}

fn decode_route_destinations(v: Option<&Value>) -> Vec<VsRouteDestination> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|d| {
                    let m = d.as_object();
                    VsRouteDestination {
                        destination: decode_destination(m.and_then(|m| go_field(m, "destination"))),
                        weight: go_int(m.and_then(|m| go_field(m, "weight"))),
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `GetHttpRoutes`.
fn decode_http_routes(raw: &[Value]) -> Result<Vec<VsHttpRoute>, String> {
    for r in raw {
        go_check(r, Ty::Struct(&HTTP_ROUTE), &mut ErrCx::default())?;
    }
    Ok(raw
        .iter()
        .map(|r| {
            let m = r.as_object();
            VsHttpRoute {
                name: go_str(m, "name"),
                route: decode_route_destinations(m.and_then(|m| go_field(m, "route"))),
                has_mirror: m.and_then(|m| go_field(m, "mirror")).is_some(),
            }
        })
        .collect())
}

/// `GetTlsRoutes` / `GetTcpRoutes`.
fn decode_l4_routes(raw: &[Value], section: Section) -> Result<Vec<VsL4Route>, String> {
    let ty = if section == Section::Tls {
        Ty::Struct(&TLS_ROUTE)
    } else {
        Ty::Struct(&TCP_ROUTE)
    };
    for r in raw {
        go_check(r, ty, &mut ErrCx::default())?;
    }
    Ok(raw
        .iter()
        .map(|r| {
            let m = r.as_object();
            let matches: Vec<Option<&Map<String, Value>>> = m
                .and_then(|m| go_field(m, "match"))
                .and_then(Value::as_array)
                .map(|a| a.iter().map(Value::as_object).collect())
                .unwrap_or_default();
            VsL4Route {
                match_ports: matches
                    .iter()
                    .map(|e| go_int(e.and_then(|e| go_field(e, "port"))))
                    .collect(),
                sni_hosts: if section == Section::Tls {
                    matches
                        .iter()
                        .filter_map(|e| e.and_then(|e| go_field(e, "sniHosts")))
                        .filter_map(Value::as_array)
                        .flatten()
                        .map(|h| h.as_str().unwrap_or("").to_string())
                        .collect()
                } else {
                    Vec::new()
                },
                route: decode_route_destinations(m.and_then(|m| go_field(m, "route"))),
            }
        })
        .collect())
}

// ---------------------------------------------------------------------------------------------
// §3 route selection, §7 reconciler validation.

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Section {
    Http,
    Tls,
    Tcp,
}

impl Section {
    fn key(self) -> &'static str {
        match self {
            Section::Http => "http",
            Section::Tls => "tls",
            Section::Tcp => "tcp",
        }
    }
}

/// `getHttpRouteIndexesToPatch`.
fn http_route_indexes(names: &[String], routes: &[VsHttpRoute]) -> Result<Vec<usize>, String> {
    if names.is_empty() {
        // A single route is used whatever its name; otherwise the first unnamed one.
        if routes.len() == 1 {
            return Ok(vec![0]);
        }
        return Ok(routes
            .iter()
            .position(|r| r.name.is_empty())
            .into_iter()
            .collect());
    }
    names
        .iter()
        .map(|n| {
            routes.iter().position(|r| &r.name == n).ok_or_else(|| {
                format!("HTTP Route '{n}' is not found in the defined Virtual Service.")
            })
        })
        .collect()
}

/// Does a TLS/TCP route's match set select exactly one port equal to `port`?
fn single_port_is(route: &VsL4Route, port: i64) -> bool {
    let ports: BTreeSet<i64> = route.match_ports.iter().copied().collect();
    // Two different ports never match; no match entries count as port 0.
    ports.len() <= 1 && ports.iter().next().copied().unwrap_or(0) == port
}

/// `searchTlsRoute`: port plus SNI host set (`evalUtils.Equal`: sorted comparison).
fn search_tls_route(wanted: &TlsRoute, routes: &[VsL4Route]) -> Vec<usize> {
    let mut want = wanted.sni_hosts.clone();
    want.sort();
    routes
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            let have: Vec<String> = r
                .sni_hosts
                .iter()
                .cloned()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            single_port_is(r, wanted.port) && want == have
        })
        .map(|(i, _)| i)
        .collect()
}

/// `searchTcpRoute`.
fn search_tcp_route(wanted: &TcpRoute, routes: &[VsL4Route]) -> Vec<usize> {
    routes
        .iter()
        .enumerate()
        .filter(|(_, r)| single_port_is(r, wanted.port))
        .map(|(i, _)| i)
        .collect()
}

/// `getTlsRouteIndexesToPatch`.
fn tls_route_indexes(wanted: &[TlsRoute], routes: &[VsL4Route]) -> Result<Vec<usize>, String> {
    if wanted.is_empty() {
        return Ok(vec![0]);
    }
    let mut out = Vec::new();
    for w in wanted {
        let found = search_tls_route(w, routes);
        if found.is_empty() {
            return Err(NO_TLS_ROUTE.into());
        }
        out.extend(found);
    }
    Ok(out)
}

/// `getTcpRouteIndexesToPatch`.
fn tcp_route_indexes(wanted: &[TcpRoute], routes: &[VsL4Route]) -> Result<Vec<usize>, String> {
    if wanted.is_empty() {
        return Ok(vec![0]);
    }
    let mut out = Vec::new();
    for w in wanted {
        let found = search_tcp_route(w, routes);
        if found.is_empty() {
            return Err(NO_TCP_ROUTE.into());
        }
        out.extend(found);
    }
    Ok(out)
}

/// `getHost`: the host before the first ".", or "" when the host starts with ".".
fn short_host(host: &str) -> &str {
    match host.find('.') {
        Some(0) => "",
        Some(i) => &host[..i],
        None => host,
    }
}

/// `validateVirtualServiceRouteDestinations` + `validateDestinationRule`.
fn validate_destinations(dests: &[VsRouteDestination], ctx: &IstioContext) -> Result<(), String> {
    let (mut stable_svc, mut canary_svc, mut stable_subset, mut canary_subset) =
        (false, false, false, false);
    for d in dests {
        let host = short_host(&d.destination.host);
        stable_svc |= !ctx.stable_service.is_empty() && host == ctx.stable_service;
        canary_svc |= !ctx.canary_service.is_empty() && host == ctx.canary_service;
        if let Some(dr) = ctx.destination_rule {
            let subset = d.destination.subset.as_str();
            stable_subset |= !dr.stable_subset_name.is_empty() && subset == dr.stable_subset_name;
            canary_subset |= !dr.canary_subset_name.is_empty() && subset == dr.canary_subset_name;
        }
    }
    match ctx.destination_rule {
        Some(dr) if !canary_subset => Err(format!(
            "Canary DestinationRule subset '{}' not found in route",
            dr.canary_subset_name
        )),
        Some(dr) if !stable_subset => Err(format!(
            "Stable DestinationRule subset '{}' not found in route",
            dr.stable_subset_name
        )),
        Some(_) => Ok(()),
        None if !canary_svc => Err(format!(
            "Canary Service '{}' not found in route",
            ctx.canary_service
        )),
        None if !stable_svc => Err(format!(
            "Stable Service '{}' not found in route",
            ctx.stable_service
        )),
        None => Ok(()),
    }
}

/// `ValidateHTTPRoutes`.
fn validate_http_routes(
    ctx: &IstioContext,
    names: &[String],
    routes: &[VsHttpRoute],
) -> Result<(), String> {
    for i in http_route_indexes(names, routes)? {
        validate_destinations(&routes[i].route, ctx)?;
    }
    let managed = ctx.managed();
    let unmanaged = routes.iter().filter(|r| !managed.contains(&r.name)).count();
    if names.is_empty() && unmanaged > 1 {
        return Err(HTTP_AMBIGUOUS.into());
    }
    Ok(())
}

/// `ValidateTlsRoutes` / `ValidateTcpRoutes`.
fn validate_l4_routes(
    ctx: &IstioContext,
    vs_ref: &IstioVirtualService,
    section: Section,
    routes: &[VsL4Route],
) -> Result<(), String> {
    let (indexes, none_listed, ambiguous) = if section == Section::Tls {
        (
            tls_route_indexes(&vs_ref.tls_routes, routes)?,
            vs_ref.tls_routes.is_empty(),
            TLS_AMBIGUOUS,
        )
    } else {
        (
            tcp_route_indexes(&vs_ref.tcp_routes, routes)?,
            vs_ref.tcp_routes.is_empty(),
            TCP_AMBIGUOUS,
        )
    };
    for i in indexes {
        // Argo indexes without a bound check (index 0 of an empty `tls: []` panics); an
        // empty section simply has nothing to validate here.
        if let Some(r) = routes.get(i) {
            validate_destinations(&r.route, ctx)?;
        }
    }
    if none_listed && routes.len() > 1 {
        return Err(ambiguous.into());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// §2 SetWeight.

#[derive(Debug, Clone, PartialEq, Eq)]
struct Patch {
    section: Section,
    route_idx: usize,
    dest_idx: usize,
    weight: i64,
    host: String,
    delete: bool,
}

/// `processRoutes` for one selected route.
fn process_routes(
    section: Section,
    route_idx: usize,
    dests: &[VsRouteDestination],
    desired: i64,
    ctx: &IstioContext,
    additional: &[WeightDestination],
    patches: &mut Vec<Patch>,
) {
    let additional_subsets = ctx.additional_subsets();
    let (canary_subset, stable_subset) = (ctx.canary_subset(), ctx.stable_subset());
    // Service name → destination; later entries win, appends go in service-name order.
    let mut svc_to_dest: BTreeMap<&str, &WeightDestination> = BTreeMap::new();
    let mut stable_weight = 100 - desired;
    for d in additional {
        svc_to_dest.insert(d.service_name.as_str(), d);
        stable_weight -= i64::from(d.weight);
    }
    // Destinations of additional DestinationRule subsets keep their weight, taken from stable.
    for d in dests {
        if additional_subsets.contains(&d.destination.subset) {
            stable_weight -= d.weight;
        }
    }
    let stable_weight = stable_weight.max(0);
    let mut push = |dest_idx: usize, current: i64, target: i64, host: &str, delete: bool| {
        if current != target {
            patches.push(Patch {
                section,
                route_idx,
                dest_idx,
                weight: target,
                host: host.to_string(),
                delete,
            });
        }
    };
    for (idx, d) in dests.iter().enumerate() {
        let host = short_host(&d.destination.host);
        if host.is_empty() {
            continue;
        }
        let subset = d.destination.subset.as_str();
        if host == ctx.canary_service || (!subset.is_empty() && subset == canary_subset) {
            push(idx, d.weight, desired, host, false);
        } else if host == ctx.stable_service || (!subset.is_empty() && subset == stable_subset) {
            push(idx, d.weight, stable_weight, host, false);
        } else if let Some(a) = svc_to_dest.remove(host) {
            push(idx, d.weight, i64::from(a.weight), host, false);
        } else if additional_subsets.iter().any(|s| s == subset) {
            // Another rollout's / experiment's subset: left alone.
        } else {
            // Unknown destinations are removed; a zero-weight one is already "at target".
            push(idx, d.weight, 0, host, true);
        }
    }
    for (offset, a) in svc_to_dest.values().enumerate() {
        push(
            dests.len() + offset,
            0,
            i64::from(a.weight),
            &a.service_name,
            false,
        );
    }
}

fn casting_error(section: Section, field: &str, ty: &str) -> TrafficRoutingError {
    TrafficRoutingError(format!(
        "Invalid casting: field '{}{field}' is not of type '{ty}'",
        section.key()
    ))
}

/// One step of `patchVirtualService`.
fn apply_patch(obj: &mut Value, p: &Patch) -> Result<(), TrafficRoutingError> {
    let route = obj
        .get_mut("spec")
        .and_then(|s| s.get_mut(p.section.key()))
        .and_then(Value::as_array_mut)
        .and_then(|a| a.get_mut(p.route_idx))
        .and_then(Value::as_object_mut)
        .ok_or_else(|| casting_error(p.section, "[]", "map[string]interface"))?;
    let dests = route
        .get_mut("route")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| casting_error(p.section, "[].route", "[]interface"))?;
    if p.dest_idx < dests.len() {
        if !dests[p.dest_idx].is_object() {
            return Err(casting_error(
                p.section,
                "[].route[].destination",
                "map[string]interface",
            ));
        }
        if p.delete {
            dests.remove(p.dest_idx);
        } else if let Some(d) = dests[p.dest_idx].as_object_mut() {
            d.insert("weight".into(), Value::from(p.weight));
        }
    } else {
        let mut dest = Map::new();
        dest.insert("host".into(), Value::from(p.host.clone()));
        let mut entry = Map::new();
        entry.insert("destination".into(), Value::Object(dest));
        entry.insert("weight".into(), Value::from(p.weight));
        dests.push(Value::Object(entry));
    }
    Ok(())
}

/// `patchVirtualService`: weight changes and appends first, then deletions in descending index
/// order so that removing several destinations of one route does not shift the others.
fn apply_patches(obj: &mut Value, patches: &[Patch]) -> Result<(), TrafficRoutingError> {
    let mut deletions: Vec<&Patch> = Vec::new();
    for p in patches {
        if p.delete {
            deletions.push(p);
        } else {
            apply_patch(obj, p)?;
        }
    }
    let key = |p: &Patch| (p.section, p.route_idx, p.dest_idx);
    deletions.sort_by_key(|p| std::cmp::Reverse(key(p)));
    // A route selected twice yields the same deletion twice; it must happen once.
    deletions.dedup_by_key(|p| key(p));
    for p in deletions {
        apply_patch(obj, p)?;
    }
    Ok(())
}

/// §2 `SetWeight` for one VirtualService (`reconcileVirtualService` + ordering).
///
/// `vs` is the VirtualService object, `vs_ref` its entry in `virtualService(s)`. Returns
/// `Ok(None)` when no weight differs (Argo does not write), `Ok(Some(vs))` with the object to
/// write otherwise; the caller then records [`set_weight_event`]. A missing VirtualService is
/// the caller's business ([`virtual_service_not_found_error`]). With several VirtualServices
/// the caller processes them in order and stops at the first error (earlier writes stay).
pub fn set_weight(
    vs: &Value,
    vs_ref: &IstioVirtualService,
    ctx: &IstioContext,
    desired_weight: i32,
    additional: &[WeightDestination],
) -> Result<Option<Value>, TrafficRoutingError> {
    // Decode and validate each section that exists, in the order http, tls, tcp.
    let http = match routes_i(vs, Section::Http.key()) {
        Some(raw) => {
            let routes = decode_http_routes(raw)?;
            validate_http_routes(ctx, &vs_ref.routes, &routes)?;
            Some(routes)
        }
        None => None,
    };
    let mut l4 = Vec::new();
    for section in [Section::Tls, Section::Tcp] {
        if let Some(raw) = routes_i(vs, section.key()) {
            let routes = decode_l4_routes(raw, section)?;
            validate_l4_routes(ctx, vs_ref, section, &routes)?;
            l4.push((section, routes));
        }
    }

    let desired = i64::from(desired_weight);
    let mut patches = Vec::new();
    if let Some(routes) = &http {
        // Managed mirror routes follow the weight route (and are named, so the "single
        // unnamed route" inference no longer applies once one exists).
        let mut names = vs_ref.routes.clone();
        if let Some(managed) = ctx.managed_routes {
            for r in routes.iter().filter(|r| r.has_mirror) {
                names.extend(managed.iter().filter(|m| **m == r.name).cloned());
            }
        }
        for i in http_route_indexes(&names, routes).unwrap_or_default() {
            let Some(r) = routes.get(i) else { break };
            process_routes(
                Section::Http,
                i,
                &r.route,
                desired,
                ctx,
                additional,
                &mut patches,
            );
        }
    }
    for (section, routes) in &l4 {
        let indexes = if *section == Section::Tls {
            tls_route_indexes(&vs_ref.tls_routes, routes)
        } else {
            tcp_route_indexes(&vs_ref.tcp_routes, routes)
        };
        for i in indexes.unwrap_or_default() {
            let Some(r) = routes.get(i) else { break };
            process_routes(
                *section,
                i,
                &r.route,
                desired,
                ctx,
                additional,
                &mut patches,
            );
        }
    }
    if patches.is_empty() {
        return Ok(None);
    }

    let mut out = vs.clone();
    apply_patches(&mut out, &patches)?;
    match order_routes(&mut out, ctx.managed_routes) {
        Ok(()) | Err(OrderError::NotFound) => {}
        Err(OrderError::Failed(e)) => {
            return Err(format!("[SetWeight] failed to order routes: {e}").into());
        }
        Err(OrderError::Panic(p)) => return Err(p.into()),
        Err(OrderError::TooLarge) => return Err(ApiError::TooLarge.to_string().into()),
    }
    Ok(Some(out))
}

// ---------------------------------------------------------------------------------------------
// §6 managed routes.

enum OrderError {
    /// `spec.http not found`: ignored by every caller.
    NotFound,
    Failed(String),
    /// Argo panics here (recovered by the work queue); the text of the Go panic.
    Panic(String),
    /// The routes re-assembled would make an object the API server refuses: the write Argo
    /// would send next fails with etcd's error, so it is not built.
    TooLarge,
}

/// `splitManagedRoutesAndNonManagedRoutes` (after Argo's JSON round trip into
/// `[]map[string]any`, which rejects non-object entries but accepts `null`).
fn split_managed<'v>(
    managed: &[String],
    routes: &'v [Value],
) -> Result<(Vec<&'v Value>, Vec<&'v Value>), String> {
    if let Some(bad) = routes.iter().find(|r| !(r.is_object() || r.is_null())) {
        return Err(format!(
            "[splitManagedRoutesAndNonManagedRoutes] failed to unmarsharl http route interface: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            json_kind(bad)
        ));
    }
    Ok(routes
        .iter()
        .partition(|r| managed.iter().any(|m| m == raw_route_name(r))))
}

/// `orderRoutes` + `getOrderedVirtualServiceRoutes`: managed routes first, in `managedRoutes`
/// order, then the others in their order. Routes are re-assembled by name with unnamed routes
/// all equal, so N unnamed routes are each emitted N times (Argo's behaviour).
fn order_routes(obj: &mut Value, managed: Option<&[String]>) -> Result<(), OrderError> {
    let routes = match nested_slice(obj, Section::Http.key()) {
        Err(e) => {
            return Err(OrderError::Failed(format!(
                "[orderRoutes] failed to get virtual service http routes: {e}"
            )));
        }
        Ok(None) => return Err(OrderError::NotFound),
        Ok(Some(a)) => a,
    };
    let Some(managed) = managed else {
        return Ok(());
    };
    let (within, not_within) = split_managed(managed, routes).map_err(|e| {
        OrderError::Failed(format!(
            "[orderRoutes] could not split routes between managed and non managed: {e}"
        ))
    })?;
    let mut ordered: Vec<&Value> = Vec::new();
    for name in managed {
        // `route.Name == managedRoute["name"]`: only a string name can be equal.
        ordered.extend(
            within
                .iter()
                .filter(|r| r.get("name").and_then(Value::as_str) == Some(name.as_str())),
        );
    }
    ordered.extend(not_within);
    if !ordered.is_empty() && routes.iter().any(|r| !r.is_object()) {
        return Err(OrderError::Panic(
            "interface conversion: interface {} is nil, not map[string]interface {}".into(),
        ));
    }
    // Every route of a name once per wanted route of that name: N routes sharing a name
    // become N², on every write. Past what etcd stores it ends as the write would, before
    // anything is built (a controller retrying it must not pay for the object each time).
    let limit = crate::apiserver::MAX_OBJECT_BYTES;
    let mut by_name: HashMap<&str, (Vec<usize>, usize)> = HashMap::new();
    for (i, r) in routes.iter().enumerate() {
        let size = crate::apiserver::json_size_up_to(r, limit).unwrap_or(limit + 1);
        let group = by_name.entry(raw_route_name(r)).or_default();
        group.0.push(i);
        group.1 = group.1.saturating_add(size + 1);
    }
    let group = |wanted: &Value| by_name.get(raw_route_name(wanted));
    let bytes = ordered
        .iter()
        .filter_map(|w| group(w))
        .fold(0usize, |sum, g| sum.saturating_add(g.1));
    if bytes > limit {
        return Err(OrderError::TooLarge);
    }
    let mut out = Vec::new();
    for wanted in ordered {
        if let Some((indexes, _)) = group(wanted) {
            out.extend(indexes.iter().map(|&i| routes[i].clone()));
        }
    }
    set_http(obj, out);
    prune_empty_http(obj);
    Ok(())
}

/// `removeRoute`.
fn remove_route(obj: &mut Value, name: &str) -> Result<(), String> {
    let routes = match nested_slice(obj, Section::Http.key()) {
        Err(e) => {
            return Err(format!(
                "[removeRoute] failed to get http routes from virtual service: {e}"
            ));
        }
        Ok(None) => return Err(SPEC_HTTP_NOT_FOUND.into()),
        Ok(Some(a)) => a,
    };
    let mut kept = Vec::with_capacity(routes.len());
    for r in routes {
        if !r.is_object() {
            return Err(CANNOT_CAST_ROUTE.into());
        }
        if raw_route_name(r) != name {
            kept.push(r.clone());
        }
    }
    set_http(obj, kept);
    Ok(())
}

/// `getDestinationRuleHost`: "" without a destinationRule.
fn destination_rule_host(ctx: &IstioContext, dr: Option<&Value>) -> Result<String, String> {
    let Some(spec) = ctx.destination_rule else {
        return Ok(String::new());
    };
    let dr = dr.ok_or_else(|| destination_rule_not_found_message(&spec.name))?;
    Ok(decode_destination_rule(dr)?.host)
}

/// `getVirtualServiceSetWeightRoute`: destinations of the first weight route (by
/// `virtualService.routes`, without the mirror-route additions).
fn set_weight_route(
    vs_ref: &IstioVirtualService,
    routes: &[VsHttpRoute],
) -> Result<Option<Vec<VsRouteDestination>>, String> {
    let indexes = http_route_indexes(&vs_ref.routes, routes)?;
    Ok(indexes.first().map(|&i| routes[i].route.clone()))
}

/// `getVirtualServiceCanaryPort`: errors mean "no port".
fn canary_port(obj: &Value, vs_ref: &IstioVirtualService) -> u32 {
    routes_i(obj, Section::Http.key())
        .and_then(|raw| decode_http_routes(raw).ok())
        .and_then(|routes| set_weight_route(vs_ref, &routes).ok().flatten())
        .and_then(|route| route.first().and_then(|d| d.destination.port))
        .unwrap_or(0)
}

/// `createHeaderRoute`.
fn header_route_json(step: &SetHeaderRoute, host: &str, port: u32, subset: &str) -> Value {
    let matches: Vec<Value> = step
        .matches
        .iter()
        .flatten()
        .map(|hm| {
            let value = hm
                .header_value
                .as_ref()
                .map(|sm| sm.to_go_json())
                .unwrap_or_else(|| Value::Object(Map::new()));
            let mut headers = Map::new();
            headers.insert(hm.header_name.clone(), value);
            let mut m = Map::new();
            m.insert("headers".into(), Value::Object(headers));
            Value::Object(m)
        })
        .collect();
    let mut route = Map::new();
    route.insert("name".into(), Value::from(step.name.clone()));
    route.insert("match".into(), Value::Array(matches));
    route.insert(
        "route".into(),
        Value::Array(vec![route_destination_json(host, port, subset, 100)]),
    );
    Value::Object(route)
}

/// `routeDestination`.
fn route_destination_json(host: &str, port: u32, subset: &str, weight: i64) -> Value {
    let mut dest = Map::new();
    dest.insert("host".into(), Value::from(host));
    if port > 0 {
        let mut p = Map::new();
        p.insert("number".into(), Value::from(port));
        dest.insert("port".into(), Value::Object(p));
    }
    if !subset.is_empty() {
        dest.insert("subset".into(), Value::from(subset));
    }
    let mut m = Map::new();
    m.insert("destination".into(), Value::Object(dest));
    m.insert("weight".into(), Value::from(weight));
    Value::Object(m)
}

/// `json.Marshal(VirtualServiceDestination)` (all fields `omitempty`).
fn typed_destination_json(d: &VsDestination) -> Value {
    let mut m = Map::new();
    if !d.host.is_empty() {
        m.insert("host".into(), Value::from(d.host.clone()));
    }
    if !d.subset.is_empty() {
        m.insert("subset".into(), Value::from(d.subset.clone()));
    }
    if let Some(n) = d.port {
        let mut p = Map::new();
        if n != 0 {
            p.insert("number".into(), Value::from(n));
        }
        m.insert("port".into(), Value::Object(p));
    }
    Value::Object(m)
}

/// `json.Marshal(VirtualServiceRouteDestination)`: a zero weight is dropped, as are
/// per-destination fields the typed struct does not know (e.g. `headers`).
fn typed_route_destination_json(d: &VsRouteDestination) -> Value {
    let mut m = Map::new();
    m.insert("destination".into(), typed_destination_json(&d.destination));
    if d.weight != 0 {
        m.insert("weight".into(), Value::from(d.weight));
    }
    Value::Object(m)
}

/// `json.Marshal(RouteMatch)` from a step's match (`path` becomes `uri`).
fn route_match_json(rm: &RouteMatch) -> Value {
    let mut m = Map::new();
    if let Some(sm) = &rm.method {
        m.insert("method".into(), sm.to_go_json());
    }
    if let Some(sm) = &rm.path {
        m.insert("uri".into(), sm.to_go_json());
    }
    if let Some(headers) = rm.headers.as_ref().filter(|h| !h.is_empty()) {
        let h: Map<String, Value> = headers
            .iter()
            .map(|(k, sm)| (k.clone(), sm.to_go_json()))
            .collect();
        m.insert("headers".into(), Value::Object(h));
    }
    Value::Object(m)
}

/// `createMirrorRoute`.
fn mirror_route_json(
    step: &SetMirrorRoute,
    weight_route: Option<&[VsRouteDestination]>,
    host: &str,
    subset: &str,
) -> Value {
    let mut route = Map::new();
    route.insert("name".into(), Value::from(step.name.clone()));
    route.insert(
        "match".into(),
        Value::Array(
            step.matches
                .iter()
                .flatten()
                .map(route_match_json)
                .collect(),
        ),
    );
    // No weight route: Argo writes `route: null`, which the API server prunes.
    if let Some(dests) = weight_route {
        route.insert(
            "route".into(),
            Value::Array(dests.iter().map(typed_route_destination_json).collect()),
        );
    }
    let mirror = VsDestination {
        host: host.to_string(),
        subset: subset.to_string(),
        port: weight_route
            .and_then(|d| d.first())
            .and_then(|d| d.destination.port),
    };
    route.insert("mirror".into(), typed_destination_json(&mirror));
    let mut pct = Map::new();
    pct.insert("value".into(), Value::from(step.percentage.unwrap_or(100)));
    route.insert("mirrorPercentage".into(), Value::Object(pct));
    Value::Object(route)
}

/// Header/mirror destination: the DestinationRule host (with the canary subset) when a
/// destinationRule is configured and its host is set, else the canary service.
fn canary_target<'h>(ctx: &IstioContext<'h>, dr_host: &'h str) -> &'h str {
    if dr_host.is_empty() {
        ctx.canary_service
    } else {
        dr_host
    }
}

/// §6 `SetHeaderRoute` for one VirtualService. Always returns the object to write (Argo
/// writes even when nothing changed); the caller records [`set_header_route_event`].
///
/// `dr` is the DestinationRule object when `ctx.destination_rule` is set (`None` = not found).
/// A step without `match` removes the route. The model cannot tell `match: []` from an absent
/// `match`; both are treated as "remove".
pub fn set_header_route(
    vs: &Value,
    vs_ref: &IstioVirtualService,
    ctx: &IstioContext,
    step: &SetHeaderRoute,
    dr: Option<&Value>,
) -> Result<Value, TrafficRoutingError> {
    let wrap = |e: String| {
        TrafficRoutingError(format!(
            "[SetHeaderRoute] failed to reconcile header routes: {e}"
        ))
    };
    let dr_host = destination_rule_host(ctx, dr).map_err(wrap)?;
    let mut out = vs.clone();
    if step.matches.is_none() {
        remove_route(&mut out, &step.name).map_err(|e| {
            wrap(format!(
                "[reconcileVirtualServiceHeaderRoutes] failed to remove route from virtual service: {e}"
            ))
        })?;
    } else {
        remove_route(&mut out, &step.name).map_err(|e| {
            wrap(format!(
                "[reconcileVirtualServiceHeaderRoutes] failed to remove http route from virtual service: {e}"
            ))
        })?;
        let port = canary_port(&out, vs_ref);
        let route = header_route_json(
            step,
            canary_target(ctx, &dr_host),
            port,
            ctx.canary_subset(),
        );
        if let Some(http) = out
            .get_mut("spec")
            .and_then(|s| s.get_mut("http"))
            .and_then(Value::as_array_mut)
        {
            http.push(route);
        }
    }
    match order_routes(&mut out, ctx.managed_routes) {
        Ok(()) | Err(OrderError::NotFound) => {}
        Err(OrderError::Failed(e)) => {
            return Err(format!("[SetHeaderRoute] failed to order routes: {e}").into());
        }
        Err(OrderError::Panic(p)) => return Err(p.into()),
        Err(OrderError::TooLarge) => return Err(ApiError::TooLarge.to_string().into()),
    }
    prune_empty_http(&mut out);
    Ok(out)
}

/// §6 `SetMirrorRoute` for one VirtualService. Always returns the object to write; the caller
/// records [`set_mirror_route_event`]. The new route is prepended; its `route` is the weight
/// route's destinations re-serialised through Argo's typed struct (zero weights and unknown
/// per-destination keys dropped). `dr` as for [`set_header_route`].
pub fn set_mirror_route(
    vs: &Value,
    vs_ref: &IstioVirtualService,
    ctx: &IstioContext,
    step: &SetMirrorRoute,
    dr: Option<&Value>,
) -> Result<Value, TrafficRoutingError> {
    let wrap = |e: String| {
        TrafficRoutingError(format!(
            "[SetMirrorRoute] failed reconcile virtual service for mirror routes: [reconcileVirtualServiceMirrorRoutes] {e}"
        ))
    };
    let dr_host = destination_rule_host(ctx, dr)
        .map_err(|e| wrap(format!("failed to get destination rule host: {e}")))?;
    let mut out = vs.clone();
    if step.matches.is_none() {
        remove_route(&mut out, &step.name)
            .map_err(|e| wrap(format!("failed to remove route from virtual service: {e}")))?;
    } else {
        remove_route(&mut out, &step.name).map_err(|e| {
            wrap(format!(
                "failed to remove http route from virtual service: {e}"
            ))
        })?;
        let routes = match routes_i(&out, Section::Http.key()) {
            Some(raw) => decode_http_routes(raw).map_err(|e| {
                wrap(format!(
                    "failed to get virtual service http routes: [getVirtualServiceHttpRoutes] failed to get http route types: {e}"
                ))
            })?,
            None => {
                return Err(wrap(format!(
                    "failed to get virtual service http routes: [getVirtualServiceHttpRoutes] failed to get http route interfaces: {SPEC_HTTP_NOT_FOUND}"
                )))
            }
        };
        let weight_route = set_weight_route(vs_ref, &routes).map_err(|e| {
            wrap(format!(
                "failed to create mirror route: [createMirrorRoute] failed to get virtual service http route for keeping non-mirror weights set: [getVirtualServiceSetWeightRoute] failed to get routes that need to be patch when set weight is called: {e}"
            ))
        })?;
        let route = mirror_route_json(
            step,
            weight_route.as_deref(),
            canary_target(ctx, &dr_host),
            ctx.canary_subset(),
        );
        if let Some(http) = out
            .get_mut("spec")
            .and_then(|s| s.get_mut("http"))
            .and_then(Value::as_array_mut)
        {
            http.insert(0, route);
        }
    }
    match order_routes(&mut out, ctx.managed_routes) {
        Ok(()) | Err(OrderError::NotFound) => {}
        Err(OrderError::Failed(e)) => {
            return Err(format!(
                "[SetMirrorRoute] failed to order routes based on managedRoute order: {e}"
            )
            .into());
        }
        Err(OrderError::Panic(p)) => return Err(p.into()),
        Err(OrderError::TooLarge) => return Err(ApiError::TooLarge.to_string().into()),
    }
    prune_empty_http(&mut out);
    Ok(out)
}

/// Result of [`remove_managed_routes`] for one VirtualService.
#[derive(Debug, Clone, PartialEq)]
pub enum RemoveOutcome {
    /// Nothing to write.
    Unchanged,
    /// Write this object and record [`removed_managed_routes_event`].
    Write(Value),
    /// The VirtualService has no `spec.http`: Argo returns from `RemoveManagedRoutes` here, so
    /// the VirtualServices after this one are not processed.
    StopNoHttp,
}

/// §6 `RemoveManagedRoutes` for one VirtualService (a missing one is skipped by the caller).
/// Removes the routes named by any step's setHeaderRoute/setMirrorRoute, then every route named
/// in `managedRoutes`. It writes when the rollout has such steps (even if nothing was removed,
/// unless an http entry is not an object, which makes that removal fail silently) or when a
/// managed route was removed.
pub fn remove_managed_routes(
    vs: &Value,
    ctx: &IstioContext,
) -> Result<RemoveOutcome, TrafficRoutingError> {
    match nested_slice(vs, Section::Http.key()) {
        Err(e) => {
            return Err(format!(
                "[RemoveManagedRoutes] failed to get http routes from virtual service: {e}"
            )
            .into());
        }
        Ok(None) => return Ok(RemoveOutcome::StopNoHttp),
        Ok(Some(_)) => {}
    }
    let step_routes: Vec<&str> = ctx
        .steps
        .iter()
        .flat_map(|s| {
            let header = s.set_header_route.as_ref().map(|h| h.name.as_str());
            let mirror = s.set_mirror_route.as_ref().map(|m| m.name.as_str());
            header.into_iter().chain(mirror)
        })
        .collect();
    let mut out = vs.clone();
    let mut modified = false;
    if !step_routes.is_empty() {
        let mut candidate = out.clone();
        if step_routes
            .iter()
            .all(|name| remove_route(&mut candidate, name).is_ok())
        {
            out = candidate;
            modified = true;
        }
    }
    if let Some(managed) = ctx.managed_routes.filter(|m| !m.is_empty()) {
        let routes = routes_i(&out, Section::Http.key())
            .cloned()
            .unwrap_or_default();
        let (within, not_within) = split_managed(managed, &routes).map_err(|e| {
            TrafficRoutingError(format!(
                "[RemoveManagedRoutes] failed to split managed and non-managed routes: {e}"
            ))
        })?;
        if !within.is_empty() {
            let kept = not_within.into_iter().cloned().collect();
            set_http(&mut out, kept);
            modified = true;
        }
    }
    if !modified {
        return Ok(RemoveOutcome::Unchanged);
    }
    prune_empty_http(&mut out);
    Ok(RemoveOutcome::Write(out))
}

// ---------------------------------------------------------------------------------------------
// §8 DestinationRule.

/// A ReplicaSet of the rollout, for the "delaying destination rule switch" check.
#[derive(Debug, Clone, Copy)]
pub struct ReplicaSetAvailability<'a> {
    pub name: &'a str,
    /// Its `rollouts-pod-template-hash`.
    pub pod_template_hash: &'a str,
    /// `spec.replicas` (nil counts as 0 here: such a ReplicaSet is never checked).
    pub spec_replicas: i32,
    /// `status.availableReplicas`.
    pub available_replicas: i32,
}

/// Inputs of the §8 delay check.
#[derive(Debug, Clone, Copy)]
pub struct DestinationRuleDelayCheck<'a> {
    /// `spec.strategy.canary.canaryService` or `stableService` is set (ping-pong names do not
    /// count). The check only runs when this is false.
    pub services_in_spec: bool,
    /// Do not check the canary ReplicaSet (aborted, or dynamically rolling back).
    pub skip_canary: bool,
    /// The rollout's ReplicaSets.
    pub replica_sets: &'a [ReplicaSetAvailability<'a>],
}

impl DestinationRuleDelayCheck<'_> {
    /// No delay check (e.g. canary/stable services are set).
    pub const DISABLED: DestinationRuleDelayCheck<'static> = DestinationRuleDelayCheck {
        services_in_spec: true,
        skip_canary: false,
        replica_sets: &[],
    };
}

struct TypedSubset<'v> {
    name: String,
    /// `nil` vs empty matters for Argo's comparison.
    labels: Option<BTreeMap<String, String>>,
    raw: Option<&'v Map<String, Value>>,
}

impl TypedSubset<'_> {
    /// Keys other than name/labels (`Subset.Extra`, matched case-insensitively by mapstructure).
    fn extra(&self) -> Map<String, Value> {
        self.raw
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| {
                        !k.eq_ignore_ascii_case("name") && !k.eq_ignore_ascii_case("labels")
                    })
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }
}

struct TypedDestinationRule<'v> {
    annotations: Option<BTreeMap<String, String>>,
    host: String,
    subsets: Vec<TypedSubset<'v>>,
}

/// `unstructuredToDestinationRules`.
fn decode_destination_rule(dr: &Value) -> Result<TypedDestinationRule<'_>, String> {
    go_check(dr, Ty::Struct(&DESTINATION_RULE), &mut ErrCx::default())?;
    let root = dr.as_object();
    let meta = root
        .and_then(|m| go_field(m, "metadata"))
        .and_then(Value::as_object);
    let spec = root
        .and_then(|m| go_field(m, "spec"))
        .and_then(Value::as_object);
    // unMarshalSubsets reads `spec.subsets` by exact key.
    let raw_subsets = dr
        .get("spec")
        .and_then(|s| s.get("subsets"))
        .and_then(Value::as_array);
    Ok(TypedDestinationRule {
        annotations: go_string_map(meta.and_then(|m| go_field(m, "annotations"))),
        host: go_str(spec, "host"),
        subsets: raw_subsets
            .map(|a| {
                a.iter()
                    .map(|s| {
                        let m = s.as_object();
                        TypedSubset {
                            name: go_str(m, "name"),
                            labels: go_string_map(m.and_then(|m| go_field(m, "labels"))),
                            raw: m,
                        }
                    })
                    .collect()
            })
            .unwrap_or_default(),
    })
}

struct NewSubset<'s, 'v> {
    source: Option<&'s TypedSubset<'v>>,
    name: String,
    labels: Option<BTreeMap<String, String>>,
}

fn labels_json(labels: &Option<BTreeMap<String, String>>) -> Value {
    match labels {
        Some(l) => Value::Object(
            l.iter()
                .map(|(k, v)| (k.clone(), Value::from(v.clone())))
                .collect(),
        ),
        None => Value::Null,
    }
}

fn set_hash(labels: &mut BTreeMap<String, String>, hash: &str) {
    if hash.is_empty() {
        labels.remove(HASH_LABEL);
    } else {
        labels.insert(HASH_LABEL.into(), hash.into());
    }
}

/// The subset as written: the original object (key order kept) with its labels updated.
fn output_subset(ns: &NewSubset) -> Value {
    let Some(raw) = ns.source.and_then(|s| s.raw) else {
        let mut m = Map::new();
        m.insert("name".into(), Value::from(ns.name.clone()));
        m.insert("labels".into(), labels_json(&ns.labels));
        return Value::Object(m);
    };
    let mut m = raw.clone();
    if !m.contains_key("name") {
        m.insert("name".into(), Value::from(ns.name.clone()));
    }
    let labels = match &ns.labels {
        None => Value::Null,
        Some(new) => {
            // Keep the user's label order; only the hash label changes.
            let mut l = m
                .get("labels")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            match new.get(HASH_LABEL) {
                Some(h) => {
                    l.insert(HASH_LABEL.into(), Value::from(h.clone()));
                }
                None => {
                    l.shift_remove(HASH_LABEL);
                }
            }
            Value::Object(l)
        }
    };
    m.insert("labels".into(), labels);
    Value::Object(m)
}

/// Argo's delay before switching the subsets: the ReplicaSets they will select (the stable
/// one, and the canary unless aborted) must be fully available.
fn check_switch_delay(
    delay: &DestinationRuleDelayCheck,
    canary_hash: &str,
    stable_hash: &str,
) -> Result<(), TrafficRoutingError> {
    for rs in delay.replica_sets {
        let target = rs.pod_template_hash == stable_hash
            || (!delay.skip_canary && rs.pod_template_hash == canary_hash);
        if rs.spec_replicas <= 0 || !target {
            continue;
        }
        let available = rs.available_replicas != 0 && rs.spec_replicas <= rs.available_replicas;
        if !available {
            return Err(format!(
                "delaying destination rule switch: ReplicaSet {} not fully available",
                rs.name
            )
            .into());
        }
    }
    Ok(())
}

/// The subsets as Argo's `UpdateHash` rewrites them: canary and stable select their hashes,
/// additional destinations (experiments) theirs, others are dropped from the comparison.
fn subsets_for<'t, 'v>(
    typed: &'t TypedDestinationRule<'v>,
    spec: &IstioDestinationRule,
    canary_hash: &str,
    stable_hash: &str,
    additional: &[WeightDestination],
) -> Vec<NewSubset<'t, 'v>> {
    // Service name → additional destination (later entries win), in first-seen order.
    let mut pending: Vec<&WeightDestination> = Vec::new();
    for d in additional {
        match pending
            .iter_mut()
            .find(|p| p.service_name == d.service_name)
        {
            Some(p) => *p = d,
            None => pending.push(d),
        }
    }
    let mut new_subsets: Vec<NewSubset> = Vec::new();
    for s in &typed.subsets {
        let mut labels = s.labels.clone();
        if s.name == spec.canary_subset_name {
            set_hash(labels.get_or_insert_with(BTreeMap::new), canary_hash);
        } else if s.name == spec.stable_subset_name {
            set_hash(labels.get_or_insert_with(BTreeMap::new), stable_hash);
        } else if let Some(pos) = pending.iter().position(|d| d.service_name == s.name) {
            let d = pending[pos];
            if d.pod_template_hash.is_empty() {
                // Removed, and (as in Argo) the destination is also appended again below.
                if let Some(l) = labels.as_mut() {
                    l.remove(HASH_LABEL);
                }
            } else {
                set_hash(
                    labels.get_or_insert_with(BTreeMap::new),
                    &d.pod_template_hash,
                );
                pending.remove(pos);
            }
        } else {
            continue;
        }
        new_subsets.push(NewSubset {
            source: Some(s),
            name: s.name.clone(),
            labels,
        });
    }
    for d in pending {
        let mut labels = BTreeMap::new();
        labels.insert(HASH_LABEL.to_string(), d.pod_template_hash.clone());
        new_subsets.push(NewSubset {
            source: None,
            name: d.service_name.clone(),
            labels: Some(labels),
        });
    }

    new_subsets
}

/// Whether the rewritten subsets differ from the old ones, compared as Argo compares them:
/// json.Marshal of the typed old object (omitempty; unknown subset keys under "Extra")
/// versus destinationRuleReplaceExtraMarshal of the new one.
fn subsets_differ(typed: &TypedDestinationRule, new_subsets: &[NewSubset]) -> bool {
    let old_subsets: Vec<Value> = typed
        .subsets
        .iter()
        .map(|s| {
            let mut m = Map::new();
            if !s.name.is_empty() {
                m.insert("name".into(), Value::from(s.name.clone()));
            }
            if s.labels.as_ref().is_some_and(|l| !l.is_empty()) {
                m.insert("labels".into(), labels_json(&s.labels));
            }
            let extra = s.extra();
            if !extra.is_empty() {
                m.insert("Extra".into(), Value::Object(extra));
            }
            Value::Object(m)
        })
        .collect();
    let new_subsets_go: Vec<Value> = new_subsets
        .iter()
        .map(|ns| {
            let mut m = ns.source.map(TypedSubset::extra).unwrap_or_default();
            m.insert("name".into(), Value::from(ns.name.clone()));
            m.insert("labels".into(), labels_json(&ns.labels));
            Value::Object(m)
        })
        .collect();
    old_subsets.is_empty() || old_subsets != new_subsets_go
}

/// §8 `UpdateHash` for the rollout's DestinationRule.
///
/// `dr` is the DestinationRule object (`None` = not found). Returns `Ok(None)` without a
/// destinationRule or when Argo's merge patch is empty, else the object to write (record
/// [`destination_rule_updated_event`]). Argo compares its typed view of the old object with
/// the new one, so a DestinationRule without `spec.host`, or with a kept subset carrying
/// fields besides name/labels (e.g. `trafficPolicy`), is rewritten on every call, as in Argo.
/// Subsets other than canary, stable and the additional destinations' are dropped; additional
/// destinations without a subset get one appended (in `additional` order; Argo uses Go map
/// order).
pub fn update_destination_rule(
    dr: Option<&Value>,
    ctx: &IstioContext,
    canary_hash: &str,
    stable_hash: &str,
    additional: &[WeightDestination],
    delay: &DestinationRuleDelayCheck,
) -> Result<Option<Value>, TrafficRoutingError> {
    let Some(spec) = ctx.destination_rule else {
        return Ok(None);
    };
    if !delay.services_in_spec {
        check_switch_delay(delay, canary_hash, stable_hash)?;
    }
    let Some(dr) = dr else {
        return Err(destination_rule_not_found_message(&spec.name).into());
    };
    let typed = decode_destination_rule(dr)?;

    let mut new_annotations = typed.annotations.clone().unwrap_or_default();
    new_annotations.insert(MANAGED_BY.into(), ctx.rollout_name.into());
    let annotations_changed = typed.annotations.as_ref() != Some(&new_annotations);

    let new_subsets = subsets_for(&typed, spec, canary_hash, stable_hash, additional);

    let subsets_changed = subsets_differ(&typed, &new_subsets);
    let host_changed = typed.host.is_empty();
    if !annotations_changed && !host_changed && !subsets_changed {
        return Ok(None);
    }

    // Apply the merge patch to the original object.
    let mut out = dr.clone();
    let Some(root) = out.as_object_mut() else {
        return Ok(None);
    };
    if annotations_changed {
        let meta = root
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if !meta.is_object() {
            *meta = Value::Object(Map::new());
        }
        if let Some(meta) = meta.as_object_mut() {
            let ann = meta
                .entry("annotations")
                .or_insert_with(|| Value::Object(Map::new()));
            if !ann.is_object() {
                *ann = Value::Object(Map::new());
            }
            if let Some(ann) = ann.as_object_mut() {
                ann.insert(MANAGED_BY.into(), Value::from(ctx.rollout_name));
            }
        }
    }
    if host_changed || subsets_changed {
        let spec_v = root
            .entry("spec")
            .or_insert_with(|| Value::Object(Map::new()));
        if !spec_v.is_object() {
            *spec_v = Value::Object(Map::new());
        }
        if let Some(spec_m) = spec_v.as_object_mut() {
            if host_changed {
                spec_m.insert("host".into(), Value::from(""));
            }
            if subsets_changed {
                spec_m.insert(
                    "subsets".into(),
                    Value::Array(new_subsets.iter().map(output_subset).collect()),
                );
            }
        }
    }
    Ok(Some(out))
}

// ---------------------------------------------------------------------------------------------
// §7 referenced-resource validation.

/// `field.Invalid(path, value, detail).Error()`.
fn field_invalid(field: &str, value: &str, detail: &str) -> String {
    format!(
        "{field}: Invalid value: {}: {detail}",
        crate::go::quote(value)
    )
}

/// §7 `ValidateVirtualService` for one referenced VirtualService (`vs` = `None` when it does
/// not exist). `field` is the field path, e.g. `IstioTrafficRouting::virtual_service_field()`.
/// Returns the first field error (the caller wraps it as `The Rollout "<name>" is invalid:
/// <error>`).
pub fn validate_virtual_service(
    vs: Option<&Value>,
    vs_ref: &IstioVirtualService,
    field: &str,
    ctx: &IstioContext,
) -> Result<(), String> {
    let name = vs_name(vs_ref);
    let invalid = |detail: &str| field_invalid(field, &name, detail);
    let Some(vs) = vs else {
        return Err(invalid(&virtual_service_not_found_message(&name)));
    };
    let http = routes_i(vs, Section::Http.key());
    let tls = routes_i(vs, Section::Tls.key());
    let tcp = routes_i(vs, Section::Tcp.key());
    if http.is_none() && tls.is_none() && tcp.is_none() {
        return Err(invalid(
            "Unable to get any of the HTTP, TCP or TLS routes for the Istio VirtualService",
        ));
    }
    if let Some(raw) = http {
        let routes = decode_http_routes(raw)
            .map_err(|_| invalid("Unable to get HTTP routes for Istio VirtualService"))?;
        validate_http_routes(ctx, &vs_ref.routes, &routes).map_err(|e| {
            invalid(&format!(
                "Istio VirtualService has invalid HTTP routes. Error: {e}"
            ))
        })?;
    }
    for (section, raw, label) in [(Section::Tls, tls, "TLS"), (Section::Tcp, tcp, "TCP")] {
        let Some(raw) = raw else { continue };
        let routes = decode_l4_routes(raw, section).map_err(|_| {
            invalid(&format!(
                "Unable to get {label} routes for Istio VirtualService"
            ))
        })?;
        validate_l4_routes(ctx, vs_ref, section, &routes).map_err(|e| {
            invalid(&format!(
                "Istio VirtualService has invalid {label} routes. Error: {e}"
            ))
        })?;
    }
    Ok(())
}

/// §7 `ValidateRolloutVirtualServicesConfig`: exactly one of `virtualService` /
/// `virtualServices`.
pub fn validate_virtual_services_config(istio: &IstioTrafficRouting) -> Result<(), String> {
    if istio.virtual_service.is_some() == istio.virtual_services.is_some() {
        return Err("spec.strategy.canary.trafficRouting.istio: Internal error: either VirtualService or VirtualServices must be configured".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
