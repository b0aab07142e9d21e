//! The bundled scenarios and manifests edited as a typo or a generator's bug would edit
//! them, then planned and run (issue 34). Random bytes seldom survive the YAML parser, and
//! `scenario_plan` never runs what it plans; this target starts from every bundled file and
//! changes its tree: numbers at their extremes, durations from a nanosecond to Go's longest,
//! keys written twice, list items repeated (duplicate names), nesting up to 250,000 levels
//! (flow and block), long scalars, wrong shapes (any node grafted anywhere), empty values,
//! extra steps, a byte-order mark and CRLF line ends. What it asks of canarysim:
//! * no panic, no hang (libFuzzer's -timeout) and no run past its memory limit;
//! * a refusal in the user's words: no Rust type in the message.
//!
//! Loads are cut to a fuzzing budget (`common/bounded.rs`).
#![no_main]

#[path = "../common/bounded.rs"]
mod bounded;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use canarysim::scenario::{Files, load};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;

/// A YAML tree as it will be written: scalars keep their text, mappings may hold a key twice.
#[derive(Clone, Debug)]
enum Node {
    Scalar(String),
    Seq(Vec<Node>),
    Map(Vec<(String, Node)>),
    /// `inner` wrapped in `depth` levels, written without recursion.
    Nest {
        depth: usize,
        style: Nesting,
        inner: Box<Node>,
    },
}

#[derive(Clone, Copy, Debug, Arbitrary)]
enum Nesting {
    FlowList,
    FlowMap,
    BlockList,
    BlockMap,
}

/// One file: its documents.
type Tree = Vec<Node>;

const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "-1",
    "1",
    "2147483647",
    "2147483648",
    "-2147483649",
    "4294967295",
    "4294967296",
    "9007199254740993",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "1e308",
    "1e309",
    "-1e309",
    "1e-300",
    "0.5",
    "99.999999999",
    "100.0000001",
    ".nan",
    ".inf",
    "-.inf",
    "0x10",
    "0o17",
    "1_000",
    "+5",
    "65535",
    "65536",
    "70000",
];

const DURATIONS: &[&str] = &[
    "1ns",
    "999ns",
    "1500ns",
    "1us1ns",
    "0.5us",
    "1µs",
    "0s",
    "0",
    "-1s",
    "-1ns",
    "5",
    "5.5",
    "2562047h",
    "2562048h",
    "2562047h47m16.854775807s",
    "9223372036s",
    "1h1ns",
    "0.000001ms",
    "1e3s",
    "1.5h",
    "300ms",
    "1d",
    "s",
    "",
    "1m-1s",
    "100000000000000000000s",
];

const WORDS: &[&str] = &[
    "\"\"",
    "null",
    "~",
    "oops",
    "\"-\"",
    "\"{\"",
    "true",
    "\"\\0\"",
    "\"../../x\"",
    "\"a/b\"",
    "Bad_Name",
    "\"\\u00e9t\\u00e9\"",
    "\"a b\"",
    "\"*\"",
    "\"%\"",
    "\"50%\"",
    "\"-5%\"",
    "\"1000%\"",
    "\"\\t\"",
    "yes",
    "\"<<\"",
];

/// Steps a generator might append: each reaches a different part of the runner.
const STEPS: &[&str] = &[
    "{wait: 1ns}",
    "{wait: 999ns}",
    "{wait: 2562047h}",
    "{load: {requests: 100}}",
    "{load: {duration: 1s}}",
    "{load: {duration: 1500ns, connections: 3}}",
    "{load: {requests: 50, rate: 0.001}}",
    "{load: {requests: 50, rate: 1e300}}",
    "{wait: {until: paused, timeout: 1ns}}",
    "{wait: {until: healthy, timeout: 2562047h}}",
    "{promote: rollouts-demo}",
    "{promote: {rollout: rollouts-demo, full: true}}",
    "{abort: rollouts-demo}",
    "{retry: rollouts-demo}",
    "{undo: {rollout: rollouts-demo, to_revision: -1}}",
    "{restart: {rollout: rollouts-demo, in: 1ns}}",
    "{set_image: {rollout: rollouts-demo, container: rollouts-demo, image: \"\"}}",
    "{set_image: {rollout: rollouts-demo, container: rollouts-demo, image: argoproj/rollouts-demo:green}}",
    "{fail_pods: {rollout: rollouts-demo, role: canary, count: 1000000}}",
    "{expect: {phase: Healthy}}",
    "{expect_split: {canary: 20, within: 1, confidence: 0.999}}",
];

