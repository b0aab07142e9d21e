//! Matchers compiled at translate time and evaluated per request without allocating:
//! virtual-host patterns (exact, `*.suffix`, `*`) and Istio `StringMatch` (exact / prefix /
//! regex, regexes anchored and compiled once).

use regex::Regex;

use crate::endpoints::{CLUSTER_DOMAIN_SUFFIX, strip_port};
use crate::model::rollout::StringMatch;

/// A VirtualService host (or Service host, or SNI host) as a virtual-host domain.
#[derive(Debug, Clone)]
pub enum HostPattern {
    /// One host. For a Kubernetes Service host, `short` holds (name, namespace) so that the
    /// forms a sidecar also accepts match: `name` (from that namespace), `name.ns`,
    /// `name.ns.svc`.
    Exact {
        fqdn: String,
        short: Option<(String, String)>,
    },
    /// `*.example.com`: stored as `.example.com`; matches hosts with at least one more
    /// character in front.
    Suffix(String),
    /// `*`
    Any,
}

impl HostPattern {
    /// Interprets a VirtualService host written in `namespace`. As in Istio, a short name
    /// (no dot) means `<name>.<namespace>.svc.cluster.local`.
    pub fn parse(host: &str, namespace: &str) -> HostPattern {
        let host = host.trim().to_ascii_lowercase();
        if host == "*" {
            HostPattern::Any
        } else if let Some(suffix) = host.strip_prefix('*') {
            HostPattern::Suffix(suffix.to_string())
        } else if !host.contains('.') {
            HostPattern::exact(format!("{host}.{namespace}{CLUSTER_DOMAIN_SUFFIX}"))
        } else {
            HostPattern::exact(host)
        }
    }

    /// A TLS server name as written (`sniHosts`): SNI is what the client sent, never a short
    /// Service name to qualify; `*` and `*.suffix` are wildcards.
    pub fn server_name(name: &str) -> HostPattern {
        let name = name.trim().to_ascii_lowercase();
        if name == "*" {
            HostPattern::Any
        } else if let Some(suffix) = name.strip_prefix('*') {
            HostPattern::Suffix(suffix.to_string())
        } else {
            HostPattern::Exact {
                fqdn: name,
                short: None,
            }
        }
    }

    /// An exact host; cluster-local FQDNs also accept their short forms.
    pub fn exact(fqdn: String) -> HostPattern {
        let short = fqdn
            .strip_suffix(CLUSTER_DOMAIN_SUFFIX)
            .and_then(|rest| rest.split_once('.'))
            .filter(|(name, ns)| !name.is_empty() && !ns.is_empty() && !ns.contains('.'))
            .map(|(name, ns)| (name.to_string(), ns.to_string()));
        HostPattern::Exact { fqdn, short }
    }

    /// Matches `host` (port already stripped) from a caller in `caller_namespace`.
    pub fn matches(&self, host: &str, caller_namespace: &str) -> bool {
        match self {
            HostPattern::Any => true,
            HostPattern::Suffix(s) => host.len() > s.len() && ends_with_ci(host, s),
            HostPattern::Exact { fqdn, short } => {
                // Hosts are nearly always lower case already: one memcmp first.
                if host == fqdn || host.eq_ignore_ascii_case(fqdn) {
                    return true;
                }
                let Some((name, ns)) = short else {
                    return false;
                };
                if host.eq_ignore_ascii_case(name) {
                    return caller_namespace.eq_ignore_ascii_case(ns);
                }
                let Some(rest) = strip_prefix_ci(host, name).and_then(|r| r.strip_prefix('.'))
                else {
                    return false;
                };
                rest.eq_ignore_ascii_case(ns)
                    || strip_prefix_ci(rest, ns).is_some_and(|t| t.eq_ignore_ascii_case(".svc"))
            }
        }
    }

    /// Envoy picks the most specific virtual host: exact, then the longest suffix, then `*`.
    /// Lower sorts first.
    pub(crate) fn specificity(&self) -> (u8, usize) {
        match self {
            HostPattern::Exact { .. } => (0, 0),
            HostPattern::Suffix(s) => (1, usize::MAX - s.len()),
            HostPattern::Any => (2, 0),
        }
    }

    /// The pattern as Istio would print it.
    pub fn text(&self) -> String {
        match self {
            HostPattern::Exact { fqdn, .. } => fqdn.clone(),
            HostPattern::Suffix(s) => format!("*{s}"),
            HostPattern::Any => "*".into(),
        }
    }
}

impl PartialEq for HostPattern {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (HostPattern::Exact { fqdn: a, .. }, HostPattern::Exact { fqdn: b, .. }) => a == b,
            (HostPattern::Suffix(a), HostPattern::Suffix(b)) => a == b,
            (HostPattern::Any, HostPattern::Any) => true,
            _ => false,
        }
    }
}

