//! The API server's REST layer (what `canarysim serve --api` answers kubectl with): any
//! request line, content type, accept header and body, parsed and answered against the
//! seed's objects; watches started from any resourceVersion.
#![no_main]

use canarysim::apiserver::ApiServer;
use canarysim::apiserver::rest::{self, Call, Request};
use libfuzzer_sys::fuzz_target;

const ROLLOUT: &str = include_str!("../../scenarios/manifests/seed-004-rollout.yaml");
const VS: &str = include_str!("../../scenarios/manifests/seed-004-virtualsvc.yaml");
const SERVICES: &str = include_str!("../../scenarios/manifests/seed-004-services.yaml");

/// The seed's objects, loaded once (each run works on a copy).
static SEEDED: std::sync::LazyLock<ApiServer> = std::sync::LazyLock::new(|| {
    let mut api = ApiServer::new();
    for text in [ROLLOUT, VS, SERVICES] {
        for m in
            canarysim::model::yaml::load_str("seed.yaml", text, "my-demo").expect("seed parses")
        {
            api.create(m.object).expect("seed creates");
        }
    }
    api
});

fuzz_target!(|data: &[u8]| {
    // "METHOD PATH?QUERY\nCONTENT-TYPE\nACCEPT\nBODY"
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(4, '\n');
    let line = parts.next().unwrap_or("");
    let content_type = parts.next().unwrap_or("");
    let accept = parts.next().unwrap_or("");
    let body = parts.next().unwrap_or("").as_bytes();
    let (method, target) = line.split_once(' ').unwrap_or((line, ""));
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut api = SEEDED.clone();
    let request = Request {
        method,
        path,
        query,
        content_type,
        accept,
        body,
    };
    match rest::parse(&request) {
        Call::Watch(watch) => {
            if watch.start(&api).is_ok() {
                for event in api.events_since(0) {
                    let _ = watch.render(event, &api);
                }
            }
        }
        call => {
            let reply = rest::execute(&mut api, call);
            assert!((200..600).contains(&reply.code), "code {}", reply.code);
            // A second request sees a consistent store.
            let again = rest::parse(&Request {
                method: "GET",
                query: "",
                body: b"",
                ..request
            });
            let _ = rest::execute(&mut api, again);
        }
    }
});