#[derive(Arbitrary, Debug)]
enum Change {
    Number(u8),
    Duration(u8),
    Word(u8),
    /// A mapping's entry written again (its own value or another node's).
    KeyTwice {
        entry: u8,
        graft: Option<u16>,
    },
    /// A list's item repeated: duplicate names in managedRoutes, steps, ports, routes.
    Repeat {
        item: u8,
        times: u8,
    },
    Nest {
        depth: u32,
        style: Nesting,
    },
    Long(u32),
    Empty,
    Drop {
        entry: u8,
    },
    /// Another node of the same file put here: a mapping where a word was, and so on.
    Graft(u16),
}

#[derive(Arbitrary, Debug)]
struct Edit {
    /// `None`: the scenario; `Some(m)`: the m-th bundled manifest file.
    manifest: Option<u8>,
    at: u16,
    change: Change,
}

#[derive(Arbitrary, Debug)]
enum Run {
    Plan,
    Run,
    Compare,
}

#[derive(Arbitrary, Debug)]
struct Input {
    scenario: u8,
    edits: Vec<Edit>,
    steps: Vec<u8>,
    push_delay: Option<u8>,
    bom: bool,
    crlf: bool,
    run: Run,
}

fn bundled(dir: &str) -> Vec<(PathBuf, Tree)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let docs = serde_yaml::Deserializer::from_str(&text)
                .map(|d| node_of(&serde::Deserialize::deserialize(d).unwrap()))
                .collect();
            (p, docs)
        })
        .collect()
}

fn scenarios() -> &'static [(PathBuf, Tree)] {
    static FILES: OnceLock<Vec<(PathBuf, Tree)>> = OnceLock::new();
    FILES.get_or_init(|| bundled("scenarios"))
}

fn manifests() -> &'static [(PathBuf, Tree)] {
    static FILES: OnceLock<Vec<(PathBuf, Tree)>> = OnceLock::new();
    FILES.get_or_init(|| bundled("scenarios/manifests"))
}

fn node_of(v: &serde_yaml::Value) -> Node {
    use serde_yaml::Value as V;
    match v {
        V::Null => Node::Scalar("null".into()),
        V::Bool(b) => Node::Scalar(b.to_string()),
        V::Number(n) => Node::Scalar(n.to_string()),
        V::String(s) => Node::Scalar(serde_json::to_string(s).unwrap()),
        V::Sequence(items) => Node::Seq(items.iter().map(node_of).collect()),
        V::Mapping(m) => Node::Map(m.iter().map(|(k, v)| (key_text(k), node_of(v))).collect()),
        V::Tagged(t) => node_of(&t.value),
    }
}

fn key_text(k: &serde_yaml::Value) -> String {
    match k {
        serde_yaml::Value::String(s)
            if !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c)) =>
        {
            s.clone()
        }
        serde_yaml::Value::String(s) => serde_json::to_string(s).unwrap(),
        other => serde_yaml::to_string(other).unwrap().trim().to_string(),
    }
}

fn count(node: &Node) -> usize {
    1 + match node {
        Node::Scalar(_) => 0,
        Node::Seq(items) => items.iter().map(count).sum(),
        Node::Map(entries) => entries.iter().map(|(_, v)| count(v)).sum(),
        Node::Nest { inner, .. } => count(inner),
    }
}

/// About how many bytes `emit` writes for `node` at `indent` (an upper bound, saturating):
/// edits that would grow a file past [`MOST_TEXT`] are skipped before they are made, so that
/// the harness itself never holds gigabytes (255 copies of a 4 MB scalar).
fn emitted(node: &Node, indent: usize) -> usize {
    let sum = |sizes: &mut dyn Iterator<Item = usize>| sizes.fold(0usize, usize::saturating_add);
    match node {
        Node::Scalar(s) => s.len() + 1,
        Node::Seq(items) => sum(&mut items
            .iter()
            .map(|i| (indent + 2).saturating_add(emitted(i, indent + 2))))
        .max(3),
        Node::Map(entries) => sum(&mut entries
            .iter()
            .map(|(k, v)| (indent + k.len() + 4).saturating_add(emitted(v, indent + 2))))
        .max(3),
        Node::Nest {
            depth,
            style,
            inner,
        } => {
            let inner_at = |at: usize| emitted(inner, at);
            match style {
                Nesting::FlowList | Nesting::FlowMap => {
                    depth.saturating_mul(5).saturating_add(inner_at(0)) + 1
                }
                Nesting::BlockList => {
                    let at = indent.saturating_add(depth.saturating_mul(2));
                    depth.saturating_mul(2).saturating_add(inner_at(at))
                }
                Nesting::BlockMap => {
                    let at = indent.saturating_add(depth.saturating_mul(2));
                    depth
                        .saturating_mul(at.saturating_add(3))
                        .saturating_add(inner_at(at))
                }
            }
        }
    }
}

