//! The scenario file contract (`shared/SCENARIOS.md`), as serde types. Unknown keys are
//! errors (`deny_unknown_fields`): a typo must not pass silently.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;

/// One scenario file.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScenarioFile {
    /// The scenario's name, in reports and as its test's name.
    pub name: String,
    /// Free text.
    #[serde(default)]
    pub description: String,
    /// The RNG seed (default 1): the same seed gives the same report.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// The namespace of objects that name none (default `default`).
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// Manifests applied in order before step 1: `- file: PATH` (relative to the scenario,
    /// multi-document YAML) or `- inline: YAML`.
    #[serde(default)]
    pub manifests: Vec<ManifestSource>,
    /// Knobs of the simulated world.
    #[serde(default)]
    pub cluster: ClusterSpec,
    /// The default client model of `load` steps.
    #[serde(default)]
    pub traffic: TrafficSpec,
    /// The timeline, one key per step.
    #[serde(
        default,
        deserialize_with = "crate::model::yaml::singleton_map::deserialize"
    )]
    #[schemars(schema_with = "steps_schema")]
    pub steps: Vec<Step>,
}

/// `steps` is read as singleton maps (`- wait: 30s`, see model::yaml); the schema is that of
/// the list of steps.
fn steps_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    generator.subschema_for::<Vec<Step>>()
}

fn default_seed() -> u64 {
    1
}

fn default_namespace() -> String {
    "default".to_string()
}

/// `- file: PATH` or `- inline: YAML`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ManifestSource {
    /// A manifest file, relative to the scenario file.
    pub file: Option<String>,
    /// One or more YAML documents, inline.
    pub inline: Option<String>,
}

/// `cluster:` — knobs of the simulated world.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterSpec {
    /// A new pod turns Ready this long after it is created (default 5s).
    #[serde(default = "default_ready_after")]
    pub pod_ready_after: String,
    /// A config change reaches the routers this long after it is written (default 100ms).
    #[serde(default = "default_push_delay")]
    pub push_delay: String,
    /// The endpoint choice inside one mesh cluster (default round_robin).
    #[serde(default)]
    pub endpoint_lb: EndpointLb,
    /// The no-mesh endpoint choice per connection: iptables (random, the default) or ipvs
    /// (round robin).
    #[serde(default)]
    pub kube_proxy: KubeProxyMode,
    /// How the Gateway API's Gateways split a rule between its backends: random (a draw
    /// per request, as Envoy-based implementations do; the default) or round_robin (a
    /// smooth weighted round robin, as Traefik and NGINX Gateway Fabric do).
    #[serde(default)]
    pub gateway_api_split: GatewayApiSplitSpec,
    /// Per image: how its pods answer.
    #[serde(default)]
    pub backends: BTreeMap<String, BackendSpec>,
    /// The Istio release whose admission webhook checks VirtualService writes (weights must
    /// sum to 100 before 1.15); default: a current release.
    #[serde(default)]
    pub istio_version: Option<String>,
    /// Extension: per analysis metric name, the values its successive measurements return
    /// when its provider is not the built-in Prometheus (job: `Successful` / `Failed`; web
    /// and others: a number, a list, a string); the last one repeats.
    #[serde(default)]
    pub analysis_results: BTreeMap<String, Vec<serde_json::Value>>,
}

impl Default for ClusterSpec {
    fn default() -> Self {
        ClusterSpec {
            pod_ready_after: default_ready_after(),
            push_delay: default_push_delay(),
            endpoint_lb: EndpointLb::default(),
            kube_proxy: KubeProxyMode::default(),
            gateway_api_split: GatewayApiSplitSpec::default(),
            backends: BTreeMap::new(),
            istio_version: None,
            analysis_results: BTreeMap::new(),
        }
    }
}

fn default_ready_after() -> String {
    "5s".into()
}

