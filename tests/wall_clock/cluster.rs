//! `canarysim watch` and `snapshot` against `serve --api` standing in for a cluster, its
//! live router as the gateway. `watch`: the walkthrough's rollout with every pause indefinite, promoted by the test after
//! each row (so no load races a pause), and the same rollout behind a VirtualService whose
//! first route, not the one Argo manages, takes the traffic at 17 % — a data plane 3 points
//! off the weight the rollout sets, which `--abort-on-fail` aborts. `snapshot`: the same
//! rollout paused at 40 % copied into a scenario that replays it to Healthy.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use canarysim::cluster::follow::{Ending, FollowOptions, Hooks, StepRow, WatchReport, follow};
use canarysim::cluster::{Cluster, ClusterOptions};
use canarysim::model::{Kind, ObjectKey};
use canarysim::verify::Outcome;
use serde_json::json;

use super::api_server::Served;
use super::forbidding_proxy::ForbiddingProxy;
use crate::support;

/// The first route matches every request and holds its own weights: the managed `primary`
/// route is never reached.
const SHADOWED_VS: &str = "apiVersion: networking.istio.io/v1alpha3
kind: VirtualService
metadata:
  name: rollouts-demo-vsvc
spec:
  gateways: [rollouts-demo-gateway]
  hosts: [rollouts-demo.local]
  http:
  - name: fixed
    route:
    - destination: {host: rollouts-demo-stable}
      weight: 83
    - destination: {host: rollouts-demo-canary}
      weight: 17
  - name: primary
    route:
    - destination: {host: rollouts-demo-stable}
      weight: 100
    - destination: {host: rollouts-demo-canary}
      weight: 0
";

/// The seed walkthrough's objects, its update with every pause indefinite, and `vs` (None:
/// the walkthrough's VirtualService); served with the API on a scaled clock (60×), each
/// table reaching the router a second after the VirtualService changes (a push delay of a
/// minute), so that a load sent before the push would see the old weight.
fn serve_paused_walkthrough(dir: &Path, vs: Option<&str>) -> Served {
    serve_walkthrough_with(dir, vs, "pause: {}", "1m", Update::ByScenario)
}

/// The update that [`serve_walkthrough_with`] wrote, applied to the served rollout as
/// `kubectl apply` would (its spec merged), once the rollout is healthy.
fn apply_update(dir: &Path) {
    let served = cluster(dir.join("kubeconfig"));
    let healthy = (0..3000).any(|_| {
        let rollout = served.get(&rollout_key()).unwrap().expect("the rollout");
        let phase = rollout.status()["phase"].as_str();
        phase == Some("Healthy") || {
            std::thread::sleep(Duration::from_millis(100));
            false
        }
    });
    assert!(healthy, "the rollout is healthy within 300 s");
    let update: serde_json::Value =
        serde_yaml::from_str(&std::fs::read_to_string(dir.join("update.yaml")).unwrap()).unwrap();
    merge_patch_rollout(&dir.join("kubeconfig"), json!({"spec": update["spec"]}));
}

/// A merge patch on the served rollout, sent by kube-rs as any client would.
fn merge_patch_rollout(kubeconfig: &Path, patch: serde_json::Value) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(kubeconfig).unwrap(),
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let gvk = kube::api::GroupVersionKind::gvk("argoproj.io", "v1alpha1", "Rollout");
        let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, "rollouts");
        let rollouts: kube::Api<kube::api::DynamicObject> =
            kube::Api::namespaced_with(client, "my-demo", &resource);
        rollouts
            .patch(
                "rollouts-demo",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(patch),
            )
            .await
            .unwrap();
    });
}

/// Who starts the update (update.yaml): the scenario, once the rollout is healthy, or the
/// test ([`apply_update`]), once the watch is waiting for it.
enum Update {
    ByScenario,
    ByTest,
}

/// [`serve_paused_walkthrough`] with the first pause (at 20 %) written as `first_pause`,
/// and the push delay given.
fn serve_walkthrough_with(
    dir: &Path,
    vs: Option<&str>,
    first_pause: &str,
    push_delay: &str,
    update_by: Update,
) -> Served {
    let manifests = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/manifests");
    let seed = |f: &str| manifests.join(f).display().to_string();
    let update = std::fs::read_to_string(manifests.join("seed-004-rollout-update.yaml"))
        .unwrap()
        .replace("pause: {duration: 1m}", "pause: {}")
        .replacen("pause: {}", first_pause, 1);
    std::fs::write(dir.join("update.yaml"), update).unwrap();
    let vs_file = match vs {
        Some(text) => {
            std::fs::write(dir.join("vs.yaml"), text).unwrap();
            dir.join("vs.yaml").display().to_string()
        }
        None => seed("seed-004-virtualsvc.yaml"),
    };
    let update_steps = match update_by {
        Update::ByScenario => "  - apply: update.yaml\n  - wait: {until: paused, timeout: 5m}\n",
        Update::ByTest => "",
    };
    let scenario = format!(
        "name: watch-paused
seed: 1
namespace: my-demo
manifests:
  - file: {}
  - file: {}
  - file: {}
  - file: {vs_file}
cluster: {{pod_ready_after: 5s, push_delay: {push_delay}}}
steps:
  - wait: {{until: healthy, rollout: rollouts-demo, timeout: 2m}}
{update_steps}",
        seed("seed-004-rollout.yaml"),
        seed("seed-004-services.yaml"),
        seed("seed-004-gateway.yaml"),
    );
    let path = dir.join("scenario.yaml");
    std::fs::write(&path, scenario).unwrap();
    let plan = canarysim::scenario::load(&path, &canarysim::scenario::Disk).unwrap();
    Served::start_plan(plan, false, 60.0, dir.join("kubeconfig"))
}

