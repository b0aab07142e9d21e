//! YAML in one place: multi-document manifests → [`Manifest`]s with a source map, so that any
//! later error can name `file:line:column`.
//!
//! Values come from serde_yaml (the project's YAML crate). serde_yaml's `Value` carries no
//! positions, so a second pass over yaml-rust2's marked parser events records where every
//! node starts, keyed by its JSON pointer (`/spec/strategy/canary/canaryService`).

use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

use super::object::{Kind, Object};
use super::stored_kind::{self, CrdNames};

/// A place in a source file (line and column are 1-based).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    pub file: String,
    pub line: usize,
    pub column: usize,
    /// The chart template the document was rendered from, where helm's `# Source:` comment
    /// names it (`demo/templates/rollout.yaml`).
    pub template: Option<Arc<str>>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

impl Location {
    /// ` (# Source: demo/templates/rollout.yaml)` after a message about a rendered
    /// document, so the template to edit is named; empty elsewhere. The position itself
    /// stays `file:line:column` of the text read, as editors and CI annotations parse it.
    pub fn template_note(&self) -> String {
        match &self.template {
            Some(t) => format!(" (# Source: {t})"),
            None => String::new(),
        }
    }
}

/// Where each node of one YAML document starts.
#[derive(Debug, Clone, Default)]
pub struct SourceMap {
    pub file: String,
    /// Helm's `# Source:` for the document, if its text names one.
    template: Option<Arc<str>>,
    /// 1-based (line, column) of the node at each JSON pointer; "" is the document root.
    nodes: HashMap<String, (usize, usize)>,
}

impl SourceMap {
    /// The location of the node at `pointer`, or of its nearest ancestor that has one (a
    /// field the user did not write is reported where its parent is).
    pub(crate) fn locate(&self, pointer: &str) -> Location {
        let mut p = pointer;
        loop {
            if let Some(&(line, column)) = self.nodes.get(p) {
                return Location {
                    file: self.file.clone(),
                    line,
                    column,
                    template: self.template.clone(),
                };
            }
            match p.rfind('/') {
                Some(i) => p = &p[..i],
                None => {
                    return Location {
                        file: self.file.clone(),
                        line: self.nodes.get("").map_or(1, |at| at.0),
                        column: 1,
                        template: self.template.clone(),
                    };
                }
            }
        }
    }

    /// Shifts every position: for YAML embedded in another file (a scenario's `inline:`
    /// block), whose first line is `line_offset` lines down and indented `col_offset`.
    pub fn shifted(mut self, line_offset: usize, col_offset: usize) -> Self {
        for (line, col) in self.nodes.values_mut() {
            *line += line_offset;
            *col += col_offset;
        }
        self
    }

    /// The part of the map under `prefix` (`/items/2`), as a map of its own.
    fn under(&self, prefix: &str) -> SourceMap {
        let nodes = self
            .nodes
            .iter()
            .filter_map(|(pointer, at)| {
                let rest = pointer.strip_prefix(prefix)?;
                (rest.is_empty() || rest.starts_with('/')).then(|| (rest.to_string(), *at))
            })
            .collect();
        SourceMap {
            file: self.file.clone(),
            template: self.template.clone(),
            nodes,
        }
    }

    /// A source map for objects that come from no file (created by the simulation).
    pub(crate) fn synthetic(name: &str) -> Self {
        SourceMap {
            file: name.to_string(),
            template: None,
            nodes: HashMap::new(),
        }
    }
}

/// One object read from a file, with where it came from.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub object: Object,
    pub source: Arc<SourceMap>,
}

