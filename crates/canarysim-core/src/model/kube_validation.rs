//! What the Kubernetes API server itself refuses in the fields canarysim reads: object and
//! namespace names, label keys and values, Service ports, replica counts, and the Gateway
//! API's routes (their CRDs' rules, in `model/gateway_api.rs`). In the API server's words
//! (`spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive`), so
//! that a manifest a cluster would refuse is refused here too, at its place.

use serde_json::Value;

use super::object::{Kind, Object};

/// One field the API server would refuse: its JSON pointer and the API server's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub pointer: String,
    pub message: String,
}

/// Every field of `object` the API server would refuse, in document order of the checks.
pub fn validate(object: &Object) -> Vec<Invalid> {
    let mut out = Vec::new();
    let v = &object.value;
    let name = v["metadata"]["name"].as_str().unwrap_or("");
    if !name.is_empty() {
        let problems = if object.kind == Kind::Service {
            // Services become DNS names: one label, starting with a letter.
            dns1035_label(name)
        } else {
            let mut p = path_segment(name);
            if p.is_empty() {
                p = dns1123_subdomain_errors(name);
            }
            p
        };
        invalid(
            &mut out,
            "/metadata/name",
            "metadata.name",
            &quoted(name),
            problems,
        );
    }
    if let Some(ns) = v["metadata"]["namespace"].as_str() {
        invalid(
            &mut out,
            "/metadata/namespace",
            "metadata.namespace",
            &quoted(ns),
            dns1123_label_errors(ns),
        );
    }
    labels(
        &mut out,
        &v["metadata"]["labels"],
        "/metadata/labels",
        "metadata.labels",
    );
    match object.kind {
        Kind::Service => service_ports(&mut out, &v["spec"]["ports"]),
        Kind::Rollout | Kind::ReplicaSet => {
            if let Some(n) = v["spec"]["replicas"].as_i64() {
                if n < 0 {
                    invalid(
                        &mut out,
                        "/spec/replicas",
                        "spec.replicas",
                        &n.to_string(),
                        vec!["must be greater than or equal to 0".into()],
                    );
                }
            }
            labels(
                &mut out,
                &v["spec"]["selector"]["matchLabels"],
                "/spec/selector/matchLabels",
                "spec.selector.matchLabels",
            );
            labels(
                &mut out,
                &v["spec"]["template"]["metadata"]["labels"],
                "/spec/template/metadata/labels",
                "spec.template.metadata.labels",
            );
        }
        Kind::Stored(_) => {
            if let Some(route) = super::gateway_api::route_kind(object.kind) {
                super::gateway_api::validate_route(route, &v["spec"], &mut out);
            }
        }
        _ => {}
    }
    out
}

/// `field: Invalid value: VALUE: problem[, problem…]`, as the API server joins them.
fn invalid(out: &mut Vec<Invalid>, pointer: &str, field: &str, value: &str, problems: Vec<String>) {
    if problems.is_empty() {
        return;
    }
    out.push(Invalid {
        pointer: pointer.to_string(),
        message: format!("{field}: Invalid value: {value}: {}", problems.join(", ")),
    });
}

fn quoted(s: &str) -> String {
    format!("{s:?}")
}

