//! The function calls, as Prometheus 3's `promql/functions.go` computes them on float
//! samples.
//!
//! Range-vector functions: `rate`, `irate`, `increase`, `delta`, `idelta`, `deriv`,
//! `predict_linear`, `changes`, `resets`, `avg_over_time`, `sum_over_time`,
//! `min_over_time`, `max_over_time`, `count_over_time`, `last_over_time`,
//! `quantile_over_time`, `stddev_over_time`, `stdvar_over_time`, `present_over_time`,
//! `absent_over_time`. Instant-vector functions: `histogram_quantile`, `abs`, `ceil`,
//! `floor`, `round`, `sqrt`, `exp`, `ln`, `log2`, `log10`, `sgn`, the trigonometric ones,
//! `deg`, `rad`, `clamp`, `clamp_min`, `clamp_max`, `absent`, `scalar`, `sort`,
//! `sort_desc`, `label_replace`, `label_join`. Scalar ones: `vector`, `time`, `pi`.
//! Every other function is [`QueryError::Unsupported`].

use std::collections::HashSet;

use promql_parser::label::MatchOp;
use promql_parser::parser::{Call, Expr};
use regex::Regex;

use super::eval::{
    Evaluator, METRIC_NAME, Matrix, Sample, Value, ensure_unique, group, kahan_inc, mean,
    nan_first, quantile, without_name,
};
use super::{Labels, QueryError};

/// The label holding a classic histogram bucket's upper bound.
const BUCKET_LABEL: &str = "le";

