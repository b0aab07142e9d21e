//! The Gateway API traffic router plugin (`argoproj-labs/rollouts-plugin-trafficrouter-gatewayapi`)
//! for HTTPRoutes: a pure port of what it writes. The rollout reconciler reads the routes,
//! calls these functions and writes what they return, as Argo's controller calls the plugin
//! over RPC and the plugin updates the routes.
//!
//! What mirrors what (paths in the plugin's repository):
//! * [`PluginConfig::of`] — `pkg/plugin/plugin.go`: `getGatewayAPITrafficRoutingConfig`,
//!   `insertGatewayAPIRouteLists` (a lone `httpRoute` takes header routes; `httpRoutes`
//!   entries only with `useHeaderRoutes`), the namespace defaulting to the Rollout's;
//! * [`set_weight`] — `httproute.go`: `setHTTPRouteWeight` (every backendRef naming the
//!   canary or the stable Service, in every rule but the plugin's own header rules, gets the
//!   weight or 100 − weight; both must be found), the same in `grpcroute.go`, and in
//!   `tcproute.go` and `tlsroute.go` (no header rules to skip), and `labels.go`:
//!   `ensureInProgressLabel`;
//! * [`set_header_route`] — `setHTTPHeaderRoute`: one rule per rule that forwards to both
//!   Services, named after the step (`name`, `name-1`, …), its matches merged with the
//!   step's headers, forwarding to the canary only, appended after the others;
//! * [`remove_managed_routes`] — `removeHTTPManagedRoutes`.
//!
//! Routes are `serde_json::Value`s: the plugin's typed client would drop fields its
//! types do not know, but the API server has pruned those already, so every field written
//! survives here.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::model::rollout::{SetHeaderRoute, StringMatch};

pub use crate::model::gateway_api::PLUGIN;

/// `GatewayAPIManifestError`.
pub const NO_ROUTES: &str = "No routes configured. At least one of 'httpRoutes', 'grpcRoutes', 'tcpRoutes', 'tlsRoutes', 'httpRoute', 'grpcRoute', 'tcpRoute' or 'tlsRoute' must be set";
/// `BackendRefWasNotFoundInHTTPRouteError`.
pub const BACKEND_REF_NOT_FOUND: &str = "backendRef was not found in httpRoute";
/// `InvalidHeaderMatchTypeError`.
const INVALID_HEADER_MATCH_TYPE: &str = "invalid header match type";

/// `internal/defaults`: the label marking a route while a canary runs.
const IN_PROGRESS_LABEL: (&str, &str) = ("rollouts.argoproj.io/gatewayapi-canary", "in-progress");

/// The route kinds the plugin manages, in the order it visits them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RouteKind {
    Http,
    Grpc,
    Tcp,
    Tls,
}

impl RouteKind {
    pub const ALL: [RouteKind; 4] = [
        RouteKind::Http,
        RouteKind::Grpc,
        RouteKind::Tcp,
        RouteKind::Tls,
    ];

    /// The Gateway API kind: `HTTPRoute`, `GRPCRoute`, `TCPRoute`, `TLSRoute`.
    pub fn kind(self) -> &'static str {
        match self {
            RouteKind::Http => "HTTPRoute",
            RouteKind::Grpc => "GRPCRoute",
            RouteKind::Tcp => "TCPRoute",
            RouteKind::Tls => "TLSRoute",
        }
    }

    /// The configuration's prefix: `httpRoute`, `httpRoutes`, `httpRouteSelector`.
    pub fn field(self) -> &'static str {
        match self {
            RouteKind::Http => "http",
            RouteKind::Grpc => "grpc",
            RouteKind::Tcp => "tcp",
            RouteKind::Tls => "tls",
        }
    }

    /// Whether its rules take header routes (and so skip the plugin's own rules).
    pub fn takes_header_routes(self) -> bool {
        matches!(self, RouteKind::Http | RouteKind::Grpc)
    }

    /// The plugin's error when a Service is not among the backends (`errors.go`; the
    /// TCP and TLS rule lists answer with their own).
    pub fn not_found(self) -> &'static str {
        match self {
            RouteKind::Http => BACKEND_REF_NOT_FOUND,
            RouteKind::Grpc => "backendRef was not found in grpcRoute",
            RouteKind::Tcp => "backendRef list was not found in tcpRoute",
            RouteKind::Tls => "backendRef list was not found in tlsRoute",
        }
    }
}

