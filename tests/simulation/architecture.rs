//! The layering DESIGN.md describes, checked on the source. Two crates: the deterministic
//! core (`crates/canarysim-core`, no I/O: its Cargo.toml is checked here, the compiler does
//! the rest) and the edge on top (`src/`). Within each, every file's non-test code is read
//! whole (a test module is skipped only where it stands at column 0, `#[cfg(test)]` then
//! `mod …`, and `tests.rs` files), its `crate::<module>` references collected, and the checks
//! fail on an import circle, on a dependency the layering forbids, or on core code naming the
//! edge. The real HTTP client (`load::http`) and the API server's socket (`apiserver::http`)
//! are nodes of their own, so code reaching them through their parent modules is seen.
//! The last tests patch a copy of the tree with known violations and check they are caught.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The repository: `src/` is the edge, `crates/canarysim-core/src/` the core.
fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn core_src(root: &Path) -> PathBuf {
    root.join("crates/canarysim-core/src")
}

fn edge_src(root: &Path) -> PathBuf {
    root.join("src")
}

/// The core's layer folders: each groups modules that are nodes of their own (re-exported at
/// the crate root, so `crate::mesh` and `crate::dataplane::mesh` are the same node).
const LAYERS: [&str; 3] = ["world", "dataplane", "verdict"];

/// The edge's modules; the core may name none of them.
const EDGE: [&str; 11] = [
    "cli",
    "real_load",
    "live",
    "load::http",
    "apiserver::http",
    "pod_server",
    "progress",
    "serving",
    "style",
    "testing",
    "tui",
];

/// Every `.rs` file under `src`, with its path relative to `src`.
fn rust_files(src: &Path) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                files.push((path.strip_prefix(src).unwrap().to_path_buf(), text));
            }
        }
    }
    files.sort();
    files
}

/// A file's code without its test modules: a `#[cfg(test)]` at column 0 followed by
/// `mod name {` is skipped to its closing `}` at column 0 (`mod name;` to the line's end).
/// An indented `#[cfg(test)]` (a test-only helper inside an `impl`) is kept: what follows it
/// is not a test module.
fn non_test_code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line == "#[cfg(test)]" {
            while lines.peek().is_some_and(|l| l.starts_with("#[")) {
                lines.next();
            }
            if let Some(next) = lines.peek().copied() {
                let module = next.strip_prefix("pub ").unwrap_or(next);
                if module.starts_with("mod ") {
                    lines.next();
                    if next.trim_end().ends_with('{') {
                        for inner in lines.by_ref() {
                            if inner == "}" {
                                break;
                            }
                        }
                    }
                    continue;
                }
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The node a file belongs to: its top-level module, but the two HTTP edges on their own.
fn node_of(rel: &Path) -> Option<String> {
    let parts: Vec<String> = rel
        .components()
        .map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string()
        })
        .collect();
    let mut parts = parts.as_slice();
    if parts.len() > 1 && LAYERS.contains(&parts[0].as_str()) && parts[1] != "mod" {
        parts = &parts[1..];
    }
    let top = parts.first()?.clone();
    if top == "lib" || top == "main" {
        return None;
    }
    match parts {
        [parent, file] if (parent == "load" && (file == "http" || file == "body")) => {
            Some("load::http".into())
        }
        [parent, file] if parent == "apiserver" && file == "http" => Some("apiserver::http".into()),
        _ => Some(top),
    }
}

/// The nodes named in `code`: `crate::x` is `x`, `crate::load::http` is `load::http`.
fn references(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in code.lines() {
        let line = line.split("//").next().unwrap_or("");
        for (i, _) in line.match_indices("crate::") {
            let path: String = line[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_' || *c == ':')
                .collect();
            let mut segments = path.split("::").filter(|s| !s.is_empty()).peekable();
            let Some(mut first) = segments.next() else {
                continue;
            };
            if LAYERS.contains(&first) {
                if let Some(module) = segments.next() {
                    first = module;
                }
            }
            let name = match (first, segments.next()) {
                ("load" | "apiserver", Some("http")) => format!("{first}::http"),
                _ => first.to_string(),
            };
            names.insert(name);
        }
    }
    names
}

/// Node → the nodes its non-test code names.
fn module_graph(src: &Path) -> Graph {
    let mut graph = Graph::new();
    for (rel, text) in rust_files(src) {
        if rel.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let Some(node) = node_of(&rel) else {
            continue;
        };
        let uses = graph.entry(node.clone()).or_default();
        for name in references(&non_test_code(&text)) {
            if name != node {
                uses.insert(name);
            }
        }
    }
    graph
}

/// Whether `to` is reachable from `from`.
fn reaches(graph: &Graph, from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from.to_string()];
    while let Some(m) = stack.pop() {
        for next in graph.get(&m).into_iter().flatten() {
            if next == to {
                return true;
            }
            if seen.insert(next.clone()) {
                stack.push(next.clone());
            }
        }
    }
    false
}