/// `watch`'s options for the router (`within` points), with `load`'s flags read as the command line reads them.
fn options(router: &str, host: &str, within: f64, abort_on_fail: bool) -> FollowOptions {
    use clap::Parser;
    let cli = canarysim::cli::Cli::parse_from([
        "canarysim",
        "load",
        router,
        "-n",
        "1",
        "-c",
        "8",
        "--host",
        host,
    ]);
    let canarysim::cli::Command::Load(command) = cli.command else {
        unreachable!()
    };
    let args = command.load.expect("a load's flags");
    FollowOptions {
        rollout: "rollouts-demo".into(),
        load: canarysim::cli::plan_load(&args).unwrap().load,
        url: router.into(),
        requests: 60_000,
        within,
        confidence: 0.99,
        settle: Duration::from_secs(30),
        canary_version: None,
        abort_on_fail,
        // A guard against a hang, far beyond the few seconds each step takes.
        timeout: Some(Duration::from_secs(600)),
        quiet: true,
    }
}

fn cluster(kubeconfig: PathBuf) -> Cluster {
    Cluster::connect(&ClusterOptions {
        kubeconfig: Some(kubeconfig),
        ..ClusterOptions::default()
    })
    .expect("a client for the served API")
}

/// `watch` on a thread; its rows arrive on the receiver as they are measured.
fn start_watch(
    kubeconfig: PathBuf,
    options: FollowOptions,
) -> (
    mpsc::Receiver<StepRow>,
    std::thread::JoinHandle<WatchReport>,
) {
    start_watch_in(kubeconfig, options, "my-demo")
}

/// [`start_watch`] for a rollout in the kubeconfig's `namespace`.
fn start_watch_in(
    kubeconfig: PathBuf,
    options: FollowOptions,
    namespace: &'static str,
) -> (
    mpsc::Receiver<StepRow>,
    std::thread::JoinHandle<WatchReport>,
) {
    let (rows, _says, watcher) = start_watch_saying(kubeconfig, options, namespace);
    (rows, watcher)
}

/// [`start_watch_in`], with what the watch says (its lines on stderr) on a second receiver.
fn start_watch_saying(
    kubeconfig: PathBuf,
    options: FollowOptions,
    namespace: &'static str,
) -> (
    mpsc::Receiver<StepRow>,
    mpsc::Receiver<String>,
    std::thread::JoinHandle<WatchReport>,
) {
    let (send, rows) = mpsc::channel();
    let (send_said, says) = mpsc::channel();
    let watcher = std::thread::spawn(move || {
        let cluster = cluster(kubeconfig);
        assert_eq!(cluster.namespace(), namespace, "the kubeconfig's namespace");
        let mut row = |r: &StepRow| {
            let _ = send.send(r.clone());
        };
        let say = |line: &str| {
            let _ = send_said.send(line.to_string());
        };
        let hooks = Hooks {
            row: &mut row,
            say: &say,
        };
        follow(&cluster, &options, hooks).expect("watch follows the rollout")
    });
    (rows, says, watcher)
}

fn next_row(rows: &mpsc::Receiver<StepRow>) -> StepRow {
    rows.recv_timeout(Duration::from_secs(300))
        .expect("watch reports the step")
}

/// `watch --format json` prints the report as serialised here.
fn assert_matches_schema(report: &WatchReport) {
    let schema_file = Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/watch.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_file).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let value = serde_json::to_value(report).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let mut broken = value.clone();
    broken["rows"][0].as_object_mut().unwrap().remove("verdict");
    assert!(
        !validator.is_valid(&broken),
        "the schema requires each field"
    );
}

/// The completion's row (every request to the new version, passed), then the watch's
/// report, which must say it completed.
fn completed(
    rows: &mpsc::Receiver<StepRow>,
    watcher: std::thread::JoinHandle<WatchReport>,
) -> WatchReport {
    let end = next_row(rows);
    assert_eq!((end.step, end.expected), (None, Some(100.0)), "{end:?}");
    assert_eq!(end.verdict, Some(Outcome::Pass), "{end:?}");
    let report = watcher.join().unwrap();
    assert_eq!(report.ending, Ending::Completed);
    report
}

fn rollout_key() -> ObjectKey {
    ObjectKey::new(Kind::Rollout, "my-demo", "rollouts-demo")
}

