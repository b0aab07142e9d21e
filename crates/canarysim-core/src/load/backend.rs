//! How pods answer, per image (SCENARIOS.md `cluster.backends`): latency, jitter, error rate.
//! Default: 200 after 1 ms.

use std::collections::BTreeMap;
use std::time::Duration;

/// The answer model of one image. Precomputed so that one 64-bit random draw decides both
/// the error and the jitter of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendModel {
    pub latency_us: u64,
    pub jitter_us: u64,
    /// Probability of a 5xx answer, as a threshold on 32 random bits.
    pub error_threshold: u64,
    /// The status of those answers (500 unless the scenario says otherwise; Istio's default
    /// retry policy retries 503 only).
    pub error_status: u16,
}

impl Default for BackendModel {
    fn default() -> Self {
        BackendModel {
            latency_us: 1000,
            jitter_us: 0,
            error_threshold: 0,
            error_status: 500,
        }
    }
}

impl BackendModel {
    pub fn new(latency: Duration, jitter: Duration, error_rate: f64) -> Self {
        BackendModel {
            latency_us: latency.as_micros() as u64,
            jitter_us: jitter.as_micros() as u64,
            error_threshold: (error_rate.clamp(0.0, 1.0) * (1u64 << 32) as f64) as u64,
            error_status: 500,
        }
    }

    /// Whether every answer is the same (no jitter, no errors): then no draw is needed.
    #[inline(always)]
    pub fn deterministic(&self) -> bool {
        self.jitter_us == 0 && self.error_threshold == 0
    }

    /// (latency in µs, is an error) from one random draw: the low 32 bits decide the error,
    /// the high 32 bits the jitter (uniform in latency ± jitter, never below zero).
    #[inline]
    pub fn answer(&self, draw: u64) -> (u64, bool) {
        let error = (draw & 0xffff_ffff) < self.error_threshold;
        let latency = if self.jitter_us == 0 {
            self.latency_us
        } else {
            let span = 2 * self.jitter_us + 1;
            let offset = ((draw >> 32) * span) >> 32;
            (self.latency_us + offset).saturating_sub(self.jitter_us)
        };
        (latency.max(1), error)
    }
}

/// Models per image; images not listed answer with the default.
#[derive(Debug, Clone, Default)]
pub struct Backends {
    pub by_image: BTreeMap<String, BackendModel>,
    pub default: BackendModel,
}

impl Backends {
    /// The model for a pod's image (full reference or just its tag, e.g. `yellow`).
    pub fn for_image(&self, image: &str) -> BackendModel {
        let tag = crate::endpoints::image_version(image);
        self.by_image
            .get(image)
            .or_else(|| self.by_image.get(tag))
            .copied()
            .unwrap_or(self.default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_draw_gives_error_and_bounded_jitter() {
        let m = BackendModel::new(Duration::from_millis(5), Duration::from_millis(2), 0.05);
        let mut errors = 0;
        let mut lo = u64::MAX;
        let mut hi = 0;
        let mut rng = crate::random::stream(1, "test");
        for _ in 0..100_000 {
            let (lat, err) = m.answer(rand::RngCore::next_u64(&mut rng));
            errors += err as u32;
            lo = lo.min(lat);
            hi = hi.max(lat);
        }
        assert!((4_500..5_500).contains(&errors), "{errors}");
        assert_eq!((lo, hi), (3_000, 7_000));
    }

    #[test]
    fn images_match_by_full_reference_or_tag() {
        let mut b = Backends::default();
        let slow = BackendModel::new(Duration::from_millis(9), Duration::ZERO, 0.0);
        b.by_image
            .insert("argoproj/rollouts-demo:yellow".into(), slow);
        assert_eq!(b.for_image("argoproj/rollouts-demo:yellow"), slow);
        assert_eq!(
            b.for_image("argoproj/rollouts-demo:blue"),
            BackendModel::default()
        );
        b.by_image.insert("blue".into(), slow);
        assert_eq!(b.for_image("argoproj/rollouts-demo:blue"), slow);
    }
}