fn circles(graph: &Graph) -> Vec<String> {
    graph
        .iter()
        .flat_map(|(m, uses)| {
            uses.iter()
                .filter(|u| reaches(graph, u, m))
                .map(move |u| format!("{m} → {u} → … → {m}"))
        })
        .collect()
}

/// (module, what it must not use, why)
const CORE_RULES: &[(&str, &str, &str)] = &[
    (
        "report",
        "scenario",
        "reports render the run's data (outcome), not the runner",
    ),
    (
        "outcome",
        "scenario",
        "the run's data stands apart from the runner",
    ),
    ("outcome", "report", "data does not render itself"),
    (
        "scenario",
        "report",
        "the runner hands over data; the text report, JSON and the TUI render it",
    ),
    (
        "endpoints",
        "controller",
        "the data plane reads objects, not the controller",
    ),
    (
        "mesh",
        "controller",
        "the data plane reads objects, not the controller",
    ),
    (
        "kubeproxy",
        "controller",
        "the data plane reads objects, not the controller",
    ),
    (
        "model",
        "controller",
        "the model is the vocabulary everyone shares",
    ),
    ("verify", "scenario", "statistics know nothing of scenarios"),
    (
        "load",
        "sim",
        "a load drives any Cluster; the real load generator has no World",
    ),
    ("load", "scenario", "loads know nothing of scenario files"),
];

const EDGE_RULES: &[(&str, &str, &str)] = &[
    (
        "load::http",
        "real_load",
        "the load generator decides nothing; the verdict is real_load's",
    ),
    ("load::http", "sim", "the real load generator has no World"),
    (
        "real_load",
        "scenario",
        "a real gateway's verdict needs no scenario",
    ),
    (
        "real_load",
        "report",
        "the verdict is data; report renders it",
    ),
];

fn broken_rules(graph: &Graph, rules: &[(&str, &str, &str)]) -> Vec<String> {
    rules
        .iter()
        .filter(|(module, not, _)| graph.get(*module).is_some_and(|uses| uses.contains(*not)))
        .map(|(module, not, why)| format!("{module} uses {not}: {why}"))
        .collect()
}

/// Core modules that name an edge module (the compiler refuses these too; kept so the
/// patched copies below are judged the same way whatever the compiler would say).
fn core_names_edge(graph: &Graph) -> Vec<String> {
    graph
        .iter()
        .flat_map(|(m, uses)| {
            uses.iter()
                .filter(|u| EDGE.contains(&u.as_str()))
                .map(move |u| format!("the core's {m} names the edge's {u}"))
        })
        .collect()
}

/// Everything wrong with the tree at `root`.
fn violations(root: &Path) -> Vec<String> {
    let core = module_graph(&core_src(root));
    let edge = module_graph(&edge_src(root));
    let mut found = Vec::new();
    found.extend(circles(&core));
    found.extend(circles(&edge));
    found.extend(broken_rules(&core, CORE_RULES));
    found.extend(broken_rules(&edge, EDGE_RULES));
    found.extend(core_names_edge(&core));
    found
}

#[test]
fn the_layers_hold_in_both_crates() {
    let root = repository();
    let core = module_graph(&core_src(&root));
    assert!(core.len() > 15, "the core's modules: {core:?}");
    let edge = module_graph(&edge_src(&root));
    for node in EDGE {
        assert!(
            edge.contains_key(node),
            "{node} is a node of the edge: {edge:?}"
        );
    }
    let found = violations(&root);
    assert!(found.is_empty(), "{found:#?}");
}