// Long: one arm per PromQL function, as Prometheus' own function table; each arm is short.
/// Evaluates `call` at `ts`.
pub(super) fn call(ev: &mut Evaluator, call: &Call, ts: i64) -> Result<Value, QueryError> {
    let name = call.func.name;
    // Prometheus strips parentheses around arguments before evaluating (this matters to
    // `absent`, which reads its argument's matchers).
    let args: Vec<&Expr> = call.args.args.iter().map(|a| unwrap_parens(a)).collect();
    let arg = |i: usize| {
        args.get(i).copied().ok_or_else(|| {
            QueryError::Eval(format!("too few arguments in call to function {name}()"))
        })
    };
    match name {
        "rate" => over_range(ev, arg(0)?, ts, false, |m, s| {
            extrapolated_rate(m, s, true, true)
        }),
        "increase" => over_range(ev, arg(0)?, ts, false, |m, s| {
            extrapolated_rate(m, s, true, false)
        }),
        "delta" => over_range(ev, arg(0)?, ts, false, |m, s| {
            extrapolated_rate(m, s, false, false)
        }),
        "irate" => over_range(ev, arg(0)?, ts, false, |_, s| instant_value(s, true)),
        "idelta" => over_range(ev, arg(0)?, ts, false, |_, s| instant_value(s, false)),
        "deriv" => over_range(ev, arg(0)?, ts, false, |_, s| {
            let &(t0, _) = s.first()?;
            (s.len() >= 2).then(|| linear_regression(s, t0).0)
        }),
        "predict_linear" => {
            let seconds = ev.eval_scalar(arg(1)?, ts)?;
            over_range(ev, arg(0)?, ts, false, |_, s| {
                (s.len() >= 2).then(|| {
                    let (slope, intercept) = linear_regression(s, ts);
                    slope * seconds + intercept
                })
            })
        }
        "changes" => over_range(ev, arg(0)?, ts, false, |_, s| {
            let changed = s.windows(2).filter(|w| {
                let (a, b) = (w[0].1, w[1].1);
                a != b && !(a.is_nan() && b.is_nan())
            });
            Some(changed.count() as f64)
        }),
        "resets" => over_range(ev, arg(0)?, ts, false, |_, s| {
            Some(s.windows(2).filter(|w| w[1].1 < w[0].1).count() as f64)
        }),
        "sum_over_time" => over_range(ev, arg(0)?, ts, false, |_, s| {
            let (sum, c) = s
                .iter()
                .fold((0.0, 0.0), |(sum, c), &(_, f)| kahan_inc(f, sum, c));
            Some(if sum.is_infinite() { sum } else { sum + c })
        }),
        "avg_over_time" => over_range(ev, arg(0)?, ts, false, |_, s| Some(mean(&values(s)))),
        "min_over_time" => over_range(ev, arg(0)?, ts, false, |_, s| {
            let (&(_, first), rest) = s.split_first()?;
            Some(
                rest.iter()
                    .fold(first, |m, &(_, f)| if f < m || m.is_nan() { f } else { m }),
            )
        }),
        "max_over_time" => over_range(ev, arg(0)?, ts, false, |_, s| {
            let (&(_, first), rest) = s.split_first()?;
            Some(
                rest.iter()
                    .fold(first, |m, &(_, f)| if f > m || m.is_nan() { f } else { m }),
            )
        }),
        "count_over_time" => over_range(ev, arg(0)?, ts, false, |_, s| Some(s.len() as f64)),
        // The one range function that keeps the metric name.
        "last_over_time" => over_range(ev, arg(0)?, ts, true, |_, s| s.last().map(|&(_, f)| f)),
        "present_over_time" => over_range(ev, arg(0)?, ts, false, |_, _| Some(1.0)),
        "quantile_over_time" => {
            let q = ev.eval_scalar(arg(0)?, ts)?;
            over_range(ev, arg(1)?, ts, false, |_, s| Some(quantile(q, &values(s))))
        }
        "stddev_over_time" => over_range(ev, arg(0)?, ts, false, |_, s| Some(variance(s).sqrt())),
        "stdvar_over_time" => over_range(ev, arg(0)?, ts, false, |_, s| Some(variance(s))),
        "absent_over_time" => {
            let expr = arg(0)?;
            let m = ev.eval_matrix(expr, ts)?;
            Ok(Value::Vector(absent(m.series.is_empty(), expr)))
        }
        "absent" => {
            let expr = arg(0)?;
            let v = ev.eval_vector(expr, ts)?;
            Ok(Value::Vector(absent(v.is_empty(), expr)))
        }
        "histogram_quantile" => {
            let q = ev.eval_scalar(arg(0)?, ts)?;
            let v = ev.eval_vector(arg(1)?, ts)?;
            checked(histogram_quantile(q, v))
        }
        "abs" => map(ev, arg(0)?, ts, f64::abs),
        "ceil" => map(ev, arg(0)?, ts, f64::ceil),
        "floor" => map(ev, arg(0)?, ts, f64::floor),
        "sqrt" => map(ev, arg(0)?, ts, f64::sqrt),
        "exp" => map(ev, arg(0)?, ts, f64::exp),
        "ln" => map(ev, arg(0)?, ts, f64::ln),
        "log2" => map(ev, arg(0)?, ts, f64::log2),
        "log10" => map(ev, arg(0)?, ts, f64::log10),
        "sin" => map(ev, arg(0)?, ts, f64::sin),
        "cos" => map(ev, arg(0)?, ts, f64::cos),
        "tan" => map(ev, arg(0)?, ts, f64::tan),
        "asin" => map(ev, arg(0)?, ts, f64::asin),
        "acos" => map(ev, arg(0)?, ts, f64::acos),
        "atan" => map(ev, arg(0)?, ts, f64::atan),
        "sinh" => map(ev, arg(0)?, ts, f64::sinh),
        "cosh" => map(ev, arg(0)?, ts, f64::cosh),
        "tanh" => map(ev, arg(0)?, ts, f64::tanh),
        "asinh" => map(ev, arg(0)?, ts, f64::asinh),
        "acosh" => map(ev, arg(0)?, ts, f64::acosh),
        "atanh" => map(ev, arg(0)?, ts, f64::atanh),
        "deg" => map(ev, arg(0)?, ts, |v| v * 180.0 / std::f64::consts::PI),
        "rad" => map(ev, arg(0)?, ts, |v| v * std::f64::consts::PI / 180.0),
        "sgn" => map(ev, arg(0)?, ts, |v| {
            if v < 0.0 {
                -1.0
            } else if v > 0.0 {
                1.0
            } else {
                v
            }
        }),
        "round" => {
            let v = ev.eval_vector(arg(0)?, ts)?;
            let to_nearest = match args.get(1) {
                Some(e) => ev.eval_scalar(e, ts)?,
                None => 1.0,
            };
            // As Prometheus: ties round up, and the inverse is used for accuracy.
            let inverse = 1.0 / to_nearest;
            checked(map_values(v, |f| (f * inverse + 0.5).floor() / inverse))
        }
        "clamp" => {
            let v = ev.eval_vector(arg(0)?, ts)?;
            let min = ev.eval_scalar(arg(1)?, ts)?;
            let max = ev.eval_scalar(arg(2)?, ts)?;
            checked(clamp(v, min, max))
        }
        "clamp_min" => {
            let v = ev.eval_vector(arg(0)?, ts)?;
            let min = ev.eval_scalar(arg(1)?, ts)?;
            checked(clamp(v, min, f64::INFINITY))
        }
        "clamp_max" => {
            let v = ev.eval_vector(arg(0)?, ts)?;
            let max = ev.eval_scalar(arg(1)?, ts)?;
            checked(clamp(v, f64::NEG_INFINITY, max))
        }
        "scalar" => {
            let v = ev.eval_vector(arg(0)?, ts)?;
            Ok(Value::Scalar(match v.as_slice() {
                [only] => only.value,
                _ => f64::NAN,
            }))
        }
        "vector" => {
            let value = ev.eval_scalar(arg(0)?, ts)?;
            Ok(Value::Vector(vec![Sample {
                labels: Labels::new(),
                value,
            }]))
        }
        "time" => Ok(Value::Scalar(ts as f64 / 1000.0)),
        "pi" => Ok(Value::Scalar(std::f64::consts::PI)),
        "sort" | "sort_desc" => {
            let mut v = ev.eval_vector(arg(0)?, ts)?;
            let descending = name == "sort_desc";
            // NaN last either way.
            v.sort_by(|a, b| match (a.value.is_nan(), b.value.is_nan()) {
                (false, false) if descending => nan_first(b.value, a.value),
                (false, false) => nan_first(a.value, b.value),
                _ => nan_first(b.value, a.value),
            });
            Ok(Value::Vector(v))
        }
        "label_replace" => {
            let v = ev.eval_vector(arg(0)?, ts)?;
            let dst = ev.eval_string(arg(1)?, ts)?;
            let replacement = ev.eval_string(arg(2)?, ts)?;
            let src = ev.eval_string(arg(3)?, ts)?;
            let regex = ev.eval_string(arg(4)?, ts)?;
            checked(label_replace(v, &dst, &replacement, &src, &regex)?)
        }
        "label_join" => {
            let v = ev.eval_vector(arg(0)?, ts)?;
            let dst = ev.eval_string(arg(1)?, ts)?;
            let separator = ev.eval_string(arg(2)?, ts)?;
            let mut sources = Vec::new();
            for e in args.iter().skip(3) {
                sources.push(ev.eval_string(e, ts)?);
            }
            checked(label_join(v, &dst, &separator, &sources)?)
        }
        other => Err(QueryError::Unsupported(format!("the function {other}()"))),
    }
}

