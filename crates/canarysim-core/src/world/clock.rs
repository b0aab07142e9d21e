//! Virtual time. The simulation never reads the wall clock: every component is handed a
//! [`SimTime`], so a 10-minute pause costs nothing and a run is reproducible.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Time since the start of a simulated run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(pub Duration);

/// Wall-clock instant at which every simulated run starts (2026-01-01T00:00:00Z), used only
/// to print Kubernetes timestamps.
pub(crate) const EPOCH_UNIX_SECS: u64 = 1_767_225_600;

/// 9999-12-31T23:59:59Z, the last instant RFC 3339 (four-digit years) can write.
const LAST_RFC3339_UNIX_SECS: u64 = 253_402_300_799;

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

    /// `self + d`, saturating (no clock arithmetic may panic, whatever a scenario adds up).
    pub fn after(self, d: Duration) -> SimTime {
        SimTime(self.0.saturating_add(d))
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub fn since(self, earlier: SimTime) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    /// RFC 3339 with second precision, as Kubernetes writes `metav1.Time`. Past the last
    /// second RFC 3339 can write (9999-12-31T23:59:59Z) it stays there: waits of up to
    /// 2562047h each (Go's longest duration) can add up beyond it, and a timestamp must
    /// not panic.
    pub fn rfc3339(self) -> String {
        let secs = EPOCH_UNIX_SECS
            .saturating_add(self.0.as_secs())
            .min(LAST_RFC3339_UNIX_SECS);
        let t = UNIX_EPOCH + Duration::from_secs(secs);
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
    fn a_clock_past_year_9999_writes_the_last_timestamp_and_never_panics() {
        // 28 waits of 2562047h, each within its bound, reach year 10205.
        let far = SimTime::ZERO.after(Duration::from_secs(28 * 2_562_047 * 3600));
        assert_eq!(far.rfc3339(), "9999-12-31T23:59:59Z");
        let end = SimTime(Duration::MAX).after(Duration::from_secs(1));
        assert_eq!(end, SimTime(Duration::MAX));
        assert_eq!(end.rfc3339(), "9999-12-31T23:59:59Z");
    }

    #[test]
    fn timestamps_round_trip_at_second_precision() {
        let t = SimTime::from_secs(90);
        assert_eq!(t.rfc3339(), "2026-01-01T00:01:30Z");
        assert_eq!(SimTime::parse_rfc3339(&t.rfc3339()), Some(t));
        assert_eq!(SimTime::parse_rfc3339("garbage"), None);
    }
}