impl Manifest {
    pub(crate) fn locate(&self, pointer: &str) -> Location {
        self.source.locate(pointer)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{file}: cannot read: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{location}: {message}{}", location.template_note())]
    Invalid { location: Location, message: String },
}

impl LoadError {
    pub fn invalid(location: Location, message: impl Into<String>) -> Self {
        LoadError::Invalid {
            location,
            message: message.into(),
        }
    }
}

/// The largest scenario or manifest file canarysim reads (a chart's output is far smaller;
/// `/dev/zero` or a runaway generator is not read until memory runs out).
pub(crate) const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// How deep YAML may nest (mappings and sequences together). Deeper nesting is refused in
/// one pass over the event stream before a recursive parser sees it: serde_yaml stops at
/// 128 levels, and recursive walks of thousands of levels overflowed the stack.
pub(crate) const MAX_DEPTH: usize = 100;

/// How many nodes (scalars, mappings, sequences) one file may hold; each costs a value and
/// a source position, so this bounds the memory a file takes (about 300 MB at the bound).
pub(crate) const MAX_NODES: usize = 1_000_000;

/// Reads a scenario or manifest file as text: at most [`MAX_FILE_BYTES`].
pub(crate) fn read_text(path: &Path) -> std::io::Result<String> {
    read_bounded(std::fs::File::open(path)?)
}

/// Reads text as a file is read (64 MiB at most, UTF-8): standard input
/// (`canarysim lint -`, as in `helm template . | canarysim lint -`).
pub fn read_bounded(reader: impl std::io::Read) -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    reader.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "larger than {} MiB, the most canarysim reads",
                MAX_FILE_BYTES / (1024 * 1024)
            ),
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
        )
    })
}

pub fn load_file(path: &Path, default_namespace: &str) -> Result<Vec<Manifest>, LoadError> {
    let file = path.display().to_string();
    let text = read_text(path).map_err(|source| LoadError::Io {
        file: file.clone(),
        source,
    })?;
    load_str(&file, &text, default_namespace)
}

/// A UTF-8 byte-order mark begins some editors' files; Kubernetes reads past it, so do we.
fn without_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// The error for nesting deeper than [`MAX_DEPTH`], at the node that goes deeper.
fn nested_too_deep(location: Location) -> LoadError {
    LoadError::invalid(
        location,
        format!("nested more than {MAX_DEPTH} levels deep, the most canarysim reads"),
    )
}

/// Flow collections (`[[[…`) are refused by a scan of the characters, before any YAML
/// scanner: yaml-rust2 looks ahead over a whole flow collection for a possible key, in time
/// that grows with the square of its depth (150,000 levels took minutes). Brackets inside
/// quotes and comments do not count; one in a plain or block scalar does, which can only
/// refuse a file with more than [`MAX_DEPTH`] of them unclosed.
fn check_flow_depth(file: &str, text: &str) -> Result<(), LoadError> {
    let (mut depth, mut line, mut column) = (0usize, 1usize, 0usize);
    let mut quote: Option<char> = None;
    let mut comment = false;
    let mut previous = '\n';
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        column += 1;
        if c == '\n' {
            // A comment ends with its line; a quoted scalar may go on over several.
            (line, column, comment) = (line + 1, 0, false);
        } else if comment {
            // Nothing in a comment counts.
        } else if let Some(q) = quote {
            if c == '\\' && q == '"' {
                chars.next();
                column += 1;
            } else if c == q {
                if q == '\'' && chars.peek() == Some(&'\'') {
                    chars.next();
                    column += 1;
                } else {
                    quote = None;
                }
            }
        } else {
            match c {
                '#' if previous.is_whitespace() => comment = true,
                '\'' | '"' if !previous.is_alphanumeric() => quote = Some(c),
                '[' | '{' => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Err(nested_too_deep(Location {
                            file: file.to_string(),
                            line,
                            column,
                            template: None,
                        }));
                    }
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        previous = c;
    }
    Ok(())
}

/// Parses plain YAML documents (no Kubernetes checks) with their source maps.
pub fn parse_documents(file: &str, text: &str) -> Result<Vec<(Value, Arc<SourceMap>)>, LoadError> {
    documents(file, text, false)
}

