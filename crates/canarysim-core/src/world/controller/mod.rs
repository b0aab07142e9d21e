//! Controllers: the Argo-Rollouts-like rollout reconciler and the ReplicaSet/Pod lifecycle it
//! drives. They touch objects only through the [`crate::apiserver`] API.
//!
//! * [`rollout`] — the reconciler (steps, services, traffic routing, scaling, status);
//! * [`replicas`] — Argo's replica arithmetic, pure;
//! * [`istio`] — VirtualService / DestinationRule patching, pure;
//! * [`gateway_api`] — the Gateway API plugin's HTTPRoute writes, pure;
//! * [`nginx`] — the NGINX router's canary Ingress, pure;
//! * [`validation`] — Argo's spec validation, pure;
//! * [`hash`] — pod-template-hash;
//! * [`replicaset`] — the ReplicaSet controller and kubelet;
//! * [`rollout_analysis`] — the rollout's AnalysisRuns (create, terminate, their effects);
//! * [`analysis_run`] — the AnalysisRun controller: measurements, limits, phases;
//! * [`actions`] — what `kubectl argo rollouts promote|abort|retry|…` sends.

pub mod actions;
pub mod analysis_run;
pub mod ephemeral;
pub mod gateway_api;
pub mod hash;
pub mod istio;
pub mod nginx;
pub mod replicas;
pub mod replicaset;
pub mod rollout;
pub mod rollout_analysis;
pub mod validation;
