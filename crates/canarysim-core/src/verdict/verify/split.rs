//! The split verdict: observed draws against expected shares ± a tolerance, with three
//! outcomes.

use serde::Serialize;

use super::{GofResult, Interval, IntervalMethod, chi_square_gof, num, pct, proportion_interval};

/// What the mesh randomises when it applies a weight.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SplitUnit {
    /// Each request independently picks an arm.
    Request,
    /// Each connection picks an arm and all its requests follow it.
    Connection,
    /// Each client is pinned to an arm by a session cookie (ingress-nginx's
    /// `affinity: cookie`) and its requests follow it, across its connections: the client
    /// is the draw, counted by the version that answered its last request.
    Client,
}

impl SplitUnit {
    /// The unit's noun in the plural: `requests`, `connections`, `clients`.
    pub fn plural(self) -> &'static str {
        match self {
            SplitUnit::Request => "requests",
            SplitUnit::Connection => "connections",
            SplitUnit::Client => "clients",
        }
    }

    /// The unit's noun: `request`, `connection`, `client`.
    pub fn noun(self) -> &'static str {
        match self {
            SplitUnit::Request => "request",
            SplitUnit::Connection => "connection",
            SplitUnit::Client => "client",
        }
    }
}

/// What the data say about a split: three outcomes, so that "the data cannot tell" is never
/// reported as a wrong weight, nor as a right one.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every arm's interval lies inside its expected share ± tolerance: the split is right.
    Pass,
    /// Some arm's interval lies wholly outside its expected share ± tolerance: the weight is
    /// wrong, at the stated confidence.
    Fail,
    /// Neither: more data would decide.
    Inconclusive,
}

impl Outcome {
    /// `pass`, `fail`, `inconclusive`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Inconclusive => "inconclusive",
        }
    }

    /// `PASS`, `FAIL`, `INCONCLUSIVE`, as reports head a verdict.
    pub fn heading(self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::Fail => "FAIL",
            Outcome::Inconclusive => "INCONCLUSIVE",
        }
    }
}

/// One arm of a [`SplitVerdict`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmVerdict {
    /// Expected share (normalised).
    pub expected_share: f64,
    /// Observed share in the unit of randomisation (of requests, or of connections).
    pub observed_share: f64,
    /// Share of the requests (equal to `observed_share` when the unit is the request;
    /// per connection it differs when connections carry unequal numbers of requests).
    pub request_share: f64,
    /// Count in the randomisation unit the interval is built on (requests, or
    /// connections).
    pub effective_count: u64,
    /// Confidence interval for the arm's share, built on the effective counts.
    pub interval: Interval,
    /// Interval method used.
    pub method: IntervalMethod,
    /// Whether the interval lies entirely inside expected ± tolerance.
    pub inside: bool,
    /// Whether the interval lies entirely outside expected ± tolerance (the share is wrong).
    pub outside: bool,
}

impl ArmVerdict {
    /// Where the interval lies against the expected share ± the tolerance, in words.
    pub(crate) fn relation(&self) -> &'static str {
        if self.inside {
            "inside"
        } else if self.outside {
            "OUTSIDE"
        } else {
            "overlaps the edge"
        }
    }
}

/// Does the observed split match the set weights, honestly?
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SplitVerdict {
    /// Pass, fail, or inconclusive (see [`Outcome`]).
    pub outcome: Outcome,
    /// Every arm's interval lies inside its expected share ± `within_points` (the outcome
    /// is `pass`).
    pub passes: bool,
    /// When inconclusive: about how many units (requests, or connections) in all would
    /// decide, if the observed shares held; None when decided, or when no amount would (an
    /// observed share right on the tolerance's edge, or no data).
    pub units_to_decide: Option<u64>,
    /// The unit of randomisation.
    pub unit: SplitUnit,
    /// Number of independent units the intervals are built on.
    pub effective_n: u64,
    /// Requests observed (sum of the counts).
    pub total_requests: u64,
    /// Tolerance, in percentage points.
    pub within_points: f64,
    /// Requested confidence.
    pub confidence: f64,
    /// Confidence of each arm's interval (Bonferroni-adjusted for more than two arms).
    pub per_arm_confidence: f64,
    /// Per-arm details.
    pub arms: Vec<ArmVerdict>,
    /// Chi-square goodness of fit on the effective counts.
    pub gof: GofResult,
    /// One-line human explanation.
    pub explanation: String,
}