/// The core's `[dependencies]`: none of the crates that do I/O or draw a terminal. The
/// compiler then refuses any `tokio::` or `ratatui::` in the core; `.ci/run` also checks
/// the whole tree (`cargo tree -p canarysim-core -e normal`).
#[test]
fn the_core_crate_depends_on_no_runtime_terminal_or_cli_crate() {
    let manifest =
        std::fs::read_to_string(repository().join("crates/canarysim-core/Cargo.toml")).unwrap();
    let deps: Vec<&str> = manifest
        .split("[dependencies]")
        .nth(1)
        .expect("a [dependencies] table")
        .split("\n[")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.split('=').next())
        .map(str::trim)
        .filter(|name| !name.is_empty() && !name.starts_with('#'))
        .collect();
    assert!(deps.contains(&"serde_json"), "{deps:?}");
    let refused = [
        "tokio",
        "hyper",
        "hyper-util",
        "http-body-util",
        "bytes",
        "rustls",
        "tokio-rustls",
        "ratatui",
        "crossterm",
        "clap",
        "indicatif",
        "anstream",
        "libtest-mimic",
    ];
    let found: Vec<&&str> = deps.iter().filter(|d| refused.contains(d)).collect();
    assert!(found.is_empty(), "the core depends on {found:?}");
}

/// YAML is read in one place (`model/yaml.rs`), which keeps source positions for errors.
#[test]
fn yaml_is_read_in_one_place() {
    let root = repository();
    let mut found = Vec::new();
    for src in [core_src(&root), edge_src(&root)] {
        for (rel, text) in rust_files(&src) {
            if rel != Path::new("model/yaml.rs") && text.contains("serde_yaml") {
                found.push(rel.display().to_string());
            }
        }
    }
    assert!(
        found.is_empty(),
        "serde_yaml outside model/yaml.rs: {found:?}"
    );
}

/// One file touches the terminal: the TUI's `terminal.rs` (state, update and render never do).
#[test]
fn only_the_tui_terminal_file_names_crossterm() {
    let root = repository();
    let mut found = Vec::new();
    for src in [core_src(&root), edge_src(&root)] {
        for (rel, text) in rust_files(&src) {
            if rel != Path::new("tui/terminal.rs") && text.contains("crossterm::") {
                found.push(rel.display().to_string());
            }
        }
    }
    assert!(
        found.is_empty(),
        "crossterm outside tui/terminal.rs: {found:?}"
    );
}

/// A copy of both crates' sources in a temporary directory, to patch.
fn copy_of_the_tree() -> tempfile::TempDir {
    let copy = tempfile::tempdir().unwrap();
    let root = repository();
    for (from, to) in [
        (core_src(&root), core_src(copy.path())),
        (edge_src(&root), edge_src(copy.path())),
    ] {
        for (rel, text) in rust_files(&from) {
            let path = to.join(&rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
    }
    copy
}

fn append(path: &Path, code: &str) {
    let mut text = std::fs::read_to_string(path).unwrap();
    text.push_str(code);
    std::fs::write(path, text).unwrap();
}

/// The circle the old check missed: the core's load naming the live router (which uses
/// load), written after an indented `#[cfg(test)]` where the old check stopped reading.
#[test]
fn a_circle_through_the_edge_after_an_indented_cfg_test_is_caught() {
    let copy = copy_of_the_tree();
    let simulate = core_src(copy.path()).join("load/simulate.rs");
    let text = std::fs::read_to_string(&simulate).unwrap();
    assert!(
        text.contains("    #[cfg(test)]\n"),
        "the indented test helper moved"
    );
    let patched = text.replacen(
        "    #[cfg(test)]\n",
        "    #[cfg(test)]\n    fn helper() {}\n    fn serve() { let _ = crate::live::serve; }\n",
        1,
    );
    std::fs::write(&simulate, patched).unwrap();
    let found = violations(copy.path());
    assert!(
        found
            .iter()
            .any(|v| v == "the core's load names the edge's live"),
        "{found:#?}"
    );
    // The same circle inside one crate: load → live → load.
    let core = module_graph(&core_src(copy.path()));
    let mut graph = core.clone();
    graph
        .entry("live".into())
        .or_default()
        .insert("load".into());
    assert!(
        circles(&graph)
            .iter()
            .any(|c| c == "load → live → … → load"),
        "{:#?}",
        circles(&graph)
    );
}

/// The call the old check missed: the controller reaching the real HTTP client through its
/// parent module, `crate::load::http::send`.
#[test]
fn the_controller_calling_the_real_http_client_is_caught() {
    let copy = copy_of_the_tree();
    append(
        &core_src(copy.path()).join("world/controller/mod.rs"),
        "\npub fn fetch() { let _ = crate::load::http::send; }\n",
    );
    let found = violations(copy.path());
    assert!(
        found
            .iter()
            .any(|v| v == "the core's controller names the edge's load::http"),
        "{found:#?}"
    );
}

/// A module in a layer folder is the same node by either path: the data plane naming the
/// controller through `crate::world::controller` breaks the rule as `crate::controller` does.
#[test]
fn a_reference_through_a_layer_folder_is_the_modules_own() {
    let copy = copy_of_the_tree();
    append(
        &core_src(copy.path()).join("dataplane/mesh/mod.rs"),
        "
pub fn reconcile() { let _ = crate::world::controller::reconcile; }
",
    );
    let found = violations(copy.path());
    assert!(
        found.iter().any(|v| v.starts_with("mesh uses controller")),
        "{found:#?}"
    );
}

/// One module-file convention: a module with children is `x/mod.rs`, never `x.rs` beside
/// an `x/` folder.
#[test]
fn a_module_with_children_is_a_folder_with_its_mod_rs() {
    fn walk(dir: &Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.with_extension("rs").is_file() {
                    found.push(path.with_extension("rs").display().to_string());
                }
                walk(&path, found);
            }
        }
    }
    let root = repository();
    let mut found = Vec::new();
    walk(&core_src(&root), &mut found);
    walk(&edge_src(&root), &mut found);
    assert!(found.is_empty(), "move to <folder>/mod.rs: {found:#?}");
}

