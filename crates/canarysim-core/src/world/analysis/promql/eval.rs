//! The evaluator: a walk over `promql-parser`'s AST at one instant, following Prometheus
//! 3's engine (`promql/engine.go`) step by step where results could differ: which samples
//! a selector sees, which labels survive an operation, how vectors match, and the order of
//! a result's elements.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use promql_parser::label::{MatchOp, Matcher};
use promql_parser::parser::token::{
    T_ADD, T_ATAN2, T_AVG, T_BOTTOMK, T_COUNT, T_COUNT_VALUES, T_DIV, T_EQLC, T_GROUP, T_GTE,
    T_GTR, T_LAND, T_LOR, T_LSS, T_LTE, T_LUNLESS, T_MAX, T_MIN, T_MOD, T_MUL, T_NEQ, T_POW,
    T_QUANTILE, T_STDDEV, T_STDVAR, T_SUB, T_SUM, T_TOPK, TokenId,
};
use promql_parser::parser::{
    AggregateExpr, AtModifier, BinModifier, BinaryExpr, Expr, LabelModifier, MatrixSelector,
    Offset, SubqueryExpr, VectorMatchCardinality, VectorSelector,
};
use regex::Regex;

use super::{Labels, QueryError, QueryValue, Series, SeriesSource, functions, is_stale_marker};

/// The label holding a series' metric name.
pub(super) const METRIC_NAME: &str = "__name__";

/// How far back an instant selector looks for a series' latest sample (Prometheus'
/// `--query.lookback-delta` default).
const LOOKBACK_MS: i64 = 5 * 60 * 1000;

/// A subquery's step when it names none: Prometheus uses the global evaluation interval,
/// whose default is one minute.
const DEFAULT_SUBQUERY_STEP_MS: i64 = 60 * 1000;

/// Prometheus refuses a subquery with more steps than this per series.
const MAX_SUBQUERY_STEPS: i64 = 11_000;

/// One element of an instant vector.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Sample {
    pub(super) labels: Labels,
    pub(super) value: f64,
}

/// One series of a range vector: the samples in the window, oldest first, never empty.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RangeSeries {
    pub(super) labels: Labels,
    pub(super) samples: Vec<(i64, f64)>,
}

/// A range vector and the window `(end - range, end]` it was selected over, which `rate`
/// and its family extrapolate to.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Matrix {
    pub(super) series: Vec<RangeSeries>,
    pub(super) end_ms: i64,
    pub(super) range_ms: i64,
}

/// A value during evaluation.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Value {
    Scalar(f64),
    String(String),
    Vector(Vec<Sample>),
    Matrix(Matrix),
}

impl Value {
    fn kind(&self) -> &'static str {
        match self {
            Value::Scalar(_) => "scalar",
            Value::String(_) => "string",
            Value::Vector(_) => "instant vector",
            Value::Matrix(_) => "range vector",
        }
    }
}

/// Evaluates `expr` at `at_ms` into the interface's value.
pub(super) fn instant_query(
    source: &dyn SeriesSource,
    expr: &Expr,
    at_ms: i64,
) -> Result<QueryValue, QueryError> {
    let mut evaluator = Evaluator {
        source,
        query_ms: at_ms,
        fetched: HashMap::new(),
    };
    match evaluator.eval(expr, at_ms)? {
        Value::Scalar(v) => Ok(QueryValue::Scalar(v)),
        Value::String(s) => Ok(QueryValue::String(s)),
        Value::Vector(v) => Ok(QueryValue::Vector(
            v.into_iter().map(|s| (s.labels, s.value)).collect(),
        )),
        Value::Matrix(_) => Err(QueryError::Unsupported(
            "a range-vector result (Argo's Prometheus provider takes a scalar or an instant \
             vector: apply a function such as rate() or last_over_time() to the range)"
                .to_string(),
        )),
    }
}

/// The evaluation of one query.
pub(super) struct Evaluator<'a> {
    source: &'a dyn SeriesSource,
    /// The query's time: what `@ start()` and `@ end()` mean in an instant query.
    query_ms: i64,
    /// Each metric's series, asked of the source once per query.
    fetched: HashMap<String, Vec<Series>>,
}

