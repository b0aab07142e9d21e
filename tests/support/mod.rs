//! Helpers shared by the suites: real programs, and files that clean up after themselves.

#![allow(dead_code)] // each suite uses some of these

pub mod envoy;
pub mod kube;

use std::path::{Path, PathBuf};

/// The files in `dir` (not its subdirectories) whose name ends in `.ext`, sorted.
pub fn files_with_extension(dir: impl AsRef<Path>, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("a directory")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    files.sort();
    files
}

/// A file in a fresh temporary directory; both are removed when it is dropped.
pub struct TempFile {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl std::ops::Deref for TempFile {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for TempFile {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

/// Writes `text` to a file called `name` in a fresh temporary directory.
pub fn write_temp(name: &str, text: &str) -> TempFile {
    let dir = tempfile::Builder::new()
        .prefix("canarysim-test-")
        .tempdir()
        .expect("a temporary directory");
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("a temporary file");
    TempFile { _dir: dir, path }
}

/// A port free right now on 127.0.0.1, for a program that takes its port on its command
/// line or in its configuration (a gateway, `load coordinate`).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A fresh temporary directory, removed when dropped.
pub fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("canarysim-test-")
        .tempdir()
        .expect("a temporary directory")
}

/// What a writer received, readable while it is still written to (`serve`'s output).
#[derive(Clone, Default)]
pub struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Shared {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// A `canarysim load` JSON report's classes that are not zero, checking that every request
/// ended in exactly one (sent = the sum of the classes).
pub fn accounted(report: &serde_json::Value) -> std::collections::BTreeMap<String, u64> {
    let classes: std::collections::BTreeMap<String, u64> = report["classes"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .filter(|(_, n)| *n > 0)
        .collect();
    println!(
        "sent {} in {:.2} s: {classes:?}",
        report["sent"], report["elapsed_seconds"]
    );
    assert_eq!(
        report["sent"].as_u64().unwrap(),
        classes.values().sum::<u64>(),
        "sent = the sum of the classes: {report}"
    );
    classes
}

/// A committed file generated from the code (a JSON schema) is `generated`, byte for byte;
/// with `CANARYSIM_WRITE_SCHEMA` set it is written anew first. `rewrite` is the command
/// that does it, for the failure message.
pub fn assert_committed_as_generated(path: &Path, generated: &str, rewrite: &str) {
    if std::env::var_os("CANARYSIM_WRITE_SCHEMA").is_some() {
        std::fs::write(path, generated).unwrap();
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} differs from the types it is generated from; `CANARYSIM_WRITE_SCHEMA=1 {rewrite}` writes it anew",
        path.display()
    );
}

/// A child process killed (if still running) and reaped when dropped, so that a failed test
/// leaves no process behind.
pub struct KillOnDrop(pub std::process::Child);

impl KillOnDrop {
    /// Kills and reaps the process now (again on drop: harmless).
    pub fn stop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The result files `worker-0.json` … of `n` load workers in `dir`.
pub fn worker_files(dir: &Path, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| dir.join(format!("worker-{i}.json")).display().to_string())
        .collect()
}