fn default_push_delay() -> String {
    "100ms".into()
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EndpointLb {
    #[default]
    RoundRobin,
    Random,
    LeastRequest,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GatewayApiSplitSpec {
    #[default]
    Random,
    RoundRobin,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum KubeProxyMode {
    #[default]
    Iptables,
    Ipvs,
}

/// How pods of one image answer.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BackendSpec {
    /// The mean answer time (default 1ms).
    pub latency: Option<String>,
    /// Uniform jitter around the latency.
    pub jitter: Option<String>,
    /// The share of answers that are errors (default 0%).
    pub error_rate: Option<Percent>,
    /// The status of those errors (default 500; Istio's default retries retry 503 only).
    pub error_status: Option<u16>,
    /// `never`: the image's pods never turn Ready (a failing readiness probe).
    pub ready: Option<Readiness>,
}

/// When pods of an image turn Ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Readiness {
    /// After `pod_ready_after`, as every pod (the default).
    AfterDelay,
    /// Never: the readiness probe keeps failing.
    Never,
    /// Never: the container crashes at start and restarts with Kubernetes' back-off
    /// (CrashLoopBackOff, restarts counted).
    CrashLoop,
}

/// `traffic:` — the default client model for `load` steps (every key can be overridden
/// per step).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrafficSpec {
    /// The authority / Host header, matched against VirtualService hosts.
    pub host: Option<String>,
    /// The port (default 80).
    pub port: Option<u16>,
    /// The request path (default /).
    pub path: Option<String>,
    /// Concurrent connections of the closed loop (default 16).
    pub connections: Option<u32>,
    /// false: one request per connection (default true).
    pub keepalive: Option<bool>,
    /// true: requests multiplexed over the connections.
    pub http2: Option<bool>,
    /// Where the requests start: gateway, mesh (a sidecar), plain (a pod without a sidecar,
    /// kube-proxy) or auto (the default: gateway when one serves the host, else mesh).
    pub origin: Option<Origin>,
    /// The HTTP method (default GET).
    pub method: Option<String>,
    /// Request headers, for header matches.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Extension: `http` (default), `tls` or `tcp` routes.
    pub protocol: Option<WireProtocol>,
    /// Extension: the TLS server name (for `tls`).
    pub sni: Option<String>,
    /// Extension: the ingress gateway for `origin: gateway` (default: the one serving the host).
    pub gateway: Option<String>,
    /// Extension: the calling workload in the mesh, for `sourceLabels` / `sourceNamespace`.
    pub source: Option<SourceSpec>,
    /// Extension: traffic that flows whenever the clock moves outside `load` steps (during
    /// `wait`), so that an analysis has requests to measure; not reported as a load.
    pub background: Option<BackgroundSpec>,
}

/// `traffic.background: {rate: 50}`: an open loop at this many requests per second.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BackgroundSpec {
    pub rate: f64,
    #[serde(default)]
    pub poisson: bool,
}

/// The calling workload: its namespace (default: the scenario's) and pod labels.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceSpec {
    pub namespace: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WireProtocol {
    #[default]
    Http,
    Tls,
    Tcp,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    #[default]
    Auto,
    Gateway,
    Mesh,
    Plain,
}

/// One timeline step.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Create or update objects, like `kubectl apply`: a path, `{file}` or `{inline}`.
    Apply(ApplySpec),
    /// Like `kubectl argo rollouts set image`.
    SetImage(SetImageSpec),
    /// Like `kubectl argo rollouts promote NAME`; `{rollout, full: true}` for `--full`.
    Promote(PromoteSpec),
    /// Like `kubectl argo rollouts abort NAME`.
    Abort(String),
    /// Like `kubectl argo rollouts retry rollout NAME`.
    Retry(String),
    /// Like `kubectl argo rollouts pause NAME`.
    Pause(String),
    /// Like `kubectl argo rollouts undo`: a name, or `{rollout, to_revision}`.
    Undo(UndoSpec),
    /// Like `kubectl argo rollouts restart`: a name, or `{rollout, in: 1m}`.
    Restart(RestartSpec),
    /// What `kubectl argo rollouts status` prints; passes when its exit code is `exit`.
    Status(StatusSpec),
    /// Some of a role's pods crash; their ReplicaSet replaces them.
    FailPods(FailPodsSpec),
    /// Advance the clock: a duration (`30s`), or `{until: paused, rollout, timeout}`.
    Wait(WaitSpec),
    /// Send simulated traffic (the `traffic` keys, plus how much to send).
    Load(Box<LoadSpec>),
    /// Assert the state now; every key given must hold.
    Expect(Box<Expect>),
    /// Judge the last load's split: version → expected share, `within`, `confidence`.
    ExpectSplit(ExpectSplit),
}

