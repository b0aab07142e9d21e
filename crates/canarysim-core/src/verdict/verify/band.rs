//! A sequential test whose three decisions are the verdict's: the share is inside its
//! expected value ± the tolerance (pass), outside it (fail), or not known yet.
//!
//! Wald's likelihood ratio, one-sided, at each edge of the band. The ratio of "the share
//! is a little inside the upper edge" over "it is at the upper edge" is, for every true
//! share at or above that edge, a non-negative supermartingale starting at 1; by Ville's
//! inequality it ever reaches `1/α` with probability at most `α`, however often it is
//! looked at. So:
//!
//! * **pass** when the ratios at both edges show the share inside them (a share outside the
//!   band lies beyond one edge, and that edge's ratio misleads with probability ≤ `α`);
//! * **fail** when a ratio shows the share beyond an edge (a share inside the band makes
//!   both such ratios mislead with probability ≤ `α/2` each).
//!
//! Unlike the two-sided SPRT of "the share is `set`" against "`set ± delta`"
//! ([`super::TwoSidedSprt`]), whose "differs" is likely for a share half-way between, a fail
//! here means what a fixed-sample verdict's fail means: the share is off by more than the
//! tolerance, at the stated confidence. An edge the share cannot cross (below 0, above 1)
//! needs no test.

use serde::Serialize;

use super::{Outcome, SprtError};

/// One edge's likelihood ratio: alternative `p1` over the edge `p0`, in logs.
#[derive(Debug, Clone, PartialEq, Serialize)]
struct EdgeRatio {
    p0: f64,
    p1: f64,
    /// ln(p1/p0) per success, ln((1−p1)/(1−p0)) per failure.
    per_success: f64,
    per_failure: f64,
    llr: f64,
    /// ln(1/α) for this edge.
    threshold: f64,
    shown: bool,
}

impl EdgeRatio {
    fn new(p0: f64, p1: f64, alpha: f64) -> EdgeRatio {
        EdgeRatio {
            p0,
            p1,
            per_success: (p1 / p0).ln(),
            per_failure: ((1.0 - p1) / (1.0 - p0)).ln(),
            llr: 0.0,
            threshold: (1.0 / alpha).ln(),
            shown: false,
        }
    }

    /// An edge the share is known to be on the right side of (the band reaches past 0 or 1).
    fn given() -> EdgeRatio {
        EdgeRatio {
            p0: f64::NAN,
            p1: f64::NAN,
            per_success: 0.0,
            per_failure: 0.0,
            llr: 0.0,
            threshold: 0.0,
            shown: true,
        }
    }

    fn observe(&mut self, k: u64, n: u64) -> bool {
        if !self.shown {
            let llr = self.llr + k as f64 * self.per_success + (n - k) as f64 * self.per_failure;
            // A share of exactly 0 (or 1) as the alternative: one contrary answer rules it
            // out for good (−∞), and the ratio can never recover.
            self.llr = if llr.is_nan() { f64::NEG_INFINITY } else { llr };
            self.shown = self.llr >= self.threshold;
        }
        self.shown
    }
}

/// The sequential verdict on one version's share (see the module's documentation).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BandSprt {
    expected: f64,
    within: f64,
    /// Shows the share below the upper edge.
    below_upper: EdgeRatio,
    /// Shows the share above the lower edge.
    above_lower: EdgeRatio,
    /// Shows the share above the upper edge (fail); None when the edge is 1 or beyond.
    above_upper: Option<EdgeRatio>,
    /// Shows the share below the lower edge (fail); None when the edge is 0 or below.
    below_lower: Option<EdgeRatio>,
    samples: u64,
    successes: u64,
    decision: Outcome,
}

impl BandSprt {
    /// The test of `expected ± within` (fractions) at `confidence` (0..1).
    pub fn new(expected: f64, within: f64, confidence: f64) -> Result<BandSprt, SprtError> {
        if !(0.0..=1.0).contains(&expected) {
            return Err(SprtError::InvalidProbability);
        }
        if !(within.is_finite() && within > 0.0) {
            return Err(SprtError::InvalidDelta);
        }
        if !(confidence > 0.0 && confidence < 1.0) {
            return Err(SprtError::InvalidErrorRates);
        }
        let alpha = 1.0 - confidence;
        let (lo, hi) = (expected - within, expected + within);
        let inside = |edge: f64| edge > 0.0 && edge < 1.0;
        let fail_edges = f64::from(u8::from(inside(lo)) + u8::from(inside(hi)));
        let fail_alpha = alpha / fail_edges.max(1.0);
        Ok(BandSprt {
            expected,
            within,
            below_upper: if inside(hi) {
                EdgeRatio::new(hi, (hi - within).max(hi / 2.0), alpha)
            } else {
                EdgeRatio::given()
            },
            above_lower: if inside(lo) {
                EdgeRatio::new(lo, (lo + within).min((lo + 1.0) / 2.0), alpha)
            } else {
                EdgeRatio::given()
            },
            above_upper: inside(hi)
                .then(|| EdgeRatio::new(hi, (hi + within).min((hi + 1.0) / 2.0), fail_alpha)),
            below_lower: inside(lo)
                .then(|| EdgeRatio::new(lo, (lo - within).max(lo / 2.0), fail_alpha)),
            samples: 0,
            successes: 0,
            decision: Outcome::Inconclusive,
        })
    }

