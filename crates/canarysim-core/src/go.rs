//! What Go's standard library does, where canarysim must do exactly the same so that users
//! see Argo's and Kubernetes' own words and hashes: `strconv` (Quote, Atoi, ParseInt),
//! `encoding/json` string and value encoding, and `time.ParseDuration`. Validation, hashing,
//! Istio patching and the runtime all use these, so they cannot disagree.

use serde_json::Value;

/// Why `strconv.Atoi` failed, with Go's wording.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AtoiError {
    #[error("strconv.Atoi: parsing {0:?}: invalid syntax")]
    Syntax(String),
    /// Out of range: the value Go returns with the error (clamped to i64).
    #[error("strconv.Atoi: parsing {0:?}: value out of range")]
    Range(String, i64),
}

impl AtoiError {
    /// The value Go returns alongside the error: 0 on a syntax error, the clamped bound when
    /// out of range.
    pub fn value(&self) -> i64 {
        match self {
            AtoiError::Syntax(_) => 0,
            AtoiError::Range(_, v) => *v,
        }
    }
}

/// Go's `strconv.Atoi` on a 64-bit platform: an optional sign, then decimal digits only.
pub(crate) fn atoi(s: &str) -> Result<i64, AtoiError> {
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(AtoiError::Syntax(s.to_string()));
    }
    let mut v: i128 = 0;
    for b in digits.bytes() {
        v = (v * 10 + i128::from(b - b'0')).min(i128::from(i64::MAX) + 1);
    }
    let v = if neg { -v } else { v };
    let clamped = v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
    if v == i128::from(clamped) {
        Ok(clamped)
    } else {
        Err(AtoiError::Range(s.to_string(), clamped))
    }
}

/// Go's `strconv.Quote` (what `%q` prints).
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if c == ' ' || (!c.is_control() && !c.is_whitespace() && !is_format_char(c)) => {
                out.push(c)
            }
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// Common Unicode format characters, which Go's `IsPrint` rejects.
fn is_format_char(c: char) -> bool {
    matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{feff}')
}

/// Go's `encoding/json` output for a value whose objects are already in Go's key order.
pub fn json(v: &Value) -> String {
    let mut out = String::new();
    write_go_json(v, &mut out);
    out
}

fn write_go_json(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_string(out, s),
        Value::Array(a) => {
            out.push('[');
            for (i, item) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_json(item, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, item)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, k);
                out.push(':');
                write_go_json(item, out);
            }
            out.push('}');
        }
    }
}

