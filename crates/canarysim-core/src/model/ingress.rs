//! Kubernetes' Ingress and IngressClass (`networking.k8s.io/v1`) as ingress-nginx reads
//! them: typed read-only views of the rules it routes by, the canary annotations
//! (`internal/ingress/annotations/canary/main.go`), and which Ingresses the controller
//! serves (its class: `--ingress-class`, `spec.ingressClassName`, the
//! `kubernetes.io/ingress.class` annotation, a default IngressClass).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::object::Kind;
use super::stored_kind;
use super::{Object, Objects};

/// The Ingress API's group.
pub(crate) const GROUP: &str = "networking.k8s.io";

/// ingress-nginx's default `--annotations-prefix`, also Argo's default `annotationPrefix`.
pub const DEFAULT_ANNOTATION_PREFIX: &str = "nginx.ingress.kubernetes.io";

/// The class ingress-nginx serves by default (`--ingress-class`).
pub const DEFAULT_CLASS: &str = "nginx";

/// The `spec.controller` of an IngressClass ingress-nginx serves (`--controller-class`).
pub const CONTROLLER: &str = "k8s.io/ingress-nginx";

/// The annotation that named an Ingress's class before `spec.ingressClassName`.
pub const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

/// The IngressClass annotation that makes it the class of Ingresses that name none.
const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";

/// The Ingress kind.
pub fn ingress_kind() -> Kind {
    Kind::Stored(stored_kind::known(GROUP, "Ingress").expect("a described kind"))
}

/// The IngressClass kind.
pub fn ingress_class_kind() -> Kind {
    Kind::Stored(stored_kind::known(GROUP, "IngressClass").expect("a described kind"))
}

/// Whether objects of `kind` are routed by (the Ingress) or read (the IngressClass).
pub(crate) fn is_simulated(kind: stored_kind::StoredKind) -> bool {
    kind.info().group == GROUP && ["Ingress", "IngressClass"].contains(&kind.info().kind)
}

/// `Ingress.spec`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IngressSpec {
    pub ingress_class_name: Option<String>,
    pub default_backend: Option<IngressBackend>,
    #[serde(default)]
    pub rules: Vec<IngressRule>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct IngressRule {
    /// None or empty: every host (ingress-nginx's catch-all server `_`).
    pub host: Option<String>,
    pub http: Option<HttpIngressRuleValue>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct HttpIngressRuleValue {
    #[serde(default)]
    pub paths: Vec<HttpIngressPath>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpIngressPath {
    pub path: Option<String>,
    /// `Exact`, `Prefix` or `ImplementationSpecific` (ingress-nginx: a prefix).
    pub path_type: Option<String>,
    #[serde(default)]
    pub backend: IngressBackend,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct IngressBackend {
    pub service: Option<IngressServiceBackend>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct IngressServiceBackend {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub port: ServiceBackendPort,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ServiceBackendPort {
    pub name: Option<String>,
    pub number: Option<u32>,
}

/// One path of one rule, with ingress-nginx's defaults filled in.
#[derive(Debug, Clone)]
pub struct IngressPath<'a> {
    /// `rules[i].http.paths[j]`, for notes.
    pub label: String,
    /// Empty: every host.
    pub host: &'a str,
    /// `/` when empty or left out (ingress-nginx's store).
    pub path: &'a str,
    /// `Exact` or `Prefix`: ingress-nginx reads `ImplementationSpecific`, and a path type
    /// left out, as `Prefix` (`SetDefaultNGINXPathType`).
    pub path_type: &'a str,
    /// None: a resource backend.
    pub service: Option<&'a IngressServiceBackend>,
    /// The path type as written is not `ImplementationSpecific`: ingress-nginx's strict
    /// path validation applies to it.
    pub strictly_validated: bool,
}

impl IngressPath<'_> {
    /// What ingress-nginx's admission says of the path with `strict-validate-path-type` (on
    /// by default since v1.12: `inspector.ValidatePathType`): an `Exact` or `Prefix` path
    /// must be letters, digits and `._-/` after its leading `/`.
    pub fn strict_validation_error(&self) -> Option<String> {
        let valid = self.path.strip_prefix('/').is_some_and(|rest| {
            rest.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c))
        });
        (self.strictly_validated && !valid).then(|| {
            format!(
                "{}: path {:?} cannot be used with pathType {}: ingress-nginx's admission webhook refuses the Ingress (strict-validate-path-type, on by default since v1.12); a regex path needs pathType ImplementationSpecific. Routed as written, as a controller without the webhook serves it",
                self.label, self.path, self.path_type
            )
        })
    }

    /// Whether the two are the same location (host, path and path type).
    pub fn same_location(&self, host: &str, path: &str, path_type: &str) -> bool {
        self.host == host && self.path == path && self.path_type == path_type
    }
}

impl IngressSpec {
    /// Every path of every rule, in order.
    pub fn paths(&self) -> impl Iterator<Item = IngressPath<'_>> {
        self.rules.iter().enumerate().flat_map(|(i, rule)| {
            let host = rule.host.as_deref().unwrap_or("");
            let paths = rule.http.iter().flat_map(|h| h.paths.iter());
            paths.enumerate().map(move |(j, p)| IngressPath {
                label: format!("rules[{i}].http.paths[{j}]"),
                host,
                path: p.path.as_deref().filter(|p| !p.is_empty()).unwrap_or("/"),
                path_type: match p.path_type.as_deref() {
                    Some("Exact") => "Exact",
                    _ => "Prefix",
                },
                service: p.backend.service.as_ref(),
                strictly_validated: p.path_type.as_deref() != Some("ImplementationSpecific"),
            })
        })
    }

    /// The Services every path of every rule names.
    pub fn rule_services(&self) -> impl Iterator<Item = &str> {
        self.paths()
            .filter_map(|p| p.service)
            .map(|s| s.name.as_str())
    }
}

