//! Stamps the commit into `canarysim --version`, so a report can say which build made it.
//! Outside a git checkout (a crates.io package) the commit is `unknown`.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Watch `path` only if it exists: cargo reruns a build script whose watched file is
/// missing on every build.
fn watch(path: Option<String>) {
    if let Some(path) = path.filter(|p| std::path::Path::new(p).exists()) {
        println!("cargo:rerun-if-changed={path}");
    }
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=CANARYSIM_COMMIT={commit}");
    // Run again when HEAD moves (a commit, a checkout), not on every source change.
    watch(git(&["rev-parse", "--git-path", "HEAD"]));
    if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch(git(&["rev-parse", "--git-path", &reference]));
    }
    watch(git(&["rev-parse", "--git-path", "packed-refs"]));
    println!("cargo:rerun-if-changed=build.rs");
}