/// [`parse_documents`]; `manifests`: the documents are Kubernetes objects, stored as JSON,
/// so a NaN or an infinity is refused (a scenario's own numbers are checked by its fields).
fn documents(
    file: &str,
    text: &str,
    manifests: bool,
) -> Result<Vec<(Value, Arc<SourceMap>)>, LoadError> {
    let text = without_bom(text);
    check_flow_depth(file, text)?;
    let mut maps = source_maps(file, text, manifests)?;
    name_helm_templates(text, &mut maps);
    let mut out = Vec::new();
    // Merge keys (`<<: *base`) as kubectl reads them (YAML 1.1, go-yaml): only where the
    // text could hold one, so every other file keeps the one direct pass.
    let merge_keys = text.contains("<<");
    for (index, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let map = maps
            .get(index)
            .cloned()
            .unwrap_or_else(|| SourceMap::synthetic(file));
        let value = if merge_keys {
            with_merge_keys(file, doc, &map)?
        } else {
            Value::deserialize(doc).map_err(|e| yaml_error(file, &e))?
        };
        if value.is_null() {
            continue; // an empty document (`---` at the end) holds nothing
        }
        out.push((value, Arc::new(map)));
    }
    Ok(out)
}

/// Gives each document the chart template helm rendered it from: the `# Source: PATH`
/// comment helm writes between a document's `---` and its first line.
fn name_helm_templates(text: &str, maps: &mut [SourceMap]) {
    if !text.contains("# Source: ") {
        return;
    }
    let lines: Vec<&str> = text.lines().collect();
    for map in maps {
        let Some(&(root_line, _)) = map.nodes.get("") else {
            continue;
        };
        map.template = lines[..root_line.saturating_sub(1).min(lines.len())]
            .iter()
            .rev()
            .take_while(|l| !l.starts_with("---"))
            .find_map(|l| l.trim().strip_prefix("# Source: "))
            .map(|t| Arc::from(t.trim()));
    }
}

/// One document with its `<<` keys merged into their mappings (keys written beside a `<<`
/// win over the merged ones, as in go-yaml).
fn with_merge_keys(
    file: &str,
    doc: serde_yaml::Deserializer,
    map: &SourceMap,
) -> Result<Value, LoadError> {
    let mut yaml = serde_yaml::Value::deserialize(doc).map_err(|e| yaml_error(file, &e))?;
    yaml.apply_merge()
        .map_err(|e| LoadError::invalid(map.locate(""), format!("a `<<` merge key: {e}")))?;
    serde_json::to_value(yaml)
        .map_err(|e| LoadError::invalid(map.locate(""), format!("after merging `<<` keys: {e}")))
}

/// `value` written as YAML (keys in their order): what `canarysim init` writes.
pub fn to_text(value: &Value) -> Result<String, serde_yaml::Error> {
    serde_yaml::to_string(value)
}

/// Parses multi-document YAML into Kubernetes objects. Every document must be a mapping with
/// a known `kind`, a matching `apiVersion` and `metadata.name`; objects without a namespace
/// get `default_namespace`.
pub fn load_str(
    file: &str,
    text: &str,
    default_namespace: &str,
) -> Result<Vec<Manifest>, LoadError> {
    let mut out = Vec::new();
    let documents = unpack_lists(documents(file, text, true)?);
    // A CRD names its kind's plural and scope for the objects beside it.
    let crds: Vec<CrdNames> = documents
        .iter()
        .filter(|(v, _)| v["kind"] == "CustomResourceDefinition")
        .filter_map(|(v, _)| CrdNames::of(v))
        .collect();
    for (mut value, source) in documents {
        let at = |p: &str| source.locate(p);
        if !value.is_object() {
            return Err(LoadError::invalid(
                at(""),
                "expected a Kubernetes object (a mapping with apiVersion, kind and metadata)",
            ));
        }
        let kind_str = match value.get("kind") {
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(LoadError::invalid(at("/kind"), "kind must be a string")),
            None => return Err(LoadError::invalid(at(""), "missing field `kind`")),
        };
        let api_version = value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let kind = kind_of(&api_version, &kind_str, &crds)
            .map_err(|message| LoadError::invalid(at(message.0), message.1))?;
        let mut object = Object::new(kind, Value::Null);
        std::mem::swap(&mut object.value, &mut value);
        match object.metadata().and_then(|m| m.get("name")) {
            Some(Value::String(s)) if !s.is_empty() => {}
            _ => {
                return Err(LoadError::invalid(
                    at("/metadata"),
                    format!("{kind} has no metadata.name"),
                ));
            }
        }
        if !kind.namespaced() {
            // Kubernetes drops a namespace given to a cluster-scoped object.
            object.metadata_mut().remove("namespace");
        } else if object.namespace().is_empty() {
            object.metadata_mut().insert(
                "namespace".to_string(),
                Value::String(default_namespace.to_string()),
            );
        }
        out.push(Manifest { object, source });
    }
    Ok(out)
}