impl Evaluator<'_> {
    /// The value of `expr` at `ts` (ms).
    pub(super) fn eval(&mut self, expr: &Expr, ts: i64) -> Result<Value, QueryError> {
        match expr {
            Expr::NumberLiteral(n) => Ok(Value::Scalar(n.val)),
            Expr::StringLiteral(s) => Ok(Value::String(s.val.clone())),
            Expr::Paren(p) => self.eval(&p.expr, ts),
            Expr::Unary(u) => match self.eval(&u.expr, ts)? {
                Value::Scalar(v) => Ok(Value::Scalar(-v)),
                Value::Vector(v) => {
                    let out: Vec<Sample> = v
                        .into_iter()
                        .map(|s| Sample {
                            labels: without_name(s.labels),
                            value: -s.value,
                        })
                        .collect();
                    ensure_unique(&out)?;
                    Ok(Value::Vector(out))
                }
                other => Err(QueryError::Eval(format!(
                    "unary expression only allowed on expressions of type scalar or instant \
                     vector, got {}",
                    other.kind()
                ))),
            },
            Expr::VectorSelector(vs) => Ok(Value::Vector(self.select_instant(vs, ts)?)),
            Expr::MatrixSelector(ms) => Ok(Value::Matrix(self.select_range(ms, ts)?)),
            Expr::Subquery(sq) => Ok(Value::Matrix(self.subquery(sq, ts)?)),
            Expr::Call(call) => functions::call(self, call, ts),
            Expr::Aggregate(a) => self.aggregate(a, ts),
            Expr::Binary(b) => self.binary(b, ts),
            Expr::Extension(_) => Err(QueryError::Unsupported(
                "an extension expression".to_string(),
            )),
        }
    }

    pub(super) fn eval_scalar(&mut self, expr: &Expr, ts: i64) -> Result<f64, QueryError> {
        match self.eval(expr, ts)? {
            Value::Scalar(v) => Ok(v),
            other => Err(expected("scalar", &other)),
        }
    }

    pub(super) fn eval_string(&mut self, expr: &Expr, ts: i64) -> Result<String, QueryError> {
        match self.eval(expr, ts)? {
            Value::String(s) => Ok(s),
            other => Err(expected("string", &other)),
        }
    }

    pub(super) fn eval_vector(&mut self, expr: &Expr, ts: i64) -> Result<Vec<Sample>, QueryError> {
        match self.eval(expr, ts)? {
            Value::Vector(v) => Ok(v),
            other => Err(expected("instant vector", &other)),
        }
    }

    pub(super) fn eval_matrix(&mut self, expr: &Expr, ts: i64) -> Result<Matrix, QueryError> {
        match self.eval(expr, ts)? {
            Value::Matrix(m) => Ok(m),
            other => Err(expected("range vector", &other)),
        }
    }

    // --- Selectors -------------------------------------------------------------------

    /// The series `vs` selects, in the source's order.
    fn select(&mut self, vs: &VectorSelector) -> Result<Vec<&Series>, QueryError> {
        let (name, matchers) = compile_selector(vs)?;
        let source = self.source;
        let series = self.fetched.entry(name).or_insert_with_key(|name| {
            let mut series = source.series(name);
            for s in &mut series {
                // Prometheus has no empty label values: an empty value is an absent label.
                s.labels.retain(|_, v| !v.is_empty());
                if !s.samples.is_sorted_by_key(|&(t, _)| t) {
                    s.samples.sort_by_key(|&(t, _)| t);
                }
            }
            series
        });
        Ok(series
            .iter()
            .filter(|s| matchers.iter().all(|m| m.matches(&s.labels)))
            .collect())
    }

    /// An instant selector: each series' latest sample in `(t - 5m, t]`, unless that sample
    /// is a staleness marker; sorted by labels, as Prometheus' storage returns series.
    fn select_instant(&mut self, vs: &VectorSelector, ts: i64) -> Result<Vec<Sample>, QueryError> {
        let t = self.reference_time(&vs.at, &vs.offset, ts);
        let mut out: Vec<Sample> = self
            .select(vs)?
            .into_iter()
            .filter_map(|s| {
                let value = latest(&s.samples, t)?;
                Some(Sample {
                    labels: s.labels.clone(),
                    value,
                })
            })
            .collect();
        out.sort_by(|a, b| a.labels.cmp(&b.labels));
        Ok(out)
    }

    /// A range selector: each series' samples in `(t - range, t]` without staleness
    /// markers; series with none are left out.
    fn select_range(&mut self, ms: &MatrixSelector, ts: i64) -> Result<Matrix, QueryError> {
        let end = self.reference_time(&ms.vs.at, &ms.vs.offset, ts);
        let range = duration_ms(ms.range);
        let start = end.saturating_sub(range);
        let mut series: Vec<RangeSeries> = self
            .select(&ms.vs)?
            .into_iter()
            .filter_map(|s| {
                let from = s.samples.partition_point(|&(t, _)| t <= start);
                let to = s.samples.partition_point(|&(t, _)| t <= end);
                let samples: Vec<(i64, f64)> = s
                    .samples
                    .get(from..to)
                    .unwrap_or_default()
                    .iter()
                    .copied()
                    .filter(|&(_, v)| !is_stale_marker(v))
                    .collect();
                (!samples.is_empty()).then(|| RangeSeries {
                    labels: s.labels.clone(),
                    samples,
                })
            })
            .collect();
        series.sort_by(|a, b| a.labels.cmp(&b.labels));
        Ok(Matrix {
            series,
            end_ms: end,
            range_ms: range,
        })
    }

    /// A subquery: the inner expression evaluated at every multiple of the step in
    /// `(t - range, t]`, each result series becoming a range series.
    fn subquery(&mut self, sq: &SubqueryExpr, ts: i64) -> Result<Matrix, QueryError> {
        let end = self.reference_time(&sq.at, &sq.offset, ts);
        let range = duration_ms(sq.range);
        let step = sq
            .step
            .map(duration_ms)
            .filter(|&s| s > 0)
            .unwrap_or(DEFAULT_SUBQUERY_STEP_MS);
        let start = end.saturating_sub(range);
        // The first multiple of the step after the start (Go's division truncates toward
        // zero, as Rust's does).
        let mut t = step.saturating_mul(start / step);
        if t <= start {
            t = t.saturating_add(step);
        }
        if end.saturating_sub(t) / step >= MAX_SUBQUERY_STEPS {
            return Err(QueryError::Eval(format!(
                "exceeded maximum resolution of {MAX_SUBQUERY_STEPS} points per timeseries in \
                 subquery; use a larger step"
            )));
        }
        let mut series: Vec<RangeSeries> = Vec::new();
        let mut index: HashMap<Labels, usize> = HashMap::new();
        while t <= end {
            let samples = match self.eval(&sq.expr, t)? {
                Value::Vector(v) => v,
                Value::Scalar(v) => vec![Sample {
                    labels: Labels::new(),
                    value: v,
                }],
                other => return Err(expected("instant vector in subquery", &other)),
            };
            for s in samples {
                let i = match index.get(&s.labels) {
                    Some(&i) => i,
                    None => {
                        index.insert(s.labels.clone(), series.len());
                        series.push(RangeSeries {
                            labels: s.labels,
                            samples: Vec::new(),
                        });
                        series.len() - 1
                    }
                };
                series[i].samples.push((t, s.value));
            }
            t = t.saturating_add(step);
        }
        series.sort_by(|a, b| a.labels.cmp(&b.labels));
        Ok(Matrix {
            series,
            end_ms: end,
            range_ms: range,
        })
    }

    /// The time a selector reads at: the evaluation time or its `@`, less its `offset`.
    fn reference_time(&self, at: &Option<AtModifier>, offset: &Option<Offset>, ts: i64) -> i64 {
        let base = match at {
            None => ts,
            // In an instant query, start() and end() are both the query's time.
            Some(AtModifier::Start | AtModifier::End) => self.query_ms,
            Some(AtModifier::At(time)) => system_time_ms(*time),
        };
        match offset {
            None => base,
            Some(Offset::Pos(d)) => base.saturating_sub(duration_ms(*d)),
            Some(Offset::Neg(d)) => base.saturating_add(duration_ms(*d)),
        }
    }

    // --- Aggregations ----------------------------------------------------------------

    fn aggregate(&mut self, a: &AggregateExpr, ts: i64) -> Result<Value, QueryError> {
        let op = a.op.id();
        let param = match &a.param {
            Some(p) => Some(self.eval(p, ts)?),
            None => None,
        };
        let input = self.eval_vector(&a.expr, ts)?;
        let (without, mut grouping) = match &a.modifier {
            None => (false, Vec::new()),
            Some(LabelModifier::Include(l)) => (false, l.labels.clone()),
            Some(LabelModifier::Exclude(l)) => (true, l.labels.clone()),
        };
        let scalar_param = |name: &str| match &param {
            Some(Value::Scalar(v)) => Ok(*v),
            Some(other) => Err(expected(&format!("scalar parameter of {name}"), other)),
            None => Err(QueryError::Eval(format!("{name} needs a parameter"))),
        };
        match op {
            T_TOPK | T_BOTTOMK => {
                let k = scalar_param(if op == T_TOPK { "topk" } else { "bottomk" })?;
                Ok(Value::Vector(top_k(
                    op == T_TOPK,
                    k,
                    input,
                    without,
                    &grouping,
                )?))
            }
            T_COUNT_VALUES => {
                let label = match &param {
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => return Err(expected("string parameter of count_values", other)),
                    None => return Err(QueryError::Eval("count_values needs a label".into())),
                };
                if label.is_empty() {
                    return Err(QueryError::Eval("invalid label name \"\"".to_string()));
                }
                if !without {
                    grouping.push(label.clone());
                }
                Ok(Value::Vector(count_values(
                    &label, input, without, &grouping,
                )))
            }
            T_SUM | T_AVG | T_MIN | T_MAX | T_COUNT | T_GROUP | T_STDDEV | T_STDVAR
            | T_QUANTILE => {
                let q = if op == T_QUANTILE {
                    scalar_param("quantile")?
                } else {
                    f64::NAN
                };
                let groups = group(input, without, &grouping, |s| s.value);
                Ok(Value::Vector(
                    groups
                        .into_iter()
                        .map(|(labels, values)| Sample {
                            labels,
                            value: aggregate_values(op, &values, q),
                        })
                        .collect(),
                ))
            }
            _ => Err(QueryError::Unsupported(format!("the {} aggregation", a.op))),
        }
    }

    // --- Binary operators ------------------------------------------------------------

    fn binary(&mut self, b: &BinaryExpr, ts: i64) -> Result<Value, QueryError> {
        let op = b.op.id();
        let modifier = b.modifier.clone().unwrap_or_default();
        if modifier.fill_values.lhs.is_some() || modifier.fill_values.rhs.is_some() {
            return Err(QueryError::Unsupported(
                "the fill, fill_left and fill_right modifiers".to_string(),
            ));
        }
        let lhs = self.eval(&b.lhs, ts)?;
        let rhs = self.eval(&b.rhs, ts)?;
        let return_bool = modifier.return_bool;
        let out = match (lhs, rhs) {
            (Value::Scalar(l), Value::Scalar(r)) => {
                return Ok(Value::Scalar(scalar_binop(op, l, r)?));
            }
            (Value::Vector(l), Value::Vector(r)) if b.op.is_set_operator() => {
                set_binop(op, l, r, &modifier)?
            }
            (Value::Vector(l), Value::Vector(r)) => vector_binop(op, l, r, &modifier)?,
            (Value::Vector(l), Value::Scalar(r)) => {
                vector_scalar_binop(op, l, r, false, return_bool)?
            }
            (Value::Scalar(l), Value::Vector(r)) => {
                vector_scalar_binop(op, r, l, true, return_bool)?
            }
            (l, r) => {
                return Err(QueryError::Eval(format!(
                    "binary expression must contain only scalar and instant vector types, got \
                     {} {} {}",
                    l.kind(),
                    b.op,
                    r.kind()
                )));
            }
        };
        ensure_unique(&out)?;
        Ok(Value::Vector(out))
    }
}