#[test]
fn watch_verifies_each_step_promoted_by_hand_and_the_completion() {
    let dir = support::temp_dir();
    let served = serve_paused_walkthrough(dir.path(), None);
    let kubeconfig = dir.path().join("kubeconfig");
    let (rows, watcher) = start_watch(
        kubeconfig.clone(),
        options(&served.router(), "rollouts-demo.local", 2.0, false),
    );
    let promoter = cluster(kubeconfig);
    for (step, weight) in [(1, 20.0), (3, 40.0), (5, 60.0), (7, 80.0)] {
        let row = next_row(&rows);
        assert_eq!(
            (row.step, row.set_weight, row.router_weight),
            (Some(step), weight, Some(weight)),
            "{row:?}"
        );
        assert_eq!(row.route, "rollouts-demo-vsvc http/primary");
        assert_eq!(row.version, "yellow");
        assert_eq!(row.verdict, Some(Outcome::Pass), "{row:?}");
        let observed = row.observed.unwrap();
        assert!((observed - weight).abs() < 2.0, "{row:?}");
        // `kubectl argo rollouts promote`: the pause condition cleared on the status.
        promoter
            .patch_status(&rollout_key(), json!({"status": {"pauseConditions": null}}))
            .unwrap();
    }
    let report = completed(&rows, watcher);
    assert_eq!(report.rows.len(), 5);
    assert_eq!(report.exit_code(), 0);
    assert_matches_schema(&report);
    served.stop();
}

#[test]
fn watch_fails_a_data_plane_three_points_off_and_aborts_the_rollout() {
    let dir = support::temp_dir();
    let served = serve_paused_walkthrough(dir.path(), Some(SHADOWED_VS));
    let kubeconfig = dir.path().join("kubeconfig");
    let (rows, watcher) = start_watch(
        kubeconfig.clone(),
        options(&served.router(), "rollouts-demo.local", 1.0, true),
    );
    let row = next_row(&rows);
    assert_eq!(
        (row.step, row.router_weight),
        (Some(1), Some(20.0)),
        "{row:?}"
    );
    assert_eq!(row.verdict, Some(Outcome::Fail), "{row:?}");
    let observed = row.observed.unwrap();
    assert!((observed - 17.0).abs() < 1.5, "{row:?}");
    let report = watcher.join().unwrap();
    assert_eq!(report.ending, Ending::AbortedByCanarysim);
    assert_eq!(report.exit_code(), 1);
    assert_matches_schema(&report);
    let rollout = cluster(kubeconfig).get(&rollout_key()).unwrap().unwrap();
    assert_eq!(rollout.status()["abort"], true, "{:?}", rollout.status());
    served.stop();
}

#[test]
fn watch_says_what_it_cannot_read_and_exits_2() {
    use canarysim::cli::{Cli, execute};
    use clap::Parser;
    let watch = |extra: &[&str]| {
        let mut args = vec![
            "canarysim",
            "watch",
            "--url",
            "http://127.0.0.1:9/",
            "--quiet",
        ];
        args.extend_from_slice(extra);
        execute(Cli::parse_from(args))
    };
    let (code, _, err) = watch(&["rollouts-demo", "--kubeconfig", "/nonexistent/kubeconfig"]);
    assert_eq!(code, 2);
    assert!(
        err.starts_with("canarysim watch: cannot read kubeconfig /nonexistent/kubeconfig: "),
        "{err}"
    );
    let dir = support::temp_dir();
    let served = serve_paused_walkthrough(dir.path(), None);
    let kubeconfig = dir.path().join("kubeconfig").display().to_string();
    let (code, _, err) = watch(&["no-such-rollout", "--kubeconfig", &kubeconfig]);
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "canarysim watch: rollout no-such-rollout not found in namespace my-demo\n"
    );
    let (code, _, err) = watch(&[
        "rollouts-demo",
        "--kubeconfig",
        &kubeconfig,
        "--settle",
        "soon",
    ]);
    assert_eq!(
        (code, err.as_str()),
        (2, "--settle \"soon\": expected a duration, e.g. 30s\n")
    );
    served.stop();
}

/// `canarysim snapshot --kubeconfig K OUT_DIR`: exit code, stdout, stderr.
fn snapshot_into(kubeconfig: &Path, out_dir: &Path) -> (u8, String, String) {
    use canarysim::cli::{Cli, execute};
    use clap::Parser;
    execute(Cli::parse_from([
        "canarysim",
        "snapshot",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        out_dir.to_str().unwrap(),
    ]))
}

/// The snapshot's scenario run, its JSON report (the run must pass).
fn run_replay(out_dir: &Path) -> serde_json::Value {
    use canarysim::cli::{Cli, execute};
    use clap::Parser;
    let (code, report, err) = execute(Cli::parse_from([
        "canarysim",
        "run",
        out_dir.join("scenario.yaml").to_str().unwrap(),
        "--format",
        "json",
    ]));
    assert_eq!(code, 0, "{err}{report}");
    serde_json::from_str(&report).unwrap()
}

