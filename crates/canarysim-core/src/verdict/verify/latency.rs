//! Latency recording (HdrHistogram) and the Mann–Whitney U test on latencies.

use hdrhistogram::Histogram;
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, Normal};

/// Largest latency the recorder tracks (hdrhistogram's auto-resize limit); larger
/// values are recorded as this.
pub const MAX_LATENCY_US: u64 = (i64::MAX / 2) as u64;

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Number of recorded values.
    pub count: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Maximum.
    pub max: u64,
    /// Mean.
    pub mean: f64,
}

/// Latency histogram in microseconds: 3 significant digits, auto-resizing.
///
/// Values are exact below 2048 µs and within 0.1 % above; memory stays small
/// whatever the count, so it can take every request of a long run.
#[derive(Debug, Clone)]
pub struct LatencyRecorder {
    hist: Histogram<u64>,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyRecorder {
    /// Empty recorder.
    pub fn new() -> Self {
        // 3 significant digits is always a valid configuration.
        let hist = Histogram::<u64>::new(3).expect("sigfig 3 is valid");
        LatencyRecorder { hist }
    }

    /// Records one latency in microseconds (clamped to [`MAX_LATENCY_US`]).
    pub fn record(&mut self, us: u64) {
        let us = us.min(MAX_LATENCY_US);
        if self.hist.record(us).is_err() {
            self.hist.saturating_record(us);
        }
    }

    /// Records `count` occurrences of one latency (microseconds).
    pub(crate) fn record_n(&mut self, us: u64, count: u64) {
        let us = us.min(MAX_LATENCY_US);
        if self.hist.record_n(us, count).is_err() {
            self.hist.saturating_record_n(us, count);
        }
    }

    /// Number of recorded values.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// Percentile summary (all zeros when empty).
    pub fn summary(&self) -> LatencySummary {
        let h = &self.hist;
        if h.is_empty() {
            return LatencySummary {
                count: 0,
                p50: 0,
                p90: 0,
                p99: 0,
                p999: 0,
                max: 0,
                mean: 0.0,
            };
        }
        LatencySummary {
            count: h.len(),
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
            mean: h.mean(),
        }
    }

    /// Every distinct recorded value (bucket) in ascending order with its count.
    pub fn counts(&self) -> Vec<(u64, u64)> {
        self.hist
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect()
    }

    /// Adds all values recorded by `other`.
    /// The histogram as HdrHistogram's V2 encoding (uncompressed), in base64: exact, and
    /// read by every HdrHistogram library. The same counts give the same text, however
    /// the histogram grew: it is written with one range, 2⁴⁰ µs (12 days, beyond any
    /// load's latency), unless a value needs more.
    pub fn to_base64_v2(&self) -> String {
        use base64::Engine;
        use hdrhistogram::serialization::Serializer;
        let high = self.hist.max().max(1 << 40);
        let mut fitted = Histogram::<u64>::new_with_bounds(1, high, 3)
            .expect("bounds from 1 to 2^40 or more at 3 digits are valid");
        fitted.auto(true);
        fitted
            .add(&self.hist)
            .expect("the range holds every value recorded");
        let mut bytes = Vec::new();
        hdrhistogram::serialization::V2Serializer::new()
            .serialize(&fitted, &mut bytes)
            .expect("writing to a Vec cannot fail");
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    /// A histogram [`LatencyRecorder::to_base64_v2`] wrote (V2, compressed or not); what is
    /// wrong with the text, if it is not one.
    pub fn from_base64_v2(text: &str) -> Result<LatencyRecorder, String> {
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|e| format!("not base64: {e}"))?;
        let mut hist: Histogram<u64> = hdrhistogram::serialization::Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| format!("not an HdrHistogram V2 encoding: {e:?}"))?;
        hist.auto(true);
        Ok(LatencyRecorder { hist })
    }

