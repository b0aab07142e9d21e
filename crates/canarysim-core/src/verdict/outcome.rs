//! What a run observed, as plain data: the scenario runner and `compare` produce it; the
//! text and JSON reports (`report`), the testing API and the TUI render or read it. Nothing
//! here renders or decides: it holds figures (shares, intervals), never a verdict of its own.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::load::ArmStats;
use crate::model::support::Warning;
use crate::rollout_info::RolloutView;
use crate::verify::{GofResult, Interval, LatencySummary, MannWhitney, SplitUnit, SplitVerdict};

/// What a run produced (the JSON report is this, serialized).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RunReport {
    pub name: String,
    pub description: String,
    pub file: String,
    pub seed: u64,
    pub passed: bool,
    pub steps: Vec<StepReport>,
    pub violations: Vec<Violation>,
    /// Fields kept but not simulated, unknown fields, and what the route translation skipped:
    /// in the order found, each once.
    pub warnings: Vec<Warning>,
    /// The rollouts as `kubectl argo rollouts get rollout` shows them at the end (data; the
    /// JSON report renders them as text).
    #[serde(skip)]
    pub final_views: Vec<RolloutView>,
    /// How the run ran when not simulated: `live (time scale 60)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StepReport {
    pub index: usize,
    pub action: String,
    pub summary: String,
    /// Virtual time when the step finished, e.g. `t+1m5s`.
    pub time: String,
    pub time_ms: u64,
    pub passed: bool,
    pub detail: String,
    /// `get rollout` views of rollouts that reached a pause during this step (data; the
    /// JSON report renders them as text).
    #[serde(skip)]
    pub views: Vec<RolloutView>,
    /// What a `load` step observed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadReport>,
    /// The verdict of an `expect_split` step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split: Option<SplitVerdict>,
}

/// An invariant that stopped holding, and when.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Violation {
    pub time: String,
    pub time_ms: u64,
    pub message: String,
}

/// One load step, as reported.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LoadReport {
    /// The data plane the requests went through.
    pub path: String,
    /// The unit of randomisation: `request`, `connection` or `client`.
    pub unit: SplitUnit,
    /// Independent draws behind the shares (requests, connections, or clients).
    pub effective_n: u64,
    /// Per client: the clients whose requests were sent to two versions (a canary that
    /// does not pin, a cookie replaced, a Service whose pods changed version).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clients_switched: Option<u64>,
    pub sent: u64,
    pub answered: u64,
    pub not_found: u64,
    pub no_healthy_upstream: u64,
    /// 500s for a Gateway API backendRef that does not resolve.
    pub unresolved_backend: u64,
    pub refused: u64,
    /// 503s from a proxy whose pod had gone (its table had not caught up yet).
    pub upstream_failed: u64,
    /// Answered by the fault filter (`fault.abort`).
    pub fault_aborted: u64,
    /// 504s: the route timeout fired.
    pub timed_out: u64,
    /// Attempts after the first: the pods saw them, the clients did not.
    pub retries: u64,
    pub connections: u64,
    pub started: String,
    pub ended: String,
    pub versions: Vec<VersionReport>,
    /// Every answering pod.
    pub pods: Vec<crate::load::PodStats>,
    /// The split the data plane was configured for, per role.
    pub configured: Vec<RoleShare>,
    /// Goodness of fit of the observed roles to `configured`.
    pub fit: Option<GofResult>,
    /// Canary against stable latency, when both answered enough requests.
    pub latency_comparison: Option<MannWhitney>,
    /// The sequential test's outcome, when the load had `until_decided`.
    pub sequential: Option<crate::load::Sequential>,
    /// A limit that stopped the load short of what it was asked for, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capped: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RoleShare {
    pub role: String,
    pub share: f64,
}

/// Confidence of the intervals every report shows per version.
pub const REPORT_CONFIDENCE: f64 = 0.99;

/// One version's figures in a load: one type for the simulated, live and real-gateway loads.
/// A real gateway's report (`lost` is set) has no role, mirror or pods' figures: canarysim
/// sees only the answers there, and its JSON leaves them out.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionReport {
    pub role: String,
    pub version: String,
    pub responses: u64,
    /// Connections that chose this version (per connection), or whose first answer came
    /// from it (at a real gateway).
    pub connections: u64,
    /// Per client (session affinity): the clients whose first request was sent to it.
    pub clients: Option<u64>,
    /// Share of the answered requests.
    pub share: f64,
    /// Share of the units of randomisation: of the requests, or of the connections when
    /// each connection chose (then it can differ from `share`: a slower version answers
    /// fewer requests per connection).
    pub unit_share: f64,
    /// The confidence interval ([`REPORT_CONFIDENCE`]) of `unit_share`.
    pub interval: Interval,
    /// 5xx answers.
    pub errors: u64,
    pub error_rate: f64,
    /// At a real gateway: requests lost (reset, timeout) on a connection this version had
    /// answered on last.
    pub lost: Option<u64>,
    pub mirrored: u64,
    /// The pods' view: what this version's pods answered, retried attempts included
    /// (`responses` and `errors` are what the clients saw).
    pub pod_answers: u64,
    pub pod_errors: u64,
    /// Microseconds.
    pub latency: LatencySummary,
}

