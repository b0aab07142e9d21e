//! Durations as Argo and Kubernetes users write them: `30s`, `1m`, `1h30m`, `100ms`, or a bare
//! integer meaning seconds (Argo's `pause.duration` is an int-or-string).

use std::time::Duration;

use super::rollout::IntOrString;

/// A scenario's duration, written as Argo writes them (Go's `time.ParseDuration`: `100ms`,
/// `30s`, `1m`, `1h30m`, `.5m`, `1.5s`), or a bare number of seconds. Negative: an error.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let t = text.trim();
    if let Ok(secs) = t.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    // A decimal number of seconds (`0.25`) is read exactly, as Go reads `0.25s`.
    let decimal = !t.is_empty()
        && t.chars().all(|c| c.is_ascii_digit() || c == '.')
        && t.matches('.').count() == 1;
    let go = if decimal {
        go_parse_duration(&format!("{t}s"))
    } else {
        go_parse_duration(t)
    };
    match go {
        Some(nanos) if nanos >= 0 => Ok(Duration::from_nanos(nanos as u64)),
        Some(_) => Err(DurationError::Negative(text.to_string())),
        None => Err(DurationError::Syntax(text.to_string())),
    }
}

/// Why a duration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("invalid duration \"{0}\": must not be negative")]
    Negative(String),
    #[error(
        "invalid duration \"{0}\"; expected e.g. 100ms, 30s, 1m, 1h30m (Go's duration syntax) or a number of seconds"
    )]
    Syntax(String),
    #[error("invalid pause duration {0}")]
    Pause(String),
}

/// Argo's pause duration at run time: `DurationSeconds()` as whole seconds (what the
/// controller waits; validation has rejected negative and unparsable values).
pub(crate) fn from_int_or_string(v: &IntOrString) -> Result<Duration, DurationError> {
    match pause_seconds(Some(v)) {
        s if s >= 0 => Ok(Duration::from_secs(s as u64)),
        _ => Err(DurationError::Pause(format!("{v:?}"))),
    }
}

/// `RolloutPause.DurationSeconds()`: nil → 0; int → itself; string → an int32, else a Go
/// duration truncated to whole seconds, else -1.
/// Validation and the controller both use it, as Argo does: a pause of `1500ms` lasts 1 s.
pub(crate) fn pause_seconds(duration: Option<&IntOrString>) -> i64 {
    match duration {
        None => 0,
        // Go's IntVal is an int32; a wider number would not even decode there.
        Some(IntOrString::Int(i)) => i32::try_from(*i).map_or(-1, i64::from),
        Some(IntOrString::String(s)) => {
            if let Some(v) = go_parse_int32(s) {
                return i64::from(v);
            }
            match go_parse_duration(s) {
                None => -1,
                Some(nanos) => {
                    let secs =
                        (nanos / 1_000_000_000) as f64 + (nanos % 1_000_000_000) as f64 / 1e9;
                    // int32(float64) on amd64 yields MinInt32 when out of range.
                    if (-2_147_483_648.0..2_147_483_648.0).contains(&secs) {
                        secs.trunc() as i64
                    } else {
                        i64::from(i32::MIN)
                    }
                }
            }
        }
    }
}

pub use crate::go::{parse_duration as go_parse_duration, parse_int32 as go_parse_int32};

/// Compact rendering: `1m`, `30s`, `1m30s`, `100ms`, `0s`.
pub fn format(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".to_string();
    }
    if ms % 1000 != 0 && ms < 60_000 {
        return if ms % 1000 == 0 {
            format!("{}s", ms / 1000)
        } else if ms < 1000 {
            format!("{ms}ms")
        } else {
            let secs = format!("{:.3}", ms as f64 / 1000.0);
            format!("{}s", secs.trim_end_matches('0'))
        };
    }
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_durations() {
        let s = 1_000_000_000;
        assert_eq!(go_parse_duration("1m"), Some(60 * s));
        assert_eq!(go_parse_duration("1h30m"), Some(5400 * s));
        assert_eq!(go_parse_duration("1.5s"), Some(1_500_000_000));
        assert_eq!(go_parse_duration(".5s"), Some(500_000_000));
        assert_eq!(go_parse_duration("-2m"), Some(-120 * s));
        assert_eq!(go_parse_duration("10µs"), Some(10_000));
        assert_eq!(go_parse_duration("0"), Some(0));
        assert_eq!(go_parse_duration("1"), None);
        assert_eq!(go_parse_duration("1d"), None);
        assert_eq!(go_parse_duration(""), None);
        assert_eq!(go_parse_duration("."), None);
        assert_eq!(go_parse_duration("3000000h"), None);
        let p = |d: serde_json::Value| pause_seconds(Some(&serde_json::from_value(d).unwrap()));
        assert_eq!(p(json!("90")), 90);
        assert_eq!(p(json!("+7")), 7);
        assert_eq!(p(json!("1500ms")), 1);
        assert_eq!(p(json!("99999999999")), -1);
        assert_eq!(p(json!("1000000h")), i64::from(i32::MIN));
    }

    #[test]
    fn parses_argo_forms() {
        assert_eq!(parse("1m").unwrap(), Duration::from_secs(60));
        assert_eq!(parse("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("100ms").unwrap(), Duration::from_millis(100));
        assert_eq!(parse("45").unwrap(), Duration::from_secs(45));
        // A decimal number of seconds, exactly (not through a float).
        assert_eq!(parse("0.25").unwrap(), Duration::from_millis(250));
        assert_eq!(parse("1.000000001").unwrap(), Duration::new(1, 1));
        assert!(parse("1.2.3").is_err() && parse(".").is_err() && parse("-0.5").is_err());
        assert_eq!(
            from_int_or_string(&IntOrString::Int(30)).unwrap(),
            Duration::from_secs(30)
        );
        assert!(
            parse("soon")
                .unwrap_err()
                .to_string()
                .contains("expected e.g. 100ms")
        );
    }

    #[test]
    fn formats_compactly() {
        assert_eq!(format(Duration::from_secs(90)), "1m30s");
        assert_eq!(format(Duration::from_millis(100)), "100ms");
        assert_eq!(format(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format(Duration::ZERO), "0s");
        assert_eq!(format(Duration::from_secs(3600)), "1h");
    }
}
