//! `canarysim snapshot OUT_DIR`: a namespace's Rollouts, Services, router objects
//! (VirtualServices, DestinationRules, Istio and Gateway API Gateways, routes,
//! ReferenceGrants, Ingresses but Argo's canary ones, and the IngressClasses),
//! AnalysisTemplates and the ClusterAnalysisTemplates they name read from the cluster into
//! `OUT_DIR/manifests.yaml`,
//! as their authors applied them (`scenario::snapshot`), and `OUT_DIR/scenario.yaml`, which
//! replays a rollout from where it stands: the stable version deployed, the Rollout as it
//! stands applied (`OUT_DIR/rollout-update.yaml`), the pauses it has passed promoted, and
//! from its current step on a load and a verdict at every pause, as `init` writes them.
//! `canarysim run OUT_DIR/scenario.yaml` (or `check OUT_DIR/manifests.yaml`) then predicts
//! the remaining steps' split offline. Secrets and ConfigMaps are never read.

use std::path::{Path, PathBuf};

use super::{Cluster, ClusterError, Lookup};
use crate::model::ingress::ingress_kind;
use crate::model::{Kind, Object, ObjectKey, yaml};
use crate::rollout_info::Standing;
use crate::scenario::init::{self, ManifestSource, Resume};
use crate::scenario::snapshot::{
    as_applied, before_update, is_argo_canary_ingress, managed_route_names, without_managed_routes,
};

/// What to copy and where.
#[derive(Debug, Clone)]
pub struct SnapshotOptions {
    pub out_dir: PathBuf,
    /// The Rollout to replay (None: the first with an update in progress, else the first).
    pub rollout: Option<String>,
}

/// What was written.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub scenario: PathBuf,
    pub rollout: String,
    /// Objects written, by kind.
    pub objects: Vec<(String, usize)>,
    /// What the scenario leaves out, and what the pods looked like.
    pub notes: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error("no Rollout {0} in namespace {1}")]
    NoRollout(String, String),
    #[error("{0}: cannot write: {1}")]
    Write(PathBuf, std::io::Error),
    #[error("the manifests read do not load back: {0}")]
    Reload(String),
    #[error("no scenario for them: {0}")]
    Scenario(String),
}

const MANIFESTS: &str = "manifests.yaml";
const UPDATE: &str = "rollout-update.yaml";

/// The kinds copied (beside the Gateways other namespaces hold for them).
fn kinds() -> Vec<Kind> {
    let gateway_api = crate::model::gateway_api::kind;
    vec![
        Kind::Rollout,
        Kind::Service,
        Kind::VirtualService,
        Kind::DestinationRule,
        Kind::Gateway,
        Kind::AnalysisTemplate,
        gateway_api("Gateway"),
        gateway_api("HTTPRoute"),
        gateway_api("GRPCRoute"),
        gateway_api("TCPRoute"),
        gateway_api("TLSRoute"),
        gateway_api("ReferenceGrant"),
        ingress_kind(),
    ]
}

