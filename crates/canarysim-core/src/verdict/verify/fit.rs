//! Chi-square goodness of fit and homogeneity.

use serde::Serialize;
use statrs::distribution::{ChiSquared, ContinuousCDF};

/// Result of a chi-square goodness-of-fit test.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GofResult {
    /// Pearson's statistic `Σ (O − E)² / E` over arms with positive expected share;
    /// `+∞` if an arm that should get no traffic got some (`null` in JSON).
    pub statistic: f64,
    /// Degrees of freedom: arms with positive expected share, minus one.
    pub dof: u64,
    /// Upper-tail probability of the statistic under the expected shares.
    pub p_value: f64,
    /// Smallest expected count among arms with positive share. Below ~5 (Cochran's
    /// rule) the chi-square approximation is rough; prefer the intervals then.
    pub min_expected: f64,
}

/// Pearson chi-square goodness-of-fit of `observed` counts to `expected_shares`.
///
/// * Shares are normalised by their sum, so `[80, 20]` and `[0.8, 0.2]` are the same.
///   Negative or non-finite shares count as 0.
/// * An arm with expected share 0 and observed 0 is skipped (no degree of freedom);
///   an arm with expected share 0 but observed > 0 is conclusive: `p = 0`.
/// * Lengths need not match: a missing share is 0, a missing count is 0 (so traffic
///   to an arm nobody expected gives `p = 0`).
/// * No traffic at all → statistic 0, `p = 1` (no evidence either way).
///
/// With two arms this is the binomial score test (`χ² = z²`, one dof); see [`binomial_gof`].
pub fn chi_square_gof(observed: &[u64], expected_shares: &[f64]) -> GofResult {
    let arms = observed.len().max(expected_shares.len());
    let obs = |i: usize| observed.get(i).copied().unwrap_or(0);
    let share = |i: usize| {
        expected_shares
            .get(i)
            .copied()
            .filter(|s| s.is_finite() && *s > 0.0)
            .unwrap_or(0.0)
    };
    let share_sum: f64 = (0..arms).map(share).sum();
    let positive = (0..arms).filter(|&i| share(i) > 0.0).count() as u64;
    let dof = positive.saturating_sub(1);
    let total: f64 = (0..arms).map(|i| obs(i) as f64).sum();

    if total == 0.0 {
        return GofResult {
            statistic: 0.0,
            dof,
            p_value: 1.0,
            min_expected: 0.0,
        };
    }

    let mut statistic = 0.0;
    let mut unexpected = false;
    let mut min_expected = f64::INFINITY;
    for i in 0..arms {
        let o = obs(i) as f64;
        let e = if share_sum > 0.0 {
            total * share(i) / share_sum
        } else {
            0.0
        };
        if e <= 0.0 {
            // Traffic where none was expected cannot happen under H0.
            unexpected |= o > 0.0;
            continue;
        }
        min_expected = min_expected.min(e);
        statistic += (o - e) * (o - e) / e;
    }
    if !min_expected.is_finite() {
        min_expected = 0.0;
    }
    if unexpected {
        return GofResult {
            statistic: f64::INFINITY,
            dof,
            p_value: 0.0,
            min_expected,
        };
    }
    // A single arm with all the expected traffic: nothing can deviate.
    let p_value = if dof == 0 {
        1.0
    } else {
        chi_square_p(statistic, dof)
    };
    GofResult {
        statistic,
        dof,
        p_value,
        min_expected,
    }
}

/// Pearson chi-square test of homogeneity: were the two samples `a` and `b` (counts per
/// category, same order) drawn from the same distribution? Categories empty in both are
/// skipped. Either sample empty → `p = 1` (no evidence either way). Used to tell whether two
/// routers split alike (the live router against Envoy).
pub fn chi_square_homogeneity(a: &[u64], b: &[u64]) -> GofResult {
    chi_square_homogeneity_of(&[a, b])
}

/// [`chi_square_homogeneity`] for any number of samples (an r × k table, one row per
/// sample): `(r − 1)(k − 1)` degrees of freedom over the rows and categories that are not
/// empty. Fewer than two non-empty samples → `p = 1`. Used to tell whether the shards of a
/// distributed load saw the same split (`canarysim load merge`).
pub fn chi_square_homogeneity_of(samples: &[&[u64]]) -> GofResult {
    let k = samples.iter().map(|s| s.len()).max().unwrap_or(0);
    let get = |v: &[u64], i: usize| v.get(i).copied().unwrap_or(0) as f64;
    let rows: Vec<(&[u64], f64)> = samples
        .iter()
        .map(|s| (*s, (0..k).map(|i| get(s, i)).sum::<f64>()))
        .filter(|(_, total)| *total > 0.0)
        .collect();
    let columns: Vec<(usize, f64)> = (0..k)
        .map(|i| (i, rows.iter().map(|(s, _)| get(s, i)).sum::<f64>()))
        .filter(|(_, total)| *total > 0.0)
        .collect();
    let n: f64 = rows.iter().map(|(_, total)| total).sum();
    let dof = (rows.len().saturating_sub(1) * columns.len().saturating_sub(1)) as u64;
    if dof == 0 {
        return GofResult {
            statistic: 0.0,
            dof,
            p_value: 1.0,
            min_expected: 0.0,
        };
    }
    let mut statistic = 0.0;
    let mut min_expected = f64::INFINITY;
    for &(i, column) in &columns {
        for &(s, row) in &rows {
            let expected = row * column / n;
            let observed = get(s, i);
            min_expected = min_expected.min(expected);
            statistic += (observed - expected) * (observed - expected) / expected;
        }
    }
    GofResult {
        statistic,
        dof,
        p_value: chi_square_p(statistic, dof),
        min_expected,
    }
}

/// The upper tail of the chi-square distribution (1 where it cannot be computed: no
/// evidence either way).
fn chi_square_p(statistic: f64, dof: u64) -> f64 {
    let p = ChiSquared::new(dof as f64).map_or(f64::NAN, |d| d.sf(statistic));
    if p.is_nan() { 1.0 } else { p.clamp(0.0, 1.0) }
}

/// Two-arm case: `k` canary hits out of `n` against an expected canary share `p0`.
///
/// Same as `chi_square_gof(&[k, n − k], &[p0, 1 − p0])`, i.e. the two-sided binomial
/// score test (`z = (k − n·p0) / sqrt(n·p0·(1 − p0))`, `χ² = z²`).
pub fn binomial_gof(k: u64, n: u64, p0: f64) -> GofResult {
    let k = k.min(n);
    let p0 = if p0.is_nan() { 0.0 } else { p0.clamp(0.0, 1.0) };
    chi_square_gof(&[k, n - k], &[p0, 1.0 - p0])
}