/// Go `encoding/json` string escaping with `SetEscapeHTML(true)` (the `json.Marshal` default).
pub(crate) fn write_string(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            // Go >= 1.22 uses the short forms for these two.
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c if u32::from(c) < 0x20 => {
                let b = u32::from(c) as usize;
                out.push_str("\\u00");
                out.push(char::from(HEX[b >> 4]));
                out.push(char::from(HEX[b & 0xf]));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `strconv.ParseInt(s, 10, 32)`.
pub fn parse_int32(s: &str) -> Option<i32> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let t = s.strip_prefix('+').unwrap_or(s);
    t.parse::<i32>().ok()
}

/// Go's `time.ParseDuration`, in nanoseconds.
pub fn parse_duration(orig: &str) -> Option<i64> {
    const LIMIT: u64 = 1 << 63;
    let mut s = orig.as_bytes();
    let mut neg = false;
    if let Some(&c) = s.first() {
        if c == b'-' || c == b'+' {
            neg = c == b'-';
            s = &s[1..];
        }
    }
    if s == b"0" {
        return Some(0);
    }
    if s.is_empty() {
        return None;
    }
    let mut d: u64 = 0;
    while let Some(&first) = s.first() {
        if !(first == b'.' || first.is_ascii_digit()) {
            return None;
        }
        // leadingInt
        let mut i = 0;
        let mut v: u64 = 0;
        while let Some(&c) = s.get(i) {
            if !c.is_ascii_digit() {
                break;
            }
            if v > LIMIT / 10 {
                return None;
            }
            v = v * 10 + u64::from(c - b'0');
            if v > LIMIT {
                return None;
            }
            i += 1;
        }
        let pre = i > 0;
        s = &s[i..];
        // leadingFraction
        let mut f: u64 = 0;
        let mut scale = 1.0_f64;
        let mut post = false;
        if s.first() == Some(&b'.') {
            s = &s[1..];
            let mut i = 0;
            let mut overflow = false;
            while let Some(&c) = s.get(i) {
                if !c.is_ascii_digit() {
                    break;
                }
                i += 1;
                if overflow {
                    continue;
                }
                if f > (LIMIT - 1) / 10 {
                    overflow = true;
                    continue;
                }
                let y = f * 10 + u64::from(c - b'0');
                if y > LIMIT {
                    overflow = true;
                    continue;
                }
                f = y;
                scale *= 10.0;
            }
            post = i > 0;
            s = &s[i..];
        }
        if !pre && !post {
            return None;
        }
        let unit_len = s
            .iter()
            .position(|c| *c == b'.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        if unit_len == 0 {
            return None;
        }
        let unit: u64 = match &s[..unit_len] {
            b"ns" => 1,
            b"us" => 1_000,
            u if u == "µs".as_bytes() || u == "μs".as_bytes() => 1_000,
            b"ms" => 1_000_000,
            b"s" => 1_000_000_000,
            b"m" => 60_000_000_000,
            b"h" => 3_600_000_000_000,
            _ => return None,
        };
        s = &s[unit_len..];
        if v > LIMIT / unit {
            return None;
        }
        v *= unit;
        if f > 0 {
            v += (f as f64 * (unit as f64 / scale)) as u64;
            if v > LIMIT {
                return None;
            }
        }
        d = d.checked_add(v)?;
        if d > LIMIT {
            return None;
        }
    }
    if neg {
        // -Duration(d); d == 1<<63 wraps to MinInt64 exactly as in Go.
        return Some((d as i64).wrapping_neg());
    }
    if d > LIMIT - 1 {
        return None;
    }
    Some(d as i64)
}

/// `k8s.io/apimachinery/pkg/util/duration.HumanDuration`: the AGE column of `kubectl get`.
pub fn human_duration(d: std::time::Duration) -> String {
    let seconds = d.as_secs();
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoi_as_go() {
        assert_eq!(atoi("42"), Ok(42));
        assert_eq!(atoi("+7"), Ok(7));
        assert_eq!(atoi("-0"), Ok(0));
        assert_eq!(
            atoi("4 2").unwrap_err().to_string(),
            "strconv.Atoi: parsing \"4 2\": invalid syntax"
        );
        assert_eq!(atoi("").unwrap_err().value(), 0);
        let big = atoi("99999999999999999999").unwrap_err();
        assert_eq!(big.value(), i64::MAX);
        assert_eq!(
            big.to_string(),
            "strconv.Atoi: parsing \"99999999999999999999\": value out of range"
        );
    }

    #[test]
    fn quote_as_go() {
        assert_eq!(quote("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
        assert_eq!(quote("\u{1}\u{7f}"), "\"\\x01\\x7f\"");
        assert_eq!(quote("\u{200b}é😀"), "\"\\u200bé😀\"");
    }

    #[test]
    fn human_duration_matches_apimachinery() {
        let h = |s: u64| human_duration(std::time::Duration::from_secs(s));
        assert_eq!(h(0), "0s");
        assert_eq!(h(119), "119s");
        assert_eq!(h(150), "2m30s");
        assert_eq!(h(300), "5m");
        assert_eq!(h(600), "10m");
        assert_eq!(h(3 * 3600 + 60), "3h1m");
        assert_eq!(h(9 * 3600), "9h");
        assert_eq!(h(50 * 3600), "2d2h");
        assert_eq!(h(10 * 86400), "10d");
        assert_eq!(h(3 * 365 * 86400 + 86400), "3y1d");
    }
}