/// One route the plugin manages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedRoute {
    pub kind: RouteKind,
    pub name: String,
    /// Whether `setHeaderRoute` steps add their rules to it (HTTP and gRPC routes).
    pub use_header_routes: bool,
}

/// The plugin's configuration, as it reads it from the Rollout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginConfig {
    /// The routes' namespace: the configured one, else the Rollout's.
    pub namespace: String,
    /// The routes named, by kind in the plugin's order (each kind's list, then its single
    /// route, as `insertGatewayAPIRouteLists` appends it).
    pub routes: Vec<ManagedRoute>,
    /// `<kind>RouteSelector.matchLabels`: more routes of that kind, found by label in the
    /// namespace (without header routes).
    pub selectors: Vec<(RouteKind, BTreeMap<String, String>)>,
    /// None: `disableInProgressLabel`.
    pub in_progress_label: Option<(String, String)>,
}

impl PluginConfig {
    /// The plugin's configuration from `trafficRouting.plugins`; None when the plugin is
    /// not configured.
    pub fn of(plugins: Option<&Value>, rollout_namespace: &str) -> Option<PluginConfig> {
        let config = plugins?.get(PLUGIN)?;
        let text = |key: &str| config[key].as_str().filter(|s| !s.is_empty());
        let mut routes = Vec::new();
        let mut selectors = Vec::new();
        for kind in RouteKind::ALL {
            let field = kind.field();
            for r in config[format!("{field}Routes")]
                .as_array()
                .into_iter()
                .flatten()
            {
                if let Some(name) = r["name"].as_str() {
                    routes.push(ManagedRoute {
                        kind,
                        name: name.to_string(),
                        use_header_routes: r["useHeaderRoutes"].as_bool().unwrap_or(false),
                    });
                }
            }
            if let Some(name) = text(&format!("{field}Route")) {
                routes.push(ManagedRoute {
                    kind,
                    name: name.to_string(),
                    use_header_routes: true,
                });
            }
            if let Some(selector) = config[format!("{field}RouteSelector")].as_object() {
                let labels = selector
                    .get("matchLabels")
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect();
                selectors.push((kind, labels));
            }
        }
        let in_progress_label = (!config["disableInProgressLabel"].as_bool().unwrap_or(false))
            .then(|| {
                (
                    text("inProgressLabelKey")
                        .unwrap_or(IN_PROGRESS_LABEL.0)
                        .to_string(),
                    text("inProgressLabelValue")
                        .unwrap_or(IN_PROGRESS_LABEL.1)
                        .to_string(),
                )
            });
        Some(PluginConfig {
            namespace: text("namespace").unwrap_or(rollout_namespace).to_string(),
            routes,
            selectors,
            in_progress_label,
        })
    }

    /// The routes of one kind named in the configuration.
    pub fn named(&self, kind: RouteKind) -> impl Iterator<Item = &ManagedRoute> {
        self.routes.iter().filter(move |r| r.kind == kind)
    }
}

/// The Services the plugin writes weights for: the Rollout's `stableService` and
/// `canaryService`, and the `managedRoutes` names of its header rules.
#[derive(Debug, Clone, Copy)]
pub struct PluginContext<'a> {
    pub stable: &'a str,
    pub canary: &'a str,
    pub managed: &'a [String],
}

fn rules_mut(route: &mut Value) -> Option<&mut Vec<Value>> {
    route.get_mut("spec")?.get_mut("rules")?.as_array_mut()
}

fn backend_name(b: &Value) -> &str {
    b["name"].as_str().unwrap_or("")
}

/// `isManagedRuleName`: a managed route's name, or that name with `-<number>`.
fn is_managed_name(name: &str, managed: &[String]) -> bool {
    managed.iter().any(|base| {
        name == base
            || name
                .strip_prefix(base.as_str())
                .and_then(|rest| rest.strip_prefix('-'))
                .is_some_and(|n| n.parse::<i64>().is_ok())
    })
}

