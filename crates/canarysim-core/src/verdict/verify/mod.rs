//! Statistics for verifying a canary split: counts → intervals, tests, verdict.
//!
//! # Why this module exists
//!
//! Argo Rollouts sets a weight (say 20 %) on an Istio `VirtualService` and then
//! moves on: nothing in the rollout ever checks that 20 % of the traffic really
//! reached the canary. The Gateway API conformance suite does check weighted
//! routing, but only loosely (it accepts a share within ±5 percentage points
//! after roughly 500 requests). A point estimate such as "19.6 %" says nothing
//! about whether the split is right; what matters is how *uncertain* it is.
//!
//! So canarysim reports confidence intervals, never bare shares, and it is honest
//! about the unit of randomisation: when the mesh picks a backend per
//! *connection* (HTTP/1.1 keep-alive, HTTP/2, gRPC, TCP routes), 100 000 requests
//! over 20 connections are 20 coin flips, not 100 000, and the interval says so.
//!
//! # Contents
//!
//! One file per family, re-exported here:
//!
//! * `interval.rs` — proportion intervals: [`wilson`], [`clopper_pearson`],
//!   [`proportion_interval`]; and error rates: [`error_rate`];
//! * `fit.rs` — goodness of fit: [`chi_square_gof`], [`binomial_gof`],
//!   [`chi_square_homogeneity`], [`chi_square_homogeneity_of`];
//! * `split.rs` — the verdict: [`split_verdict`] with [`SplitUnit`], and its three
//!   [`Outcome`]s;
//! * `sequential.rs` and `band.rs` — sequential testing: [`Sprt`], [`TwoSidedSprt`], and
//!   [`BandSprt`], whose decisions are the verdict's;
//! * `plan.rs` — planning: [`requests_needed`], [`fixed_sample_size_for_test`], and
//!   [`plan`]: the sample a verdict needs to decide;
//! * `latency.rs` — latency: [`LatencyRecorder`], [`mann_whitney`].
//!
//! Everything here is a pure function of its inputs (no I/O, no printing, no
//! randomness) and no input makes it panic: degenerate inputs give the honest
//! degenerate answer (no data → the interval `[0, 1]`, p-value 1, and so on).
//! All distribution functions (normal, beta, chi-square) come from `statrs`; the
//! only local numerics is a bounded bisection that inverts `statrs`'s beta CDF for
//! Clopper–Pearson, because `statrs` `Beta::inverse_cdf` can hang (see
//! [`clopper_pearson`]).

mod band;
mod fit;
mod interval;
mod latency;
pub mod plan;
mod sequential;
mod split;

pub use band::BandSprt;
pub use fit::*;
pub use interval::*;
pub use latency::*;
pub use plan::{fixed_sample_size_for_test, requests_needed};
pub use sequential::*;
pub use split::*;

use statrs::distribution::{ContinuousCDF, Normal};

/// Confidence level used where the caller does not choose one ([`error_rate`]).
pub const DEFAULT_CONFIDENCE: f64 = 0.95;

// ---------------------------------------------------------------------------
// Small numeric helpers
// ---------------------------------------------------------------------------

/// Upper-tail standard normal quantile: the `z` with `P(Z > z) = tail`.
///
/// Computed as `-Φ⁻¹(tail)` rather than `Φ⁻¹(1 - tail)` so that tiny tails
/// (99.9999 % confidence) do not lose precision in `1 - tail`.
fn upper_z(tail: f64) -> f64 {
    if tail.is_nan() || tail <= 0.0 {
        f64::INFINITY
    } else if tail >= 1.0 {
        f64::NEG_INFINITY
    } else {
        -Normal::standard().inverse_cdf(tail)
    }
}

/// Two-sided critical value `z_{1-(1-confidence)/2}`.
///
/// `confidence >= 1` or NaN gives `+∞` (an uninformative `[0, 1]` interval);
/// `confidence <= 0` gives `0` (a degenerate interval at the point estimate).
fn two_sided_z(confidence: f64) -> f64 {
    if confidence.is_nan() || confidence >= 1.0 {
        f64::INFINITY
    } else if confidence <= 0.0 {
        0.0
    } else {
        upper_z((1.0 - confidence) / 2.0)
    }
}

/// `ceil(x)` as a `u64`, saturating: NaN and `+∞` mean "cannot be done" → `u64::MAX`.
fn ceil_u64(x: f64) -> u64 {
    if x.is_nan() || x >= u64::MAX as f64 {
        u64::MAX
    } else if x <= 0.0 {
        0
    } else {
        x.ceil() as u64
    }
}