#[test]
fn snapshot_of_the_rollout_paused_at_40_replays_from_there_to_healthy() {
    let dir = support::temp_dir();
    let served = serve_paused_walkthrough(dir.path(), None);
    let kubeconfig = dir.path().join("kubeconfig");
    let cluster = cluster(kubeconfig.clone());
    let standing = |cluster: &Cluster| {
        let rollout = cluster.get(&rollout_key()).unwrap();
        rollout.map(|r| canarysim::rollout_info::Standing::of(&r))
    };
    // Paused at 20 %, promoted once: paused at 40 %.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let mut promoted = false;
    loop {
        let s = standing(&cluster).expect("the rollout");
        match (s.phase.as_str(), s.step) {
            ("Paused", Some(1)) if !promoted => {
                cluster
                    .patch_status(&rollout_key(), json!({"status": {"pauseConditions": null}}))
                    .unwrap();
                promoted = true;
            }
            ("Paused", Some(3)) => break,
            _ => {}
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never paused at 40 %: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out_dir = dir.path().join("snapshot");
    let (code, out, err) = snapshot_into(&kubeconfig, &out_dir);
    served.stop();
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("1 Rollout, 2 Service, 1 VirtualService"),
        "{out}"
    );
    assert!(err.contains("(canary) 2/2 ready"), "{err}");
    let read = |f: &str| std::fs::read_to_string(out_dir.join(f)).unwrap();
    // The manifests hold the Rollout before its update; the update is applied by the scenario.
    assert!(read("manifests.yaml").contains("image: argoproj/rollouts-demo:blue"));
    assert!(!read("manifests.yaml").contains("resourceVersion"));
    assert!(!read("manifests.yaml").contains("rollouts-pod-template-hash"));
    assert!(read("rollout-update.yaml").contains("image: argoproj/rollouts-demo:yellow"));
    let scenario = read("scenario.yaml");
    assert!(
        scenario.contains("- expect:\n    rollout: rollouts-demo\n    step: 3\n    set_weight: 40"),
        "{scenario}"
    );
    // The replay stands where the cluster stood, then runs to Healthy.
    let report = run_replay(&out_dir);
    assert_eq!(report["passed"], true);
    let splits: Vec<bool> = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["action"] == "expect_split")
        .map(|s| s["passed"] == true)
        .collect();
    assert_eq!(splits, [true, true, true], "40, 60 and 80 % judged");
}

#[test]
fn snapshot_leaves_out_what_the_role_may_not_read_and_says_so() {
    // The walkthrough's VirtualService also names a Gateway in istio-system, which a role
    // limited to my-demo may not read; nor, here, may it read the Pods.
    let dir = support::temp_dir();
    let vs = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/manifests/seed-004-virtualsvc.yaml"),
    )
    .unwrap()
    .replace(
        "  - rollouts-demo-gateway\n",
        "  - rollouts-demo-gateway\n  - istio-system/public-gateway\n",
    );
    let gateway = "---
apiVersion: networking.istio.io/v1alpha3
kind: Gateway
metadata: {name: public-gateway, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: [\"*.public.example\"]
";
    let served = serve_paused_walkthrough(dir.path(), Some(&format!("{vs}{gateway}")));
    let kubeconfig = dir.path().join("kubeconfig");
    // Snapshots of one state: the rollout paused at 20 %.
    let cluster = cluster(kubeconfig.clone());
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !cluster.get(&rollout_key()).unwrap().is_some_and(|r| {
        let s = canarysim::rollout_info::Standing::of(&r);
        s.phase == "Paused" && s.step == Some(1)
    }) {
        assert!(std::time::Instant::now() < deadline, "never paused at 20 %");
        std::thread::sleep(Duration::from_millis(50));
    }
    let namespaced = ForbiddingProxy::start(
        &kubeconfig,
        &["/namespaces/istio-system/", "/pods/"],
        dir.path().join("namespaced-kubeconfig"),
    );
    let (code, _, err) = snapshot_into(&namespaced.kubeconfig, &dir.path().join("namespaced"));
    assert_eq!(code, 0, "{err}");
    let note =
        "not allowed to read gateways.networking.istio.io istio-system/public-gateway, pods (403)";
    assert!(err.contains(note), "{err}");
    assert!(
        !err.contains("(stable) "),
        "no readiness without the Pods: {err}"
    );
    let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).unwrap();
    assert!(read("namespaced/scenario.yaml").contains(note));
    assert!(!read("namespaced/manifests.yaml").contains("name: public-gateway\n"));
    // Allowed to read them, the Gateway is copied and the pods counted.
    let (code, _, err) = snapshot_into(&kubeconfig, &dir.path().join("allowed"));
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("not allowed"), "{err}");
    assert!(err.contains("(stable) "), "{err}");
    assert!(read("allowed/manifests.yaml").contains("name: public-gateway\n"));
    // Without the Rollouts there is nothing to replay: the 403 is an error that says so.
    let no_rollouts = ForbiddingProxy::start(
        &kubeconfig,
        &["/rollouts/"],
        dir.path().join("no-rollouts-kubeconfig"),
    );
    let (code, out, err) = snapshot_into(&no_rollouts.kubeconfig, &dir.path().join("none"));
    served.stop();
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("rollouts: ") && err.contains("403"), "{err}");
}

/// The Job's command line in docs/gate/analysis-template.yaml with the template's args in
/// place (the defaults it declares, and `version` and `weight` as the Rollout passes them).
fn analysis_gate_command(version: &str, weight: &str) -> Vec<String> {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/gate/analysis-template.yaml");
    let template: serde_json::Value =
        serde_yaml::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let mut args = std::collections::BTreeMap::new();
    for arg in template["spec"]["args"].as_array().unwrap() {
        let value = arg["value"].as_str().unwrap_or_default().to_string();
        args.insert(
            format!("{{{{args.{}}}}}", arg["name"].as_str().unwrap()),
            value,
        );
    }
    args.insert("{{args.version}}".into(), version.into());
    args.insert("{{args.weight}}".into(), weight.into());
    let container = &template["spec"]["metrics"][0]["provider"]["job"]["spec"]["template"]["spec"]
        ["containers"][0];
    container["command"]
        .as_array()
        .unwrap()
        .iter()
        .chain(container["args"].as_array().unwrap())
        .map(|word| {
            let mut word = word.as_str().unwrap().to_string();
            for (name, value) in &args {
                word = word.replace(name, value);
            }
            word
        })
        .collect()
}

