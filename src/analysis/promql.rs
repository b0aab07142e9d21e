//! PromQL instant queries over the built-in Prometheus, as `/api/v1/query` evaluates them.
//! The `promql-parser` crate parses; this module evaluates its AST: selectors (the four
//! matchers, the 5-minute lookback, `offset`), range selectors, the functions Argo's and
//! Istio's examples use (`rate`, `irate`, `increase` with Prometheus' extrapolation,
//! `histogram_quantile`, `*_over_time`, …), aggregations with `by` / `without`,
//! arithmetic, comparisons (`bool`), `and` / `or` / `unless`, and vector matching
//! (`on`, `ignoring`, `group_left` / `group_right`). What it does not evaluate is an error
//! naming it, never a wrong answer.

use promql_parser::label::{MatchOp, Matcher};
use promql_parser::parser::{
    self, AggregateExpr, BinaryExpr, Call, Expr, LabelModifier, MatrixSelector, Offset,
    VectorMatchCardinality, VectorSelector,
};
use std::collections::BTreeMap;

/// A series' labels, `__name__` included.
pub type Labels = BTreeMap<String, String>;

/// One time series: labels and samples (ms since the scenario began, value) in time order.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: Labels,
    pub samples: Vec<(i64, f64)>,
}

/// Where series come from: every series named `metric`.
pub trait SeriesSource {
    fn series(&self, metric: &str) -> Vec<Series>;
}

