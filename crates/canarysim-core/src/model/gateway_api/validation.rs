//! What the Gateway API's API server refuses in a route. The CRDs' bounds and CEL rules (standard channel, `apis/v1/httproute_types.go` and
//! `shared_types.go`) on the fields a canary depends on — parent references, rules, path
//! matches, backend references and their weights — in the API server's words, so that a
//! route a cluster would refuse is refused here too, at its place.

use serde_json::Value;

use super::{GROUP, MAX_WEIGHT};
use crate::model::kube_validation::Invalid;

/// Every field of a route's `spec` the API server refuses, in the order it checks them.
pub(crate) fn validate_route(kind: &str, spec: &Value, out: &mut Vec<Invalid>) {
    let at = At {
        path: "spec".into(),
        pointer: "/spec".into(),
    };
    parent_refs(out, &at.child("parentRefs"), &spec["parentRefs"]);
    let http = kind == "HTTPRoute";
    if http {
        at.child("hostnames").at_most(out, &spec["hostnames"], 16);
        at.child("rules").at_most(out, &spec["rules"], 16);
    }
    let rules = spec["rules"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (i, rule) in rules.iter().enumerate() {
        let rule_at = at.child("rules").item(i);
        if http {
            http_rule(out, &rule_at, rule);
        }
        let refs = rule["backendRefs"].as_array().map(Vec::as_slice);
        for (j, backend) in refs.unwrap_or_default().iter().enumerate() {
            backend_ref(out, &rule_at.child("backendRefs").item(j), backend);
        }
    }
    let matches: usize = rules
        .iter()
        .take(16)
        .map(|r| r["matches"].as_array().map_or(0, Vec::len))
        .sum();
    if http && matches > 128 {
        at.child("rules").rule(
            out,
            "array",
            "While 16 rules and 64 matches per rule are allowed, the total number of matches across all rules in a route must be less than 128",
        );
    }
}

/// Where a check is: the field path the API server names and the JSON pointer that locates
/// it in the manifest.
struct At {
    path: String,
    pointer: String,
}

impl At {
    fn child(&self, name: &str) -> At {
        At {
            path: format!("{}.{name}", self.path),
            pointer: format!("{}/{name}", self.pointer),
        }
    }

    fn item(&self, i: usize) -> At {
        At {
            path: format!("{}[{i}]", self.path),
            pointer: format!("{}/{i}", self.pointer),
        }
    }

    fn push(&self, out: &mut Vec<Invalid>, message: String) {
        out.push(Invalid {
            pointer: self.pointer.clone(),
            message,
        });
    }

    /// A CEL rule's failure: the API server names the value's type, not the value.
    fn rule(&self, out: &mut Vec<Invalid>, of_type: &str, message: &str) {
        let path = &self.path;
        self.push(
            out,
            format!("{path}: Invalid value: \"{of_type}\": {message}"),
        );
    }

    /// `maxItems`.
    fn at_most(&self, out: &mut Vec<Invalid>, list: &Value, max: usize) {
        if let Some(n) = list.as_array().map(Vec::len).filter(|n| *n > max) {
            let path = &self.path;
            self.push(
                out,
                format!("{path}: Too many: {n}: must have at most {max} items"),
            );
        }
    }

    /// An integer field within `min..=max` (`Minimum`, `Maximum`), when it is present.
    fn integer_within(&self, out: &mut Vec<Invalid>, value: &Value, min: i64, max: i64) {
        let path = &self.path;
        let message = match value {
            Value::Null => return,
            Value::Number(n) if n.is_i64() || n.is_u64() => match n.as_i64() {
                Some(i) if i < min => format!(
                    "{path}: Invalid value: {n}: {path} in body should be greater than or equal to {min}"
                ),
                Some(i) if i <= max => return,
                _ => format!(
                    "{path}: Invalid value: {n}: {path} in body should be less than or equal to {max}"
                ),
            },
            other => {
                let of_type = json_type(other);
                format!(
                    "{path}: Invalid value: \"{of_type}\": {path} in body must be of type integer: \"{of_type}\""
                )
            }
        };
        self.push(out, message);
    }
}

/// The name JSON Schema gives a value's type, as the API server's messages do.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `parentRefs`: at most 32, and a parent referenced twice needs a distinct, non-empty
/// `sectionName` on each reference (group and kind defaulted first, as the API server does).
fn parent_refs(out: &mut Vec<Invalid>, at: &At, refs: &Value) {
    at.at_most(out, refs, 32);
    let Some(refs) = refs.as_array() else { return };
    let text = |v: &Value, default: &'static str| v.as_str().unwrap_or(default).to_string();
    let parent = |p: &Value| {
        (
            text(&p["group"], GROUP),
            text(&p["kind"], "Gateway"),
            text(&p["name"], ""),
            text(&p["namespace"], ""),
        )
    };
    fn section(p: &Value) -> Option<&str> {
        p["sectionName"].as_str().filter(|s| !s.is_empty())
    }
    let pairs = || {
        refs.iter()
            .flat_map(|a| refs.iter().map(move |b| (a, b)))
            .filter(|(a, b)| parent(a) == parent(b))
    };
    if pairs().any(|(a, b)| section(a).is_some() != section(b).is_some()) {
        at.rule(
            out,
            "array",
            "sectionName must be specified when parentRefs includes 2 or more references to the same parent",
        );
    }
    let unique = refs.iter().all(|a| {
        let same = |b: &&Value| parent(a) == parent(b) && section(a) == section(b);
        refs.iter().filter(same).count() == 1
    });
    if !unique {
        at.rule(
            out,
            "array",
            "sectionName must be unique when parentRefs includes 2 or more references to the same parent",
        );
    }
}

/// One HTTPRoute rule's bounds, its matches' paths, and its filters beside backends.
fn http_rule(out: &mut Vec<Invalid>, at: &At, rule: &Value) {
    at.child("matches").at_most(out, &rule["matches"], 64);
    at.child("filters").at_most(out, &rule["filters"], 16);
    at.child("backendRefs")
        .at_most(out, &rule["backendRefs"], 16);
    let matches = rule["matches"].as_array().map(Vec::as_slice);
    for (k, m) in matches.unwrap_or_default().iter().enumerate() {
        if m["path"].is_object() {
            path_match(out, &at.child("matches").item(k).child("path"), &m["path"]);
        }
    }
    let has_backends = rule["backendRefs"]
        .as_array()
        .is_some_and(|b| !b.is_empty());
    let filters = rule["filters"].as_array().map(Vec::as_slice);
    let redirects = filters
        .unwrap_or_default()
        .iter()
        .any(|f| f.get("requestRedirect").is_some());
    if has_backends && redirects {
        at.rule(
            out,
            "object",
            "RequestRedirect filter must not be used together with backendRefs",
        );
    }
}

/// An HTTPPathMatch: its type (default PathPrefix) and, for Exact and PathPrefix, the
/// value's CEL rules (default "/").
fn path_match(out: &mut Vec<Invalid>, at: &At, path: &Value) {
    let kind = path["type"].as_str().unwrap_or("PathPrefix");
    if !["Exact", "PathPrefix", "RegularExpression"].contains(&kind) {
        let type_at = at.child("type");
        let field = &type_at.path;
        type_at.push(
            out,
            format!(
                "{field}: Unsupported value: {kind:?}: supported values: \"Exact\", \"PathPrefix\", \"RegularExpression\""
            ),
        );
        return;
    }
    if kind == "RegularExpression" {
        return;
    }
    let value = path["value"].as_str().unwrap_or("/");
    let failed: Vec<&str> = [
        (
            !value.starts_with('/'),
            "value must be an absolute path and start with '/'",
        ),
        (value.contains("//"), "must not contain '//'"),
        (value.contains("/./"), "must not contain '/./'"),
        (value.contains("/../"), "must not contain '/../'"),
        (value.contains("%2f"), "must not contain '%2f'"),
        (value.contains("%2F"), "must not contain '%2F'"),
        (value.contains('#'), "must not contain '#'"),
        (value.ends_with("/.."), "must not end with '/..'"),
        (value.ends_with("/."), "must not end with '/.'"),
    ]
    .into_iter()
    .filter_map(|(fails, message)| fails.then_some(message))
    .collect();
    for message in failed {
        at.rule(
            out,
            "object",
            &format!("{message} when type one of ['Exact', 'PathPrefix']"),
        );
    }
    if !valid_path_characters(value) {
        at.rule(
            out,
            "object",
            "must only contain valid characters (matching ^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$) for types ['Exact', 'PathPrefix']",
        );
    }
}

/// `^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$`: RFC 3986 path characters and
/// percent-encodings.
fn valid_path_characters(value: &str) -> bool {
    let bytes = value.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let encoded = bytes.get(i + 1..i + 3);
            if !encoded.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                return false;
            }
            i += 3;
        } else if b.is_ascii_alphanumeric() || b"-/._~!$&'()*+,;=:@".contains(&b) {
            i += 1;
        } else {
            return false;
        }
    }
    !bytes.is_empty()
}

