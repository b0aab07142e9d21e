//! The rollout's side of analysis (`rollout/analysis.go`): which AnalysisRuns a rollout
//! needs (a canary: one per `analysis` step, one in the background from `startingStep`; a
//! blue-green: one before the switch, one after it), creating them from their templates,
//! terminating the ones no longer needed, and what their phase means for the rollout
//! (Failed/Error abort it, Inconclusive pauses it).
//!
//! Pure over the store: [`reconcile`] returns what the rollout reconciler applies.

use serde_json::{Value, json};

use crate::analysis::Phase;
use crate::analysis::types::{AnalysisSpec, Argument, Metric};
use crate::apiserver::{ApiError, ApiServer, Patch};
use crate::model::rollout::{BlueGreenStrategy, CanaryStep, CanaryStrategy, RolloutStatus};
use crate::model::{Kind, Object};

pub use crate::model::rollout::AnalysisRunRef as RunRef;

/// `analysis` of a step or of the canary strategy (`RolloutAnalysis`).
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RolloutAnalysis {
    #[serde(default)]
    pub templates: Vec<TemplateRef>,
    #[serde(default)]
    pub args: Vec<Argument>,
    #[serde(default)]
    pub dry_run: Vec<Value>,
    #[serde(default)]
    pub measurement_retention: Vec<Value>,
    #[serde(default)]
    pub analysis_run_metadata: Option<Value>,
    /// Background analysis only.
    pub starting_step: Option<i32>,
}

#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TemplateRef {
    #[serde(default)]
    pub template_name: String,
    #[serde(default)]
    pub cluster_scope: bool,
}

/// What the rollout reconciler does with the analysis' outcome.
#[derive(Debug, Default)]
pub struct Decision {
    pub step_run: Option<RunRef>,
    pub background_run: Option<RunRef>,
    pub pre_promotion_run: Option<RunRef>,
    pub post_promotion_run: Option<RunRef>,
    /// Abort the rollout with this message (after "Rollout aborted update to revision N: ").
    pub abort: Option<String>,
    /// Pause with reason `InconclusiveAnalysisRun`.
    pub pause_inconclusive: bool,
    /// Events: (warning, reason, message).
    pub events: Vec<(bool, String, String)>,
    pub changed: bool,
    /// A run could not be created (a template missing): reported on the rollout.
    pub error: Option<String>,
}

/// The strategy whose analyses a reconcile runs.
pub enum Analyses<'a> {
    Canary(&'a CanaryStrategy),
    BlueGreen(BlueGreenAnalyses<'a>),
}

/// A blue-green rollout's promotion analyses and what their skip rules read.
pub struct BlueGreenAnalyses<'a> {
    pub strategy: &'a BlueGreenStrategy,
    pub new_rs: Saturation,
}

/// The new ReplicaSet's size against the rollout's (`annotations.IsSaturated`).
#[derive(Debug, Clone, Copy)]
pub struct Saturation {
    pub spec: i32,
    pub available: i32,
    pub replicas: i32,
}

impl Saturation {
    fn saturated(&self) -> bool {
        self.spec == self.replicas && self.available == self.replicas
    }
}

/// Everything [`reconcile`] reads about the rollout.
pub struct Context<'a> {
    pub rollout: &'a Object,
    pub analyses: Analyses<'a>,
    pub status: &'a RolloutStatus,
    pub new_hash: &'a str,
    pub revision: i64,
    pub fully_promoted: bool,
    /// `status.abortedAt` as this reconcile read it (a retry has just cleared the abort).
    pub aborted_before: bool,
    pub now: crate::clock::SimTime,
}

const STEP_INDEX_LABEL: &str = "step-index";
const ROLLOUT_TYPE_LABEL: &str = "rollout-type";
const INCONCLUSIVE: &str = "InconclusiveAnalysisRun";
const PRE_PROMOTION: &str = "PrePromotion";
const POST_PROMOTION: &str = "PostPromotion";