// Long: the three outcomes and their explanation from one set of per-arm intervals and bands.
/// Checks an observed split against the set weights.
///
/// * `draws`: per arm, the count in the unit of randomisation: requests for
///   [`SplitUnit::Request`]; for [`SplitUnit::Connection`] the connections that chose
///   the arm — 100 000 requests on 20 connections are 20 draws. The weight governs these
///   choices, so the interval and the fit are on them; connections that carry unequal
///   numbers of requests (a slower version answers fewer per connection) make the
///   request share differ from the weight while the router is right.
/// * `requests`: per arm, the requests answered (for `request_share` and the report).
/// * `expected_shares`: set weights (normalised by their sum; see [`chi_square_gof`]
///   for zeros and length mismatches).
/// * `within_points`: tolerance in percentage points (`1.0` = ±1 point).
/// * `confidence`: two-sided confidence. With two arms the intervals are exact
///   mirrors of each other; with `m > 2` arms each interval is built at
///   `1 − (1 − confidence)/m` so that all hold together (Bonferroni).
///
/// Three outcomes ([`Outcome`]): **pass** when every arm's interval (see
/// [`proportion_interval`]) lies entirely inside `expected ± within_points/100` ("we are
/// confident the split is within tolerance", not merely "we could not show it is wrong");
/// **fail** when some arm's interval lies entirely outside it (that arm's share is off by
/// more than the tolerance, at the stated confidence); **inconclusive** otherwise, with
/// the units that would decide if the shares held. No traffic is inconclusive.
///
/// A correct split fails only when an interval misses its true share by more than the
/// tolerance, far rarer than `1 − confidence`; a split off by more than the tolerance
/// passes at most `(1 − confidence)/2` of the time.
pub fn split_verdict(
    draws: &[u64],
    unit: SplitUnit,
    requests: &[u64],
    expected_shares: &[f64],
    within_points: f64,
    confidence: f64,
) -> SplitVerdict {
    let arms_len = draws.len().max(expected_shares.len());
    let draw = |i: usize| draws.get(i).copied().unwrap_or(0);
    let request = |i: usize| requests.get(i).copied().unwrap_or(0);
    let share = |i: usize| {
        expected_shares
            .get(i)
            .copied()
            .filter(|s| s.is_finite() && *s > 0.0)
            .unwrap_or(0.0)
    };
    let share_sum: f64 = (0..arms_len).map(share).sum();
    let n_eff = (0..arms_len).fold(0u64, |t, i| t.saturating_add(draw(i)));
    let total_requests = (0..arms_len).fold(0u64, |t, i| t.saturating_add(request(i)));
    let per_arm_confidence = if arms_len > 2 && confidence.is_finite() {
        1.0 - (1.0 - confidence) / arms_len as f64
    } else {
        confidence
    };
    let tol = if within_points.is_nan() {
        0.0
    } else {
        within_points.max(0.0) / 100.0
    };
    let ratio = |k: u64, n: u64| if n == 0 { 0.0 } else { k as f64 / n as f64 };

    let mut arms = Vec::with_capacity(arms_len);
    let mut eff_counts = Vec::with_capacity(arms_len);
    for i in 0..arms_len {
        let expected_share = if share_sum > 0.0 {
            share(i) / share_sum
        } else {
            0.0
        };
        let pi = proportion_interval(draw(i), n_eff, per_arm_confidence);
        let band = Band::around(expected_share, tol);
        eff_counts.push(draw(i));
        arms.push(ArmVerdict {
            expected_share,
            observed_share: ratio(draw(i), n_eff),
            request_share: ratio(request(i), total_requests),
            effective_count: draw(i),
            interval: pi.interval,
            method: pi.method,
            inside: n_eff > 0 && band.holds(pi.interval),
            outside: n_eff > 0 && band.excludes(pi.interval),
        });
    }
    let gof = chi_square_gof(&eff_counts, expected_shares);
    let outcome = if n_eff == 0 || arms.is_empty() {
        Outcome::Inconclusive
    } else if arms.iter().all(|a| a.inside) {
        Outcome::Pass
    } else if arms.iter().any(|a| a.outside) {
        Outcome::Fail
    } else {
        Outcome::Inconclusive
    };
    let passes = outcome == Outcome::Pass;
    let units_to_decide = (outcome == Outcome::Inconclusive && n_eff > 0)
        .then(|| {
            let observed: Vec<(f64, Band)> = arms
                .iter()
                .map(|a| (a.observed_share, Band::around(a.expected_share, tol)))
                .collect();
            units_to_decide(&observed, n_eff, per_arm_confidence)
        })
        .flatten();

    let mut explanation = match unit {
        SplitUnit::Request => {
            format!("split is made per request: effective n = {n_eff} requests")
        }
        SplitUnit::Connection | SplitUnit::Client => format!(
            "split is made per {}: effective n = {n_eff} {}, not {total_requests} requests",
            unit.noun(),
            unit.plural()
        ),
    };
    // The arms that decide the outcome: those outside the band on a fail, those not
    // inside it otherwise.
    let telling: Vec<usize> = (0..arms.len())
        .filter(|&i| match outcome {
            Outcome::Fail => arms[i].outside,
            _ => !arms[i].inside,
        })
        .collect();
    if n_eff == 0 {
        explanation.push_str("; no data, nothing can be verified");
    } else if let Some(&i) = telling.first() {
        let a = &arms[i];
        let relation = if outcome == Outcome::Fail {
            "lies wholly outside"
        } else {
            "overlaps the edge of"
        };
        explanation.push_str(&format!(
            "; arm {i}: {}% interval [{}%, {}%] {relation} {}% ± {} points",
            pct(per_arm_confidence),
            pct(a.interval.lo),
            pct(a.interval.hi),
            pct(a.expected_share),
            num(within_points),
        ));
        if telling.len() > 1 {
            let more = telling.len() - 1;
            let noun = if more == 1 { "arm" } else { "arms" };
            explanation.push_str(&format!(" ({more} more {noun})"));
        }
        if outcome == Outcome::Inconclusive {
            match units_to_decide {
                Some(total) => {
                    let unit = unit.plural();
                    explanation.push_str(&format!(
                        "; about {} more {unit} would decide if the shares held ({total} in all)",
                        total.saturating_sub(n_eff)
                    ));
                }
                None => explanation
                    .push_str("; an observed share sits on the tolerance's edge: more data at this share cannot decide"),
            }
        }
    } else {
        explanation.push_str(&format!(
            "; all {} arms inside expected ± {} points at {}% confidence",
            arms.len(),
            num(within_points),
            pct(confidence),
        ));
    }

    SplitVerdict {
        outcome,
        passes,
        units_to_decide,
        unit,
        effective_n: n_eff,
        total_requests,
        within_points,
        confidence,
        per_arm_confidence,
        arms,
        gof,
        explanation,
    }
}