// --- Selectors -------------------------------------------------------------------------

/// A label matcher with its regex compiled as Prometheus compiles it.
enum LabelMatcher {
    Equal(String, String),
    NotEqual(String, String),
    Regex(String, Regex),
    NotRegex(String, Regex),
}

impl LabelMatcher {
    fn new(m: &Matcher) -> LabelMatcher {
        // Prometheus anchors a matcher's regex at both ends and lets `.` match a newline:
        // `^(?s:re)$`. promql-parser compiled it as `^(?:re)$` (and, where Go's syntax
        // differs from Rust's, fixed it up); that is kept if this form does not compile.
        let compile = |parsed: &Regex| {
            Regex::new(&format!("^(?s:{})$", m.value)).unwrap_or_else(|_| parsed.clone())
        };
        match &m.op {
            MatchOp::Equal => LabelMatcher::Equal(m.name.clone(), m.value.clone()),
            MatchOp::NotEqual => LabelMatcher::NotEqual(m.name.clone(), m.value.clone()),
            MatchOp::Re(re) => LabelMatcher::Regex(m.name.clone(), compile(re)),
            MatchOp::NotRe(re) => LabelMatcher::NotRegex(m.name.clone(), compile(re)),
        }
    }

    /// Whether a series with `labels` matches: a missing label matches as the empty string.
    fn matches(&self, labels: &Labels) -> bool {
        let value = |name: &String| labels.get(name).map_or("", String::as_str);
        match self {
            LabelMatcher::Equal(name, want) => value(name) == want,
            LabelMatcher::NotEqual(name, want) => value(name) != want,
            LabelMatcher::Regex(name, re) => re.is_match(value(name)),
            LabelMatcher::NotRegex(name, re) => !re.is_match(value(name)),
        }
    }
}