/// The canary annotations as ingress-nginx parses them: a value that does not parse is its
/// default (`canary` false, `canary-weight` 0, `canary-weight-total` 100, the rest empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanaryAnnotations {
    pub enabled: bool,
    pub weight: i64,
    pub weight_total: i64,
    pub header: String,
    pub header_value: String,
    pub header_pattern: String,
    pub cookie: String,
}

/// Go's `strconv.ParseBool` true (anything else, including what it refuses, is false).
fn go_bool(v: &str) -> bool {
    matches!(v, "1" | "t" | "T" | "TRUE" | "true" | "True")
}

/// Whether an Ingress's locations are regular expressions to ingress-nginx: `use-regex:
/// "true"`, or a `rewrite-target` other than the path itself (`needsRewrite`). One such
/// location makes every location of its host a regex (`enforceRegexModifier`).
pub fn makes_regex_location(
    annotations: &BTreeMap<String, String>,
    prefix: &str,
    path: &str,
) -> bool {
    let get = |name: &str| annotations.get(&format!("{prefix}/{name}"));
    // The rewrite annotation's parser trims the target and reads one it refuses as empty
    // (`RegexPathWithCapture`).
    let target = get("rewrite-target").map_or("", |t| t.trim());
    let valid_target = target
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-._~/:$".contains(c));
    get("use-regex").is_some_and(|v| go_bool(v))
        || (valid_target && !target.is_empty() && target != path)
}

impl CanaryAnnotations {
    /// The canary annotations of `annotations` under `prefix`; Err when a canary setting is
    /// given without `canary: "true"` (the controller then ignores every one of them).
    pub fn parse(
        annotations: &BTreeMap<String, String>,
        prefix: &str,
    ) -> Result<CanaryAnnotations, String> {
        Self::parse_noting(annotations, prefix, &mut Vec::new())
    }