/// A test module at column 0 is skipped; code after it is read again.
#[test]
fn only_test_modules_are_skipped() {
    let code = "use crate::a::X;\n#[cfg(test)]\nmod tests {\n    use crate::b::Y;\n}\nfn f() { crate::c::z(); }\n#[cfg(test)]\nmod more;\n    #[cfg(test)]\n    fn g() { crate::d::w(); }\n";
    let names: Vec<String> = references(&non_test_code(code)).into_iter().collect();
    assert_eq!(names, ["a", "c", "d"]);
}

/// The modules `lib.rs`'s "## Layout" section names (`[`name`]` links, their first path
/// segment).
fn layout_names(lib: &str) -> BTreeSet<String> {
    let section: String = lib
        .lines()
        .skip_while(|l| !l.starts_with("//! ## Layout"))
        .take_while(|l| l.starts_with("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    section
        .split("[`")
        .skip(1)
        .filter_map(|s| s.split('`').next())
        .map(|name| name.split("::").next().unwrap_or(name).to_string())
        .collect()
}

/// The top-level modules `lib.rs` declares (`pub mod x;`, `pub mod x {`) or re-exports
/// (`pub use canarysim_core::{…}`, and the core's `pub use world::{…}` for its layers).
fn declared_modules(lib: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in lib.lines().filter(|l| !l.starts_with("//")) {
        if let Some(rest) = line.strip_prefix("pub mod ") {
            out.insert(rest.trim_end_matches([';', '{', ' ']).to_string());
        }
    }
    for from in std::iter::once("canarysim_core").chain(LAYERS) {
        let Some(at) = lib.find(&format!("pub use {from}::{{")) else {
            continue;
        };
        let list = &lib[at + format!("pub use {from}::{{").len()..];
        let list = &list[..list.find('}').unwrap_or(list.len())];
        out.extend(
            list.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from),
        );
    }
    out
}

/// The modules on disk under `src`: `x.rs` and `x/` (lib.rs and main.rs aside), and those
/// in a layer folder.
fn modules_on_disk(src: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        match name.strip_suffix(".rs") {
            Some("lib" | "main" | "mod") => {}
            Some(stem) => {
                out.insert(stem.to_string());
            }
            None if path.is_dir() => {
                out.insert(name.to_string());
                if LAYERS.contains(&name) {
                    out.extend(modules_on_disk(&path));
                }
            }
            None => {}
        }
    }
    out
}

