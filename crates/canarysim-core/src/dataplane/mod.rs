//! Where requests go: Services resolved to their ready pods, the Envoy-like mesh that routes
//! by the Istio objects, and kube-proxy's per-connection choice without a mesh. It reads
//! objects; it never calls the controllers. Re-exported at the crate root (`crate::mesh`, …).

pub mod endpoints;
pub mod kubeproxy;
pub mod mesh;
