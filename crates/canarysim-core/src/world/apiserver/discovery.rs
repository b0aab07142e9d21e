//! The API's resources as kubectl discovers them: groups, versions, resource names, short
//! names, verbs and scope, from the same definitions the real CRDs and core types give
//! (Argo Rollouts' CRDs, Istio's, core/v1 and apps/v1).

use serde_json::{Value, json};

use crate::model::Kind;
use crate::model::stored_kind;

/// One resource as the API serves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    pub kind: Kind,
    pub singular: &'static str,
    pub short_names: &'static [&'static str],
    pub namespaced: bool,
    /// Versions served, the preferred (storage) one first.
    pub versions: &'static [&'static str],
    /// Whether writes to the object leave `status` alone (`/status` writes only it).
    pub status_subresource: bool,
    /// Whether `/scale` serves an autoscaling/v1 Scale (`kubectl scale`): the Rollout CRD
    /// declares one, and apps/v1 ReplicaSets have one.
    pub scale_subresource: bool,
    /// Custom resources take JSON and merge patches only; built-in kinds also strategic ones.
    pub custom: bool,
    pub categories: &'static [&'static str],
}

const ISTIO_VERSIONS: &[&str] = &["v1", "v1beta1", "v1alpha3"];
const ARGO_VERSIONS: &[&str] = &["v1alpha1"];

pub fn resource(kind: Kind) -> Resource {
    let (singular, short_names, versions, custom): (_, &'static [&'static str], _, _) = match kind {
        Kind::Rollout => ("rollout", &["ro"], ARGO_VERSIONS, true),
        Kind::AnalysisTemplate => ("analysistemplate", &["at"], ARGO_VERSIONS, true),
        Kind::ClusterAnalysisTemplate => ("clusteranalysistemplate", &["cat"], ARGO_VERSIONS, true),
        Kind::AnalysisRun => ("analysisrun", &["ar"], ARGO_VERSIONS, true),
        Kind::Experiment => ("experiment", &["exp"], ARGO_VERSIONS, true),
        Kind::VirtualService => ("virtualservice", &["vs"], ISTIO_VERSIONS, true),
        Kind::DestinationRule => ("destinationrule", &["dr"], ISTIO_VERSIONS, true),
        Kind::Gateway => ("gateway", &["gw"], ISTIO_VERSIONS, true),
        Kind::Service => ("service", &["svc"], &["v1"], false),
        Kind::Pod => ("pod", &["po"], &["v1"], false),
        Kind::ReplicaSet => ("replicaset", &["rs"], &["v1"], false),
        Kind::Stored(s) => {
            let info = s.info();
            (
                info.singular,
                info.short_names,
                info.versions,
                !info.built_in,
            )
        }
    };
    let categories: &'static [&'static str] = match kind {
        Kind::Rollout => &["all"],
        Kind::VirtualService | Kind::DestinationRule | Kind::Gateway => {
            &["istio-io", "networking-istio-io"]
        }
        Kind::Service | Kind::Pod | Kind::ReplicaSet => &["all"],
        _ => &[],
    };
    Resource {
        kind,
        singular,
        short_names,
        namespaced: kind.namespaced(),
        versions,
        // A stored kind has the subresources Kubernetes or its CRD gives it; one whose names
        // were guessed has none (its status is written with the object).
        status_subresource: match kind {
            Kind::AnalysisTemplate | Kind::ClusterAnalysisTemplate => false,
            Kind::Stored(s) => s.info().status_subresource(),
            _ => true,
        },
        scale_subresource: match kind {
            Kind::Rollout | Kind::ReplicaSet => true,
            Kind::Stored(s) => s.info().scale_subresource(),
            _ => false,
        },
        custom,
        categories,
    }
}

impl Resource {
    pub fn group(&self) -> &'static str {
        self.kind.group()
    }

    /// `group/version`, or `version` for the core group.
    pub(crate) fn api_version(&self, version: &str) -> String {
        if self.group().is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group())
        }
    }
}

/// Every kind a store holding objects of `stored` kinds serves: the simulated ones,
/// Kubernetes' own and the common CRDs' that canarysim stores, and `stored`.
fn served(stored: &[Kind]) -> Vec<Resource> {
    let mut kinds: Vec<Kind> = Kind::SIMULATED.to_vec();
    kinds.extend(stored_kind::described().map(Kind::Stored));
    for kind in stored {
        if !kinds.contains(kind) {
            kinds.push(*kind);
        }
    }
    kinds.into_iter().map(resource).collect()
}

/// The resource served at `group`/`version` under the plural `name` (any kind met in
/// manifests so far, whichever store holds it: a store without such objects lists none).
pub fn find(group: &str, version: &str, plural: &str) -> Option<Resource> {
    let kind = Kind::SIMULATED
        .into_iter()
        .find(|k| k.group() == group && k.plural() == plural)
        .or_else(|| stored_kind::served_as(group, plural).map(Kind::Stored))?;
    let found = resource(kind);
    found.versions.contains(&version).then_some(found)
}

/// Groups other than the core one, each with its versions (preferred first; a group's
/// kinds may be served at different versions, as the Gateway API's are).
fn groups(stored: &[Kind]) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for r in served(stored).into_iter().filter(|r| !r.group().is_empty()) {
        match out.iter_mut().find(|(g, _)| *g == r.group()) {
            Some((_, versions)) => {
                for v in r.versions {
                    if !versions.contains(v) {
                        versions.push(v);
                    }
                }
            }
            None => out.push((r.group(), r.versions.to_vec())),
        }
    }
    out.sort();
    out
}

