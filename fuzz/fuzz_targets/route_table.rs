//! The controllers and the route-table translation: any manifests applied to a simulated
//! cluster, reconciled, and translated to the proxies' route table.
#![no_main]

use canarysim::sim::{ClusterConfig, World};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(manifests) = canarysim::model::yaml::load_str("fuzz.yaml", text, "default") else {
        return;
    };
    let review = canarysim::model::support::review_all(manifests.iter());
    if !review.rejections.is_empty() {
        return;
    }
    let mut world = World::new(ClusterConfig::default(), 1);
    if world.apply(&manifests).is_ok() {
        let _ = world.advance(std::time::Duration::from_secs(60));
    }
    let _ = canarysim::mesh::translate(&world.api);
});