/// Reads the namespace and writes the manifests and the scenario.
pub fn snapshot(cluster: &Cluster, o: &SnapshotOptions) -> Result<Snapshot, SnapshotError> {
    let ns = cluster.namespace().to_string();
    let mut objects = Vec::new();
    let mut forbidden = Vec::new();
    for kind in kinds() {
        let found = if matches!(kind, Kind::Rollout | Kind::Service) {
            // Without its Rollouts and Services there is nothing to replay: a 403 is an error.
            cluster.list(kind, &ns)?
        } else {
            list_or_note(cluster, kind, &ns, &mut forbidden)?.unwrap_or_default()
        };
        objects.extend(found);
    }
    let elsewhere = read_named_elsewhere(cluster, &objects, &ns, &mut forbidden)?;
    objects.extend(elsewhere);
    let rollout_uids: Vec<String> = objects
        .iter()
        .filter(|o| o.kind == Kind::Rollout)
        .filter_map(|o| o.value["metadata"]["uid"].as_str().map(str::to_string))
        .collect();
    objects.retain(|o| !is_argo_canary_ingress(o, &rollout_uids));
    if objects.iter().any(|o| o.kind == ingress_kind()) {
        // Cluster-scoped, and what decides which Ingresses ingress-nginx serves.
        let classes = crate::model::ingress::ingress_class_kind();
        objects.extend(list_or_note(cluster, classes, &ns, &mut forbidden)?.unwrap_or_default());
    }
    let target = pick_rollout(&objects, o.rollout.as_deref())
        .ok_or_else(|| SnapshotError::NoRollout(o.rollout.clone().unwrap_or_default(), ns.clone()))?
        .clone();
    // Without them the update is written as it stands, and the readiness note is left out.
    let replica_sets =
        list_or_note(cluster, Kind::ReplicaSet, &ns, &mut forbidden)?.unwrap_or_default();
    let pods = list_or_note(cluster, Kind::Pod, &ns, &mut forbidden)?;
    let standing = Standing::of(&target);
    // Replayed from its step: a canary update in progress whose stable ReplicaSet is read.
    let before = before_update(&target, &replica_sets).filter(|_| standing.step.is_some());
    let managed: Vec<String> = objects
        .iter()
        .filter(|o| o.kind == Kind::Rollout)
        .flat_map(managed_route_names)
        .collect();
    let mut documents = Vec::new();
    for object in &objects {
        let value = match &before {
            Some(b) if object.key() == target.key() => b.clone(),
            _ if object.kind == Kind::VirtualService => {
                without_managed_routes(as_applied(object), &managed)
            }
            _ => as_applied(object),
        };
        documents.push(yaml::to_text(&value).unwrap_or_default());
    }
    std::fs::create_dir_all(&o.out_dir).map_err(|e| SnapshotError::Write(o.out_dir.clone(), e))?;
    let manifests_text = documents.join("---\n");
    write(&o.out_dir.join(MANIFESTS), &manifests_text)?;
    let resume = match (&before, standing.step) {
        (Some(_), Some(step)) => {
            let text = yaml::to_text(&as_applied(&target)).unwrap_or_default();
            write(&o.out_dir.join(UPDATE), &text)?;
            Some(Resume {
                update: UPDATE.to_string(),
                step,
            })
        }
        _ => None,
    };
    let manifests = yaml::load_str(MANIFESTS, &manifests_text, &ns)
        .map_err(|e| SnapshotError::Reload(e.to_string()))?;
    let options = init::Options {
        only: Some((ns.clone(), target.name().to_string())),
        resume: resume.clone(),
        ..init::Options::default()
    };
    let written = init::scenario_with(
        &[(ManifestSource::File(MANIFESTS.to_string()), manifests)],
        &options,
    )
    .map_err(SnapshotError::Scenario)?;
    let mut notes = written.notes;
    if !forbidden.is_empty() {
        notes.push(format!(
            "not allowed to read {} (403): left out of the manifests; add them by hand if the rollout needs them",
            forbidden.join(", ")
        ));
    }
    if let Some(pods) = &pods {
        notes.push(pod_readiness(pods, &target));
    }
    if before.is_none() && standing.updating {
        notes.push(format!(
            "{}'s update is not replayed (a blue-green update, or its stable ReplicaSet not found): the Rollout is written as it stands and the scenario rolls it out to a new image",
            target.name()
        ));
    }
    let header = header(&ns, &target, &standing, resume.as_ref(), &notes);
    let scenario = o.out_dir.join("scenario.yaml");
    write(&scenario, &format!("{header}{}", written.text))?;
    Ok(Snapshot {
        scenario,
        rollout: target.name().to_string(),
        objects: count_by_kind(&objects),
        notes,
    })
}

/// Every object of `kind` in the namespace; None, with the kind named in `forbidden`, when
/// the role may not list it (403).
fn list_or_note(
    cluster: &Cluster,
    kind: Kind,
    ns: &str,
    forbidden: &mut Vec<String>,
) -> Result<Option<Vec<Object>>, ClusterError> {
    let found = cluster.list_if_allowed(kind, ns)?;
    if found.is_none() {
        forbidden.push(kind.qualified_resource());
    }
    Ok(found)
}

/// The Gateways in other namespaces and the ClusterAnalysisTemplates that `objects` name,
/// those the role may read; the others named in `forbidden` (403).
fn read_named_elsewhere(
    cluster: &Cluster,
    objects: &[Object],
    ns: &str,
    forbidden: &mut Vec<String>,
) -> Result<Vec<Object>, ClusterError> {
    let mut found = Vec::new();
    let named = [gateways_elsewhere(objects, ns), cluster_templates(objects)];
    for key in named.into_iter().flatten() {
        match cluster.get_if_allowed(&key)? {
            Lookup::Found(object) => found.push(object),
            Lookup::Missing => {}
            Lookup::Forbidden => {
                forbidden.push(format!("{} {}", key.kind.qualified_resource(), key.path()));
            }
        }
    }
    Ok(found)
}

fn write(path: &Path, text: &str) -> Result<(), SnapshotError> {
    std::fs::write(path, text).map_err(|e| SnapshotError::Write(path.to_path_buf(), e))
}