/// A backendRef: weight within 0..=1,000,000, port within 1..=65535, and a port for a
/// Service (group "" and kind Service are the defaults).
fn backend_ref(out: &mut Vec<Invalid>, at: &At, backend: &Value) {
    at.child("port")
        .integer_within(out, &backend["port"], 1, 65535);
    at.child("weight")
        .integer_within(out, &backend["weight"], 0, MAX_WEIGHT);
    let group = backend["group"].as_str().unwrap_or("");
    let kind = backend["kind"].as_str().unwrap_or("Service");
    if group.is_empty() && kind == "Service" && backend["port"].is_null() {
        at.rule(out, "object", "Must have port for Service reference");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(kind: &str, spec: Value) -> Vec<String> {
        let mut out = Vec::new();
        validate_route(kind, &spec, &mut out);
        out.into_iter().map(|i| i.message).collect()
    }

    /// The plugin's getting-started route: a Gateway parent, stable and canary backends.
    fn plugin_route() -> Value {
        json!({
            "parentRefs": [{"name": "traefik-gateway", "namespace": "default"}],
            "rules": [{"backendRefs": [
                {"name": "argo-rollouts-stable-service", "kind": "Service", "port": 80},
                {"name": "argo-rollouts-canary-service", "kind": "Service", "port": 80},
            ]}],
        })
    }

    #[test]
    fn the_plugins_example_route_is_valid() {
        assert_eq!(messages("HTTPRoute", plugin_route()), Vec::<String>::new());
    }

    #[test]
    fn weights_past_a_million_or_below_zero_are_refused_at_their_place() {
        let mut spec = plugin_route();
        spec["rules"][0]["backendRefs"][0]["weight"] = json!(2_000_000);
        spec["rules"][0]["backendRefs"][1]["weight"] = json!(-1);
        let mut out = Vec::new();
        validate_route("HTTPRoute", &spec, &mut out);
        assert_eq!(out[0].pointer, "/spec/rules/0/backendRefs/0/weight");
        assert_eq!(
            out[0].message,
            "spec.rules[0].backendRefs[0].weight: Invalid value: 2000000: spec.rules[0].backendRefs[0].weight in body should be less than or equal to 1000000"
        );
        assert_eq!(
            out[1].message,
            "spec.rules[0].backendRefs[1].weight: Invalid value: -1: spec.rules[0].backendRefs[1].weight in body should be greater than or equal to 0"
        );
        spec["rules"][0]["backendRefs"][0]["weight"] = json!("20");
        spec["rules"][0]["backendRefs"][1]["weight"] = json!(MAX_WEIGHT);
        assert_eq!(
            messages("GRPCRoute", spec),
            [
                "spec.rules[0].backendRefs[0].weight: Invalid value: \"string\": spec.rules[0].backendRefs[0].weight in body must be of type integer: \"string\""
            ]
        );
    }

    #[test]
    fn a_service_backend_without_a_port_is_refused() {
        let mut spec = plugin_route();
        spec["rules"][0]["backendRefs"][1] = json!({"name": "argo-rollouts-canary-service"});
        assert_eq!(
            messages("HTTPRoute", spec.clone()),
            [
                "spec.rules[0].backendRefs[1]: Invalid value: \"object\": Must have port for Service reference"
            ]
        );
        // Another kind of backend may leave the port to its own definition.
        spec["rules"][0]["backendRefs"][1]["group"] = json!("example.com");
        spec["rules"][0]["backendRefs"][1]["kind"] = json!("Bucket");
        assert_eq!(messages("HTTPRoute", spec), Vec::<String>::new());
    }

    #[test]
    fn a_parent_named_twice_needs_a_distinct_section_on_each() {
        let mut spec = plugin_route();
        spec["parentRefs"] = json!([
            {"name": "gw", "sectionName": "http"},
            {"name": "gw", "group": GROUP, "kind": "Gateway"},
        ]);
        assert_eq!(
            messages("HTTPRoute", spec.clone()),
            [
                "spec.parentRefs: Invalid value: \"array\": sectionName must be specified when parentRefs includes 2 or more references to the same parent"
            ]
        );
        spec["parentRefs"][1]["sectionName"] = json!("http");
        assert_eq!(
            messages("TCPRoute", spec.clone()),
            [
                "spec.parentRefs: Invalid value: \"array\": sectionName must be unique when parentRefs includes 2 or more references to the same parent"
            ]
        );
        spec["parentRefs"][1]["sectionName"] = json!("https");
        assert_eq!(messages("HTTPRoute", spec.clone()), Vec::<String>::new());
        // Another namespace is another parent.
        spec["parentRefs"][1] = json!({"name": "gw", "namespace": "other"});
        assert_eq!(messages("HTTPRoute", spec), Vec::<String>::new());
    }

    #[test]
    fn path_matches_follow_the_crds_rules() {
        let with_path = |path: Value| {
            let mut spec = plugin_route();
            spec["rules"][0]["matches"] = json!([{"path": path}]);
            messages("HTTPRoute", spec)
        };
        assert_eq!(with_path(json!({"value": "/api/v1"})), Vec::<String>::new());
        assert_eq!(
            with_path(json!({})),
            Vec::<String>::new(),
            "defaults: PathPrefix /"
        );
        assert_eq!(
            with_path(json!({"type": "Exact", "value": "api//v1"})),
            [
                "spec.rules[0].matches[0].path: Invalid value: \"object\": value must be an absolute path and start with '/' when type one of ['Exact', 'PathPrefix']",
                "spec.rules[0].matches[0].path: Invalid value: \"object\": must not contain '//' when type one of ['Exact', 'PathPrefix']",
            ]
        );
        assert_eq!(
            with_path(json!({"value": "/a b"})),
            [
                "spec.rules[0].matches[0].path: Invalid value: \"object\": must only contain valid characters (matching ^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$) for types ['Exact', 'PathPrefix']"
            ]
        );
        assert_eq!(
            with_path(json!({"value": "/caf%C3%A9"})),
            Vec::<String>::new()
        );
        assert_eq!(
            with_path(json!({"type": "RegularExpression", "value": "a b//"})),
            Vec::<String>::new()
        );
        assert_eq!(
            with_path(json!({"type": "Prefix", "value": "/"})),
            [
                "spec.rules[0].matches[0].path.type: Unsupported value: \"Prefix\": supported values: \"Exact\", \"PathPrefix\", \"RegularExpression\""
            ]
        );
    }

    #[test]
    fn list_bounds_and_a_redirect_beside_backends_are_refused() {
        let mut spec = plugin_route();
        let rule = spec["rules"][0].clone();
        spec["rules"] = Value::Array(vec![rule; 17]);
        let out = messages("HTTPRoute", spec.clone());
        assert_eq!(
            out,
            ["spec.rules: Too many: 17: must have at most 16 items"]
        );
        // Matches: 64 per rule, 128 in all.
        spec["rules"] = json!([{"matches": vec![json!({}); 65]}, {"matches": vec![json!({}); 64]}]);
        assert_eq!(
            messages("HTTPRoute", spec.clone()),
            [
                "spec.rules[0].matches: Too many: 65: must have at most 64 items",
                "spec.rules: Invalid value: \"array\": While 16 rules and 64 matches per rule are allowed, the total number of matches across all rules in a route must be less than 128",
            ]
        );
        spec["rules"] = json!([{
            "filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https"}}],
            "backendRefs": [{"name": "stable", "port": 80}],
        }]);
        assert_eq!(
            messages("HTTPRoute", spec),
            [
                "spec.rules[0]: Invalid value: \"object\": RequestRedirect filter must not be used together with backendRefs"
            ]
        );
    }
}
