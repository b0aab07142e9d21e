//! Sample-size planning for a verdict (`canarysim plan`): how many draws (requests, or
//! connections when the split is made per connection) a load needs so that the verdict of
//! [`super::split_verdict`] decides, and the chance of each outcome at a given size.
//!
//! The chances are exact: for `n` draws of a true share `p`, the counts `k` that pass form
//! one run of integers (both interval bounds grow with `k`), and so do those that fail
//! below and above the band; their binomial probabilities are summed from the CDF.

use serde::Serialize;
use statrs::distribution::{Binomial, DiscreteCDF};

use super::{Band, Interval, ceil_u64, proportion_interval, two_sided_z, upper_z, valid_prob};

/// Requests needed to estimate a share `p` to within `±margin` (a fraction, e.g.
/// `0.01` for one point) at the two-sided `confidence`.
///
/// Normal approximation `n = z²·p(1−p)/margin²`, rounded up. Pass `p = 0.5` when the
/// share is unknown (worst case); a `p` outside `(0, 1)` or NaN is also treated as
/// 0.5. `margin <= 0` or `confidence >= 1` → `u64::MAX` (impossible).
///
/// Requests here means *independent units*: if the split is made per connection,
/// read the answer as connections.
pub fn requests_needed(p: f64, margin: f64, confidence: f64) -> u64 {
    let p = if valid_prob(p) { p } else { 0.5 };
    if margin.is_nan() || margin <= 0.0 {
        return u64::MAX;
    }
    let z = two_sided_z(confidence);
    ceil_u64(z * z * p * (1.0 - p) / (margin * margin))
}

/// Fixed sample size of the one-sample binomial test of `p0` against `p1`:
/// `n = ((z_{1−α/2}·sqrt(p0(1−p0)) + z_{1−β}·sqrt(p1(1−p1))) / (p1 − p0))²`, rounded up.
///
/// `alpha` is **two-sided** (as in [`TwoSidedSprt`](super::TwoSidedSprt), which this should be compared
/// with); for a one-sided test at level `α` (as in a single [`Sprt`](super::Sprt)) pass `2α`.
/// `beta` is the type II error at `p1`. Returns `u64::MAX` when `p0 == p1` or an
/// input is outside its range (`p` in `[0, 1]`, `alpha`, `beta` in `(0, 1)`).
pub fn fixed_sample_size_for_test(p0: f64, p1: f64, alpha: f64, beta: f64) -> u64 {
    let in_unit = |p: f64| (0.0..=1.0).contains(&p);
    if !in_unit(p0) || !in_unit(p1) || p0 == p1 || !valid_prob(alpha) || !valid_prob(beta) {
        return u64::MAX;
    }
    let z_a = upper_z(alpha / 2.0);
    let z_b = upper_z(beta);
    let root = (z_a * (p0 * (1.0 - p0)).sqrt() + z_b * (p1 * (1.0 - p1)).sqrt()) / (p1 - p0);
    ceil_u64(root * root)
}

/// The chance of each outcome of a two-arm verdict.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OutcomeChances {
    pub pass: f64,
    pub inconclusive: f64,
    pub fail: f64,
}

/// What `canarysim plan` answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SamplePlan {
    /// The expected share, the tolerance (fractions) and the confidence (0..1).
    pub expected: f64,
    pub within: f64,
    pub confidence: f64,
    /// The chance of a decision asked for (0..1).
    pub power: f64,
    /// Draws at which the interval is ± `within` wide when exactly `expected` is observed:
    /// the textbook figure, at which a right split passes only when it is observed exactly.
    pub interval_draws: u64,
    /// Draws at which a right split (exactly `expected`) passes with chance `power`.
    pub pass_draws: u64,
    /// The share off by twice the tolerance that `fail_draws` is for.
    pub wrong_share: f64,
    /// Draws at which a split at `wrong_share` fails with chance `power`.
    pub fail_draws: u64,
    /// The larger of the two: both hold.
    pub draws: u64,
    /// The outcomes' chances at `draws`, for a right split and for one at `wrong_share`.
    pub right_split: OutcomeChances,
    pub wrong_split: OutcomeChances,
}

/// The most draws a plan considers.
const MAX_DRAWS: u64 = 10_000_000_000;

/// The chances of pass, inconclusive and fail for `n` draws of a true share `p`, judged
/// against `expected ± within` at `confidence` (two arms: the version and the rest, whose
/// intervals mirror each other).
pub(crate) fn outcome_chances(
    p: f64,
    n: u64,
    expected: f64,
    within: f64,
    confidence: f64,
) -> OutcomeChances {
    let band = Band::around(expected, within);
    let interval = |k: u64| proportion_interval(k, n, confidence).interval;
    // First k in 0..=n+1 for which `test` holds, `test` being false then true as k grows.
    let first = |test: &dyn Fn(Interval) -> bool| -> u64 {
        let (mut lo, mut hi) = (0u64, n + 1);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if test(interval(mid)) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    };
    // Pass: lo(k) ≥ band.lo and hi(k) ≤ band.hi; fail: hi(k) < band.lo or lo(k) > band.hi.
    let pass_from = first(&|i| i.lo >= band.lo - Band::EPS);
    let pass_past = first(&|i| i.hi > band.hi + Band::EPS);
    let fail_low_past = first(&|i| i.hi >= band.lo - Band::EPS);
    let fail_high_from = first(&|i| i.lo > band.hi + Band::EPS);
    let Ok(binomial) = Binomial::new(p.clamp(0.0, 1.0), n) else {
        return OutcomeChances {
            pass: 0.0,
            inconclusive: 1.0,
            fail: 0.0,
        };
    };
    // P(from <= k < past).
    let between = |from: u64, past: u64| {
        if past <= from {
            return 0.0;
        }
        let below_past = binomial.cdf(past - 1);
        let below_from = if from == 0 {
            0.0
        } else {
            binomial.cdf(from - 1)
        };
        (below_past - below_from).max(0.0)
    };
    let pass = between(pass_from, pass_past.min(n + 1));
    let fail = between(0, fail_low_past) + between(fail_high_from, n + 1);
    OutcomeChances {
        pass,
        fail,
        inconclusive: (1.0 - pass - fail).max(0.0),
    }
}