fn unwrap_parens(mut e: &Expr) -> &Expr {
    while let Expr::Paren(p) = e {
        e = &p.expr;
    }
    e
}

fn checked(v: Vec<Sample>) -> Result<Value, QueryError> {
    ensure_unique(&v)?;
    Ok(Value::Vector(v))
}

fn values(s: &[(i64, f64)]) -> Vec<f64> {
    s.iter().map(|&(_, f)| f).collect()
}

/// A range-vector function: `f` of each series' window, the series left out where `f` has
/// no value; the metric name dropped unless `keep_name`.
fn over_range(
    ev: &mut Evaluator,
    expr: &Expr,
    ts: i64,
    keep_name: bool,
    f: impl Fn(&Matrix, &[(i64, f64)]) -> Option<f64>,
) -> Result<Value, QueryError> {
    let m = ev.eval_matrix(expr, ts)?;
    let out = m
        .series
        .iter()
        .filter_map(|s| {
            let value = f(&m, &s.samples)?;
            let labels = if keep_name {
                s.labels.clone()
            } else {
                without_name(s.labels.clone())
            };
            Some(Sample { labels, value })
        })
        .collect();
    checked(out)
}

/// An instant-vector function of each value; the metric name dropped.
fn map(
    ev: &mut Evaluator,
    expr: &Expr,
    ts: i64,
    f: impl Fn(f64) -> f64,
) -> Result<Value, QueryError> {
    let v = ev.eval_vector(expr, ts)?;
    checked(map_values(v, f))
}

fn map_values(v: Vec<Sample>, f: impl Fn(f64) -> f64) -> Vec<Sample> {
    v.into_iter()
        .map(|s| Sample {
            labels: without_name(s.labels),
            value: f(s.value),
        })
        .collect()
}