/// `--connect-to` from the URL's host and port to the live router, as a port-forward would.
fn connect_to(url_host_port: &str, router: &str) -> String {
    format!("{url_host_port}:{}", router.trim_start_matches("http://"))
}

#[test]
fn the_analysis_template_gate_lints_and_its_job_passes_the_right_weight_and_fails_a_wrong_one() {
    use canarysim::cli::{Cli, execute};
    use clap::Parser;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let file = |f: &str| root.join(f).display().to_string();
    let (code, out, err) = execute(Cli::parse_from([
        "canarysim".to_string(),
        "lint".into(),
        file("docs/gate/analysis-template.yaml"),
        file("docs/gate/rollout.yaml"),
        file("scenarios/manifests/seed-004-services.yaml"),
        file("scenarios/manifests/seed-004-gateway.yaml"),
        file("scenarios/manifests/seed-004-virtualsvc.yaml"),
    ]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("0 errors"), "{out}");

    let dir = support::temp_dir();
    // The template's initialDelay waits for the push; here the push is quick.
    let served = serve_walkthrough_with(dir.path(), None, "pause: {}", "100ms", Update::ByScenario);
    let cluster = cluster(dir.path().join("kubeconfig"));
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while cluster
        .get(&rollout_key())
        .unwrap()
        .map(|r| canarysim::rollout_info::Standing::of(&r))
        .is_none_or(|s| (s.phase.as_str(), s.step) != ("Paused", Some(1)))
    {
        assert!(std::time::Instant::now() < deadline, "never paused at 20 %");
        std::thread::sleep(Duration::from_millis(50));
    }
    let forward = connect_to(
        "istio-ingressgateway.istio-system.svc.cluster.local:80",
        &served.router(),
    );
    let run = |weight: &str| {
        let mut words = analysis_gate_command("yellow", weight);
        assert_eq!(words[0], "canarysim");
        words.extend(["--connect-to".to_string(), forward.clone()]);
        execute(Cli::parse_from(words))
    };
    let (code, out, _) = run("20");
    assert_eq!(code, 0, "the job succeeds at the weight set: {out}");
    let (code, out, _) = run("30");
    assert_eq!(code, 1, "the job fails at a weight not set: {out}");
    served.stop();
}

/// An NGINX rollout paused at 20 %, snapshotted: its Ingresses and IngressClass are
/// copied, Argo's canary Ingresses are not (the replay's Argo writes them again), and the
/// replay judges the split through ingress-nginx at 20 % and 50 %.
#[test]
fn snapshot_of_an_nginx_rollout_copies_its_ingresses_but_not_argos_canary() {
    let dir = support::temp_dir();
    let kubeconfig = dir.path().join("kubeconfig");
    let served = serve_nginx_rollout(dir.path(), |t| t);
    let out_dir = dir.path().join("snapshot");
    let (code, out, err) = snapshot_into(&kubeconfig, &out_dir);
    served.stop();
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("2 Ingress, 1 IngressClass"), "{out}");
    let written = std::fs::read_to_string(out_dir.join("manifests.yaml")).unwrap();
    assert!(written.contains("name: checkout-public"), "{written}");
    assert!(
        !written.contains("checkout-checkout-public-canary"),
        "{written}"
    );
    assert!(!written.contains("canary-weight"), "{written}");
    let report = run_replay(&out_dir);
    let loads: Vec<&str> = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["load"]["path"].as_str())
        .collect();
    assert_eq!(
        loads, ["gateway ingress-nginx/ingress-nginx-controller"; 2],
        "20 and 50 % judged through ingress-nginx"
    );
}

/// `watch` on an NGINX rollout: each step's weight read from Argo's canary Ingress (the
/// first stable Ingress's), judged at the served ingress-nginx, then the completion.
#[test]
fn watch_reads_the_nginx_canary_ingress_at_each_step() {
    let dir = support::temp_dir();
    let served = serve_nginx_rollout(dir.path(), |t| t);
    let kubeconfig = dir.path().join("kubeconfig");
    let options = FollowOptions {
        rollout: "checkout".into(),
        ..options(&served.router(), "checkout.internal", 2.0, false)
    };
    let (rows, watcher) = start_watch_in(kubeconfig.clone(), options, "shop");
    let promoter = cluster(kubeconfig);
    let key = ObjectKey::new(Kind::Rollout, "shop", "checkout");
    for (step, weight) in [(1, 20.0), (3, 50.0)] {
        let row = next_row(&rows);
        assert_eq!(
            row.route, "Ingress checkout-checkout-public-canary",
            "{row:?}"
        );
        assert_eq!(
            (row.step, row.set_weight, row.router_weight),
            (Some(step), weight, Some(weight)),
            "{row:?}"
        );
        assert_eq!(row.verdict, Some(Outcome::Pass), "{row:?}");
        promoter
            .patch_status(&key, json!({"status": {"pauseConditions": null}}))
            .unwrap();
    }
    let report = completed(&rows, watcher);
    assert_matches_schema(&report);
    served.stop();
}