/// Each `kind: List` (what `kubectl get -o yaml` prints) as its items, each located where
/// it is written.
fn unpack_lists(documents: Vec<(Value, Arc<SourceMap>)>) -> Vec<(Value, Arc<SourceMap>)> {
    let mut out = Vec::with_capacity(documents.len());
    for (value, source) in documents {
        let is_list = value["kind"] == "List" && value["apiVersion"] == "v1";
        match value {
            Value::Object(mut map) if is_list && map.get("items").is_some_and(Value::is_array) => {
                let Some(Value::Array(items)) = map.remove("items") else {
                    continue;
                };
                for (i, item) in items.into_iter().enumerate() {
                    out.push((item, Arc::new(source.under(&format!("/items/{i}")))));
                }
            }
            value => out.push((value, source)),
        }
    }
    out
}

/// The kind of an object written with `apiVersion` and `kind`: a simulated kind (at a
/// version it is served at), else a stored one; or the field at fault and why.
pub(crate) fn kind_of(
    api_version: &str,
    kind: &str,
    crds: &[CrdNames],
) -> Result<Kind, (&'static str, String)> {
    let group = api_version.split_once('/').map_or("", |(group, _)| group);
    if let Some(simulated) = Kind::parse(kind) {
        // `Service` of Knative and `Gateway` of the Gateway API are other kinds, but
        // `Rollout` under `apps` is a mistake.
        let another_apis = group != simulated.group()
            && (stored_kind::describes(group, kind)
                || !(stored_kind::is_known_group(group)
                    || Kind::SIMULATED.iter().any(|k| k.group() == group)));
        if !another_apis {
            if !simulated.accepts_api_version(api_version) {
                return Err((
                    "/apiVersion",
                    format!(
                        "apiVersion \"{api_version}\" is not served for kind {simulated}, expected {}",
                        match simulated {
                            Kind::VirtualService | Kind::DestinationRule | Kind::Gateway =>
                                "networking.istio.io/v1alpha3, v1beta1 or v1".to_string(),
                            _ => simulated.default_api_version(),
                        }
                    ),
                ));
            }
            return Ok(simulated);
        }
    }
    let simulated: Vec<(&'static str, &'static str)> = Kind::SIMULATED
        .iter()
        .map(|k| (k.group(), k.as_str()))
        .collect();
    stored_kind::resolve(api_version, kind, crds, &simulated)
        .map(Kind::Stored)
        .map_err(|refused| {
            let field = match refused {
                stored_kind::KindRefused::VersionNotServed => "/apiVersion",
                _ => "/kind",
            };
            (field, refused.message(api_version, kind))
        })
}

/// [`load_str`] for YAML embedded in another file at a line and indentation offset: every
/// position (errors and source maps) is reported in the outer file's coordinates.
pub(crate) fn load_embedded(
    file: &str,
    text: &str,
    default_namespace: &str,
    line_offset: usize,
    col_offset: usize,
) -> Result<Vec<Manifest>, LoadError> {
    match load_str(file, text, default_namespace) {
        Ok(manifests) => Ok(manifests
            .into_iter()
            .map(|m| Manifest {
                object: m.object,
                source: Arc::new((*m.source).clone().shifted(line_offset, col_offset)),
            })
            .collect()),
        Err(LoadError::Invalid {
            mut location,
            message,
        }) => {
            location.line += line_offset;
            location.column += col_offset;
            Err(LoadError::Invalid { location, message })
        }
        Err(e) => Err(e),
    }
}

/// A serde_yaml error as `file:line:column: message`.
/// Decodes one YAML document into `T` (a scenario file, say), errors with file:line:column.
pub fn decode<T: serde::de::DeserializeOwned>(file: &str, text: &str) -> Result<T, LoadError> {
    let text = without_bom(text);
    // serde_yaml stops block nesting at 128 levels by itself; deep flow collections are
    // refused before any scanner walks them.
    check_flow_depth(file, text)?;
    serde_yaml::from_str(text).map_err(|e| yaml_error(file, &e))
}