/// `reconcileAnalysisRuns`.
pub fn reconcile(api: &mut ApiServer, cx: &Context) -> Result<Decision, ApiError> {
    let mut d = Decision::default();
    let ns = cx.rollout.namespace().to_string();
    let current = |r: &Option<RunRef>| -> Option<Object> {
        r.as_ref()
            .and_then(|r| api.get(Kind::AnalysisRun, &ns, &r.name).ok().cloned())
    };
    let st = cx.status;
    let current_step = current(&st.canary.current_step_analysis_run_status);
    let current_background = current(&st.canary.current_background_analysis_run_status);
    let current_pre = current(&st.blue_green.pre_promotion_analysis_run_status);
    let current_post = current(&st.blue_green.post_promotion_analysis_run_status);
    let owned: Vec<Object> = owned_runs(api, cx.rollout);

    let cancel_all = cx.fully_promoted || st.abort || st.promote_full || st.stable_r_s.is_empty();
    // [step, background, pre-promotion, post-promotion]: the runs the rollout records.
    let runs: [Option<Object>; 4] = if cancel_all {
        // A blue-green rollout keeps recording its runs once stable; all of them stop.
        [None, None, current_pre, current_post]
    } else {
        match &cx.analyses {
            Analyses::Canary(canary) => [
                step_run(api, cx, canary, current_step, &mut d)?,
                background_run(api, cx, canary, current_background, &mut d)?,
                None,
                None,
            ],
            Analyses::BlueGreen(bg) => {
                let pre = promotion_run(api, cx, bg, PRE_PROMOTION, current_pre, &mut d)?;
                let post = promotion_run(api, cx, bg, POST_PROMOTION, current_post, &mut d)?;
                [None, None, pre, post]
            }
        }
    };
    // Every other run of this rollout that still measures is terminated.
    for run in owned {
        let keep = !cancel_all && runs.iter().flatten().any(|r| r.name() == run.name());
        if !keep {
            terminate(api, &run, &mut d)?;
        }
    }
    let [step, background, pre, post] = runs.map(|r| r.as_ref().map(run_ref));
    let recorded = [
        (
            &st.blue_green.post_promotion_analysis_run_status,
            &post,
            POST_PROMOTION,
        ),
        (
            &st.blue_green.pre_promotion_analysis_run_status,
            &pre,
            PRE_PROMOTION,
        ),
        (&st.canary.current_step_analysis_run_status, &step, "Step"),
        (
            &st.canary.current_background_analysis_run_status,
            &background,
            "Background",
        ),
    ];
    for (before, now, kind) in recorded {
        status_change_event(before, now, kind, &mut d);
    }
    d.step_run = step;
    d.background_run = background;
    d.pre_promotion_run = pre;
    d.post_promotion_run = post;
    Ok(d)
}

/// `emitAnalysisRunStatusChanges`: an event when a run of this type has a new phase.
fn status_change_event(
    before: &Option<RunRef>,
    now: &Option<RunRef>,
    kind: &str,
    d: &mut Decision,
) {
    let Some(now) = now else { return };
    if now.status.is_empty() {
        return;
    }
    let changed = match before {
        None => true,
        Some(b) => b.name == now.name && b.status != now.status,
    };
    if !changed {
        return;
    }
    let prev = before
        .as_ref()
        .map(|b| b.status.clone())
        .unwrap_or_else(|| "NoPreviousStatus".into());
    d.events.push((
        matches!(now.status.as_str(), "Failed" | "Error"),
        format!("AnalysisRun{}", now.status),
        format!(
            "{kind} Analysis Run '{}' Status New: '{}' Previous: '{prev}'",
            now.name, now.status
        ),
    ));
}

