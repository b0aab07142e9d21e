//! Label and field selectors as the Kubernetes API reads them from `?labelSelector=` and
//! `?fieldSelector=` (kubectl's `-l` and `get NAME -w`).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::model::Object;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        }
    }

    fn key(&self) -> &str {
        match self {
            Requirement::Equals(k, _)
            | Requirement::NotEquals(k, _)
            | Requirement::In(k, _)
            | Requirement::NotIn(k, _)
            | Requirement::Exists(k)
            | Requirement::DoesNotExist(k) => k,
        }
    }

    /// `labels.Requirement.String()`: sets of values sorted.
    fn text(&self) -> String {
        let set = |vs: &[String]| {
            let mut vs = vs.to_vec();
            vs.sort();
            vs.dedup();
            vs.join(",")
        };
        match self {
            Requirement::Equals(k, v) => format!("{k}={v}"),
            Requirement::NotEquals(k, v) => format!("{k}!={v}"),
            Requirement::In(k, vs) => format!("{k} in ({})", set(vs)),
            Requirement::NotIn(k, vs) => format!("{k} notin ({})", set(vs)),
            Requirement::Exists(k) => k.clone(),
            Requirement::DoesNotExist(k) => format!("!{k}"),
        }
    }
}

/// A `metav1.LabelSelector` (`matchLabels`, `matchExpressions`) as Kubernetes writes it
/// (`LabelSelectorAsSelector(…).String()`): the requirements sorted by key, each set of
/// values sorted. None when an expression has an operator Kubernetes does not know.
pub(crate) fn label_selector_string(selector: &Value) -> Option<String> {
    let mut requirements: Vec<Requirement> =
        crate::model::object::string_map(selector.get("matchLabels"))
            .into_iter()
            .map(|(k, v)| Requirement::Equals(k, v))
            .collect();
    for e in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = e["key"].as_str().unwrap_or_default().to_string();
        let values: Vec<String> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        requirements.push(match e["operator"].as_str().unwrap_or_default() {
            "In" => Requirement::In(key, values),
            "NotIn" => Requirement::NotIn(key, values),
            "Exists" => Requirement::Exists(key),
            "DoesNotExist" => Requirement::DoesNotExist(key),
            _ => return None,
        });
    }
    requirements.sort_by(|a, b| a.key().cmp(b.key()));
    let texts: Vec<String> = requirements.iter().map(Requirement::text).collect();
    Some(texts.join(","))
}

/// What a list or watch selects: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    labels: Vec<Requirement>,
    /// Field requirements: (field, value, equal).
    fields: Vec<(String, String, bool)>,
}

/// The fields an Event is selected by, besides its name and namespace, as the API server
/// supports them (`kubectl describe` finds an object's events by `involvedObject.*`).
const EVENT_FIELDS: [&str; 11] = [
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

/// The value of a selectable field (`source` is the source's component); "" when absent,
/// as the API server compares a missing field.
fn field_value<'o>(object: &'o Object, field: &str) -> &'o str {
    match field {
        "metadata.name" => object.name(),
        "metadata.namespace" => object.namespace(),
        "source" => object.value["source"]["component"].as_str().unwrap_or(""),
        _ => field
            .split('.')
            .fold(&object.value, |v, key| &v[key])
            .as_str()
            .unwrap_or(""),
    }
}

impl Selector {
    /// Parses `labelSelector` and `fieldSelector`; the error is the message Kubernetes gives.
    pub fn parse(labels: Option<&str>, fields: Option<&str>) -> Result<Selector, String> {
        let mut selector = Selector::default();
        if let Some(text) = labels.filter(|t| !t.trim().is_empty()) {
            for term in split_terms(text) {
                selector.labels.push(label_requirement(term.trim())?);
            }
        }
        if let Some(text) = fields.filter(|t| !t.trim().is_empty()) {
            for term in text.split(',') {
                let term = term.trim();
                let (field, value, equal) = if let Some((f, v)) = term.split_once("!=") {
                    (f, v, false)
                } else if let Some((f, v)) = term.split_once("==") {
                    (f, v, true)
                } else if let Some((f, v)) = term.split_once('=') {
                    (f, v, true)
                } else {
                    return Err(format!(
                        "invalid selector: '{text}'; can't understand '{term}'"
                    ));
                };
                let field = field.trim();
                // Other kinds' own fields (a Pod's status.phase) are not selectable here; the
                // Event's are accepted for every kind and match nothing on other kinds.
                if field != "metadata.name"
                    && field != "metadata.namespace"
                    && !EVENT_FIELDS.contains(&field)
                {
                    return Err(format!(
                        "field label not supported: {field} (canarysim selects by metadata.name and metadata.namespace, and an Event by its involvedObject, reason, source and type)"
                    ));
                }
                selector
                    .fields
                    .push((field.to_string(), value.trim().to_string(), equal));
            }
        }
        Ok(selector)
    }

    /// Only the object named `name` (what a get by name turned into a watch selects).
    pub fn named(name: &str) -> Selector {
        Selector {
            labels: Vec::new(),
            fields: vec![("metadata.name".into(), name.into(), true)],
        }
    }