/// The metric a selector reads and its matchers.
fn compile_selector(vs: &VectorSelector) -> Result<(String, Vec<LabelMatcher>), QueryError> {
    if !vs.matchers.or_matchers.is_empty() {
        return Err(QueryError::Unsupported(
            "`or` between label matchers (promql-parser's extension, not Prometheus syntax)"
                .to_string(),
        ));
    }
    let name = match &vs.name {
        Some(name) => name.clone(),
        None => vs
            .matchers
            .matchers
            .iter()
            .find(|m| m.name == METRIC_NAME && m.op == MatchOp::Equal)
            .map(|m| m.value.clone())
            .ok_or_else(|| {
                QueryError::Unsupported(format!(
                    "a selector without a fixed metric name ({vs}): the built-in Prometheus \
                     finds series by name"
                ))
            })?,
    };
    let matchers = vs.matchers.matchers.iter().map(LabelMatcher::new).collect();
    Ok((name, matchers))
}

/// The value of the latest sample in `(t - lookback, t]`, unless it marks the series stale.
fn latest(samples: &[(i64, f64)], t: i64) -> Option<f64> {
    let after = samples.partition_point(|&(st, _)| st <= t);
    let &(st, v) = samples.get(after.checked_sub(1)?)?;
    (st > t.saturating_sub(LOOKBACK_MS) && !is_stale_marker(v)).then_some(v)
}