impl Step {
    /// The step's key, as written in the file.
    pub fn action(&self) -> &'static str {
        match self {
            Step::Apply(_) => "apply",
            Step::SetImage(_) => "set_image",
            Step::Promote(_) => "promote",
            Step::Abort(_) => "abort",
            Step::Retry(_) => "retry",
            Step::Pause(_) => "pause",
            Step::Undo(_) => "undo",
            Step::Restart(_) => "restart",
            Step::Status(_) => "status",
            Step::FailPods(_) => "fail_pods",
            Step::Wait(_) => "wait",
            Step::Load(_) => "load",
            Step::Expect(_) => "expect",
            Step::ExpectSplit(_) => "expect_split",
        }
    }
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ApplySpec {
    Path(String),
    Source(ManifestSource),
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetImageSpec {
    pub rollout: String,
    pub container: String,
    pub image: String,
}

/// `undo: NAME` or `undo: {rollout, to_revision}` (`kubectl argo rollouts undo`).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum UndoSpec {
    Name(String),
    Full {
        rollout: String,
        #[serde(default)]
        to_revision: i64,
    },
}

/// `restart: NAME` or `restart: {rollout, in: 1m}` (`kubectl argo rollouts restart [--in]`).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RestartSpec {
    Name(String),
    Full {
        rollout: String,
        #[serde(rename = "in")]
        delay: Option<String>,
    },
}

/// `status: NAME` or `status: {rollout, watch, timeout, exit}` (`kubectl argo rollouts
/// status`): the step passes when the command's exit code is `exit` (default 0).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum StatusSpec {
    Name(String),
    Full(StatusOptions),
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusOptions {
    pub rollout: String,
    /// `--watch` (the plugin's default: true).
    pub watch: Option<bool>,
    /// `--timeout`; canarysim bounds a watch at 10m of scenario time when none is given.
    pub timeout: Option<String>,
    /// The exit code the step expects.
    pub exit: Option<i32>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum PromoteSpec {
    Name(String),
    Full(PromoteFull),
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromoteFull {
    pub rollout: String,
    #[serde(default)]
    pub full: bool,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FailPodsSpec {
    pub rollout: String,
    /// Whose pods crash: stable or canary.
    pub role: Role,
    /// How many of them.
    pub count: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Stable,
    Canary,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum WaitSpec {
    For(String),
    /// A bare number is seconds, as everywhere a duration is read (`wait: 5`, `wait: 0.5`).
    Seconds(f64),
    Until(WaitUntil),
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitUntil {
    /// The phase to wait for.
    pub until: Phase,
    /// The rollout (optional when there is one).
    pub rollout: Option<String>,
    /// How long at most; past it the step fails.
    pub timeout: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Paused,
    Healthy,
    Degraded,
    Progressing,
}

impl Phase {
    /// As Argo writes it in `status.phase`.
    pub(crate) fn as_status(self) -> &'static str {
        match self {
            Phase::Paused => "Paused",
            Phase::Healthy => "Healthy",
            Phase::Degraded => "Degraded",
            Phase::Progressing => "Progressing",
        }
    }
}

/// `load:` — the `traffic` keys plus how much to send.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadSpec {
    /// How many requests to send.
    pub requests: Option<u64>,
    /// How long to send, in scenario time (`30s`).
    pub duration: Option<String>,
    /// Requests per second of an open loop (default: a closed loop over `connections`).
    pub rate: Option<f64>,
    /// true: the open loop's arrivals are Poisson, not evenly spaced.
    #[serde(default)]
    pub poisson: bool,
    pub host: Option<String>,
    pub port: Option<u16>,
    pub path: Option<String>,
    pub connections: Option<u32>,
    pub keepalive: Option<bool>,
    pub http2: Option<bool>,
    pub origin: Option<Origin>,
    pub method: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub protocol: Option<WireProtocol>,
    pub sni: Option<String>,
    pub gateway: Option<String>,
    pub source: Option<SourceSpec>,
    /// Extension: stop as soon as a sequential test (SPRT) decides whether one version's
    /// share is the one given or off by `delta`; `requests` / `duration` is then the most.
    pub until_decided: Option<UntilDecided>,
}

/// `until_decided: {canary: 20%, delta: 1%, alpha: 1%, beta: 1%}` (one version key).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct UntilDecided {
    pub delta: Option<Percent>,
    pub alpha: Option<Percent>,
    pub beta: Option<Percent>,
    #[serde(flatten)]
    pub share: BTreeMap<String, Percent>,
}

/// `expect:` — every key optional; each one given must hold.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    pub rollout: Option<String>,
    pub phase: Option<String>,
    pub message: Option<String>,
    pub step: Option<i32>,
    pub set_weight: Option<i32>,
    pub actual_weight: Option<i32>,
    pub replicas: Option<ReplicaExpect>,
    pub violations: Option<usize>,
    /// VirtualService → route (`http/primary`, `tls/0`) → destination → weight.
    pub weights: Option<BTreeMap<String, RouteWeights>>,
    pub objects: Option<Vec<serde_json::Value>>,
    pub error: Option<String>,
    /// Extension: the warnings so far, each matched by one of these substrings (and each
    /// substring matching one): a scenario states the warnings it expects.
    pub warnings: Option<Vec<String>>,
    /// Extension: an AnalysisRun of the rollout (default: the newest).
    pub analysis: Option<AnalysisExpect>,
}

/// `expect: {analysis: {...}}` — every key optional.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnalysisExpect {
    /// The run's name (`$canary_hash` and the like expanded); default: the rollout's newest.
    pub run: Option<String>,
    /// How many AnalysisRuns the rollout has.
    pub runs: Option<usize>,
    pub phase: Option<String>,
    /// Substring of the run's message.
    pub message: Option<String>,
    /// The metric the counts below refer to (default: the run's first).
    pub metric: Option<String>,
    /// Measurements taken (count + errors).
    pub measurements: Option<i32>,
    pub successful: Option<i32>,
    pub failed: Option<i32>,
    pub inconclusive: Option<i32>,
    pub error: Option<i32>,
    /// The metric's last measurement's value, as Argo records it (`[0.95]`, `[NaN]`).
    pub value: Option<String>,
    /// Scenario time at which the run completed (`4m`); `none`: it has not.
    pub completed_at: Option<String>,
}

