//! Argo's `rollout/trafficrouting.go` for Istio: the weight each step sets, DestinationRule
//! subsets, VirtualService weights, header and mirror routes.

// One reconciler across files: each part shares its module's imports and helpers.
use super::*;

impl Reconciler<'_> {
    /// `rollout/trafficrouting.go` for Istio. Returns false when an error stops the reconcile.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn reconcile_traffic(
        &mut self,
        spec: &RolloutSpec,
        canary: &CanaryStrategy,
        new_rs: &Rs,
        stable_rs: Option<&Rs>,
        all: &[Rs],
        at_desired: bool,
        fully_promoted: bool,
    ) -> Result<bool, ApiError> {
        let tr = canary.traffic_routing.as_ref().expect("caller checked");
        let Some(istio_cfg) = tr.istio.as_ref() else {
            return Ok(true);
        };
        let n = spec.desired_replicas();
        let steps = &canary.steps;
        let managed = managed_routes(canary);
        let name = self.name();
        let services =
            stable_and_canary_services(canary, &self.status.canary.stable_ping_pong, false);
        let ctx = istio_context(&name, canary, &services, managed.as_deref());
        let index = self.status.current_step_index.unwrap_or(0) as usize;

        // The weight to write, and whether managed routes go.
        let (weight, remove_routes) =
            self.desired_weight(canary, n, new_rs, stable_rs, at_desired, fully_promoted);

        if remove_routes {
            self.remove_managed_routes(istio_cfg, &ctx)?;
        }

        // The stable ReplicaSet must be able to take the rest of the traffic.
        let stable_available = stable_rs.map(|s| s.available).unwrap_or(0);
        let needed = ((100 - weight).max(0) as i64 * n as i64 / 100) as i32;
        let threshold_met = replicas::replica_progress_threshold_met(
            progress_threshold(canary),
            stable_rs.map(Rs::counts),
            n,
        );
        if stable_available < needed && !(progress_threshold(canary).is_some() && threshold_met) {
            return Ok(true);
        }

        let dr_object: Option<Value> = match &istio_cfg.destination_rule {
            Some(dr) => self
                .api
                .get(Kind::DestinationRule, &self.ns(), &dr.name)
                .ok()
                .map(|o| o.value.clone()),
            None => None,
        };

        // A header or mirror step is applied in the reconcile where it is current.
        let revision = new_rs.revision;
        if revision > 1 && !self.status.abort && !fully_promoted {
            if let Some(step) = steps.get(index) {
                if step.set_header_route.is_some() || step.set_mirror_route.is_some() {
                    if let Err(e) =
                        self.apply_route_step(istio_cfg, &ctx, step, dr_object.as_ref())?
                    {
                        return self.traffic_error(e);
                    }
                }
            }
        }

        // Subset-level split: label the DestinationRule's subsets (after the "delaying
        // destination rule switch" check, which the Istio module makes).
        if let Some(dr) = &istio_cfg.destination_rule {
            if let Err(e) = self.update_subsets(canary, dr, dr_object.as_ref(), &ctx, new_rs, all) {
                return self.traffic_error(e);
            }
        }
        if let Err(e) = self.set_virtual_service_weights(istio_cfg, &ctx, weight) {
            return self.traffic_error(e);
        }

        let weights = TrafficWeights {
            canary: WeightDestination {
                weight,
                service_name: services.1.clone(),
                pod_template_hash: new_rs.hash.clone(),
            },
            stable: WeightDestination {
                weight: 100 - weight,
                service_name: services.0.clone(),
                pod_template_hash: self.status.stable_r_s.clone(),
            },
            additional: Vec::new(),
            verified: None,
        };
        self.status.canary.weights = Some(weights);
        Ok(true)
    }

    /// Argo's `desiredWeight` in `reconcileTrafficRouting` (first match wins), and whether the
    /// managed routes are removed: 0 once promoted or when nothing of the canary is up;
    /// on abort 0 (or, with dynamicStableScale, the step-down weight); on promote-full the
    /// canary's share of pods (dynamicStableScale, unclamped as Argo has it) or the last
    /// weight; else the step's weight, the previous one until the replicas are in place.
    pub(super) fn desired_weight(
        &self,
        canary: &CanaryStrategy,
        n: i32,
        new_rs: &Rs,
        stable_rs: Option<&Rs>,
        at_desired: bool,
        fully_promoted: bool,
    ) -> (i32, bool) {
        let steps = &canary.steps;
        let index = self.status.current_step_index.unwrap_or(0) as usize;
        let last_weight = self
            .status
            .canary
            .weights
            .as_ref()
            .map(|w| w.canary.weight)
            .unwrap_or(0);
        if fully_promoted {
            (0, true)
        } else if self.status.abort {
            if canary.dynamic_stable_scale {
                let set_weights: Vec<i32> = steps.iter().filter_map(|s| s.set_weight).collect();
                let w = replicas::dynamic_abort_weight(
                    n,
                    100,
                    &set_weights,
                    new_rs.available,
                    stable_rs.map(|s| s.available).unwrap_or(0),
                    replicas::has_explicit_abort_scale_down_delay(
                        true,
                        canary.abort_scale_down_delay_seconds,
                    ),
                );
                (w.min(last_weight), true)
            } else {
                (0, true)
            }
        } else if new_rs.available == 0 {
            (0, true)
        } else if self.status.promote_full {
            if canary.dynamic_stable_scale && n > 0 {
                // Unclamped, as Argo computes it: above 100 when the canary has more pods
                // than spec.replicas (setCanaryScale), argo-rollouts#4424; the Istio
                // module then writes stable 0, which istiod before 1.15 rejects.
                (100 * new_rs.available / n, true)
            } else {
                (last_weight, true)
            }
        } else if !at_desired {
            (previous_set_weight(steps, index), false)
        } else if index < steps.len() {
            (current_set_weight(steps, index), false)
        } else {
            (100, false)
        }
    }

    /// The DestinationRule's canary and stable subsets select the new and stable
    /// ReplicaSets' hashes; an error is the traffic routing error to report.
    pub(super) fn update_subsets(
        &mut self,
        canary: &CanaryStrategy,
        dr: &crate::model::rollout::IstioDestinationRule,
        dr_object: Option<&Value>,
        ctx: &IstioContext,
        new_rs: &Rs,
        all: &[Rs],
    ) -> Result<(), String> {
        let availability: Vec<istio::ReplicaSetAvailability> = all
            .iter()
            .map(|r| istio::ReplicaSetAvailability {
                name: r.name(),
                pod_template_hash: &r.hash,
                spec_replicas: r.spec,
                available_replicas: r.available,
            })
            .collect();
        let delay = istio::DestinationRuleDelayCheck {
            services_in_spec: !canary.canary_service.is_empty()
                || !canary.stable_service.is_empty(),
            skip_canary: self.status.abort,
            replica_sets: &availability,
        };
        let stable_hash = self.status.stable_r_s.clone();
        let next =
            istio::update_destination_rule(dr_object, ctx, &new_rs.hash, &stable_hash, &[], &delay)
                .map_err(|e| e.to_string())?;
        // Argo patches a rule whose subsets carry fields besides name and labels (e.g.
        // `trafficPolicy`) on every reconcile, though the patch changes nothing; only a
        // write that changed the rule counts (and is an event), or the world never settles.
        if let Some(next) = next {
            let written = self
                .write(Object::new(Kind::DestinationRule, next))
                .map_err(|e| e.to_string())?;
            if !written {
                return Ok(());
            }
            self.istio_event(istio::destination_rule_updated_event(
                dr,
                &new_rs.hash,
                &stable_hash,
            ));
        }
        Ok(())
    }

    /// Every referenced VirtualService's routes get `weight` for the canary (Argo's
    /// `SetWeight`); an error is the traffic routing error to report.
    pub(super) fn set_virtual_service_weights(
        &mut self,
        istio_cfg: &crate::model::rollout::IstioTrafficRouting,
        ctx: &IstioContext,
        weight: i32,
    ) -> Result<(), String> {
        for vs_ref in istio_cfg.virtual_service_list() {
            let (vs_ns, vs_name) = istio::virtual_service_namespace_name(&vs_ref.name, &self.ns());
            // Read in place: a VirtualService can be megabytes, and it is read every round.
            let next = match self.api.get(Kind::VirtualService, &vs_ns, &vs_name) {
                Ok(vs) => istio::set_weight(&vs.value, vs_ref, ctx, weight, &[]),
                Err(e) => {
                    self.istio_event(istio::virtual_service_not_found_event(&vs_name));
                    return Err(e.to_string());
                }
            };
            let next = next.map_err(|e| e.to_string())?;
            if let Some(next) = next {
                let written = self
                    .write(Object::new(Kind::VirtualService, next))
                    .map_err(|e| e.to_string())?;
                if written {
                    self.istio_event(istio::set_weight_event(&vs_name, weight));
                }
            }
        }
        Ok(())
    }

    /// Reports a traffic routing error the way Argo does (Warning event, reconcile stops).
    pub(super) fn traffic_error(&mut self, message: String) -> Result<bool, ApiError> {
        self.event(true, "TrafficRoutingError", message.clone());
        self.outcome.error = Some(message);
        Ok(false)
    }

    pub(super) fn apply_route_step(
        &mut self,
        istio_cfg: &crate::model::rollout::IstioTrafficRouting,
        ctx: &IstioContext,
        step: &CanaryStep,
        dr: Option<&Value>,
    ) -> Result<Result<(), String>, ApiError> {
        for vs_ref in istio_cfg.virtual_service_list() {
            let (vs_ns, vs_name) = istio::virtual_service_namespace_name(&vs_ref.name, &self.ns());
            let op = if step.set_header_route.is_some() {
                istio::IstioOperation::SetHeaderRoute
            } else {
                istio::IstioOperation::SetMirrorRoute
            };
            let vs = match self.api.get(Kind::VirtualService, &vs_ns, &vs_name) {
                Ok(o) => o,
                Err(e) => {
                    let message = istio::virtual_service_not_found_error(op, &vs_name)
                        .map(|e| e.to_string())
                        .unwrap_or_else(|| e.to_string());
                    return Ok(Err(message));
                }
            };
            let result = if let Some(h) = &step.set_header_route {
                istio::set_header_route(&vs.value, vs_ref, ctx, h, dr)
                    .map(|v| (v, istio::set_header_route_event(&vs_name, &h.name)))
            } else if let Some(m) = &step.set_mirror_route {
                istio::set_mirror_route(&vs.value, vs_ref, ctx, m, dr)
                    .map(|v| (v, istio::set_mirror_route_event(&vs_name, &m.name)))
            } else {
                continue;
            };
            // Only whether it changed outlives the borrow of the stored object.
            let result = result.map(|(next, event)| (next != vs.value, next, event));
            match result {
                Ok((changed, next, event)) => {
                    if changed {
                        if let Err(e) = self.api.update(Object::new(Kind::VirtualService, next)) {
                            return Ok(Err(e.to_string()));
                        }
                        self.outcome.changed = true;
                        self.istio_event(event);
                    }
                }
                Err(e) => return Ok(Err(e.to_string())),
            }
        }
        Ok(Ok(()))
    }

    pub(super) fn remove_managed_routes(
        &mut self,
        istio_cfg: &crate::model::rollout::IstioTrafficRouting,
        ctx: &IstioContext,
    ) -> Result<(), ApiError> {
        for vs_ref in istio_cfg.virtual_service_list() {
            let (vs_ns, vs_name) = istio::virtual_service_namespace_name(&vs_ref.name, &self.ns());
            let Ok(vs) = self.api.get(Kind::VirtualService, &vs_ns, &vs_name) else {
                continue;
            };
            let outcome = istio::remove_managed_routes(&vs.value, ctx).map(|o| match o {
                RemoveOutcome::Write(next) if next == vs.value => RemoveOutcome::Unchanged,
                other => other,
            });
            match outcome {
                Ok(RemoveOutcome::Write(next)) => {
                    self.api.update(Object::new(Kind::VirtualService, next))?;
                    self.outcome.changed = true;
                    self.istio_event(istio::removed_managed_routes_event(&vs_name));
                }
                Ok(RemoveOutcome::Unchanged) => {}
                Ok(RemoveOutcome::StopNoHttp) => break,
                Err(e) => {
                    self.event(true, "TrafficRoutingError", e.to_string());
                }
            }
        }
        Ok(())
    }
}