/// `isHTTPManagedRule` without header names: a rule forwarding to the canary alone.
fn forwards_to_canary_only(rule: &Value, canary: &str) -> bool {
    matches!(rule["backendRefs"].as_array().map(Vec::as_slice), Some([only]) if backend_name(only) == canary)
}

/// A header rule the plugin added for one of the `managed` names.
fn is_managed_rule(rule: &Value, ctx: &PluginContext) -> bool {
    rule["name"]
        .as_str()
        .is_some_and(|n| is_managed_name(n, ctx.managed))
        || forwards_to_canary_only(rule, ctx.canary)
}

/// `setHTTPRouteWeight` (and `setGRPCRouteWeight`, `setTCPRouteWeight`,
/// `setTLSRouteWeight`) on one route of `kind`: the route to write (None: unchanged), or
/// the plugin's error. TCP and TLS routes have no header rules to skip.
pub fn set_weight(
    route: &Value,
    kind: RouteKind,
    ctx: &PluginContext,
    weight: i32,
    label: Option<&(String, String)>,
) -> Result<Option<Value>, String> {
    let mut next = route.clone();
    let (mut canary_found, mut stable_found) = (false, false);
    for rule in rules_mut(&mut next).into_iter().flatten() {
        if kind.takes_header_routes() && is_managed_rule(rule, ctx) {
            continue;
        }
        let backends = rule.get_mut("backendRefs").and_then(Value::as_array_mut);
        for b in backends.into_iter().flatten() {
            let w = match backend_name(b) {
                n if n == ctx.canary => {
                    canary_found = true;
                    weight
                }
                n if n == ctx.stable => {
                    stable_found = true;
                    100 - weight
                }
                _ => continue,
            };
            if let Some(b) = b.as_object_mut() {
                b.insert("weight".into(), json!(w));
            }
        }
    }
    if !canary_found || !stable_found {
        return Err(kind.not_found().to_string());
    }
    if let Some((key, value)) = label {
        in_progress_label(&mut next, key, value, weight);
    }
    Ok((next != *route).then_some(next))
}

/// `ensureInProgressLabel`: set while the weight is above 0, removed at 0.
fn in_progress_label(route: &mut Value, key: &str, value: &str, weight: i32) {
    let Some(meta) = route.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if weight == 0 {
        if let Some(labels) = meta.get_mut("labels").and_then(Value::as_object_mut) {
            labels.remove(key);
        }
        return;
    }
    let labels = meta
        .entry("labels")
        .or_insert_with(|| json!({}))
        .as_object_mut();
    if let Some(labels) = labels {
        labels.insert(key.to_string(), json!(value));
    }
}

/// `getHTTPHeaderRouteRuleList`: the step's header matches as HTTPHeaderMatches.
fn header_matches(step: &SetHeaderRoute) -> Result<Vec<Value>, String> {
    let matches = step.matches.as_deref().unwrap_or_default();
    matches
        .iter()
        .map(|m| {
            let v = m.header_value.clone().unwrap_or_default();
            let (kind, value) = match v {
                StringMatch { exact: Some(e), .. } if !e.is_empty() => ("Exact", e),
                StringMatch {
                    prefix: Some(p), ..
                } if !p.is_empty() => ("RegularExpression", format!("{p}.*")),
                StringMatch { regex: Some(r), .. } if !r.is_empty() => ("RegularExpression", r),
                _ => return Err(INVALID_HEADER_MATCH_TYPE.to_string()),
            };
            Ok(json!({"name": m.header_name, "type": kind, "value": value}))
        })
        .collect()
}

/// A source rule's match with the step's headers added after its own, in the order Go
/// writes HTTPRouteMatch (path, headers, queryParams, method) and GRPCRouteMatch (method
/// — an object there —, headers).
fn merged_match(m: &Value, headers: &[Value]) -> Value {
    let mut merged: Vec<Value> = m["headers"].as_array().cloned().unwrap_or_default();
    merged.extend(headers.iter().cloned());
    let mut out = serde_json::Map::new();
    let present = |key: &str| m.get(key).filter(|v| !v.is_null());
    if let Some(v) = present("path") {
        out.insert("path".into(), v.clone());
    }
    if let Some(v) = present("method").filter(|v| v.is_object()) {
        out.insert("method".into(), v.clone());
    }
    out.insert("headers".into(), json!(merged));
    if let Some(v) = present("queryParams") {
        out.insert("queryParams".into(), v.clone());
    }
    if let Some(v) = present("method").filter(|v| v.is_string()) {
        out.insert("method".into(), v.clone());
    }
    Value::Object(out)
}