/// An expected share ± the tolerance, as fractions (it may reach below 0 or above 1).
#[derive(Debug, Clone, Copy)]
pub(super) struct Band {
    pub(super) lo: f64,
    pub(super) hi: f64,
}

impl Band {
    /// Absorbs float noise at an exact boundary.
    pub(super) const EPS: f64 = 1e-12;

    pub(super) fn around(expected: f64, tolerance: f64) -> Band {
        Band {
            lo: expected - tolerance,
            hi: expected + tolerance,
        }
    }

    /// The interval lies inside the band.
    pub(super) fn holds(&self, i: Interval) -> bool {
        i.is_inside(self.lo - Self::EPS, self.hi + Self::EPS)
    }

    /// The interval lies wholly outside the band.
    pub(super) fn excludes(&self, i: Interval) -> bool {
        i.lo > self.hi + Self::EPS || i.hi < self.lo - Self::EPS
    }

    pub(super) fn strictly_contains(&self, p: f64) -> bool {
        self.lo + Self::EPS < p && p < self.hi - Self::EPS
    }

    pub(super) fn strictly_excludes(&self, p: f64) -> bool {
        p > self.hi + Self::EPS || p < self.lo - Self::EPS
    }
}

/// The most units [`units_to_decide`] looks at (beyond, it answers None).
const MAX_UNITS_TO_DECIDE: u64 = 1_000_000_000_000;

/// How many units in all would decide a split if each arm's observed share held: the
/// fewest at which the intervals (at `confidence`, the method [`proportion_interval`]
/// picks) would all lie inside their bands, or one would lie outside its band. None when an
/// observed share sits on an edge of its band, or beyond [`MAX_UNITS_TO_DECIDE`].
fn units_to_decide(arms: &[(f64, Band)], n: u64, confidence: f64) -> Option<u64> {
    let decides_at = |share: f64, test: &dyn Fn(Interval) -> bool| -> Option<u64> {
        let holds_at = |units: u64| {
            let k = (share * units as f64).round() as u64;
            test(proportion_interval(k, units, confidence).interval)
        };
        // Doubling, then bisection between the last size that did not decide and the first
        // that did (the interval narrows as the units grow).
        let mut hi = n.max(1);
        while !holds_at(hi) {
            if hi >= MAX_UNITS_TO_DECIDE {
                return None;
            }
            hi = hi.saturating_mul(2).min(MAX_UNITS_TO_DECIDE);
        }
        let mut lo = n.max(1);
        if hi == lo {
            return Some(hi);
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if holds_at(mid) { hi = mid } else { lo = mid }
        }
        Some(hi)
    };
    let outside: Vec<&(f64, Band)> = arms
        .iter()
        .filter(|(p, b)| b.strictly_excludes(*p))
        .collect();
    if !outside.is_empty() {
        return outside
            .iter()
            .filter_map(|(p, b)| decides_at(*p, &|i| b.excludes(i)))
            .min();
    }
    if arms.iter().all(|(p, b)| b.strictly_contains(*p)) {
        let mut most = 0;
        for (p, b) in arms {
            most = most.max(decides_at(*p, &|i| b.holds(i))?);
        }
        return Some(most);
    }
    None
}
