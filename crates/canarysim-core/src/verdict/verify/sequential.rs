//! Wald's sequential probability ratio test, one- and two-sided.

use std::fmt;

use serde::Serialize;

/// Why an SPRT could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SprtError {
    /// A hypothesised proportion is not strictly between 0 and 1 (or is NaN).
    InvalidProbability,
    /// `p0 == p1`: the hypotheses cannot be told apart.
    EqualHypotheses,
    /// `alpha`/`beta` must be in `(0, 1)` with `alpha + beta < 1`.
    InvalidErrorRates,
    /// `delta` must be finite and positive, with at least one of `set ± delta` in `(0, 1)`.
    InvalidDelta,
}

impl fmt::Display for SprtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let msg = match self {
            SprtError::InvalidProbability => "hypothesised proportion must be in (0, 1)",
            SprtError::EqualHypotheses => "p0 and p1 must differ",
            SprtError::InvalidErrorRates => {
                "alpha and beta must be in (0, 1) with alpha + beta < 1"
            }
            SprtError::InvalidDelta => "delta must be > 0 with set ± delta inside (0, 1)",
        };
        f.write_str(msg)
    }
}

impl std::error::Error for SprtError {}

/// State of a sequential test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SprtDecision {
    /// Not enough evidence yet: keep sampling.
    Continue,
    /// The log-likelihood ratio crossed the lower bound `B`.
    AcceptH0,
    /// The log-likelihood ratio crossed the upper bound `A`.
    AcceptH1,
}

/// Wald's sequential probability ratio test for a binomial proportion,
/// `H0: p = p0` against `H1: p = p1`.
///
/// Each success adds `ln(p1/p0)` to the log-likelihood ratio, each failure
/// `ln((1−p1)/(1−p0))`. The test stops at `llr ≥ A = ln((1−β)/α)` (accept H1) or
/// `llr ≤ B = ln(β/(1−α))` (accept H0). Wald's bounds keep the error rates at
/// about `α` and `β` (slightly below, as overshoot is ignored), and on average
/// need far fewer observations than a fixed-size test when the truth is near
/// `p0` or `p1`.
///
/// The decision is sticky: once a bound is crossed the test has stopped and
/// further observations are ignored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sprt {
    p0: f64,
    p1: f64,
    alpha: f64,
    beta: f64,
    upper: f64,
    lower: f64,
    step_success: f64,
    step_failure: f64,
    llr: f64,
    samples: u64,
    successes: u64,
    decision: SprtDecision,
}

pub(super) fn valid_prob(p: f64) -> bool {
    p.is_finite() && p > 0.0 && p < 1.0
}

pub(super) fn valid_error_rates(alpha: f64, beta: f64) -> bool {
    valid_prob(alpha) && valid_prob(beta) && alpha + beta < 1.0
}

impl Sprt {
    /// New test of `H0: p = p0` against `H1: p = p1` with type I error `alpha`
    /// and type II error `beta` (`p1` may be above or below `p0`).
    pub fn new(p0: f64, p1: f64, alpha: f64, beta: f64) -> Result<Sprt, SprtError> {
        if !valid_prob(p0) || !valid_prob(p1) {
            return Err(SprtError::InvalidProbability);
        }
        if p0 == p1 {
            return Err(SprtError::EqualHypotheses);
        }
        if !valid_error_rates(alpha, beta) {
            return Err(SprtError::InvalidErrorRates);
        }
        Ok(Sprt {
            p0,
            p1,
            alpha,
            beta,
            upper: ((1.0 - beta) / alpha).ln(),
            lower: (beta / (1.0 - alpha)).ln(),
            step_success: (p1 / p0).ln(),
            step_failure: ((1.0 - p1) / (1.0 - p0)).ln(),
            llr: 0.0,
            samples: 0,
            successes: 0,
            decision: SprtDecision::Continue,
        })
    }

    /// Feeds one observation (`true` = the request went to the arm under test).
    pub fn observe(&mut self, success: bool) -> SprtDecision {
        self.observe_many(u64::from(success), 1)
    }

    /// Feeds a batch of `n` observations with `k` successes (`k > n` is clamped).
    ///
    /// The bounds are checked only at the end of the batch (order inside a batch is
    /// unknown). Wald's error bounds (`α' ≤ α/(1−β)`, `β' ≤ β/(1−α)`) hold for any
    /// such grouping; checking less often can only cost extra samples.
    pub fn observe_many(&mut self, k: u64, n: u64) -> SprtDecision {
        if self.decision != SprtDecision::Continue || n == 0 {
            return self.decision;
        }
        let k = k.min(n);
        self.llr += k as f64 * self.step_success + (n - k) as f64 * self.step_failure;
        self.samples = self.samples.saturating_add(n);
        self.successes = self.successes.saturating_add(k);
        if self.llr >= self.upper {
            self.decision = SprtDecision::AcceptH1;
        } else if self.llr <= self.lower {
            self.decision = SprtDecision::AcceptH0;
        }
        self.decision
    }

    /// Current decision.
    pub fn decision(&self) -> SprtDecision {
        self.decision
    }

    /// Current log-likelihood ratio `ln L(p1) / L(p0)`.
    pub fn llr(&self) -> f64 {
        self.llr
    }

    /// Wald's upper bound `A = ln((1−β)/α)`.
    pub fn upper_bound(&self) -> f64 {
        self.upper
    }

    /// Wald's lower bound `B = ln(β/(1−α))`.
    pub fn lower_bound(&self) -> f64 {
        self.lower
    }

