//! Which YAML files are scenarios: `canarysim run DIR`, `canarysim lint` and the testing
//! API's suites sort a folder's files by the same rule.

use std::path::{Path, PathBuf};

use crate::model::yaml;

/// What a YAML file holds, judged from its documents' top-level keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// One mapping with `name` and `steps` and no `kind`.
    Scenario,
    /// Kubernetes objects: a document has `kind` or `apiVersion` (and it is not a scenario).
    Manifest,
    /// Neither, or not readable as YAML: loading it as a scenario says what is wrong, so it
    /// is never skipped in silence.
    Other,
}

/// Reads `path` and tells what it holds.
pub fn kind_of(path: &Path) -> FileKind {
    let Ok(text) = yaml::read_text(path) else {
        return FileKind::Other;
    };
    kind_of_text(&path.display().to_string(), &text)
}

/// What `text` (read from `file`) holds: as [`kind_of`].
pub fn kind_of_text(file: &str, text: &str) -> FileKind {
    let Ok(docs) = yaml::parse_documents(file, text) else {
        return FileKind::Other;
    };
    let scenario = docs.first().is_some_and(|(v, _)| {
        v.get("name").is_some() && v.get("steps").is_some() && v.get("kind").is_none()
    });
    if scenario {
        FileKind::Scenario
    } else if docs
        .iter()
        .any(|(v, _)| v.get("kind").is_some() || v.get("apiVersion").is_some())
    {
        FileKind::Manifest
    } else {
        FileKind::Other
    }
}

/// A folder's YAML files (`*.yaml`, `*.yml`), sorted; with `recursive`, those of its
/// subfolders too.
pub(crate) fn yaml_files(dir: &Path, recursive: bool) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d)? {
            let path = entry?.path();
            if path.is_dir() {
                if recursive {
                    pending.push(path);
                }
            } else if matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml")
            ) {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// What `canarysim lint DIR` makes of a file it finds in the folder's tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// A scenario, manifests, or a file that does not read as YAML (checked as a file named
    /// would be, so that its error is reported at its place).
    ToCheck,
    /// Neither: passed over, and said why (a chart's `values.yaml` and `Chart.yaml`, a
    /// workflow, a template that is not YAML until rendered).
    PassedOver(String),
}

/// Every `*.yaml`, `*.yml` and `*.json` file under `dir`, at any depth (as `kubectl apply -R
/// -f DIR` reads them, folders whose name starts with a dot apart), sorted, with what each
/// holds. A file is a manifest when a document has `kind`.
pub fn lint_files_in(dir: &Path) -> std::io::Result<Vec<(PathBuf, Found)>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d)? {
            let path = entry?.path();
            let hidden = path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'));
            if path.is_dir() {
                if !hidden {
                    pending.push(path);
                }
            } else if matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            ) {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files
        .into_iter()
        .map(|path| {
            let found = found_in(&path);
            (path, found)
        })
        .collect())
}

/// Whether `text` holds a Go template action (helm's `{{ .Values.x }}`, `{{- include … }}`,
/// `{{ if … }}`), not Argo's own `{{args.name}}` placeholders, which manifests carry.
fn is_go_template(text: &str) -> bool {
    const ACTIONS: [&str; 12] = [
        ".",
        "$",
        "if ",
        "else",
        "end",
        "range ",
        "with ",
        "include ",
        "template ",
        "define ",
        "toYaml ",
        "tpl ",
    ];
    text.match_indices("{{").any(|(at, _)| {
        let action = text[at + 2..].trim_start_matches('-').trim_start();
        ACTIONS.iter().any(|a| action.starts_with(a))
    })
}

fn found_in(path: &Path) -> Found {
    let Ok(text) = yaml::read_text(path) else {
        return Found::ToCheck;
    };
    if is_go_template(&text) {
        return Found::PassedOver(
            "a template, not manifests until rendered (`helm template … | canarysim lint -`)"
                .into(),
        );
    }
    let Ok(docs) = yaml::parse_documents(&path.display().to_string(), &text) else {
        return Found::ToCheck;
    };
    let scenario = kind_of_text(&path.display().to_string(), &text) == FileKind::Scenario;
    if scenario || docs.iter().any(|(v, _)| v.get("kind").is_some()) {
        Found::ToCheck
    } else {
        Found::PassedOver("no document has a `kind`: not Kubernetes objects".into())
    }
}

/// The files of `dir` to run as scenarios (every YAML file but manifests, so that a broken
/// scenario reports why), and the manifests passed over.
pub fn scenarios_in(dir: &Path, recursive: bool) -> std::io::Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    Ok(yaml_files(dir, recursive)?
        .into_iter()
        .partition(|p| kind_of(p) != FileKind::Manifest))
}

/// Why a folder gave nothing to run: `canarysim run` exits 2 with it, a suite fails with it.
pub fn nothing_to_run(dir: &Path, manifests: usize) -> String {
    let skipped = match manifests {
        0 => String::new(),
        1 => "; its one YAML file is a Kubernetes manifest".to_string(),
        n => format!("; its {n} YAML files are Kubernetes manifests"),
    };
    format!(
        "{}: no scenario files (a scenario is a .yaml or .yml file with `name` and `steps`, docs/scenarios.md){skipped}",
        dir.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn files_are_told_apart_by_their_keys() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path();
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let scenario = write(dir, "a.yaml", "name: a\nsteps: []\n");
        let manifest = write(dir, "b.yml", "apiVersion: v1\nkind: Service\n");
        let broken = write(dir, "c.yaml", "name: [\n");
        let values = write(dir, "d.yaml", "replicas: 3\n");
        write(dir, "notes.txt", "name: x\nsteps: []\n");
        let nested = write(&dir.join("sub"), "e.yaml", "name: e\nsteps: []\n");
        assert_eq!(kind_of(&scenario), FileKind::Scenario);
        assert_eq!(kind_of(&manifest), FileKind::Manifest);
        assert_eq!(kind_of(&broken), FileKind::Other);
        assert_eq!(kind_of(&values), FileKind::Other);
        let (run, skipped) = scenarios_in(dir, false).unwrap();
        assert_eq!(run, vec![scenario.clone(), broken.clone(), values.clone()]);
        assert_eq!(skipped, vec![manifest]);
        let (run, _) = scenarios_in(dir, true).unwrap();
        assert_eq!(run, vec![scenario, broken, values, nested]);
    }

    #[test]
    fn an_empty_folder_says_what_a_scenario_is() {
        let m = nothing_to_run(Path::new("ci"), 2);
        assert!(m.starts_with("ci: no scenario files"), "{m}");
        assert!(
            m.contains("`name` and `steps`") && m.contains("2 YAML files are Kubernetes manifests"),
            "{m}"
        );
    }

    #[test]
    fn helms_actions_are_templates_and_argos_placeholders_are_not() {
        for template in [
            "name: {{ .Release.Name }}",
            "{{- include \"demo.labels\" . | nindent 4 }}",
            "{{ if .Values.canary }}x{{ end }}",
            "replicas: {{$.Values.replicas}}",
        ] {
            assert!(is_go_template(template), "{template}");
        }
        for manifest in [
            "query: sum(rate(x{service=\"{{args.service-name}}\"}[5m]))",
            "query: '{{ args.svc }}'",
            "text: no braces at all",
        ] {
            assert!(!is_go_template(manifest), "{manifest}");
        }
    }
}
