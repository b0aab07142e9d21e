//! `Table` answers (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`): the columns
//! `kubectl get` prints, computed by the server as Kubernetes computes them: the CRDs'
//! `additionalPrinterColumns` for Argo's and Istio's kinds, the built-in printers for Pods,
//! Services, ReplicaSets, Deployments, StatefulSets, ConfigMaps, Secrets and Events. Ages are
//! counted on the simulated clock.

use serde_json::{Value, json};

use crate::clock::SimTime;
use crate::model::{Kind, Object};

/// How a Table row carries its object (`?includeObject=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    None,
    #[default]
    Metadata,
    Object,
}

impl IncludeObject {
    pub fn parse(text: &str) -> Option<IncludeObject> {
        match text {
            "None" => Some(IncludeObject::None),
            "Metadata" => Some(IncludeObject::Metadata),
            "Object" => Some(IncludeObject::Object),
            _ => None,
        }
    }
}

/// What a cell shows.
#[derive(Debug, Clone, Copy)]
enum Cell {
    Name,
    /// A CRD printer column: the value at a dotted path; lists and maps as JSON.
    Path(&'static str),
    Age,
    PodReady,
    PodStatus,
    PodRestarts,
    /// `spec.type`, `ClusterIP` when unset (the API's default).
    ServiceType,
    /// `spec.clusterIP`; canarysim allocates none.
    ClusterIp,
    ServiceExternalIp,
    ServicePorts,
    Selector,
    Containers,
    Images,
    /// Entries of a ConfigMap's or Secret's `data` and `binaryData`.
    DataCount,
    /// How long ago the timestamp at a path was (an Event's LAST SEEN, FIRST SEEN).
    Since(&'static str),
    /// An Event's OBJECT: `rollout/rollouts-demo`.
    InvolvedObject,
    /// A count in the status, 0 when unset (a Deployment's UP-TO-DATE, AVAILABLE).
    Count(&'static str),
    /// A Deployment's or StatefulSet's READY: ready replicas / `spec.replicas` (1 unset).
    ReadyOfDesired,
    /// An Ingress's cells.
    Ingress(IngressCell),
}

#[derive(Debug, Clone, Copy)]
enum IngressCell {
    /// CLASS: `spec.ingressClassName`, `<none>` when unset.
    Class,
    /// HOSTS: its rules' hosts (`*` for none), three at most, `+ N more...`.
    Hosts,
    /// ADDRESS: its load balancer's IPs and host names.
    Address,
    /// PORTS: `80`, and `443` with TLS.
    Ports,
}

struct Column {
    name: &'static str,
    kind: &'static str,
    priority: u8,
    cell: Cell,
}

const fn col(name: &'static str, kind: &'static str, cell: Cell) -> Column {
    Column {
        name,
        kind,
        priority: 0,
        cell,
    }
}

const fn wide(name: &'static str, kind: &'static str, cell: Cell) -> Column {
    Column {
        name,
        kind,
        priority: 1,
        cell,
    }
}

/// Kubernetes' columns for `kubectl get events`: the name only in the wide view.
fn event_columns() -> Vec<Column> {
    vec![
        col("Last Seen", "string", Cell::Since("lastTimestamp")),
        col("Type", "string", Cell::Path("type")),
        col("Reason", "string", Cell::Path("reason")),
        col("Object", "string", Cell::InvolvedObject),
        wide(
            "Subobject",
            "string",
            Cell::Path("involvedObject.fieldPath"),
        ),
        wide("Source", "string", Cell::Path("source.component")),
        col("Message", "string", Cell::Path("message")),
        wide("First Seen", "string", Cell::Since("firstTimestamp")),
        wide("Count", "string", Cell::Path("count")),
        wide("Name", "string", Cell::Name),
    ]
}

fn columns(kind: Kind) -> Vec<Column> {
    if matches!(kind, Kind::Stored(s) if s.info().group.is_empty() && s.info().kind == "Event") {
        return event_columns();
    }
    let mut out = vec![col("Name", "string", Cell::Name)];
    out.extend(match kind {
        Kind::Rollout => vec![
            col("Desired", "integer", Cell::Path("spec.replicas")),
            col("Current", "integer", Cell::Path("status.replicas")),
            col(
                "Up-to-date",
                "integer",
                Cell::Path("status.updatedReplicas"),
            ),
            col(
                "Available",
                "integer",
                Cell::Path("status.availableReplicas"),
            ),
            col("Age", "date", Cell::Age),
        ],
        Kind::AnalysisRun | Kind::Experiment => vec![
            col("Status", "string", Cell::Path("status.phase")),
            col("Age", "date", Cell::Age),
        ],
        Kind::VirtualService => vec![
            col("Gateways", "string", Cell::Path("spec.gateways")),
            col("Hosts", "string", Cell::Path("spec.hosts")),
            col("Age", "date", Cell::Age),
        ],
        Kind::DestinationRule => vec![
            col("Host", "string", Cell::Path("spec.host")),
            col("Age", "date", Cell::Age),
        ],
        Kind::Pod => vec![
            col("Ready", "string", Cell::PodReady),
            col("Status", "string", Cell::PodStatus),
            col("Restarts", "string", Cell::PodRestarts),
            col("Age", "string", Cell::Age),
            wide("IP", "string", Cell::Path("status.podIP")),
            wide("Node", "string", Cell::Path("spec.nodeName")),
        ],
        Kind::Service => vec![
            col("Type", "string", Cell::ServiceType),
            col("Cluster-IP", "string", Cell::ClusterIp),
            col("External-IP", "string", Cell::ServiceExternalIp),
            col("Port(s)", "string", Cell::ServicePorts),
            col("Age", "string", Cell::Age),
            wide("Selector", "string", Cell::Selector),
        ],
        Kind::ReplicaSet => vec![
            col("Desired", "integer", Cell::Path("spec.replicas")),
            col("Current", "integer", Cell::Path("status.replicas")),
            col("Ready", "integer", Cell::Path("status.readyReplicas")),
            col("Age", "string", Cell::Age),
            wide("Containers", "string", Cell::Containers),
            wide("Images", "string", Cell::Images),
            wide("Selector", "string", Cell::Selector),
        ],
        Kind::Stored(s) if s.info().group == "apps" && s.info().kind == "Deployment" => vec![
            col("Ready", "string", Cell::ReadyOfDesired),
            col(
                "Up-to-date",
                "integer",
                Cell::Count("status.updatedReplicas"),
            ),
            col(
                "Available",
                "integer",
                Cell::Count("status.availableReplicas"),
            ),
            col("Age", "string", Cell::Age),
            wide("Containers", "string", Cell::Containers),
            wide("Images", "string", Cell::Images),
            wide("Selector", "string", Cell::Selector),
        ],
        Kind::Stored(s) if s.info().group == "apps" && s.info().kind == "StatefulSet" => vec![
            col("Ready", "string", Cell::ReadyOfDesired),
            col("Age", "string", Cell::Age),
            wide("Containers", "string", Cell::Containers),
            wide("Images", "string", Cell::Images),
        ],
        Kind::Stored(s) if s.info().group.is_empty() && s.info().kind == "ConfigMap" => vec![
            col("Data", "integer", Cell::DataCount),
            col("Age", "string", Cell::Age),
        ],
        Kind::Stored(s) if s.info().group.is_empty() && s.info().kind == "Secret" => vec![
            col("Type", "string", Cell::Path("type")),
            col("Data", "integer", Cell::DataCount),
            col("Age", "string", Cell::Age),
        ],
        // kubectl's printIngress and printIngressClass.
        Kind::Stored(s) if s.info().group == "networking.k8s.io" && s.info().kind == "Ingress" => {
            vec![
                col("Class", "string", Cell::Ingress(IngressCell::Class)),
                col("Hosts", "string", Cell::Ingress(IngressCell::Hosts)),
                col("Address", "string", Cell::Ingress(IngressCell::Address)),
                col("Ports", "string", Cell::Ingress(IngressCell::Ports)),
                col("Age", "string", Cell::Age),
            ]
        }
        Kind::Stored(s)
            if s.info().group == "networking.k8s.io" && s.info().kind == "IngressClass" =>
        {
            vec![
                col("Controller", "string", Cell::Path("spec.controller")),
                col("Parameters", "string", Cell::Path("spec.parameters")),
                col("Age", "string", Cell::Age),
            ]
        }
        // A CRD without printer columns, and the built-in kinds canarysim only stores.
        Kind::Gateway
        | Kind::AnalysisTemplate
        | Kind::ClusterAnalysisTemplate
        | Kind::Stored(_) => {
            vec![col("Age", "date", Cell::Age)]
        }
    });
    out
}

/// A Table of `objects`, as the API answers a list or get that asked for one.
pub fn table(
    kind: Kind,
    objects: &[&Object],
    now: SimTime,
    resource_version: u64,
    include: IncludeObject,
) -> Value {
    let columns = columns(kind);
    let definitions: Vec<Value> = columns
        .iter()
        .map(|c| {
            let format = if matches!(c.cell, Cell::Name) {
                "name"
            } else {
                ""
            };
            json!({"name": c.name, "type": c.kind, "format": format, "description": "", "priority": c.priority})
        })
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let cells: Vec<Value> = columns.iter().map(|c| cell(o, c.cell, now)).collect();
            let mut row = json!({"cells": cells});
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    row["object"] = json!({
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": o.value.get("metadata").cloned().unwrap_or(json!({})),
                    });
                }
                IncludeObject::Object => row["object"] = o.value.clone(),
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version.to_string()},
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

fn at_path<'a>(object: &'a Object, path: &str) -> &'a Value {
    path.split('.').fold(&object.value, |v, key| &v[key])
}

