//! What `kubectl argo rollouts promote|abort|retry|pause|set image` send: merge patches
//! against the Rollout, exactly as the plugin builds them (`pkg/kubectl-argo-rollouts/cmd`).

use serde_json::{Value, json};

use crate::apiserver::{ApiError, ApiServer, Patch};
use crate::model::rollout::RolloutStatus;
use crate::model::{Kind, Object};

/// `kubectl argo rollouts promote [--full]`.
pub fn promote(api: &mut ApiServer, ns: &str, name: &str, full: bool) -> Result<Object, ApiError> {
    let rollout = api.get(Kind::Rollout, ns, name)?.clone();
    let status: RolloutStatus = rollout.status_as().unwrap_or_default();
    if full {
        if status.current_pod_hash != status.stable_r_s {
            return api.patch(
                Kind::Rollout,
                ns,
                name,
                &Patch::Merge(json!({"status": {"promoteFull": true}})),
            );
        }
        return Ok(rollout);
    }
    if rollout.spec().get("paused").and_then(Value::as_bool) == Some(true) {
        api.patch(
            Kind::Rollout,
            ns,
            name,
            &Patch::Merge(json!({"spec": {"paused": false}})),
        )?;
    }
    let steps = rollout.spec()["strategy"]["canary"]["steps"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0) as i32;
    // An analysis step that ended Inconclusive: clear the pause and skip the step, or the
    // rollout would stay paused on it (`isInconclusive` in the plugin's promote).
    let inconclusive = status
        .canary
        .current_step_analysis_run_status
        .as_ref()
        .is_some_and(|r| r.status == "Inconclusive");
    let patch = if inconclusive && !status.pause_conditions.is_empty() && status.controller_pause {
        let next = (status.current_step_index.unwrap_or(0) + 1).min(steps);
        json!({"status": {"pauseConditions": null, "controllerPause": false, "currentStepIndex": next}})
    } else if !status.pause_conditions.is_empty() {
        // The controller sees controllerPause with no CanaryPauseStep condition and treats
        // the pause step as done.
        json!({"status": {"pauseConditions": null}})
    } else if rollout.spec()["strategy"]["canary"].is_object() {
        // Skips the current step.
        let next = (status.current_step_index.unwrap_or(0) + 1).min(steps);
        json!({"status": {"pauseConditions": null, "currentStepIndex": next}})
    } else {
        // Blue-green, not paused: the plugin sends no status patch.
        return api.get(Kind::Rollout, ns, name).cloned();
    };
    api.patch(Kind::Rollout, ns, name, &Patch::Merge(patch))
}

/// `kubectl argo rollouts abort`.
pub fn abort(api: &mut ApiServer, ns: &str, name: &str) -> Result<Object, ApiError> {
    api.patch(
        Kind::Rollout,
        ns,
        name,
        &Patch::Merge(json!({"status": {"abort": true}})),
    )
}

/// `kubectl argo rollouts retry rollout`.
pub fn retry(api: &mut ApiServer, ns: &str, name: &str) -> Result<Object, ApiError> {
    api.patch(
        Kind::Rollout,
        ns,
        name,
        &Patch::Merge(json!({"status": {"abort": false}})),
    )
}

/// `kubectl argo rollouts pause` / `resume` (spec.paused).
pub fn set_paused(
    api: &mut ApiServer,
    ns: &str,
    name: &str,
    paused: bool,
) -> Result<Object, ApiError> {
    api.patch(
        Kind::Rollout,
        ns,
        name,
        &Patch::Merge(json!({"spec": {"paused": paused}})),
    )
}

/// `kubectl argo rollouts set image ROLLOUT CONTAINER=IMAGE`. Errors name the container when
/// the template has none of that name.
pub fn set_image(
    api: &mut ApiServer,
    ns: &str,
    name: &str,
    container: &str,
    image: &str,
) -> Result<Object, SetImageError> {
    let mut rollout = api.get(Kind::Rollout, ns, name)?.clone();
    let mut found = false;
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        // By pointer: a spec or template that is not an object (a string, say) has no
        // containers, and indexing into it would panic.
        if let Some(cs) = rollout
            .value
            .pointer_mut("/spec/template/spec")
            .and_then(|spec| spec.get_mut(list))
            .and_then(Value::as_array_mut)
        {
            // A list entry that is not an object is no container: it is left as written
            // (indexing it would panic).
            for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                if container == "*" || c.get("name").and_then(Value::as_str) == Some(container) {
                    c.insert("image".into(), Value::String(image.to_string()));
                    found = true;
                }
            }
        }
    }
    if !found {
        return Err(SetImageError::UnknownContainer(format!(
            "unable to find container named \"{container}\""
        )));
    }
    Ok(api.update(rollout)?)
}

#[derive(Debug, thiserror::Error)]
pub enum SetImageError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("{0}")]
    UnknownContainer(String),
}

/// Why `undo` did not restore a revision, in the plugin's words.
#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("unable to find specified revision {0} in history")]
    NoSuchRevision(i64),
    #[error("no revision found for rollout {0:?}")]
    NoPreviousRevision(String),
}

/// `kubectl argo rollouts undo ROLLOUT [--to-revision N]` (`to_revision` 0: the previous
/// revision): the ReplicaSet of that revision gives its pod template back to the Rollout
/// (without the pod-template-hash label), by a JSON patch that replaces `/spec/template`.
/// Returns what the plugin prints.
pub fn undo(
    api: &mut ApiServer,
    ns: &str,
    name: &str,
    to_revision: i64,
) -> Result<String, UndoError> {
    let rollout = api.get(Kind::Rollout, ns, name)?.clone();
    let revision_of = |rs: &Object| {
        rs.annotation(super::rollout::REVISION)
            .and_then(|r| r.parse::<i64>().ok())
    };
    let mut by_revision: Vec<(i64, Object)> = super::rollout::owned_replica_sets(api, &rollout)
        .into_iter()
        .filter_map(|rs| revision_of(rs).map(|r| (r, rs.clone())))
        .collect();
    by_revision.sort_by_key(|(r, _)| std::cmp::Reverse(*r));
    let target = if to_revision > 0 {
        by_revision
            .into_iter()
            .find(|(r, _)| *r == to_revision)
            .ok_or(UndoError::NoSuchRevision(to_revision))?
    } else {
        by_revision
            .into_iter()
            .nth(1)
            .ok_or_else(|| UndoError::NoPreviousRevision(name.to_string()))?
    };
    let mut template = target.1.spec()["template"].clone();
    if let Some(labels) = template["metadata"]["labels"].as_object_mut() {
        labels.remove(super::replicaset::HASH_LABEL);
    }
    if template == rollout.spec()["template"] {
        return Ok(format!(
            "skipped rollback (current template already matches revision {to_revision})"
        ));
    }
    api.patch(
        Kind::Rollout,
        ns,
        name,
        &Patch::Json(json!([{"op": "replace", "path": "/spec/template", "value": template}])),
    )?;
    Ok(format!("rollout '{name}' undo"))
}

/// `kubectl argo rollouts restart ROLLOUT [--in D]`: sets `spec.restartAt`; the controller
/// then restarts every pod created before it.
pub fn restart(
    api: &mut ApiServer,
    ns: &str,
    name: &str,
    at: crate::clock::SimTime,
) -> Result<Object, ApiError> {
    api.patch(
        Kind::Rollout,
        ns,
        name,
        &Patch::Merge(json!({"spec": {"restartAt": at.rfc3339()}})),
    )
}
