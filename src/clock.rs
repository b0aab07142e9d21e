//! Virtual time. The simulation never reads the wall clock: every component is handed a
//! [`SimTime`], so a 10-minute pause costs nothing and a run is reproducible.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Time since the start of a simulated run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(pub Duration);

/// Wall-clock instant at which every simulated run starts (2026-01-01T00:00:00Z), used only
/// to print Kubernetes timestamps.
pub const EPOCH_UNIX_SECS: u64 = 1_767_225_600;

impl SimTime {
    pub const ZERO: SimTime = SimTime(Duration::ZERO);

    pub fn from_secs(s: u64) -> Self {
        SimTime(Duration::from_secs(s))
    }

    pub fn from_millis(ms: u64) -> Self {
        SimTime(Duration::from_millis(ms))
    }

    pub fn as_duration(self) -> Duration {
        self.0
    }

    /// `self + d`.
    pub fn after(self, d: Duration) -> SimTime {
        SimTime(self.0 + d)
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub fn since(self, earlier: SimTime) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    /// RFC 3339 with second precision, as Kubernetes writes `metav1.Time`.
    pub fn rfc3339(self) -> String {
        let t = UNIX_EPOCH + Duration::from_secs(EPOCH_UNIX_SECS + self.0.as_secs());
        humantime::format_rfc3339_seconds(t).to_string()
    }

    /// Parses a timestamp written by [`SimTime::rfc3339`] (None for anything else).
    pub fn parse_rfc3339(s: &str) -> Option<SimTime> {
        let t: SystemTime = humantime::parse_rfc3339(s).ok()?;
        let secs = t.duration_since(UNIX_EPOCH).ok()?.as_secs();
        secs.checked_sub(EPOCH_UNIX_SECS).map(SimTime::from_secs)
    }
}

impl fmt::Display for SimTime {
    /// `t+1m30s`, `t+0s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t+{}", crate::model::duration::format(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_at_second_precision() {
        let t = SimTime::from_secs(90);
        assert_eq!(t.rfc3339(), "2026-01-01T00:01:30Z");
        assert_eq!(SimTime::parse_rfc3339(&t.rfc3339()), Some(t));
        assert_eq!(SimTime::parse_rfc3339("garbage"), None);
    }
}
