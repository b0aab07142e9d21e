//! kube-rs, the Rust ecosystem's Kubernetes client (what `canarysim watch` follows a rollout
//! with, issue 30), against the API server on its socket as against Kubernetes: typed and
//! dynamic objects created and read back, and a `watcher` that lists, watches from the
//! list's resourceVersion, and lists again after the server ends its watch with 410 Gone
//! (here: a watch buffer of one byte, so every event overflows it, as a watcher too slow for
//! kube-apiserver's buffer is closed).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher;
use serde_json::json;

use super::api_server::{SetOnDrop, answer_until};
use canarysim::apiserver::ApiServer;
use canarysim::apiserver::http::{Endpoint, PeerLimits, kubeconfig};

async fn client_for(address: std::net::SocketAddr) -> kube::Client {
    let text = kubeconfig(address, "demo");
    let kubeconfig = Kubeconfig::from_yaml(&text).expect("our kubeconfig parses");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("a client configuration");
    kube::Client::try_from(config).expect("a client")
}

fn service(name: &str) -> Service {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80}]}
    }))
    .unwrap()
}

/// The names the watcher's next list delivers (`Init`, `InitApply`…, `InitDone`), and the
/// errors it yielded before that list began.
async fn next_list<S>(events: &mut S) -> (Vec<String>, Vec<String>)
where
    S: futures::Stream<Item = watcher::Result<watcher::Event<Service>>> + Unpin,
{
    let (mut names, mut errors, mut listing) = (Vec::new(), Vec::new(), false);
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Init) => listing = true,
            Ok(watcher::Event::InitApply(s)) if listing => {
                names.push(s.metadata.name.unwrap_or_default())
            }
            Ok(watcher::Event::InitDone) if listing => return (names, errors),
            Ok(_) => {}
            Err(e) => errors.push(e.to_string()),
        }
    }
    panic!("the watch stream ended");
}

#[test]
fn kube_rs_creates_reads_and_watches_and_lists_again_after_410() {
    let limits = PeerLimits {
        watch_buffer_bytes: 1,
        ..PeerLimits::default()
    };
    let mut endpoint = Endpoint::start_with(limits).unwrap();
    let address = endpoint.address();
    let mut api = ApiServer::new();
    let done = Arc::new(AtomicBool::new(false));
    let client = {
        let done = done.clone();
        std::thread::spawn(move || {
            let _done = SetOnDrop(done);
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                tokio::time::timeout(Duration::from_secs(60), exercise(address))
                    .await
                    .expect("kube-rs finished within a minute")
            })
        })
    };
    answer_until(&mut endpoint, &mut api, &done);
    client.join().expect("the client's checks hold");
}

async fn exercise(address: std::net::SocketAddr) {
    let client = client_for(address).await;
    let services: Api<Service> = Api::namespaced(client.clone(), "demo");
    services
        .create(&PostParams::default(), &service("first"))
        .await
        .expect("a typed create");
    let read = services.get("first").await.expect("a typed get");
    assert_eq!(read.spec.unwrap().ports.unwrap()[0].port, 80);

    // A Rollout, as `watch` reads one: a dynamic object of a custom resource.
    let gvk = GroupVersionKind::gvk("argoproj.io", "v1alpha1", "Rollout");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "rollouts");
    let rollouts: Api<DynamicObject> = Api::namespaced_with(client.clone(), "demo", &resource);
    let rollout: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
        "metadata": {"name": "demo"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "demo"}},
                 "template": {"metadata": {"labels": {"app": "demo"}},
                              "spec": {"containers": [{"name": "c", "image": "app:1"}]}},
                 "strategy": {"canary": {"steps": [{"setWeight": 20}]}}}
    }))
    .unwrap();
    rollouts
        .create(&PostParams::default(), &rollout)
        .await
        .expect("a dynamic create");
    let read = rollouts.get("demo").await.expect("a dynamic get");
    assert_eq!(
        read.data["spec"]["strategy"]["canary"]["steps"][0]["setWeight"],
        20
    );

    let mut events = watcher(services.clone(), watcher::Config::default()).boxed();
    let (listed, _) = next_list(&mut events).await;
    assert_eq!(listed, ["first"]);
    services
        .create(&PostParams::default(), &service("second"))
        .await
        .expect("a second create");
    // The event overflows the one-byte buffer: the server ends the watch with 410, and the
    // watcher lists again, which brings the new Service.
    let (listed, errors) = next_list(&mut events).await;
    assert_eq!(listed, ["first", "second"]);
    assert!(
        errors
            .iter()
            .any(|e| e.contains("410") || e.contains("Expired")),
        "{errors:?}"
    );
}