/// `rate`, `increase` and `delta`: the change over the window's samples (counter resets
/// added back for counters), extrapolated toward the window's edges as Prometheus'
/// `extrapolatedRate` does, per second for a rate. Needs two samples.
fn extrapolated_rate(m: &Matrix, s: &[(i64, f64)], is_counter: bool, is_rate: bool) -> Option<f64> {
    if s.len() < 2 {
        return None;
    }
    let (&(first_t, first_v), &(last_t, last_v)) = (s.first()?, s.last()?);
    let range_end = m.end_ms;
    let range_start = range_end.saturating_sub(m.range_ms);
    let mut result = last_v - first_v;
    if is_counter {
        // A drop is a reset: the counter restarted from zero, so what it had counted
        // before the drop is added back.
        for w in s.windows(2) {
            if w[1].1 < w[0].1 {
                result += w[0].1;
            }
        }
    }
    let mut to_start = first_t.saturating_sub(range_start) as f64 / 1000.0;
    let mut to_end = range_end.saturating_sub(last_t) as f64 / 1000.0;
    let sampled = last_t.saturating_sub(first_t) as f64 / 1000.0;
    let average_gap = sampled / (s.len() - 1) as f64;
    // A sample within 110% of the average gap of an edge stands for the edge: the rate is
    // extrapolated all the way to it. Further away, the series is taken to start (end)
    // half an average gap beyond its first (last) sample.
    let threshold = average_gap * 1.1;
    if to_start >= threshold {
        to_start = average_gap / 2.0;
    }
    if is_counter {
        // A counter cannot go below zero: extrapolate at most to where it would be zero.
        let to_zero = if result > 0.0 && first_v >= 0.0 {
            sampled * (first_v / result)
        } else {
            to_start
        };
        if to_zero < to_start {
            to_start = to_zero;
        }
    }
    if to_end >= threshold {
        to_end = average_gap / 2.0;
    }
    let mut factor = (sampled + to_start + to_end) / sampled;
    if is_rate {
        factor /= m.range_ms as f64 / 1000.0;
    }
    Some(result * factor)
}

/// `irate` and `idelta`: from the last two samples only. For `irate`, a drop is a reset
/// and the later value is the increase.
fn instant_value(s: &[(i64, f64)], is_rate: bool) -> Option<f64> {
    let [.., (t0, v0), (t1, v1)] = *s else {
        return None;
    };
    let interval = t1.saturating_sub(t0);
    if interval == 0 {
        return None;
    }
    let mut result = if is_rate && v1 < v0 { v1 } else { v1 - v0 };
    if is_rate {
        result /= interval as f64 / 1000.0;
    }
    Some(result)
}

/// Least-squares slope (per second) and the intercept at `intercept_ms`, as Prometheus'
/// `linearRegression`.
fn linear_regression(s: &[(i64, f64)], intercept_ms: i64) -> (f64, f64) {
    let Some(&(_, init_y)) = s.first() else {
        return (f64::NAN, f64::NAN);
    };
    let mut n = 0.0;
    let (mut sum_x, mut c_x, mut sum_y, mut c_y) = (0.0, 0.0, 0.0, 0.0);
    let (mut sum_xy, mut c_xy, mut sum_x2, mut c_x2) = (0.0, 0.0, 0.0, 0.0);
    let mut const_y = true;
    for (i, &(t, y)) in s.iter().enumerate() {
        if const_y && i > 0 && y != init_y {
            const_y = false;
        }
        n += 1.0;
        let x = t.saturating_sub(intercept_ms) as f64 / 1e3;
        (sum_x, c_x) = kahan_inc(x, sum_x, c_x);
        (sum_y, c_y) = kahan_inc(y, sum_y, c_y);
        (sum_xy, c_xy) = kahan_inc(x * y, sum_xy, c_xy);
        (sum_x2, c_x2) = kahan_inc(x * x, sum_x2, c_x2);
    }
    if const_y {
        if init_y.is_infinite() {
            return (f64::NAN, f64::NAN);
        }
        return (0.0, init_y);
    }
    let (sum_x, sum_y, sum_xy, sum_x2) = (sum_x + c_x, sum_y + c_y, sum_xy + c_xy, sum_x2 + c_x2);
    let cov_xy = sum_xy - sum_x * sum_y / n;
    let var_x = sum_x2 - sum_x * sum_x / n;
    let slope = cov_xy / var_x;
    (slope, sum_y / n - slope * sum_x / n)
}

