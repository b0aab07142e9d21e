//! Loading a scenario: the file is parsed, checked and turned into a [`Plan`] (durations
//! converted, manifests read, references resolved) before anything runs. Every problem is a
//! [`ScenarioError`] naming `path:line:column` — exit code 2, nothing is run.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::format::*;
use crate::model::support::{self, Warning};
use crate::model::yaml::{self, Location, SourceMap};
use crate::model::{Kind, Manifest, duration};

/// Where scenario and manifest files come from: the disk, or the copies embedded in the
/// binary (so `canarysim run` works on its own).
pub trait Files {
    fn read(&self, path: &Path) -> std::io::Result<String>;
}

/// The file system.
pub struct Disk;

impl Files for Disk {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        crate::model::yaml::read_text(path)
    }
}

/// Files compiled into the binary, by their repository path.
pub struct Embedded(pub &'static [(&'static str, &'static str)]);

impl Files for Embedded {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        let wanted = normalize(path);
        self.0
            .iter()
            .find(|(p, _)| normalize(Path::new(p)) == wanted)
            .map(|(_, text)| text.to_string())
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "not embedded"))
    }
}

/// `a/./b/../c` → `a/c`, without touching the disk.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// An invalid scenario (exit code 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{location}: {message}")]
pub struct ScenarioError {
    pub location: Location,
    pub message: String,
}

impl ScenarioError {
    fn at(location: Location, message: impl Into<String>) -> Self {
        ScenarioError {
            location,
            message: message.into(),
        }
    }
}

impl From<yaml::LoadError> for ScenarioError {
    fn from(e: yaml::LoadError) -> Self {
        match e {
            yaml::LoadError::Invalid { location, message } => ScenarioError { location, message },
            yaml::LoadError::Io { file, source } => ScenarioError {
                location: Location {
                    file,
                    line: 1,
                    column: 1,
                    template: None,
                },
                message: format!("cannot read: {source}"),
            },
        }
    }
}

/// A scenario ready to run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub name: String,
    pub description: String,
    pub seed: u64,
    pub namespace: String,
    /// The scenario file, as given.
    pub file: String,
    pub pod_ready_after: Duration,
    pub push_delay: Duration,
    pub cluster: ClusterSpec,
    pub traffic: TrafficSpec,
    /// How pods answer, per image.
    pub backends: crate::load::Backends,
    /// Images whose pods never turn Ready (`cluster.backends.<image>.ready: never`).
    pub never_ready: std::collections::BTreeSet<String>,
    /// Images whose pods crash-loop (`cluster.backends.<image>.ready: crash_loop`).
    pub crash_looping: std::collections::BTreeSet<String>,
    /// Which istiod admission rules VirtualService writes meet (`cluster.istio_version`).
    pub istio_weight_rules: crate::apiserver::admission::IstioWeightRules,
    /// Applied in order before step 1.
    pub manifests: Vec<Manifest>,
    pub steps: Vec<PlannedStep>,
    /// Fields of the manifests that are kept but not simulated, and references that no
    /// manifest satisfies (the controller reports those on the rollout, as Argo does).
    pub warnings: Vec<Warning>,
    /// `traffic.background`: the open loop that runs while the scenario waits.
    pub background: Option<crate::load::Workload>,
    /// Where the scenario wrote `traffic.background` (for warnings about it).
    pub background_location: Location,
    /// The most simulated requests a load step may be estimated to send before it is
    /// refused (`canarysim run --request-budget`); the same bounds the background traffic
    /// of each step that moves the clock.
    pub request_budget: u64,
    /// The most instants one step may stop the clock at (`canarysim run --instant-budget`):
    /// a step busier than that fails rather than running for hours.
    pub instant_budget: u64,
    /// Where the scenario wrote `steps` (or its start, when it wrote none).
    pub steps_location: Location,
}

/// One step, checked.
#[derive(Debug, Clone)]
pub struct PlannedStep {
    /// 1-based, as users count.
    pub index: usize,
    pub action: &'static str,
    pub location: Location,
    pub kind: StepKind,
}

#[derive(Debug, Clone)]
pub enum StepKind {
    Apply(Vec<Manifest>),
    SetImage(SetImageSpec),
    Promote {
        rollout: String,
        full: bool,
    },
    Abort(String),
    Retry(String),
    Pause(String),
    Undo {
        rollout: String,
        to_revision: i64,
    },
    Restart {
        rollout: String,
        delay: Duration,
    },
    Status {
        rollout: String,
        watch: bool,
        timeout: Duration,
        exit: i32,
    },
    FailPods(FailPodsSpec),
    Wait(Duration),
    WaitUntil {
        phase: Phase,
        rollout: Option<String>,
        timeout: Duration,
    },
    Load(Box<crate::load::Workload>),
    Expect(Box<Expect>),
    ExpectSplit(ExpectSplit),
}