impl VersionReport {
    /// `arm`'s figures in a load of `answered` answers and `effective_n` draws in `unit`
    /// (the pods' view left at zero, for the caller who knows the pods).
    pub fn of(arm: &ArmStats, unit: SplitUnit, answered: u64, effective_n: u64) -> Self {
        let ratio = |k: u64, n: u64| if n == 0 { 0.0 } else { k as f64 / n as f64 };
        // On the unit of randomisation: a keep-alive connection is one draw.
        let k = arm.draws(unit);
        VersionReport {
            role: arm.role.as_str().to_string(),
            version: arm.version.clone(),
            responses: arm.responses,
            connections: arm.connections,
            clients: (unit == SplitUnit::Client).then_some(arm.clients),
            share: ratio(arm.responses, answered),
            unit_share: ratio(k, effective_n),
            interval: crate::verify::proportion_interval(k, effective_n, REPORT_CONFIDENCE)
                .interval,
            errors: arm.errors,
            error_rate: crate::verify::error_rate(arm.errors, arm.responses).0,
            lost: None,
            mirrored: arm.mirrored,
            pod_answers: 0,
            pod_errors: 0,
            latency: arm.latency.summary(),
        }
    }
}

impl Serialize for VersionReport {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let at_a_gateway = self.lost.is_some();
        let mut out =
            serializer.serialize_struct("VersionReport", if at_a_gateway { 10 } else { 13 })?;
        if !at_a_gateway {
            out.serialize_field("role", &self.role)?;
        }
        out.serialize_field("version", &self.version)?;
        out.serialize_field("responses", &self.responses)?;
        out.serialize_field("connections", &self.connections)?;
        if let Some(clients) = self.clients {
            out.serialize_field("clients", &clients)?;
        }
        out.serialize_field("share", &self.share)?;
        out.serialize_field("unit_share", &self.unit_share)?;
        out.serialize_field("interval", &self.interval)?;
        out.serialize_field("errors", &self.errors)?;
        out.serialize_field("error_rate", &self.error_rate)?;
        match self.lost {
            Some(lost) => out.serialize_field("lost", &lost)?,
            None => {
                out.serialize_field("mirrored", &self.mirrored)?;
                out.serialize_field("pod_answers", &self.pod_answers)?;
                out.serialize_field("pod_errors", &self.pod_errors)?;
            }
        }
        out.serialize_field("latency", &self.latency)?;
        out.end()
    }
}

/// One load step, both ways.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CompareRow {
    pub step: usize,
    pub time: String,
    /// The rollout's SetWeight when the load ran (mesh world).
    pub set_weight: i32,
    /// The canary weight written to the VirtualService (mesh world).
    pub virtual_service_weight: Option<i32>,
    pub mesh: Observed,
    /// The new version's share of the rollout's ready pods (no-mesh world).
    pub pod_ratio: f64,
    pub no_mesh: Observed,
}

/// The share of the rollout's new version (its current pod template) a load observed, its
/// interval (99 %), and its error against the set weight in percentage points. (After full
/// promotion the new version is the stable one: it then gets everything, as SetWeight 100
/// says, while the VirtualService is back to canary 0.)
#[derive(Debug, Clone, Serialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Observed {
    pub share: f64,
    pub interval: Interval,
    pub unit: SplitUnit,
    pub effective_n: u64,
    pub error_points: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CompareReport {
    pub name: String,
    pub file: String,
    pub seed: u64,
    pub rows: Vec<CompareRow>,
    /// Steps of the no-mesh run that could not run as written (e.g. a `wait` whose phase
    /// never comes), for the reader's information.
    pub notes: Vec<String>,
    /// Why the comparison fails (exit 1): the scenario's own failed steps and broken
    /// invariants, or a no-mesh rollout that aborted alone. Empty when it passes.
    pub failures: Vec<String>,
}

/// `canarysim compare --ingress2gateway`: per load through ingress-nginx, the same load
/// through the HTTPRoutes ingress2gateway would write from the Ingresses of that moment.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MigrationReport {
    pub name: String,
    pub file: String,
    pub seed: u64,
    pub rows: Vec<MigrationRow>,
    /// What ingress2gateway warns about (annotations it drops).
    pub warnings: Vec<String>,
    /// Loads not compared, and why.
    pub notes: Vec<String>,
    /// The scenario's own failed steps (exit 1).
    pub failures: Vec<String>,
}

