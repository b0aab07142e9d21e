//! Which version answered a real response: a header, a JSON field of the body, or the first
//! capture group of a regular expression over the body (`--classify`).

use std::fmt;

/// How a response is assigned a version.
#[derive(Debug, Clone)]
pub enum Classifier {
    /// The value of this response header.
    Header(String),
    /// The value of this top-level field of a JSON body (`a.b` walks into objects).
    Json(String),
    /// The first capture group of this pattern over the body (the whole match without one).
    Regex(regex::Regex),
    /// Header `x-version`, else the JSON field `version`: what `canarysim backend` and the
    /// usual demo images answer.
    Default,
}

/// Why `--classify` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ClassifyError {
    #[error(
        "--classify {0:?}: expected header:NAME, json:FIELD or regex:PATTERN (e.g. header:x-version)"
    )]
    Form(String),
    #[error("--classify {given:?}: the regular expression does not compile: {source}")]
    Regex {
        given: String,
        #[source]
        source: regex::Error,
    },
}

impl std::str::FromStr for Classifier {
    type Err = ClassifyError;

    fn from_str(s: &str) -> Result<Classifier, ClassifyError> {
        let (kind, arg) = s
            .split_once(':')
            .ok_or_else(|| ClassifyError::Form(s.into()))?;
        if arg.is_empty() {
            return Err(ClassifyError::Form(s.into()));
        }
        match kind {
            "header" => Ok(Classifier::Header(arg.to_ascii_lowercase())),
            "json" => Ok(Classifier::Json(arg.into())),
            "regex" => regex::Regex::new(arg)
                .map(Classifier::Regex)
                .map_err(|source| ClassifyError::Regex {
                    given: s.into(),
                    source,
                }),
            _ => Err(ClassifyError::Form(s.into())),
        }
    }
}

impl fmt::Display for Classifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Classifier::Header(h) => write!(f, "header:{h}"),
            Classifier::Json(j) => write!(f, "json:{j}"),
            Classifier::Regex(r) => write!(f, "regex:{}", r.as_str()),
            Classifier::Default => write!(f, "header:x-version, else json:version"),
        }
    }
}

impl Classifier {
    /// Whether the body is needed (a header classifier reads none).
    pub fn reads_body(&self) -> bool {
        !matches!(self, Classifier::Header(_))
    }

    /// The version of a response, from its headers (`header(name)` looks one up, name in
    /// lower case) and its body: the whole body, or (`whole` false) its first bytes only
    /// (the real client, `canarysim::load::http`, keeps 64 KiB), where a JSON field is
    /// looked for as far as they go.
    /// None: the response does not say.
    pub fn version<'h>(
        &self,
        header: impl Fn(&str) -> Option<&'h str>,
        body: &[u8],
        whole: bool,
    ) -> Option<String> {
        let json = |field: &str| {
            if whole {
                json_field(body, field)
            } else {
                json_field_in_prefix(body, field)
            }
        };
        match self {
            Classifier::Header(name) => header(name).map(str::to_string),
            Classifier::Json(field) => json(field),
            Classifier::Regex(re) => {
                let text = String::from_utf8_lossy(body);
                let caps = re.captures(&text)?;
                caps.get(1)
                    .or_else(|| caps.get(0))
                    .map(|m| m.as_str().to_string())
            }
            Classifier::Default => header("x-version")
                .map(str::to_string)
                .or_else(|| json("version")),
        }
    }
}

/// A field of a JSON object body; strings as they are, other scalars as JSON text.
fn json_field(body: &[u8], path: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let mut v = &value;
    for part in path.split('.') {
        v = v.get(part)?;
    }
    scalar_text(v)
}

/// A scalar as the version's text: strings as they are, numbers and booleans as JSON.
fn scalar_text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Null | serde_json::Value::Object(_) | serde_json::Value::Array(_) => {
            None
        }
        other => Some(other.to_string()),
    }
}

/// A field of a JSON object whose text is cut short (the first bytes of a long body): the
/// object is parsed only as far as the field, so the field counts if its value ends
/// within the bytes, whatever follows. The first occurrence of a key counts.
fn json_field_in_prefix(prefix: &[u8], path: &str) -> Option<String> {
    let path: Vec<&str> = path.split('.').collect();
    let mut found = None;
    let mut de = serde_json::Deserializer::from_slice(prefix);
    // The search stops with an error once the field is read (or at the cut): `found` says.
    let _ = serde::de::DeserializeSeed::deserialize(
        FieldSearch {
            path: &path,
            found: &mut found,
        },
        &mut de,
    );
    found
}