/// Deserializes an externally tagged enum list written as YAML maps (`- wait: 1m`), the way
/// serde_yaml's `singleton_map_recursive` does; for `#[serde(with = …)]`.
pub mod singleton_map {
    pub use serde_yaml::with::singleton_map_recursive::*;
}

pub(crate) fn yaml_error(file: &str, e: &serde_yaml::Error) -> LoadError {
    let (line, column) = e
        .location()
        .map(|l| (l.line(), l.column()))
        .unwrap_or((1, 1));
    // serde_yaml appends " at line L column C"; the location already says it.
    let text = e.to_string();
    let message = match text.find(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    };
    let message = shorten(&message);
    LoadError::invalid(
        Location {
            file: file.to_string(),
            line,
            column,
            template: None,
        },
        message,
    )
}

/// serde's messages quote the offending value; a value of megabytes is cut, so that the
/// message stays a line a person can read.
fn shorten(message: &str) -> String {
    const KEEP: usize = 200;
    if message.chars().count() <= KEEP + 40 {
        return message.to_string();
    }
    let head: String = message.chars().take(KEEP).collect();
    format!("{head}… ({} characters in all)", message.chars().count())
}

/// One source map per document, in one pass over yaml-rust2's events: a loop, since its
/// `load` recurses once a level and overflowed the stack on deep nesting. Nesting deeper
/// than [`MAX_DEPTH`] and more than [`MAX_NODES`] nodes are refused here, before serde_yaml
/// reads the text. A document yaml-rust2 cannot parse gets no map (serde_yaml reports the
/// syntax error itself). With `finite`, a value YAML reads as NaN or an infinity is refused
/// where it is written.
fn source_maps(file: &str, text: &str, finite: bool) -> Result<Vec<SourceMap>, LoadError> {
    let mut builder = MapBuilder {
        file: file.to_string(),
        docs: Vec::new(),
        stack: Vec::new(),
        duplicate: None,
        non_finite: None,
        finite,
    };
    let mut parser = Parser::new_from_str(text);
    let mut nodes = 0usize;
    let at = |mark: Marker| Location {
        file: file.to_string(),
        line: mark.line(),
        column: mark.col() + 1,
        template: None,
    };
    while let Ok((event, mark)) = parser.next_token() {
        if event == Event::StreamEnd {
            break;
        }
        nodes += usize::from(matches!(
            event,
            Event::MappingStart(..)
                | Event::SequenceStart(..)
                | Event::Scalar(..)
                | Event::Alias(_)
        ));
        builder.on_event(event, mark);
        if let Some((key, first_line)) = builder.duplicate.take() {
            // As kubectl refuses it (sigs.k8s.io/yaml: `key "name" already set in map`):
            // serde_yaml would name no place, and a lenient reader keeps one of the two.
            return Err(LoadError::invalid(
                at(mark),
                format!("key {key:?} already set in this mapping, at line {first_line}"),
            ));
        }
        if let Some((pointer, text)) = builder.non_finite.take() {
            // serde_json keeps no NaN or infinity: the value would become null in silence
            // (`replicas: .nan` ran one pod). kubectl refuses the file, as JSON cannot hold it.
            let json = if text.to_ascii_lowercase().contains("nan") {
                "NaN"
            } else if text.starts_with('-') {
                "-Inf"
            } else {
                "+Inf"
            };
            return Err(LoadError::invalid(
                at(mark),
                format!(
                    "{}: {text} is not a number Kubernetes can store: expected a finite number (JSON has no NaN or infinity; kubectl refuses the file: json: unsupported value: {json})",
                    field_of(&pointer)
                ),
            ));
        }
        // The builder's stack holds the collections open here.
        if builder.stack.len() > MAX_DEPTH {
            return Err(nested_too_deep(at(mark)));
        }
        if nodes > MAX_NODES {
            return Err(LoadError::invalid(
                at(mark),
                format!("more than {MAX_NODES} YAML nodes, the most canarysim reads in one file"),
            ));
        }
    }
    Ok(builder.docs)
}