/// Route (`http/primary`, `tls/0`) → destination (`host` or `host/subset`) → weight.
pub type RouteWeights = BTreeMap<String, BTreeMap<String, i64>>;

#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplicaExpect {
    pub desired: Option<i32>,
    pub current: Option<i32>,
    pub updated: Option<i32>,
    pub ready: Option<i32>,
    pub available: Option<i32>,
    pub stable: Option<i32>,
    pub canary: Option<i32>,
}

/// `expect_split:` — version → expected share. (Every other key is a version, so unknown
/// keys are checked when the plan is built, not by serde.)
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ExpectSplit {
    /// The tolerance, in percentage points (default 1).
    pub within: Option<Percent>,
    /// The confidence of the intervals (default 99%).
    pub confidence: Option<Percent>,
    /// Extension, older than `accept`: `pass` (the default), or `fail`: the split is not
    /// shown within tolerance, that is the outcome is fail or inconclusive (e.g. 20
    /// keep-alive connections).
    pub verdict: Option<VerdictExpect>,
    /// Extension: the outcomes the step accepts, one or a list of `pass`, `fail`,
    /// `inconclusive` (default: `pass`; an inconclusive split fails the step unless listed).
    pub accept: Option<OneOrMany<crate::verify::Outcome>>,
    /// Extension: the unit of randomisation expected (`request`, `connection`, or `client`
    /// for a split pinned by a session cookie).
    pub unit: Option<crate::verify::SplitUnit>,
    /// Extension: the number of independent draws expected.
    pub effective_n: Option<u64>,
    /// Extension: version → expected 5xx rate; its interval must lie within ± `within`.
    #[serde(default)]
    pub errors: BTreeMap<String, Percent>,
    /// Extension: whether canary latency differs from stable (Mann-Whitney at the confidence).
    pub latency_differs: Option<bool>,
    /// Extension: the decision of the last load's sequential test (`until_decided`).
    pub decided: Option<Decided>,
    #[serde(flatten)]
    pub shares: BTreeMap<String, Percent>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decided {
    Matches,
    Differs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum VerdictExpect {
    Pass,
    Fail,
}

/// One value, or a list of them.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T: Copy> OneOrMany<T> {
    pub fn to_vec(&self) -> Vec<T> {
        match self {
            OneOrMany::One(v) => vec![*v],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// `20`, `"20%"` or `"23.5%"`: a percentage.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Percent(pub f64);

impl<'de> Deserialize<'de> for Percent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Num(f64),
            Text(String),
        }
        let value = match Raw::deserialize(d)? {
            Raw::Num(n) => n,
            Raw::Text(t) => t
                .trim()
                .trim_end_matches('%')
                .trim()
                .parse::<f64>()
                .map_err(|_| {
                    serde::de::Error::custom(format!(
                        "invalid percentage \"{t}\", expected e.g. 20, 20% or 23.5%"
                    ))
                })?,
        };
        if !(0.0..=100.0).contains(&value) {
            return Err(serde::de::Error::custom(format!(
                "percentage {value} is outside 0..100"
            )));
        }
        Ok(Percent(value))
    }
}

impl JsonSchema for Percent {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Percent".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A percentage: 20, \"20%\" or \"23.5%\", within 0..100.",
            "anyOf": [
                {"type": "number", "minimum": 0, "maximum": 100},
                {"type": "string", "pattern": "^\\s*[0-9]+(\\.[0-9]+)?\\s*%?\\s*$"}
            ]
        })
    }
}

