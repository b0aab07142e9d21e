//! Argo's ephemeral pod metadata (`canaryMetadata` / `stableMetadata`): labels and
//! annotations put on the pods of the canary and of the stable ReplicaSet while they hold that
//! role, and taken off when the role ends. What was injected is remembered in the
//! ReplicaSet's `rollout.argoproj.io/ephemeral-metadata` annotation, so only that is removed
//! (utils/replicaset/canary.go SyncEphemeralPodMetadata, rollout/ephemeralmetadata.go).

use serde_json::Value;

/// The annotation that records what was injected.
pub(crate) const EPHEMERAL_METADATA: &str = "rollout.argoproj.io/ephemeral-metadata";

pub use crate::model::rollout::PodTemplateMetadata;

/// Puts `desired` on an object's metadata (a pod's, or a pod template's) and removes what
/// `existing` had injected and `desired` no longer wants. True when it changed anything.
pub fn sync(
    metadata: &mut Value,
    existing: Option<&PodTemplateMetadata>,
    desired: Option<&PodTemplateMetadata>,
) -> bool {
    let mut modified = false;
    for (field, wanted, had) in [
        (
            "annotations",
            desired.map(|d| &d.annotations),
            existing.map(|e| &e.annotations),
        ),
        (
            "labels",
            desired.map(|d| &d.labels),
            existing.map(|e| &e.labels),
        ),
    ] {
        if let Some(wanted) = wanted {
            for (k, v) in wanted {
                let map = crate::model::object::ensure_object(crate::model::object::object_entry(
                    metadata, field,
                ));
                if map.get(k).and_then(Value::as_str) != Some(v.as_str()) {
                    map.insert(k.clone(), Value::String(v.clone()));
                    modified = true;
                }
            }
        }
        if let Some(had) = had {
            for k in had.keys() {
                if wanted.is_some_and(|w| w.contains_key(k)) {
                    continue;
                }
                if let Some(map) = metadata.get_mut(field).and_then(Value::as_object_mut) {
                    modified |= map.remove(k).is_some();
                }
            }
        }
    }
    modified
}

/// What a ReplicaSet's annotation says was injected into its pods.
pub(crate) fn injected(rs: &Value) -> Option<PodTemplateMetadata> {
    rs["metadata"]["annotations"][EPHEMERAL_METADATA]
        .as_str()
        .and_then(|s| serde_json::from_str(s).ok())
}

/// `SyncReplicaSetEphemeralPodMetadata`: the ReplicaSet's pod template gets `desired`, and
/// its annotation records it (or goes with `None`). True when it changed anything.
pub(crate) fn sync_replica_set(rs: &mut Value, desired: Option<&PodTemplateMetadata>) -> bool {
    let existing = injected(rs);
    let template_meta = crate::model::object::object_entry(
        crate::model::object::object_entry(
            crate::model::object::object_entry(rs, "spec"),
            "template",
        ),
        "metadata",
    );
    if !sync(template_meta, existing.as_ref(), desired) {
        return false;
    }
    let annotations = crate::model::object::ensure_object(crate::model::object::object_entry(
        crate::model::object::object_entry(rs, "metadata"),
        "annotations",
    ));
    match desired {
        // Go's json.Marshal: field order labels, annotations; map keys sorted.
        Some(d) => annotations.insert(
            EPHEMERAL_METADATA.into(),
            Value::String(serde_json::to_string(d).unwrap_or_default()),
        ),
        None => annotations.remove(EPHEMERAL_METADATA),
    };
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn meta(labels: &[(&str, &str)]) -> PodTemplateMetadata {
        PodTemplateMetadata {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            annotations: BTreeMap::new(),
        }
    }

    #[test]
    fn injects_then_swaps_roles_without_touching_other_labels() {
        let mut rs = json!({"metadata": {"name": "demo-abc"},
            "spec": {"template": {"metadata": {"labels": {"app": "demo", "sidecar": "yes"}}}}});
        let canary = meta(&[("role", "canary"), ("track", "new")]);
        assert!(sync_replica_set(&mut rs, Some(&canary)));
        assert_eq!(
            rs["spec"]["template"]["metadata"]["labels"],
            json!({"app": "demo", "sidecar": "yes", "role": "canary", "track": "new"})
        );
        assert_eq!(
            rs["metadata"]["annotations"][EPHEMERAL_METADATA],
            "{\"labels\":{\"role\":\"canary\",\"track\":\"new\"}}"
        );
        assert!(!sync_replica_set(&mut rs, Some(&canary)), "idempotent");
        // Promoted: the stable metadata replaces the canary's; `track` is removed.
        let stable = meta(&[("role", "stable")]);
        assert!(sync_replica_set(&mut rs, Some(&stable)));
        assert_eq!(
            rs["spec"]["template"]["metadata"]["labels"],
            json!({"app": "demo", "sidecar": "yes", "role": "stable"})
        );
        // An older ReplicaSet loses everything injected.
        assert!(sync_replica_set(&mut rs, None));
        assert_eq!(
            rs["spec"]["template"]["metadata"]["labels"],
            json!({"app": "demo", "sidecar": "yes"})
        );
        assert!(
            rs["metadata"]["annotations"]
                .get(EPHEMERAL_METADATA)
                .is_none()
        );
    }
}