    pub fn matches(&self, object: &Object) -> bool {
        let fields_hold = self
            .fields
            .iter()
            .all(|(field, value, equal)| (field_value(object, field) == value) == *equal);
        if !fields_hold {
            return false;
        }
        if self.labels.is_empty() {
            return true;
        }
        let labels = object.labels();
        self.labels.iter().all(|r| r.matches(&labels))
    }
}

/// Splits on the commas that are not inside `in (a,b)`.
fn split_terms(text: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&text[start..]);
    terms
}

fn label_requirement(term: &str) -> Result<Requirement, String> {
    let bad = || {
        format!(
            "unable to parse requirement: found '{term}', expected: a label selector such as app=x, app!=x, app in (x,y), app notin (x), app or !app"
        )
    };
    if let Some(key) = term.strip_prefix('!') {
        return valid_key(key.trim())
            .map(Requirement::DoesNotExist)
            .ok_or_else(bad);
    }
    if let Some((k, v)) = term.split_once("!=") {
        let key = valid_key(k.trim()).ok_or_else(bad)?;
        return Ok(Requirement::NotEquals(key, v.trim().to_string()));
    }
    if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
        let key = valid_key(k.trim()).ok_or_else(bad)?;
        return Ok(Requirement::Equals(key, v.trim().to_string()));
    }
    for (word, negated) in [(" notin ", true), (" in ", false)] {
        if let Some((k, rest)) = term.split_once(word) {
            let key = valid_key(k.trim()).ok_or_else(bad)?;
            let list = rest
                .trim()
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(bad)?;
            let values = list.split(',').map(|v| v.trim().to_string()).collect();
            return Ok(if negated {
                Requirement::NotIn(key, values)
            } else {
                Requirement::In(key, values)
            });
        }
    }
    valid_key(term).map(Requirement::Exists).ok_or_else(bad)
}

fn valid_key(key: &str) -> Option<String> {
    let ok = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    ok.then(|| key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_selector_is_written_as_kubernetes_writes_it() {
        let selector = serde_json::json!({
            "matchLabels": {"zone": "a", "app": "demo"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["web", "api"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "track", "operator": "NotIn", "values": ["b", "a", "b"]},
            ]
        });
        assert_eq!(
            label_selector_string(&selector).as_deref(),
            Some("app=demo,!canary,tier in (api,web),track notin (a,b),zone=a")
        );
        let unknown = serde_json::json!({"matchExpressions": [{"key": "k", "operator": "Gt"}]});
        assert_eq!(label_selector_string(&unknown), None);
        assert_eq!(
            label_selector_string(&serde_json::json!({})).as_deref(),
            Some("")
        );
    }
    use crate::model::Kind;
    use serde_json::json;

    fn pod(name: &str, labels: serde_json::Value) -> Object {
        Object::new(
            Kind::Pod,
            json!({"metadata": {"name": name, "namespace": "demo", "labels": labels}}),
        )
    }

    #[test]
    fn label_selectors_read_every_form_kubectl_sends() {
        let a = pod("a", json!({"app": "demo", "tier": "web"}));
        let b = pod("b", json!({"app": "other"}));
        let pick = |l: &str| {
            let s = Selector::parse(Some(l), None).unwrap();
            [&a, &b]
                .iter()
                .filter(|o| s.matches(o))
                .map(|o| o.name().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(pick("app=demo"), ["a"]);
        assert_eq!(pick("app==demo,tier=web"), ["a"]);
        assert_eq!(pick("app!=demo"), ["b"]);
        assert_eq!(pick("app in (other, x)"), ["b"]);
        assert_eq!(pick("app notin (other),tier"), ["a"]);
        assert_eq!(pick("!tier"), ["b"]);
        assert!(Selector::parse(Some("app in other"), None).is_err());
    }

    #[test]
    fn field_selectors_pick_by_name_and_refuse_other_fields() {
        let s = Selector::parse(None, Some("metadata.name=a")).unwrap();
        assert!(s.matches(&pod("a", json!({}))));
        assert!(!s.matches(&pod("b", json!({}))));
        let err = Selector::parse(None, Some("status.phase=Running")).unwrap_err();
        assert!(
            err.contains("field label not supported: status.phase"),
            "{err}"
        );
    }

    #[test]
    fn events_are_selected_by_the_object_they_are_about_as_kubectl_describe_asks() {
        let event = |name: &str, about: &str, kind: &str| {
            let mut o = pod(name, json!({}));
            o.value["involvedObject"] = json!({"kind": kind, "name": about, "uid": "u-1"});
            o.value["source"] = json!({"component": "rollouts-controller"});
            o.value["type"] = json!("Normal");
            o
        };
        let describe = Selector::parse(
            None,
            Some("involvedObject.name=rollouts-demo,involvedObject.namespace=,involvedObject.kind=Rollout,involvedObject.uid=u-1"),
        )
        .unwrap();
        assert!(describe.matches(&event("e1", "rollouts-demo", "Rollout")));
        assert!(!describe.matches(&event("e2", "rollouts-demo", "Service")));
        assert!(!describe.matches(&event("e3", "other", "Rollout")));
        let by_source =
            Selector::parse(None, Some("source=rollouts-controller,type!=Warning")).unwrap();
        assert!(by_source.matches(&event("e4", "x", "Rollout")));
    }
}