/// The fewest draws (about: the chances saw-tooth with the counts' discreteness) at which
/// `reached(n)` holds, searched from `start` by doubling, then bisection.
fn fewest_draws(start: u64, reached: &dyn Fn(u64) -> bool) -> u64 {
    let mut hi = start.max(1);
    while !reached(hi) {
        if hi >= MAX_DRAWS {
            return MAX_DRAWS;
        }
        hi = hi.saturating_mul(2).min(MAX_DRAWS);
    }
    let mut lo = hi / 2;
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if reached(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// The plan for verifying `expected ± within` (fractions) at `confidence`, with a chance
/// `power` of deciding right: a right split passing, and one off by twice the tolerance
/// failing.
pub fn plan(expected: f64, within: f64, confidence: f64, power: f64) -> SamplePlan {
    let interval_draws = if expected <= 0.0 || expected >= 1.0 {
        // The normal figure is 0 at the ends; the exact interval of 0 of n is [0, 1 − (α/2)^(1/n)].
        fewest_draws(1, &|n| {
            let k = (expected * n as f64).round() as u64;
            proportion_interval(k, n, confidence).interval.width() <= within
        })
    } else {
        requests_needed(expected, within, confidence)
    };
    let wrong_share = if expected + 2.0 * within <= 1.0 {
        expected + 2.0 * within
    } else {
        (expected - 2.0 * within).max(0.0)
    };
    let start = interval_draws.min(MAX_DRAWS);
    let pass_draws = fewest_draws(start, &|n| {
        outcome_chances(expected, n, expected, within, confidence).pass >= power
    });
    let fail_draws = fewest_draws(start / 4, &|n| {
        outcome_chances(wrong_share, n, expected, within, confidence).fail >= power
    });
    let draws = pass_draws.max(fail_draws);
    SamplePlan {
        expected,
        within,
        confidence,
        power,
        interval_draws,
        pass_draws,
        wrong_share,
        fail_draws,
        draws,
        right_split: outcome_chances(expected, draws, expected, within, confidence),
        wrong_split: outcome_chances(wrong_share, draws, expected, within, confidence),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_figure_is_the_textbook_one() {
        // 5 % ± 0.5 points at 99 %: z² p (1 − p) / w² = 2.5758² × 0.0475 / 0.005² ≈ 12,607.
        let p = plan(0.05, 0.005, 0.99, 0.9);
        assert!((12_600..=12_610).contains(&p.interval_draws), "{p:?}");
        // At that size a right split passes only when observed almost exactly: it needs
        // far more to pass with a 90 % chance.
        assert!(
            outcome_chances(0.05, p.interval_draws, 0.05, 0.005, 0.99).pass < 0.3,
            "{p:?}"
        );
        assert!(p.pass_draws > 2 * p.interval_draws, "{p:?}");
        assert!(
            p.right_split.pass >= 0.9 && p.wrong_split.fail >= 0.9,
            "{p:?}"
        );
    }

    #[test]
    fn chances_add_up_and_a_right_split_almost_never_fails() {
        assert!(outcome_chances(0.2, 50_000, 0.2, 0.01, 0.999).fail < 1e-12);
        for n in [10, 100, 5_000, 50_000] {
            let c = outcome_chances(0.2, n, 0.2, 0.01, 0.999);
            assert!(
                (c.pass + c.inconclusive + c.fail - 1.0).abs() < 1e-9,
                "{c:?}"
            );
            // Never more than 1 − confidence: the interval would have to miss the true
            // share, and by more than the tolerance.
            assert!(c.fail <= 0.001, "n {n}: {c:?}");
        }
        // 16 connections cannot show ±1 point: never a pass, and a fail only when the
        // interval misses the true share.
        let c = outcome_chances(0.2, 16, 0.2, 0.01, 0.99);
        assert!(c.pass == 0.0 && c.fail <= 0.01, "{c:?}");
    }

    #[test]
    fn the_recipe_decides_both_ways_at_99_percent() {
        let p = plan(0.2, 0.01, 0.999, 0.99);
        assert_eq!(p.wrong_share, 0.22);
        assert!((40_000..80_000).contains(&p.draws), "{p:?}");
        assert!(p.right_split.pass >= 0.99, "{p:?}");
        assert!(p.wrong_split.fail >= 0.99, "{p:?}");
    }

    #[test]
    fn a_zero_share_plans_on_the_exact_interval() {
        // 0 of n: the upper bound 1 − 0.005^(1/n) ≤ 1 % from n ≥ 528.
        let p = plan(0.0, 0.01, 0.99, 0.9);
        assert!((520..=540).contains(&p.interval_draws), "{p:?}");
        assert!(p.right_split.pass >= 0.9);
    }
}
