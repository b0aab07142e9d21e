//! The simulated cluster: the API server's store, the controllers that reconcile it (Argo's
//! rollout and analysis controllers, the ReplicaSet controller, the kubelet), the virtual
//! clock, and the [`sim::World`] that steps them. Re-exported at the crate root
//! (`crate::apiserver`, …).

pub mod analysis;
pub mod apiserver;
pub mod clock;
pub mod controller;
pub mod event_recorder;
pub mod sim;
