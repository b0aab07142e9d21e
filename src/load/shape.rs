//! How a real load was sent, as its report and its result file say it: one load's flags, or
//! its shards' together (`load merge`).

use super::http::HttpLoad;

/// How a load was sent.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadShape {
    /// Connections at once (-c; shards: their sum).
    pub connections: u32,
    /// Connections kept alive (no --disable-keepalive).
    pub keepalive: bool,
    /// Open loop: requests per second (-q; shards: their sum).
    pub rate: Option<f64>,
    /// How an answer names its version (--classify).
    pub classify: String,
    /// Requests planned (-n; shards: their sum).
    pub requests: Option<u64>,
    /// Stopped by the sequential test (--until-decided).
    pub until_decided: bool,
}

impl LoadShape {
    pub fn of(load: &HttpLoad) -> LoadShape {
        LoadShape {
            connections: load.traffic.connections,
            keepalive: load.traffic.keepalive,
            rate: load.traffic.arrival.rate(),
            classify: load.classifier.to_string(),
            requests: load.extent.requests(),
            until_decided: load.traffic.stop.is_some(),
        }
    }
}
