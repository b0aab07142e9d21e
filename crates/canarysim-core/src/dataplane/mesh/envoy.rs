//! A route table as an Envoy v3 static bootstrap (`canarysim envoy-config`), so that a real
//! Envoy can serve exactly what canarysim's router serves: one listener per ingress gateway
//! with its virtual hosts and routes (path, method, authority, header and query matches;
//! `weighted_clusters`; mirrors; retries, timeout and fault), and the clusters named as
//! Istio names them, `outbound|port|subset|host`, with the pods' addresses.
//!
//! What Envoy is given is data only: addresses come from the caller (the live pods', or
//! placeholders), and nothing here opens a socket.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::matcher::{HostPattern, StrMatcher};
use super::policy::HttpPolicy;
use super::table::{HttpMatch, HttpRouteEntry, Listener, RouteTable, WeightedClusters};
use super::{Cluster, LbPolicy};

/// Where the exported Envoy listens and where the pods are.
pub struct EnvoyOptions<'a> {
    /// The address every listener binds (127.0.0.1 in tests).
    pub listen_address: String,
    /// The port for each gateway listener, by `namespace/name`; a gateway not listed gets
    /// `default_port`.
    pub ports: BTreeMap<String, u16>,
    pub default_port: u16,
    /// The admin interface's port (0: the system picks).
    pub admin_port: u16,
    /// The port to bind for a gateway's TLS or TCP routes on a port (`namespace/name`, the
    /// Gateway's port): a listener of its own, as Envoy has one per port.
    pub l4_port: &'a dyn Fn(&str, u32) -> u16,
    /// Where a pod listens (None: left out of its clusters, as a pod that is gone).
    pub pod_address: &'a dyn Fn(&str) -> Option<(String, u16)>,
    /// The load-balancing policy of clusters whose DestinationRule sets none.
    pub lb: LbPolicy,
}

/// What the export could not express in Envoy's terms (printed as comments or warnings).
pub(crate) type Omissions = Vec<String>;

/// The bootstrap for `table`, with what it left out.
pub fn bootstrap(table: &RouteTable, options: &EnvoyOptions) -> (Value, Omissions) {
    let mut omitted = Vec::new();
    let mut listeners: Vec<Value> = Vec::new();
    for l in table.listeners.iter().filter(|l| l.gateway.is_some()) {
        if !l.http.is_empty() || (l.tls.is_empty() && l.tcp.is_empty()) {
            listeners.push(listener(table, l, options, &mut omitted));
        }
        listeners.extend(l4_listeners(table, l, options));
    }
    if table
        .listeners
        .first()
        .is_some_and(|mesh| mesh.gateway.is_none() && !mesh.http.is_empty())
    {
        omitted
            .push("the mesh's sidecar routes (only the ingress gateways are exported)".to_string());
    }
    let clusters: Vec<Value> = table
        .clusters
        .iter()
        .map(|c| cluster(table, c, options, &mut omitted))
        .collect();
    let config = json!({
        "admin": {"address": socket(&options.listen_address, options.admin_port)},
        "static_resources": {"listeners": listeners, "clusters": clusters},
    });
    omitted.sort();
    omitted.dedup();
    (config, omitted)
}

fn socket(address: &str, port: u16) -> Value {
    json!({"socket_address": {"address": address, "port_value": port}})
}

fn listener(
    table: &RouteTable,
    l: &Listener,
    options: &EnvoyOptions,
    omitted: &mut Omissions,
) -> Value {
    let gateway = l.gateway.as_ref().map_or("mesh", |g| g.full.as_str());
    let port = options
        .ports
        .get(gateway)
        .copied()
        .unwrap_or(options.default_port);
    let listener_port = l.http_port();
    let virtual_hosts: Vec<Value> = l
        .http
        .iter()
        .map(|vh| {
            let routes: Vec<Value> = vh
                .routes
                .iter()
                .flat_map(|r| http_routes(table, r, listener_port, omitted))
                .collect();
            json!({
                "name": format!("{}", domain(&vh.host)),
                "domains": domains(&vh.host),
                "routes": routes,
            })
        })
        .collect();
    json!({
        "name": format!("{gateway} {}", listener_port.unwrap_or(80)),
        "address": socket(&options.listen_address, port),
        "filter_chains": [{
            "filters": [{
                "name": "envoy.filters.network.http_connection_manager",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                    "stat_prefix": "gateway",
                    "route_config": {"name": gateway, "virtual_hosts": virtual_hosts},
                    "http_filters": [
                        {
                            "name": "envoy.filters.http.fault",
                            "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault"}
                        },
                        {
                            "name": "envoy.filters.http.router",
                            "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}
                        }
                    ]
                }
            }]
        }]
    })
}