/// Formats a fraction in `[0, 1]` as a percentage without trailing zeros ("95", "99.9").
fn pct(x: f64) -> String {
    let s = format!("{:.3}", x * 100.0);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// Formats a plain number without trailing zeros ("1", "0.5").
fn num(x: f64) -> String {
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_pcg::Pcg64Mcg;
    use statrs::distribution::Beta;
    use statrs::distribution::{Binomial, ChiSquared, DiscreteCDF};

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    fn assert_interval(got: Interval, lo: f64, hi: f64, tol: f64) {
        assert!(
            close(got.lo, lo, tol) && close(got.hi, hi, tol),
            "got [{}, {}], want [{lo}, {hi}] ± {tol}",
            got.lo,
            got.hi
        );
    }

    /// Exact binomial draw by inverting statrs' Binomial CDF with bisection
    /// (bracket from the normal approximation, widened if needed).
    fn binomial_draw(rng: &mut Pcg64Mcg, n: u64, p: f64) -> u64 {
        let dist = Binomial::new(p, n).unwrap();
        let u: f64 = rng.random();
        let mean = n as f64 * p;
        let sd = (mean * (1.0 - p)).sqrt();
        let mut lo = (mean - 12.0 * sd).max(0.0) as u64; // cdf(lo) < u (checked below)
        let mut hi = ((mean + 12.0 * sd).ceil() as u64).min(n); // cdf(hi) >= u
        if lo > 0 && dist.cdf(lo) >= u {
            lo = 0;
        }
        if dist.cdf(hi) < u {
            hi = n;
        }
        if dist.cdf(lo) >= u {
            return lo;
        }
        // Invariant: cdf(lo) < u <= cdf(hi); answer is the smallest x with cdf(x) >= u.
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if dist.cdf(mid) >= u {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        hi
    }

    // ---- intervals ---------------------------------------------------------

    #[test]
    fn wilson_textbook_values() {
        // k=20, n=100, 95 %: R prop.test(20, 100, correct = FALSE) → 0.1333669 0.2888292
        // (also recomputed with mpmath at 30 digits: 0.133366933331, 0.288829165593).
        assert_interval(wilson(20, 100, 0.95), 0.133_366_9, 0.288_829_2, 1e-6);
        // Hmisc::binconf(12, 50) Wilson: 0.142974 0.374127.
        assert_interval(wilson(12, 50, 0.95), 0.142_974, 0.374_127, 1e-6);
        // Edges (mpmath): k=0 and k=n of 10.
        assert_interval(wilson(0, 10, 0.95), 0.0, 0.277_532_799_863, 1e-9);
        assert_interval(wilson(10, 10, 0.95), 0.722_467_200_137, 1.0, 1e-9);
    }

    #[test]
    fn clopper_pearson_textbook_values() {
        // R binom.test(20, 100)$conf.int → 0.1266556 0.2918427.
        assert_interval(
            clopper_pearson(20, 100, 0.95),
            0.126_655_6,
            0.291_842_7,
            1e-6,
        );
        // R binom.test(9, 24) → 0.1879929 0.5940636.
        assert_interval(clopper_pearson(9, 24, 0.95), 0.187_992_9, 0.594_063_6, 1e-6);
        // R binom.test(12, 50, conf.level = 0.9) → 0.1447182 0.3596557.
        assert_interval(
            clopper_pearson(12, 50, 0.90),
            0.144_718_2,
            0.359_655_7,
            1e-6,
        );
        // R binom.test(1, 1497, conf.level = 0.9) → 3.426347e-05 3.164954e-03.
        assert_interval(
            clopper_pearson(1, 1497, 0.90),
            3.426_347e-5,
            3.164_954e-3,
            1e-8,
        );
        // Edges: k=0 → [0, 1 − (α/2)^(1/n)], k=n → [(α/2)^(1/n), 1].
        let edge = 1.0 - 0.025f64.powf(1.0 / 10.0);
        assert_interval(clopper_pearson(0, 10, 0.95), 0.0, edge, 1e-9);
        assert_interval(clopper_pearson(10, 10, 0.95), 1.0 - edge, 1.0, 1e-9);
    }

    #[test]
    fn clopper_pearson_large_counts_is_self_consistent() {
        // No R value at hand for n = 100 000; check the defining equations instead:
        // P(X >= k | lo) = α/2 and P(X <= k | hi) = α/2.
        let (k, n) = (20_000u64, 100_000u64);
        let ci = clopper_pearson(k, n, 0.999);
        let at_lo = Binomial::new(ci.lo, n).unwrap();
        let at_hi = Binomial::new(ci.hi, n).unwrap();
        assert!(close(at_lo.sf(k - 1), 0.0005, 1e-6), "{}", at_lo.sf(k - 1));
        assert!(close(at_hi.cdf(k), 0.0005, 1e-6), "{}", at_hi.cdf(k));
        // And it is close to Wilson at this size.
        let w = wilson(k, n, 0.999);
        assert!(close(ci.lo, w.lo, 1e-4) && close(ci.hi, w.hi, 1e-4));
    }

    #[test]
    fn proportion_interval_rule() {
        assert_eq!(
            proportion_interval(20, 99, 0.95).method,
            IntervalMethod::ClopperPearson
        );
        assert_eq!(
            proportion_interval(9, 1000, 0.95).method,
            IntervalMethod::ClopperPearson
        );
        assert_eq!(
            proportion_interval(991, 1000, 0.95).method,
            IntervalMethod::ClopperPearson
        );
        let p = proportion_interval(20, 100, 0.95);
        assert_eq!(p.method, IntervalMethod::Wilson);
        assert_eq!(p.estimate, 0.2);
        assert_eq!(p.interval, wilson(20, 100, 0.95));
    }

    #[test]
    fn degenerate_inputs_do_not_panic() {
        for conf in [f64::NAN, -1.0, 0.0, 0.5, 1.0, 2.0, f64::INFINITY] {
            for (k, n) in [
                (0, 0),
                (5, 0),
                (0, 1),
                (1, 1),
                (7, 3),
                (u64::MAX, u64::MAX),
                (1, u64::MAX),
            ] {
                for iv in [
                    wilson(k, n, conf),
                    clopper_pearson(k, n, conf),
                    proportion_interval(k, n, conf).interval,
                ] {
                    assert!(
                        0.0 <= iv.lo && iv.lo <= iv.hi && iv.hi <= 1.0,
                        "{k}/{n} @ {conf}: {iv:?}"
                    );
                }
            }
        }
        assert_eq!(wilson(0, 0, 0.95), Interval::FULL);
        assert_eq!(clopper_pearson(3, 0, 0.95), Interval::FULL);
        assert_eq!(wilson(3, 10, 1.0), Interval::FULL);
        assert_eq!(error_rate(0, 0), (0.0, Interval::FULL));
        let _ = chi_square_gof(&[], &[]);
        let _ = chi_square_gof(&[1, 2], &[f64::NAN, -1.0, f64::INFINITY]);
        let _ = mann_whitney(&[], &[f64::NAN]);
        let _ = split_verdict(&[], SplitUnit::Connection, &[5], &[], f64::NAN, f64::NAN);
        let _ = requests_needed(f64::NAN, f64::NAN, f64::NAN);
        let _ = fixed_sample_size_for_test(f64::NAN, 2.0, 0.0, 1.0);
        for conf in [1.0 - 1e-15, 1.0 - 1e-12, 1e-300] {
            for (k, n) in [
                (100, 100_000),
                (5, 50),
                (9, 100_000_000),
                (3, 1_000_000_000_000),
            ] {
                let iv = clopper_pearson(k, n, conf);
                assert!(
                    0.0 <= iv.lo && iv.lo <= iv.hi && iv.hi <= 1.0,
                    "{k}/{n} @ {conf}: {iv:?}"
                );
            }
        }
        let g = chi_square_gof(&[u64::MAX / 4, 1, 7], &[1.0, 1.0, 1.0]);
        assert_eq!(g.p_value, 0.0);
        let mut r = LatencyRecorder::new();
        r.record(u64::MAX);
        r.record(0);
        assert_eq!(r.count(), 2);
        assert!(Sprt::new(0.2, 0.2, 0.05, 0.05).is_err());
        assert!(Sprt::new(0.2, 0.3, 0.6, 0.5).is_err());
        assert!(TwoSidedSprt::new(0.5, 0.6, 0.05, 0.05).is_err());
        assert!(TwoSidedSprt::new(0.99, 0.02, 0.05, 0.05).is_ok()); // only the lower side
    }

    #[test]
    fn wilson_coverage_at_20_percent() {
        let (n, p) = (100_000u64, 0.2);
        // Exact coverage: sum the binomial pmf over the k whose interval covers p.
        let dist = Binomial::new(p, n).unwrap();
        let ks: Vec<u64> = (18_000..22_000)
            .filter(|&k| wilson(k, n, 0.95).contains(p))
            .collect();
        let (k_min, k_max) = (ks[0], ks[ks.len() - 1]);
        assert_eq!(ks.len() as u64, k_max - k_min + 1, "covering k form a run");
        let exact = dist.cdf(k_max) - dist.cdf(k_min - 1);
        assert!((0.945..=0.955).contains(&exact), "exact coverage {exact}");

        // Monte Carlo, one Binomial(100 000, 0.2) draw per seed. 4 000 seeds rather
        // than 1 000: with 1 000 the 94–96 % band is only ±1.45 standard errors wide
        // and a correct interval would fail it ~15 % of the time.
        let seeds = 4_000u64;
        let covered = (0..seeds)
            .filter(|&s| {
                let mut rng = Pcg64Mcg::seed_from_u64(s);
                let k = binomial_draw(&mut rng, n, p);
                wilson(k, n, 0.95).contains(p)
            })
            .count();
        let rate = covered as f64 / seeds as f64;
        eprintln!(
            "Wilson 95 % coverage at p = 0.2, n = 1e5: exact {exact:.4}, Monte Carlo {rate:.4}"
        );
        assert!((0.94..=0.96).contains(&rate), "coverage {rate}");
    }

    #[test]
    fn hundred_thousand_requests_pin_the_share() {
        let ci = wilson(20_000, 100_000, 0.999);
        assert!(ci.contains(0.2));
        assert!(ci.is_inside(0.19, 0.21), "{ci:?}");
        // Half-width ≈ 3.29·sqrt(0.16/1e5) ≈ 0.42 points.
        assert!(
            close(ci.width() / 2.0, 0.004_16, 0.000_05),
            "{}",
            ci.width()
        );
    }

    #[test]
    fn clopper_pearson_huge_n_terminates_and_is_right() {
        // statrs Beta::inverse_cdf hangs on Beta(10, 1e8); we must not.
        // Poisson limit (relative error O(k/n) = 1e-7 here): lo = χ²_{2k}(α/2)/2n,
        // hi = χ²_{2k+2}(1 − α/2)/2n.
        let (k, n) = (9u64, 100_000_000u64);
        let ci = clopper_pearson(k, n, 0.95);
        let lo = ChiSquared::new(18.0).unwrap().inverse_cdf(0.025) / (2.0 * n as f64);
        let hi = ChiSquared::new(20.0).unwrap().inverse_cdf(0.975) / (2.0 * n as f64);
        assert!(
            close(ci.lo / lo, 1.0, 1e-6) && close(ci.hi / hi, 1.0, 1e-6),
            "{ci:?} vs [{lo}, {hi}]"
        );
        assert_eq!(error_rate(k, n).1, ci);
        // k = 1: closed form 1 − (1 − α/2)^(1/n) for the lower bound.
        let ci = clopper_pearson(1, 1_000_000_000, 0.95);
        assert!(close(ci.lo / -(0.975f64.ln() / 1e9).exp_m1(), 1.0, 1e-12));
        assert!(ci.lo > 0.0 && ci.hi > ci.lo && ci.hi < 1e-8, "{ci:?}");
    }

    #[test]
    fn beta_bisection_matches_high_precision_references() {
        // mpmath (50 digits), I_x(3, 1e5) = q via the binomial-sum identity.
        // statrs Beta::inverse_cdf gives 6.18671e-6 for q = 0.025 (1.2e-5 off).
        let d = Beta::new(3.0, 1e5).unwrap();
        for (q, want) in [
            (0.0005, 1.497_022_408_508_957_5e-6),
            (0.025, 6.186_640_225_262_934e-6),
            (0.25, 1.727_267_227_689_350_8e-5),
            (0.5, 2.673_997_821_577_457_5e-5),
        ] {
            let y = beta_quantile_bisect(&d, q);
            assert!(close(y / want, 1.0, 1e-9), "q={q}: {y} vs {want}");
        }
        // Round trip through statrs's CDF for a spread of shapes and tails.
        for (a, b) in [
            (2.0, 5.0),
            (20.0, 81.0),
            (21.0, 80.0),
            (1e5, 3.0),
            (500.0, 1500.0),
            (2.0, 1e9),
        ] {
            let d = Beta::new(a, b).unwrap();
            for q in [1e-9, 0.0005, 0.025, 0.25, 0.5] {
                let x = beta_quantile_bisect(&d, q);
                assert!(
                    close(d.cdf(x) / q, 1.0, 1e-9),
                    "Beta({a}, {b}) q={q}: x={x}"
                );
            }
        }
        // Lower tails of the mirrored distribution give precise upper bounds:
        // Beta(2, 5) at 1 − 1e-9 is 0.98890373913603232 (mpmath, for the f64 tail).
        let t = 1.0 - (1.0 - 1e-9f64);
        let x = 1.0 - beta_quantile_bisect(&Beta::new(5.0, 2.0).unwrap(), t);
        assert!(close(x, 0.988_903_739_136_032_3, 1e-14), "{x}");
        // Far tails statrs panics/hangs on: monotone, finite, in range.
        let d = Beta::new(200.0, 2.0).unwrap();
        let xs: Vec<f64> = [1e-300, 1e-100, 1e-60, 1e-20]
            .iter()
            .map(|&q| beta_quantile_bisect(&d, q))
            .collect();
        assert!(
            xs.windows(2)
                .all(|w| 0.0 < w[0] && w[0] < w[1] && w[1] < 1.0),
            "{xs:?}"
        );
    }

    // ---- chi-square --------------------------------------------------------

    #[test]
    fn chi_square_known_value() {
        // Expected [20, 20, 60]: χ² = 4/20 + 4/20 + 0 = 0.4, dof 2, p = e^(−0.2).
        let g = chi_square_gof(&[18, 22, 60], &[0.2, 0.2, 0.6]);
        assert!(close(g.statistic, 0.4, 1e-12));
        assert_eq!(g.dof, 2);
        assert!(close(g.p_value, (-0.2f64).exp(), 1e-10), "{}", g.p_value);
        assert_eq!(g.min_expected, 20.0);
        // Shares are normalised.
        assert_eq!(chi_square_gof(&[18, 22, 60], &[20.0, 20.0, 60.0]), g);
    }

    #[test]
    fn chi_square_two_arms_is_binomial_score_test() {
        // k=230 of n=1000 at p0=0.2: z = 30/sqrt(160) = 2.3717, χ² = 5.625, p = 0.017706066 (mpmath).
        let g = binomial_gof(230, 1000, 0.2);
        assert!(close(g.statistic, 5.625, 1e-9));
        assert_eq!(g.dof, 1);
        assert!(close(g.p_value, 0.017_706_065_807, 1e-9), "{}", g.p_value);
        assert_eq!(g, chi_square_gof(&[230, 770], &[0.2, 0.8]));
    }

    #[test]
    fn chi_square_zero_shares() {
        // Arm expected 0, observed 0: skipped.
        let g = chi_square_gof(&[18, 22, 60, 0], &[0.2, 0.2, 0.6, 0.0]);
        assert_eq!(g.dof, 2);
        assert!(close(g.p_value, (-0.2f64).exp(), 1e-10));
        // Arm expected 0, observed > 0: impossible under H0.
        let g = chi_square_gof(&[18, 22, 59, 1], &[0.2, 0.2, 0.6, 0.0]);
        assert_eq!(g.p_value, 0.0);
        assert!(g.statistic.is_infinite());
        // Traffic to an arm with no share at all (length mismatch) is the same.
        assert_eq!(chi_square_gof(&[90, 10], &[1.0]).p_value, 0.0);
        // All traffic where it should be, single arm.
        assert_eq!(chi_square_gof(&[100, 0], &[1.0, 0.0]).p_value, 1.0);
        // No traffic.
        assert_eq!(chi_square_gof(&[0, 0], &[0.5, 0.5]).p_value, 1.0);
    }

    // ---- SPRT ---------------------------------------------------------------

    /// Runs `make()` to a decision on Bernoulli(`p_true`) draws for each seed;
    /// returns (average samples, share of runs where `wrong(decision)`).
    fn simulate<T, D: Copy>(
        seeds: u64,
        p_true: f64,
        make: impl Fn() -> T,
        step: impl Fn(&mut T, bool) -> D,
        done: impl Fn(D) -> bool,
        wrong: impl Fn(D) -> bool,
    ) -> (f64, f64) {
        let (mut total, mut errors) = (0u64, 0u64);
        for seed in 0..seeds {
            let mut rng = Pcg64Mcg::seed_from_u64(seed);
            let mut test = make();
            let mut n = 0u64;
            loop {
                n += 1;
                let d = step(&mut test, rng.random::<f64>() < p_true);
                if done(d) {
                    errors += u64::from(wrong(d));
                    break;
                }
                assert!(n < 1_000_000, "SPRT did not stop");
            }
            total += n;
        }
        (total as f64 / seeds as f64, errors as f64 / seeds as f64)
    }

    #[test]
    fn sprt_bounds_and_llr() {
        let mut s = Sprt::new(0.2, 0.22, 0.05, 0.05).unwrap();
        assert!(close(s.upper_bound(), (0.95f64 / 0.05).ln(), 1e-12));
        assert!(close(s.lower_bound(), (0.05f64 / 0.95).ln(), 1e-12));
        s.observe(true);
        s.observe(false);
        let want = (0.22f64 / 0.2).ln() + (0.78f64 / 0.8).ln();
        assert!(close(s.llr(), want, 1e-12));
        assert_eq!(s.decision(), SprtDecision::Continue);
        // A batch far above p1 decides H1 and the decision sticks.
        assert_eq!(s.observe_many(3_000, 10_000), SprtDecision::AcceptH1);
        let n = s.samples();
        assert_eq!(s.observe_many(0, 1_000_000), SprtDecision::AcceptH1);
        assert_eq!(s.samples(), n);
    }

    #[test]
    fn sprt_beats_fixed_sample_size() {
        let (p0, p1, alpha, beta) = (0.20, 0.22, 0.01, 0.01);
        let seeds = 400;
        // Error slack: nominal + 3 binomial standard errors over `seeds` runs.
        let slack = |e: f64| e + 3.0 * (e * (1.0 - e) / seeds as f64).sqrt();

        // One-sided SPRT vs the one-sided fixed test (two-sided formula at 2α).
        let fixed_one = fixed_sample_size_for_test(p0, p1, 2.0 * alpha, beta);
        let make = || Sprt::new(p0, p1, alpha, beta).unwrap();
        let step = |s: &mut Sprt, x: bool| s.observe(x);
        let done = |d: SprtDecision| d != SprtDecision::Continue;
        let (n_h0, err_h0) = simulate(seeds, p0, make, step, done, |d| d == SprtDecision::AcceptH1);
        let (n_h1, err_h1) = simulate(seeds, p1, make, step, done, |d| d == SprtDecision::AcceptH0);
        eprintln!(
            "one-sided: fixed {fixed_one}; SPRT avg {n_h0:.0} (truth p0, err {err_h0}), \
             {n_h1:.0} (truth p1, err {err_h1}); Wald ASN {:.0} / {:.0}",
            make().expected_samples_h0(),
            make().expected_samples_h1()
        );
        assert!(n_h0 <= 0.5 * fixed_one as f64, "{n_h0} vs {fixed_one}");
        assert!(n_h1 <= 0.5 * fixed_one as f64, "{n_h1} vs {fixed_one}");
        assert!(
            err_h0 <= slack(alpha) && err_h1 <= slack(beta),
            "{err_h0} {err_h1}"
        );
        // Wald's average-sample-number approximation agrees with the simulation.
        assert!(close(n_h0 / make().expected_samples_h0(), 1.0, 0.15));
        assert!(close(n_h1 / make().expected_samples_h1(), 1.0, 0.15));

        // Two-sided canary check vs the two-sided fixed test.
        let fixed_two = fixed_sample_size_for_test(p0, p1, alpha, beta);
        let make = || TwoSidedSprt::new(p0, p1 - p0, alpha, beta).unwrap();
        let step = |s: &mut TwoSidedSprt, x: bool| s.observe(x);
        let done = |d: SplitCheck| d != SplitCheck::Continue;
        let (m_set, err_set) = simulate(seeds, p0, make, step, done, |d| d == SplitCheck::Differs);
        let (m_off, err_off) = simulate(seeds, p1, make, step, done, |d| d == SplitCheck::Matches);
        eprintln!(
            "two-sided: fixed {fixed_two}; SPRT avg {m_set:.0} (truth = set, err {err_set}), \
             {m_off:.0} (truth = set + delta, err {err_off})"
        );
        // Off by delta: at most half the fixed test.
        assert!(m_off <= 0.5 * fixed_two as f64, "{m_off} vs {fixed_two}");
        // Truth at `set`: "matches" waits for both sides, so it costs more than half
        // (≈ 0.54 measured); still well below the fixed test.
        assert!(m_set <= 0.6 * fixed_two as f64, "{m_set} vs {fixed_two}");
        // Averaged over the two situations, at most half.
        assert!((m_set + m_off) / 2.0 <= 0.5 * fixed_two as f64);
        assert!(
            err_set <= slack(alpha) && err_off <= slack(beta),
            "{err_set} {err_off}"
        );
    }

    // ---- planner ----------------------------------------------------------

    #[test]
    fn planner_values() {
        // Classic: ±1 point at 95 %, worst case → 9604.
        assert_eq!(requests_needed(0.5, 0.01, 0.95), 9604);
        assert_eq!(requests_needed(f64::NAN, 0.01, 0.95), 9604);
        // 20 % ± 1 point at 95 %: 1.959964² · 0.16 / 1e-4 = 6146.3 → 6147.
        assert_eq!(requests_needed(0.2, 0.01, 0.95), 6147);
        assert_eq!(requests_needed(0.2, 0.0, 0.95), u64::MAX);
        // ((1.959964·0.4 + 1.644854·sqrt(0.1716)) / 0.02)² = 5368.7 → 5369 (Python statistics.NormalDist).
        assert_eq!(fixed_sample_size_for_test(0.2, 0.22, 0.05, 0.05), 5369);
        assert_eq!(fixed_sample_size_for_test(0.2, 0.22, 0.01, 0.01), 9941);
        // Symmetric in direction of the alternative's sign.
        assert_eq!(
            fixed_sample_size_for_test(0.5, 0.45, 0.05, 0.2),
            fixed_sample_size_for_test(0.5, 0.55, 0.05, 0.2)
        );
        assert_eq!(fixed_sample_size_for_test(0.2, 0.2, 0.05, 0.05), u64::MAX);
    }

    // ---- verdict ------------------------------------------------------------

    #[test]
    fn the_recipe_never_fails_a_fair_splitter_and_fails_a_biased_one() {
        // docs/verdict.md's recipe for a 20 % step: 56,000 requests, ±1 point, 99.9 %. A fair
        // binomial splitter (Envoy, nginx split_clients) at 20 % and a biased one at 22 %,
        // 200 seeded runs each.
        let mut rng = Pcg64Mcg::seed_from_u64(25);
        let n = 56_000;
        let judge = |k: u64| {
            split_verdict(
                &[k, n - k],
                SplitUnit::Request,
                &[k, n - k],
                &[0.2, 0.8],
                1.0,
                0.999,
            )
            .outcome
        };
        let mut fair = [0u32; 3];
        let mut biased = [0u32; 3];
        for _ in 0..200 {
            fair[judge(binomial_draw(&mut rng, n, 0.20)) as usize] += 1;
            biased[judge(binomial_draw(&mut rng, n, 0.22)) as usize] += 1;
        }
        let (pass, fail) = (Outcome::Pass as usize, Outcome::Fail as usize);
        assert_eq!(fair[fail], 0, "{fair:?}");
        assert!(fair[pass] >= 195, "{fair:?}");
        assert!(biased[fail] >= 198, "{biased:?}");
        assert_eq!(biased[pass], 0, "{biased:?}");
    }

    #[test]
    fn split_verdict_has_three_outcomes() {
        let judge = |canary: u64, n: u64| {
            split_verdict(
                &[canary, n - canary],
                SplitUnit::Request,
                &[canary, n - canary],
                &[0.2, 0.8],
                1.0,
                0.999,
            )
        };
        // 50,000 requests at 20.00 %: inside ±1.
        let v = judge(10_000, 50_000);
        assert_eq!(
            (v.outcome, v.passes, v.units_to_decide),
            (Outcome::Pass, true, None)
        );
        // At 22.0 %: the interval [21.4, 22.6] lies wholly above 21 %.
        let v = judge(11_000, 50_000);
        assert_eq!(v.outcome, Outcome::Fail);
        assert!(v.arms[0].outside && !v.arms[0].inside);
        assert!(
            v.explanation.contains("lies wholly outside"),
            "{}",
            v.explanation
        );
        // At 20.6 %: the interval [20.0, 21.2] holds both 20 % and 21.2 %: more data needed.
        let v = judge(10_300, 50_000);
        assert_eq!(v.outcome, Outcome::Inconclusive);
        let total = v
            .units_to_decide
            .expect("a share inside the band decides in time");
        // (3.29 / (0.4 points))² × 0.206 × 0.794 ≈ 110,700 in all.
        assert!((100_000..125_000).contains(&total), "{total}");
        assert_eq!(judge(10_300 * total / 50_000, total).outcome, Outcome::Pass);
        assert!(
            v.explanation.contains("more requests would decide"),
            "{}",
            v.explanation
        );
        // 100 requests, exactly 20 %: inconclusive, and says how many would decide.
        let v = judge(20, 100);
        assert_eq!(v.outcome, Outcome::Inconclusive);
        assert!(v.units_to_decide.unwrap() > 10_000, "{v:?}");
        // Exactly on the edge (21 %): no amount of data at this share decides.
        let v = judge(10_500, 50_000);
        assert_eq!(
            (v.outcome, v.units_to_decide),
            (Outcome::Inconclusive, None)
        );
        // No data.
        let v = split_verdict(&[0, 0], SplitUnit::Request, &[0, 0], &[0.2, 0.8], 1.0, 0.99);
        assert_eq!(v.outcome, Outcome::Inconclusive);
    }

    #[test]
    fn split_verdict_connection_unit_is_honest() {
        // 4 of 20 connections chose the canary; they carried 20 000 of 100 000 requests.
        let v = split_verdict(
            &[4, 16],
            SplitUnit::Connection,
            &[20_000, 80_000],
            &[0.2, 0.8],
            1.0,
            0.95,
        );
        eprintln!("{}", v.explanation);
        assert!(!v.passes);
        // The interval holds 20 %: a right split, unproven; not a wrong one.
        assert_eq!(v.outcome, Outcome::Inconclusive);
        assert!(
            v.explanation.contains("more connections would decide"),
            "{}",
            v.explanation
        );
        assert_eq!(v.effective_n, 20);
        assert_eq!(v.total_requests, 100_000);
        assert_eq!(v.arms[0].effective_count, 4);
        assert_eq!(v.arms[0].observed_share, 0.2);
        assert_eq!(v.arms[0].method, IntervalMethod::ClopperPearson);
        assert!(v.arms[0].interval.width() > 0.3, "{:?}", v.arms[0].interval);
        assert!(v.arms[0].interval.contains(0.2));
        assert!(v.gof.p_value > 0.99); // perfectly consistent, just uninformative
        assert!(
            v.explanation.starts_with(
                "split is made per connection: effective n = 20 connections, not 100000 requests"
            ),
            "{}",
            v.explanation
        );
        // A slow canary: its 40 of 200 connections carried 8 % of the requests. The weight
        // is judged on the connections' choices, and the request share is reported.
        let v = split_verdict(
            &[40, 160],
            SplitUnit::Connection,
            &[8_000, 92_000],
            &[0.2, 0.8],
            10.0,
            0.99,
        );
        assert_eq!(v.arms[0].observed_share, 0.2);
        assert_eq!(v.arms[0].request_share, 0.08);
        assert!(v.arms[0].interval.contains(0.2), "{:?}", v.arms[0].interval);
        assert!(v.gof.p_value > 0.99);
    }

    #[test]
    fn split_verdict_request_unit_passes() {
        let v = split_verdict(
            &[20_000, 80_000],
            SplitUnit::Request,
            &[20_000, 80_000],
            &[0.2, 0.8],
            1.0,
            0.95,
        );
        eprintln!("{}", v.explanation);
        assert!(v.passes, "{}", v.explanation);
        assert_eq!(v.effective_n, 100_000);
        assert!(v.arms.iter().all(|a| a.method == IntervalMethod::Wilson));
        assert!(
            v.explanation.contains("all 2 arms inside"),
            "{}",
            v.explanation
        );
        // Intervals of the two arms mirror each other.
        assert!(close(
            v.arms[0].interval.lo,
            1.0 - v.arms[1].interval.hi,
            1e-12
        ));
        // A real 1.5-point miss fails even with lots of traffic.
        let v = split_verdict(
            &[21_500, 78_500],
            SplitUnit::Request,
            &[21_500, 78_500],
            &[20.0, 80.0],
            1.0,
            0.95,
        );
        assert!(!v.passes);
        assert!(v.gof.p_value < 1e-6);
        // Three arms: Bonferroni per-arm confidence.
        let v = split_verdict(
            &[20_000, 20_000, 60_000],
            SplitUnit::Request,
            &[20_000, 20_000, 60_000],
            &[0.2, 0.2, 0.6],
            1.0,
            0.95,
        );
        assert!(v.passes);
        assert!(close(v.per_arm_confidence, 1.0 - 0.05 / 3.0, 1e-12));
        // No traffic never passes.
        let v = split_verdict(&[0, 0], SplitUnit::Request, &[0, 0], &[0.2, 0.8], 1.0, 0.95);
        assert!(!v.passes);
        assert_eq!(v.arms[0].interval, Interval::FULL);
    }

    // ---- latency ------------------------------------------------------------

    #[test]
    fn latency_percentiles_known_data() {
        let mut r = LatencyRecorder::new();
        for us in 1..=1000 {
            r.record(us);
        }
        let s = r.summary();
        assert_eq!(
            (s.count, s.p50, s.p90, s.p99, s.p999, s.max),
            (1000, 500, 900, 990, 999, 1000)
        );
        assert!(close(s.mean, 500.5, 1e-9));

        // Merge of two halves equals the whole.
        let (mut a, mut b) = (LatencyRecorder::new(), LatencyRecorder::new());
        for us in 1..=1000u64 {
            if us % 2 == 0 {
                a.record(us)
            } else {
                b.record(us)
            }
        }
        a.merge(&b);
        assert_eq!(a.summary(), s);

        // Large values: within 0.1 % (3 significant digits).
        let mut big = LatencyRecorder::new();
        big.record(12_345_678);
        let m = big.summary().max as f64;
        assert!(close(m / 12_345_678.0, 1.0, 1e-3), "{m}");
        assert_eq!(LatencyRecorder::new().summary().count, 0);
    }

    // ---- Mann–Whitney -------------------------------------------------------

    #[test]
    fn mann_whitney_hand_example() {
        // a = [1, 2, 2, 5], b = [2, 3, 4]. Pairs a > b: 5 beats 3, each 2 ties one 2
        // (½ each) → U = 3 + 1 = 4. Ranks: 1, 3, 3, 3, 5, 6, 7 → R_a = 14, U = 14 − 10.
        // Ties: one group of 3 → σ² = 12/12·(8 − 24/42) = 7.42857; z = −1.5/σ = −0.550350;
        // p = 0.582080 (mpmath).
        let m = mann_whitney(&[1.0, 2.0, 2.0, 5.0], &[2.0, 3.0, 4.0]);
        assert_eq!(m.u, 4.0);
        assert!(close(m.z, -0.550_349_539, 1e-8), "{}", m.z);
        assert!(
            close(m.p_value_two_sided, 0.582_079_652, 1e-8),
            "{}",
            m.p_value_two_sided
        );
        assert!(close(m.effect, 4.0 / 12.0, 1e-12));
        // Swapping sides mirrors U and z.
        let r = mann_whitney(&[2.0, 3.0, 4.0], &[1.0, 2.0, 2.0, 5.0]);
        assert_eq!(r.u, 12.0 - 4.0);
        assert!(close(r.z, -m.z, 1e-12) && close(r.p_value_two_sided, m.p_value_two_sided, 1e-12));
        // All tied: no evidence.
        assert_eq!(mann_whitney(&[1.0; 5], &[1.0; 5]).p_value_two_sided, 1.0);
    }

    /// Latency-like sample in µs: base + exponential jitter (mean 3 ms).
    fn latencies(rng: &mut Pcg64Mcg, n: usize, base: f64) -> Vec<f64> {
        (0..n)
            .map(|_| base - 3_000.0 * (1.0 - rng.random::<f64>()).ln())
            .collect()
    }

    #[test]
    fn mann_whitney_detects_shift_and_not_noise() {
        let mut rng = Pcg64Mcg::seed_from_u64(7);
        let stable = latencies(&mut rng, 500, 10_000.0);
        let same = latencies(&mut rng, 500, 10_000.0);
        let slow = latencies(&mut rng, 500, 12_000.0);
        let m = mann_whitney(&same, &stable);
        eprintln!(
            "MW same: p = {:.3}, effect {:.3}",
            m.p_value_two_sided, m.effect
        );
        assert!(m.p_value_two_sided > 0.05, "{m:?}");
        let m = mann_whitney(&slow, &stable);
        eprintln!(
            "MW +2 ms: p = {:.2e}, effect {:.3}",
            m.p_value_two_sided, m.effect
        );
        assert!(m.p_value_two_sided < 1e-6, "{m:?}");
        assert!(m.z > 0.0 && m.effect > 0.6, "{m:?}");

        // Calibration: under no shift, p < 0.05 in about 5 % of 400 seeded runs.
        let rejections = (0..400u64)
            .filter(|&s| {
                let mut rng = Pcg64Mcg::seed_from_u64(1_000 + s);
                let a = latencies(&mut rng, 100, 10_000.0);
                let b = latencies(&mut rng, 100, 10_000.0);
                mann_whitney(&a, &b).p_value_two_sided < 0.05
            })
            .count();
        eprintln!("MW calibration: {rejections} of 400 null runs with p < 0.05");
        assert!((8..=35).contains(&rejections), "{rejections} of 400");
    }

    #[test]
    fn mann_whitney_large_samples_with_ties() {
        // 10^5 per side, values rounded to whole µs so there are many ties.
        let mut rng = Pcg64Mcg::seed_from_u64(11);
        let a: Vec<f64> = latencies(&mut rng, 100_000, 10_000.0)
            .iter()
            .map(|x| x.round())
            .collect();
        let b: Vec<f64> = latencies(&mut rng, 100_000, 10_050.0)
            .iter()
            .map(|x| x.round())
            .collect();
        let m = mann_whitney(&a, &b);
        assert_eq!((m.n_a, m.n_b), (100_000, 100_000));
        assert!(m.z < 0.0 && m.p_value_two_sided < 1e-3, "{m:?}");
        assert!(m.effect < 0.5 && m.effect > 0.45, "{m:?}");
    }

    fn recorded(values: &[f64]) -> LatencyRecorder {
        let mut r = LatencyRecorder::new();
        for v in values {
            r.record(*v as u64);
        }
        r
    }

    #[test]
    fn mann_whitney_on_histograms_equals_the_test_on_bucketed_values() {
        // Histogram buckets are the tied values: ranking the bucketed values one by one
        // must give the very same U, z and p.
        let mut rng = Pcg64Mcg::seed_from_u64(5);
        let a = latencies(&mut rng, 3_000, 10_000.0);
        let b = latencies(&mut rng, 2_000, 10_300.0);
        let (ra, rb) = (recorded(&a), recorded(&b));
        let expand = |r: &LatencyRecorder| -> Vec<f64> {
            r.counts()
                .iter()
                .flat_map(|&(v, n)| std::iter::repeat_n(v as f64, n as usize))
                .collect()
        };
        let by_counts = mann_whitney_recorded(&ra, &rb);
        let by_values = mann_whitney(&expand(&ra), &expand(&rb));
        assert_eq!((by_counts.n_a, by_counts.n_b), (3_000, 2_000));
        assert!(
            close(by_counts.u, by_values.u, 1e-9),
            "{by_counts:?} {by_values:?}"
        );
        assert!(close(by_counts.z, by_values.z, 1e-9));
        assert!(close(
            by_counts.p_value_two_sided,
            by_values.p_value_two_sided,
            1e-9
        ));
        assert!(by_counts.z < 0.0, "a is faster: {by_counts:?}");
    }

    #[test]
    fn mann_whitney_on_large_histograms_is_calibrated() {
        // Beyond 50 000 values per side, under no shift z must still have SD ≈ 1 (thinning
        // the sorted values made it 0.68 and the test conservative).
        let runs = 150u64;
        let zs: Vec<f64> = (0..runs)
            .map(|s| {
                let mut rng = Pcg64Mcg::seed_from_u64(5_000 + s);
                let mut a = LatencyRecorder::new();
                let mut b = LatencyRecorder::new();
                for _ in 0..60_000 {
                    a.record((10_000.0 - 3_000.0 * (1.0 - rng.random::<f64>()).ln()) as u64);
                    b.record((10_000.0 - 3_000.0 * (1.0 - rng.random::<f64>()).ln()) as u64);
                }
                mann_whitney_recorded(&a, &b).z
            })
            .collect();
        let mean = zs.iter().sum::<f64>() / runs as f64;
        let sd = (zs.iter().map(|z| (z - mean).powi(2)).sum::<f64>() / (runs - 1) as f64).sqrt();
        eprintln!("MW on histograms, null: mean z {mean:.3}, SD {sd:.3} over {runs} runs");
        // The SD of a sample SD of 150 normals is about 0.058: 0.8..1.2 is > 3 of those.
        assert!((0.8..1.2).contains(&sd), "SD {sd}");
        assert!(mean.abs() < 0.3, "mean {mean}");
    }

    // ---- error rate ---------------------------------------------------------

    #[test]
    fn error_rate_uses_exact_interval_for_few_errors() {
        let (rate, ci) = error_rate(3, 1000);
        assert_eq!(rate, 0.003);
        assert_eq!(ci, clopper_pearson(3, 1000, 0.95));
        let (rate, ci) = error_rate(0, 500);
        assert_eq!(rate, 0.0);
        assert_eq!(ci.lo, 0.0);
        // Rule of three-ish: 1 − 0.025^(1/500) ≈ 0.00735.
        assert!(close(ci.hi, 1.0 - 0.025f64.powf(1.0 / 500.0), 1e-9));
    }

    #[test]
    fn homogeneity_tells_two_samples_of_one_split_from_two_splits() {
        // 80/20 twice, with sampling noise: the same.
        let same = chi_square_homogeneity(&[40_120, 9_880], &[39_950, 10_050]);
        assert_eq!(same.dof, 1);
        assert!(same.p_value > 0.05, "{same:?}");
        // 80/20 against 77/23 on 50,000 each: clearly not.
        let shifted = chi_square_homogeneity(&[40_000, 10_000], &[38_500, 11_500]);
        assert!(shifted.p_value < 1e-6, "{shifted:?}");
        // Three categories, one empty in both (skipped); an empty sample says nothing.
        let three = chi_square_homogeneity(&[500, 0, 500], &[480, 0, 520]);
        assert_eq!(three.dof, 1);
        assert_eq!(chi_square_homogeneity(&[10, 20], &[0, 0]).p_value, 1.0);
        // With two categories it is the two-proportion z-test: χ² = z².
        let (a, b) = ([300u64, 700], [360u64, 640]);
        let p = (300.0 + 360.0) / 2000.0;
        let z = (0.30 - 0.36) / (p * (1.0 - p) * (2.0 / 1000.0f64)).sqrt();
        let r = chi_square_homogeneity(&a, &b);
        assert!(
            (r.statistic - z * z).abs() < 1e-9,
            "{} vs {}",
            r.statistic,
            z * z
        );
    }

    #[test]
    fn homogeneity_of_three_shards_flags_the_one_that_saw_another_split() {
        let fair: [&[u64]; 3] = [&[16_030, 3_970], &[15_950, 4_050], &[16_010, 3_990]];
        let r = chi_square_homogeneity_of(&fair);
        assert_eq!(r.dof, 2);
        assert!(r.p_value > 0.05, "{r:?}");
        // One shard reached a gateway replica at 22 %.
        let biased: [&[u64]; 3] = [&[16_030, 3_970], &[15_950, 4_050], &[15_600, 4_400]];
        assert!(chi_square_homogeneity_of(&biased).p_value < 1e-6);
        // (r − 1)(k − 1), empty rows and columns left out; one sample says nothing.
        let sparse: [&[u64]; 4] = [&[10, 0, 5], &[0, 0, 0], &[12, 0, 4], &[9, 0, 6]];
        assert_eq!(chi_square_homogeneity_of(&sparse).dof, 2);
        assert_eq!(chi_square_homogeneity_of(&[&[5, 5]]).p_value, 1.0);
        // Two samples: the same as the two-sample test.
        let two = chi_square_homogeneity_of(&[&[300, 700], &[360, 640]]);
        assert_eq!(two, chi_square_homogeneity(&[300, 700], &[360, 640]));
    }
}