/// The population variance of a window's values (Welford's method with compensated sums,
/// as Prometheus' `varianceOverTime`).
fn variance(s: &[(i64, f64)]) -> f64 {
    let (mut count, mut avg, mut c_avg, mut aux, mut c_aux) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(_, f) in s {
        count += 1.0;
        let delta = f - (avg + c_avg);
        (avg, c_avg) = kahan_inc(delta / count, avg, c_avg);
        (aux, c_aux) = kahan_inc(delta * (f - (avg + c_avg)), aux, c_aux);
    }
    (aux + c_aux) / count
}

/// Go's `math.Max`: +Inf wins over NaN, NaN over numbers, +0 over -0.
fn go_max(a: f64, b: f64) -> f64 {
    if a == f64::INFINITY || b == f64::INFINITY {
        f64::INFINITY
    } else if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == 0.0 && b == 0.0 {
        if a.is_sign_negative() { b } else { a }
    } else if a > b {
        a
    } else {
        b
    }
}

/// Go's `math.Min`: -Inf wins over NaN, NaN over numbers, -0 over +0.
fn go_min(a: f64, b: f64) -> f64 {
    if a == f64::NEG_INFINITY || b == f64::NEG_INFINITY {
        f64::NEG_INFINITY
    } else if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == 0.0 && b == 0.0 {
        if a.is_sign_negative() { a } else { b }
    } else if a < b {
        a
    } else {
        b
    }
}

/// `clamp`: nothing when `max < min`, else each value within [min, max], name dropped.
fn clamp(v: Vec<Sample>, min: f64, max: f64) -> Vec<Sample> {
    if max < min {
        return Vec::new();
    }
    map_values(v, |f| go_max(min, go_min(max, f)))
}

/// `absent` and `absent_over_time`: one element of value 1 when the argument had none,
/// labelled by the argument's equality matchers (a label matched twice, or otherwise, is
/// left out, as Prometheus does).
fn absent(is_empty: bool, expr: &Expr) -> Vec<Sample> {
    if !is_empty {
        return Vec::new();
    }
    let matchers = match expr {
        Expr::VectorSelector(vs) => &vs.matchers.matchers,
        Expr::MatrixSelector(ms) => &ms.vs.matchers.matchers,
        _ => {
            return vec![Sample {
                labels: Labels::new(),
                value: 1.0,
            }];
        }
    };
    let mut labels = Labels::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for m in matchers {
        if m.name == METRIC_NAME {
            continue;
        }
        if m.op == MatchOp::Equal && seen.insert(&m.name) {
            if m.value.is_empty() {
                labels.remove(&m.name);
            } else {
                labels.insert(m.name.clone(), m.value.clone());
            }
        } else {
            labels.remove(&m.name);
        }
    }
    vec![Sample { labels, value: 1.0 }]
}

/// `histogram_quantile` over classic histograms: the buckets of each series (all labels
/// but `le` and the name) and the quantile by Prometheus' `bucketQuantile`. Elements
/// without a numeric `le` are ignored.
fn histogram_quantile(q: f64, v: Vec<Sample>) -> Vec<Sample> {
    // Go's ParseFloat and Rust's both read "+Inf", "1e3", "NaN".
    let upper = |s: &Sample| {
        s.labels
            .get(BUCKET_LABEL)
            .and_then(|le| le.parse::<f64>().ok())
    };
    let buckets: Vec<Sample> = v.into_iter().filter(|s| upper(s).is_some()).collect();
    let groups = group(buckets, true, &[BUCKET_LABEL.to_string()], |s| {
        (upper(&s).unwrap_or(f64::NAN), s.value)
    });
    groups
        .into_iter()
        .map(|(labels, buckets)| Sample {
            labels,
            value: bucket_quantile(q, buckets),
        })
        .collect()
}