    /// [`CanaryAnnotations::parse`], with a note in `dropped` for each value ingress-nginx's
    /// annotation validation (on by default) refuses: it reads such a value as empty.
    pub fn parse_noting(
        annotations: &BTreeMap<String, String>,
        prefix: &str,
        dropped: &mut Vec<String>,
    ) -> Result<CanaryAnnotations, String> {
        let get = |name: &str| annotations.get(&format!("{prefix}/{name}"));
        // `strconv.Atoi`: no spaces.
        let int = |name: &str, default: i64| {
            get(name)
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(default)
        };
        let mut text = |name: &str, valid: fn(&str) -> bool| {
            let Some(raw) = get(name).filter(|v| !v.is_empty()) else {
                return String::new();
            };
            if !valid(raw) || raw.contains(['\r', '\n']) {
                dropped.push(format!(
                    "{prefix}/{name}: {raw:?} has characters ingress-nginx's annotation validation refuses; it reads the annotation as empty"
                ));
                return String::new();
            }
            // `normalizeString`: each line trimmed.
            raw.lines().map(str::trim).collect::<Vec<_>>().join("\n")
        };
        let (header, header_value, header_pattern, cookie) = (
            text("canary-by-header", basic_chars),
            text("canary-by-header-value", basic_chars),
            text("canary-by-header-pattern", regex_chars),
            text("canary-by-cookie", basic_chars),
        );
        let c = CanaryAnnotations {
            enabled: get("canary").is_some_and(|v| go_bool(v)),
            weight: int("canary-weight", 0),
            weight_total: int("canary-weight-total", 100),
            header,
            header_value,
            header_pattern,
            cookie,
        };
        let configured = c.weight > 0
            || !c.header.is_empty()
            || !c.header_value.is_empty()
            || !c.cookie.is_empty()
            || !c.header_pattern.is_empty();
        if !c.enabled && configured {
            return Err(format!(
                "{prefix}/canary: configured but not enabled; the canary settings are ignored"
            ));
        }
        Ok(c)
    }

    /// The share of requests the weight sends to the canary, as `balancer.lua` draws it:
    /// `math.random(total) <= weight`, where the total is `canary-weight-total` only when
    /// it is above 100.
    pub fn weight_share(&self) -> (u32, u32) {
        let total = if self.weight_total > 100 {
            self.weight_total
        } else {
            100
        };
        let mut canary = self.weight.clamp(0, total);
        let mut total = total;
        // A route's weights are 32-bit: an absurd total keeps its ratio, halved.
        while total > i64::from(u32::MAX) {
            (canary, total) = (canary / 2, total / 2);
        }
        (canary as u32, total as u32)
    }
}

/// ingress-nginx's session affinity annotations on one Ingress
/// (`internal/ingress/annotations/sessionaffinity`), as far as they decide where a request
/// goes: whether a cookie pins a client to a backend, how, the cookie's name, and whether
/// a canary backend is pinned too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionAffinity {
    /// `affinity` ("" when absent or refused). Only `cookie` makes balancer.lua's
    /// balancer sticky.
    pub kind: String,
    /// `affinity-mode` ("" when absent or refused: `balanced`).
    pub mode: String,
    /// `session-cookie-name` (default `INGRESSCOOKIE`).
    pub cookie: String,
    /// `affinity-canary-behavior: legacy`: a canary backend merged from this Ingress is not
    /// pinned (only the primary is); otherwise it takes the primary's affinity.
    pub legacy_canary: bool,
}

/// The cookie's name when `session-cookie-name` is not given.
pub const DEFAULT_AFFINITY_COOKIE: &str = "INGRESSCOOKIE";