/// The Rollout named, else the first in the middle of an update, else the first.
fn pick_rollout<'a>(objects: &'a [Object], name: Option<&str>) -> Option<&'a Object> {
    let mut rollouts = objects.iter().filter(|o| o.kind == Kind::Rollout);
    match name {
        Some(name) => rollouts.find(|r| r.name() == name),
        None => {
            let all: Vec<&Object> = rollouts.collect();
            all.iter()
                .find(|r| Standing::of(r).updating)
                .or(all.first())
                .copied()
        }
    }
}

/// The ClusterAnalysisTemplates the Rollouts name (cluster-scoped, so not listed with the
/// namespace).
fn cluster_templates(objects: &[Object]) -> Vec<ObjectKey> {
    let mut names: Vec<String> = objects
        .iter()
        .filter(|o| o.kind == Kind::Rollout)
        .flat_map(crate::scenario::snapshot::cluster_templates)
        .collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|name| ObjectKey::new(Kind::ClusterAnalysisTemplate, "", name))
        .collect()
}

/// Istio Gateways a VirtualService names as `namespace/name`, and Gateway API Gateways a
/// route's parentRefs name, in other namespaces.
fn gateways_elsewhere(objects: &[Object], ns: &str) -> Vec<ObjectKey> {
    let gateway_api_gateway = crate::model::gateway_api::kind("Gateway");
    let mut wanted: Vec<ObjectKey> = Vec::new();
    for o in objects {
        if o.kind == Kind::VirtualService {
            for g in o.spec()["gateways"].as_array().into_iter().flatten() {
                if let Some((gns, name)) = g.as_str().and_then(|g| g.split_once('/')) {
                    wanted.push(ObjectKey::new(Kind::Gateway, gns, name));
                }
            }
        }
        for parent in o.spec()["parentRefs"].as_array().into_iter().flatten() {
            let is_gateway = parent["kind"].as_str().unwrap_or("Gateway") == "Gateway";
            if let (true, Some(gns), Some(name)) = (
                is_gateway,
                parent["namespace"].as_str(),
                parent["name"].as_str(),
            ) {
                wanted.push(ObjectKey::new(gateway_api_gateway, gns, name));
            }
        }
    }
    wanted.sort();
    wanted.dedup();
    wanted.retain(|k| k.namespace != ns);
    wanted
}

/// The rollout's pods at the snapshot, ready of all, by ReplicaSet hash and role.
fn pod_readiness(pods: &[Object], rollout: &Object) -> String {
    use crate::model::vocabulary::HASH_LABEL;
    let status = rollout.status();
    let role = |hash: &str| {
        if status["stableRS"].as_str() == Some(hash) {
            "stable"
        } else if status["currentPodHash"].as_str() == Some(hash) {
            "canary"
        } else {
            "old"
        }
    };
    let mut by_hash: std::collections::BTreeMap<String, (usize, usize)> = Default::default();
    for pod in pods {
        let Some(hash) = pod.labels().get(HASH_LABEL).cloned() else {
            continue;
        };
        let ready = pod.status()["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        let entry = by_hash.entry(hash).or_default();
        entry.1 += 1;
        entry.0 += usize::from(ready);
    }
    let parts: Vec<String> = by_hash
        .iter()
        .map(|(hash, (ready, all))| format!("{hash} ({}) {ready}/{all} ready", role(hash)))
        .collect();
    match parts.is_empty() {
        true => "no pods of the rollout's ReplicaSets were read".to_string(),
        false => format!(
            "pods at the snapshot: {} (the scenario starts every pod ready)",
            parts.join(", ")
        ),
    }
}

fn count_by_kind(objects: &[Object]) -> Vec<(String, usize)> {
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for o in objects {
        *counts.entry(o.kind.as_str().to_string()).or_default() += 1;
    }
    counts.into_iter().collect()
}

/// YAML comments at the top of the scenario: where it came from, where the rollout stood.
fn header(
    ns: &str,
    rollout: &Object,
    standing: &Standing,
    resume: Option<&Resume>,
    notes: &[String],
) -> String {
    let when = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
    let mut out = format!(
        "# Written by `canarysim snapshot` from namespace {ns} at {when}.\n# Rollout {}: {}",
        rollout.name(),
        if standing.phase.is_empty() {
            "new"
        } else {
            &standing.phase
        }
    );
    match resume {
        Some(r) => out.push_str(&format!(
            ", update in progress at step {} (set weight {} %): replayed from there.\n",
            r.step, standing.set_weight
        )),
        None => out.push_str(", no update in progress: rolled out to a new image.\n"),
    }
    for note in notes {
        out.push_str(&format!("# {note}\n"));
    }
    out
}