/// One load, through ingress-nginx and through the migrated HTTPRoute.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MigrationRow {
    pub step: usize,
    pub time: String,
    pub ingress_nginx: MigrationSide,
    pub http_route: MigrationSide,
    /// A chi-square test of homogeneity of the two loads' canary counts.
    pub p_value: f64,
    /// The two data planes are configured for different canary shares.
    pub configured_differ: bool,
    /// The splits differ: as configured, or as observed (p below 1 − the report's
    /// confidence, 1 %). When false, no difference was seen, which is not proof of none.
    pub differ: bool,
}

/// The canary's share one way.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MigrationSide {
    /// The share the data plane was configured for (0–1).
    pub configured: f64,
    /// The share observed, in the unit of randomisation (0–1).
    pub observed: f64,
    pub effective_n: u64,
}

/// What `canarysim check` found: per Rollout of the manifests, the share each canary step
/// sent through the router the Rollout configures and without a mesh, with the verdict.
/// `schemas/check.schema.json` is this type's schema.
#[derive(Debug, Clone, Serialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckReport {
    /// What every pause's load sent and how the share was judged.
    pub settings: CheckSettings,
    pub rollouts: Vec<RolloutCheck>,
    /// Rollouts left out, and why (a blue-green Rollout; no container image).
    pub left_out: Vec<String>,
    /// Lint findings about no Rollout's own objects.
    pub other_findings: Vec<Finding>,
    /// Every Rollout passed and no lint finding is an error (exit 0; else 1).
    pub passed: bool,
}

/// The load at each pause and the verdict's terms.
#[derive(Debug, Clone, Serialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckSettings {
    pub requests: u64,
    pub connections: u32,
    pub seed: u64,
    /// The share passes within this many points of the step's weight.
    pub within_points: f64,
    pub confidence: f64,
}

/// One Rollout rolled out to a new image through all its steps.
#[derive(Debug, Clone, Serialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RolloutCheck {
    pub name: String,
    pub namespace: String,
    /// Where the Rollout is written (`file:line:column`).
    pub location: String,
    /// The data plane the loads went through (e.g. `ingress gateway … → VirtualService …`).
    pub router: String,
    /// Canary steps in the Rollout's spec.
    pub steps: usize,
    /// One row per pause, in order.
    pub rows: Vec<CheckRow>,
    /// Lint findings about the Rollout and the objects it names.
    pub findings: Vec<Finding>,
    /// What the check could not play as written, and what it did instead.
    pub notes: Vec<String>,
    /// The rollout's status at the end (`Healthy`, `Degraded`, …) and its message.
    pub phase: String,
    pub message: String,
    /// Why the check fails for this Rollout: failed steps, a no-mesh rollout that aborted.
    pub failures: Vec<String>,
    pub passed: bool,
}

/// One pause of the rollout: the weights, the share through the Rollout's router with its
/// verdict, and what clients without a mesh saw.
#[derive(Debug, Clone, Serialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckRow {
    /// Argo's step index (0-based, as `status.currentStepIndex`).
    pub step: Option<i64>,
    /// Blue-green: the Service the load went to (`active` or `preview`); `set_weight` is then
    /// the share of the new version it should send.
    pub service: Option<String>,
    /// Scenario time when the load ended.
    pub time: String,
    pub set_weight: i32,
    /// The canary weight the router was given (the VirtualService's).
    pub router_weight: Option<i32>,
    pub observed: Observed,
    /// The share against the set weight: pass, fail or inconclusive.
    pub verdict: Option<crate::verify::Outcome>,
    /// When inconclusive: what would decide.
    pub advice: String,
    /// The new version's share of the rollout's ready pods (no mesh).
    pub pod_ratio: f64,
    pub no_mesh: Observed,
}

/// A lint finding, as `canarysim lint` prints it.
#[derive(Debug, Clone, Serialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    /// `file:line:column`.
    pub location: String,
    pub severity: crate::lint::Severity,
    pub message: String,
}

/// `canarysim load merge`: the result files of one load sent in shards, judged as one.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MergeReport {
    pub shards: Vec<ShardSummary>,
    /// Shards the files' `--shard I/N` names that no file brought.
    pub missing_shards: Vec<u32>,
    pub agreement: Agreement,
    /// The union of the shards, judged as one load.
    pub merged: HttpLoadReport,
    /// When the shards disagree: each judged on its own, in the order given.
    pub per_shard: Vec<HttpLoadReport>,
}