/// The JSON Schema (draft 2020-12) of a scenario file, generated from the types above:
/// `schemas/scenario.schema.json` is this, and a test keeps the two equal.
pub fn json_schema() -> serde_json::Value {
    let mut schema =
        serde_json::to_value(schemars::schema_for!(ScenarioFile)).expect("a schema is plain JSON");
    schema["$id"] = "https://github.com/canarysim/canarysim/schemas/scenario.schema.json".into();
    schema["title"] = "canarysim scenario".into();
    schema
}

/// What the scenario type called `name` accepts, in the user's words, read from the
/// format's JSON Schema: for error messages, where serde names the Rust type.
pub fn describe(name: &str) -> Option<String> {
    static SCHEMA: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    let schema = SCHEMA.get_or_init(json_schema);
    let def = if name == "ScenarioFile" {
        schema
    } else {
        schema["$defs"].get(name)?
    };
    describe_schema(def)
}

fn describe_schema(def: &serde_json::Value) -> Option<String> {
    let quoted = |names: Vec<&str>| {
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(values) = def["enum"].as_array() {
        return Some(format!(
            "one of {}",
            quoted(values.iter().filter_map(|v| v.as_str()).collect())
        ));
    }
    if let Some(alternatives) = def["oneOf"].as_array() {
        let consts: Vec<&str> = alternatives
            .iter()
            .filter_map(|a| a["const"].as_str())
            .collect();
        if consts.len() == alternatives.len() {
            return Some(format!("one of {}", quoted(consts)));
        }
        // An externally tagged enum (a step): a mapping with exactly one of these keys.
        let keys: Vec<&str> = alternatives
            .iter()
            .filter_map(|a| match a["required"].as_array().map(Vec::as_slice) {
                Some([key]) => key.as_str(),
                _ => None,
            })
            .collect();
        if keys.len() == alternatives.len() {
            return Some(format!("a mapping with one of the keys {}", quoted(keys)));
        }
        return None;
    }
    let properties = def["properties"].as_object()?;
    let required: Vec<&str> = def["required"]
        .as_array()
        .map(|r| r.iter().filter_map(|k| k.as_str()).collect())
        .unwrap_or_default();
    let mut phrase = format!(
        "a mapping with the keys {}",
        quoted(properties.keys().map(String::as_str).collect())
    );
    if def["additionalProperties"].is_object() {
        // Flattened names of the user's own: `expect_split`'s versions.
        phrase.push_str(" and names of your own");
    }
    if !required.is_empty() {
        phrase.push_str(&format!(" ({} required)", quoted(required)));
    }
    Some(phrase)
}