/// With `maxTrafficWeight: 1000`, Argo writes `canary-weight: "20"` of a total of 1000 at
/// `setWeight: 20`: the step's weight is taken at once (no settling), SET and ROUTER are
/// both the 2 % it means and ingress-nginx draws, which the row explains; at 50 the data plane is
/// waited for from 2 % to 5 % (the previous weight in the same units), then the
/// completion.
#[test]
fn watch_judges_an_nginx_weight_of_max_traffic_weight_as_ingress_nginx_draws_it() {
    let dir = support::temp_dir();
    let (served, rows, watcher) = watch_nginx_rollout_of_max_traffic_weight(dir.path(), 1000, 1.0);
    let kubeconfig = dir.path().join("kubeconfig");
    let promoter = cluster(kubeconfig);
    let key = ObjectKey::new(Kind::Rollout, "shop", "checkout");
    for (step, weight, share) in [(1, 20, 2.0), (3, 50, 5.0)] {
        let row = next_row(&rows);
        assert_eq!(
            (row.step, row.set_weight, row.router_weight),
            (Some(step), share, Some(share)),
            "{row:?}"
        );
        assert_eq!(row.verdict, Some(Outcome::Pass), "{row:?}");
        let detail = format!(
            "canary-weight {weight} of canary-weight-total 1000: ingress-nginx draws {weight} of 1000"
        );
        assert!(row.note.starts_with(&detail), "{row:?}");
        promoter
            .patch_status(&key, json!({"status": {"pauseConditions": null}}))
            .unwrap();
    }
    completed(&rows, watcher);
    served.stop();
}

/// With `maxTrafficWeight: 50`, `setWeight: 20` is 40 % and the canary Ingress says so
/// (`canary-weight: "20"` of 50), but ingress-nginx uses a total only above 100 and draws
/// 20 of 100: `watch` fails the step, and its note says why.
#[test]
fn watch_fails_an_nginx_weight_total_ingress_nginx_does_not_use() {
    let dir = support::temp_dir();
    let (served, rows, watcher) = watch_nginx_rollout_of_max_traffic_weight(dir.path(), 50, 2.0);
    let kubeconfig = dir.path().join("kubeconfig");
    let row = next_row(&rows);
    assert_eq!(
        (row.step, row.set_weight, row.router_weight),
        (Some(1), 40.0, Some(40.0)),
        "{row:?}"
    );
    assert_eq!(row.verdict, Some(Outcome::Fail), "{row:?}");
    assert!(
        row.observed.is_some_and(|o| (o - 20.0).abs() < 2.0),
        "{row:?}"
    );
    assert!(
        row.note.contains("ingress-nginx draws 20 of 100 (20.0 %)"),
        "{row:?}"
    );
    let key = ObjectKey::new(Kind::Rollout, "shop", "checkout");
    cluster(kubeconfig)
        .patch_status(&key, json!({"status": {"abort": true}}))
        .unwrap();
    assert_eq!(watcher.join().unwrap().ending, Ending::Aborted);
    served.stop();
}

/// [`serve_nginx_rollout`] with `maxTrafficWeight: total`, and `watch` following it at
/// `checkout.internal`, judging within `within` points.
fn watch_nginx_rollout_of_max_traffic_weight(
    dir: &Path,
    total: u32,
    within: f64,
) -> (
    Served,
    mpsc::Receiver<StepRow>,
    std::thread::JoinHandle<WatchReport>,
) {
    let served = serve_nginx_rollout(dir, |t| {
        t.replace(
            "      trafficRouting:\n",
            &format!("      trafficRouting:\n        maxTrafficWeight: {total}\n"),
        )
    });
    let options = FollowOptions {
        rollout: "checkout".into(),
        ..options(&served.router(), "checkout.internal", within, false)
    };
    let (rows, watcher) = start_watch_in(dir.join("kubeconfig"), options, "shop");
    (served, rows, watcher)
}