/// `setHTTPHeaderRoute` on one route: the route to write (None: unchanged). A step
/// without `match` removes the managed rules instead.
pub fn set_header_route(
    route: &Value,
    ctx: &PluginContext,
    step: &SetHeaderRoute,
) -> Result<Option<Value>, String> {
    // Argo hands the step to the plugin over net/rpc, whose gob encoding sends an empty
    // list as nothing: `match: []` arrives as no match, and the rules go.
    if step.matches.as_ref().is_none_or(Vec::is_empty) {
        return Ok(remove_managed_routes(route, ctx));
    }
    let headers = header_matches(step)?;
    let rules = route["spec"]["rules"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let names = |r: &Value| -> Vec<String> {
        r["backendRefs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|b| backend_name(b).to_string())
            .collect()
    };
    // `getAllRouteRules`: every rule forwarding to both Services.
    let sources: Vec<&Value> = rules
        .iter()
        .filter(|r| {
            let n = names(r);
            n.iter().any(|b| b == ctx.canary) && n.iter().any(|b| b == ctx.stable)
        })
        .collect();
    if sources.is_empty() {
        return Err(BACKEND_REF_NOT_FOUND.to_string());
    }
    let managed_rules: Vec<Value> = sources
        .iter()
        .enumerate()
        .map(|(i, source)| {
            let name = if i == 0 {
                step.name.clone()
            } else {
                format!("{}-{i}", step.name)
            };
            let port = source["backendRefs"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|b| backend_name(b) == ctx.canary)
                .map(|b| b["port"].clone())
                .unwrap_or(Value::Null);
            let mut backend = json!({"group": "", "kind": "Service", "name": ctx.canary});
            if !port.is_null() {
                backend["port"] = port;
            }
            let source_matches = source["matches"].as_array().map(Vec::as_slice);
            let matches: Vec<Value> = match source_matches {
                None | Some([]) => vec![json!({"headers": headers})],
                Some(ms) => ms.iter().map(|m| merged_match(m, &headers)).collect(),
            };
            // In the order Go writes HTTPRouteRule: name, matches, filters, backendRefs.
            let mut rule = serde_json::Map::new();
            rule.insert("name".into(), json!(name));
            rule.insert("matches".into(), json!(matches));
            if let Some(filters) = source["filters"].as_array().filter(|f| !f.is_empty()) {
                rule.insert("filters".into(), json!(filters));
            }
            rule.insert("backendRefs".into(), json!([backend]));
            Value::Object(rule)
        })
        .collect();
    let header_names: Vec<&str> = headers.iter().filter_map(|h| h["name"].as_str()).collect();
    let this_step = [step.name.clone()];
    let is_this_steps = |r: &Value| {
        r["name"]
            .as_str()
            .is_some_and(|n| is_managed_name(n, &this_step))
            || (forwards_to_canary_only(r, ctx.canary)
                && r["matches"].as_array().into_iter().flatten().any(|m| {
                    header_names.iter().all(|h| {
                        m["headers"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .any(|x| x["name"].as_str() == Some(h))
                    })
                }))
    };
    let mut next = route.clone();
    if let Some(rules) = rules_mut(&mut next) {
        rules.retain(|r| !is_this_steps(r));
        rules.extend(managed_rules);
    }
    Ok((next != *route).then_some(next))
}

/// `removeHTTPManagedRoutes` on one route: the route without the plugin's header rules
/// (None: it had none).
pub fn remove_managed_routes(route: &Value, ctx: &PluginContext) -> Option<Value> {
    let mut next = route.clone();
    let rules = rules_mut(&mut next)?;
    let before = rules.len();
    rules.retain(|r| !is_managed_rule(r, ctx));
    (rules.len() != before).then_some(next)
}

#[cfg(test)]
mod tests;