impl SessionAffinity {
    /// The annotations under `prefix`, read as the controller reads them (each trimmed,
    /// `normalizeString`); a note in `dropped` for each value the annotation validation (on
    /// by default) refuses, which the controller reads as absent, and for each cookie
    /// setting canarysim does not simulate.
    pub fn parse_noting(
        annotations: &BTreeMap<String, String>,
        prefix: &str,
        dropped: &mut Vec<String>,
    ) -> SessionAffinity {
        let mut read = |name: &str, valid: &dyn Fn(&str) -> bool, expected: &str| {
            let raw = annotations.get(&format!("{prefix}/{name}"))?;
            let value = raw.trim();
            if value.is_empty() {
                return None;
            }
            if raw.contains(['\r', '\n']) || !valid(value) {
                dropped.push(format!(
                    "{prefix}/{name}: {raw:?} is not {expected}; ingress-nginx's annotation validation reads it as absent"
                ));
                return None;
            }
            Some(value.to_string())
        };
        let kind = read("affinity", &|v| v == "cookie", "cookie").unwrap_or_default();
        let mode = read(
            "affinity-mode",
            &|v| v == "balanced" || v == "persistent",
            "balanced or persistent",
        )
        .unwrap_or_default();
        let behavior = read(
            "affinity-canary-behavior",
            &|v| v == "sticky" || v == "legacy",
            "sticky or legacy",
        );
        let mut cookie = DEFAULT_AFFINITY_COOKIE.to_string();
        if kind == "cookie" {
            if let Some(name) = read(
                "session-cookie-name",
                &basic_chars,
                "made of letters, digits and -._~/:",
            ) {
                cookie = name;
            }
            for name in [
                "session-cookie-expires",
                "session-cookie-max-age",
                "session-cookie-change-on-failure",
            ] {
                if let Some(v) = annotations.get(&format!("{prefix}/{name}")) {
                    dropped.push(format!(
                        "{prefix}/{name}: {v:?} is not simulated: a simulated client keeps its cookie for the whole load, and a failed request does not change it"
                    ));
                }
            }
        }
        SessionAffinity {
            kind,
            mode,
            cookie,
            legacy_canary: behavior.as_deref() == Some("legacy"),
        }
    }

    /// Whether balancer.lua pins clients of a backend with this affinity
    /// (`sessionAffinityConfig.name == "cookie"`).
    pub fn is_sticky(&self) -> bool {
        self.kind == "cookie"
    }
}

/// ingress-nginx's `BasicCharsRegex` (spaces removed first): letters, digits, `-._~/:`.
fn basic_chars(value: &str) -> bool {
    value
        .chars()
        .filter(|c| *c != ' ')
        .all(|c| c.is_ascii_alphanumeric() || "-._~/:".contains(c))
}

/// ingress-nginx's `IsValidRegex`: letters, digits, `-._~/:` and `^$[](){}*+?|&=\`.
fn regex_chars(value: &str) -> bool {
    value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-._~/:^$[](){}*+?|&=\\".contains(c))
}

/// Which Ingresses ingress-nginx serves: those of its class, by `spec.ingressClassName`
/// (an IngressClass whose `spec.controller` is ingress-nginx's, or, without IngressClass
/// objects, the class named `nginx`), by the older annotation, or, naming none, when an
/// IngressClass of ingress-nginx is marked default.
#[derive(Debug, Clone)]
pub struct ClassFilter {
    /// Class names the controller serves.
    classes: Vec<String>,
    /// Whether an Ingress that names no class is served.
    without_class: bool,
}

impl ClassFilter {
    /// The filter of an ingress-nginx installed with its defaults, given the stored
    /// IngressClasses.
    pub fn of(api: &dyn Objects) -> ClassFilter {
        let ingress_classes = api.objects(ingress_class_kind());
        let mut classes = Vec::new();
        let mut without_class = false;
        for c in &ingress_classes {
            if c.spec()["controller"].as_str() == Some(CONTROLLER) {
                classes.push(c.name().to_string());
                without_class |=
                    c.annotations().get(DEFAULT_CLASS_ANNOTATION) == Some(&"true".to_string());
            }
        }
        if !classes.iter().any(|c| c == DEFAULT_CLASS) {
            // ingress-nginx's chart creates the IngressClass `nginx` of its controller: a
            // cluster's manifests seldom carry it.
            classes.push(DEFAULT_CLASS.to_string());
        }
        ClassFilter {
            classes,
            without_class,
        }
    }

