//! Typed read-only views of Istio objects (VirtualService, DestinationRule, Gateway) and of
//! Services, for the parts canarysim interprets. Field names follow Istio's
//! `networking.istio.io` API (identical in v1alpha3, v1beta1 and v1).

use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

use super::rollout::StringMatch;

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct VirtualServiceSpec {
    #[serde(default)]
    pub hosts: Vec<String>,
    #[serde(default)]
    pub gateways: Vec<String>,
    #[serde(default)]
    pub http: Vec<HttpRoute>,
    #[serde(default)]
    pub tls: Vec<TlsRoute>,
    #[serde(default)]
    pub tcp: Vec<TcpRoute>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HttpRoute {
    #[serde(default)]
    pub name: String,
    #[serde(default, rename = "match")]
    pub matches: Vec<HttpMatchRequest>,
    #[serde(default)]
    pub route: Vec<RouteDestination>,
    pub mirror: Option<Destination>,
    pub mirror_percentage: Option<Percent>,
    /// Istio ≥ 1.18: several mirrors, each with its own percentage.
    #[serde(default)]
    pub mirrors: Vec<HttpMirrorPolicy>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct HttpMirrorPolicy {
    #[serde(default)]
    pub destination: Destination,
    pub percentage: Option<Percent>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpMatchRequest {
    #[serde(default)]
    pub name: String,
    pub uri: Option<StringMatch>,
    pub method: Option<StringMatch>,
    pub authority: Option<StringMatch>,
    #[serde(default)]
    pub headers: BTreeMap<String, StringMatch>,
    #[serde(default)]
    pub without_headers: BTreeMap<String, StringMatch>,
    #[serde(default)]
    pub query_params: BTreeMap<String, StringMatch>,
    #[serde(default)]
    pub source_labels: BTreeMap<String, String>,
    pub source_namespace: Option<String>,
    pub port: Option<u32>,
    #[serde(default)]
    pub gateways: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Percent {
    #[serde(default)]
    pub value: f64,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct RouteDestination {
    #[serde(default)]
    pub destination: Destination,
    /// Absent weight: Istio gives a lone destination 100 and treats others as 0. An int32,
    /// as the CRD and istiod declare it: a larger number is refused as the schema refuses it.
    pub weight: Option<i32>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct Destination {
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub subset: String,
    pub port: Option<PortSelector>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct PortSelector {
    #[serde(default)]
    pub number: u32,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct TlsRoute {
    #[serde(default, rename = "match")]
    pub matches: Vec<TlsMatchAttributes>,
    #[serde(default)]
    pub route: Vec<RouteDestination>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsMatchAttributes {
    #[serde(default)]
    pub sni_hosts: Vec<String>,
    #[serde(default)]
    pub source_labels: BTreeMap<String, String>,
    pub source_namespace: Option<String>,
    pub port: Option<u32>,
    #[serde(default)]
    pub gateways: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct TcpRoute {
    #[serde(default, rename = "match")]
    pub matches: Vec<L4MatchAttributes>,
    #[serde(default)]
    pub route: Vec<RouteDestination>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct L4MatchAttributes {
    #[serde(default)]
    pub source_labels: BTreeMap<String, String>,
    pub source_namespace: Option<String>,
    pub port: Option<u32>,
    #[serde(default)]
    pub gateways: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DestinationRuleSpec {
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub subsets: Vec<Subset>,
    pub traffic_policy: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Subset {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct GatewaySpec {
    #[serde(default)]
    pub selector: BTreeMap<String, String>,
    #[serde(default)]
    pub servers: Vec<Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ServiceSpec {
    #[serde(default)]
    pub selector: BTreeMap<String, String>,
    #[serde(default)]
    pub ports: Vec<ServicePort>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub port: u32,
    pub target_port: Option<super::rollout::IntOrString>,
    #[serde(default)]
    pub protocol: String,
}