pub(super) fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// `@ <t>`'s time in ms since the (scenario's) epoch; before it is negative.
fn system_time_ms(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => duration_ms(d),
        Err(before) => duration_ms(before.duration()).saturating_neg(),
    }
}

// --- Labels ----------------------------------------------------------------------------

pub(super) fn without_name(mut labels: Labels) -> Labels {
    labels.remove(METRIC_NAME);
    labels
}

/// Prometheus' "vector cannot contain metrics with the same labelset": after an operation
/// drops metric names, two series may have become one.
pub(super) fn ensure_unique(v: &[Sample]) -> Result<(), QueryError> {
    let mut seen = HashSet::with_capacity(v.len());
    if v.iter().all(|s| seen.insert(&s.labels)) {
        Ok(())
    } else {
        Err(QueryError::Eval(
            "vector cannot contain metrics with the same labelset".to_string(),
        ))
    }
}

/// Labels as Prometheus prints them in messages: `{a="1", b="2"}`.
pub(super) fn format_labels(labels: &Labels) -> String {
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{{{}}}", inner.join(", "))
}

fn expected(what: &str, got: &Value) -> QueryError {
    QueryError::Eval(format!("expected {what}, got {}", got.kind()))
}

// --- Aggregations ----------------------------------------------------------------------