/// The held-out NGINX rollout (`tests/fixtures/nginx`) served, with `edit` applied to its
/// manifests, updated to `shop/checkout:v2` and paused at its first step.
fn serve_nginx_rollout(dir: &Path, edit: impl Fn(String) -> String) -> Served {
    let manifests =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nginx/manifests.yaml");
    let text = edit(std::fs::read_to_string(manifests).unwrap());
    std::fs::write(dir.join("manifests.yaml"), text).unwrap();
    let scenario = "name: nginx-paused
seed: 1
namespace: shop
manifests:
  - file: manifests.yaml
cluster: {pod_ready_after: 5s}
steps:
  - wait: {until: healthy, timeout: 2m}
  - set_image: {rollout: checkout, container: checkout, image: \"shop/checkout:v2\"}
  - wait: {until: paused, timeout: 2m}
";
    std::fs::write(dir.join("scenario.yaml"), scenario).unwrap();
    let plan =
        canarysim::scenario::load(&dir.join("scenario.yaml"), &canarysim::scenario::Disk).unwrap();
    let served = Served::start_plan(plan, false, 60.0, dir.join("kubeconfig"));
    let cluster = cluster(dir.join("kubeconfig"));
    let key = ObjectKey::new(Kind::Rollout, "shop", "checkout");
    let paused = (0..1200).any(|_| {
        let rollout = cluster.get(&key).unwrap();
        let standing = rollout.map(|r| canarysim::rollout_info::Standing::of(&r));
        standing.is_some_and(|s| s.phase == "Paused" && s.step == Some(1)) || {
            std::thread::sleep(Duration::from_millis(100));
            false
        }
    });
    assert!(paused, "the rollout pauses at its first step within 120 s");
    served
}

/// Flagger's world at maxWeight: Deployments `podinfo-primary` and `podinfo` (here two
/// Rollouts without steps, whose pods are named as theirs are) behind a VirtualService
/// that sends half to each, as Flagger's Istio router writes it.
const FLAGGER_AT_MAX_WEIGHT: &str = r#"name: flagger-at-max-weight
seed: 1
namespace: test
manifests:
  - inline: |
      apiVersion: argoproj.io/v1alpha1
      kind: Rollout
      metadata: {name: podinfo-primary}
      spec:
        replicas: 2
        selector: {matchLabels: {app: podinfo-primary}}
        template:
          metadata: {labels: {app: podinfo-primary}}
          spec: {containers: [{name: podinfod, image: "ghcr.io/stefanprodan/podinfo:6.0.0"}]}
        strategy: {canary: {}}
      ---
      apiVersion: argoproj.io/v1alpha1
      kind: Rollout
      metadata: {name: podinfo}
      spec:
        replicas: 2
        selector: {matchLabels: {app: podinfo}}
        template:
          metadata: {labels: {app: podinfo}}
          spec: {containers: [{name: podinfod, image: "ghcr.io/stefanprodan/podinfo:6.0.1"}]}
        strategy: {canary: {}}
      ---
      apiVersion: v1
      kind: Service
      metadata: {name: podinfo-primary}
      spec: {selector: {app: podinfo-primary}, ports: [{port: 9898}]}
      ---
      apiVersion: v1
      kind: Service
      metadata: {name: podinfo-canary}
      spec: {selector: {app: podinfo}, ports: [{port: 9898}]}
      ---
      apiVersion: networking.istio.io/v1beta1
      kind: Gateway
      metadata: {name: public-gateway}
      spec:
        selector: {istio: ingressgateway}
        servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]
      ---
      apiVersion: networking.istio.io/v1beta1
      kind: VirtualService
      metadata: {name: podinfo}
      spec:
        hosts: [podinfo.test]
        gateways: [public-gateway, mesh]
        http:
        - route:
          - {destination: {host: podinfo-primary}, weight: 50}
          - {destination: {host: podinfo-canary}, weight: 50}
steps:
  - wait: {until: healthy, rollout: podinfo, timeout: 2m}
"#;