/// The `q`-quantile of cumulative buckets `(upper bound, count)`, interpolated linearly
/// within the bucket it falls in (from 0 for the lowest bucket if its bound is positive).
/// NaN without a +Inf bucket, with fewer than two buckets or no observations; -Inf for
/// q < 0, +Inf for q > 1; the second-highest bound if it falls in the +Inf bucket.
fn bucket_quantile(q: f64, mut buckets: Vec<(f64, f64)>) -> f64 {
    if q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    buckets.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
    if buckets
        .last()
        .is_none_or(|&(upper, _)| upper != f64::INFINITY)
    {
        return f64::NAN;
    }
    // Buckets with the same bound are one bucket.
    let mut merged: Vec<(f64, f64)> = Vec::with_capacity(buckets.len());
    for (upper, count) in buckets {
        match merged.last_mut() {
            Some(last) if last.0 == upper => last.1 += count,
            _ => merged.push((upper, count)),
        }
    }
    let mut buckets = merged;
    // Counts that differ by float noise (relative 1e-12) are equal; then a count lower
    // than a lower bucket's is raised to it (Prometheus' correctPrecisionErrors and
    // ensureMonotonic).
    if let Some(&(_, first)) = buckets.first() {
        let mut prev = first;
        for b in buckets.iter_mut().skip(1) {
            let delta = (b.1 - prev).abs();
            if delta == 0.0 {
                continue;
            }
            if delta / b.1 <= 1e-12 {
                b.1 = prev;
            } else {
                prev = b.1;
            }
        }
        let mut max = first;
        for b in buckets.iter_mut().skip(1) {
            if b.1 > max {
                max = b.1;
            } else if b.1 < max {
                b.1 = max;
            }
        }
    }
    let n = buckets.len();
    if n < 2 {
        return f64::NAN;
    }
    let observations = buckets[n - 1].1;
    if observations == 0.0 {
        return f64::NAN;
    }
    let mut rank = q * observations;
    let b = buckets[..n - 1]
        .iter()
        .position(|&(_, count)| count >= rank)
        .unwrap_or(n - 1);
    if b == n - 1 {
        return buckets[n - 2].0;
    }
    if b == 0 && buckets[0].0 <= 0.0 {
        return buckets[0].0;
    }
    let (bucket_end, mut count) = buckets[b];
    let mut bucket_start = 0.0;
    if b > 0 {
        bucket_start = buckets[b - 1].0;
        count -= buckets[b - 1].1;
        rank -= buckets[b - 1].1;
    }
    bucket_start + (bucket_end - bucket_start) * (rank / count)
}

/// A label name Prometheus 3 accepts (any non-empty UTF-8).
fn check_label_name(function: &str, what: &str, name: &str) -> Result<(), QueryError> {
    if name.is_empty() {
        return Err(QueryError::Eval(format!(
            "invalid {what} label name in {function}(): \"\""
        )));
    }
    Ok(())
}

/// Sets `dst` to `value`; an empty value removes it.
fn set_label(labels: &mut Labels, dst: &str, value: String) {
    if value.is_empty() {
        labels.remove(dst);
    } else {
        labels.insert(dst.to_string(), value);
    }
}

/// `label_replace`: where `regex` matches all of `src`'s value, `dst` becomes `replacement`
/// with `$1`, `${name}` expanded (Go's and the regex crate's template syntax agree).
fn label_replace(
    v: Vec<Sample>,
    dst: &str,
    replacement: &str,
    src: &str,
    regex: &str,
) -> Result<Vec<Sample>, QueryError> {
    let re = Regex::new(&format!("^(?s:{regex})$")).map_err(|_| {
        QueryError::Eval(format!(
            "invalid regular expression in label_replace(): {regex}"
        ))
    })?;
    check_label_name("label_replace", "destination", dst)?;
    Ok(v.into_iter()
        .map(|mut s| {
            let value = s.labels.get(src).cloned().unwrap_or_default();
            if let Some(captures) = re.captures(&value) {
                let mut replaced = String::new();
                captures.expand(replacement, &mut replaced);
                set_label(&mut s.labels, dst, replaced);
            }
            s
        })
        .collect())
}

/// `label_join`: `dst` becomes the `sources`' values joined by `separator`.
fn label_join(
    v: Vec<Sample>,
    dst: &str,
    separator: &str,
    sources: &[String],
) -> Result<Vec<Sample>, QueryError> {
    check_label_name("label_join", "destination", dst)?;
    for src in sources {
        check_label_name("label_join", "source", src)?;
    }
    Ok(v.into_iter()
        .map(|mut s| {
            let joined: Vec<&str> = sources
                .iter()
                .map(|src| s.labels.get(src).map_or("", String::as_str))
                .collect();
            let joined = joined.join(separator);
            set_label(&mut s.labels, dst, joined);
            s
        })
        .collect())
}