fn cell(object: &Object, cell: Cell, now: SimTime) -> Value {
    match cell {
        Cell::Name => json!(object.name()),
        Cell::Path(path) => match at_path(object, path) {
            v @ (Value::Array(_) | Value::Object(_)) => json!(v.to_string()),
            v => v.clone(),
        },
        Cell::Age => json!(
            SimTime::parse_rfc3339(object.creation_timestamp())
                .map(|created| crate::go::human_duration(now.since(created)))
                .unwrap_or_else(|| "<unknown>".into())
        ),
        Cell::Since(path) => json!(
            at_path(object, path)
                .as_str()
                .and_then(SimTime::parse_rfc3339)
                .map(|then| crate::go::human_duration(now.since(then)))
                .unwrap_or_else(|| "<unknown>".into())
        ),
        Cell::InvolvedObject => {
            let involved = &object.value["involvedObject"];
            let kind = involved["kind"].as_str().unwrap_or_default();
            let name = involved["name"].as_str().unwrap_or_default();
            json!(format!("{}/{name}", kind.to_ascii_lowercase()))
        }
        Cell::PodReady => {
            let statuses = container_statuses(object);
            let ready = statuses.iter().filter(|s| s["ready"] == true).count();
            let total = object.spec()["containers"]
                .as_array()
                .map_or(statuses.len(), Vec::len);
            json!(format!("{ready}/{total}"))
        }
        Cell::PodStatus => json!(pod_status(object)),
        Cell::Count(path) => json!(at_path(object, path).as_i64().unwrap_or(0)),
        Cell::Ingress(c) => ingress_cell(object, c),
        Cell::ReadyOfDesired => json!(format!(
            "{}/{}",
            object.status()["readyReplicas"].as_i64().unwrap_or(0),
            object.spec()["replicas"].as_i64().unwrap_or(1)
        )),
        Cell::PodRestarts => {
            let restarts: i64 = container_statuses(object)
                .iter()
                .filter_map(|s| s["restartCount"].as_i64())
                .sum();
            json!(restarts.to_string())
        }
        Cell::ServiceType => json!(object.spec()["type"].as_str().unwrap_or("ClusterIP")),
        Cell::ClusterIp => json!(object.spec()["clusterIP"].as_str().unwrap_or("<none>")),
        Cell::ServiceExternalIp => {
            let ips: Vec<&str> = object.spec()["externalIPs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            json!(if ips.is_empty() {
                "<none>".to_string()
            } else {
                ips.join(",")
            })
        }
        Cell::ServicePorts => {
            let ports: Vec<String> = object.spec()["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| {
                    let protocol = p["protocol"].as_str().unwrap_or("TCP");
                    match p["nodePort"].as_i64() {
                        Some(node) => format!("{}:{node}/{protocol}", p["port"]),
                        None => format!("{}/{protocol}", p["port"]),
                    }
                })
                .collect();
            json!(if ports.is_empty() {
                "<none>".to_string()
            } else {
                ports.join(",")
            })
        }
        Cell::Selector => {
            // `metav1.FormatLabelSelector` for a LabelSelector, `labels.FormatLabels` for a
            // Service's plain map; both say `<none>` for nothing.
            let selector = &object.spec()["selector"];
            let text = if selector.get("matchLabels").is_some()
                || selector.get("matchExpressions").is_some()
            {
                super::selector::label_selector_string(selector).unwrap_or_else(|| "<error>".into())
            } else {
                let plain = json!({ "matchLabels": selector });
                super::selector::label_selector_string(&plain).unwrap_or_default()
            };
            json!(if text.is_empty() {
                "<none>".to_string()
            } else {
                text
            })
        }
        Cell::Containers | Cell::Images => {
            let field = if matches!(cell, Cell::Containers) {
                "name"
            } else {
                "image"
            };
            let values: Vec<&str> = object.spec()["template"]["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c[field].as_str())
                .collect();
            json!(values.join(","))
        }
        Cell::DataCount => {
            let entries = |field: &str| object.value[field].as_object().map_or(0, |m| m.len());
            json!(entries("data") + entries("binaryData"))
        }
    }
}

