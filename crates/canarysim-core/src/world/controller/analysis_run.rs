//! The AnalysisRun controller (Argo's `analysis/analysis.go`): takes each AnalysisRun's measurements
//! when they are due on the virtual clock, assesses each metric and the run, and records it
//! all in the run's status, as Argo's controller does.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use super::rollout::Event;
use crate::analysis::Phase;
use crate::analysis::condition;
use crate::analysis::provider::{self, Providers};
use crate::analysis::types::{
    AnalysisSpec, Measurement, Metric, MetricResult, RunStatus, RunSummary,
};
use crate::apiserver::{ApiError, ApiServer};
use crate::clock::SimTime;
use crate::model::rollout::IntOrString;
use crate::model::{Kind, Object};

/// Measurements kept per metric unless `measurementRetention` says otherwise.
pub(crate) const DEFAULT_MEASUREMENT_HISTORY_LIMIT: usize = 10;
/// A measurement that errored is retried after this long, whatever the interval.
pub(crate) const ERROR_RETRY_INTERVAL: Duration = Duration::from_secs(10);
/// `consecutiveErrorLimit` when the metric gives none.
pub(crate) const DEFAULT_CONSECUTIVE_ERROR_LIMIT: i32 = 4;

/// Reconciles every AnalysisRun; returns whether anything changed and when a run next
/// needs a measurement.
pub(crate) fn reconcile_all(
    api: &mut ApiServer,
    now: SimTime,
    providers: &Providers,
    events: &mut Vec<Event>,
) -> Result<(bool, Option<SimTime>), ApiError> {
    let runs: Vec<Object> = api
        .list(Kind::AnalysisRun, None, None)
        .into_iter()
        .cloned()
        .collect();
    let mut changed = false;
    let mut wake: Option<SimTime> = None;
    for run in runs {
        let status: RunStatus =
            serde_json::from_value(run.value["status"].clone()).unwrap_or_default();
        let (next, next_wake) = reconcile(&run, status.clone(), now, providers, events);
        if let Some(t) = next_wake {
            wake = Some(wake.map_or(t, |w| w.min(t)));
        }
        if next != status {
            let mut updated = run.clone();
            updated.value["status"] =
                serde_json::to_value(&next).expect("an AnalysisRun status serializes");
            api.update_status(updated)?;
            changed = true;
        }
    }
    Ok((changed, wake))
}

/// One run at `now`: the status it should have and when it next needs a look.
fn reconcile(
    run: &Object,
    mut status: RunStatus,
    now: SimTime,
    providers: &Providers,
    events: &mut Vec<Event>,
) -> (RunStatus, Option<SimTime>) {
    if Phase::parse(&status.phase).is_some_and(Phase::completed) {
        return (status, None);
    }
    let Checked {
        spec,
        metrics,
        dry_run,
        retention,
    } = match check(run) {
        Ok(c) => c,
        Err(message) => return (error_status(status, message, now, run, events), None),
    };

    if status.started_at.is_none() {
        status.started_at = Some(now.rfc3339());
    }
    let started = status
        .started_at
        .as_deref()
        .and_then(SimTime::parse_rfc3339)
        .unwrap_or(now);
    let terminating = is_terminating(&spec, &status);

    // Take the measurements that are due.
    for metric in &metrics {
        if !due(metric, &status, started, now, terminating) {
            continue;
        }
        let index = result_of(&status, &metric.name)
            .map(|r| r.count + r.error)
            .unwrap_or(0) as usize;
        let measurement = measure(metric, index, now, providers);
        let result = match status
            .metric_results
            .iter_mut()
            .find(|r| r.name == metric.name)
        {
            Some(r) => r,
            None => {
                status.metric_results.push(MetricResult {
                    name: metric.name.clone(),
                    phase: Phase::Running.as_str().into(),
                    dry_run: dry_run.contains(&metric.name),
                    ..MetricResult::default()
                });
                status.metric_results.last_mut().expect("just pushed")
            }
        };
        match Phase::parse(&measurement.phase) {
            Some(Phase::Successful) => {
                result.successful += 1;
                result.count += 1;
                result.consecutive_error = 0;
                result.consecutive_success += 1;
            }
            Some(Phase::Failed) => {
                result.failed += 1;
                result.count += 1;
                result.consecutive_error = 0;
                result.consecutive_success = 0;
            }
            Some(Phase::Inconclusive) => {
                result.inconclusive += 1;
                result.count += 1;
                result.consecutive_error = 0;
                result.consecutive_success = 0;
            }
            _ => {
                result.error += 1;
                result.consecutive_error += 1;
                result.consecutive_success = 0;
            }
        }
        result.measurements.push(measurement);
    }

    let (phase, message) = assess_run(&spec, &metrics, &dry_run, &mut status, now, run, events);
    if status.phase != phase.as_str() {
        status.phase = phase.as_str().into();
        status.message = message;
        if phase.completed() {
            completion_event(run, &status, now, events);
            if status.completed_at.is_none() {
                status.completed_at = Some(now.rfc3339());
            }
        }
    }
    // Measurement history: the most recent ones only.
    for r in &mut status.metric_results {
        let limit = retention
            .get(&r.name)
            .copied()
            .unwrap_or(DEFAULT_MEASUREMENT_HISTORY_LIMIT);
        if r.measurements.len() > limit {
            r.measurements.drain(..r.measurements.len() - limit);
        }
    }
    let wake = if phase.completed() {
        None
    } else {
        next_measurement(&metrics, &status, started)
    };
    (status, wake)
}

