//! PromQL instant queries against the built-in Prometheus, evaluated as Prometheus 3's
//! `/api/v1/query` evaluates them, so that an AnalysisTemplate's query gives here the
//! number it would give against a real Prometheus holding the same samples.
//!
//! # Layout
//!
//! - this file: the interface ([`SeriesSource`] in, [`QueryValue`] or [`QueryError`] out),
//!   [`parse`] and [`query`];
//! - `diagnose`: turns the parser's bare "invalid promql query" into a message that says
//!   where the query stops making sense;
//! - `eval`: the walk over `promql-parser`'s AST: selectors, subqueries, aggregations and
//!   binary operators with vector matching;
//! - `functions`: the function calls (`rate` and its family with Prometheus'
//!   extrapolation, `histogram_quantile`, `*_over_time`, the math functions, …).
//!
//! The parser is the `promql-parser` crate; nothing here parses PromQL by hand.
//!
//! # What is evaluated
//!
//! Selectors with `=`, `!=`, `=~`, `!~` (regexes fully anchored), `offset`, `@`, the
//! 5-minute lookback `(t-5m, t]`, range selectors `(t-range, t]`, subqueries; the
//! functions listed in `functions`; every aggregation but `limitk` and `limit_ratio`;
//! arithmetic, comparison (with and without `bool`) and set operators with `on`,
//! `ignoring`, `group_left` and `group_right`. Anything else (native histograms, the
//! date functions, `fill` modifiers, …) is a [`QueryError::Unsupported`] naming it,
//! never a guess.
//!
//! Times are milliseconds since the scenario's epoch; `time()` and `@ <t>` read that
//! epoch as Prometheus reads the Unix epoch.

mod diagnose;
mod eval;
mod functions;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use promql_parser::parser::Expr;

/// A series' labels, `__name__` included for raw series. An empty value is the same as
/// an absent label, as in Prometheus.
pub type Labels = BTreeMap<String, String>;

/// One time series: labels and samples (time in ms since the scenario's epoch, value),
/// sorted by time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    pub labels: Labels,
    pub samples: Vec<(i64, f64)>,
}

/// Where series come from (the built-in Prometheus).
pub trait SeriesSource {
    /// Every series whose `__name__` is `metric`.
    fn series(&self, metric: &str) -> Vec<Series>;
}

/// The result of an instant query, as `/api/v1/query` returns it (a range-vector result
/// is refused: Argo's Prometheus provider does not take one either).
#[derive(Debug, Clone, PartialEq)]
pub enum QueryValue {
    Scalar(f64),
    /// Elements in Prometheus' order: a selector's by labels, an aggregation's groups in
    /// the order their first member came, `topk` best first, `sort` sorted.
    Vector(Vec<(Labels, f64)>),
    String(String),
}

/// Why a query has no value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QueryError {
    /// The query is not PromQL; the message says where, as Prometheus' does.
    #[error("parse error: {0}")]
    Parse(String),
    /// Valid PromQL that this evaluator does not implement; the message names it.
    #[error("{0} is not supported by canarysim's PromQL evaluator")]
    Unsupported(String),
    /// Prometheus refuses it at evaluation too (e.g. many-to-many matching).
    #[error("evaluation error: {0}")]
    Eval(String),
}

/// Prometheus' staleness marker: a series whose latest sample is this NaN (compared by
/// bits) has ended, and selectors see nothing of it from that sample on. Any other NaN is
/// an ordinary value.
pub(crate) const STALE_MARKER: f64 = f64::from_bits(0x7ff0_0000_0000_0002);

/// Whether `value` is [`STALE_MARKER`].
pub(crate) fn is_stale_marker(value: f64) -> bool {
    value.to_bits() == STALE_MARKER.to_bits()
}

/// Parses `query`. A syntax error says what went wrong and where, like Prometheus'
/// "parse error: ..." (`1:5: unexpected "bar"`, `unexpected end of input`, `unclosed left
/// parenthesis`, `expected type matrix in call to function 'rate', got vector`).
pub fn parse(query: &str) -> Result<Expr, QueryError> {
    check_durations(query)?;
    promql_parser::parser::parse(query)
        .map_err(|message| QueryError::Parse(diagnose::describe(query, message)))
}

/// The longest duration PromQL takes, in seconds: Go's `time.Duration` (292 years).
pub(crate) const MAX_DURATION_SECONDS: f64 = 9_223_372_036.0;

/// Refuses a number of seconds where a duration goes (in `[...]`, after `offset`) that no
/// duration can be: `promql-parser` hands such a number to `Duration::from_secs_f64`, which
/// panics on anything past `u64::MAX` seconds, infinite or NaN (found by fuzzing:
/// `ra[333…3]`). Every prefix of the number is checked, because [`diagnose`] parses
/// prefixes of the query.
fn check_durations(query: &str) -> Result<(), QueryError> {
    let bytes = query.as_bytes();
    let mut depth = 0usize;
    let mut quote: Option<u8> = None;
    let mut escaped = false;
    let mut after_offset = false;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if let Some(q) = quote {
            match c {
                _ if escaped => escaped = false,
                b'\\' if q != b'`' => escaped = true,
                _ if c == q => quote = None,
                _ => {}
            }
            i += 1;
            continue;
        }
        if c.is_ascii_alphanumeric() || c == b'.' || c == b'_' {
            let start = i;
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric()
                    || matches!(bytes[i], b'.' | b'_')
                    || (matches!(bytes[i], b'+' | b'-') && matches!(bytes[i - 1], b'e' | b'E')))
            {
                i += 1;
            }
            let token = &query[start..i];
            if depth > 0 || after_offset {
                let out_of_range = (1..=token.len().min(400))
                    .filter_map(|n| token.get(..n)?.parse::<f64>().ok())
                    .any(|secs| !(0.0..=MAX_DURATION_SECONDS).contains(&secs))
                    || token.len() > 400;
                if out_of_range {
                    let (line, column) = diagnose::position(query, start);
                    return Err(QueryError::Parse(format!(
                        "{line}:{column}: duration {token:?} is out of range (Prometheus takes at most 292 years)"
                    )));
                }
            }
            after_offset = token.eq_ignore_ascii_case("offset");
            continue;
        }
        match c {
            b'"' | b'\'' | b'`' => quote = Some(c),
            b'[' => depth += 1,
            b']' => depth = depth.saturating_sub(1),
            b'+' | b'-' => {}
            _ if c.is_ascii_whitespace() => {}
            _ => after_offset = false,
        }
        i += 1;
    }
    Ok(())
}

/// Instant query at `at_ms`, as Prometheus' `/api/v1/query` evaluates it.
pub fn query(source: &dyn SeriesSource, query: &str, at_ms: i64) -> Result<QueryValue, QueryError> {
    evaluate(source, &parse(query)?, at_ms)
}

/// [`query`] for an expression [`parse`] already checked (a plan parses its templates'
/// queries once, then evaluates them at every measurement).
pub(crate) fn evaluate(
    source: &dyn SeriesSource,
    expr: &Expr,
    at_ms: i64,
) -> Result<QueryValue, QueryError> {
    eval::instant_query(source, expr, at_ms)
}
