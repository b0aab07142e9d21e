//! serde's messages in the user's words: serde names Rust's types (`expected struct
//! SetImageSpec`, `expected u32`, `untagged enum WaitSpec`), a person writing YAML knows
//! mappings, lists, words and numbers.

/// What each number type accepts, as a person reads it.
const NUMBERS: [(&str, &str); 14] = [
    ("u8", "a whole number from 0 to 255"),
    ("u16", "a whole number from 0 to 65,535"),
    ("u32", "a whole number from 0 to 4,294,967,295"),
    ("u64", "a whole number from 0 to 18,446,744,073,709,551,615"),
    (
        "usize",
        "a whole number from 0 to 18,446,744,073,709,551,615",
    ),
    ("u128", "a whole number from 0"),
    ("i8", "a whole number from -128 to 127"),
    ("i16", "a whole number from -32,768 to 32,767"),
    ("i32", "a whole number from -2,147,483,648 to 2,147,483,647"),
    (
        "i64",
        "a whole number from -9,223,372,036,854,775,808 to 9,223,372,036,854,775,807",
    ),
    (
        "isize",
        "a whole number from -9,223,372,036,854,775,808 to 9,223,372,036,854,775,807",
    ),
    ("i128", "a whole number"),
    ("f32", "a number"),
    ("f64", "a number"),
];

/// `message` with Rust's vocabulary replaced. `describe` names, as a noun phrase (`one of
/// `http`, `tls`, `tcp``, `a mapping with the keys …`), what the type called `name`
/// accepts, where the caller knows it; otherwise a mapping is "a mapping", and so on.
pub fn plain(message: &str, describe: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = message
        .replace("invalid type: unit value", "invalid type: null")
        .replace("unknown variant `", "unknown value `")
        .replace("expected unit", "expected null")
        // YAML is read into JSON values first, which hold 64-bit whole numbers at most.
        .replace(
            "JSON number out of range",
            "a number beyond any canarysim reads: whole numbers go from -9,223,372,036,854,775,808 to 18,446,744,073,709,551,615",
        );
    const UNTAGGED: &str = "data did not match any variant of untagged enum ";
    if let Some(at) = out.find(UNTAGGED) {
        let (name, len) = identifier(&out[at + UNTAGGED.len()..]);
        let phrase = match describe(name) {
            Some(d) => format!("expected {d}"),
            None => "the value has none of this field's accepted forms".to_string(),
        };
        out.replace_range(at..at + UNTAGGED.len() + len, &phrase);
    }
    let mut result = String::with_capacity(out.len());
    let mut rest = out.as_str();
    while let Some(at) = rest.find("expected ") {
        let after_at = at + "expected ".len();
        result.push_str(&rest[..after_at]);
        rest = &rest[after_at..];
        rest = match type_named(rest, describe) {
            Some((phrase, used)) => {
                result.push_str(&phrase);
                &rest[used..]
            }
            None => rest,
        };
    }
    result.push_str(rest);
    result
}

/// The Rust type at the start of `text` (`struct SetImageSpec, …`), as a phrase, with the
/// length of text it replaces.
fn type_named(text: &str, describe: &dyn Fn(&str) -> Option<String>) -> Option<(String, usize)> {
    const SHAPES: [(&str, &str); 6] = [
        ("struct variant ", "a mapping"),
        ("tuple variant ", "a list"),
        (
            "newtype variant ",
            "a value of this field's documented form",
        ),
        ("tuple struct ", "a list"),
        ("newtype struct ", "a value of this field's documented form"),
        ("struct ", "a mapping"),
    ];
    for (shape, fallback) in SHAPES {
        if let Some(rest) = text.strip_prefix(shape) {
            let (name, len) = identifier(rest);
            return Some((
                describe(name).unwrap_or_else(|| fallback.to_string()),
                shape.len() + len,
            ));
        }
    }
    if let Some(rest) = text.strip_prefix("enum ") {
        let (name, len) = identifier(rest);
        let phrase = describe(name).unwrap_or_else(|| "one of this field's values".to_string());
        return Some((phrase, "enum ".len() + len));
    }
    let (word, len) = identifier(text);
    NUMBERS
        .iter()
        .find(|(rust, _)| *rust == word)
        .map(|(_, phrase)| (phrase.to_string(), len))
}

/// The identifier (with `::` paths) at the start of `text`, and its length.
fn identifier(text: &str) -> (&str, usize) {
    let len = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(text.len());
    (&text[..len], len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn rust_types_become_yaml_words() {
        let cases = [
            (
                "seed: JSON number out of range",
                "seed: a number beyond any canarysim reads: whole numbers go from -9,223,372,036,854,775,808 to 18,446,744,073,709,551,615",
            ),
            (
                "invalid type: string \"two\", expected i32",
                "invalid type: string \"two\", expected a whole number from -2,147,483,648 to 2,147,483,647",
            ),
            (
                "invalid value: integer `-1`, expected u32",
                "invalid value: integer `-1`, expected a whole number from 0 to 4,294,967,295",
            ),
            (
                "invalid type: sequence, expected struct SetImageSpec",
                "invalid type: sequence, expected a mapping",
            ),
            (
                "invalid type: unit value, expected f64",
                "invalid type: null, expected a number",
            ),
            (
                "unknown variant `x`, expected `matches` or `differs`",
                "unknown value `x`, expected `matches` or `differs`",
            ),
            (
                "data did not match any variant of untagged enum Raw",
                "the value has none of this field's accepted forms",
            ),
            (
                "invalid type: integer `1`, expected enum Decided",
                "invalid type: integer `1`, expected one of this field's values",
            ),
            // Words that only look like types stay.
            (
                "expected a string, expected u32x",
                "expected a string, expected u32x",
            ),
        ];
        for (serde, person) in cases {
            assert_eq!(plain(serde, &none), person);
        }
    }

    #[test]
    fn a_caller_that_knows_the_type_names_its_forms() {
        let describe = |name: &str| {
            (name == "WireProtocol").then(|| "one of `http`, `tls`, `tcp`".to_string())
        };
        assert_eq!(
            plain(
                "invalid type: sequence, expected enum WireProtocol",
                &describe
            ),
            "invalid type: sequence, expected one of `http`, `tls`, `tcp`"
        );
        assert_eq!(
            plain(
                "data did not match any variant of untagged enum WireProtocol",
                &describe
            ),
            "expected one of `http`, `tls`, `tcp`"
        );
    }
}