fn service_ports(out: &mut Vec<Invalid>, ports: &Value) {
    let Some(ports) = ports.as_array() else {
        return;
    };
    // A name and a (port, protocol) pair may each be listed once (ValidateService).
    let mut names = std::collections::HashSet::new();
    let mut numbers = std::collections::HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let field = format!("spec.ports[{i}]");
        let pointer = format!("/spec/ports/{i}");
        if let Some(name) = p["name"].as_str().filter(|n| !n.is_empty()) {
            if !names.insert(name) {
                out.push(Invalid {
                    pointer: format!("{pointer}/name"),
                    message: format!("{field}.name: Duplicate value: {}", quoted(name)),
                });
            }
        }
        if let Some(port) = p["port"].as_i64() {
            // The API server defaults the protocol to TCP before it validates.
            let protocol = p["protocol"].as_str().unwrap_or("TCP");
            if !numbers.insert((port, protocol)) {
                out.push(Invalid {
                    pointer: pointer.clone(),
                    message: format!(
                        "{field}: Duplicate value: port {port}/{protocol} (a port and protocol may be listed once)"
                    ),
                });
            }
        }
        match &p["port"] {
            Value::Null => out.push(Invalid {
                pointer: pointer.clone(),
                message: format!("{field}.port: Required value"),
            }),
            Value::Number(n) => {
                if let Some(problem) = port_number(n.as_i64()) {
                    invalid(
                        out,
                        &format!("{pointer}/port"),
                        &format!("{field}.port"),
                        &n.to_string(),
                        vec![problem],
                    );
                }
            }
            // Other types are the schema's to refuse (typed views), in its words.
            _ => {}
        }
        match &p["targetPort"] {
            Value::Number(n) => {
                if let Some(problem) = port_number(n.as_i64()) {
                    invalid(
                        out,
                        &format!("{pointer}/targetPort"),
                        &format!("{field}.targetPort"),
                        &n.to_string(),
                        vec![problem],
                    );
                }
            }
            Value::String(s) => invalid(
                out,
                &format!("{pointer}/targetPort"),
                &format!("{field}.targetPort"),
                &quoted(s),
                port_name(s),
            ),
            _ => {}
        }
    }
}

fn port_number(n: Option<i64>) -> Option<String> {
    match n {
        Some(1..=65535) => None,
        _ => Some("must be between 1 and 65535, inclusive".into()),
    }
}

/// IANA_SVC_NAME, as a named `targetPort` must be.
fn port_name(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > 15 {
        out.push("must be no more than 15 characters".into());
    }
    if !s
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        out.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if s.contains("--") {
        out.push("must not contain consecutive hyphens".into());
    }
    if !s.chars().any(|c| c.is_ascii_lowercase()) {
        out.push("must contain at least one letter (a-z)".into());
    }
    if s.starts_with('-') || s.ends_with('-') {
        out.push("must not begin or end with a hyphen".into());
    }
    out
}

fn labels(out: &mut Vec<Invalid>, labels: &Value, pointer: &str, field: &str) {
    let Some(labels) = labels.as_object() else {
        return;
    };
    for (key, value) in labels {
        let at = format!("{pointer}/{}", super::yaml::escape_pointer(key));
        invalid(out, &at, field, &quoted(key), qualified_name_errors(key));
        if let Some(value) = value.as_str() {
            invalid(
                out,
                &at,
                &format!("{field}[{key}]"),
                &quoted(value),
                label_value_errors(value),
            );
        }
    }
}

/// Names used in URL paths (every object's): never `.`, `..`, or holding `/` or `%`.
fn path_segment(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    let mut out = Vec::new();
    for c in ['/', '%'] {
        if name.contains(c) {
            out.push(format!("may not contain '{c}'"));
        }
    }
    out
}

const DNS1035_LABEL_ERR: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";

/// `IsDNS1035Label`: a DNS-1123 label that starts with a letter.
fn dns1035_label(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > 63 {
        out.push(max_len_error(63));
    }
    if !(matches_dns1123_label(s) && s.starts_with(|c: char| c.is_ascii_lowercase())) {
        out.push(regex_error(
            DNS1035_LABEL_ERR,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    out
}

// Kubernetes name syntax (apimachinery `pkg/util/validation`), shared with Argo's validation
// of a Rollout's labels and names (`controller::validation`).

const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";

/// `RegexError`.
pub(crate) fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{e}', "));
    }
    out.push_str(&format!("regex used for validation is '{fmt}')"));
    out
}

pub(crate) fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, anchored.
pub(crate) fn matches_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, anchored.
pub(crate) fn matches_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    let ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => ok(f) && ok(l) && b.iter().all(|c| ok(c) || *c == b'-'),
        _ => false,
    }
}

pub(crate) fn dns1123_label_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !matches_dns1123_label(value) {
        errs.push(regex_error(
            DNS1123_LABEL_ERR,
            DNS1123_LABEL_FMT,
            &["my-name", "123-abc"],
        ));
    }
    errs
}

