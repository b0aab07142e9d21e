//! Decoding an object's spec into canarysim's typed view of its kind, with the field at
//! fault when a value has the wrong type: what a CRD's structural schema (or the API
//! server's own types) refuses, located where the user wrote it.

use serde::de::DeserializeOwned;
use serde_json::Value;

mod structs_as_maps;

use super::Kind;
use super::istio::{DestinationRuleSpec, GatewaySpec, ServiceSpec, VirtualServiceSpec};
use super::rollout::RolloutSpec;

/// A value the typed view refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// JSON pointer of the field at fault, from the decoded value (`/revisionHistoryLimit`).
    pub pointer: String,
    /// The same as a path for messages (`revisionHistoryLimit`, `strategy.canary.steps[0]`).
    pub path: String,
    /// serde's words (`invalid type: string "two", expected i32`).
    pub message: String,
}

/// Decodes `value` into `T`, naming the field at fault on failure.
pub fn decode<T: DeserializeOwned>(value: &Value) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(structs_as_maps::StructsAsMaps(value)).map_err(|e| {
        let mut pointer = String::new();
        let mut path = String::new();
        for segment in e.path().iter() {
            use serde_path_to_error::Segment;
            match segment {
                Segment::Seq { index } => {
                    pointer.push_str(&format!("/{index}"));
                    path.push_str(&format!("[{index}]"));
                }
                Segment::Map { key } => {
                    pointer.push('/');
                    pointer.push_str(&super::yaml::escape_pointer(key));
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(key);
                }
                Segment::Enum { variant } => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(variant);
                }
                Segment::Unknown => {}
            }
        }
        FieldError {
            pointer,
            path,
            message: super::words::plain(&e.inner().to_string(), &|_| None),
        }
    })
}

/// Checks `spec` against the typed view of `kind`, where canarysim has one.
pub fn check_spec(kind: Kind, spec: &Value) -> Result<(), FieldError> {
    if spec.is_null() {
        return Ok(());
    }
    match kind {
        Kind::Rollout => decode::<RolloutSpec>(spec).map(drop),
        Kind::VirtualService => decode::<VirtualServiceSpec>(spec).map(drop),
        Kind::DestinationRule => decode::<DestinationRuleSpec>(spec).map(drop),
        Kind::Gateway => decode::<GatewaySpec>(spec).map(drop),
        Kind::Service => decode::<ServiceSpec>(spec).map(drop),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_wrong_type_names_its_field() {
        let e = check_spec(
            Kind::Rollout,
            &json!({"replicas": 4, "revisionHistoryLimit": "two"}),
        )
        .unwrap_err();
        assert_eq!(e.pointer, "/revisionHistoryLimit");
        assert_eq!(e.path, "revisionHistoryLimit");
        assert!(e.message.contains("\"two\""), "{e:?}");
        let e = check_spec(
            Kind::Rollout,
            &json!({"strategy": {"canary": {"steps": [{"setWeight": 20}, {"setWeight": "x"}]}}}),
        )
        .unwrap_err();
        assert_eq!(e.pointer, "/strategy/canary/steps/1/setWeight");
        assert_eq!(e.path, "strategy.canary.steps[1].setWeight");
        assert!(check_spec(Kind::Rollout, &json!({"replicas": 4})).is_ok());
    }
}