fn emitted_tree(tree: &Tree) -> usize {
    tree.iter()
        .map(|doc| emitted(doc, 0) + 4)
        .fold(0, usize::saturating_add)
}

/// The `n`-th node in pre-order.
fn nth<'a>(node: &'a mut Node, n: &mut usize) -> Option<&'a mut Node> {
    if *n == 0 {
        return Some(node);
    }
    *n -= 1;
    match node {
        Node::Scalar(_) => None,
        Node::Seq(items) => items.iter_mut().find_map(|i| nth(i, n)),
        Node::Map(entries) => entries.iter_mut().find_map(|(_, v)| nth(v, n)),
        Node::Nest { inner, .. } => nth(inner, n),
    }
}

fn node_at(tree: &mut Tree, at: usize) -> Option<&mut Node> {
    let total: usize = tree.iter().map(count).sum();
    if total == 0 {
        return None;
    }
    let mut n = at % total;
    tree.iter_mut().find_map(|d| nth(d, &mut n))
}

fn clone_at(tree: &mut Tree, at: usize) -> Option<Node> {
    node_at(tree, at).map(|n| n.clone())
}

fn apply(tree: &mut Tree, edit: &Edit) {
    // What the file may still grow by; an edit that would grow it more is not made.
    let room = MOST_TEXT.saturating_sub(emitted_tree(tree));
    let graft = match edit.change {
        Change::Graft(g) => clone_at(tree, usize::from(g)),
        Change::KeyTwice { graft: Some(g), .. } => clone_at(tree, usize::from(g)),
        _ => None,
    }
    .filter(|g| emitted(g, 64) <= room);
    let Some(node) = node_at(tree, usize::from(edit.at)) else {
        return;
    };
    let pick = |table: &[&str], i: u8| Node::Scalar(table[usize::from(i) % table.len()].into());
    match &edit.change {
        Change::Number(i) => *node = pick(NUMBERS, *i),
        Change::Duration(i) => *node = pick(DURATIONS, *i),
        Change::Word(i) => *node = pick(WORDS, *i),
        Change::KeyTwice { entry, .. } => {
            if let Node::Map(entries) = node {
                if !entries.is_empty() {
                    let (k, v) = entries[usize::from(*entry) % entries.len()].clone();
                    entries.push((k, graft.unwrap_or(v)));
                }
            }
        }
        Change::Repeat { item, times } => {
            if let Node::Seq(items) = node {
                if !items.is_empty() {
                    let again = &items[usize::from(*item) % items.len()];
                    // Measured at a generous indent: the copies may sit deep.
                    if emitted(again, 64).saturating_mul(usize::from(*times)) <= room {
                        let again = again.clone();
                        items.extend(std::iter::repeat_n(again, usize::from(*times)));
                    }
                }
            }
        }
        Change::Nest { depth, style } => {
            let most = match style {
                Nesting::FlowList | Nesting::FlowMap => 250_000,
                Nesting::BlockList => 60_000,
                // Each level indents by two more columns: the file grows with the square.
                Nesting::BlockMap => 1_500,
            };
            let inner = Box::new(std::mem::replace(node, Node::Scalar("null".into())));
            *node = Node::Nest {
                depth: *depth as usize % most + 1,
                style: *style,
                inner,
            };
        }
        Change::Long(len) => {
            let len = *len as usize % (4 << 20);
            if len <= room {
                *node = Node::Scalar("a".repeat(len));
            }
        }
        Change::Empty => {
            *node = match node {
                Node::Map(_) => Node::Map(Vec::new()),
                Node::Seq(_) => Node::Seq(Vec::new()),
                _ => Node::Scalar("\"\"".into()),
            }
        }
        Change::Drop { entry } => {
            if let Node::Map(entries) = node {
                if !entries.is_empty() {
                    entries.remove(usize::from(*entry) % entries.len());
                }
            }
        }
        Change::Graft(_) => {
            if let Some(g) = graft {
                *node = g;
            }
        }
    }
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

/// Block style; `inline`: the cursor already stands at `indent` (after `- `).
fn emit(node: &Node, indent: usize, inline: bool, out: &mut String) {
    match node {
        Node::Scalar(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Node::Map(entries) if entries.is_empty() => out.push_str("{}\n"),
        Node::Seq(items) if items.is_empty() => out.push_str("[]\n"),
        Node::Map(entries) => {
            for (i, (k, v)) in entries.iter().enumerate() {
                if !(inline && i == 0) {
                    pad(out, indent);
                }
                out.push_str(k);
                out.push(':');
                match v {
                    Node::Map(e) if !e.is_empty() => {
                        out.push('\n');
                        emit(v, indent + 2, false, out);
                    }
                    Node::Seq(e) if !e.is_empty() => {
                        out.push('\n');
                        emit(v, indent + 2, false, out);
                    }
                    Node::Nest {
                        style: Nesting::BlockList | Nesting::BlockMap,
                        ..
                    } => {
                        out.push('\n');
                        pad(out, indent + 2);
                        emit(v, indent + 2, true, out);
                    }
                    _ => {
                        out.push(' ');
                        emit(v, indent + 2, true, out);
                    }
                }
            }
        }
        Node::Seq(items) => {
            for (i, item) in items.iter().enumerate() {
                if !(inline && i == 0) {
                    pad(out, indent);
                }
                out.push_str("- ");
                emit(item, indent + 2, true, out);
            }
        }
        Node::Nest {
            depth,
            style,
            inner,
        } => match style {
            Nesting::FlowList | Nesting::FlowMap => {
                let (open, close) = match style {
                    Nesting::FlowList => ("[", "]"),
                    _ => ("{k: ", "}"),
                };
                out.push_str(&open.repeat(*depth));
                let mut flat = String::new();
                emit_flow(inner, &mut flat);
                out.push_str(&flat);
                out.push_str(&close.repeat(*depth));
                out.push('\n');
            }
            Nesting::BlockList => {
                out.push_str(&"- ".repeat(*depth));
                emit(inner, indent + 2 * depth, true, out);
            }
            Nesting::BlockMap => {
                for level in 0..*depth {
                    if level > 0 {
                        pad(out, indent + 2 * level);
                    }
                    out.push_str("k:\n");
                }
                pad(out, indent + 2 * depth);
                emit(inner, indent + 2 * depth, true, out);
            }
        },
    }
}

/// Flow style, for what sits inside a flow nest.
fn emit_flow(node: &Node, out: &mut String) {
    match node {
        Node::Scalar(s) => out.push_str(s),
        Node::Seq(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                emit_flow(item, out);
            }
            out.push(']');
        }
        Node::Map(entries) => {
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(k);
                out.push_str(": ");
                emit_flow(v, out);
            }
            out.push('}');
        }
        Node::Nest { depth, inner, .. } => {
            out.push_str(&"[".repeat(*depth));
            emit_flow(inner, out);
            out.push_str(&"]".repeat(*depth));
        }
    }
}

