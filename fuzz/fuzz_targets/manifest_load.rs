//! The manifest loader and the field review: any bytes as multi-document YAML.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(manifests) = canarysim::model::yaml::load_str("fuzz.yaml", text, "default") {
            let _ = canarysim::model::support::review_all(manifests.iter());
        }
    }
});
