//! The layering DESIGN.md describes, checked on the source: which top-level module may use
//! which. It reads `src/`, collects each module's `crate::<module>` references (test code
//! excluded: everything from a file's first `#[cfg(test)]`, and `tests.rs` files), and fails
//! on an import circle or on a dependency the layering forbids.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level module → the top-level modules its non-test code names.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs")
                || path.file_name().is_some_and(|n| n == "tests.rs")
            {
                continue;
            }
            let rel = path.strip_prefix(&src).unwrap();
            let top = rel
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string();
            if top == "lib" || top == "main" {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            let uses = graph.entry(top.clone()).or_default();
            for line in code.lines() {
                let line = line.split("//").next().unwrap_or("");
                for (i, _) in line.match_indices("crate::") {
                    let name: String = line[i + 7..]
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                        .collect();
                    if !name.is_empty() && name != top {
                        uses.insert(name);
                    }
                }
            }
        }
    }
    graph
}

/// Whether `to` is reachable from `from`.
fn reaches(graph: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str) -> bool {
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

#[test]
fn the_module_graph_has_no_circle() {
    let graph = module_graph();
    assert!(graph.len() > 10, "{graph:?}");
    let circles: Vec<String> = graph
        .iter()
        .flat_map(|(m, uses)| {
            uses.iter()
                .filter(|u| reaches(&graph, u, m))
                .map(move |u| format!("{m} → {u} → … → {m}"))
        })
        .collect();
    assert!(circles.is_empty(), "import circles: {circles:#?}");
}

#[test]
fn the_layers_keep_their_direction() {
    let graph = module_graph();
    // (module, what it must not use, why)
    let forbidden = [
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
        (
            "load",
            "gateway",
            "the load generator decides nothing; the verdict is gateway's",
        ),
        (
            "gateway",
            "scenario",
            "a real gateway's verdict needs no scenario",
        ),
        (
            "gateway",
            "report",
            "the verdict is data; report renders it",
        ),
    ];
    let mut broken = Vec::new();
    for (module, not, why) in forbidden {
        let uses = graph.get(module).cloned().unwrap_or_default();
        if uses.contains(not) {
            broken.push(format!("{module} uses {not}: {why}"));
        }
    }
    assert!(broken.is_empty(), "{broken:#?}");
}

/// The deterministic core has no I/O, no wall clock and no terminal: no tokio, hyper,
/// ratatui or crossterm outside the edges.
#[test]
fn the_core_names_no_runtime_or_terminal_crate() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let core = [
        "apiserver",
        "controller",
        "endpoints",
        "mesh",
        "kubeproxy",
        "model",
        "sim",
        "verify",
        "outcome",
        "rollout_info",
        "clock",
        "random",
        "gateway",
        // The simulated load and what it shares with the real one; `load/http.rs` is the
        // edge where the real client lives.
        "load/mod",
        "load/simulate",
        "load/backend",
        "load/classify",
        "load/tally",
    ];
    let mut found = Vec::new();
    for module in core {
        let file = src.join(format!("{module}.rs"));
        let dir = src.join(module);
        let mut files = Vec::new();
        if file.exists() {
            files.push(file);
        }
        let mut dirs = vec![dir];
        while let Some(d) = dirs.pop() {
            if !d.is_dir() {
                continue;
            }
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    files.push(p);
                }
            }
        }
        for f in files {
            // The API server's socket is its edge (DESIGN.md: "beside the store").
            if f.ends_with("apiserver/http.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&f).unwrap();
            for krate in ["tokio::", "hyper::", "ratatui::", "crossterm::"] {
                if text.contains(krate) {
                    found.push(format!("{}: {krate}", f.display()));
                }
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

/// YAML is read in one place (`model/yaml.rs`), which keeps source positions for errors.
#[test]
fn yaml_is_read_in_one_place() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut stack = vec![src.clone()];
    let mut found = Vec::new();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs")
                && !path.ends_with("model/yaml.rs")
                && std::fs::read_to_string(&path)
                    .unwrap()
                    .contains("serde_yaml")
            {
                found.push(path.display().to_string());
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
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs")
                && !path.ends_with("tui/terminal.rs")
                && std::fs::read_to_string(&path)
                    .unwrap()
                    .contains("crossterm::")
            {
                found.push(path.display().to_string());
            }
        }
    }
    assert!(
        found.is_empty(),
        "crossterm outside tui/terminal.rs: {found:?}"
    );
}