/// The labels of the group a series with `labels` falls in.
fn group_labels(labels: &Labels, without: bool, grouping: &[String]) -> Labels {
    labels
        .iter()
        .filter(|(k, _)| {
            if without {
                k.as_str() != METRIC_NAME && !grouping.contains(k)
            } else {
                grouping.contains(k)
            }
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The groups of `input` in the order their first members come, with what `pick` takes
/// from each member.
pub(super) fn group<T>(
    input: Vec<Sample>,
    without: bool,
    grouping: &[String],
    pick: impl Fn(Sample) -> T,
) -> Vec<(Labels, Vec<T>)> {
    let mut groups: Vec<(Labels, Vec<T>)> = Vec::new();
    let mut index: HashMap<Labels, usize> = HashMap::new();
    for s in input {
        let key = group_labels(&s.labels, without, grouping);
        let i = match index.get(&key) {
            Some(&i) => i,
            None => {
                index.insert(key.clone(), groups.len());
                groups.push((key, Vec::new()));
                groups.len() - 1
            }
        };
        groups[i].1.push(pick(s));
    }
    groups
}

/// Neumaier's variant of Kahan summation, as Prometheus' `kahansum.Inc`: adds `inc` to
/// `sum` with compensation `c`.
pub(super) fn kahan_inc(inc: f64, sum: f64, c: f64) -> (f64, f64) {
    let t = sum + inc;
    let c = if t.is_infinite() {
        0.0
    } else if sum.abs() >= inc.abs() {
        c + ((sum - t) + inc)
    } else {
        c + ((inc - t) + sum)
    };
    (t, c)
}

/// Prometheus' mean: a compensated sum divided by the count, switching to an incremental
/// mean if the sum would overflow.
pub(super) fn mean(values: &[f64]) -> f64 {
    let Some((&first, rest)) = values.split_first() else {
        return f64::NAN;
    };
    let (mut sum, mut c, mut avg) = (first, 0.0, 0.0);
    let mut count = 1.0;
    let mut incremental = false;
    for &f in rest {
        count += 1.0;
        if !incremental {
            let (new_sum, new_c) = kahan_inc(f, sum, c);
            if !new_sum.is_infinite() {
                (sum, c) = (new_sum, new_c);
                continue;
            }
            incremental = true;
            avg = sum / (count - 1.0);
            c /= count - 1.0;
        }
        let q = (count - 1.0) / count;
        (avg, c) = kahan_inc(f / count, q * avg, q * c);
    }
    if incremental {
        avg + c
    } else {
        sum / count + c / count
    }
}

/// Sorts NaN first, then ascending (Prometheus' `vectorByValueHeap` order).
pub(super) fn nan_first(a: f64, b: f64) -> std::cmp::Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Less,
        (false, true) => std::cmp::Ordering::Greater,
        (false, false) => a.partial_cmp(&b).unwrap_or(std::cmp::Ordering::Equal),
    }
}

/// The φ-quantile of `values` with linear interpolation between the closest ranks
/// (Prometheus' `quantile`).
pub(super) fn quantile(q: f64, values: &[f64]) -> f64 {
    if values.is_empty() || q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| nan_first(*a, *b));
    let n = sorted.len() as f64;
    let rank = q * (n - 1.0);
    let lower = rank.floor().max(0.0);
    let upper = (lower + 1.0).min(n - 1.0);
    let weight = rank - rank.floor();
    let at = |i: f64| sorted.get(i as usize).copied().unwrap_or(f64::NAN);
    at(lower) * (1.0 - weight) + at(upper) * weight
}

/// One group's value for the aggregation `op` (the group is never empty).
fn aggregate_values(op: TokenId, values: &[f64], q: f64) -> f64 {
    let Some((&first, rest)) = values.split_first() else {
        return f64::NAN;
    };
    match op {
        T_SUM => {
            let (mut sum, mut c) = (first, 0.0);
            for &f in rest {
                (sum, c) = kahan_inc(f, sum, c);
            }
            sum + c
        }
        T_AVG => mean(values),
        T_COUNT => values.len() as f64,
        T_GROUP => 1.0,
        T_MIN => rest
            .iter()
            .fold(first, |m, &f| if m > f || m.is_nan() { f } else { m }),
        T_MAX => rest
            .iter()
            .fold(first, |m, &f| if m < f || m.is_nan() { f } else { m }),
        T_STDDEV | T_STDVAR => {
            let (mut count, mut avg) = (1.0, first);
            let mut sq = if first.is_finite() { 0.0 } else { f64::NAN };
            for &f in rest {
                count += 1.0;
                let delta = f - avg;
                avg += delta / count;
                sq += delta * (f - avg);
            }
            if op == T_STDVAR {
                sq / count
            } else {
                (sq / count).sqrt()
            }
        }
        T_QUANTILE => quantile(q, values),
        _ => f64::NAN,
    }
}

/// `topk` / `bottomk`: per group, the `k` largest (smallest) elements with all their
/// labels, best first; NaN is never preferred to a number.
fn top_k(
    top: bool,
    k: f64,
    input: Vec<Sample>,
    without: bool,
    grouping: &[String],
) -> Result<Vec<Sample>, QueryError> {
    if k < i64::MIN as f64 || k > i64::MAX as f64 {
        return Err(QueryError::Eval(format!(
            "scalar value {k} overflows int64"
        )));
    }
    // Go's int64(k) truncates toward zero (NaN becomes the minimum: no result).
    let k = if k.is_nan() {
        0
    } else {
        (k as i64).min(input.len() as i64)
    };
    if k < 1 {
        return Ok(Vec::new());
    }
    let k = usize::try_from(k).unwrap_or(usize::MAX);
    let mut out = Vec::new();
    for (_, mut members) in group(input, without, grouping, |s| s) {
        members.sort_by(|a, b| {
            let (a, b) = (a.value, b.value);
            match (a.is_nan(), b.is_nan()) {
                (false, false) if top => nan_first(b, a),
                (false, false) => nan_first(a, b),
                // NaN last either way.
                _ => nan_first(b, a),
            }
        });
        out.extend(members.into_iter().take(k));
    }
    Ok(out)
}