    /// Feeds `n` more draws, `k` of them the version's. Once decided, the decision stays.
    pub fn observe_many(&mut self, k: u64, n: u64) -> Outcome {
        if self.decision != Outcome::Inconclusive || n == 0 {
            return self.decision;
        }
        let k = k.min(n);
        self.samples = self.samples.saturating_add(n);
        self.successes = self.successes.saturating_add(k);
        let mut fails = false;
        for edge in [self.above_upper.as_mut(), self.below_lower.as_mut()]
            .into_iter()
            .flatten()
        {
            fails |= edge.observe(k, n);
        }
        let below_upper = self.below_upper.observe(k, n);
        let above_lower = self.above_lower.observe(k, n);
        self.decision = if fails {
            Outcome::Fail
        } else if below_upper && above_lower {
            Outcome::Pass
        } else {
            Outcome::Inconclusive
        };
        self.decision
    }

    /// Pass or fail once decided; inconclusive until then.
    pub fn decision(&self) -> Outcome {
        self.decision
    }

    /// Draws seen until the decision.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// `(expected, within)`.
    pub fn target(&self) -> (f64, f64) {
        (self.expected, self.within)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_pcg::Pcg64Mcg;

    /// Feeds Bernoulli(`p`) draws in batches of 16 until a decision or `cap` draws.
    fn run(
        p: f64,
        expected: f64,
        within: f64,
        confidence: f64,
        cap: u64,
        seed: u64,
    ) -> (Outcome, u64) {
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        let mut t = BandSprt::new(expected, within, confidence).unwrap();
        while t.samples() < cap {
            let k = (0..16).filter(|_| rng.random::<f64>() < p).count() as u64;
            if t.observe_many(k, 16) != Outcome::Inconclusive {
                break;
            }
        }
        (t.decision(), t.samples())
    }

    #[test]
    fn a_right_share_passes_and_a_share_beyond_the_tolerance_fails() {
        let (mut passes, mut fails, mut samples) = (0, 0, 0);
        for seed in 0..100 {
            let (d, n) = run(0.20, 0.20, 0.01, 0.999, 500_000, seed);
            passes += u32::from(d == Outcome::Pass);
            fails += u32::from(d == Outcome::Fail);
            samples += n;
        }
        assert_eq!((passes, fails), (100, 0));
        // Fewer draws on average than the fixed-sample recipe needs (≈ 55,000 for a 99 %
        // chance of passing at 99.9 %).
        assert!(samples / 100 < 45_000, "mean draws {}", samples / 100);
        for seed in 0..100 {
            let (d, _) = run(0.22, 0.20, 0.01, 0.999, 500_000, seed);
            assert_eq!(d, Outcome::Fail, "seed {seed}");
        }
    }

    #[test]
    fn a_share_inside_the_band_but_not_at_its_centre_never_fails() {
        // Half-way to the edge, where a test of "20 %" against "21 %" decides either way
        // about half the time.
        for seed in 0..100 {
            let (d, _) = run(0.205, 0.20, 0.01, 0.99, 300_000, seed);
            assert_ne!(d, Outcome::Fail, "seed {seed}");
        }
    }

    #[test]
    fn a_share_on_the_edge_seldom_passes() {
        // At the upper edge the pass ratio is a martingale: it reaches 1/α (100) rarely.
        let passes = (0..200)
            .filter(|&seed| run(0.21, 0.20, 0.01, 0.99, 100_000, seed).0 == Outcome::Pass)
            .count();
        assert!(passes <= 4, "{passes} of 200 passed at the edge");
    }

    #[test]
    fn a_zero_share_is_shown_by_its_absence_and_any_canary_rules_a_pass_out_slowly() {
        let mut t = BandSprt::new(0.0, 0.01, 0.99).unwrap();
        // Only the upper edge (1 %) matters: 0 of n shows the share below it once
        // (0.995 / 0.99)^n ≥ 100, n ≥ 917.
        assert_eq!(t.observe_many(0, 900), Outcome::Inconclusive);
        assert_eq!(t.observe_many(0, 100), Outcome::Pass);
        let mut t = BandSprt::new(0.0, 0.01, 0.99).unwrap();
        // 20 % of draws: far beyond the upper edge.
        assert_eq!(t.observe_many(40, 200), Outcome::Fail);
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(BandSprt::new(1.5, 0.01, 0.99).is_err());
        assert!(BandSprt::new(0.2, 0.0, 0.99).is_err());
        assert!(BandSprt::new(0.2, 0.01, 1.0).is_err());
    }
}
