//! Renderings of a run: the `kubectl argo rollouts get rollout` view.

pub mod get_rollout;
pub mod rollout_view;
