//! JSON merge patches and JSON patches on the API server's objects: the seed Rollout and
//! VirtualService patched with any JSON.
#![no_main]

use canarysim::apiserver::{ApiServer, Patch};
use canarysim::model::Kind;
use libfuzzer_sys::fuzz_target;

const ROLLOUT: &str = include_str!("../../scenarios/manifests/seed-004-rollout.yaml");
const VS: &str = include_str!("../../scenarios/manifests/seed-004-virtualsvc.yaml");

fuzz_target!(|data: &[u8]| {
    let Ok(patch) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let mut api = ApiServer::new();
    for text in [ROLLOUT, VS] {
        for m in
            canarysim::model::yaml::load_str("seed.yaml", text, "my-demo").expect("seed parses")
        {
            api.create(m.object).expect("seed creates");
        }
    }
    for (kind, name) in [
        (Kind::Rollout, "rollouts-demo"),
        (Kind::VirtualService, "rollouts-demo-vsvc"),
    ] {
        let _ = api.patch(kind, "my-demo", name, &Patch::Merge(patch.clone()));
        let _ = api.patch(kind, "my-demo", name, &Patch::Json(patch.clone()));
    }
});