/// Walks a JSON object down `path`, skipping other keys' values unread.
struct FieldSearch<'a> {
    path: &'a [&'a str],
    found: &'a mut Option<String>,
}

impl<'de> serde::de::DeserializeSeed<'de> for FieldSearch<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for FieldSearch<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some((first, rest)) = self.path.split_first() else {
            return Ok(());
        };
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key != *first {
                map.next_value::<serde::de::IgnoredAny>()?;
            } else if rest.is_empty() {
                let value: serde_json::Value = map.next_value()?;
                *self.found = scalar_text(&value);
                break;
            } else {
                return map.next_value_seed(FieldSearch {
                    path: rest,
                    found: self.found,
                });
            }
        }
        // Found (or the object ended): the rest of the text is not read.
        Err(serde::de::Error::custom("search over"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> impl Fn(&str) -> Option<&'static str> {
        let pairs = pairs.to_vec();
        move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| *v)
    }

    #[test]
    fn each_form_reads_its_part_of_the_response() {
        let body = br##"{"version": "yellow", "build": {"n": 7}, "color": "#ffff00"}"##;
        let h = headers(&[("x-version", "blue"), ("x-color", "green")]);
        let by = |spec: &str| spec.parse::<Classifier>().unwrap().version(&h, body, true);
        assert_eq!(by("header:X-Color").as_deref(), Some("green"));
        assert_eq!(by("json:version").as_deref(), Some("yellow"));
        assert_eq!(by("json:build.n").as_deref(), Some("7"));
        assert_eq!(by("json:missing"), None);
        assert_eq!(
            by(r#"regex:"color": "([^"]+)""#).as_deref(),
            Some("#ffff00")
        );
        assert_eq!(by("regex:yel+ow").as_deref(), Some("yellow"));
        assert_eq!(
            Classifier::Default.version(&h, body, true).as_deref(),
            Some("blue")
        );
        assert_eq!(
            Classifier::Default
                .version(headers(&[]), body, true)
                .as_deref(),
            Some("yellow"),
            "no header: the JSON field"
        );
        assert_eq!(
            Classifier::Default.version(headers(&[]), b"<html>", true),
            None
        );
    }

    #[test]
    fn the_first_bytes_of_a_long_body_are_enough_when_the_version_is_in_them() {
        let cut =
            br#"{"build": {"n": 7, "tags": ["a", {"x": 1}]}, "version": "yellow", "pad": "xxxx"#;
        let by = |spec: &str| {
            spec.parse::<Classifier>()
                .unwrap()
                .version(headers(&[]), cut, false)
        };
        assert_eq!(by("json:version").as_deref(), Some("yellow"));
        assert_eq!(by("json:build.n").as_deref(), Some("7"));
        assert_eq!(by("json:build.tags"), None, "not a scalar");
        assert_eq!(by("json:pad"), None, "its value is cut short");
        assert_eq!(by("json:missing"), None);
        assert_eq!(
            by("regex:\"version\": \"(\\w+)\"").as_deref(),
            Some("yellow")
        );
        assert_eq!(
            Classifier::Default
                .version(headers(&[]), cut, false)
                .as_deref(),
            Some("yellow")
        );
        // Read whole, the same text is not JSON: no field.
        assert_eq!(Classifier::Default.version(headers(&[]), cut, true), None);
        // The first of a repeated key counts in a prefix.
        let twice = br#"{"version": "blue", "version": "yellow", "#;
        assert_eq!(
            Classifier::Default
                .version(headers(&[]), twice, false)
                .as_deref(),
            Some("blue")
        );
        assert_eq!(
            Classifier::Default.version(headers(&[]), b"[1, 2", false),
            None
        );
    }

    #[test]
    fn a_malformed_spec_says_what_is_expected() {
        for bad in ["version", "header:", "xml:v", "regex:("] {
            let e = bad.parse::<Classifier>().unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
        assert!(
            "body:x"
                .parse::<Classifier>()
                .unwrap_err()
                .to_string()
                .contains("header:NAME, json:FIELD or regex:PATTERN")
        );
    }
}