enum Frame {
    Mapping {
        path: String,
        key: Option<String>,
        first: bool,
        /// Keys so far, with their lines: a key written twice is refused.
        lines: HashMap<String, usize>,
    },
    Sequence {
        path: String,
        index: usize,
    },
}

struct MapBuilder {
    file: String,
    docs: Vec<SourceMap>,
    stack: Vec<Frame>,
    /// A key met twice in one mapping, and the line of its first.
    duplicate: Option<(String, usize)>,
    /// A value YAML reads as NaN or an infinity (`.nan`, `-.inf`), and its pointer.
    non_finite: Option<(String, String)>,
    /// Whether such a value is looked for (Kubernetes objects, stored as JSON).
    finite: bool,
}

/// The plain scalars YAML 1.2's core schema (and serde_yaml) read as NaN or an infinity.
fn is_non_finite(scalar: &str) -> bool {
    matches!(
        scalar.strip_prefix(['+', '-']).unwrap_or(scalar),
        ".inf" | ".Inf" | ".INF"
    ) || matches!(scalar, ".nan" | ".NaN" | ".NAN")
}

/// A JSON pointer as a field path for messages: `/spec/ports/0/port` → `spec.ports[0].port`.
fn field_of(pointer: &str) -> String {
    let mut out = String::new();
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{segment}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&segment);
        }
    }
    if out.is_empty() {
        "the document".to_string()
    } else {
        out
    }
}

impl MapBuilder {
    /// The pointer of the next value node, or None when the next node is a mapping key.
    fn next_value_path(&self) -> Option<String> {
        match self.stack.last() {
            None => Some(String::new()),
            Some(Frame::Mapping { key: None, .. }) => None,
            Some(Frame::Mapping {
                path, key: Some(k), ..
            }) => Some(format!("{path}/{}", escape_pointer(k))),
            Some(Frame::Sequence { path, index }) => Some(format!("{path}/{index}")),
        }
    }

    /// A value node is complete: the parent moves on.
    fn advance(&mut self) {
        match self.stack.last_mut() {
            Some(Frame::Mapping { key, .. }) => *key = None,
            Some(Frame::Sequence { index, .. }) => *index += 1,
            None => {}
        }
    }

    fn record(&mut self, path: &str, mark: Marker) {
        if let Some(doc) = self.docs.last_mut() {
            // yaml-rust2 lines are 1-based, columns 0-based.
            doc.nodes
                .entry(path.to_string())
                .or_insert((mark.line(), mark.col() + 1));
        }
    }
}

impl MarkedEventReceiver for MapBuilder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        match ev {
            Event::DocumentStart => {
                self.docs.push(SourceMap {
                    file: self.file.clone(),
                    template: None,
                    nodes: HashMap::new(),
                });
                self.stack.clear();
            }
            Event::Scalar(s, style, _, tag) => match self.next_value_path() {
                None => {
                    if let Some(Frame::Mapping {
                        key,
                        path,
                        first,
                        lines,
                    }) = self.stack.last_mut()
                    {
                        // `<<` merge keys may repeat.
                        if s != "<<" {
                            if let Some(line) = lines.insert(s.clone(), mark.line()) {
                                self.duplicate = Some((s.clone(), line));
                            }
                        }
                        *key = Some(s);
                        // yaml-rust2 marks a block mapping's start at its first `:`; its
                        // first key is where a reader sees the mapping begin.
                        if std::mem::take(first) {
                            let path = path.clone();
                            if let Some(doc) = self.docs.last_mut() {
                                doc.nodes.insert(path, (mark.line(), mark.col() + 1));
                            }
                        }
                    }
                }
                Some(path) => {
                    if self.finite
                        && style == TScalarStyle::Plain
                        && tag.is_none()
                        && is_non_finite(&s)
                    {
                        self.non_finite.get_or_insert((path.clone(), s));
                    }
                    self.record(&path, mark);
                    self.advance();
                }
            },
            Event::Alias(_) => {
                if let Some(path) = self.next_value_path() {
                    self.record(&path, mark);
                }
                self.advance();
            }
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                // A complex (non-scalar) mapping key: track it under a placeholder name.
                let path = self
                    .next_value_path()
                    .unwrap_or_else(|| "/<complex key>".to_string());
                self.record(&path, mark);
                let frame = if matches!(ev, Event::MappingStart(..)) {
                    Frame::Mapping {
                        path,
                        key: None,
                        first: true,
                        lines: HashMap::new(),
                    }
                } else {
                    Frame::Sequence { path, index: 0 }
                };
                self.stack.push(frame);
            }
            Event::MappingEnd | Event::SequenceEnd => {
                self.stack.pop();
                self.advance();
            }
            _ => {}
        }
    }
}