#[test]
fn each_lib_rs_layout_names_exactly_its_modules_and_they_are_on_disk() {
    let root = repository();
    let core_lib = std::fs::read_to_string(core_src(&root).join("lib.rs")).unwrap();
    let core_declared = declared_modules(&core_lib);
    assert_eq!(
        layout_names(&core_lib),
        core_declared,
        "core lib.rs: layout vs modules"
    );
    assert_eq!(
        modules_on_disk(&core_src(&root)),
        core_declared,
        "core: modules declared vs on disk"
    );
    let edge_lib = std::fs::read_to_string(edge_src(&root).join("lib.rs")).unwrap();
    let edge_declared = declared_modules(&edge_lib);
    assert_eq!(
        layout_names(&edge_lib),
        edge_declared,
        "src/lib.rs: layout vs modules"
    );
    // The edge's own modules are on disk (`load/` and `apiserver/` hold its additions to
    // the core's modules of those names); every core module is reachable at its own path.
    let edge_disk = modules_on_disk(&edge_src(&root));
    assert!(
        edge_disk.is_subset(&edge_declared),
        "src/ holds modules lib.rs does not declare: {:?}",
        edge_disk.difference(&edge_declared).collect::<Vec<_>>()
    );
    assert!(
        core_declared.is_subset(&edge_declared),
        "core modules the edge does not re-export: {:?}",
        core_declared.difference(&edge_declared).collect::<Vec<_>>()
    );
    let neither: Vec<_> = edge_declared
        .iter()
        .filter(|m| !edge_disk.contains(*m) && !core_declared.contains(*m))
        .collect();
    assert!(
        neither.is_empty(),
        "declared, but neither on disk nor in the core: {neither:?}"
    );
}

/// The functions of `text` (non-test code: up to a column-0 `#[cfg(test)]`) longer than
/// `limit` lines with no `// Long: why` line above their docs and attributes.
fn long_functions_without_reason(text: &str, limit: usize) -> Vec<(usize, String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .iter()
        .position(|l| l.starts_with("#[cfg(test)]"))
        .unwrap_or(lines.len());
    let mut out = Vec::new();
    for i in 0..end {
        let line = lines[i];
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let signature = [
            "fn ",
            "pub fn ",
            "pub(crate) fn ",
            "pub(super) fn ",
            "async fn ",
        ]
        .iter()
        .any(|p| trimmed.starts_with(p));
        if !signature {
            continue;
        }
        // A declaration without a body, or a one-line body.
        let Some(open) = (i..end).find(|&k| {
            let l = lines[k].trim_end();
            l.ends_with('{') || l.ends_with(';') || l.ends_with('}')
        }) else {
            continue;
        };
        if !lines[open].trim_end().ends_with('{') {
            continue;
        }
        let close = format!("{indent}}}");
        let Some(last) = (open + 1..end).find(|&k| lines[k] == close) else {
            continue;
        };
        let length = last - i + 1;
        if length <= limit {
            continue;
        }
        let mut k = i;
        while k > 0 && {
            let above = lines[k - 1].trim_start();
            above.starts_with("///") || above.starts_with("#[") || above.starts_with("// ")
        } {
            k -= 1;
            if lines[k].trim_start().starts_with("// Long: ") {
                break;
            }
        }
        if !lines[k].trim_start().starts_with("// Long: ") {
            let name = trimmed
                .split("fn ")
                .nth(1)
                .and_then(|s| s.split(['(', '<']).next())
                .unwrap_or("")
                .to_string();
            out.push((i + 1, name, length));
        }
    }
    out
}

#[test]
fn no_function_runs_past_120_lines_without_a_reason() {
    let root = repository();
    let mut long = Vec::new();
    for dir in [core_src(&root), edge_src(&root)] {
        for (file, text) in rust_files(&dir) {
            if file.file_name().is_some_and(|n| n == "tests.rs") {
                continue;
            }
            for (line, name, length) in long_functions_without_reason(&text, 120) {
                let file = dir.join(&file);
                let file = file.strip_prefix(&root).unwrap().display();
                long.push(format!("{file}:{line} {name} ({length} lines)"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over 120 lines with no `// Long: why` above them (split them, or say why \
         one piece reads better):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_length_check_sees_a_long_function_and_its_reason() {
    let body = "    x();\n".repeat(130);
    let long = format!("/// Docs.\nfn big() {{\n{body}}}\n");
    assert_eq!(
        long_functions_without_reason(&long, 120),
        vec![(2, "big".to_string(), 132)]
    );
    let excused = format!("// Long: one match over the cases.\n{long}");
    assert!(long_functions_without_reason(&excused, 120).is_empty());
    let short = "fn small() {\n    x();\n}\n";
    assert!(long_functions_without_reason(short, 120).is_empty());
}