/// A shell command's words (single quotes group; nothing else is special in these).
fn shell_words(command: &str) -> Vec<String> {
    let (mut words, mut word, mut quoted) = (Vec::new(), String::new(), false);
    for c in command.chars() {
        match c {
            '\'' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    words.extend((!word.is_empty()).then_some(word));
    words
}

#[test]
fn the_flagger_webhook_command_judges_the_split_at_max_weight_by_pod_name() {
    use canarysim::cli::{Cli, execute};
    use clap::Parser;
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/gate/flagger-canary.yaml");
    let canary: serde_json::Value =
        serde_yaml::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let hook = &canary["spec"]["analysis"]["webhooks"][0];
    assert_eq!(hook["type"], "confirm-promotion");
    assert_eq!(hook["metadata"]["type"], "bash");
    let mut words = shell_words(hook["metadata"]["cmd"].as_str().unwrap());
    assert_eq!(words[0], "canarysim");

    let dir = support::temp_dir();
    std::fs::write(dir.path().join("flagger.yaml"), FLAGGER_AT_MAX_WEIGHT).unwrap();
    let plan =
        canarysim::scenario::load(&dir.path().join("flagger.yaml"), &canarysim::scenario::Disk)
            .unwrap();
    let served = Served::start_plan(plan, false, 60.0, dir.path().join("kubeconfig"));
    let cluster = cluster(dir.path().join("kubeconfig"));
    let key = ObjectKey::new(Kind::Rollout, "test", "podinfo");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while cluster
        .get(&key)
        .unwrap()
        .is_none_or(|r| r.status()["phase"] != "Healthy")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "podinfo never Healthy"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    words.extend([
        "--connect-to".to_string(),
        connect_to("podinfo.test:9898", &served.router()),
        "--format".into(),
        "json".into(),
    ]);
    let (code, out, err) = execute(Cli::parse_from(&words));
    served.stop();
    assert_eq!(code, 0, "{out}{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let mut versions: Vec<&str> = report["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_str().unwrap())
        .collect();
    versions.sort();
    assert_eq!(
        versions,
        ["podinfo", "podinfo-primary"],
        "read from the pod names"
    );
}

#[test]
fn watch_reads_the_gateway_api_plugins_httproute_and_stops_when_someone_aborts() {
    let dir = support::temp_dir();
    let manifests = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/manifests");
    let rollout = std::fs::read_to_string(manifests.join("gateway-api-rollout.yaml"))
        .unwrap()
        .replace("pause: { duration: 10 }", "pause: {}");
    std::fs::write(dir.path().join("rollout.yaml"), rollout).unwrap();
    let scenario = format!(
        "name: watch-gateway-api
seed: 1
namespace: default
manifests:
  - file: {}
  - file: rollout.yaml
steps:
  - wait: {{until: healthy, timeout: 1m}}
  - set_image: {{rollout: rollouts-demo, container: rollouts-demo, image: argoproj/rollouts-demo:yellow}}
  - wait: {{until: paused, timeout: 1m}}
",
        manifests.join("gateway-api-routes.yaml").display()
    );
    std::fs::write(dir.path().join("scenario.yaml"), scenario).unwrap();
    let plan = canarysim::scenario::load(
        &dir.path().join("scenario.yaml"),
        &canarysim::scenario::Disk,
    )
    .unwrap();
    let served = Served::start_plan(plan, false, 60.0, dir.path().join("kubeconfig"));
    let kubeconfig = dir.path().join("kubeconfig");
    let options = options(&served.router(), "demo.example.com", 2.0, false);
    let (rows, watcher) = start_watch_in(kubeconfig.clone(), options, "default");
    let row = next_row(&rows);
    assert_eq!(
        row.route, "HTTPRoute argo-rollouts-http-route rules/0",
        "{row:?}"
    );
    assert_eq!((row.set_weight, row.router_weight), (30.0, Some(30.0)));
    assert_eq!(row.verdict, Some(Outcome::Pass), "{row:?}");
    // `kubectl argo rollouts abort`, by someone else: the watch ends, judged as it stood.
    let key = ObjectKey::new(Kind::Rollout, "default", "rollouts-demo");
    cluster(kubeconfig)
        .patch_status(&key, json!({"status": {"abort": true}}))
        .unwrap();
    let end = next_row(&rows);
    assert!(end.note.starts_with("aborted: "), "{end:?}");
    let report = watcher.join().unwrap();
    assert_eq!(report.ending, Ending::Aborted);
    assert_eq!(
        report.exit_code(),
        3,
        "a rollout that did not complete is not a pass"
    );
    served.stop();
}

#[test]
fn a_pause_too_short_to_measure_gets_a_row_not_judged_and_the_watch_goes_on() {
    let dir = support::temp_dir();
    // The pause at 20 % lasts a second of the scenario's clock: 17 ms of the wall's. The
    // update starts once the watch waits for one, so that every step happens under its eyes
    // however late its thread runs.
    let served = serve_walkthrough_with(
        dir.path(),
        None,
        "pause: {duration: 1s}",
        "1m",
        Update::ByTest,
    );
    let kubeconfig = dir.path().join("kubeconfig");
    let options = options(&served.router(), "rollouts-demo.local", 2.0, false);
    let (rows, says, watcher) = start_watch_saying(kubeconfig.clone(), options, "my-demo");
    let waiting = says
        .iter()
        .find(|line| line.contains("waiting for an update to start"));
    assert!(waiting.is_some(), "the watch waits for an update");
    apply_update(dir.path());
    let first = next_row(&rows);
    assert_eq!((first.step, first.set_weight), (Some(1), 20.0), "{first:?}");
    // Seen and left before its load ended, or never seen: either way not judged.
    assert_eq!(first.verdict, Some(Outcome::Inconclusive), "{first:?}");
    assert!(first.note.starts_with("not "), "{first:?}");
    let second = next_row(&rows);
    assert_eq!(
        (second.step, second.router_weight),
        (Some(3), Some(40.0)),
        "{second:?}"
    );
    assert_eq!(second.verdict, Some(Outcome::Pass), "{second:?}");
    cluster(kubeconfig)
        .patch_status(&rollout_key(), json!({"status": {"abort": true}}))
        .unwrap();
    let report = watcher.join().unwrap();
    assert_eq!(report.ending, Ending::Aborted);
    assert_eq!(report.exit_code(), 3);
    served.stop();
}

#[test]
fn an_update_undone_midway_ends_the_watch_as_rolled_back_not_completed() {
    let dir = support::temp_dir();
    let served = serve_paused_walkthrough(dir.path(), None);
    let kubeconfig = dir.path().join("kubeconfig");
    let options = options(&served.router(), "rollouts-demo.local", 2.0, false);
    let (rows, watcher) = start_watch(kubeconfig.clone(), options);
    let first = next_row(&rows);
    assert_eq!(first.verdict, Some(Outcome::Pass), "{first:?}");
    // `kubectl argo rollouts undo`: the template of revision 1 (blue) back on the Rollout.
    let manifests = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/manifests");
    let stable: serde_json::Value = serde_yaml::from_str(
        &std::fs::read_to_string(manifests.join("seed-004-rollout.yaml")).unwrap(),
    )
    .unwrap();
    merge_patch_rollout(
        &kubeconfig,
        json!({"spec": {"template": stable["spec"]["template"]}}),
    );
    let end = next_row(&rows);
    assert!(end.note.starts_with("rolled back: "), "{end:?}");
    let report = watcher.join().unwrap();
    assert_eq!(report.ending, Ending::RolledBack);
    assert_eq!(report.exit_code(), 3);
    assert_matches_schema(&report);
    served.stop();
}