/// JSON pointer escaping (RFC 6901).
pub(crate) fn escape_pointer(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// Writes a value as YAML (the TUI saves what was run as a scenario file).
pub fn to_yaml(value: &Value) -> Result<String, String> {
    serde_yaml::to_string(value).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helms_source_comment_names_its_document_and_no_other() {
        let text = "\
---
# Source: demo/templates/a.yaml
apiVersion: v1
kind: ConfigMap
metadata: {name: a}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: b}
---
# a comment
# Source: demo/templates/c.yaml

apiVersion: v1
kind: ConfigMap
metadata: {name: c}
";
        let docs = parse_documents("STDIN", text).unwrap();
        let templates: Vec<Option<String>> = docs
            .iter()
            .map(|(_, map)| map.locate("/metadata/name").template.map(|t| t.to_string()))
            .collect();
        assert_eq!(
            templates,
            [
                Some("demo/templates/a.yaml".to_string()),
                None,
                Some("demo/templates/c.yaml".to_string())
            ]
        );
        let at = docs[2].1.locate("");
        assert_eq!(at.to_string(), "STDIN:14:1", "the position is the text's");
        assert_eq!(at.template_note(), " (# Source: demo/templates/c.yaml)");
    }

    const TWO_DOCS: &str = "\
apiVersion: v1
kind: Service
metadata:
  name: a
spec:
  selector:
    app: x
---
apiVersion: networking.istio.io/v1alpha3
kind: VirtualService
metadata:
  name: vs
  namespace: other
spec:
  http:
  - name: primary
    route:
    - destination:
        host: a
      weight: 100
";

    #[test]
    fn merge_keys_are_merged_as_kubectl_reads_them() {
        let text = "apiVersion: v1\nkind: Service\nmetadata:\n  name: b\n  labels: &l {app: b}\nspec:\n  <<: [{ports: [{port: 80}], selector: {app: a}}, {type: ClusterIP}]\n  selector: *l\n";
        let m = load_str("m.yaml", text, "demo").unwrap();
        let spec = &m[0].object.value["spec"];
        assert_eq!(spec["ports"][0]["port"], 80);
        assert_eq!(spec["type"], "ClusterIP");
        // A key written beside `<<` wins over the merged one.
        assert_eq!(spec["selector"]["app"], "b");
        assert!(spec.get("<<").is_none());
        let err = load_str(
            "m.yaml",
            "apiVersion: v1\nkind: Service\nmetadata: {name: b}\nspec: {<<: 3}\n",
            "demo",
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("m.yaml:1:1: a `<<` merge key: "), "{err}");
    }

    #[test]
    fn loads_documents_with_default_namespace() {
        let m = load_str("m.yaml", TWO_DOCS, "demo").unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].object.namespace(), "demo");
        assert_eq!(m[1].object.namespace(), "other");
        assert_eq!(m[1].object.kind, Kind::VirtualService);
    }

    #[test]
    fn source_map_points_at_values_in_their_document() {
        let m = load_str("m.yaml", TWO_DOCS, "demo").unwrap();
        let loc = m[1].locate("/spec/http/0/route/0/destination/host");
        assert_eq!((loc.line, loc.column), (19, 15));
        // A pointer the user did not write falls back to its nearest ancestor.
        let loc = m[0].locate("/spec/selector/missing");
        assert_eq!((loc.line, loc.column), (7, 5));
        assert_eq!(m[0].locate("/kind").to_string(), "m.yaml:2:7");
    }

    #[test]
    fn a_misspelt_kind_names_file_line_column() {
        let err = load_str(
            "x.yaml",
            "apiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: d}\n",
            "d",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "x.yaml:2:7: no matches for kind \"Deploymnet\" in version \"apps/v1\"; did you mean Deployment?"
        );
        let err = load_str(
            "x.yaml",
            "apiVersion: v1\nkind: Widget\nmetadata: {name: w}\n",
            "d",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "x.yaml:2:7: no matches for kind \"Widget\" in version \"v1\""
        );
        // A simulated kind under a Kubernetes group is a mistake, as before.
        let err = load_str(
            "x.yaml",
            "apiVersion: apps/v1\nkind: Rollout\nmetadata: {name: r}\n",
            "d",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("x.yaml:1:13: apiVersion \"apps/v1\" is not served for kind Rollout"),
            "{err}"
        );
    }

    #[test]
    fn a_list_is_read_as_its_items_each_located_where_written() {
        let text = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  \
                    metadata: {name: a}\n- apiVersion: apps/v1\n  kind: Deploymnet\n  metadata: {name: d}\n";
        let err = load_str("l.yaml", text, "demo").unwrap_err().to_string();
        assert!(
            err.starts_with("l.yaml:8:9: no matches for kind \"Deploymnet\""),
            "{err}"
        );
        let text = text.replace("Deploymnet", "Deployment");
        let loaded = load_str("l.yaml", &text, "demo").unwrap();
        let names: Vec<&str> = loaded.iter().map(|m| m.object.name()).collect();
        assert_eq!(names, ["a", "d"]);
        assert_eq!(loaded[1].locate("/metadata").line, 9);
    }

    #[test]
    fn any_other_kind_is_stored_with_its_names_and_scope() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n---\n\
                    apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n\
                    metadata: {name: r, namespace: ignored}\n---\n\
                    apiVersion: serving.knative.dev/v1\nkind: Service\nmetadata: {name: k}\n---\n\
                    apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: g}\n";
        let loaded = load_str("x.yaml", text, "demo").unwrap();
        let kinds: Vec<(String, &str, &str)> = loaded
            .iter()
            .map(|m| {
                (
                    m.object.kind.to_string(),
                    m.object.kind.group(),
                    m.object.namespace(),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("ConfigMap".to_string(), "", "demo"),
                ("ClusterRole".to_string(), "rbac.authorization.k8s.io", ""),
                ("Service".to_string(), "serving.knative.dev", "demo"),
                ("Gateway".to_string(), "gateway.networking.k8s.io", "demo"),
            ]
        );
        assert!(loaded.iter().all(|m| m.object.kind.is_stored_only()));
        assert_eq!(loaded[0].object.value["data"]["a"], "b");
    }

    #[test]
    fn nan_and_infinities_are_refused_in_manifests_where_written() {
        for (value, json) in [
            (".nan", "NaN"),
            (".Inf", "+Inf"),
            ("-.INF", "-Inf"),
            ("+.inf", "+Inf"),
        ] {
            let text = format!(
                "apiVersion: v1\nkind: Service\nmetadata: {{name: s}}\nspec:\n  ports: [{{port: {value}}}]\n"
            );
            let err = load_str("n.yaml", &text, "d").unwrap_err().to_string();
            assert_eq!(
                err,
                format!(
                    "n.yaml:5:18: spec.ports[0].port: {value} is not a number Kubernetes can store: expected a finite number (JSON has no NaN or infinity; kubectl refuses the file: json: unsupported value: {json})"
                )
            );
        }
        // Quoted, they are strings; in a scenario's own fields, the fields decide.
        let text = "apiVersion: v1\nkind: Service\nmetadata: {name: s, labels: {a: \".nan\"}}\n";
        assert!(load_str("q.yaml", text, "d").is_ok());
        assert!(parse_documents("s.yaml", "wait: .nan\n").is_ok());
    }

    #[test]
    fn syntax_error_names_file_line_column() {
        let err = load_str("bad.yaml", "kind: Service\nmetadata:\n  name: [a\n", "d")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("bad.yaml:4:1: "), "{err}");
    }

    #[test]
    fn missing_name_is_reported_at_metadata() {
        let err = load_str(
            "n.yaml",
            "apiVersion: v1\nkind: Service\nmetadata:\n  labels: {}\n",
            "d",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("n.yaml:4:3: Service has no metadata.name"),
            "{err}"
        );
    }
}