/// `count_values`: how many elements of each group have each value, the value in `label`.
fn count_values(
    label: &str,
    input: Vec<Sample>,
    without: bool,
    grouping: &[String],
) -> Vec<Sample> {
    let with_value: Vec<Sample> = input
        .into_iter()
        .map(|mut s| {
            s.labels.insert(label.to_string(), format_go_float(s.value));
            s
        })
        .collect();
    group(with_value, without, grouping, |_| ())
        .into_iter()
        .map(|(labels, members)| Sample {
            labels,
            value: members.len() as f64,
        })
        .collect()
}

/// A float as Go's `strconv.FormatFloat(f, 'f', -1, 64)` writes it: the shortest decimal
/// that reads back the same, never in exponent form.
pub(super) fn format_go_float(f: f64) -> String {
    if f.is_nan() {
        "NaN".to_string()
    } else if f == f64::INFINITY {
        "+Inf".to_string()
    } else if f == f64::NEG_INFINITY {
        "-Inf".to_string()
    } else {
        f.to_string()
    }
}

// --- Binary operators ------------------------------------------------------------------

fn is_comparison(op: TokenId) -> bool {
    matches!(op, T_EQLC | T_NEQ | T_GTR | T_LSS | T_GTE | T_LTE)
}

/// Arithmetic, as Go's float64 operators and `math` functions compute it (IEEE 754:
/// `x/0` is ±Inf, `0/0` NaN, `x % 0` NaN).
fn arithmetic(op: TokenId, l: f64, r: f64) -> Result<f64, QueryError> {
    Ok(match op {
        T_ADD => l + r,
        T_SUB => l - r,
        T_MUL => l * r,
        T_DIV => l / r,
        T_MOD => l % r,
        T_POW => l.powf(r),
        T_ATAN2 => l.atan2(r),
        _ => {
            return Err(QueryError::Eval(format!(
                "operator {op} is not an arithmetic operator"
            )));
        }
    })
}

fn compare(op: TokenId, l: f64, r: f64) -> bool {
    match op {
        T_EQLC => l == r,
        T_NEQ => l != r,
        T_GTR => l > r,
        T_LSS => l < r,
        T_GTE => l >= r,
        T_LTE => l <= r,
        _ => false,
    }
}