/// An Ingress's cells, as kubectl's `printIngress` prints them.
fn ingress_cell(object: &Object, cell: IngressCell) -> Value {
    match cell {
        IngressCell::Class => json!(
            object.spec()["ingressClassName"]
                .as_str()
                .unwrap_or("<none>")
        ),
        IngressCell::Hosts => {
            // kubectl's formatHosts: three at most, the rest counted as rules.
            let rules = object.spec()["rules"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let mut hosts: Vec<&str> = Vec::new();
            let mut more = false;
            for r in &rules {
                more |= hosts.len() == 3;
                if let (false, Some(h)) = (more, r["host"].as_str().filter(|h| !h.is_empty())) {
                    hosts.push(h);
                }
            }
            json!(match (hosts.is_empty(), more) {
                (true, _) => "*".to_string(),
                (false, false) => hosts.join(","),
                (false, true) => format!("{} + {} more...", hosts.join(","), rules.len() - 3),
            })
        }
        IngressCell::Address => {
            // kubectl's ingressLoadBalancerStatusStringer: sorted, unique, 16 characters.
            let entries = object.status()["loadBalancer"]["ingress"].as_array();
            let addresses: std::collections::BTreeSet<&str> = entries
                .into_iter()
                .flatten()
                .filter_map(|i| {
                    let ip = i["ip"].as_str().filter(|v| !v.is_empty());
                    ip.or_else(|| i["hostname"].as_str().filter(|v| !v.is_empty()))
                })
                .collect();
            let mut text = addresses.into_iter().collect::<Vec<_>>().join(",");
            if text.len() > 16 {
                text = format!("{}...", &text[..13]);
            }
            json!(text)
        }
        IngressCell::Ports => {
            let tls = object.spec()["tls"]
                .as_array()
                .is_some_and(|t| !t.is_empty());
            json!(if tls { "80, 443" } else { "80" })
        }
    }
}

fn container_statuses(pod: &Object) -> Vec<Value> {
    pod.status()["containerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The STATUS column of `kubectl get pods`: the phase, overridden by a container's waiting or
/// terminated reason, and `Terminating` once deletion started.
fn pod_status(pod: &Object) -> String {
    if pod.value["metadata"].get("deletionTimestamp").is_some() {
        return "Terminating".into();
    }
    let mut reason = pod.status()["reason"]
        .as_str()
        .or_else(|| pod.status()["phase"].as_str())
        .unwrap_or("Unknown")
        .to_string();
    for s in container_statuses(pod) {
        let state = &s["state"];
        if let Some(r) = state["waiting"]["reason"].as_str() {
            reason = r.to_string();
        } else if let Some(r) = state["terminated"]["reason"].as_str() {
            reason = r.to_string();
        }
    }
    reason
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollout_rows_follow_the_crd_printer_columns() {
        let ro = Object::new(
            Kind::Rollout,
            json!({"metadata": {"name": "demo", "creationTimestamp": "2026-01-01T00:00:00Z"},
                   "spec": {"replicas": 4},
                   "status": {"replicas": 5, "updatedReplicas": 1, "availableReplicas": 5}}),
        );
        let t = table(
            Kind::Rollout,
            &[&ro],
            SimTime::from_secs(150),
            7,
            IncludeObject::Metadata,
        );
        let names: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "Name",
                "Desired",
                "Current",
                "Up-to-date",
                "Available",
                "Age"
            ]
        );
        assert_eq!(t["rows"][0]["cells"], json!(["demo", 4, 5, 1, 5, "2m30s"]));
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["metadata"]["resourceVersion"], "7");
    }

    #[test]
    fn ingresses_print_as_kubectl_prints_them() {
        let kind = crate::model::ingress::ingress_kind();
        let ingress = Object::new(
            kind,
            json!({"metadata": {"name": "i"},
                   "spec": {"ingressClassName": "nginx", "tls": [{"hosts": ["a"]}],
                            "rules": [{"host": "a"}, {"host": "b"}, {"host": "c"}, {"host": "d"}, {}]},
                   "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}, {"hostname": "lb"}]}}}),
        );
        let t = table(kind, &[&ingress], SimTime::ZERO, 1, IncludeObject::None);
        assert_eq!(
            t["rows"][0]["cells"],
            json!([
                "i",
                "nginx",
                "a,b,c + 2 more...",
                "10.0.0.1,lb",
                "80, 443",
                "<unknown>"
            ])
        );
        let bare = Object::new(kind, json!({"metadata": {"name": "j"}, "spec": {}}));
        let t = table(kind, &[&bare], SimTime::ZERO, 1, IncludeObject::None);
        assert_eq!(
            t["rows"][0]["cells"],
            json!(["j", "<none>", "*", "", "80", "<unknown>"])
        );
    }

    #[test]
    fn pods_and_services_print_as_kubectl_prints_them() {
        let pod = Object::new(
            Kind::Pod,
            json!({"metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"},
                   "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
                   "status": {"phase": "Running", "containerStatuses": [
                       {"ready": true, "restartCount": 0},
                       {"ready": false, "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}),
        );
        let t = table(
            Kind::Pod,
            &[&pod],
            SimTime::from_secs(3600 * 9),
            1,
            IncludeObject::None,
        );
        assert_eq!(
            t["rows"][0]["cells"],
            json!(["p", "1/2", "CrashLoopBackOff", "3", "9h", null, null])
        );
        assert!(t["rows"][0].get("object").is_none());
        let svc = Object::new(
            Kind::Service,
            json!({"metadata": {"name": "s"},
                   "spec": {"type": "ClusterIP", "ports": [{"port": 80, "protocol": "TCP"}], "selector": {"app": "x"}}}),
        );
        let t = table(
            Kind::Service,
            &[&svc],
            SimTime::ZERO,
            1,
            IncludeObject::None,
        );
        assert_eq!(
            t["rows"][0]["cells"],
            json!([
                "s",
                "ClusterIP",
                "<none>",
                "<none>",
                "80/TCP",
                "<unknown>",
                "app=x"
            ])
        );
    }
}