/// The request host without its port.
pub(crate) fn request_host(host: &str) -> &str {
    strip_port(host)
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

fn ends_with_ci(s: &str, suffix: &str) -> bool {
    s.len() >= suffix.len()
        && s.get(s.len() - suffix.len()..)
            .is_some_and(|t| t.eq_ignore_ascii_case(suffix))
}

/// A compiled Istio `StringMatch`.
#[derive(Debug, Clone)]
pub enum StrMatcher {
    Exact(String),
    Prefix(String),
    /// The Gateway API's `PathPrefix` (Envoy's `path_separated_prefix`): the path is the
    /// prefix, or continues it with `/`; stored without a trailing `/`, empty for `/`
    /// (every path).
    SegmentPrefix(String),
    /// Anchored (`^(?:…)$`): Envoy's safe_regex matches the whole value (RE2 full match).
    Regex(Regex),
    /// `{}`: any value (for a header: the header is present).
    Any,
}

/// A match condition Envoy would not accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum MatchError {
    #[error("regex {pattern:?} does not compile: {reason}")]
    Regex { pattern: String, reason: String },
}

impl StrMatcher {
    /// Compiles a StringMatch; the error is worded for a route note.
    pub(crate) fn compile(m: &StringMatch) -> Result<StrMatcher, MatchError> {
        if let Some(e) = &m.exact {
            Ok(StrMatcher::Exact(e.clone()))
        } else if let Some(p) = &m.prefix {
            Ok(StrMatcher::Prefix(p.clone()))
        } else if let Some(r) = &m.regex {
            Regex::new(&format!("^(?:{r})$"))
                .map(StrMatcher::Regex)
                .map_err(|e| MatchError::Regex {
                    pattern: r.clone(),
                    reason: e.to_string(),
                })
        } else {
            Ok(StrMatcher::Any)
        }
    }

    /// A Gateway API `PathPrefix` value as a matcher (the trailing `/` is ignored).
    pub(crate) fn path_prefix(prefix: &str) -> StrMatcher {
        StrMatcher::SegmentPrefix(prefix.trim_end_matches('/').to_string())
    }

    pub fn matches(&self, value: &str) -> bool {
        match self {
            StrMatcher::Exact(e) => value == e,
            StrMatcher::Prefix(p) => value.starts_with(p.as_str()),
            StrMatcher::SegmentPrefix(p) => {
                value.starts_with(p.as_str())
                    && matches!(value.as_bytes().get(p.len()), None | Some(b'/'))
            }
            StrMatcher::Regex(r) => r.is_match(value),
            StrMatcher::Any => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_belong_to_the_virtual_service_namespace() {
        let p = HostPattern::parse("reviews", "bookinfo");
        for (host, caller) in [
            ("reviews", "bookinfo"),
            ("reviews.bookinfo", "elsewhere"),
            ("reviews.bookinfo.svc", "elsewhere"),
            ("reviews.bookinfo.svc.cluster.local", "elsewhere"),
            ("Reviews.Bookinfo.svc.cluster.local", ""),
        ] {
            assert!(p.matches(host, caller), "{host} from {caller}");
        }
        for (host, caller) in [
            ("reviews", "elsewhere"),
            ("reviews.other", "bookinfo"),
            ("reviewsx.bookinfo", "bookinfo"),
            ("reviews.bookinfo.svc.cluster", "bookinfo"),
        ] {
            assert!(!p.matches(host, caller), "{host} from {caller}");
        }
        assert_eq!(
            p,
            HostPattern::parse("reviews.bookinfo.svc.cluster.local", "x")
        );
    }

    #[test]
    fn wildcards_match_suffixes_and_everything() {
        let p = HostPattern::parse("*.example.com", "ns");
        assert!(p.matches("a.example.com", ""));
        assert!(p.matches("a.b.EXAMPLE.com", ""));
        assert!(!p.matches("example.com", ""));
        assert!(!p.matches(".example.com", ""));
        assert!(HostPattern::parse("*", "ns").matches("anything", ""));
        let other = HostPattern::parse("rollouts-demo.local", "ns");
        assert!(other.matches("rollouts-demo.local", "x"));
        assert!(!other.matches("rollouts-demo", "ns"));
        assert!(p.specificity() > other.specificity());
        assert!(HostPattern::parse("*.com", "").specificity() > p.specificity());
    }

    #[test]
    fn string_matches_are_exact_prefix_or_anchored_regex() {
        let m = |exact: Option<&str>, prefix: Option<&str>, regex: Option<&str>| {
            StrMatcher::compile(&StringMatch {
                exact: exact.map(Into::into),
                prefix: prefix.map(Into::into),
                regex: regex.map(Into::into),
            })
        };
        assert!(m(Some("/a"), None, None).unwrap().matches("/a"));
        assert!(!m(Some("/a"), None, None).unwrap().matches("/ab"));
        assert!(m(None, Some("/a"), None).unwrap().matches("/ab"));
        let r = m(None, None, Some("/v[0-9]+")).unwrap();
        assert!(r.matches("/v12"));
        assert!(!r.matches("/v12/x"), "regex matches the whole value");
        assert!(m(None, None, Some("(")).is_err());
        assert!(m(None, None, None).unwrap().matches("whatever"));
    }
}
