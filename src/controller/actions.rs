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
    let patch = if !status.pause_conditions.is_empty() {
        // The controller sees controllerPause with no CanaryPauseStep condition and treats
        // the pause step as done.
        json!({"status": {"pauseConditions": null}})
    } else {
        // Skips the current step.
        let next = (status.current_step_index.unwrap_or(0) + 1).min(steps);
        json!({"status": {"pauseConditions": null, "currentStepIndex": next}})
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
        if let Some(cs) = rollout.value["spec"]["template"]["spec"]
            .get_mut(list)
            .and_then(Value::as_array_mut)
        {
            for c in cs {
                if container == "*" || c.get("name").and_then(Value::as_str) == Some(container) {
                    c["image"] = Value::String(image.to_string());
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