impl PlannedStep {
    /// A one-line description (`promote rollouts-demo`, `wait until paused`).
    pub fn summary(&self) -> String {
        match &self.kind {
            StepKind::Apply(m) => format!(
                "apply {}",
                m.iter()
                    .map(|m| format!("{}/{}", m.object.kind, m.object.name()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            StepKind::SetImage(s) => format!("set image {} {}={}", s.rollout, s.container, s.image),
            StepKind::Promote { rollout, full } => {
                format!("promote {rollout}{}", if *full { " --full" } else { "" })
            }
            StepKind::Abort(r) => format!("abort {r}"),
            StepKind::Retry(r) => format!("retry {r}"),
            StepKind::Pause(r) => format!("pause {r}"),
            StepKind::Undo {
                rollout,
                to_revision,
            } => match to_revision {
                0 => format!("undo {rollout}"),
                n => format!("undo {rollout} --to-revision {n}"),
            },
            StepKind::Restart { rollout, delay } if delay.is_zero() => format!("restart {rollout}"),
            StepKind::Restart { rollout, delay } => {
                format!("restart {rollout} --in {}", duration::format(*delay))
            }
            StepKind::Status { rollout, watch, .. } => {
                format!(
                    "status {rollout}{}",
                    if *watch { "" } else { " --watch=false" }
                )
            }
            StepKind::FailPods(f) => format!(
                "fail {} {} pod(s) of {}",
                f.count,
                match f.role {
                    Role::Stable => "stable",
                    Role::Canary => "canary",
                },
                f.rollout
            ),
            StepKind::Wait(d) => format!("wait {}", duration::format(*d)),
            StepKind::WaitUntil { phase, .. } => format!("wait until {}", phase.as_status()),
            StepKind::Load(_) => "load".to_string(),
            StepKind::Expect(_) => "expect".to_string(),
            StepKind::ExpectSplit(_) => "expect_split".to_string(),
        }
    }
}

impl Plan {
    /// Every manifest the scenario ever applies: the initial ones, then each `apply` step's,
    /// in order.
    pub fn all_manifests(&self) -> Vec<Manifest> {
        let mut all = self.manifests.clone();
        for step in &self.steps {
            if let StepKind::Apply(m) = &step.kind {
                all.extend(m.iter().cloned());
            }
        }
        all
    }
}

impl Plan {
    /// The proxies' load-balancing default and kube-proxy's mode (`cluster.endpoint_lb`,
    /// `cluster.kube_proxy`).
    pub fn data_plane(&self) -> (crate::mesh::LbPolicy, crate::kubeproxy::ProxyMode) {
        let lb = match self.cluster.endpoint_lb {
            super::format::EndpointLb::RoundRobin => crate::mesh::LbPolicy::RoundRobin,
            super::format::EndpointLb::Random => crate::mesh::LbPolicy::Random,
            super::format::EndpointLb::LeastRequest => crate::mesh::LbPolicy::LeastRequest,
        };
        let mode = match self.cluster.kube_proxy {
            super::format::KubeProxyMode::Iptables => crate::kubeproxy::ProxyMode::Iptables,
            super::format::KubeProxyMode::Ipvs => crate::kubeproxy::ProxyMode::Ipvs,
        };
        (lb, mode)
    }
}

/// Reads and checks the scenario at `path`: [`parse`], then a reference that no manifest of
/// the scenario ever satisfies (initially or in a later `apply`) is an error, since it can
/// only be a mistake and the run would show nothing useful.
pub fn load(path: &Path, files: &dyn Files) -> Result<Plan, ScenarioError> {
    let mut plan = parse(path, files)?;
    let all = plan.all_manifests();
    let review = support::review_all(&all);
    if let Some(r) = review.rejections.first() {
        return Err(ScenarioError::at(r.location.clone(), r.message.clone()));
    }
    let diagnostics = crate::lint::check_reviewed(&all, plan.istio_weight_rules, &review);
    plan.warnings = review.warnings;
    // istiod would never store such a VirtualService, nor the API server an object whose
    // fields have the wrong types: nothing the scenario shows could happen.
    if let Some(d) = diagnostics.iter().find(|d| {
        matches!(
            d.check,
            crate::lint::Check::Admission | crate::lint::Check::Schema
        )
    }) {
        return Err(ScenarioError::at(d.location.clone(), d.message.clone()));
    }
    for d in diagnostics.into_iter().filter(|d| {
        d.check == crate::lint::Check::Reference && d.severity == crate::lint::Severity::Error
    }) {
        // A missing VirtualService, DestinationRule or analysis template is what Argo
        // reports on the rollout (InvalidSpec), so the run shows that; any other missing
        // reference is a mistake.
        if !d.message.contains(".networking.istio.io") && !d.message.contains("AnalysisTemplate '")
        {
            return Err(ScenarioError::at(d.location, d.message));
        }
        plan.warnings.push(Warning::new(
            d.location,
            String::new(),
            String::new(),
            format!(
                "{}: the rollout will report it (InvalidSpec), as Argo does",
                d.message
            ),
        ));
    }
    Ok(plan)
}

// Long: the scenario's sections checked in file order against one parsed file and source map, each
// a few lines.
/// Reads the scenario at `path` into a [`Plan`]: syntax, keys, durations, manifest files and
/// rollout names are checked; references between the manifests are not (`canarysim lint`
/// reports those as diagnostics).
pub fn parse(path: &Path, files: &dyn Files) -> Result<Plan, ScenarioError> {
    let file = path.display().to_string();
    let text = files.read(path).map_err(|e| {
        ScenarioError::at(
            Location {
                file: file.clone(),
                line: 1,
                column: 1,
                template: None,
            },
            format!("cannot read scenario: {e}"),
        )
    })?;
    let docs = yaml::parse_documents(&file, &text)?;
    let source = docs
        .first()
        .map(|(_, s)| s.clone())
        .unwrap_or_else(|| Arc::new(SourceMap::synthetic(&file)));
    // A manifest given where a scenario is expected: say what each is for.
    if let Some((doc, _)) = docs.iter().find(|(d, _)| d.get("steps").is_none()) {
        if let Some(kind) = doc.get("kind").and_then(|k| k.as_str()) {
            return Err(ScenarioError::at(
                source.locate(""),
                format!(
                    "this is a Kubernetes manifest (kind {kind}), not a scenario: `canarysim lint {file}` checks it, and a scenario applies it (`manifests: [{{file: {file}}}]`, docs/scenarios.md)"
                ),
            ));
        }
    }
    if docs.len() > 1 {
        return Err(ScenarioError::at(
            source.locate(""),
            "a scenario is one YAML document; found several",
        ));
    }
    let parsed: ScenarioFile =
        yaml::decode(&file, &text).map_err(|e| ScenarioError::from(for_people(e)))?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let at = |pointer: &str| source.locate(pointer);
    let dur = |text: &str, pointer: &str| {
        duration::parse(text).map_err(|e| ScenarioError::at(at(pointer), e.to_string()))
    };

    let pod_ready_after = dur(&parsed.cluster.pod_ready_after, "/cluster/pod_ready_after")?;
    let push_delay = dur(&parsed.cluster.push_delay, "/cluster/push_delay")?;
    let istio_weight_rules = match &parsed.cluster.istio_version {
        Some(v) => crate::apiserver::admission::IstioWeightRules::for_version(v)
            .map_err(|e| ScenarioError::at(at("/cluster/istio_version"), e.to_string()))?,
        None => Default::default(),
    };
    let pods = plan_backends(&parsed.cluster, &at, &dur)?;

    let background = match &parsed.traffic.background {
        None => None,
        Some(b) => {
            let spec = LoadSpec {
                rate: Some(b.rate),
                poisson: b.poisson,
                ..LoadSpec::default()
            };
            let w = workload(
                crate::load::Amount::Duration(Duration::ZERO),
                &spec,
                &parsed.traffic,
                &parsed.namespace,
            );
            if !(b.rate.is_finite() && b.rate > 0.0 && b.rate <= MAX_BACKGROUND_RATE) {
                return Err(ScenarioError::at(
                    at("/traffic/background/rate"),
                    format!(
                        "rate: {} requests per second: expected a number above 0 and at most {MAX_BACKGROUND_RATE}",
                        b.rate
                    ),
                ));
            }
            if w.traffic.host.is_empty() {
                return Err(ScenarioError::at(
                    at("/traffic/background"),
                    "background traffic needs a host: `traffic.host`",
                ));
            }
            Some(w)
        }
    };

    let mut reader = ManifestReader {
        base: &base,
        files,
        namespace: &parsed.namespace,
        scenario: &source,
        scenario_text: &text,
        parsed: Default::default(),
        listed_bytes: 0,
    };
    let mut manifests = Vec::new();
    for (i, m) in parsed.manifests.iter().enumerate() {
        manifests.extend(reader.read(m, &format!("/manifests/{i}"))?);
    }

    let mut rollouts: BTreeSet<String> = manifests
        .iter()
        .filter(|m| m.object.kind == Kind::Rollout)
        .map(|m| m.object.name().to_string())
        .collect();
    let mut steps = Vec::new();
    for (i, step) in parsed.steps.iter().enumerate() {
        let pointer = format!("/steps/{i}");
        let location = at(&pointer);
        let inner = format!("{pointer}/{}", step.action());
        let kind = match step {
            Step::Apply(spec) => {
                let source_spec = match spec {
                    ApplySpec::Path(p) => ManifestSource {
                        file: Some(p.clone()),
                        inline: None,
                    },
                    ApplySpec::Source(s) => s.clone(),
                };
                let m = reader.read(&source_spec, &inner)?;
                rollouts.extend(
                    m.iter()
                        .filter(|m| m.object.kind == Kind::Rollout)
                        .map(|m| m.object.name().to_string()),
                );
                StepKind::Apply(m)
            }
            Step::Load(l) => StepKind::Load(Box::new(plan_load(
                l,
                &inner,
                &parsed.traffic,
                &parsed.namespace,
                &at,
                &dur,
            )?)),
            Step::Expect(e) => {
                if let Some(r) = &e.rollout {
                    known_rollout(&rollouts, r, at(&format!("{inner}/rollout")))?;
                }
                // A phase no rollout or run can have would fail only when the step runs.
                let phases = [
                    (e.phase.as_deref(), "phase", ROLLOUT_PHASES.as_slice()),
                    (
                        e.analysis.as_ref().and_then(|a| a.phase.as_deref()),
                        "analysis/phase",
                        ANALYSIS_PHASES.as_slice(),
                    ),
                ];
                for (phase, field, known) in phases {
                    if let Some(p) = phase.filter(|p| !known.contains(p)) {
                        return Err(ScenarioError::at(
                            at(&format!("{inner}/{field}")),
                            format!(
                                "unknown phase `{p}`, expected one of {}",
                                known
                                    .iter()
                                    .map(|k| format!("`{k}`"))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        ));
                    }
                }
                StepKind::Expect(e.clone())
            }
            Step::ExpectSplit(e) => {
                if e.shares.is_empty() {
                    return Err(ScenarioError::at(
                        at(&inner),
                        "expect_split needs at least one version share (stable, canary or an image tag)",
                    ));
                }
                if e.verdict.is_some() && e.accept.is_some() {
                    return Err(ScenarioError::at(
                        at(&format!("{inner}/accept")),
                        "expect_split takes `accept` or the older `verdict`, not both",
                    ));
                }
                if e.accept.as_ref().is_some_and(|a| a.to_vec().is_empty()) {
                    return Err(ScenarioError::at(
                        at(&format!("{inner}/accept")),
                        "accept lists at least one of pass, fail, inconclusive",
                    ));
                }
                StepKind::ExpectSplit(e.clone())
            }
            command => plan_command(command, &inner, &rollouts, &at, &dur)?,
        };
        steps.push(PlannedStep {
            index: i + 1,
            action: step.action(),
            location,
            kind,
        });
    }

    Ok(Plan {
        name: parsed.name,
        description: parsed.description,
        seed: parsed.seed,
        namespace: parsed.namespace,
        file,
        pod_ready_after,
        push_delay,
        cluster: parsed.cluster,
        traffic: parsed.traffic,
        backends: pods.backends,
        never_ready: pods.never_ready,
        crash_looping: pods.crash_looping,
        istio_weight_rules,
        manifests,
        steps,
        warnings: Vec::new(),
        background,
        background_location: at("/traffic/background"),
        request_budget: crate::load::DEFAULT_REQUEST_BUDGET,
        instant_budget: crate::sim::DEFAULT_INSTANT_BUDGET,
        steps_location: at("/steps"),
    })
}

/// [`load`] for a scenario that is to be run (`run`, `compare`, a test of the testing API):
/// one without a step would pass having checked nothing, so it is refused where `steps` is
/// written (or at its start). `envoy-config` and `serve` may show a world without steps.
pub fn load_runnable(path: &Path, files: &dyn Files) -> Result<Plan, ScenarioError> {
    let plan = load(path, files)?;
    if plan.steps.is_empty() {
        return Err(ScenarioError::at(
            plan.steps_location.clone(),
            "steps: expected at least one step (a scenario without steps checks nothing, so it cannot pass)",
        ));
    }
    Ok(plan)
}

// Long: one arm per command step, as the scenario format lists them.
/// A command step (set_image, promote, abort, retry, pause, undo, restart, status,
/// fail_pods, wait): the rollout it names must exist by then.
fn plan_command(
    step: &Step,
    inner: &str,
    rollouts: &BTreeSet<String>,
    at: &At,
    dur: &Dur,
) -> Result<StepKind, ScenarioError> {
    let inner = inner.to_string();
    Ok(match step {
        Step::SetImage(s) => {
            known_rollout(rollouts, &s.rollout, at(&format!("{inner}/rollout")))?;
            // Kubernetes refuses a container without an image ("Required value"); the plugin
            // would send the patch and the rollout would sit with pods that never start.
            for (field, value) in [("container", &s.container), ("image", &s.image)] {
                if value.trim().is_empty() {
                    return Err(ScenarioError::at(
                        at(&format!("{inner}/{field}")),
                        format!(
                            "set_image: `{field}` is empty; `kubectl argo rollouts set image ROLLOUT CONTAINER=IMAGE` needs both"
                        ),
                    ));
                }
            }
            StepKind::SetImage(s.clone())
        }
        Step::Promote(p) => {
            let (rollout, full, ptr) = match p {
                PromoteSpec::Name(n) => (n.clone(), false, inner.clone()),
                PromoteSpec::Full(f) => (f.rollout.clone(), f.full, format!("{inner}/rollout")),
            };
            known_rollout(rollouts, &rollout, at(&ptr))?;
            StepKind::Promote { rollout, full }
        }
        Step::Abort(r) => {
            known_rollout(rollouts, r, at(&inner))?;
            StepKind::Abort(r.clone())
        }
        Step::Retry(r) => {
            known_rollout(rollouts, r, at(&inner))?;
            StepKind::Retry(r.clone())
        }
        Step::Pause(r) => {
            known_rollout(rollouts, r, at(&inner))?;
            StepKind::Pause(r.clone())
        }
        Step::Undo(u) => {
            let (rollout, to_revision, ptr) = match u {
                UndoSpec::Name(n) => (n.clone(), 0, inner.clone()),
                UndoSpec::Full {
                    rollout,
                    to_revision,
                } => (rollout.clone(), *to_revision, format!("{inner}/rollout")),
            };
            known_rollout(rollouts, &rollout, at(&ptr))?;
            StepKind::Undo {
                rollout,
                to_revision,
            }
        }
        Step::Restart(r) => {
            let (rollout, delay, ptr) = match r {
                RestartSpec::Name(n) => (n.clone(), Duration::ZERO, inner.clone()),
                RestartSpec::Full { rollout, delay } => (
                    rollout.clone(),
                    match delay {
                        Some(d) => dur(d, &format!("{inner}/in"))?,
                        None => Duration::ZERO,
                    },
                    format!("{inner}/rollout"),
                ),
            };
            known_rollout(rollouts, &rollout, at(&ptr))?;
            StepKind::Restart { rollout, delay }
        }
        Step::Status(s) => {
            let options = match s {
                StatusSpec::Name(n) => StatusOptions {
                    rollout: n.clone(),
                    watch: None,
                    timeout: None,
                    exit: None,
                },
                StatusSpec::Full(o) => o.clone(),
            };
            let ptr = match s {
                StatusSpec::Name(_) => inner.clone(),
                StatusSpec::Full(_) => format!("{inner}/rollout"),
            };
            known_rollout(rollouts, &options.rollout, at(&ptr))?;
            StepKind::Status {
                rollout: options.rollout,
                watch: options.watch.unwrap_or(true),
                timeout: match &options.timeout {
                    Some(t) => dur(t, &format!("{inner}/timeout"))?,
                    None => Duration::from_secs(600),
                },
                exit: options.exit.unwrap_or(0),
            }
        }
        Step::FailPods(f) => {
            known_rollout(rollouts, &f.rollout, at(&format!("{inner}/rollout")))?;
            StepKind::FailPods(f.clone())
        }
        Step::Wait(WaitSpec::For(d)) => StepKind::Wait(dur(d, &inner)?),
        Step::Wait(WaitSpec::Seconds(s)) => StepKind::Wait(dur(&s.to_string(), &inner)?),
        Step::Wait(WaitSpec::Until(u)) => {
            if let Some(r) = &u.rollout {
                known_rollout(rollouts, r, at(&format!("{inner}/rollout")))?;
            } else if rollouts.len() > 1 {
                return Err(ScenarioError::at(
                    at(&inner),
                    "several rollouts exist: name the one to wait for with `rollout:`",
                ));
            }
            let timeout = match &u.timeout {
                Some(t) => dur(t, &format!("{inner}/timeout"))?,
                None => Duration::from_secs(30 * 60),
            };
            StepKind::WaitUntil {
                phase: u.until,
                rollout: u.rollout.clone(),
                timeout,
            }
        }
        Step::Apply(_) | Step::Load(_) | Step::Expect(_) | Step::ExpectSplit(_) => {
            unreachable!("planned by parse")
        }
    })
}

/// A Rollout's `status.phase` values (Argo's RolloutPhase).
const ROLLOUT_PHASES: [&str; 4] = ["Healthy", "Progressing", "Paused", "Degraded"];
/// An AnalysisRun's `status.phase` values (Argo's AnalysisPhase).
const ANALYSIS_PHASES: [&str; 6] = [
    "Pending",
    "Running",
    "Successful",
    "Failed",
    "Error",
    "Inconclusive",
];

/// Where a pointer into the scenario file is, and a duration read at a pointer.
type At<'a> = dyn Fn(&str) -> Location + 'a;
type Dur<'a> = dyn Fn(&str, &str) -> Result<Duration, ScenarioError> + 'a;

/// How the pods of each image answer and become ready (`cluster.backends`).
struct PodBehaviour {
    backends: crate::load::Backends,
    never_ready: BTreeSet<String>,
    crash_looping: BTreeSet<String>,
}

fn plan_backends(cluster: &ClusterSpec, at: &At, dur: &Dur) -> Result<PodBehaviour, ScenarioError> {
    let mut out = PodBehaviour {
        backends: crate::load::Backends::default(),
        never_ready: BTreeSet::new(),
        crash_looping: BTreeSet::new(),
    };
    for (image, b) in &cluster.backends {
        let p = format!("/cluster/backends/{}", yaml::escape_pointer(image));
        let latency = match &b.latency {
            Some(l) => dur(l, &format!("{p}/latency"))?,
            None => Duration::from_millis(1),
        };
        let jitter = match &b.jitter {
            Some(j) => dur(j, &format!("{p}/jitter"))?,
            None => Duration::ZERO,
        };
        // Pods answer in whole microseconds: 1ns silently ran as 1µs.
        for (field, written, d) in [
            ("latency", &b.latency, latency),
            ("jitter", &b.jitter, jitter),
        ] {
            if d.subsec_nanos() % 1_000 != 0 {
                return Err(ScenarioError::at(
                    at(&format!("{p}/{field}")),
                    format!(
                        "{field} {}: pods answer in whole microseconds (e.g. 1us, 250us, 1ms)",
                        written.as_deref().unwrap_or("")
                    ),
                ));
            }
        }
        match b.ready {
            Some(Readiness::Never) => {
                out.never_ready.insert(image.clone());
            }
            Some(Readiness::CrashLoop) => {
                out.crash_looping.insert(image.clone());
            }
            _ => {}
        }
        let error_rate = b.error_rate.map(|p| p.0 / 100.0).unwrap_or(0.0);
        let error_status = match b.error_status {
            None => 500,
            Some(code @ 500..=599) => code,
            Some(code) => {
                return Err(ScenarioError::at(
                    at(&format!("{p}/error_status")),
                    format!("error_status {code}: expected a 5xx status (500 to 599)"),
                ));
            }
        };
        out.backends.by_image.insert(
            image.clone(),
            crate::load::BackendModel {
                error_status,
                ..crate::load::BackendModel::new(latency, jitter, error_rate)
            },
        );
    }
    Ok(out)
}

/// What a form accepts, for serde's "did not match any variant of untagged enum X",
/// which names a type instead.
const FORMS: [(&str, &str); 8] = [
    (
        "WaitSpec",
        "wait takes a duration (`wait: 30s`, or a number of seconds) or `{until: paused|healthy|degraded|progressing, rollout: NAME, timeout: DURATION}`",
    ),
    (
        "ApplySpec",
        "apply takes a path (`apply: manifests/x.yaml`), `{file: PATH}` or `{inline: YAML}`",
    ),
    (
        "PromoteSpec",
        "promote takes a rollout's name or `{rollout: NAME, full: true}`",
    ),
    (
        "UndoSpec",
        "undo takes a rollout's name or `{rollout: NAME, to_revision: N}`",
    ),
    (
        "RestartSpec",
        "restart takes a rollout's name or `{rollout: NAME, in: DURATION}`",
    ),
    (
        "StatusSpec",
        "status takes a rollout's name or `{rollout: NAME, watch: true|false, timeout: DURATION, exit: N}`",
    ),
    (
        "OneOrMany",
        "accept takes pass, fail or inconclusive, or a list of them (`accept: [pass, inconclusive]`)",
    ),
    ("Raw", "expected a percentage, e.g. 20, 20% or 23.5%"),
];

/// serde's words made a person's: step numbers from 1, as reports count (`steps[2]` →
/// `step 3`), and the accepted forms where serde names an untagged enum.
fn for_people(e: yaml::LoadError) -> yaml::LoadError {
    let yaml::LoadError::Invalid { location, message } = e else {
        return e;
    };
    let mut message = steps_from_one(&message);
    if let Some(at) = message.find("data did not match any variant of untagged enum ") {
        let name = message[at..]
            .trim_start_matches("data did not match any variant of untagged enum ")
            .split(|c: char| !c.is_alphanumeric())
            .next()
            .unwrap_or("");
        if let Some((_, forms)) = FORMS.iter().find(|(n, _)| *n == name) {
            message.replace_range(at.., forms);
        }
    }
    let mut message = crate::model::words::plain(&message, &super::format::describe);
    // A step's key is its action (`- promte: demo`).
    if message.contains("expected one of `apply`, `set_image`") {
        message = message.replacen("unknown value `", "unknown action `", 1);
    }
    yaml::LoadError::Invalid { location, message }
}

/// `steps[N]` → `step N+1` wherever serde's path says it.
fn steps_from_one(message: &str) -> String {
    let mut out = String::new();
    let mut rest = message;
    while let Some(at) = rest.find("steps[") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "steps[".len()..];
        match after.split_once(']') {
            Some((n, tail)) if n.parse::<usize>().is_ok() => {
                out.push_str(&format!("step {}", n.parse::<usize>().unwrap_or(0) + 1));
                // `steps[0].expect` → `step 1, expect`.
                rest = match tail.strip_prefix('.') {
                    Some(field) => {
                        out.push_str(", ");
                        field
                    }
                    None => tail,
                };
            }
            _ => {
                out.push_str("steps[");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A `load` step's workload: its amount, its keys over `traffic`, its stop rule.
fn plan_load(
    l: &LoadSpec,
    inner: &str,
    traffic: &TrafficSpec,
    namespace: &str,
    at: &At,
    dur: &Dur,
) -> Result<crate::load::Workload, ScenarioError> {
    let amount = match (l.requests, &l.duration) {
        (Some(n), None) => crate::load::Amount::Requests(n),
        (None, Some(d)) => crate::load::Amount::Duration(dur(d, &format!("{inner}/duration"))?),
        _ => {
            return Err(ScenarioError::at(
                at(inner),
                "a load step needs exactly one of `requests: N` and `duration: D`",
            ));
        }
    };
    let mut w = workload(amount, l, traffic, namespace);
    check_load_bounds(&w, l, inner, at)?;
    if let Some(u) = &l.until_decided {
        let mut shares = u.share.iter();
        let (Some((key, share)), None) = (shares.next(), shares.next()) else {
            return Err(ScenarioError::at(
                at(&format!("{inner}/until_decided")),
                "until_decided names exactly one version and its share, e.g. {canary: 20%, delta: 1%}",
            ));
        };
        w.traffic.stop = Some(crate::load::StopRule {
            key: key.clone(),
            share: share.0 / 100.0,
            test: crate::load::StopTest::Sprt {
                delta: u.delta.map(|p| p.0 / 100.0).unwrap_or(0.01),
                alpha: u.alpha.map(|p| p.0 / 100.0).unwrap_or(0.01),
                beta: u.beta.map(|p| p.0 / 100.0).unwrap_or(0.01),
            },
        });
    }
    if w.traffic.host.is_empty() {
        return Err(ScenarioError::at(
            at(inner),
            "a load step needs a host: `host:` here or in `traffic:`",
        ));
    }
    Ok(w)
}

/// The highest background rate: it runs through every wait (a day of waiting at this rate
/// is 8.6 billion requests, so the bound is kept low).
pub(crate) const MAX_BACKGROUND_RATE: f64 = 10_000.0;

/// The most connections one load step opens at once (each is simulated on its own).
pub(crate) const MAX_CONNECTIONS: u32 = 100_000;
/// The most requests one load step may send (or, for an open loop, rate × duration).
pub(crate) const MAX_REQUESTS: u64 = 1_000_000_000;
/// The longest load step: the virtual clock's cap for one load.
pub(crate) const MAX_LOAD_DURATION: Duration = Duration::from_secs(24 * 3600);

/// A load's numbers within what canarysim runs (never a wrap, a huge allocation or a run
/// without end), each refused with the field and the bound.
fn check_load_bounds(
    w: &crate::load::Workload,
    l: &LoadSpec,
    inner: &str,
    at: &At,
) -> Result<(), ScenarioError> {
    use crate::load::{Amount, Arrival};
    let field = |name: &str, own: bool| {
        if own {
            at(&format!("{inner}/{name}"))
        } else {
            at(&format!("/traffic/{name}"))
        }
    };
    if w.traffic.connections == 0 || w.traffic.connections > MAX_CONNECTIONS {
        return Err(ScenarioError::at(
            field("connections", l.connections.is_some()),
            format!(
                "connections: {} is outside 1..={MAX_CONNECTIONS} (each connection is simulated on its own)",
                w.traffic.connections
            ),
        ));
    }
    let rate = match w.traffic.arrival {
        Arrival::Closed => None,
        Arrival::Constant(r) | Arrival::Poisson(r) => Some(r),
    };
    if let Some(r) = rate {
        if !(r.is_finite() && r > 0.0 && r <= MAX_REQUESTS as f64) {
            return Err(ScenarioError::at(
                field("rate", true),
                format!(
                    "rate: {r} requests per second: expected a number above 0 and at most {MAX_REQUESTS}"
                ),
            ));
        }
    }
    match w.amount {
        Amount::Requests(n) if n > MAX_REQUESTS => Err(ScenarioError::at(
            field("requests", true),
            format!("requests: {n} is more than one load step sends (at most {MAX_REQUESTS})"),
        )),
        Amount::Duration(d) if d > MAX_LOAD_DURATION => Err(ScenarioError::at(
            field("duration", true),
            format!(
                "duration: {:.0}h is longer than one load step runs (at most 24h of scenario time)",
                d.as_secs_f64() / 3600.0
            ),
        )),
        Amount::Duration(d) if rate.is_some_and(|r| r * d.as_secs_f64() > MAX_REQUESTS as f64) => {
            Err(ScenarioError::at(
                field("rate", true),
                format!(
                    "rate × duration is {:.0} requests, more than one load step sends (at most {MAX_REQUESTS})",
                    rate.unwrap_or(0.0) * d.as_secs_f64()
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// A load step's workload: its own keys, else the scenario's `traffic`, else the defaults.
fn workload(
    amount: crate::load::Amount,
    l: &LoadSpec,
    t: &TrafficSpec,
    namespace: &str,
) -> crate::load::Workload {
    use crate::load::{Arrival, OriginChoice, Traffic, Workload};
    let d = Traffic::default();
    let origin = l.origin.or(t.origin).unwrap_or_default();
    let gateway = l.gateway.clone().or_else(|| t.gateway.clone());
    let source = l.source.as_ref().or(t.source.as_ref());
    let mut headers: Vec<(String, String)> = t.headers.clone().into_iter().collect();
    for (k, v) in &l.headers {
        headers.retain(|(h, _)| h != k);
        headers.push((k.clone(), v.clone()));
    }
    let traffic = Traffic {
        arrival: match l.rate {
            Some(r) if l.poisson => Arrival::Poisson(r),
            Some(r) => Arrival::Constant(r),
            None => Arrival::Closed,
        },
        connections: l.connections.or(t.connections).unwrap_or(d.connections),
        keepalive: l.keepalive.or(t.keepalive).unwrap_or(d.keepalive),
        http2: l.http2.or(t.http2).unwrap_or(d.http2),
        method: l
            .method
            .clone()
            .or_else(|| t.method.clone())
            .unwrap_or(d.method),
        host: l
            .host
            .clone()
            .or_else(|| t.host.clone())
            .unwrap_or_default(),
        path: l.path.clone().or_else(|| t.path.clone()).unwrap_or(d.path),
        headers,
        sni: l.sni.clone().or_else(|| t.sni.clone()),
        stop: None,
    };
    Workload {
        amount,
        traffic,
        origin: match origin {
            Origin::Auto => OriginChoice::Auto,
            Origin::Gateway => OriginChoice::Gateway(gateway),
            Origin::Mesh => OriginChoice::Mesh,
            Origin::Plain => OriginChoice::Plain,
        },
        protocol: match l.protocol.or(t.protocol).unwrap_or_default() {
            WireProtocol::Http => crate::mesh::Protocol::Http,
            WireProtocol::Tls => crate::mesh::Protocol::Tls,
            WireProtocol::Tcp => crate::mesh::Protocol::Tcp,
        },
        namespace: source
            .and_then(|s| s.namespace.clone())
            .unwrap_or_else(|| namespace.to_string()),
        source_labels: source
            .map(|s| s.labels.clone().into_iter().collect())
            .unwrap_or_default(),
        port: u32::from(l.port.or(t.port).unwrap_or(80)),
    }
}

fn known_rollout(
    rollouts: &BTreeSet<String>,
    name: &str,
    location: Location,
) -> Result<(), ScenarioError> {
    if rollouts.contains(name) {
        return Ok(());
    }
    let known: Vec<_> = rollouts.iter().map(String::as_str).collect();
    Err(ScenarioError::at(
        location,
        format!(
            "rollouts.argoproj.io \"{name}\" not found (the scenario's manifests define: {})",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ),
    ))
}

/// Reads the manifests a scenario names. A file listed many times is read and parsed once
/// (a generator's bug listed one 3.8 MB file 99 times: 4 s of parsing), and all listings
/// together are bounded like one file, since each listing's objects are kept.
struct ManifestReader<'a> {
    base: &'a Path,
    files: &'a dyn Files,
    namespace: &'a str,
    scenario: &'a SourceMap,
    scenario_text: &'a str,
    parsed: std::collections::HashMap<PathBuf, (Vec<Manifest>, usize)>,
    listed_bytes: usize,
}

impl ManifestReader<'_> {
    fn read(
        &mut self,
        spec: &ManifestSource,
        pointer: &str,
    ) -> Result<Vec<Manifest>, ScenarioError> {
        match (&spec.file, &spec.inline) {
            (Some(f), None) => {
                let path = self.base.join(f);
                if !self.parsed.contains_key(&path) {
                    let shown = path.display().to_string();
                    let text = self.files.read(&path).map_err(|e| {
                        ScenarioError::at(
                            self.scenario.locate(pointer),
                            format!("cannot read {shown}: {e}"),
                        )
                    })?;
                    let manifests = yaml::load_str(&shown, &text, self.namespace)?;
                    self.parsed.insert(path.clone(), (manifests, text.len()));
                }
                let (manifests, bytes) = &self.parsed[&path];
                self.listed_bytes += bytes;
                if self.listed_bytes as u64 > yaml::MAX_FILE_BYTES {
                    return Err(ScenarioError::at(
                        self.scenario.locate(pointer),
                        format!(
                            "the manifests listed come to more than {} MiB (a file counts each time it is listed)",
                            yaml::MAX_FILE_BYTES >> 20
                        ),
                    ));
                }
                Ok(manifests.clone())
            }
            (None, Some(text)) => {
                // Inline YAML is reported in the scenario's own coordinates: a block scalar
                // (`inline: |`) starts on the next line, indented like its first line.
                let start = self.scenario.locate(&format!("{pointer}/inline"));
                let (line_offset, col_offset) = match self.scenario_text.lines().nth(start.line - 1)
                {
                    Some(l) if l.trim_end().ends_with('|') || l.trim_end().ends_with('>') => {
                        let first = self
                            .scenario_text
                            .lines()
                            .skip(start.line)
                            .find(|l| !l.trim().is_empty())
                            .unwrap_or("");
                        (start.line, first.len() - first.trim_start().len())
                    }
                    _ => (start.line - 1, start.column - 1),
                };
                yaml::load_embedded(&start.file, text, self.namespace, line_offset, col_offset)
                    .map_err(Into::into)
            }
            _ => Err(ScenarioError::at(
                self.scenario.locate(pointer),
                "expected exactly one of `file` and `inline`",
            )),
        }
    }
}