/// A gateway's TLS and TCP routes: a listener per port, a filter chain per TLS route match
/// (by SNI, read by the TLS inspector; the connection passes through) or one for the port's
/// TCP route, each a TCP proxy over the route's weighted clusters, chosen per connection.
fn l4_listeners(table: &RouteTable, l: &Listener, options: &EnvoyOptions) -> Vec<Value> {
    let gateway = l.gateway.as_ref().map_or("mesh", |g| g.full.as_str());
    let default_port = l.l4_default_port();
    // Port → filter chains, in the order Istio would match them.
    let mut by_port: BTreeMap<u32, (bool, Vec<Value>)> = BTreeMap::new();
    for (tls, vhosts) in [(true, &l.tls), (false, &l.tcp)] {
        for vh in vhosts.iter() {
            for r in &vh.routes {
                let proxy = tcp_proxy(table, &r.clusters, &r.source.to_string());
                let matches: Vec<(Option<u32>, Vec<String>)> = if r.matches.is_empty() {
                    vec![(None, Vec::new())]
                } else {
                    r.matches
                        .iter()
                        .map(|m| (m.port, m.sni.iter().map(domain).collect()))
                        .collect()
                };
                for (port, sni) in matches {
                    let port = port.unwrap_or(default_port);
                    // The gateway's servers do not open this port: no listener for it.
                    if !l.listens_on(port) {
                        continue;
                    }
                    let entry = by_port.entry(port).or_insert((false, Vec::new()));
                    let mut chain = json!({"filters": [proxy.clone()]});
                    if tls {
                        entry.0 = true;
                        let names = if sni.is_empty() {
                            vec![domain(&vh.host)]
                        } else {
                            sni
                        };
                        if !names.iter().any(|n| n == "*") {
                            chain["filter_chain_match"] = json!({"server_names": names});
                        }
                    }
                    // Envoy refuses two chains with the same match: the first route wins,
                    // as in Istio's order.
                    let same = entry
                        .1
                        .iter()
                        .any(|c| c.get("filter_chain_match") == chain.get("filter_chain_match"));
                    if !same {
                        entry.1.push(chain);
                    }
                }
            }
        }
    }
    by_port
        .into_iter()
        .map(|(port, (tls, chains))| {
            let mut listener = json!({
                "name": format!("{gateway} {port}"),
                "address": socket(&options.listen_address, (options.l4_port)(gateway, port)),
                "filter_chains": chains,
            });
            if tls {
                listener["listener_filters"] = json!([{
                    "name": "envoy.filters.listener.tls_inspector",
                    "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector"}
                }]);
            }
            listener
        })
        .collect()
}

fn tcp_proxy(table: &RouteTable, clusters: &WeightedClusters, route: &str) -> Value {
    let name = |id| {
        table
            .cluster(id)
            .map_or_else(|| "missing".to_string(), |c| c.name.clone())
    };
    let mut config = json!({
        "@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
        "stat_prefix": route,
    });
    if clusters.len() == 1 {
        let (id, _) = clusters.iter().next().expect("one cluster");
        config["cluster"] = json!(name(id));
    } else {
        let entries: Vec<Value> = clusters
            .iter()
            .map(|(id, weight)| json!({"name": name(id), "weight": weight}))
            .collect();
        config["weighted_clusters"] = json!({"clusters": entries});
    }
    json!({"name": "envoy.filters.network.tcp_proxy", "typed_config": config})
}

/// The host pattern as Envoy writes a domain.
fn domain(host: &HostPattern) -> String {
    match host {
        HostPattern::Exact { fqdn, .. } => fqdn.clone(),
        HostPattern::Suffix(s) => format!("*{s}"),
        HostPattern::Any => "*".to_string(),
    }
}

/// A virtual host's domains: the host with and without a port.
fn domains(host: &HostPattern) -> Vec<String> {
    match host {
        HostPattern::Any => vec!["*".to_string()],
        other => {
            let d = domain(other);
            vec![d.clone(), format!("{d}:*")]
        }
    }
}

/// An Istio route becomes one Envoy route per `match` entry (they are ORed).
fn http_routes(
    table: &RouteTable,
    r: &HttpRouteEntry,
    listener_port: Option<u32>,
    omitted: &mut Omissions,
) -> Vec<Value> {
    let action = route_action(table, &r.clusters, r);
    if r.clusters.is_in_turns() {
        omitted.push(format!(
            "{}: the split taken in turns (a weighted round robin); Envoy draws per request",
            r.source
        ));
    }
    if r.sticky.is_some() {
        omitted.push(format!(
            "{}: session affinity (ingress-nginx's affinity: cookie) pins each client to a backend; Envoy draws every request",
            r.source
        ));
    }
    let typed_per_filter = fault(&r.policy);
    let with_action = |matcher: Value| {
        let mut route = json!({"match": matcher, "route": action.clone()});
        if let Some(f) = &typed_per_filter {
            route["typed_per_filter_config"] = json!({"envoy.filters.http.fault": f});
        }
        route
    };
    if r.matches.is_empty() {
        return vec![with_action(json!({"prefix": "/"}))];
    }
    r.matches
        .iter()
        .filter(|m| {
            // A match for another port never applies on this listener.
            m.port.is_none() || listener_port.is_none() || m.port == listener_port
        })
        .map(|m| with_action(route_match(m, &r.source.to_string(), omitted)))
        .collect()
}