/// An instant query's result.
#[derive(Debug, Clone, PartialEq)]
pub enum QueryValue {
    Scalar(f64),
    Vector(Vec<(Labels, f64)>),
    String(String),
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QueryError {
    #[error("{0}")]
    Parse(String),
    #[error("canarysim's PromQL does not evaluate {0}")]
    Unsupported(String),
    #[error("{0}")]
    Eval(String),
}

/// Prometheus' default lookback for an instant vector selector.
const LOOKBACK_MS: i64 = 5 * 60 * 1000;

/// Parses `query` (the error is the parser's, as Prometheus words a parse error).
pub fn parse(query: &str) -> Result<Expr, QueryError> {
    parser::parse(query).map_err(|e| QueryError::Parse(format!("parse error: {e}")))
}

/// The instant query `query` at `at_ms`.
pub fn query(source: &dyn SeriesSource, query: &str, at_ms: i64) -> Result<QueryValue, QueryError> {
    let expr = parse(query)?;
    Ok(match eval(source, &expr, at_ms)? {
        Value::Scalar(f) => QueryValue::Scalar(f),
        Value::Str(s) => QueryValue::String(s),
        Value::Vector(mut v) => {
            v.sort_by(|a, b| a.0.cmp(&b.0));
            QueryValue::Vector(v)
        }
        // A range selector at the top: every sample, as Argo flattens a matrix.
        Value::Matrix(m) => QueryValue::Vector(
            m.into_iter()
                .flat_map(|s| {
                    let labels = s.labels;
                    s.samples.into_iter().map(move |(_, v)| (labels.clone(), v))
                })
                .collect(),
        ),
    })
}

#[derive(Debug, Clone)]
enum Value {
    Scalar(f64),
    Str(String),
    Vector(Vec<(Labels, f64)>),
    Matrix(Vec<Series>),
}

fn unsupported(what: impl Into<String>) -> QueryError {
    QueryError::Unsupported(what.into())
}

fn eval(src: &dyn SeriesSource, expr: &Expr, t: i64) -> Result<Value, QueryError> {
    match expr {
        Expr::NumberLiteral(n) => Ok(Value::Scalar(n.val)),
        Expr::StringLiteral(s) => Ok(Value::Str(s.val.clone())),
        Expr::Paren(p) => eval(src, &p.expr, t),
        Expr::Unary(u) => match eval(src, &u.expr, t)? {
            Value::Scalar(f) => Ok(Value::Scalar(-f)),
            Value::Vector(v) => Ok(Value::Vector(
                v.into_iter().map(|(l, f)| (without_name(l), -f)).collect(),
            )),
            _ => Err(QueryError::Eval(
                "unary minus needs a scalar or an instant vector".into(),
            )),
        },
        Expr::VectorSelector(vs) => Ok(Value::Vector(instant(src, vs, t)?)),
        Expr::MatrixSelector(ms) => Ok(Value::Matrix(range(src, ms, t)?)),
        Expr::Call(call) => function(src, call, t),
        Expr::Aggregate(agg) => aggregate(src, agg, t),
        Expr::Binary(b) => binary(src, b, t),
        Expr::Subquery(_) => Err(unsupported("subqueries")),
        Expr::Extension(_) => Err(unsupported("extension expressions")),
    }
}

fn offset_ms(offset: &Option<Offset>) -> i64 {
    match offset {
        Some(Offset::Pos(d)) => d.as_millis() as i64,
        Some(Offset::Neg(d)) => -(d.as_millis() as i64),
        None => 0,
    }
}

/// The series a selector names, with the samples in (from, to].
fn select(
    src: &dyn SeriesSource,
    vs: &VectorSelector,
    from: i64,
    to: i64,
) -> Result<Vec<Series>, QueryError> {
    if vs.at.is_some() {
        return Err(unsupported("the @ modifier"));
    }
    if !vs.matchers.or_matchers.is_empty() {
        return Err(unsupported("`or` inside a selector"));
    }
    let name = match &vs.name {
        Some(n) => n.clone(),
        None => vs
            .matchers
            .matchers
            .iter()
            .find(|m| m.name == "__name__" && matches!(m.op, MatchOp::Equal))
            .map(|m| m.value.clone())
            .ok_or_else(|| unsupported("a selector without a metric name"))?,
    };
    let matches =
        |labels: &Labels, m: &Matcher| m.is_match(labels.get(&m.name).map_or("", String::as_str));
    Ok(src
        .series(&name)
        .into_iter()
        .filter(|s| vs.matchers.matchers.iter().all(|m| matches(&s.labels, m)))
        .map(|s| Series {
            labels: s.labels,
            samples: s
                .samples
                .into_iter()
                .filter(|(ts, _)| *ts > from && *ts <= to)
                .collect(),
        })
        .filter(|s| !s.samples.is_empty())
        .collect())
}

/// An instant vector: each series' latest sample within the lookback.
fn instant(
    src: &dyn SeriesSource,
    vs: &VectorSelector,
    t: i64,
) -> Result<Vec<(Labels, f64)>, QueryError> {
    let at = t - offset_ms(&vs.offset);
    Ok(select(src, vs, at - LOOKBACK_MS, at)?
        .into_iter()
        .filter_map(|s| s.samples.last().map(|(_, v)| (s.labels, *v)))
        .collect())
}

fn range(src: &dyn SeriesSource, ms: &MatrixSelector, t: i64) -> Result<Vec<Series>, QueryError> {
    let at = t - offset_ms(&ms.vs.offset);
    select(src, &ms.vs, at - ms.range.as_millis() as i64, at)
}

fn without_name(mut l: Labels) -> Labels {
    l.remove("__name__");
    l
}

fn scalar_arg(src: &dyn SeriesSource, e: &Expr, t: i64) -> Result<f64, QueryError> {
    match eval(src, e, t)? {
        Value::Scalar(f) => Ok(f),
        _ => Err(QueryError::Eval("expected a scalar argument".into())),
    }
}

fn vector_arg(src: &dyn SeriesSource, e: &Expr, t: i64) -> Result<Vec<(Labels, f64)>, QueryError> {
    match eval(src, e, t)? {
        Value::Vector(v) => Ok(v),
        _ => Err(QueryError::Eval(
            "expected an instant vector argument".into(),
        )),
    }
}

/// The range argument of a `*_over_time`/rate function: its series and the window.
fn matrix_arg(
    src: &dyn SeriesSource,
    e: &Expr,
    t: i64,
) -> Result<(Vec<Series>, i64, i64), QueryError> {
    let ms = match e {
        Expr::MatrixSelector(ms) => ms,
        Expr::Paren(p) => return matrix_arg(src, &p.expr, t),
        _ => return Err(unsupported("a range argument that is not a range selector")),
    };
    let end = t - offset_ms(&ms.vs.offset);
    let start = end - ms.range.as_millis() as i64;
    Ok((range(src, ms, t)?, start, end))
}

/// What a `*_over_time` or rate function computes from one series' samples in the window
/// (start, end].
type RangeFn<'a> = &'a dyn Fn(&[(i64, f64)], i64, i64) -> Option<f64>;

fn function(src: &dyn SeriesSource, call: &Call, t: i64) -> Result<Value, QueryError> {
    let args = &call.args.args;
    let arg = |i: usize| -> Result<&Expr, QueryError> {
        args.get(i)
            .map(|b| b.as_ref())
            .ok_or_else(|| QueryError::Eval(format!("{} needs more arguments", call.func.name)))
    };
    let name = call.func.name;
    let per_range = |f: RangeFn| -> Result<Value, QueryError> {
        let (series, start, end) = matrix_arg(src, arg(0)?, t)?;
        Ok(Value::Vector(
            series
                .into_iter()
                .filter_map(|s| f(&s.samples, start, end).map(|v| (without_name(s.labels), v)))
                .collect(),
        ))
    };
    let per_sample = |f: &dyn Fn(f64) -> f64| -> Result<Value, QueryError> {
        Ok(Value::Vector(
            vector_arg(src, arg(0)?, t)?
                .into_iter()
                .map(|(l, v)| (without_name(l), f(v)))
                .collect(),
        ))
    };
    match name {
        "rate" => per_range(&|s, a, b| extrapolated_rate(s, a, b, true, true)),
        "increase" => per_range(&|s, a, b| extrapolated_rate(s, a, b, true, false)),
        "delta" => per_range(&|s, a, b| extrapolated_rate(s, a, b, false, false)),
        "irate" => per_range(&|s, _, _| instant_rate(s, true)),
        "idelta" => per_range(&|s, _, _| instant_rate(s, false)),
        "sum_over_time" => per_range(&|s, _, _| Some(s.iter().map(|p| p.1).sum())),
        "count_over_time" => per_range(&|s, _, _| Some(s.len() as f64)),
        "avg_over_time" => {
            per_range(&|s, _, _| Some(s.iter().map(|p| p.1).sum::<f64>() / s.len() as f64))
        }
        "min_over_time" => per_range(&|s, _, _| s.iter().map(|p| p.1).reduce(f64::min)),
        "max_over_time" => per_range(&|s, _, _| s.iter().map(|p| p.1).reduce(f64::max)),
        "last_over_time" => {
            let (series, _, _) = matrix_arg(src, arg(0)?, t)?;
            Ok(Value::Vector(
                series
                    .into_iter()
                    .filter_map(|s| s.samples.last().map(|p| (s.labels.clone(), p.1)))
                    .collect(),
            ))
        }
        "abs" => per_sample(&f64::abs),
        "ceil" => per_sample(&f64::ceil),
        "floor" => per_sample(&f64::floor),
        "round" if args.len() == 1 => per_sample(&|v| (v + 0.5).floor()),
        "sqrt" => per_sample(&f64::sqrt),
        "exp" => per_sample(&f64::exp),
        "ln" => per_sample(&f64::ln),
        "log2" => per_sample(&f64::log2),
        "log10" => per_sample(&f64::log10),
        "clamp_min" => {
            let lo = scalar_arg(src, arg(1)?, t)?;
            per_sample(&|v| v.max(lo))
        }
        "clamp_max" => {
            let hi = scalar_arg(src, arg(1)?, t)?;
            per_sample(&|v| v.min(hi))
        }
        "clamp" => {
            let lo = scalar_arg(src, arg(1)?, t)?;
            let hi = scalar_arg(src, arg(2)?, t)?;
            if lo > hi {
                return Ok(Value::Vector(Vec::new()));
            }
            per_sample(&|v| v.max(lo).min(hi))
        }
        "scalar" => {
            let v = vector_arg(src, arg(0)?, t)?;
            Ok(Value::Scalar(if v.len() == 1 { v[0].1 } else { f64::NAN }))
        }
        "vector" => Ok(Value::Vector(vec![(
            Labels::new(),
            scalar_arg(src, arg(0)?, t)?,
        )])),
        "time" => Ok(Value::Scalar(t as f64 / 1000.0)),
        "absent" => {
            let v = vector_arg(src, arg(0)?, t)?;
            if !v.is_empty() {
                return Ok(Value::Vector(Vec::new()));
            }
            // Labels from the selector's equality matchers, as Prometheus gives them.
            let mut labels = Labels::new();
            if let Expr::VectorSelector(vs) = arg(0)? {
                for m in &vs.matchers.matchers {
                    if matches!(m.op, MatchOp::Equal) && m.name != "__name__" {
                        labels.insert(m.name.clone(), m.value.clone());
                    }
                }
            }
            Ok(Value::Vector(vec![(labels, 1.0)]))
        }
        "histogram_quantile" => {
            let q = scalar_arg(src, arg(0)?, t)?;
            Ok(Value::Vector(histogram_quantile(
                q,
                vector_arg(src, arg(1)?, t)?,
            )))
        }
        "sort" | "sort_desc" => {
            let mut v = vector_arg(src, arg(0)?, t)?;
            v.sort_by(|a, b| a.1.total_cmp(&b.1));
            if name == "sort_desc" {
                v.reverse();
            }
            Ok(Value::Vector(v))
        }
        other => Err(unsupported(format!("the function {other}()"))),
    }
}

/// Prometheus' `extrapolatedRate`: the change over the samples in the window, corrected
/// for counter resets and extrapolated towards the window's edges (to where the counter
/// would reach zero, at most, and no further than half a sample interval past the samples
/// when they stop short of an edge by more than 1.1 intervals).
fn extrapolated_rate(
    s: &[(i64, f64)],
    start: i64,
    end: i64,
    counter: bool,
    per_second: bool,
) -> Option<f64> {
    if s.len() < 2 {
        return None;
    }
    let (first, last) = (s[0], s[s.len() - 1]);
    let mut result = last.1 - first.1;
    if counter {
        for w in s.windows(2) {
            if w[1].1 < w[0].1 {
                result += w[0].1;
            }
        }
    }
    let mut to_start = (first.0 - start) as f64 / 1000.0;
    let to_end = (end - last.0) as f64 / 1000.0;
    let sampled = (last.0 - first.0) as f64 / 1000.0;
    let average = sampled / (s.len() - 1) as f64;
    if counter && result > 0.0 && first.1 >= 0.0 {
        let to_zero = sampled * (first.1 / result);
        if to_zero < to_start {
            to_start = to_zero;
        }
    }
    let threshold = average * 1.1;
    let mut interval = sampled;
    interval += if to_start < threshold {
        to_start
    } else {
        average / 2.0
    };
    interval += if to_end < threshold {
        to_end
    } else {
        average / 2.0
    };
    let mut factor = interval / sampled;
    if per_second {
        factor /= (end - start) as f64 / 1000.0;
    }
    Some(result * factor)
}

/// `irate` / `idelta`: from the last two samples.
fn instant_rate(s: &[(i64, f64)], rate: bool) -> Option<f64> {
    if s.len() < 2 {
        return None;
    }
    let (prev, last) = (s[s.len() - 2], s[s.len() - 1]);
    let change = if rate && last.1 < prev.1 {
        last.1 // a counter reset
    } else {
        last.1 - prev.1
    };
    if !rate {
        return Some(change);
    }
    let seconds = (last.0 - prev.0) as f64 / 1000.0;
    (seconds > 0.0).then(|| change / seconds)
}

/// `histogram_quantile(q, buckets)`: per group of buckets (the labels but `le`), the
/// quantile by linear interpolation inside the bucket that holds the rank.
fn histogram_quantile(q: f64, buckets: Vec<(Labels, f64)>) -> Vec<(Labels, f64)> {
    let mut groups: BTreeMap<Labels, Vec<(f64, f64)>> = BTreeMap::new();
    for (labels, count) in buckets {
        let Some(le) = labels.get("le").and_then(|v| parse_bound(v)) else {
            continue;
        };
        let mut key = without_name(labels);
        key.remove("le");
        groups.entry(key).or_default().push((le, count));
    }
    groups
        .into_iter()
        .map(|(labels, mut b)| {
            b.sort_by(|x, y| x.0.total_cmp(&y.0));
            (labels, bucket_quantile(q, &mut b))
        })
        .collect()
}

fn parse_bound(v: &str) -> Option<f64> {
    match v {
        "+Inf" | "Inf" | "+inf" | "inf" => Some(f64::INFINITY),
        other => other.parse().ok(),
    }
}

/// Prometheus' `bucketQuantile` over (upper bound, cumulative count), sorted.
fn bucket_quantile(q: f64, b: &mut [(f64, f64)]) -> f64 {
    if q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    if b.len() < 2 || b[b.len() - 1].0 != f64::INFINITY {
        return f64::NAN;
    }
    // Counts must not decrease (`ensureMonotonic`).
    for i in 1..b.len() {
        if b[i].1 < b[i - 1].1 {
            b[i].1 = b[i - 1].1;
        }
    }
    let total = b[b.len() - 1].1;
    if total == 0.0 || total.is_nan() {
        return f64::NAN;
    }
    let rank = q * total;
    let i = b.iter().position(|x| x.1 >= rank).unwrap_or(b.len() - 1);
    if i == b.len() - 1 {
        return b[b.len() - 2].0;
    }
    if i == 0 && b[0].0 <= 0.0 {
        return b[0].0;
    }
    let (start, below) = if i == 0 {
        (0.0, 0.0)
    } else {
        (b[i - 1].0, b[i - 1].1)
    };
    let (end, count) = (b[i].0, b[i].1 - below);
    start + (end - start) * ((rank - below) / count)
}

fn grouping(labels: &Labels, modifier: &Option<LabelModifier>) -> Labels {
    match modifier {
        None => Labels::new(),
        Some(LabelModifier::Include(keep)) => labels
            .iter()
            .filter(|(k, _)| keep.labels.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        Some(LabelModifier::Exclude(drop)) => labels
            .iter()
            .filter(|(k, _)| *k != "__name__" && !drop.labels.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

fn aggregate(src: &dyn SeriesSource, agg: &AggregateExpr, t: i64) -> Result<Value, QueryError> {
    let op = agg.op.to_string();
    let input = vector_arg(src, &agg.expr, t)?;
    let param = match &agg.param {
        Some(p) => Some(scalar_arg(src, p, t)?),
        None => None,
    };
    let mut groups: BTreeMap<Labels, Vec<(Labels, f64)>> = BTreeMap::new();
    for (labels, v) in input {
        groups
            .entry(grouping(&labels, &agg.modifier))
            .or_default()
            .push((labels, v));
    }
    let mut out = Vec::new();
    for (key, members) in groups {
        let values: Vec<f64> = members.iter().map(|m| m.1).collect();
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let value = match op.as_str() {
            "sum" => values.iter().sum(),
            "avg" => mean,
            "count" => n,
            "group" => 1.0,
            "min" => values
                .iter()
                .copied()
                .fold(f64::NAN, |a, b| if a.is_nan() || b < a { b } else { a }),
            "max" => values
                .iter()
                .copied()
                .fold(f64::NAN, |a, b| if a.is_nan() || b > a { b } else { a }),
            "stdvar" => values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n,
            "stddev" => (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt(),
            "quantile" => {
                let mut sorted = values.clone();
                sorted.sort_by(f64::total_cmp);
                quantile(param.unwrap_or(f64::NAN), &sorted)
            }
            "topk" | "bottomk" => {
                let k = param.unwrap_or(0.0).max(0.0) as usize;
                let mut m = members;
                m.sort_by(|a, b| a.1.total_cmp(&b.1));
                if op == "topk" {
                    m.reverse();
                }
                out.extend(m.into_iter().take(k));
                continue;
            }
            other => return Err(unsupported(format!("the aggregation {other}"))),
        };
        out.push((key, value));
    }
    Ok(Value::Vector(out))
}

/// Prometheus' `quantile` aggregation over sorted values (linear interpolation).
fn quantile(q: f64, sorted: &[f64]) -> f64 {
    if sorted.is_empty() || q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    let rank = q * (sorted.len() - 1) as f64;
    let lower = rank.floor() as usize;
    let upper = (lower + 1).min(sorted.len() - 1);
    let weight = rank - rank.floor();
    sorted[lower] * (1.0 - weight) + sorted[upper] * weight
}

/// One arithmetic or comparison operation; for comparisons, whether it holds.
fn operate(op: &str, l: f64, r: f64) -> Result<(f64, bool), QueryError> {
    Ok(match op {
        "+" => (l + r, true),
        "-" => (l - r, true),
        "*" => (l * r, true),
        "/" => (l / r, true),
        "%" => (l % r, true),
        "^" => (l.powf(r), true),
        "atan2" => (l.atan2(r), true),
        "==" => (l, l == r),
        "!=" => (l, l != r),
        ">" => (l, l > r),
        "<" => (l, l < r),
        ">=" => (l, l >= r),
        "<=" => (l, l <= r),
        other => return Err(unsupported(format!("the operator {other}"))),
    })
}

fn is_comparison(op: &str) -> bool {
    matches!(op, "==" | "!=" | ">" | "<" | ">=" | "<=")
}

fn binary(src: &dyn SeriesSource, b: &BinaryExpr, t: i64) -> Result<Value, QueryError> {
    let op = b.op.to_string();
    let returns_bool = b.modifier.as_ref().is_some_and(|m| m.return_bool);
    let lhs = eval(src, &b.lhs, t)?;
    let rhs = eval(src, &b.rhs, t)?;
    let comparison = is_comparison(&op);
    match (lhs, rhs) {
        (Value::Scalar(l), Value::Scalar(r)) => {
            let (v, holds) = operate(&op, l, r)?;
            Ok(Value::Scalar(if comparison {
                f64::from(u8::from(holds))
            } else {
                v
            }))
        }
        (Value::Vector(v), Value::Scalar(s)) => vector_scalar(&op, v, s, false, returns_bool),
        (Value::Scalar(s), Value::Vector(v)) => vector_scalar(&op, v, s, true, returns_bool),
        (Value::Vector(l), Value::Vector(r)) => vector_vector(&op, l, r, b, returns_bool),
        _ => Err(QueryError::Eval(format!(
            "the operator {op} needs scalars or instant vectors"
        ))),
    }
}

/// `vector op scalar` (or `scalar op vector` when `swap`): a comparison filters (and
/// keeps the vector's value), arithmetic maps.
fn vector_scalar(
    op: &str,
    v: Vec<(Labels, f64)>,
    s: f64,
    swap: bool,
    returns_bool: bool,
) -> Result<Value, QueryError> {
    let comparison = is_comparison(op);
    let mut out = Vec::new();
    for (labels, x) in v {
        let (l, r) = if swap { (s, x) } else { (x, s) };
        let (mut value, holds) = operate(op, l, r)?;
        if comparison {
            value = x;
        }
        let labels = if !comparison || returns_bool {
            without_name(labels)
        } else {
            labels
        };
        if returns_bool {
            out.push((labels, f64::from(u8::from(holds))));
        } else if holds {
            out.push((labels, value));
        }
    }
    Ok(Value::Vector(out))
}

/// The labels two samples are matched on.
fn signature(labels: &Labels, matching: &Option<LabelModifier>) -> Labels {
    match matching {
        Some(LabelModifier::Include(on)) => labels
            .iter()
            .filter(|(k, _)| on.labels.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        Some(LabelModifier::Exclude(ignoring)) => labels
            .iter()
            .filter(|(k, _)| *k != "__name__" && !ignoring.labels.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        None => without_name(labels.clone()),
    }
}

fn vector_vector(
    op: &str,
    lhs: Vec<(Labels, f64)>,
    rhs: Vec<(Labels, f64)>,
    b: &BinaryExpr,
    returns_bool: bool,
) -> Result<Value, QueryError> {
    let matching = b.modifier.as_ref().and_then(|m| m.matching.clone());
    let card = b
        .modifier
        .as_ref()
        .map(|m| m.card.clone())
        .unwrap_or(VectorMatchCardinality::OneToOne);
    match op {
        "and" | "unless" => {
            let right: std::collections::BTreeSet<Labels> =
                rhs.iter().map(|(l, _)| signature(l, &matching)).collect();
            let keep = op == "and";
            return Ok(Value::Vector(
                lhs.into_iter()
                    .filter(|(l, _)| right.contains(&signature(l, &matching)) == keep)
                    .collect(),
            ));
        }
        "or" => {
            let left: std::collections::BTreeSet<Labels> =
                lhs.iter().map(|(l, _)| signature(l, &matching)).collect();
            let mut out = lhs;
            out.extend(
                rhs.into_iter()
                    .filter(|(l, _)| !left.contains(&signature(l, &matching))),
            );
            return Ok(Value::Vector(out));
        }
        _ => {}
    }
    // group_right: the right side is the "many" one; swap and remember.
    let (many, one, swapped, include) = match &card {
        VectorMatchCardinality::OneToMany(include) => {
            (rhs, lhs, true, Some(include.labels.clone()))
        }
        VectorMatchCardinality::ManyToOne(include) => {
            (lhs, rhs, false, Some(include.labels.clone()))
        }
        _ => (lhs, rhs, false, None),
    };
    let mut by_signature: BTreeMap<Labels, (Labels, f64)> = BTreeMap::new();
    for (labels, v) in one {
        let sig = signature(&labels, &matching);
        if by_signature.insert(sig, (labels, v)).is_some() {
            return Err(QueryError::Eval(
                "found duplicate series for the match group on the right-hand side of the operation (many-to-many matching not allowed: matching labels must be unique on one side)".into(),
            ));
        }
    }
    let comparison = is_comparison(op);
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for (labels, v) in many {
        let sig = signature(&labels, &matching);
        let Some((one_labels, w)) = by_signature.get(&sig) else {
            continue;
        };
        if include.is_none() && !seen.insert(sig.clone()) {
            return Err(QueryError::Eval(
                "found duplicate series for the match group on the left-hand side of the operation (many-to-many matching not allowed: matching labels must be unique on one side)".into(),
            ));
        }
        let (l, r) = if swapped { (*w, v) } else { (v, *w) };
        let (value, holds) = operate(op, l, r)?;
        // The result's labels: the "many" side's (only the `on` labels for one-to-one
        // matching with `on`), plus the `group_*` labels copied from the other side.
        let mut result = match (&include, &matching) {
            (None, Some(LabelModifier::Include(_))) => sig.clone(),
            (None, Some(LabelModifier::Exclude(ignoring))) => labels
                .iter()
                .filter(|(k, _)| !ignoring.labels.contains(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            _ => labels.clone(),
        };
        if !comparison || returns_bool {
            result.remove("__name__");
        }
        if let Some(include) = &include {
            for k in include {
                match one_labels.get(k) {
                    Some(v) => result.insert(k.clone(), v.clone()),
                    None => result.remove(k),
                };
            }
        }
        if returns_bool {
            out.push((result, f64::from(u8::from(holds))));
        } else if !comparison {
            out.push((result, value));
        } else if holds {
            out.push((result, l));
        }
    }
    Ok(Value::Vector(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Series in memory.
    struct Mem(Vec<Series>);

    impl SeriesSource for Mem {
        fn series(&self, metric: &str) -> Vec<Series> {
            self.0
                .iter()
                .filter(|s| s.labels.get("__name__").map(String::as_str) == Some(metric))
                .cloned()
                .collect()
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// A counter scraped every 15 s from 0 to `until` s, growing by `per_second`.
    fn counter(name: &str, l: &[(&str, &str)], per_second: f64, until: i64) -> Series {
        let mut all = labels(l);
        all.insert("__name__".into(), name.into());
        Series {
            labels: all,
            samples: (0..=until / 15)
                .map(|k| (k * 15_000, per_second * (k * 15) as f64))
                .collect(),
        }
    }

    fn istio(svc: &str, code: &str, per_second: f64) -> Series {
        counter(
            "istio_requests_total",
            &[
                ("reporter", "source"),
                ("destination_service", svc),
                ("response_code", code),
            ],
            per_second,
            600,
        )
    }

    fn values(v: QueryValue) -> Vec<f64> {
        match v {
            QueryValue::Vector(v) => v.into_iter().map(|(_, f)| f).collect(),
            other => panic!("not a vector: {other:?}"),
        }
    }

    const SUCCESS_RATE: &str = r#"sum(irate(istio_requests_total{reporter="source",destination_service=~"c.ns.svc.cluster.local",response_code!~"5.*"}[5m])) / sum(irate(istio_requests_total{reporter="source",destination_service=~"c.ns.svc.cluster.local"}[5m]))"#;

    #[test]
    fn the_documented_success_rate_query() {
        // The canary answers 9 requests a second with 200 and 1 with 500: 0.9.
        let src = Mem(vec![
            istio("c.ns.svc.cluster.local", "200", 9.0),
            istio("c.ns.svc.cluster.local", "500", 1.0),
            istio("s.ns.svc.cluster.local", "200", 50.0),
        ]);
        let v = values(query(&src, SUCCESS_RATE, 600_000).expect("evaluates"));
        assert_eq!(v.len(), 1);
        assert!((v[0] - 0.9).abs() < 1e-12, "{v:?}");
    }

    #[test]
    fn no_series_gives_an_empty_vector_and_no_requests_a_nan() {
        let none = Mem(vec![istio("s.ns.svc.cluster.local", "200", 5.0)]);
        assert_eq!(
            values(query(&none, SUCCESS_RATE, 600_000).expect("evaluates")),
            Vec::<f64>::new()
        );
        // Series exist but did not grow: 0 / 0.
        let idle = Mem(vec![istio("c.ns.svc.cluster.local", "200", 0.0)]);
        let v = values(query(&idle, SUCCESS_RATE, 600_000).expect("evaluates"));
        assert!(v.len() == 1 && v[0].is_nan(), "{v:?}");
    }

    #[test]
    fn matchers_are_anchored_and_all_four_apply() {
        let src = Mem(vec![
            istio("canary.ns", "200", 1.0),
            istio("canary.ns.extra", "200", 2.0),
            istio("stable.ns", "503", 4.0),
        ]);
        let count =
            |q: &str| values(query(&src, &format!("count({q})"), 300_000).expect("evaluates"));
        assert_eq!(
            count(r#"istio_requests_total{destination_service=~"canary.ns"}"#),
            vec![1.0]
        );
        assert_eq!(
            count(r#"istio_requests_total{destination_service!~"canary.*"}"#),
            vec![1.0]
        );
        assert_eq!(
            count(r#"istio_requests_total{destination_service="canary.ns"}"#),
            vec![1.0]
        );
        assert_eq!(
            count(r#"istio_requests_total{destination_service!="canary.ns"}"#),
            vec![2.0]
        );
        assert_eq!(
            count(r#"istio_requests_total{response_code=~"5.."}"#),
            vec![1.0]
        );
    }

    #[test]
    fn rate_and_increase_extrapolate_as_prometheus_does() {
        // Samples every 15 s from t=15 s (value 15) to t=60 s (value 60), a counter at
        // 1/s; window (0 s, 60 s]. Sampled interval 45 s over 3 gaps (average 15 s); the
        // start is 15 s before the first sample (< 1.1 × 15 s) but the counter would reach
        // zero 45 × 15/45 = 15 s before it: extrapolate by 15 s; the end is on a sample.
        // increase = 45 × (45 + 15) / 45 = 60; rate = 60 / 60 s = 1.
        let mut s = counter("c", &[], 1.0, 60);
        s.samples.remove(0);
        let src = Mem(vec![s]);
        let one = |q: &str| values(query(&src, q, 60_000).expect("ok"))[0];
        assert!((one("increase(c[1m])") - 60.0).abs() < 1e-9);
        assert!((one("rate(c[1m])") - 1.0).abs() < 1e-9);
        // A counter reset between 30 s and 45 s (45 → 5): the drop is added back.
        let reset = Series {
            labels: labels(&[("__name__", "r")]),
            samples: vec![
                (0, 0.0),
                (15_000, 15.0),
                (30_000, 30.0),
                (45_000, 5.0),
                (60_000, 20.0),
            ],
        };
        // Change 20 - 0 + 30 = 50 over 60 s sampled: window (0, 60] holds 15..60 s only:
        // 20 - 15 + 30 = 35 over 45 s; start 15 s away, zero-point 45 × 15/35 ≈ 19.3 s > 15 s,
        // so +15 s: 35 × 60/45 = 46.67.
        let v = values(query(&Mem(vec![reset]), "increase(r[1m])", 60_000).expect("ok"));
        assert!((v[0] - 35.0 * 60.0 / 45.0).abs() < 1e-9, "{v:?}");
    }

    #[test]
    fn irate_uses_the_last_two_samples() {
        let s = Series {
            labels: labels(&[("__name__", "c")]),
            samples: vec![(0, 0.0), (15_000, 30.0), (30_000, 33.0)],
        };
        assert_eq!(
            values(query(&Mem(vec![s]), "irate(c[5m])", 30_000).expect("ok")),
            vec![0.2]
        );
    }

    #[test]
    fn histogram_quantile_interpolates_inside_the_bucket() {
        // 100 requests: 60 at or below 5 ms, 90 at or below 10 ms, all below 25 ms.
        let mut series = Vec::new();
        for (le, n) in [("5", 60.0), ("10", 90.0), ("25", 100.0), ("+Inf", 100.0)] {
            series.push(counter(
                "istio_request_duration_milliseconds_bucket",
                &[("le", le), ("destination_workload", "w")],
                n / 60.0,
                600,
            ));
        }
        let q = r#"histogram_quantile(0.99, sum(rate(istio_request_duration_milliseconds_bucket{destination_workload="w"}[1m])) by (le))"#;
        // Rank 99 of 100 falls in (10, 25] which holds 10: 10 + 15 × 9/10 = 23.5.
        let v = values(query(&Mem(series.clone()), q, 600_000).expect("ok"));
        assert!((v[0] - 23.5).abs() < 1e-9, "{v:?}");
        // The median: rank 50 in (0, 5] holding 60: 5 × 50/60.
        let median = q.replace("0.99", "0.5");
        let v = values(query(&Mem(series), &median, 600_000).expect("ok"));
        assert!((v[0] - 5.0 * 50.0 / 60.0).abs() < 1e-9, "{v:?}");
    }

    #[test]
    fn aggregation_by_and_without() {
        let src = Mem(vec![
            counter("x", &[("w", "a"), ("code", "200")], 1.0, 60),
            counter("x", &[("w", "a"), ("code", "500")], 2.0, 60),
            counter("x", &[("w", "b"), ("code", "200")], 4.0, 60),
        ]);
        let by = query(&src, "sum by (w) (x)", 60_000).expect("ok");
        assert_eq!(
            by,
            QueryValue::Vector(vec![
                (labels(&[("w", "a")]), 180.0),
                (labels(&[("w", "b")]), 240.0)
            ])
        );
        let without = query(&src, "sum without (code) (x)", 60_000).expect("ok");
        assert_eq!(without, by);
        assert_eq!(
            values(query(&src, "max(x)", 60_000).expect("ok")),
            vec![240.0]
        );
    }

    #[test]
    fn comparisons_filter_or_give_booleans() {
        let src = Mem(vec![
            counter("x", &[("w", "a")], 1.0, 60),
            counter("x", &[("w", "b")], 4.0, 60),
        ]);
        assert_eq!(
            values(query(&src, "x > 100", 60_000).expect("ok")),
            vec![240.0]
        );
        assert_eq!(
            values(query(&src, "x > bool 100", 60_000).expect("ok")),
            vec![0.0, 1.0]
        );
        assert_eq!(
            query(&src, "2 * 3 + 1", 0).expect("ok"),
            QueryValue::Scalar(7.0)
        );
        assert_eq!(
            query(&src, "1 < bool 2", 0).expect("ok"),
            QueryValue::Scalar(1.0)
        );
        assert_eq!(
            values(query(&src, "x / on(w) x", 60_000).expect("ok")),
            vec![1.0, 1.0]
        );
    }

    #[test]
    fn errors_name_what_went_wrong() {
        let src = Mem(vec![]);
        assert!(
            matches!(query(&src, "sum(", 0), Err(QueryError::Parse(m)) if m.starts_with("parse error"))
        );
        assert_eq!(
            query(&src, "predict_linear(x[5m], 60)", 0),
            Err(QueryError::Unsupported(
                "the function predict_linear()".into()
            ))
        );
    }
}