    pub fn merge(&mut self, other: &LatencyRecorder) {
        if self.hist.add(&other.hist).is_err() {
            // Only if resizing failed: fall back to clamped re-recording.
            for v in other.hist.iter_recorded() {
                self.hist
                    .saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
    }
}

/// Result of a Mann–Whitney U test of sample `a` against sample `b`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MannWhitney {
    /// `U` for `a`: number of pairs with `a > b`, ties counting one half.
    pub u: f64,
    /// Normal-approximation z (tie-corrected, continuity-corrected); positive when
    /// `a` tends to be larger (e.g. the canary is slower).
    pub z: f64,
    /// Two-sided p-value from `z`.
    pub p_value_two_sided: f64,
    /// Probability of superiority `P(a > b) + ½·P(a = b) = U / (n_a·n_b)`; 0.5 = no shift.
    pub effect: f64,
    /// Values of `a` used (NaN dropped).
    pub n_a: u64,
    /// Values of `b` used (NaN dropped).
    pub n_b: u64,
}

/// Mann–Whitney U (Wilcoxon rank-sum) test, e.g. canary latencies `a` vs stable `b`.
///
/// Ranks by sorting, O(n log n), with mid-ranks for ties; the variance uses the
/// tie correction `n_a·n_b/12 · ((N+1) − Σ(t³−t)/(N(N−1)))` and `z` a continuity
/// correction of ½ (as R's `wilcox.test(exact = FALSE)` and scipy). The normal
/// approximation is good for `n_a, n_b ≳ 20`; below that the p-value is rough.
///
/// NaNs are dropped; an empty side gives `p = 1`, effect 0.5. For latencies recorded
/// in histograms use [`mann_whitney_recorded`], which ranks every recorded value (a thinned
/// sample of sorted values is not a sample: it makes the test conservative).
pub fn mann_whitney(a: &[f64], b: &[f64]) -> MannWhitney {
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .filter(|x| !x.is_nan())
        .map(|&x| (x, true))
        .chain(b.iter().filter(|x| !x.is_nan()).map(|&x| (x, false)))
        .collect();
    all.sort_unstable_by(|x, y| x.0.total_cmp(&y.0));
    // Runs of equal values become one tied value with its count on each side.
    let mut tied: Vec<(u64, u64)> = Vec::new();
    let mut i = 0;
    while i < all.len() {
        // `==` (not total order) so that -0.0 and 0.0 tie.
        let mut j = i + 1;
        while j < all.len() && all[j].0 == all[i].0 {
            j += 1;
        }
        let in_a = all[i..j].iter().filter(|v| v.1).count() as u64;
        tied.push((in_a, (j - i) as u64 - in_a));
        i = j;
    }
    mann_whitney_tied(&tied)
}

/// [`mann_whitney`] on two latency histograms, from their counts: every recorded value
/// takes part (no thinning), values in one histogram bucket tie.
pub fn mann_whitney_recorded(a: &LatencyRecorder, b: &LatencyRecorder) -> MannWhitney {
    let (ca, cb) = (a.counts(), b.counts());
    let mut tied = Vec::with_capacity(ca.len() + cb.len());
    let (mut i, mut j) = (0, 0);
    while i < ca.len() || j < cb.len() {
        let next = match (ca.get(i), cb.get(j)) {
            (Some(x), Some(y)) if x.0 == y.0 => {
                i += 1;
                j += 1;
                (x.1, y.1)
            }
            (Some(x), Some(y)) if x.0 < y.0 => {
                i += 1;
                (x.1, 0)
            }
            (Some(x), None) => {
                i += 1;
                (x.1, 0)
            }
            (_, Some(y)) => {
                j += 1;
                (0, y.1)
            }
            (None, None) => unreachable!("loop condition"),
        };
        tied.push(next);
    }
    mann_whitney_tied(&tied)
}

/// The test over distinct values in ascending order, each as (count in a, count in b).
fn mann_whitney_tied(tied: &[(u64, u64)]) -> MannWhitney {
    let n_a: u64 = tied.iter().map(|t| t.0).sum();
    let n_b: u64 = tied.iter().map(|t| t.1).sum();
    if n_a == 0 || n_b == 0 {
        return MannWhitney {
            u: 0.0,
            z: 0.0,
            p_value_two_sided: 1.0,
            effect: 0.5,
            n_a,
            n_b,
        };
    }
    let mut rank_sum_a = 0.0;
    let mut tie_term = 0.0;
    let mut below = 0.0;
    for &(in_a, in_b) in tied {
        let t = (in_a + in_b) as f64;
        let mid_rank = below + (t + 1.0) / 2.0;
        rank_sum_a += mid_rank * in_a as f64;
        tie_term += t * t * t - t;
        below += t;
    }

    let (na, nb) = (n_a as f64, n_b as f64);
    let nf = na + nb;
    let u = rank_sum_a - na * (na + 1.0) / 2.0;
    let mean = na * nb / 2.0;
    let var = na * nb / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)));
    let (z, p) = if var > 0.0 {
        let diff = u - mean;
        let corrected = (diff.abs() - 0.5).max(0.0);
        let z = corrected.copysign(diff) / var.sqrt();
        let p = 2.0 * Normal::standard().sf(z.abs());
        (z, p.clamp(0.0, 1.0))
    } else {
        // Every value identical: no evidence of a shift.
        (0.0, 1.0)
    };
    MannWhitney {
        u,
        z,
        p_value_two_sided: p,
        effect: u / (na * nb),
        n_a,
        n_b,
    }
}