/// A run's spec as the controller measures it: its metrics with their arguments
/// resolved, the dry-run metrics, and the measurements kept per metric.
struct Checked {
    spec: AnalysisSpec,
    metrics: Vec<Metric>,
    dry_run: Vec<String>,
    retention: BTreeMap<String, usize>,
}

/// Decodes, resolves and validates a run's spec; the error is the run's message.
fn check(run: &Object) -> Result<Checked, String> {
    let invalid = |e: String| format!("Analysis spec invalid: {e}");
    let spec: AnalysisSpec =
        serde_json::from_value(run.value["spec"].clone()).map_err(|e| invalid(e.to_string()))?;
    let args: BTreeMap<String, Option<String>> = spec
        .args
        .iter()
        .map(|a| (a.name.clone(), a.value.clone()))
        .collect();
    let metrics = resolve_metrics(&spec.metrics, &args)
        .map_err(|e| format!("Unable to resolve metric arguments: {e}"))?;
    validate_metrics(&metrics).map_err(invalid)?;
    let mut dry_run = Vec::new();
    for (i, d) in spec.dry_run.iter().enumerate() {
        dry_run.extend(matching_metrics("dryRun", i, &d.metric_name, &metrics).map_err(invalid)?);
    }
    let mut retention = BTreeMap::new();
    for (i, r) in spec.measurement_retention.iter().enumerate() {
        let names = matching_metrics("measurementRetention", i, &r.metric_name, &metrics)
            .map_err(invalid)?;
        if r.limit > 0 {
            for n in names {
                retention.insert(n, r.limit as usize);
            }
        }
    }
    Ok(Checked {
        spec,
        metrics,
        dry_run,
        retention,
    })
}

/// The run fails at once (bad spec, unresolved args).
fn error_status(
    mut status: RunStatus,
    message: String,
    now: SimTime,
    run: &Object,
    events: &mut Vec<Event>,
) -> RunStatus {
    status.phase = Phase::Error.as_str().into();
    status.message = message;
    completion_event(run, &status, now, events);
    status
}

fn completion_event(run: &Object, status: &RunStatus, now: SimTime, events: &mut Vec<Event>) {
    let warning = matches!(status.phase.as_str(), "Failed" | "Error");
    events.push(Event {
        time: now,
        object: format!("AnalysisRun/{}", run.name()),
        namespace: run.namespace().to_string(),
        warning,
        reason: format!("AnalysisRun{}", status.phase),
        message: format!("Analysis Completed. Result: {}", status.phase),
    });
}

