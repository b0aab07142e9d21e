//! Durations as Argo and Kubernetes users write them: `30s`, `1m`, `1h30m`, `100ms`, or a bare
//! integer meaning seconds (Argo's `pause.duration` is an int-or-string).

use std::time::Duration;

use super::rollout::IntOrString;

/// Parses `100ms`, `30s`, `1m`, `1h30m`, or a bare number of seconds.
pub fn parse(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if let Ok(secs) = t.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    humantime::parse_duration(t).map_err(|e| {
        format!("invalid duration \"{text}\" ({e}); expected e.g. 100ms, 30s, 1m, 1h30m")
    })
}

/// Argo's pause duration: an int is seconds; a string is an int of seconds or a duration.
pub fn from_int_or_string(v: &IntOrString) -> Result<Duration, String> {
    match v {
        IntOrString::Int(s) if *s >= 0 => Ok(Duration::from_secs(*s as u64)),
        IntOrString::Int(s) => Err(format!("invalid duration {s}: must not be negative")),
        IntOrString::String(s) => parse(s),
    }
}

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

    #[test]
    fn parses_argo_forms() {
        assert_eq!(parse("1m").unwrap(), Duration::from_secs(60));
        assert_eq!(parse("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("100ms").unwrap(), Duration::from_millis(100));
        assert_eq!(parse("45").unwrap(), Duration::from_secs(45));
        assert_eq!(
            from_int_or_string(&IntOrString::Int(30)).unwrap(),
            Duration::from_secs(30)
        );
        assert!(parse("soon").unwrap_err().contains("expected e.g. 100ms"));
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
