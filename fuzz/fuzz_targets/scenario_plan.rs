//! The scenario parser and planner: any bytes as a scenario file (manifest files it names
//! are the bundled ones, read from memory), never a panic; what plans is run, cut to a
//! fuzzing budget (`common/bounded.rs`), never a hang (the seeds hold the hostile inputs of
//! issue 34 that once hung, panicked or overflowed the stack).
#![no_main]

#[path = "../common/bounded.rs"]
mod bounded;

use canarysim::scenario::{Files, load};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

/// The scenario under test in memory; every other path is one of the bundled manifests.
struct Memory<'a>(&'a str);

impl Files for Memory<'_> {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        if path == Path::new("fuzz/scenario.yaml") {
            return Ok(self.0.to_string());
        }
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let bundled = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../scenarios/manifests")
            .join(name);
        std::fs::read_to_string(bundled)
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(plan) = load(Path::new("fuzz/scenario.yaml"), &Memory(text)) {
            let report = canarysim::scenario::run(&bounded::bounded(plan), None);
            let _ = canarysim::report::text::render(&report);
        }
    }
});