pub(crate) fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !value.split('.').all(matches_dns1123_label) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// `IsQualifiedName`.
pub(crate) fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    dns1123_subdomain_errors(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_ERR,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !matches_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

pub(crate) fn is_qualified_name(value: &str) -> bool {
    qualified_name_errors(value).is_empty()
}

/// `IsValidLabelValue`.
pub(crate) fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !value.is_empty() && !matches_qualified_name_part(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problems(kind: Kind, value: Value) -> Vec<String> {
        validate(&Object::new(kind, value))
            .into_iter()
            .map(|i| format!("{} {}", i.pointer, i.message))
            .collect()
    }

    #[test]
    fn the_walkthrough_shapes_are_valid() {
        let svc = json!({"metadata": {"name": "rollouts-demo-canary", "namespace": "my-demo",
            "labels": {"app.kubernetes.io/name": "demo", "tier": ""}},
            "spec": {"ports": [{"port": 80, "targetPort": "http"}, {"port": 443, "targetPort": 8443}]}});
        assert_eq!(problems(Kind::Service, svc), Vec::<String>::new());
        let ro = json!({"metadata": {"name": "rollouts-demo.v2"}, "spec": {"replicas": 0,
            "selector": {"matchLabels": {"app": "rollouts-demo"}}}});
        assert_eq!(problems(Kind::Rollout, ro), Vec::<String>::new());
    }

    #[test]
    fn what_the_api_server_refuses_is_refused_in_its_words() {
        for port in [json!(0), json!(70000), json!(-1)] {
            let p = problems(
                Kind::Service,
                json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": port}]}}),
            );
            assert_eq!(
                p,
                vec![format!(
                    "/spec/ports/0/port spec.ports[0].port: Invalid value: {port}: must be between 1 and 65535, inclusive"
                )]
            );
        }
        let p = problems(
            Kind::Service,
            json!({"metadata": {"name": "s"}, "spec": {"ports": [{"targetPort": "HTTP--"}]}}),
        );
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(
            p[0].ends_with("spec.ports[0].port: Required value"),
            "{p:?}"
        );
        assert!(
            p[1].contains("must contain only alpha-numeric")
                && p[1].contains("consecutive hyphens"),
            "{p:?}"
        );
        for (name, says) in [
            ("../../x", "may not contain '/'"),
            ("..", "may not be '..'"),
            ("a/b", "may not contain '/'"),
            ("Bad_Name", "RFC 1123 subdomain"),
        ] {
            let p = problems(Kind::Rollout, json!({"metadata": {"name": name}}));
            assert!(p.len() == 1 && p[0].contains(says), "{name}: {p:?}");
        }
        let p = problems(
            Kind::Service,
            json!({"metadata": {"name": "s"}, "spec": {"ports": [
                {"name": "a", "port": 80}, {"name": "a", "port": 81},
                {"name": "b", "port": 80}, {"name": "c", "port": 80, "protocol": "UDP"}]}}),
        );
        assert_eq!(
            p,
            vec![
                "/spec/ports/1/name spec.ports[1].name: Duplicate value: \"a\"",
                "/spec/ports/2 spec.ports[2]: Duplicate value: port 80/TCP (a port and protocol may be listed once)",
            ]
        );
        let p = problems(Kind::Service, json!({"metadata": {"name": "9lives"}}));
        assert!(p[0].contains("DNS-1035 label"), "{p:?}");
        let p = problems(
            Kind::Rollout,
            json!({"metadata": {"name": "r"}, "spec": {"replicas": -1}}),
        );
        assert_eq!(
            p,
            vec![
                "/spec/replicas spec.replicas: Invalid value: -1: must be greater than or equal to 0"
            ]
        );
        let p = problems(
            Kind::Rollout,
            json!({"metadata": {"name": "r", "labels": {"app": "-x"}}}),
        );
        assert!(
            p[0].contains("metadata.labels[app]: Invalid value: \"-x\""),
            "{p:?}"
        );
    }
}