fn group_document(name: &str, versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": versions,
        "preferredVersion": versions[0],
    })
}

/// `GET /api`.
pub(crate) fn core_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
}

/// `GET /apis`.
pub(crate) fn group_list(stored: &[Kind]) -> Value {
    let groups: Vec<Value> = groups(stored)
        .into_iter()
        .map(|(g, v)| group_document(g, &v))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `GET /apis/GROUP`.
pub fn group(name: &str, stored: &[Kind]) -> Option<Value> {
    let (g, versions) = groups(stored).into_iter().find(|(g, _)| *g == name)?;
    let mut doc = group_document(g, &versions);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

/// `GET /api/v1` or `GET /apis/GROUP/VERSION`: the resources with their verbs.
pub(crate) fn resource_list(group: &str, version: &str, stored: &[Kind]) -> Option<Value> {
    let mut resources = Vec::new();
    for r in served(stored) {
        if r.group() != group || !r.versions.contains(&version) {
            continue;
        }
        resources.push(json!({
            "name": r.kind.plural(),
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind.as_str(),
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
            "shortNames": r.short_names,
            "categories": r.categories,
        }));
        if r.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", r.kind.plural()),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind.as_str(),
                "verbs": ["get", "patch", "update"],
            }));
        }
        if r.scale_subresource {
            // As the API server lists it: the subresource's own group, version and kind.
            resources.push(json!({
                "name": format!("{}/scale", r.kind.plural()),
                "singularName": "",
                "namespaced": r.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

/// Every group/version, as `api/v1` or `apis/GROUP/VERSION`.
fn group_versions(stored: &[Kind]) -> Vec<(&'static str, &'static str)> {
    let mut out = vec![("", "v1")];
    for (group, versions) in groups(stored) {
        out.extend(versions.iter().map(|v| (group, *v)));
    }
    out
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `GET /openapi/v3`: where each group/version's document is.
pub(crate) fn openapi_root(stored: &[Kind]) -> Value {
    let paths: serde_json::Map<String, Value> = group_versions(stored)
        .into_iter()
        .map(|(g, v)| {
            let path = gv_path(g, v);
            let url = format!("/openapi/v3/{path}?hash=canarysim");
            (path, json!({"serverRelativeURL": url}))
        })
        .collect();
    json!({"paths": paths})
}

/// `GET /openapi/v3/apis/GROUP/VERSION`: the operations, without schemas. kubectl reads
/// it to learn that the server validates fields itself (the `fieldValidation` parameter
/// of each PATCH), so it sends `fieldValidation=Strict` instead of validating against a
/// schema canarysim does not have; canarysim keeps unknown fields and warns about the
/// fields it does not simulate.
pub(crate) fn openapi_group_version(path: &str, stored: &[Kind]) -> Option<Value> {
    let (group, version) = group_versions(stored)
        .into_iter()
        .find(|(g, v)| gv_path(g, v) == path)?;
    let mut paths = serde_json::Map::new();
    for r in served(stored) {
        if r.group() != group || !r.versions.contains(&version) {
            continue;
        }
        let scope = if r.namespaced {
            "namespaces/{namespace}/"
        } else {
            ""
        };
        let item = format!(
            "/{}/{scope}{}/{{name}}",
            gv_path(group, version),
            r.kind.plural()
        );
        let operation = json!({
            "operationId": format!("patch{}", r.kind.as_str()),
            "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": r.kind.as_str()},
            "x-kubernetes-action": "patch",
            "parameters": [
                {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            ],
            "responses": {"200": {"description": "OK"}},
        });
        paths.insert(item, json!({"patch": operation}));
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "canarysim", "version": "v1.32.0-canarysim"},
        "paths": paths,
        "components": {},
    }))
}

/// `GET /version`: a Kubernetes release kubectl accepts, marked as canarysim's.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.0-canarysim",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.23",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_and_scopes_are_the_real_crds() {
        let ro = find("argoproj.io", "v1alpha1", "rollouts").unwrap();
        assert_eq!(ro.short_names, ["ro"]);
        assert!(ro.namespaced && ro.status_subresource && ro.custom);
        let vs = find("networking.istio.io", "v1alpha3", "virtualservices").unwrap();
        assert_eq!(vs.short_names, ["vs"]);
        assert_eq!(vs.versions[0], "v1");
        assert!(
            !find("argoproj.io", "v1alpha1", "clusteranalysistemplates")
                .unwrap()
                .namespaced
        );
        assert!(find("apps", "v1", "rollouts").is_none());
        let list = resource_list("networking.istio.io", "v1beta1", &[]).unwrap();
        let names: Vec<&str> = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"destinationrules") && names.contains(&"virtualservices/status"));
        assert!(resource_list("apps", "v2", &[]).is_none());
        for (group, version, scale) in [
            ("argoproj.io", "v1alpha1", "rollouts/scale"),
            ("apps", "v1", "replicasets/scale"),
        ] {
            let list = resource_list(group, version, &[]).unwrap();
            let entry = list["resources"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["name"] == scale)
                .unwrap_or_else(|| panic!("{scale} not announced: {list}"));
            assert_eq!(entry["kind"], "Scale");
            assert_eq!(entry["group"], "autoscaling");
            assert_eq!(entry["verbs"], json!(["get", "patch", "update"]));
        }
        assert!(!find("", "v1", "pods").unwrap().scale_subresource);
    }
}