fn route_match(m: &HttpMatch, route: &str, omitted: &mut Omissions) -> Value {
    let mut out = serde_json::Map::new();
    let mut headers = Vec::new();
    let mut query = Vec::new();
    let mut uri = m.uri.as_ref();
    let mut parts = vec![m];
    if let Some(also) = &m.also {
        parts.push(also);
        uri = uri.or(also.uri.as_ref());
        if m.uri.is_some() && also.uri.is_some() {
            omitted.push(format!(
                "{route}: a delegate's uri match together with its root's (the delegate's is exported)"
            ));
        }
    }
    match uri {
        None | Some(StrMatcher::Any) => {
            out.insert("prefix".into(), json!("/"));
        }
        Some(StrMatcher::Prefix(p)) => {
            out.insert("prefix".into(), json!(p));
        }
        Some(StrMatcher::SegmentPrefix(p)) if p.is_empty() => {
            out.insert("prefix".into(), json!("/"));
        }
        Some(StrMatcher::SegmentPrefix(p)) => {
            out.insert("path_separated_prefix".into(), json!(p));
        }
        Some(StrMatcher::Exact(e)) => {
            out.insert("path".into(), json!(e));
        }
        Some(StrMatcher::Regex(_)) => {
            out.insert(
                "safe_regex".into(),
                json!({"regex": regex_source(uri.expect("matched"))}),
            );
        }
    }
    for part in parts {
        if let Some(method) = &part.method {
            headers.push(header(":method", method, false));
        }
        if let Some(authority) = &part.authority {
            headers.push(header(":authority", authority, false));
        }
        for (name, h) in part.headers.iter() {
            headers.push(header(name, h, false));
        }
        for (name, h) in part.without_headers.iter() {
            headers.push(header(name, h, true));
        }
        for (name, q) in part.query_params.iter() {
            query.push(match q {
                StrMatcher::Any => json!({"name": name, "present_match": true}),
                other => json!({"name": name, "string_match": string_match(other)}),
            });
        }
        if !part.source.labels.is_empty() || part.source.namespace.is_some() {
            omitted.push(format!(
                "{route}: sourceLabels / sourceNamespace (Envoy's gateway listener has no caller labels to match)"
            ));
        }
    }
    if !headers.is_empty() {
        out.insert("headers".into(), Value::Array(headers));
    }
    if !query.is_empty() {
        out.insert("query_parameters".into(), Value::Array(query));
    }
    Value::Object(out)
}

fn header(name: &str, m: &StrMatcher, invert: bool) -> Value {
    let mut h = match m {
        StrMatcher::Any => json!({"name": name, "present_match": true}),
        other => json!({"name": name, "string_match": string_match(other)}),
    };
    if invert {
        h["invert_match"] = json!(true);
    }
    h
}

fn string_match(m: &StrMatcher) -> Value {
    match m {
        StrMatcher::Exact(e) => json!({"exact": e}),
        StrMatcher::Prefix(p) => json!({"prefix": p}),
        // Only paths are matched by segments (a header or parameter never is).
        StrMatcher::SegmentPrefix(p) => json!({"prefix": p}),
        StrMatcher::Regex(_) => json!({"safe_regex": {"regex": regex_source(m)}}),
        StrMatcher::Any => json!({"safe_regex": {"regex": ".*"}}),
    }
}

/// The regex as written (the compiled one is anchored: Envoy's safe_regex matches whole
/// values already).
fn regex_source(m: &StrMatcher) -> String {
    match m {
        StrMatcher::Regex(r) => r
            .as_str()
            .strip_prefix("^(?:")
            .and_then(|s| s.strip_suffix(")$"))
            .unwrap_or(r.as_str())
            .to_string(),
        _ => String::new(),
    }
}

