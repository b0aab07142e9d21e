//! Duration parsing (Argo's and Go's forms).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(d) = canarysim::model::duration::parse(text) {
            let _ = canarysim::model::duration::format(d);
        }
    }
});