impl MergeReport {
    /// The verdict the merge stands on, with the file it comes from: the union's when the
    /// shards saw one split; when they differ, the worst shard's (a fail, then one that
    /// cannot tell), since the union of two different splits is the split of neither.
    pub fn deciding_verdict(&self) -> Option<(crate::verify::Outcome, Option<&str>)> {
        use crate::verify::Outcome;
        if !self.agreement.shards_differ() {
            return self.merged.verdict.as_ref().map(|v| (v.outcome, None));
        }
        let severity = |o: Outcome| match o {
            Outcome::Pass => 0,
            Outcome::Inconclusive => 1,
            Outcome::Fail => 2,
        };
        self.shards
            .iter()
            .zip(&self.per_shard)
            .filter_map(|(s, r)| Some((r.verdict.as_ref()?.outcome, Some(s.file.as_str()))))
            .rev()
            .max_by_key(|(o, _)| severity(*o))
    }
}

/// One file's part.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ShardSummary {
    pub file: String,
    /// `I/N`, or none for a whole load.
    pub shard: Option<String>,
    pub address: String,
    pub sent: u64,
    /// Draws per version, in the merged verdict's unit.
    pub draws: BTreeMap<String, u64>,
}

/// Whether the shards saw one split: Pearson's chi-square test of homogeneity on the
/// shards' draws per version, at the verdict's confidence.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Agreement {
    pub finding: AgreementFinding,
    pub unit: SplitUnit,
    pub statistic: f64,
    pub dof: u64,
    pub p_value: f64,
    /// The smallest expected count; below 5 the test's p-value is rough.
    pub min_expected: f64,
    pub explanation: String,
}

impl Agreement {
    pub fn shards_differ(&self) -> bool {
        self.finding == AgreementFinding::DifferentSplits
    }
}

/// What the test of the shards' agreement found (in JSON and text: `same split`, …).
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub enum AgreementFinding {
    /// The shards' draws agree, or every shard saw one and the same version.
    #[serde(rename = "same split")]
    SameSplit,
    /// Beyond chance: each shard is judged on its own.
    #[serde(rename = "different splits")]
    DifferentSplits,
    /// An expected count below 5: judged together.
    #[serde(rename = "too few to tell")]
    TooFewToTell,
    #[serde(rename = "one shard")]
    OneShard,
}

impl std::fmt::Display for AgreementFinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AgreementFinding::SameSplit => "same split",
            AgreementFinding::DifferentSplits => "different splits",
            AgreementFinding::TooFewToTell => "too few to tell",
            AgreementFinding::OneShard => "one shard",
        })
    }
}

/// What `canarysim load` observed against a real endpoint, and its verdict.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HttpLoadReport {
    pub url: String,
    /// Where the connections went (the `--connect-to` address, or the URL's).
    pub address: String,
    /// `HTTP/1.1` or `HTTP/2`.
    pub protocol: String,
    pub connections: u32,
    pub keepalive: bool,
    /// The open-loop rate asked for (requests per second), if any.
    pub rate: Option<f64>,
    /// How responses were assigned a version.
    pub classify: String,
    pub elapsed_seconds: f64,
    /// Requests per second achieved.
    pub throughput: f64,
    /// Every request ends in exactly one class; their sum is `sent`.
    pub sent: u64,
    pub classes: crate::load::tally::Classes,
    /// Responses that carried no version the classifier could read.
    pub unclassified: u64,
    pub connections_opened: u64,
    /// Bytes of response bodies read (a body classifier keeps only their first bytes).
    pub body_bytes: u64,
    /// The unit of randomisation the verdict used, and what the connections showed.
    pub unit: SplitUnit,
    pub unit_evidence: UnitReport,
    /// Independent draws behind the shares (classified answers, or connections).
    pub effective_n: u64,
    pub versions: Vec<VersionReport>,
    /// Latency of every response.
    pub latency: LatencySummary,
    /// The `--expect` verdict, when expectations were given.
    pub verdict: Option<HttpVerdict>,
    pub sequential: Option<crate::load::Sequential>,
}

/// What the connections showed about the unit of randomisation.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct UnitReport {
    /// `per request`, `per connection` or `undetermined`.
    pub finding: String,
    /// The unit was set with `--unit` rather than measured.
    pub forced: bool,
    pub multi_request_connections: u64,
    pub single_version_connections: u64,
    /// The chance of what was seen if each request were routed on its own.
    pub chance_if_per_request: f64,
    pub explanation: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HttpVerdict {
    /// Pass, fail or inconclusive.
    pub outcome: crate::verify::Outcome,
    /// The outcome is `pass`.
    pub passes: bool,
    /// `interval` (the split's intervals against the tolerance), or `sequential test`
    /// (`--until-decided`: the test that stopped the load decides).
    pub decided_by: String,
    /// When inconclusive: what would decide (more draws, more connections); else empty.
    pub advice: String,
    /// The expectations, in order (`(rest)` for versions not listed).
    pub expected: Vec<ExpectedShare>,
    pub split: crate::verify::SplitVerdict,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ExpectedShare {
    pub version: String,
    pub share: f64,
}