    /// Observations consumed (up to and including the one that decided).
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Successes among the consumed observations.
    pub fn successes(&self) -> u64 {
        self.successes
    }

    /// `(p0, p1)`.
    pub fn hypotheses(&self) -> (f64, f64) {
        (self.p0, self.p1)
    }

    /// `(alpha, beta)`.
    pub fn error_rates(&self) -> (f64, f64) {
        (self.alpha, self.beta)
    }

    /// Wald's approximate average sample number when `H0` is true (overshoot ignored).
    pub fn expected_samples_h0(&self) -> f64 {
        let drift = self.p0 * self.step_success + (1.0 - self.p0) * self.step_failure;
        ((1.0 - self.alpha) * self.lower + self.alpha * self.upper) / drift
    }

    /// Wald's approximate average sample number when `H1` is true (overshoot ignored).
    pub fn expected_samples_h1(&self) -> f64 {
        let drift = self.p1 * self.step_success + (1.0 - self.p1) * self.step_failure;
        (self.beta * self.lower + (1.0 - self.beta) * self.upper) / drift
    }
}

/// State of a [`TwoSidedSprt`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SplitCheck {
    /// Keep sampling.
    Continue,
    /// Both one-sided tests accepted `p = set`.
    Matches,
    /// One of the one-sided tests accepted `p = set ± delta`.
    Differs,
}

/// The canary question "is the true share `set`, or is it off by `delta`?".
///
/// Runs two Wald SPRTs on the same observations: `set` vs `set + delta` and `set`
/// vs `set − delta`. It answers **Matches** when both accept `H0: p = set`, and
/// **Differs** as soon as either accepts its `H1`.
///
/// Error rates: `alpha` is split equally over the sides (Bonferroni), so the chance
/// of a false "differs" when the share is exactly `set` is at most about `alpha`
/// overall — the same two-sided `α` as [`fixed_sample_size_for_test`](super::fixed_sample_size_for_test). `beta` is
/// not split: if the truth is `set + delta`, "matches" needs the upper test to
/// wrongly accept H0, which happens with probability about `beta`.
///
/// A side whose alternative falls outside `(0, 1)` (e.g. `set − delta ≤ 0`) is
/// dropped and `alpha` goes to the remaining side.
///
/// Cost: "matches" needs *both* sides to finish, so with the truth at `set` the
/// average sample count is higher than for one one-sided SPRT (measured over 400
/// seeded runs at 20 % vs 22 %, α = β = 0.01: ≈ 0.54 of the fixed-size test when
/// the truth is `set`, ≈ 0.43 when it is `set + delta`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TwoSidedSprt {
    set: f64,
    delta: f64,
    above: Option<Sprt>,
    below: Option<Sprt>,
    samples: u64,
    decision: SplitCheck,
}

impl TwoSidedSprt {
    /// New two-sided check of `set` against `set ± delta` at overall `alpha`, `beta`.
    pub fn new(set: f64, delta: f64, alpha: f64, beta: f64) -> Result<TwoSidedSprt, SprtError> {
        if !valid_prob(set) {
            return Err(SprtError::InvalidProbability);
        }
        if !valid_error_rates(alpha, beta) {
            return Err(SprtError::InvalidErrorRates);
        }
        if !(delta.is_finite() && delta > 0.0) {
            return Err(SprtError::InvalidDelta);
        }
        let sides = u8::from(valid_prob(set + delta)) + u8::from(valid_prob(set - delta));
        if sides == 0 {
            return Err(SprtError::InvalidDelta);
        }
        let side_alpha = alpha / f64::from(sides);
        let above = Sprt::new(set, set + delta, side_alpha, beta).ok();
        let below = Sprt::new(set, set - delta, side_alpha, beta).ok();
        Ok(TwoSidedSprt {
            set,
            delta,
            above,
            below,
            samples: 0,
            decision: SplitCheck::Continue,
        })
    }

    /// Feeds one observation.
    pub fn observe(&mut self, success: bool) -> SplitCheck {
        self.observe_many(u64::from(success), 1)
    }

    /// Feeds a batch of `n` observations with `k` successes.
    pub fn observe_many(&mut self, k: u64, n: u64) -> SplitCheck {
        if self.decision != SplitCheck::Continue || n == 0 {
            return self.decision;
        }
        self.samples = self.samples.saturating_add(n);
        let sides = [self.above.as_mut(), self.below.as_mut()];
        let mut all_h0 = true;
        let mut any_h1 = false;
        for side in sides.into_iter().flatten() {
            match side.observe_many(k, n) {
                SprtDecision::AcceptH1 => any_h1 = true,
                SprtDecision::AcceptH0 => {}
                SprtDecision::Continue => all_h0 = false,
            }
        }
        self.decision = if any_h1 {
            SplitCheck::Differs
        } else if all_h0 {
            SplitCheck::Matches
        } else {
            SplitCheck::Continue
        };
        self.decision
    }

    /// Current decision.
    pub fn decision(&self) -> SplitCheck {
        self.decision
    }

    /// Observations consumed until the decision.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// `(set, delta)`.
    pub fn target(&self) -> (f64, f64) {
        (self.set, self.delta)
    }

    /// The `set` vs `set + delta` test, if that side exists.
    pub fn above(&self) -> Option<&Sprt> {
        self.above.as_ref()
    }

    /// The `set` vs `set − delta` test, if that side exists.
    pub fn below(&self) -> Option<&Sprt> {
        self.below.as_ref()
    }
}
