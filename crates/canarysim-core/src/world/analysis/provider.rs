//! Metric providers. `prometheus` queries the built-in Prometheus that the simulated
//! traffic feeds; `job`, `web` and every other provider return what the scenario scripts
//! for the metric (`cluster.analysis_results`), since canarysim runs no Jobs and calls no
//! outside services.

use std::collections::BTreeMap;

use serde_json::Value;

use super::Phase;
use super::condition::ResultValue;
use super::metrics::Prometheus;
use super::promql::{self, QueryValue};
use super::types::Metric;
use crate::clock::SimTime;

/// Where measurements come from.
#[derive(Debug, Clone, Copy)]
pub struct Providers<'a> {
    pub prometheus: &'a Prometheus,
    /// Per metric name: the values its successive measurements return (the last one
    /// repeats).
    pub scripted: &'a BTreeMap<String, Vec<Value>>,
}

/// What a provider measured: a value for the conditions, or (a job) a phase directly.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Value(ResultValue),
    Phase(Phase, String),
}

/// The provider a metric names (`prometheus`, `job`, `web`, …).
pub fn kind(provider: &Value) -> Option<&str> {
    provider
        .as_object()?
        .iter()
        .find(|(_, v)| !v.is_null())
        .map(|(k, _)| k.as_str())
}

/// Takes the `index`-th measurement of `metric` at `now`.
pub(crate) fn measure(
    providers: &Providers,
    metric: &Metric,
    index: usize,
    now: SimTime,
) -> Result<Outcome, String> {
    let kind = kind(&metric.provider).unwrap_or("");
    if kind == "prometheus" && !providers.scripted.contains_key(&metric.name) {
        let query = metric.provider["prometheus"]["query"]
            .as_str()
            .unwrap_or_default();
        let at_ms = now.as_duration().as_millis() as i64;
        return match promql::query(&providers.prometheus.at(now), query, at_ms) {
            Ok(QueryValue::Vector(v)) => Ok(Outcome::Value(ResultValue::List(
                v.into_iter().map(|(_, x)| x).collect(),
            ))),
            Ok(QueryValue::Scalar(x)) => Ok(Outcome::Value(ResultValue::Number(x))),
            Ok(QueryValue::String(_)) => Err("Prometheus metric type not supported".into()),
            Err(e) => Err(e.to_string()),
        };
    }
    let Some(values) = providers.scripted.get(&metric.name) else {
        return Err(format!(
            "canarysim does not run the {kind} provider: script the results of metric '{}' in the scenario's cluster.analysis_results",
            metric.name
        ));
    };
    let value = values
        .get(index)
        .or(values.last())
        .cloned()
        .unwrap_or(Value::Null);
    if kind == "job" {
        // A job's outcome is its phase: Successful when it completes, Failed when it fails.
        return Ok(match &value {
            Value::Bool(true) => Outcome::Phase(Phase::Successful, String::new()),
            Value::Bool(false) => Outcome::Phase(Phase::Failed, String::new()),
            Value::String(s) => match Phase::parse(s) {
                Some(p) if p.completed() => Outcome::Phase(p, String::new()),
                _ => {
                    return Err(format!(
                        "a job's scripted result is Successful, Failed, Inconclusive or Error, not '{s}'"
                    ));
                }
            },
            other => {
                return Err(format!(
                    "a job's scripted result is Successful or Failed, not {other}"
                ));
            }
        });
    }
    Ok(Outcome::Value(match value {
        Value::Null => ResultValue::Nil,
        Value::Bool(b) => ResultValue::Bool(b),
        Value::Number(n) => ResultValue::Number(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => ResultValue::Text(s),
        Value::Array(a) => {
            ResultValue::List(a.iter().map(|x| x.as_f64().unwrap_or(f64::NAN)).collect())
        }
        Value::Object(_) => {
            return Err(
                "a scripted result is a number, a list of numbers, a string or a boolean".into(),
            );
        }
    }))
}
