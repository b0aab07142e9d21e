//! Argo's `rollout/service.go`: the stable and canary Services' selectors.

// One reconciler across files: each part shares its module's imports and helpers.
use super::*;

impl Reconciler<'_> {
    /// `rollout/service.go`: the stable Service selects the stable ReplicaSet, the canary
    /// Service the new one (the stable one on abort). A Service Argo does not manage yet is
    /// switched only once its target is fully available; a managed one once the target has
    /// an available pod.
    pub(super) fn reconcile_services(
        &mut self,
        canary: &CanaryStrategy,
        new_rs: &Rs,
        stable_rs: Option<&Rs>,
        all: &[Rs],
        fully_promoted: bool,
    ) -> Result<(), ApiError> {
        let stable_hash = stable_rs.map(|s| s.hash.clone()).unwrap_or_default();
        let canary_target = if self.status.abort {
            stable_hash.clone()
        } else {
            new_rs.hash.clone()
        };
        // `reconcilePingAndPongService`: until the update is fully promoted, the canary of
        // ping/pong selects the new ReplicaSet, without the availability check.
        let ping_pong_canary = match &canary.ping_pong {
            Some(_) if !fully_promoted => {
                stable_and_canary_services(canary, &self.status.canary.stable_ping_pong, true).1
            }
            _ => String::new(),
        };
        for (svc_name, target, check_availability) in [
            (&ping_pong_canary, new_rs.hash.clone(), false),
            (&canary.stable_service, stable_hash, true),
            (&canary.canary_service, canary_target, true),
        ] {
            if svc_name.is_empty() || target.is_empty() {
                continue;
            }
            let ns = self.ns();
            let Ok(svc) = self.api.get(Kind::Service, &ns, svc_name) else {
                continue;
            };
            let current = svc.spec()["selector"][HASH_LABEL]
                .as_str()
                .unwrap_or("")
                .to_string();
            let managed = svc.annotation(MANAGED_BY) == Some(self.rollout.name());
            if current == target && managed {
                continue;
            }
            let Some(target_rs) = all.iter().find(|r| r.hash == target) else {
                continue;
            };
            let ready = if !check_availability {
                true
            } else if managed || current == target {
                target_rs.available >= 1
            } else {
                target_rs.spec > 0 && target_rs.available >= target_rs.spec
            };
            if !ready {
                continue;
            }
            self.write_service_selector(svc_name, &current, &target)?;
        }
        Ok(())
    }

    /// The write of `switchServiceSelector`: the Service selects `target`, is marked as
    /// managed by this rollout, and an event names the switch from `current`.
    pub(super) fn write_service_selector(
        &mut self,
        service: &str,
        current: &str,
        target: &str,
    ) -> Result<(), ApiError> {
        let patch = json!({
            "metadata": {"annotations": {MANAGED_BY: self.rollout.name()}},
            "spec": {"selector": {HASH_LABEL: target}},
        });
        let ns = self.ns();
        self.api
            .patch(Kind::Service, &ns, service, &Patch::Merge(patch))?;
        self.outcome.changed = true;
        self.event(
            false,
            "SwitchService",
            format!("Switched selector for service '{service}' from '{current}' to '{target}'"),
        );
        Ok(())
    }
}
