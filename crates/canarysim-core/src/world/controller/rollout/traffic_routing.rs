//! Argo's `rollout/trafficrouting.go` for Istio, NGINX and the Gateway API plugin: the
//! weight each step sets, DestinationRule subsets, VirtualService and HTTPRoute weights, the
//! canary Ingress, header and mirror routes.

// One reconciler across files: each part shares its module's imports and helpers.
use super::*;

impl Reconciler<'_> {
    /// `rollout/trafficrouting.go` for Istio and the Gateway API plugin (each configured
    /// router in turn, as Argo runs its reconcilers). Returns false when an error stops the
    /// reconcile.
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
        let istio_cfg = tr.istio.as_ref();
        let plugin = gateway_api::PluginConfig::of(tr.plugins.as_ref(), &self.ns());
        if istio_cfg.is_none() && plugin.is_none() && tr.nginx.is_none() {
            return Ok(true);
        }
        let n = spec.desired_replicas();
        let steps = &canary.steps;
        let managed = managed_routes(canary);
        let name = self.name();
        let services =
            stable_and_canary_services(canary, &self.status.canary.stable_ping_pong, false);
        let ctx = istio_context(&name, canary, &services, managed.as_deref());
        let plugin_ctx = plugin_context(canary, managed.as_deref());
        let index = self.status.current_step_index.unwrap_or(0) as usize;

        // The weight to write, and whether managed routes go.
        let (weight, remove_routes) =
            self.desired_weight(canary, n, new_rs, stable_rs, at_desired, fully_promoted);

        if remove_routes {
            if let Some(istio_cfg) = istio_cfg {
                self.remove_managed_routes(istio_cfg, &ctx)?;
            }
            let removed = plugin
                .as_ref()
                .map(|p| self.remove_http_route_rules(p, &plugin_ctx));
            if let Some(Err(e)) = removed {
                // Argo returns the plugin's error without an event.
                return self
                    .traffic_failure(format!("failed to remove managed routes via plugin: {e}"));
            }
        }

        // The stable ReplicaSet must be able to take the rest of the traffic.
        let stable_available = stable_rs.map(|s| s.available).unwrap_or(0);
        let max = canary.max_traffic_weight();
        let needed = ((max - weight).max(0) as i64 * n as i64 / max.max(1) as i64) as i32;
        let threshold_met = replicas::replica_progress_threshold_met(
            progress_threshold(canary),
            stable_rs.map(Rs::counts),
            n,
        );
        if stable_available < needed && !(progress_threshold(canary).is_some() && threshold_met) {
            return Ok(true);
        }

        let dr_object: Option<Value> = match istio_cfg.and_then(|i| i.destination_rule.as_ref()) {
            Some(dr) => self
                .api
                .get(Kind::DestinationRule, &self.ns(), &dr.name)
                .ok()
                .map(|o| o.value.clone()),
            None => None,
        };

        // A header or mirror step is applied in the reconcile where it is current.
        if new_rs.revision > 1 && !self.status.abort && !fully_promoted {
            if let Some(step) = steps.get(index) {
                let routers = StepRouters {
                    istio: istio_cfg.map(|i| (i, &ctx)),
                    plugin: plugin.as_ref().map(|p| (p, &plugin_ctx)),
                };
                if let Err(e) = self.apply_step_routes(routers, step, dr_object.as_ref())? {
                    return self.route_failure(e);
                }
            }
        }

        // Subset-level split: label the DestinationRule's subsets (after the "delaying
        // destination rule switch" check, which the Istio module makes).
        if let Some(dr) = istio_cfg.and_then(|i| i.destination_rule.as_ref()) {
            if let Err(e) = self.update_subsets(canary, dr, dr_object.as_ref(), &ctx, new_rs, all) {
                return self.traffic_error(e);
            }
        }
        if let Some(istio_cfg) = istio_cfg {
            if let Err(e) = self.set_virtual_service_weights(istio_cfg, &ctx, weight) {
                return self.traffic_error(e);
            }
        }
        if let Err(e) = self.set_canary_ingress_weights(canary, weight)? {
            return self.route_failure(e);
        }
        let set = plugin
            .as_ref()
            .map(|p| self.set_http_route_weights(p, &plugin_ctx, weight));
        if let Some(Err(e)) = set {
            return self.traffic_error(format!("failed to set weight via plugin: {e}"));
        }

        let weights = TrafficWeights {
            canary: WeightDestination {
                weight,
                service_name: services.1.clone(),
                pod_template_hash: new_rs.hash.clone(),
            },
            stable: WeightDestination {
                weight: max - weight,
                service_name: services.0.clone(),
                pod_template_hash: self.status.stable_r_s.clone(),
            },
            additional: Vec::new(),
            // The plugin's VerifyWeight answers "verified" without looking; Istio's none.
            verified: plugin.is_some().then_some(true),
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
        let max = canary.max_traffic_weight();
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
                    max,
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
                (max * new_rs.available / n, true)
            } else {
                (last_weight, true)
            }
        } else if !at_desired {
            (previous_set_weight(steps, index), false)
        } else if index < steps.len() {
            (current_set_weight(steps, index), false)
        } else {
            (max, false)
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

    /// The NGINX router's `SetWeight` (after Istio's, before the plugins', as Argo orders its
    /// reconcilers), when the rollout routes by NGINX: for each stable
    /// Ingress, its canary Ingress created or patched to `weight`; Err is the message Argo
    /// returns.
    fn set_canary_ingress_weights(
        &mut self,
        canary: &CanaryStrategy,
        weight: i32,
    ) -> Result<Result<(), StepRouteError>, ApiError> {
        let tr = canary.traffic_routing.as_ref();
        let Some(config) = tr.and_then(|t| t.nginx.as_ref()) else {
            return Ok(Ok(()));
        };
        let target = &nginx::CanaryFor {
            config,
            stable_service: &canary.stable_service,
            canary_service: &canary.canary_service,
            max_traffic_weight: tr.and_then(|t| t.max_traffic_weight),
            owner: self.controller_reference(),
        };
        let ns = self.ns();
        let kind = crate::model::ingress::ingress_kind();
        let uid = self.rollout.uid().to_string();
        for stable_name in target.config.stable_ingress_list() {
            let name = nginx::canary_ingress_name(&self.name(), stable_name);
            let Ok(stable) = self.api.get(kind, &ns, stable_name) else {
                return Ok(Err(StepRouteError::Reported(nginx::stable_ingress_error(
                    stable_name,
                ))));
            };
            let desired = match nginx::canary_ingress(&stable.value, &ns, &name, weight, target) {
                Ok(d) => d,
                // A panic is logged and the rollout requeued: no event.
                Err(e) if e == nginx::NIL_POINTER_PANIC => {
                    return Ok(Err(StepRouteError::Returned(e)));
                }
                Err(e) => return Ok(Err(StepRouteError::Reported(e))),
            };
            let current = self.api.get(kind, &ns, &name).ok().map(|o| o.value.clone());
            let Some(current) = current else {
                self.event(
                    false,
                    "CreatingCanaryIngress",
                    nginx::creating_event(&name, weight),
                );
                if let Err(e) = self.api.create(Object::new(kind, desired)) {
                    let e = format!("error creating canary ingress `{name}`: {e}");
                    return Ok(Err(StepRouteError::Reported(e)));
                }
                self.outcome.changed = true;
                continue;
            };
            if !nginx::controlled_by(&current, &uid) {
                let e = nginx::controlled_by_other_error(&name);
                return Ok(Err(StepRouteError::Reported(e)));
            }
            let Some(next) = nginx::patched(&current, &desired) else {
                continue;
            };
            self.event(
                false,
                "PatchingCanaryIngress",
                nginx::patching_event(&name, weight),
            );
            if let Err(e) = self.write(Object::new(kind, next)) {
                let e = format!("error patching canary ingress `{name}`: {e}");
                return Ok(Err(StepRouteError::Reported(e)));
            }
        }
        Ok(Ok(()))
    }

    /// The Rollout as the controller of what it creates (`metav1.NewControllerRef`).
    fn controller_reference(&self) -> Value {
        json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Rollout",
            "name": self.rollout.name(),
            "uid": self.rollout.uid(),
            "controller": true,
            "blockOwnerDeletion": true,
        })
    }

    /// Reports a traffic routing error the way Argo does (Warning event, reconcile stops).
    pub(super) fn traffic_error(&mut self, message: String) -> Result<bool, ApiError> {
        self.event(true, "TrafficRoutingError", message.clone());
        self.traffic_failure(message)
    }

    /// A router's error, reported as Argo reports it.
    fn route_failure(&mut self, e: StepRouteError) -> Result<bool, ApiError> {
        match e {
            StepRouteError::Reported(e) => self.traffic_error(e),
            StepRouteError::Returned(e) => self.traffic_failure(e),
        }
    }

    /// A traffic routing error Argo returns without an event: the reconcile stops.
    fn traffic_failure(&mut self, message: String) -> Result<bool, ApiError> {
        self.outcome.error = Some(message);
        Ok(false)
    }

    /// The current step's header or mirror route, by each configured router (the plugin's
    /// SetMirrorRoute does nothing).
    fn apply_step_routes(
        &mut self,
        StepRouters { istio, plugin }: StepRouters,
        step: &CanaryStep,
        dr: Option<&Value>,
    ) -> Result<Result<(), StepRouteError>, ApiError> {
        if step.set_header_route.is_some() || step.set_mirror_route.is_some() {
            if let Some((istio_cfg, ctx)) = istio {
                if let Err(e) = self.apply_route_step(istio_cfg, ctx, step, dr)? {
                    return Ok(Err(StepRouteError::Reported(e)));
                }
            }
        }
        if let (Some((plugin, ctx)), Some(h)) = (plugin, &step.set_header_route) {
            return Ok(self.set_http_route_header(plugin, ctx, h).map_err(|e| {
                StepRouteError::Returned(format!("failed to set header route via plugin: {e}"))
            }));
        }
        Ok(Ok(()))
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

    /// The routes the plugin manages, kind by kind in its order: those it names, then those
    /// its selector for the kind finds (`getGatewayAPIConfigWithDiscovery`).
    fn plugin_routes(&self, plugin: &gateway_api::PluginConfig) -> Vec<gateway_api::ManagedRoute> {
        let mut routes = Vec::new();
        for kind in gateway_api::RouteKind::ALL {
            routes.extend(plugin.named(kind).cloned());
            let stored = crate::model::gateway_api::kind(kind.kind());
            for (_, selector) in plugin.selectors.iter().filter(|(k, _)| *k == kind) {
                for r in self
                    .api
                    .list(stored, Some(&plugin.namespace), Some(selector))
                {
                    routes.push(gateway_api::ManagedRoute {
                        kind,
                        name: r.name().to_string(),
                        use_header_routes: false,
                    });
                }
            }
        }
        routes
    }

    /// Applies `change` to each managed route (for header routes, only the HTTP and gRPC
    /// routes that take them) and writes what changed; the first error stops, as the plugin
    /// returns it.
    fn each_route(
        &mut self,
        plugin: &gateway_api::PluginConfig,
        header_routes_only: bool,
        change: impl Fn(gateway_api::RouteKind, &Value) -> Result<Option<Value>, String>,
    ) -> Result<(), String> {
        let routes = self.plugin_routes(plugin);
        // Only SetWeight insists on a route (`isConfigHasRoutes`, after the selectors').
        if !header_routes_only && routes.is_empty() {
            return Err(gateway_api::NO_ROUTES.to_string());
        }
        for route in routes {
            if header_routes_only && !(route.use_header_routes && route.kind.takes_header_routes())
            {
                continue;
            }
            let kind = crate::model::gateway_api::kind(route.kind.kind());
            let current = self
                .api
                .get(kind, &plugin.namespace, &route.name)
                .map_err(|e| e.to_string())?;
            if let Some(next) = change(route.kind, &current.value)? {
                self.write(Object::new(kind, next))
                    .map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }

    /// The plugin's SetWeight on every route it manages.
    fn set_http_route_weights(
        &mut self,
        plugin: &gateway_api::PluginConfig,
        ctx: &gateway_api::PluginContext,
        weight: i32,
    ) -> Result<(), String> {
        let label = plugin.in_progress_label.as_ref();
        self.each_route(plugin, false, |kind, r| {
            gateway_api::set_weight(r, kind, ctx, weight, label)
        })
    }

    /// The plugin's SetHeaderRoute on the HTTP and gRPC routes that take header routes.
    fn set_http_route_header(
        &mut self,
        plugin: &gateway_api::PluginConfig,
        ctx: &gateway_api::PluginContext,
        step: &crate::model::rollout::SetHeaderRoute,
    ) -> Result<(), String> {
        self.each_route(plugin, true, |_, r| {
            gateway_api::set_header_route(r, ctx, step)
        })
    }

    /// The plugin's RemoveManagedRoutes on the HTTP and gRPC routes that take header routes.
    fn remove_http_route_rules(
        &mut self,
        plugin: &gateway_api::PluginConfig,
        ctx: &gateway_api::PluginContext,
    ) -> Result<(), String> {
        self.each_route(plugin, true, |_, r| {
            Ok(gateway_api::remove_managed_routes(r, ctx))
        })
    }
}

/// The names the Gateway API plugin writes for: the Rollout's Services as written (the
/// plugin reads `canaryService` and `stableService`, never ping-pong).
fn plugin_context<'c>(
    canary: &'c CanaryStrategy,
    managed: Option<&'c [String]>,
) -> gateway_api::PluginContext<'c> {
    gateway_api::PluginContext {
        stable: &canary.stable_service,
        canary: &canary.canary_service,
        managed: managed.unwrap_or_default(),
    }
}

/// The configured routers, each with what it writes for (a step's header and mirror
/// routes go to each).
struct StepRouters<'a, 'c> {
    istio: Option<(
        &'a crate::model::rollout::IstioTrafficRouting,
        &'a IstioContext<'c>,
    )>,
    plugin: Option<(
        &'a gateway_api::PluginConfig,
        &'a gateway_api::PluginContext<'c>,
    )>,
}

/// A step's header or mirror route that failed: with a `TrafficRoutingError` event (Istio's
/// path here), or only returned (Argo's plugin reconciler).
enum StepRouteError {
    Reported(String),
    Returned(String),
}