/// `{{args.name}}` in every string of the metrics (Argo's `ResolveArgs`).
fn resolve_metrics(
    metrics: &[Metric],
    args: &BTreeMap<String, Option<String>>,
) -> Result<Vec<Metric>, String> {
    let json = serde_json::to_value(metrics).map_err(|e| e.to_string())?;
    let resolved = resolve_value(json, args)?;
    serde_json::from_value(resolved).map_err(|e| e.to_string())
}

fn resolve_value(v: Value, args: &BTreeMap<String, Option<String>>) -> Result<Value, String> {
    Ok(match v {
        Value::String(s) => Value::String(substitute(&s, args)?),
        Value::Array(a) => Value::Array(
            a.into_iter()
                .map(|x| resolve_value(x, args))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, x)| Ok((k, resolve_value(x, args)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other,
    })
}

/// Replaces `{{args.x}}` (spaces allowed inside the braces); an argument without a value
/// fails as Argo's does.
pub(crate) fn substitute(
    text: &str,
    args: &BTreeMap<String, Option<String>>,
) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let Some(close) = rest[open..].find("}}") else {
            break;
        };
        let inner = rest[open + 2..open + close].trim();
        out.push_str(&rest[..open]);
        match inner.strip_prefix("args.") {
            Some(name) => match args.get(name) {
                Some(Some(v)) => out.push_str(v),
                Some(None) => return Err(format!("argument \"{name}\" was not supplied")),
                None => return Err(format!("failed to resolve {{{{{inner}}}}}")),
            },
            // Other templates (`{{templates.*}}`, secrets) are left as they are.
            None => out.push_str(&rest[open..open + close + 2]),
        }
        rest = &rest[open + close + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `ValidateMetrics` (`utils/analysis/factory.go`), with Argo's messages.
pub(crate) fn validate_metrics(metrics: &[Metric]) -> Result<(), String> {
    if metrics.is_empty() {
        return Err("no metrics specified".into());
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, m) in metrics.iter().enumerate() {
        if !seen.insert(m.name.as_str()) {
            return Err(format!("metrics[{i}]: duplicate name '{}'", m.name));
        }
        validate_metric(m).map_err(|e| format!("metrics[{i}]: {e}"))?;
    }
    Ok(())
}

/// `ValidateMetric`.
fn validate_metric(m: &Metric) -> Result<(), String> {
    let count = int_value(m.count.as_ref());
    let failure_limit = int_value(m.failure_limit.as_ref());
    let success_limit = int_value(m.consecutive_success_limit.as_ref());
    let inconclusive_limit = int_value(m.inconclusive_limit.as_ref());
    if success_limit < 0 {
        return Err("consecutiveSuccessLimit must be >= 0".into());
    }
    if failure_limit < -1 {
        return Err("failureLimit must be >= 0, or -1 to be disabled".into());
    }
    if success_limit == 0 && failure_limit == -1 {
        return Err("failureLimit and consecutiveSuccessLimit cannot both be disabled".into());
    }
    if inconclusive_limit < 0 {
        return Err("inconclusiveLimit must be >= 0".into());
    }
    if int_value(m.consecutive_error_limit.as_ref()) < 0 {
        return Err("consecutiveErrorLimit must be >= 0".into());
    }
    if count > 0 {
        if failure_limit >= 0 && count < failure_limit + success_limit {
            return Err(format!(
                "count ({count}) must be >= failureLimit + consecutiveSuccessLimit ({failure_limit} + {success_limit}) if both >= 0"
            ));
        }
        if failure_limit < 0 && count < success_limit {
            return Err("count must be >= consecutiveSuccessLimit".into());
        }
        if count < inconclusive_limit {
            return Err("count must be >= inconclusiveLimit".into());
        }
    }
    if count > 1 && m.interval.is_none() {
        return Err("interval must be specified when count > 1".into());
    }
    if let Some(d) = &m.interval {
        crate::model::duration::parse(d).map_err(|e| format!("invalid interval string: {e}"))?;
    }
    if let Some(d) = &m.initial_delay {
        crate::model::duration::parse(d).map_err(|e| format!("invalid startDelay string: {e}"))?;
    }
    let providers = m
        .provider
        .as_object()
        .map(|o| o.values().filter(|v| !v.is_null()).count())
        .unwrap_or(0);
    match providers {
        0 => return Err("no provider specified".into()),
        1 => {}
        _ => return Err("multiple providers specified".into()),
    }
    for c in [&m.success_condition, &m.failure_condition]
        .into_iter()
        .flatten()
    {
        condition::check_syntax(c)?;
    }
    Ok(())
}

/// The metric names that rule `i` of `what` (a regular expression, matched as Argo
/// matches it) selects; a rule that selects none is an error.
fn matching_metrics(
    what: &str,
    i: usize,
    rule: &str,
    metrics: &[Metric],
) -> Result<Vec<String>, String> {
    let re = regex::Regex::new(rule).map_err(|e| e.to_string())?;
    let matched: Vec<String> = metrics
        .iter()
        .filter(|m| re.is_match(&m.name))
        .map(|m| m.name.clone())
        .collect();
    if matched.is_empty() {
        return Err(format!("{what}[{i}]: Rule didn't match any metric name(s)"));
    }
    Ok(matched)
}

fn int_value(v: Option<&IntOrString>) -> i64 {
    match v {
        Some(IntOrString::Int(i)) => *i,
        Some(IntOrString::String(s)) => s.trim().parse().unwrap_or(0),
        None => 0,
    }
}

/// `count` as Argo counts it: none or 0 with no interval → 1; none or 0 with an interval
/// → unlimited (None).
fn effective_count(m: &Metric) -> Option<i64> {
    let c = int_value(m.count.as_ref());
    if c == 0 {
        m.interval.is_none().then_some(1)
    } else {
        Some(c)
    }
}

fn result_of<'s>(status: &'s RunStatus, name: &str) -> Option<&'s MetricResult> {
    status.metric_results.iter().find(|r| r.name == name)
}

/// `IsTerminating`: asked to stop, or a metric (not a dry-run one) already ended badly.
fn is_terminating(spec: &AnalysisSpec, status: &RunStatus) -> bool {
    spec.terminate
        || status
            .metric_results
            .iter()
            .any(|r| !r.dry_run && matches!(r.phase.as_str(), "Failed" | "Error" | "Inconclusive"))
}

fn duration_of(text: Option<&String>) -> Option<Duration> {
    text.and_then(|d| crate::model::duration::parse(d).ok())
}

/// When the metric's next measurement is due (None: no more).
fn next_due(m: &Metric, status: &RunStatus, started: SimTime) -> Option<SimTime> {
    let Some(result) = result_of(status, &m.name) else {
        return Some(started.after(duration_of(m.initial_delay.as_ref()).unwrap_or_default()));
    };
    if Phase::parse(&result.phase).is_some_and(Phase::completed) {
        return None;
    }
    if effective_count(m).is_some_and(|c| i64::from(result.count) >= c) {
        return None;
    }
    let last = result.measurements.last()?;
    let finished = last
        .finished_at
        .as_deref()
        .and_then(SimTime::parse_rfc3339)?;
    let interval = if last.phase == "Error" {
        ERROR_RETRY_INTERVAL
    } else {
        duration_of(m.interval.as_ref())?
    };
    Some(finished.after(interval))
}

fn due(m: &Metric, status: &RunStatus, started: SimTime, now: SimTime, terminating: bool) -> bool {
    !terminating && next_due(m, status, started).is_some_and(|t| t <= now)
}

fn next_measurement(metrics: &[Metric], status: &RunStatus, started: SimTime) -> Option<SimTime> {
    metrics
        .iter()
        .filter_map(|m| next_due(m, status, started))
        .min()
}

/// The `index`-th measurement of `metric` (its arguments resolved).
fn measure(metric: &Metric, index: usize, now: SimTime, providers: &Providers) -> Measurement {
    let stamp = now.rfc3339();
    let mut m = Measurement {
        phase: String::new(),
        message: String::new(),
        started_at: Some(stamp.clone()),
        finished_at: Some(stamp),
        value: String::new(),
    };
    match provider::measure(providers, metric, index, now) {
        Ok(provider::Outcome::Value(value)) => {
            m.value = value.recorded();
            match condition::evaluate(
                &value,
                metric.success_condition.as_deref(),
                metric.failure_condition.as_deref(),
            ) {
                Ok(p) => m.phase = p.as_str().into(),
                Err(e) => {
                    m.phase = Phase::Error.as_str().into();
                    m.message = e;
                }
            }
        }
        Ok(provider::Outcome::Phase(p, value)) => {
            m.phase = p.as_str().into();
            m.value = value;
        }
        Err(e) => {
            m.phase = Phase::Error.as_str().into();
            m.message = e;
        }
    }
    m
}

/// `assessRunStatus`: each metric's phase, then the run's (the worst of the metrics that
/// are not dry runs, once all are complete or the run is terminating).
fn assess_run(
    spec: &AnalysisSpec,
    metrics: &[Metric],
    dry_run: &[String],
    status: &mut RunStatus,
    now: SimTime,
    run: &Object,
    events: &mut Vec<Event>,
) -> (Phase, String) {
    let terminating = is_terminating(spec, status);
    let mut worst: Option<Phase> = None;
    let mut worst_message = if spec.terminate {
        "Run Terminated".to_string()
    } else {
        String::new()
    };
    let mut everything_completed = true;
    let mut summary = RunSummary::default();
    let mut dry_summary = RunSummary::default();
    for metric in metrics {
        let is_dry = dry_run.contains(&metric.name);
        if is_dry {
            dry_summary.count += 1;
        } else {
            summary.count += 1;
        }
        let Some(result) = status
            .metric_results
            .iter_mut()
            .find(|r| r.name == metric.name)
        else {
            everything_completed = false;
            continue;
        };
        let metric_phase = assess_metric(metric, result, terminating);
        if result.phase != metric_phase.as_str() {
            if metric_phase.completed() {
                events.push(Event {
                    time: now,
                    object: format!("AnalysisRun/{}", run.name()),
                    namespace: run.namespace().to_string(),
                    warning: matches!(metric_phase, Phase::Failed | Phase::Error),
                    reason: format!("Metric{}", metric_phase.as_str()),
                    message: format!(
                        "Metric '{}' Completed. Result: {}",
                        metric.name,
                        metric_phase.as_str()
                    ),
                });
            }
            if let Some(last) = result.measurements.last() {
                result.message = last.message.clone();
            }
            result.phase = metric_phase.as_str().into();
        }
        if !metric_phase.completed() {
            everything_completed = false;
            continue;
        }
        let (limit_phase, limit_message) = failure_inconclusive_or_error(metric, result);
        let tally = if is_dry {
            &mut dry_summary
        } else {
            &mut summary
        };
        match limit_phase {
            Some(Phase::Error) => tally.error += 1,
            Some(Phase::Failed) => tally.failed += 1,
            Some(Phase::Inconclusive) => tally.inconclusive += 1,
            _ => tally.successful += 1,
        }
        if !is_dry {
            if worst.is_none_or(|w| metric_phase.worse_than(w)) {
                worst = Some(metric_phase);
                if !limit_message.is_empty() {
                    worst_message = format!(
                        "Metric \"{}\" assessed {} due to {limit_message}",
                        metric.name,
                        metric_phase.as_str()
                    );
                    if !result.message.is_empty() {
                        worst_message.push_str(&format!(": \"Error Message: {}\"", result.message));
                    }
                }
            }
        } else {
            if worst.is_none() {
                worst = Some(Phase::Successful);
            }
            if !limit_message.is_empty() {
                result.message = format!(
                    "Metric assessed {} due to {limit_message}",
                    metric_phase.as_str()
                );
            }
        }
    }
    status.run_summary = Some(summary);
    status.dry_run_summary = Some(dry_summary);
    let worst_message = worst_message.trim().to_string();
    if terminating {
        return (worst.unwrap_or(Phase::Successful), worst_message);
    }
    match worst {
        Some(w) if everything_completed => (w, worst_message),
        _ => (Phase::Running, String::new()),
    }
}

/// `assessMetricStatus`.
fn assess_metric(metric: &Metric, result: &MetricResult, terminating: bool) -> Phase {
    if let Some(p) = Phase::parse(&result.phase).filter(|p| p.completed()) {
        return p;
    }
    let Some(last) = result.measurements.last() else {
        return if terminating {
            Phase::Successful
        } else {
            Phase::Pending
        };
    };
    if !Phase::parse(&last.phase).is_some_and(Phase::completed) {
        return Phase::Running;
    }
    if let (Some(p), _) = failure_inconclusive_or_error(metric, result) {
        return p;
    }
    let success_limit = int_value(metric.consecutive_success_limit.as_ref());
    if success_limit > 0 && i64::from(result.consecutive_success) >= success_limit {
        return Phase::Successful;
    }
    if effective_count(metric).is_some_and(|c| i64::from(result.count) >= c) {
        // The count is reached without the run of successes it needed: Inconclusive while
        // a failure limit applies too, Failed when only the success limit does.
        let failure_applies =
            metric.failure_limit.is_none() || int_value(metric.failure_limit.as_ref()) >= 0;
        return match (success_limit > 0, failure_applies) {
            (true, true) => Phase::Inconclusive,
            (true, false) => Phase::Failed,
            _ => Phase::Successful,
        };
    }
    if terminating {
        Phase::Successful
    } else {
        Phase::Running
    }
}

/// `assessMetricFailureInconclusiveOrError`: the last limit exceeded wins (error over
/// inconclusive over failed), with its message.
fn failure_inconclusive_or_error(
    metric: &Metric,
    result: &MetricResult,
) -> (Option<Phase>, String) {
    let mut phase = None;
    let mut message = String::new();
    let failure_limit = int_value(metric.failure_limit.as_ref());
    if failure_limit >= 0 && i64::from(result.failed) > failure_limit {
        phase = Some(Phase::Failed);
        message = format!(
            "failed ({}) > failureLimit ({failure_limit})",
            result.failed
        );
    }
    let inconclusive_limit = int_value(metric.inconclusive_limit.as_ref());
    if i64::from(result.inconclusive) > inconclusive_limit {
        phase = Some(Phase::Inconclusive);
        message = format!(
            "inconclusive ({}) > inconclusiveLimit ({inconclusive_limit})",
            result.inconclusive
        );
    }
    let error_limit = match metric.consecutive_error_limit.as_ref() {
        Some(v) => int_value(Some(v)),
        None => i64::from(DEFAULT_CONSECUTIVE_ERROR_LIMIT),
    };
    if i64::from(result.consecutive_error) > error_limit {
        phase = Some(Phase::Error);
        message = format!(
            "consecutiveErrors ({}) > consecutiveErrorLimit ({error_limit})",
            result.consecutive_error
        );
    }
    (phase, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Prometheus;
    use serde_json::json;

    /// Drives one run through time: reconciles at every instant it asks to be woken (and
    /// at `until`), returning its final status and the instants measured.
    fn drive(
        spec: Value,
        scripted: &[(&str, Vec<Value>)],
        until: Duration,
    ) -> (RunStatus, Vec<SimTime>) {
        let prometheus = Prometheus::new(1);
        let scripted: BTreeMap<String, Vec<Value>> = scripted
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let providers = Providers {
            prometheus: &prometheus,
            scripted: &scripted,
        };
        let run = Object::new(
            Kind::AnalysisRun,
            json!({"metadata": {"name": "r", "namespace": "ns"}, "spec": spec}),
        );
        let mut status = RunStatus::default();
        let mut events = Vec::new();
        let mut now = SimTime::ZERO;
        let end = SimTime::ZERO.after(until);
        let mut measured = Vec::new();
        loop {
            let before: i32 = status
                .metric_results
                .iter()
                .map(|r| r.count + r.error)
                .sum();
            let (next, wake) = reconcile(&run, status, now, &providers, &mut events);
            status = next;
            let after: i32 = status
                .metric_results
                .iter()
                .map(|r| r.count + r.error)
                .sum();
            if after > before {
                measured.push(now);
            }
            match wake {
                Some(t) if t <= end && t > now => now = t,
                _ => return (status, measured),
            }
        }
    }

    fn web(name: &str, extra: Value) -> Value {
        let mut m = json!({"name": name, "successCondition": "result < 1", "provider": {"web": {"url": "http://x"}}});
        for (k, v) in extra.as_object().expect("an object") {
            m[k] = v.clone();
        }
        m
    }

    fn secs(s: &[u64]) -> Vec<SimTime> {
        s.iter()
            .map(|s| SimTime::ZERO.after(Duration::from_secs(*s)))
            .collect()
    }

    #[test]
    fn a_failure_limit_is_exceeded_strictly() {
        let spec = json!({"metrics": [web("m", json!({"interval": "1m", "failureLimit": 2}))]});
        let (status, measured) = drive(spec, &[("m", vec![json!(5)])], Duration::from_secs(3600));
        assert_eq!(status.phase, "Failed");
        // Two failures are within the limit; the third exceeds it.
        assert_eq!(measured, secs(&[0, 60, 120]));
        assert_eq!(
            status.message,
            "Metric \"m\" assessed Failed due to failed (3) > failureLimit (2)"
        );
    }

    #[test]
    fn errors_retry_after_ten_seconds_and_the_fifth_in_a_row_ends_the_run() {
        let spec = json!({"metrics": [web("m", json!({"interval": "1m"}))]});
        // A web result that is an object cannot be scripted: every measurement errs.
        let (status, measured) = drive(
            spec,
            &[("m", vec![json!({"a": 1})])],
            Duration::from_secs(3600),
        );
        assert_eq!(status.phase, "Error");
        assert_eq!(measured, secs(&[0, 10, 20, 30, 40]));
        assert!(status.message.starts_with(
            "Metric \"m\" assessed Error due to consecutiveErrors (5) > consecutiveErrorLimit (4): \"Error Message: "
        ), "{}", status.message);
    }

    #[test]
    fn without_interval_one_measurement_and_count_ends_a_run() {
        let once = json!({"metrics": [web("m", json!({}))]});
        let (status, measured) = drive(once, &[("m", vec![json!(0)])], Duration::from_secs(3600));
        assert_eq!((status.phase.as_str(), measured.len()), ("Successful", 1));
        let counted = json!({"metrics": [web("m", json!({"interval": "30s", "count": 4, "initialDelay": "1m"}))]});
        let (status, measured) =
            drive(counted, &[("m", vec![json!(0)])], Duration::from_secs(3600));
        assert_eq!(status.phase, "Successful");
        assert_eq!(measured, secs(&[60, 90, 120, 150]));
        assert_eq!(status.metric_results[0].successful, 4);
    }

    #[test]
    fn measurements_kept_follow_the_retention_rule() {
        let spec = json!({
            "metrics": [web("m", json!({"interval": "1m", "count": 12})), web("n", json!({"interval": "1m", "count": 12}))],
            "measurementRetention": [{"metricName": "n", "limit": 3}],
        });
        let (status, _) = drive(
            spec,
            &[("m", vec![json!(0)]), ("n", vec![json!(0)])],
            Duration::from_secs(3600),
        );
        let kept: Vec<usize> = status
            .metric_results
            .iter()
            .map(|r| r.measurements.len())
            .collect();
        assert_eq!(kept, vec![DEFAULT_MEASUREMENT_HISTORY_LIMIT, 3]);
        assert_eq!(status.metric_results[1].count, 12);
    }

    #[test]
    fn one_failed_metric_stops_the_others_and_decides_the_run() {
        let spec = json!({"metrics": [
            web("ok", json!({"interval": "1m"})),
            web("bad", json!({"interval": "1m", "initialDelay": "2m"})),
        ]});
        let (status, _) = drive(
            spec,
            &[("ok", vec![json!(0)]), ("bad", vec![json!(9)])],
            Duration::from_secs(3600),
        );
        assert_eq!(status.phase, "Failed");
        let ok = &status.metric_results[0];
        // `ok` measured at 0, 1m and 2m; then the run was terminating and `ok` Successful.
        assert_eq!((ok.phase.as_str(), ok.count), ("Successful", 3));
    }

    #[test]
    fn a_consecutive_success_limit_ends_the_metric_early_or_leaves_it_inconclusive() {
        let spec = json!({"metrics": [web("m", json!({"interval": "1m", "count": 5, "consecutiveSuccessLimit": 2, "failureLimit": 3}))]});
        let (status, measured) = drive(
            spec.clone(),
            &[("m", vec![json!(9), json!(0), json!(0)])],
            Duration::from_secs(3600),
        );
        assert_eq!((status.phase.as_str(), measured.len()), ("Successful", 3));
        // Never two in a row within the count: Inconclusive.
        let (status, measured) = drive(
            spec,
            &[("m", vec![json!(0), json!(9), json!(0), json!(9), json!(0)])],
            Duration::from_secs(3600),
        );
        assert_eq!((status.phase.as_str(), measured.len()), ("Inconclusive", 5));
    }

    #[test]
    fn a_bad_spec_ends_the_run_in_error_with_argos_message() {
        let cases = [
            (
                json!({"metrics": []}),
                "Analysis spec invalid: no metrics specified",
            ),
            (
                json!({"metrics": [web("m", json!({})), web("m", json!({}))]}),
                "Analysis spec invalid: metrics[1]: duplicate name 'm'",
            ),
            (
                json!({"metrics": [web("m", json!({"count": 3}))]}),
                "Analysis spec invalid: metrics[0]: interval must be specified when count > 1",
            ),
            (
                json!({"metrics": [web("m", json!({"interval": "1m", "count": 2, "failureLimit": 3}))]}),
                "Analysis spec invalid: metrics[0]: count (2) must be >= failureLimit + consecutiveSuccessLimit (3 + 0) if both >= 0",
            ),
            (
                json!({"metrics": [{"name": "m"}]}),
                "Analysis spec invalid: metrics[0]: no provider specified",
            ),
            (
                json!({"metrics": [web("m", json!({}))], "dryRun": [{"metricName": "x"}]}),
                "Analysis spec invalid: dryRun[0]: Rule didn't match any metric name(s)",
            ),
            (
                json!({"metrics": [web("m", json!({}))], "args": [{"name": "a"}], "x": 1}),
                "",
            ),
        ];
        for (spec, message) in cases {
            let (status, measured) = drive(spec, &[("m", vec![json!(0)])], Duration::from_secs(60));
            if message.is_empty() {
                assert_eq!(status.phase, "Successful");
                continue;
            }
            assert_eq!(
                (status.phase.as_str(), status.message.as_str()),
                ("Error", message)
            );
            assert!(measured.is_empty() && status.started_at.is_none());
        }
    }

    #[test]
    fn arguments_are_substituted_and_a_missing_value_is_an_error() {
        let mut args = BTreeMap::new();
        args.insert("svc".to_string(), Some("a.ns.svc".to_string()));
        args.insert("none".to_string(), None);
        assert_eq!(
            substitute("x{{args.svc}}y{{ args.svc }}", &args).as_deref(),
            Ok("xa.ns.svcya.ns.svc")
        );
        assert!(substitute("{{args.none}}", &args).is_err());
        assert_eq!(
            substitute("{{secrets.x}}", &args).as_deref(),
            Ok("{{secrets.x}}")
        );
    }
}