fn text_of(tree: &Tree, bom: bool, crlf: bool) -> String {
    let mut out = String::new();
    if bom {
        out.push('\u{feff}');
    }
    for (i, doc) in tree.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        emit(doc, 0, false, &mut out);
    }
    if crlf { out.replace('\n', "\r\n") } else { out }
}

/// The edited scenario in memory; the edited manifest in place of its bundled file.
struct Memory {
    scenario: String,
    manifests: Vec<(String, String)>,
}

impl Files for Memory {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        if path == Path::new("fuzz/scenario.yaml") {
            return Ok(self.scenario.clone());
        }
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if let Some((_, text)) = self.manifests.iter().find(|(n, _)| n == name) {
            return Ok(text.clone());
        }
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../scenarios/manifests")
                .join(name),
        )
    }
}

/// Phrases that give a Rust type away (the user's words are asked for, issue 34).
const RUST_WORDS: &[&str] = &[
    "untagged enum",
    "struct ",
    "newtype",
    "unit value",
    "::",
    " u8",
    " u16",
    " u32",
    " u64",
    " usize",
    " i32",
    " i64",
    " f64",
    "Vec<",
    "Option<",
];

/// Whether the edits or the files carry a phrase of [`RUST_WORDS`] themselves.
fn echoes_rust_words(text: &str) -> bool {
    RUST_WORDS.iter().any(|w| text.contains(w))
}

