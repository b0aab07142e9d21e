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
    /// lower case) and its body. None: the response does not say.
    pub fn version<'h>(
        &self,
        header: impl Fn(&str) -> Option<&'h str>,
        body: &[u8],
    ) -> Option<String> {
        match self {
            Classifier::Header(name) => header(name).map(str::to_string),
            Classifier::Json(field) => json_field(body, field),
            Classifier::Regex(re) => {
                let text = String::from_utf8_lossy(body);
                let caps = re.captures(&text)?;
                caps.get(1)
                    .or_else(|| caps.get(0))
                    .map(|m| m.as_str().to_string())
            }
            Classifier::Default => header("x-version")
                .map(str::to_string)
                .or_else(|| json_field(body, "version")),
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
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Null | serde_json::Value::Object(_) | serde_json::Value::Array(_) => {
            None
        }
        other => Some(other.to_string()),
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
        let by = |spec: &str| spec.parse::<Classifier>().unwrap().version(&h, body);
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
            Classifier::Default.version(&h, body).as_deref(),
            Some("blue")
        );
        assert_eq!(
            Classifier::Default.version(headers(&[]), body).as_deref(),
            Some("yellow"),
            "no header: the JSON field"
        );
        assert_eq!(Classifier::Default.version(headers(&[]), b"<html>"), None);
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
