//! The command examples of README.md and docs/*.md run as tests (trycmd): every ```console block's
//! `$ canarysim …` lines are run from the repository's root and their output must match what the
//! block shows (`...` stands for lines left out, `[..]` for part of a line). Examples that need a
//! terminal, a real gateway or a cluster are ```sh or ```text blocks, shown but not run.
//!
//! `TRYCMD=overwrite cargo test --test command_line -- doc_examples::` rewrites the blocks from the
//! tool's output.

use crate::support;

#[test]
fn readme_and_docs_examples() {
    trycmd::TestCases::new()
        .register_bin("canarysim", trycmd::cargo::cargo_bin!("canarysim"))
        .case("README.md")
        .case("docs/*.md");
}

/// The relative links `[text](path)` and `[text](path#anchor)` of a markdown file.
fn relative_links(text: &str) -> Vec<String> {
    let mut links = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = &rest[..end];
        if !target.starts_with("http") && !target.starts_with('#') && !target.contains(' ') {
            links.push(target.split('#').next().unwrap_or("").to_string());
        }
    }
    links
}

#[test]
fn every_doc_is_linked_from_readme_and_every_relative_link_resolves() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let readme_links = relative_links(&readme);
    let docs = support::files_with_extension(root.join("docs"), "md");
    assert!(docs.len() >= 8, "{docs:?}");
    for doc in &docs {
        let name = format!("docs/{}", doc.file_name().unwrap().to_string_lossy());
        assert!(readme_links.contains(&name), "README does not link {name}");
    }
    let mut files = vec![root.join("README.md")];
    files.extend(docs);
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for link in relative_links(&text) {
            let target = file.parent().unwrap().join(&link);
            assert!(
                target.exists(),
                "{}: link to {link}, which does not exist",
                file.display()
            );
        }
    }
    let lines = readme.lines().count();
    assert!(
        lines <= 200,
        "README has {lines} lines; the front door is at most 200"
    );
}