/// At most this many bytes of YAML per file: the depth and node limits refuse a deep file
/// long before; past them a run only measures the parser's speed.
const MOST_TEXT: usize = 16 << 20;

fuzz_target!(|input: Input| {
    let all = scenarios();
    let (_, base) = &all[usize::from(input.scenario) % all.len()];
    let mut scenario = base.clone();
    let mut edited: Vec<(usize, Tree)> = Vec::new();
    for edit in input.edits.iter().take(12) {
        match edit.manifest {
            None => apply(&mut scenario, edit),
            Some(m) => {
                let m = usize::from(m) % manifests().len();
                let tree = match edited.iter_mut().find(|(i, _)| *i == m) {
                    Some((_, tree)) => tree,
                    None => {
                        edited.push((m, manifests()[m].1.clone()));
                        &mut edited.last_mut().unwrap().1
                    }
                };
                apply(tree, edit);
            }
        }
    }
    if let Some(Node::Map(root)) = scenario.first_mut() {
        if let Some(i) = input.push_delay {
            let delay = pick_text(DURATIONS, i);
            match root.iter_mut().find(|(k, _)| k == "cluster") {
                Some((_, Node::Map(cluster))) => cluster.push(("push_delay".into(), delay)),
                _ => root.push((
                    "cluster".into(),
                    Node::Map(vec![("push_delay".into(), delay)]),
                )),
            }
        }
        if let Some((_, Node::Seq(steps))) = root.iter_mut().find(|(k, _)| k == "steps") {
            for s in input.steps.iter().take(8) {
                steps.push(pick_text(STEPS, *s));
            }
        }
    }
    // Past the limit only the parser's speed would be measured: not worth writing out.
    if emitted_tree(&scenario) > MOST_TEXT
        || edited
            .iter()
            .any(|(_, tree)| emitted_tree(tree) > MOST_TEXT)
    {
        return;
    }
    let text = text_of(&scenario, input.bom, input.crlf);
    let manifests: Vec<(String, String)> = edited
        .iter()
        .map(|(m, tree)| {
            let name = manifests()[*m].0.file_name().unwrap().to_str().unwrap();
            (name.to_string(), text_of(tree, input.bom, input.crlf))
        })
        .collect();
    if text.len() > MOST_TEXT || manifests.iter().any(|(_, t)| t.len() > MOST_TEXT) {
        return;
    }
    // To see what a crash or a hang ran: SCENARIO_HOSTILE_DUMP=DIR writes the files there.
    if let Some(dir) = std::env::var_os("SCENARIO_HOSTILE_DUMP") {
        let dir = Path::new(&dir);
        let _ = std::fs::write(dir.join("scenario.yaml"), &text);
        for (name, t) in &manifests {
            let _ = std::fs::write(dir.join(name), t);
        }
        let _ = std::fs::write(dir.join("run.txt"), format!("{:?}\n", input.run));
    }
    let echoed = echoes_rust_words(&text) || manifests.iter().any(|(_, t)| echoes_rust_words(t));
    let files = Memory {
        scenario: text,
        manifests,
    };
    let plan = match load(Path::new("fuzz/scenario.yaml"), &files) {
        Ok(plan) => plan,
        Err(e) => {
            let message = e.to_string();
            assert!(
                echoed || !echoes_rust_words(&message),
                "a refusal names a Rust type: {message}"
            );
            return;
        }
    };
    let plan = bounded::bounded(plan);
    match input.run {
        Run::Plan => {}
        Run::Run => {
            let report = canarysim::scenario::run(&plan, None);
            let _ = canarysim::report::text::render(&report);
        }
        Run::Compare => {
            let report = canarysim::scenario::compare::compare(&plan, None);
            let _ = canarysim::report::text::compare(&report);
        }
    }
});

fn pick_text(table: &[&str], i: u8) -> Node {
    let text = table[usize::from(i) % table.len()];
    match serde_yaml::from_str::<serde_yaml::Value>(text) {
        Ok(v) if text.starts_with('{') => node_of(&v),
        _ => Node::Scalar(text.into()),
    }
}