    /// Whether the controller serves `ingress`; Err says why not.
    pub fn serves(&self, ingress: &Object, spec: &IngressSpec) -> Result<(), String> {
        // store.go: `spec.ingressClassName` first (an IngressClass of the controller), else
        // the annotation (exactly `--ingress-class`), else the default IngressClass (which
        // the API server writes into `spec.ingressClassName` when the Ingress is created).
        if let Some(c) = &spec.ingress_class_name {
            return if self.classes.contains(c) {
                Ok(())
            } else {
                Err(format!(
                    "spec.ingressClassName {c:?} names no IngressClass of {CONTROLLER} ({}); not served",
                    self.classes.join(", ")
                ))
            };
        }
        match ingress.annotations().get(CLASS_ANNOTATION) {
            Some(c) if c == DEFAULT_CLASS => Ok(()),
            Some(c) => Err(format!(
                "{CLASS_ANNOTATION} {c:?} is not ingress-nginx's --ingress-class ({DEFAULT_CLASS}); not served"
            )),
            None if self.without_class => Ok(()),
            None => Err(format!(
                "names no class and no IngressClass of {CONTROLLER} is the default; not served \
                 (set spec.ingressClassName: {DEFAULT_CLASS})"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (format!("{DEFAULT_ANNOTATION_PREFIX}/{k}"), v.to_string()))
            .collect()
    }

    #[test]
    fn the_weight_total_counts_only_above_one_hundred() {
        let c = |w: &str, t: &str| {
            CanaryAnnotations::parse(
                &annotations(&[
                    ("canary", "true"),
                    ("canary-weight", w),
                    ("canary-weight-total", t),
                ]),
                DEFAULT_ANNOTATION_PREFIX,
            )
            .unwrap()
            .weight_share()
        };
        // Argo's maxTrafficWeight 10 with setWeight 5: 5 of 100, not 5 of 10.
        assert_eq!(c("5", "10"), (5, 100));
        assert_eq!(c("5", "1000"), (5, 1000));
        assert_eq!(c("150", "100"), (100, 100));
        assert_eq!(c("x", "y"), (0, 100));
        // No overflow past 32 bits (ingress-nginx reads a 64-bit integer).
        let (w, t) = c("150", "4294967396");
        assert!(w <= t && t > 0, "{w} of {t}");
    }

    #[test]
    fn canary_settings_without_canary_true_are_refused() {
        let e = CanaryAnnotations::parse(
            &annotations(&[("canary-weight", "20")]),
            DEFAULT_ANNOTATION_PREFIX,
        )
        .unwrap_err();
        assert!(e.contains("configured but not enabled"), "{e}");
        let off = CanaryAnnotations::parse(&annotations(&[]), DEFAULT_ANNOTATION_PREFIX).unwrap();
        assert!(!off.enabled);
    }

    #[test]
    fn values_ingress_nginx_validation_refuses_are_read_as_empty() {
        let mut dropped = Vec::new();
        let c = CanaryAnnotations::parse_noting(
            &annotations(&[
                ("canary", "true"),
                ("canary-weight", " 5"),
                ("canary-by-header", "X-Canary"),
                ("canary-by-header-value", "v=2"),
                ("canary-by-header-pattern", "^beta.*$"),
                ("canary-by-cookie", "a b"),
            ]),
            DEFAULT_ANNOTATION_PREFIX,
            &mut dropped,
        )
        .unwrap();
        assert_eq!(c.weight, 0, "Atoi refuses a space");
        assert_eq!(c.header, "X-Canary");
        assert_eq!(c.header_value, "", "`=` is no basic character");
        assert_eq!(c.header_pattern, "^beta.*$");
        assert_eq!(c.cookie, "a b", "spaces are removed before the check only");
        assert_eq!(dropped.len(), 1, "{dropped:?}");
    }
}