fn bool_value(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

fn scalar_binop(op: TokenId, l: f64, r: f64) -> Result<f64, QueryError> {
    if is_comparison(op) {
        // The parser allows a comparison of scalars only with `bool`.
        Ok(bool_value(compare(op, l, r)))
    } else {
        arithmetic(op, l, r)
    }
}

/// A vector and a scalar (`swap`: the scalar is on the left). Arithmetic and `bool`
/// comparisons drop the metric name; a filtering comparison keeps the element as it was.
fn vector_scalar_binop(
    op: TokenId,
    vector: Vec<Sample>,
    scalar: f64,
    swap: bool,
    return_bool: bool,
) -> Result<Vec<Sample>, QueryError> {
    let mut out = Vec::with_capacity(vector.len());
    for s in vector {
        let (l, r) = if swap {
            (scalar, s.value)
        } else {
            (s.value, scalar)
        };
        if is_comparison(op) {
            let keep = compare(op, l, r);
            if return_bool {
                out.push(Sample {
                    labels: without_name(s.labels),
                    value: bool_value(keep),
                });
            } else if keep {
                out.push(s);
            }
        } else {
            out.push(Sample {
                labels: without_name(s.labels),
                value: arithmetic(op, l, r)?,
            });
        }
    }
    Ok(out)
}

/// `on (...)` or `ignoring (...)`: whether the listed labels are the ones matched on.
fn matching(modifier: &BinModifier) -> (bool, Vec<String>) {
    match &modifier.matching {
        Some(LabelModifier::Include(l)) => (true, l.labels.clone()),
        Some(LabelModifier::Exclude(l)) => (false, l.labels.clone()),
        None => (false, Vec::new()),
    }
}

/// The labels two elements are matched by: the `on` labels, or all but the metric name
/// and the `ignoring` labels.
fn signature(labels: &Labels, on: bool, names: &[String]) -> Labels {
    labels
        .iter()
        .filter(|(k, _)| {
            if on {
                names.contains(k)
            } else {
                k.as_str() != METRIC_NAME && !names.contains(k)
            }
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// `and`, `or` and `unless`: elements keep their labels and values.
fn set_binop(
    op: TokenId,
    lhs: Vec<Sample>,
    rhs: Vec<Sample>,
    modifier: &BinModifier,
) -> Result<Vec<Sample>, QueryError> {
    let (on, names) = matching(modifier);
    let sig = |s: &Sample| signature(&s.labels, on, &names);
    Ok(match op {
        T_LAND => {
            let right: HashSet<Labels> = rhs.iter().map(sig).collect();
            lhs.into_iter()
                .filter(|s| right.contains(&sig(s)))
                .collect()
        }
        T_LOR => {
            let left: HashSet<Labels> = lhs.iter().map(sig).collect();
            let mut out = lhs;
            out.extend(rhs.into_iter().filter(|s| !left.contains(&sig(s))));
            out
        }
        T_LUNLESS => {
            let right: HashSet<Labels> = rhs.iter().map(sig).collect();
            lhs.into_iter()
                .filter(|s| !right.contains(&sig(s)))
                .collect()
        }
        _ => {
            return Err(QueryError::Eval(format!(
                "operator {op} is not a set operator"
            )));
        }
    })
}

/// Two vectors under arithmetic or comparison: one-to-one, or many-to-one / one-to-many
/// with `group_left` / `group_right` (Prometheus' `VectorBinop`).
fn vector_binop(
    op: TokenId,
    lhs: Vec<Sample>,
    rhs: Vec<Sample>,
    modifier: &BinModifier,
) -> Result<Vec<Sample>, QueryError> {
    let (on, names) = matching(modifier);
    let (one_to_one, one_to_many, include) = match &modifier.card {
        VectorMatchCardinality::OneToOne => (true, false, Vec::new()),
        VectorMatchCardinality::ManyToOne(l) => (false, false, l.labels.clone()),
        VectorMatchCardinality::OneToMany(l) => (false, true, l.labels.clone()),
        VectorMatchCardinality::ManyToMany => {
            return Err(QueryError::Eval(
                "many-to-many matching is only allowed for set operators".to_string(),
            ));
        }
    };
    if lhs.is_empty() || rhs.is_empty() {
        return Ok(Vec::new());
    }
    // The "one" side goes right; one-to-many swaps the sides and swaps the values back.
    let (many, one) = if one_to_many { (rhs, lhs) } else { (lhs, rhs) };
    let mut one_by_sig: HashMap<Labels, &Sample> = HashMap::with_capacity(one.len());
    for s in &one {
        let sig = signature(&s.labels, on, &names);
        if let Some(dup) = one_by_sig.get(&sig) {
            return Err(QueryError::Eval(format!(
                "found duplicate series for the match group {} on the {} hand-side of the \
                 operation: [{}, {}];many-to-many matching not allowed: matching labels must \
                 be unique on one side",
                format_labels(&sig),
                if one_to_many { "left" } else { "right" },
                format_labels(&s.labels),
                format_labels(&dup.labels),
            )));
        }
        one_by_sig.insert(sig, s);
    }
    let comparison = is_comparison(op);
    let return_bool = modifier.return_bool;
    let mut matched: HashMap<Labels, HashSet<Labels>> = HashMap::new();
    let mut out = Vec::new();
    for m in many {
        let sig = signature(&m.labels, on, &names);
        let Some(o) = one_by_sig.get(&sig) else {
            continue;
        };
        let (l, r) = if one_to_many {
            (o.value, m.value)
        } else {
            (m.value, o.value)
        };
        let value = if comparison {
            let keep = compare(op, l, r);
            if return_bool {
                bool_value(keep)
            } else if keep {
                l
            } else {
                continue;
            }
        } else {
            arithmetic(op, l, r)?
        };
        let mut labels = m.labels;
        if !comparison || return_bool {
            labels.remove(METRIC_NAME);
        }
        if one_to_one {
            labels.retain(|k, _| names.contains(k) == on);
        }
        for name in &include {
            match o.labels.get(name) {
                Some(v) => labels.insert(name.clone(), v.clone()),
                None => labels.remove(name),
            };
        }
        let seen = matched.entry(sig).or_default();
        if one_to_one {
            if !seen.is_empty() {
                return Err(QueryError::Eval(
                    "multiple matches for labels: many-to-one matching must be explicit \
                     (group_left/group_right)"
                        .to_string(),
                ));
            }
        } else if seen.contains(&labels) {
            return Err(QueryError::Eval(
                "multiple matches for labels: grouping labels must ensure unique matches"
                    .to_string(),
            ));
        }
        seen.insert(labels.clone());
        out.push(Sample { labels, value });
    }
    Ok(out)
}
