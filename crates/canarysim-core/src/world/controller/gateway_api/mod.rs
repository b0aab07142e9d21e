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
//!   weight or 100 − weight; both must be found) and `labels.go`: `ensureInProgressLabel`;
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

/// One HTTPRoute the plugin manages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedRoute {
    pub name: String,
    /// Whether `setHeaderRoute` steps add their rules to it.
    pub use_header_routes: bool,
}

/// The plugin's configuration, as it reads it from the Rollout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginConfig {
    /// The routes' namespace: the configured one, else the Rollout's.
    pub namespace: String,
    pub http_routes: Vec<ManagedRoute>,
    /// `httpRouteSelector.matchLabels`: more HTTPRoutes, found by label in the namespace
    /// (without header routes).
    pub http_route_selector: Option<BTreeMap<String, String>>,
    /// Whether routes of the kinds canarysim does not route (GRPC, TCP, TLS) are named or
    /// selected: with none of them and no HTTPRoute found, SetWeight fails with
    /// [`NO_ROUTES`].
    pub other_routes: bool,
    /// None: `disableInProgressLabel`.
    pub in_progress_label: Option<(String, String)>,
}

impl PluginConfig {
    /// The plugin's configuration from `trafficRouting.plugins`; None when the plugin is
    /// not configured.
    pub fn of(plugins: Option<&Value>, rollout_namespace: &str) -> Option<PluginConfig> {
        let config = plugins?.get(PLUGIN)?;
        let text = |key: &str| config[key].as_str().filter(|s| !s.is_empty());
        let mut http_routes: Vec<ManagedRoute> = config["httpRoutes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| {
                Some(ManagedRoute {
                    name: r["name"].as_str()?.to_string(),
                    use_header_routes: r["useHeaderRoutes"].as_bool().unwrap_or(false),
                })
            })
            .collect();
        if let Some(name) = text("httpRoute") {
            http_routes.push(ManagedRoute {
                name: name.to_string(),
                use_header_routes: true,
            });
        }
        let http_route_selector = config["httpRouteSelector"].as_object().map(|s| {
            s.get("matchLabels")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        });
        // `isConfigHasRoutes` counts non-empty lists; another kind's selector counts too,
        // since canarysim does not list what it would find.
        let other_routes = ["grpc", "tcp", "tls"].iter().any(|k| {
            text(&format!("{k}Route")).is_some()
                || config[format!("{k}Routes")]
                    .as_array()
                    .is_some_and(|l| !l.is_empty())
                || config[format!("{k}RouteSelector")].is_object()
        });
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
            http_routes,
            http_route_selector,
            other_routes,
            in_progress_label,
        })
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

/// `setHTTPRouteWeight` on one route: the route to write (None: unchanged), or the
/// plugin's error.
pub fn set_weight(
    route: &Value,
    ctx: &PluginContext,
    weight: i32,
    label: Option<&(String, String)>,
) -> Result<Option<Value>, String> {
    let mut next = route.clone();
    let (mut canary_found, mut stable_found) = (false, false);
    for rule in rules_mut(&mut next).into_iter().flatten() {
        if is_managed_rule(rule, ctx) {
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
        return Err(BACKEND_REF_NOT_FOUND.to_string());
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
                Some(ms) => ms
                    .iter()
                    .map(|m| {
                        let mut merged: Vec<Value> =
                            m["headers"].as_array().cloned().unwrap_or_default();
                        merged.extend(headers.iter().cloned());
                        // In the order Go writes HTTPRouteMatch: path, headers, queryParams, method.
                        let mut out = serde_json::Map::new();
                        if let Some(v) = m.get("path").filter(|v| !v.is_null()) {
                            out.insert("path".into(), v.clone());
                        }
                        out.insert("headers".into(), json!(merged));
                        for key in ["queryParams", "method"] {
                            if let Some(v) = m.get(key).filter(|v| !v.is_null()) {
                                out.insert(key.into(), v.clone());
                            }
                        }
                        Value::Object(out)
                    })
                    .collect(),
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
