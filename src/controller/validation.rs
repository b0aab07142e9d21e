//! PLACEHOLDER until the full port lands.
use crate::model::rollout::RolloutSpec;
pub struct FieldError(pub String);
impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
pub fn validate_rollout(_v: &serde_json::Value, _s: &RolloutSpec) -> Vec<FieldError> {
    Vec::new()
}