fn run_ref(run: &Object) -> RunRef {
    RunRef {
        name: run.name().to_string(),
        status: run.value["status"]["phase"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        message: run.value["status"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    }
}

fn phase_of(run: &Object) -> Option<Phase> {
    Phase::parse(run.value["status"]["phase"].as_str().unwrap_or_default())
}

/// AnalysisRuns whose controller is this rollout, oldest first (the store's uids count up).
pub(crate) fn owned_runs(api: &ApiServer, rollout: &Object) -> Vec<Object> {
    let mut runs: Vec<Object> = api
        .list(Kind::AnalysisRun, Some(rollout.namespace()), None)
        .into_iter()
        .filter(|r| {
            r.value["metadata"]["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|o| o["kind"] == "Rollout" && o["name"] == rollout.name())
        })
        .cloned()
        .collect();
    runs.sort_by(|a, b| {
        let uid = |o: &Object| {
            o.value["metadata"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        uid(a).cmp(&uid(b))
    });
    runs
}

/// `needsNewAnalysisRun`: while the controller pauses, a new run only after an inconclusive
/// one was promoted; a step or blue-green pause is not that pause.
fn needs_new(current: Option<&Object>, status: &RolloutStatus, aborted_before: bool) -> bool {
    let Some(current) = current else { return true };
    if status.controller_pause
        && !status
            .pause_conditions
            .iter()
            .any(|c| c.reason == "CanaryPauseStep" || c.reason == "BlueGreenPause")
    {
        return phase_of(current) == Some(Phase::Inconclusive);
    }
    aborted_before
}

/// `reconcileStepBasedAnalysisRun`.
fn step_run(
    api: &mut ApiServer,
    cx: &Context,
    canary: &CanaryStrategy,
    current: Option<Object>,
    d: &mut Decision,
) -> Result<Option<Object>, ApiError> {
    if !cx.status.pause_conditions.is_empty() || cx.status.abort {
        return Ok(current);
    }
    let index = cx.status.current_step_index.unwrap_or(0);
    let step: Option<&CanaryStep> = canary.steps.get(index as usize);
    let analysis: Option<RolloutAnalysis> = step
        .and_then(|s| s.analysis.clone())
        .and_then(|a| serde_json::from_value(a).ok());
    let from_previous_step = current.as_ref().is_some_and(|r| {
        r.labels().get(STEP_INDEX_LABEL).map(String::as_str) != Some(&index.to_string())
    });
    let Some(analysis) = analysis.filter(|a| !a.templates.is_empty() && !from_previous_step) else {
        if let Some(run) = &current {
            terminate(api, run, d)?;
        }
        return Ok(None);
    };
    if needs_new(current.as_ref(), cx.status, cx.aborted_before) {
        let labels = json!({ROLLOUT_TYPE_LABEL: "Step", STEP_INDEX_LABEL: index.to_string()});
        return create_run(api, cx, &analysis, Some(&index.to_string()), labels, d);
    }
    let run = current.expect("needs_new is true without a current run");
    effects(&run, "Step-based analysis phase error/failed", d);
    Ok(Some(run))
}

/// `reconcileBackgroundAnalysisRun`.
fn background_run(
    api: &mut ApiServer,
    cx: &Context,
    canary: &CanaryStrategy,
    current: Option<Object>,
    d: &mut Decision,
) -> Result<Option<Object>, ApiError> {
    let analysis = with_templates(canary.analysis.as_ref());
    let Some(analysis) = analysis else {
        if let Some(run) = &current {
            terminate(api, run, d)?;
        }
        return Ok(None);
    };
    let before_starting_step = analysis
        .starting_step
        .is_some_and(|s| cx.status.current_step_index.unwrap_or(0) < s);
    if cx.fully_promoted || cx.status.current_pod_hash.is_empty() || before_starting_step {
        return Ok(None);
    }
    if paused_inconclusive(cx.status) {
        return Ok(current);
    }
    if needs_new(current.as_ref(), cx.status, cx.aborted_before) {
        let labels = json!({ROLLOUT_TYPE_LABEL: "Background"});
        return create_run(api, cx, &analysis, None, labels, d);
    }
    let run = current.expect("needs_new is true without a current run");
    effects(&run, "Background analysis phase error/failed", d);
    Ok(Some(run))
}

/// An analysis as the spec gives it, if it names a template.
fn with_templates(analysis: Option<&Value>) -> Option<RolloutAnalysis> {
    analysis
        .and_then(|a| serde_json::from_value::<RolloutAnalysis>(a.clone()).ok())
        .filter(|a| !a.templates.is_empty())
}

fn paused_inconclusive(status: &RolloutStatus) -> bool {
    status
        .pause_conditions
        .iter()
        .any(|c| c.reason == INCONCLUSIVE)
}

/// `reconcilePre/PostPromotionAnalysisRun` and `setPauseOrAbortForBlueGreen`: the
/// pre-promotion run starts once the new ReplicaSet is up (at `previewReplicaCount` when
/// set) and before the active Service switches to it; the post-promotion one once the
/// switch is made, and the rollout completes only when it succeeds. None without templates,
/// the current one (stopped) when it is not its time, a new one when [`needs_new`].
fn promotion_run(
    api: &mut ApiServer,
    cx: &Context,
    bg: &BlueGreenAnalyses,
    kind: &str,
    current: Option<Object>,
    d: &mut Decision,
) -> Result<Option<Object>, ApiError> {
    let pre = kind == PRE_PROMOTION;
    let (analysis, skip) = if pre {
        let skip = skip_pre_promotion(cx.status, cx.new_hash, bg, current.is_some());
        (bg.strategy.pre_promotion_analysis.as_ref(), skip)
    } else {
        let skip = skip_post_promotion(cx.status, cx.new_hash, bg.new_rs, current.is_some());
        (bg.strategy.post_promotion_analysis.as_ref(), skip)
    };
    let Some(analysis) = with_templates(analysis) else {
        if let Some(run) = &current {
            terminate(api, run, d)?;
        }
        return Ok(None);
    };
    let run = if skip {
        if let Some(run) = &current {
            terminate(api, run, d)?;
        }
        current
    } else if paused_inconclusive(cx.status) {
        current
    } else if needs_new(current.as_ref(), cx.status, cx.aborted_before) {
        let labels = json!({ROLLOUT_TYPE_LABEL: kind});
        let infix = if pre { "pre" } else { "post" };
        create_run(api, cx, &analysis, Some(infix), labels, d)?
    } else {
        current
    };
    if let Some(run) = &run {
        let which = if pre { "pre" } else { "post" };
        effects(
            run,
            &format!("Blue/green {which}-promotion analysis phase error/failed"),
            d,
        );
    }
    Ok(run)
}

/// `skipPrePromotionAnalysisRun`: not on the first deploy, a rollback to stable or once the
/// active Service is switched; not before the new ReplicaSet is up, unless already started.
fn skip_pre_promotion(
    status: &RolloutStatus,
    new_hash: &str,
    bg: &BlueGreenAnalyses,
    started: bool,
) -> bool {
    let active = &status.blue_green.active_selector;
    if status.stable_r_s == new_hash
        || active.is_empty()
        || active == new_hash
        || new_hash.is_empty()
    {
        return true;
    }
    if started {
        return false;
    }
    let rs = bg.new_rs;
    match bg.strategy.preview_replica_count {
        Some(preview) => rs.spec != preview || rs.available != preview,
        None => !rs.saturated(),
    }
}

/// `skipPostPromotionAnalysisRun`: only once the active Service selects the new ReplicaSet,
/// not yet stable and (unless already started) at full size.
pub(crate) fn skip_post_promotion(
    status: &RolloutStatus,
    new_hash: &str,
    new_rs: Saturation,
    started: bool,
) -> bool {
    if status.stable_r_s == new_hash
        || status.blue_green.active_selector != new_hash
        || new_hash.is_empty()
    {
        return true;
    }
    !started && !new_rs.saturated()
}

/// Inconclusive pauses the rollout; Failed or Error abort it.
fn effects(run: &Object, what: &str, d: &mut Decision) {
    match phase_of(run) {
        Some(Phase::Inconclusive) => d.pause_inconclusive = true,
        Some(Phase::Failed | Phase::Error) => {
            let message = run.value["status"]["message"].as_str().unwrap_or_default();
            d.abort = Some(if message.is_empty() {
                what.to_string()
            } else {
                format!("{what}: {message}")
            });
        }
        _ => {}
    }
}

/// `cancelAnalysisRuns`: `{"spec":{"terminate":true}}` on a run still measuring.
fn terminate(api: &mut ApiServer, run: &Object, d: &mut Decision) -> Result<(), ApiError> {
    let completed = phase_of(run).is_some_and(Phase::completed);
    if completed || run.value["spec"]["terminate"] == true {
        return Ok(());
    }
    api.patch(
        Kind::AnalysisRun,
        run.namespace(),
        run.name(),
        &Patch::Merge(json!({"spec": {"terminate": true}})),
    )?;
    d.changed = true;
    Ok(())
}

/// Creates the run `<rollout>-<hash>-<revision>[-<step>|-pre|-post]` (`.1`, `.2`… when the name is
/// taken, as Argo's collision counter does) from the templates.
fn create_run(
    api: &mut ApiServer,
    cx: &Context,
    analysis: &RolloutAnalysis,
    infix: Option<&str>,
    labels: Value,
    d: &mut Decision,
) -> Result<Option<Object>, ApiError> {
    let ns = cx.rollout.namespace();
    let spec = match run_spec(api, cx, analysis) {
        Ok(s) => s,
        Err(e) => {
            d.error = Some(e);
            return Ok(None);
        }
    };
    let mut base = format!("{}-{}-{}", cx.rollout.name(), cx.new_hash, cx.revision);
    if let Some(infix) = infix {
        base.push_str(&format!("-{infix}"));
    }
    let mut labels = labels;
    labels["rollouts-pod-template-hash"] = json!(cx.new_hash);
    if let Some(m) = cx.rollout.spec()["selector"]["matchLabels"].as_object() {
        for (k, v) in m {
            labels[k] = v.clone();
        }
    }
    if let Some(extra) = analysis
        .analysis_run_metadata
        .as_ref()
        .and_then(|m| m["labels"].as_object())
    {
        for (k, v) in extra {
            labels[k] = v.clone();
        }
    }
    let mut annotations = json!({crate::model::vocabulary::REVISION: cx.revision.to_string()});
    if let Some(extra) = analysis
        .analysis_run_metadata
        .as_ref()
        .and_then(|m| m["annotations"].as_object())
    {
        for (k, v) in extra {
            annotations[k] = v.clone();
        }
    }
    let mut name = base.clone();
    let mut collisions = 0;
    while api.get(Kind::AnalysisRun, ns, &name).is_ok() {
        collisions += 1;
        name = format!("{base}.{collisions}");
    }
    let object = Object::new(
        Kind::AnalysisRun,
        json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AnalysisRun",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [{
                    "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
                    "name": cx.rollout.name(),
                    "uid": cx.rollout.metadata().and_then(|m| m.get("uid")).cloned().unwrap_or(Value::Null),
                    "controller": true, "blockOwnerDeletion": true
                }]
            },
            "spec": spec,
        }),
    );
    let created = api.create(object)?;
    d.changed = true;
    Ok(Some(created))
}