fn route_action(table: &RouteTable, clusters: &WeightedClusters, r: &HttpRouteEntry) -> Value {
    let name = |id| {
        table
            .cluster(id)
            .map_or_else(|| "missing".to_string(), |c| c.name.clone())
    };
    let mut action = if clusters.len() == 1 {
        let (id, _) = clusters.iter().next().expect("one cluster");
        json!({"cluster": name(id)})
    } else {
        let entries: Vec<Value> = clusters
            .iter()
            .map(|(id, weight)| json!({"name": name(id), "weight": weight}))
            .collect();
        json!({"weighted_clusters": {"clusters": entries}})
    };
    // Istio disables Envoy's default 15 s route timeout unless the route sets one.
    action["timeout"] = json!(duration(r.policy.timeout_us.unwrap_or(0)));
    let retry = r.policy.retry;
    if retry.attempts > 0 {
        let on = retry.on;
        let mut conditions = Vec::new();
        if on.five_xx {
            conditions.push("5xx");
        }
        if on.gateway_error {
            conditions.push("gateway-error");
        }
        if on.connect_failure {
            conditions.extend([
                "connect-failure",
                "refused-stream",
                "unavailable",
                "cancelled",
            ]);
        }
        let codes: Vec<u16> = on.codes().to_vec();
        if !codes.is_empty() {
            conditions.push("retriable-status-codes");
        }
        let mut policy = json!({
            "retry_on": conditions.join(","),
            "num_retries": retry.attempts,
            "retry_host_predicate": [{
                "name": "envoy.retry_host_predicates.previous_hosts",
                "typed_config": {"@type": "type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate"}
            }],
            "host_selection_retry_max_attempts": 5,
        });
        if !codes.is_empty() {
            policy["retriable_status_codes"] = json!(codes);
        }
        if let Some(t) = retry.per_try_timeout_us {
            policy["per_try_timeout"] = json!(duration(t));
        }
        action["retry_policy"] = policy;
    }
    if !r.mirrors.is_empty() {
        let mirrors: Vec<Value> = r
            .mirrors
            .iter()
            .map(|m| {
                json!({
                    "cluster": name(m.cluster),
                    "runtime_fraction": {"default_value": {"numerator": m.per_million, "denominator": "MILLION"}}
                })
            })
            .collect();
        action["request_mirror_policies"] = Value::Array(mirrors);
    }
    action
}

/// The route's fault, as the fault filter's per-route configuration.
fn fault(policy: &HttpPolicy) -> Option<Value> {
    let f = policy.fault;
    if f.delay.is_none() && f.abort.is_none() {
        return None;
    }
    let mut config =
        json!({"@type": "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault"});
    if let Some((per_million, us)) = f.delay {
        config["delay"] = json!({
            "fixed_delay": duration(us),
            "percentage": {"numerator": per_million, "denominator": "MILLION"}
        });
    }
    if let Some((per_million, status)) = f.abort {
        config["abort"] = json!({
            "http_status": status,
            "percentage": {"numerator": per_million, "denominator": "MILLION"}
        });
    }
    Some(config)
}

/// Microseconds as a protobuf JSON duration (`1.5s`).
fn duration(us: u64) -> String {
    if us % 1_000_000 == 0 {
        format!("{}s", us / 1_000_000)
    } else {
        format!("{}.{:06}s", us / 1_000_000, us % 1_000_000)
    }
}

fn cluster(
    table: &RouteTable,
    c: &Cluster,
    options: &EnvoyOptions,
    omitted: &mut Omissions,
) -> Value {
    let endpoints: Vec<Value> = c
        .endpoints
        .iter()
        .filter_map(|id| table.endpoint(*id))
        .filter_map(|e| (options.pod_address)(&e.pod))
        .map(|(address, port)| json!({"endpoint": {"address": socket(&address, port)}}))
        .collect();
    let lb = match c.lb.unwrap_or(options.lb) {
        LbPolicy::RoundRobin => "ROUND_ROBIN",
        LbPolicy::Random => "RANDOM",
        LbPolicy::LeastRequest => "LEAST_REQUEST",
    };
    let mut out = json!({
        "name": c.name,
        "type": "STATIC",
        "connect_timeout": "10s",
        "lb_policy": lb,
        "load_assignment": {
            "cluster_name": c.name,
            "endpoints": [{"lb_endpoints": endpoints}]
        }
    });
    if let Some(od) = &c.outlier {
        let mut o = json!({
            "consecutive_5xx": od.consecutive_5xx,
            "base_ejection_time": duration(od.base_ejection_us),
            "max_ejection_percent": od.max_ejection_percent,
        });
        if let Some(g) = od.consecutive_gateway {
            o["consecutive_gateway_failure"] = json!(g);
            o["enforcing_consecutive_gateway_failure"] = json!(100);
        }
        out["outlier_detection"] = o;
    }
    if c.hash.is_some() {
        omitted.push(format!(
            "{}: consistentHash (exported as the cluster's plain load balancer)",
            c.name
        ));
    }
    if c.unresolved {
        omitted.push(format!(
            "{}: a backendRef that does not resolve (exported as a cluster without endpoints: Envoy answers its share 503; implementations and canarysim answer 500)",
            c.name
        ));
    }
    out
}
