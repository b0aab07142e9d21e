//! Error messages in the user's words (issue 34): every value of every bundled scenario and
//! manifest is replaced in turn by values of the wrong kind (a mapping, a list, a word, a
//! negative or a huge number, null), and no message may name a Rust type (`struct
//! SetImageSpec`, `enum Step`, `u32`, `untagged enum WaitSpec`, `unit value`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use canarysim::model::Kind;
use canarysim::scenario::{self, Disk, Files};
use serde_json::Value;

use crate::support;

/// Values of each kind a typo or a generator puts where another was meant.
fn hostile_values() -> Vec<Value> {
    [
        r#"{"x": 1}"#,
        "[1]",
        r#""word""#,
        "-1",
        "4294967296",
        "null",
    ]
    .iter()
    .map(|v| serde_json::from_str(v).expect("a JSON value"))
    .collect()
}

/// The words that give a Rust type away: the scenario format's type names (the schema's
/// `$defs`), the primitive types, and serde's own vocabulary for Rust's data model.
fn rust_words() -> BTreeSet<String> {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/schemas/scenario.schema.json"
        ))
        .expect("the schema"),
    )
    .expect("JSON");
    let mut words: BTreeSet<String> = schema["$defs"]
        .as_object()
        .expect("$defs")
        .keys()
        .cloned()
        .collect();
    for w in [
        "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
        "f32", "f64", "struct", "enum", "variant", "untagged", "newtype", "tuple", "Option", "Vec",
        "String", "str", "BTreeMap", "HashMap",
    ] {
        words.insert(w.to_string());
    }
    words
}

/// The Rust words in `message`, if any (`::` paths count as one).
fn rust_words_in(message: &str, words: &BTreeSet<String>) -> Vec<String> {
    let mut found: Vec<String> = message
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| words.contains(*w))
        .map(str::to_string)
        .collect();
    // `unit` is a scenario key (`expect_split.unit`); serde's "unit value" is Rust's `()`.
    for phrase in ["::", "unit value", "expected unit"] {
        if message.contains(phrase) {
            found.push(phrase.into());
        }
    }
    found
}

/// Every JSON pointer of `v` (its root too).
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                let key = k.replace('~', "~0").replace('/', "~1");
                pointers(child, format!("{at}/{key}"), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                pointers(child, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// The pointer with its list indexes as `*`: one shape is enough of each.
fn shape(pointer: &str) -> String {
    pointer
        .split('/')
        .map(|s| if s.parse::<usize>().is_ok() { "*" } else { s })
        .collect::<Vec<_>>()
        .join("/")
}

/// One file read from memory, the rest (the manifests it names) from disk.
struct OneInMemory {
    path: PathBuf,
    text: String,
}

impl Files for OneInMemory {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        if path == self.path {
            Ok(self.text.clone())
        } else {
            Disk.read(path)
        }
    }
}

fn yaml_of(v: &Value) -> Value {
    serde_yaml::from_str::<Value>(&std::fs::read_to_string(v.as_str().unwrap()).unwrap()).unwrap()
}

#[test]
fn scenario_errors_name_no_rust_type() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let words = rust_words();
    let mut seen_shapes = BTreeSet::new();
    let mut leaks = Vec::new();
    let mut refused = 0;
    for file in support::files_with_extension(root.join("scenarios"), "yaml") {
        let original = yaml_of(&Value::String(file.display().to_string()));
        let mut all = Vec::new();
        pointers(&original, String::new(), &mut all);
        for pointer in all.into_iter().filter(|p| seen_shapes.insert(shape(p))) {
            for bad in hostile_values() {
                let mut doc = original.clone();
                match doc.pointer_mut(&pointer) {
                    Some(slot) => *slot = bad.clone(),
                    None => continue,
                }
                let text = serde_yaml::to_string(&doc).expect("YAML");
                let files = OneInMemory {
                    path: file.clone(),
                    text,
                };
                if let Err(e) = scenario::parse(&file, &files) {
                    refused += 1;
                    let found = rust_words_in(&e.message, &words);
                    if !found.is_empty() {
                        leaks.push(format!("{pointer} = {bad}: {found:?} in {}", e.message));
                    }
                }
            }
        }
    }
    assert!(refused > 500, "the walk refused only {refused} documents");
    assert!(
        leaks.is_empty(),
        "{} message(s) name Rust types:\n{}",
        leaks.len(),
        leaks.join("\n")
    );
}

#[test]
fn manifest_type_errors_name_no_rust_type() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let words = rust_words();
    let mut leaks = Vec::new();
    let mut refused = 0;
    let mut seen_shapes = BTreeSet::new();
    for file in support::files_with_extension(root.join("scenarios/manifests"), "yaml") {
        let text = std::fs::read_to_string(&file).unwrap();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let Ok(object) = <Value as serde::Deserialize>::deserialize(doc) else {
                continue;
            };
            let Some(kind) = object["kind"].as_str().and_then(Kind::parse) else {
                continue;
            };
            let spec = object["spec"].clone();
            let mut all = Vec::new();
            pointers(&spec, String::new(), &mut all);
            for pointer in all
                .into_iter()
                .filter(|p| !p.is_empty() && seen_shapes.insert(format!("{kind:?}{}", shape(p))))
            {
                for bad in hostile_values() {
                    let mut s = spec.clone();
                    *s.pointer_mut(&pointer).expect("a pointer of the spec") = bad.clone();
                    if let Err(e) = canarysim::model::typed::check_spec(kind, &s) {
                        refused += 1;
                        let found = rust_words_in(&e.message, &words);
                        if !found.is_empty() {
                            leaks.push(format!(
                                "{kind:?} spec{pointer} = {bad}: {found:?} in {}",
                                e.message
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(refused > 100, "the walk refused only {refused} specs");
    assert!(
        leaks.is_empty(),
        "{} message(s) name Rust types:\n{}",
        leaks.len(),
        leaks.join("\n")
    );
}