/// The run's spec: the templates' metrics (and nested templates'), their args with the
/// rollout's values, dry-run and retention rules.
fn run_spec(api: &ApiServer, cx: &Context, analysis: &RolloutAnalysis) -> Result<Value, String> {
    let mut metrics: Vec<Metric> = Vec::new();
    let mut template_args: Vec<Argument> = Vec::new();
    let mut dry_run: Vec<Value> = Vec::new();
    let mut retention: Vec<Value> = Vec::new();
    let mut stack: Vec<TemplateRef> = analysis.templates.iter().rev().cloned().collect();
    let mut seen = std::collections::BTreeSet::new();
    while let Some(t) = stack.pop() {
        if !seen.insert((t.cluster_scope, t.template_name.clone())) {
            continue;
        }
        let found = if t.cluster_scope {
            api.get(Kind::ClusterAnalysisTemplate, "", &t.template_name)
        } else {
            api.get(
                Kind::AnalysisTemplate,
                cx.rollout.namespace(),
                &t.template_name,
            )
        };
        let template = found.map_err(|_| missing_template(&t))?;
        let spec: AnalysisSpec = serde_json::from_value(template.spec().clone())
            .map_err(|e| format!("{}: {e}", t.template_name))?;
        for m in spec.metrics {
            if metrics.iter().any(|x| x.name == m.name) {
                return Err(format!("two metrics have the same name '{}'", m.name));
            }
            metrics.push(m);
        }
        for a in spec.args {
            if let Some(existing) = template_args.iter_mut().find(|x| x.name == a.name) {
                if existing.value.is_none() {
                    *existing = a;
                }
            } else {
                template_args.push(a);
            }
        }
        dry_run.extend(
            template.spec()["dryRun"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        );
        retention.extend(
            template.spec()["measurementRetention"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        );
        for nested in template.spec()["templates"]
            .as_array()
            .into_iter()
            .flatten()
            .rev()
        {
            if let Ok(r) = serde_json::from_value::<TemplateRef>(nested.clone()) {
                stack.push(r);
            }
        }
    }
    // The rollout's args give (or override) the templates' values.
    let mut args = template_args;
    for a in &analysis.args {
        let value = resolve_arg(cx, a)?;
        match args.iter_mut().find(|x| x.name == a.name) {
            Some(x) => {
                x.value = value;
                x.value_from = None;
            }
            None => args.push(Argument {
                name: a.name.clone(),
                value,
                value_from: None,
            }),
        }
    }
    if let Some(unresolved) = args
        .iter()
        .find(|a| a.value.is_none() && a.value_from.is_none())
    {
        return Err(format!("args.{} was not resolved", unresolved.name));
    }
    dry_run.extend(analysis.dry_run.iter().cloned());
    retention.extend(analysis.measurement_retention.iter().cloned());
    let mut spec = json!({"metrics": metrics, "args": args});
    if !dry_run.is_empty() {
        spec["dryRun"] = Value::Array(dry_run);
    }
    if !retention.is_empty() {
        spec["measurementRetention"] = Value::Array(retention);
    }
    Ok(spec)
}

/// What the rollout reports when a template is missing.
pub(crate) fn missing_template(t: &TemplateRef) -> String {
    if t.cluster_scope {
        format!(
            "clusteranalysistemplate.argoproj.io \"{}\" not found",
            t.template_name
        )
    } else {
        format!(
            "analysistemplate.argoproj.io \"{}\" not found",
            t.template_name
        )
    }
}

/// An arg's value: given, or from the pod-template hash (Stable / Latest), or from a
/// field of the rollout (`metadata.labels['app']`).
fn resolve_arg(cx: &Context, a: &Argument) -> Result<Option<String>, String> {
    if a.value.is_some() {
        return Ok(a.value.clone());
    }
    let Some(from) = &a.value_from else {
        return Ok(None);
    };
    if let Some(which) = from["podTemplateHashValue"].as_str() {
        return Ok(Some(match which {
            "Stable" => cx.status.stable_r_s.clone(),
            "Latest" => cx.new_hash.to_string(),
            other => {
                return Err(format!(
                    "args.{}: unknown podTemplateHashValue '{other}'",
                    a.name
                ));
            }
        }));
    }
    if let Some(path) = from["fieldRef"]["fieldPath"].as_str() {
        return field(&cx.rollout.value, path)
            .map(Some)
            .ok_or_else(|| format!("failed to resolve fieldPath '{path}' on the rollout"));
    }
    Err(format!(
        "args.{}: canarysim resolves value, podTemplateHashValue and fieldRef only",
        a.name
    ))
}

/// A field of an object by a path as Kubernetes' downward API writes it:
/// `metadata.name`, `metadata.labels['app']`, `spec.template.metadata.labels["x"]`.
pub fn field(object: &Value, path: &str) -> Option<String> {
    let mut v = object;
    let mut rest = path;
    while !rest.is_empty() {
        let (part, after) = match rest.find(['.', '[']) {
            Some(0) if rest.starts_with('[') => {
                let close = rest.find(']')?;
                let key = rest[1..close].trim_matches(|c| c == '\'' || c == '"');
                v = v.get(key)?;
                rest = rest[close + 1..].trim_start_matches('.');
                continue;
            }
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        v = v.get(part)?;
        rest = after.trim_start_matches('.');
    }
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A status with this stable ReplicaSet and active selector.
    fn status(stable: &str, active: &str) -> RolloutStatus {
        let mut s = RolloutStatus {
            stable_r_s: stable.into(),
            ..RolloutStatus::default()
        };
        s.blue_green.active_selector = active.into();
        s
    }

    fn rs(spec: i32, available: i32) -> Saturation {
        Saturation {
            spec,
            available,
            replicas: 2,
        }
    }

    /// Argo's TestSkipPrePromotionAnalysisRun, case by case (the new ReplicaSet is `new`).
    #[test]
    fn pre_promotion_skip_rules_are_argos() {
        let plain = BlueGreenStrategy::default();
        let preview = BlueGreenStrategy {
            preview_replica_count: Some(3),
            ..BlueGreenStrategy::default()
        };
        let bg = |strategy, new_rs| BlueGreenAnalyses { strategy, new_rs };
        let other = status("other", "other");
        let cases: [(&str, &RolloutStatus, &str, BlueGreenAnalyses, bool, bool); 10] = [
            (
                "stable is new",
                &status("new", "other"),
                "new",
                bg(&plain, rs(2, 2)),
                false,
                true,
            ),
            (
                "no active selector",
                &status("other", ""),
                "new",
                bg(&plain, rs(2, 2)),
                false,
                true,
            ),
            (
                "active is new",
                &status("other", "new"),
                "new",
                bg(&plain, rs(2, 2)),
                false,
                true,
            ),
            ("no pod hash", &other, "", bg(&plain, rs(2, 2)), false, true),
            (
                "started, unsaturated",
                &other,
                "new",
                bg(&plain, rs(2, 1)),
                true,
                false,
            ),
            (
                "unsaturated",
                &other,
                "new",
                bg(&plain, rs(2, 1)),
                false,
                true,
            ),
            (
                "saturated",
                &other,
                "new",
                bg(&plain, rs(2, 2)),
                false,
                false,
            ),
            (
                "at previewReplicaCount",
                &other,
                "new",
                bg(&preview, rs(3, 3)),
                false,
                false,
            ),
            (
                "below previewReplicaCount",
                &other,
                "new",
                bg(&preview, rs(3, 2)),
                false,
                true,
            ),
            (
                "started, below preview",
                &other,
                "new",
                bg(&preview, rs(3, 2)),
                true,
                false,
            ),
        ];
        for (case, st, hash, analyses, started, skip) in cases {
            assert_eq!(
                skip_pre_promotion(st, hash, &analyses, started),
                skip,
                "{case}"
            );
        }
    }

    /// Argo's TestSkipPostPromotionAnalysisRun, case by case.
    #[test]
    fn post_promotion_skip_rules_are_argos() {
        let cases = [
            (
                "stable is new",
                status("new", "new"),
                "new",
                rs(2, 2),
                false,
                true,
            ),
            (
                "active not new",
                status("other", "other"),
                "new",
                rs(2, 2),
                false,
                true,
            ),
            (
                "no pod hash",
                status("some", "some"),
                "",
                rs(2, 2),
                false,
                true,
            ),
            (
                "started, unsaturated",
                status("other", "new"),
                "new",
                rs(2, 1),
                true,
                false,
            ),
            (
                "unsaturated",
                status("other", "new"),
                "new",
                rs(2, 1),
                false,
                true,
            ),
            (
                "saturated",
                status("other", "new"),
                "new",
                rs(2, 2),
                false,
                false,
            ),
        ];
        for (case, st, hash, new_rs, started, skip) in cases {
            assert_eq!(
                skip_post_promotion(&st, hash, new_rs, started),
                skip,
                "{case}"
            );
        }
    }

    #[test]
    fn field_paths_read_names_and_labels() {
        let ro = json!({"metadata": {"name": "demo", "labels": {"app": "web", "a.b/c": "x"}}});
        assert_eq!(field(&ro, "metadata.name").as_deref(), Some("demo"));
        assert_eq!(field(&ro, "metadata.labels['app']").as_deref(), Some("web"));
        assert_eq!(
            field(&ro, "metadata.labels[\"a.b/c\"]").as_deref(),
            Some("x")
        );
        assert_eq!(field(&ro, "metadata.labels['none']"), None);
    }
}
