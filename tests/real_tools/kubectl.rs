//! The real `kubectl` against `canarysim serve --api --hold` (the seed walkthrough): discovery,
//! `get` with its tables, `apply`, the plugin's promote patch on the status subresource,
//! `get -w`, concurrent `replace`s, `kubectl scale` through the scale subresource (a Rollout's
//! and a stored Deployment's), a Deployment's `/status`, and the errors kubectl prints.
//!
//! Not part of the hermetic `cargo test`: ignored unless asked for, and needs `kubectl` on
//! the PATH (`.ci/run` checks, and installs Debian's kubernetes-client when missing). Run with
//! `cargo test --release --test real_tools -- --ignored kubectl::`. Each test starts its own server
//! process (127.0.0.1, port 0, a kubeconfig in a temporary directory) and stops it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support;

/// A `canarysim serve --api --hold` process and a kubectl set up to reach it.
struct Cluster {
    server: Child,
    dir: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Cluster {
        Cluster::serving(None)
    }

    /// The world of `scenario` (default: the seed walkthrough), held.
    fn serving(scenario: Option<&Path>) -> Cluster {
        let dir = support::temp_dir();
        let kubeconfig = dir.path().join("kubeconfig");
        let mut server = Command::new(env!("CARGO_BIN_EXE_canarysim"))
            .args(["serve", "--api", "--hold", "--kubeconfig"])
            .arg(&kubeconfig)
            .args(scenario)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("canarysim starts");
        // Wait for the kubeconfig line; the rest of stdout is drained by a thread.
        let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let line = lines
                .next()
                .expect("canarysim printed its addresses")
                .unwrap();
            if line.starts_with("kubeconfig ") {
                break;
            }
            assert!(Instant::now() < deadline, "no kubeconfig line");
        }
        std::thread::spawn(move || lines.for_each(drop));
        Cluster { server, dir }
    }

    fn kubectl(&self) -> Command {
        let mut c = Command::new("kubectl");
        c.env("KUBECONFIG", self.dir.path().join("kubeconfig"))
            .env("HOME", self.dir.path())
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .arg("--request-timeout=20s");
        c
    }

    /// Runs kubectl; the output whatever the exit code.
    fn run(&self, args: &[&str]) -> Output {
        self.kubectl()
            .args(args)
            .output()
            .expect("kubectl runs (is it on the PATH?)")
    }

    /// Runs kubectl, which must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // SIGTERM: canarysim stops cleanly and closes every port.
        let _ = Command::new("kill")
            .arg(self.server.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.server.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

const WEIGHTS: &str = "jsonpath={.spec.http[0].route[*].weight}";

#[test]
#[ignore = "needs kubectl; run by .ci/run"]
fn discovery_and_get_show_the_seed_walkthrough() {
    let cluster = Cluster::start();
    let resources = cluster.ok(&["api-resources"]);
    for (name, short) in [
        ("rollouts", "ro"),
        ("virtualservices", "vs"),
        ("destinationrules", "dr"),
        ("services", "svc"),
    ] {
        assert!(
            resources
                .lines()
                .any(|l| l.starts_with(name) && l.split_whitespace().nth(1) == Some(short)),
            "{name} ({short}) in:\n{resources}"
        );
    }
    let all = cluster.ok(&["get", "rollouts,vs,dr,svc,rs,pods", "-n", "my-demo"]);
    for expected in [
        "rollout.argoproj.io/rollouts-demo",
        "virtualservice.networking.istio.io/rollouts-demo-vsvc",
        "service/rollouts-demo-canary",
        "replicaset.apps/rollouts-demo-76c569d8b",
        "DESIRED   CURRENT   UP-TO-DATE   AVAILABLE",
    ] {
        assert!(all.contains(expected), "{expected} in:\n{all}");
    }
    let pods = all
        .lines()
        .filter(|l| l.starts_with("pod/rollouts-demo-76c569d8b-") && l.contains("Running"))
        .count();
    assert_eq!(pods, 4, "{all}");
    let yaml = cluster.ok(&["get", "vs", "rollouts-demo-vsvc", "-o", "yaml"]);
    let vs: serde_json::Value = serde_yaml::from_str(&yaml).unwrap();
    assert_eq!(vs["spec"]["gateways"][0], "rollouts-demo-gateway");
    assert_eq!(vs["spec"]["hosts"][0], "rollouts-demo.local");
    assert_eq!(vs["spec"]["http"][0]["name"], "primary");
    assert_eq!(vs["spec"]["http"][0]["route"][0]["weight"], 100);
    assert_eq!(vs["spec"]["http"][0]["route"][1]["weight"], 0);
}

#[test]
#[ignore = "needs kubectl; run by .ci/run"]
fn the_controllers_events_are_listed_and_described_as_argo_writes_them() {
    let cluster = Cluster::start();
    let events = cluster.ok(&["get", "events", "-n", "my-demo"]);
    let header = events.lines().next().unwrap_or_default();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        "{events}"
    );
    let completed = events
        .lines()
        .find(|l| l.contains("RolloutCompleted"))
        .unwrap_or_else(|| panic!("RolloutCompleted in:\n{events}"));
    assert_eq!(
        completed
            .split_whitespace()
            .skip(1)
            .collect::<Vec<_>>()
            .join(" "),
        "Normal RolloutCompleted rollout/rollouts-demo Rollout completed: Initial deploy",
        "{events}"
    );
    // kubectl describe finds them by the involved object's kind, name, namespace and uid.
    let described = cluster.ok(&["describe", "rollout", "rollouts-demo", "-n", "my-demo"]);
    let section = described
        .split("Events:")
        .nth(1)
        .unwrap_or_else(|| panic!("an Events section in:\n{described}"));
    assert!(
        section.contains("rollouts-controller  Rollout completed: Initial deploy")
            && section.contains("NewReplicaSetCreated"),
        "{described}"
    );
    let other = cluster.ok(&[
        "describe",
        "service",
        "rollouts-demo-stable",
        "-n",
        "my-demo",
    ]);
    assert!(
        !other.contains("Rollout completed"),
        "a Service's events are its own: {other}"
    );
    // The ReplicaSet controller's: `describe rs` lists the pods it created.
    let rs = cluster.ok(&[
        "get",
        "rs",
        "-n",
        "my-demo",
        "-o",
        "jsonpath={.items[0].metadata.name}",
    ]);
    let described = cluster.ok(&["describe", "rs", &rs, "-n", "my-demo"]);
    assert!(
        described.contains("SuccessfulCreate")
            && described.contains("replicaset-controller  Created pod: "),
        "{described}"
    );
}

/// The scenario `init` writes for a chart's output is served whole: kubectl sees the
/// chart's ConfigMap beside the Rollout.
#[test]
#[ignore = "needs kubectl; run by .ci/run"]
fn the_scenario_init_writes_serves_the_charts_objects() {
    let dir = support::temp_dir();
    let scenario = dir.path().join("check.yaml");
    let init = Command::new(env!("CARGO_BIN_EXE_canarysim"))
        .args(["init"])
        .arg(repo_file("tests/fixtures/helm/rendered.yaml"))
        .arg("-o")
        .arg(&scenario)
        .output()
        .unwrap();
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let cluster = Cluster::serving(Some(&scenario));
    let got = cluster.ok(&["get", "configmaps,rollouts", "-n", "default"]);
    for expected in [
        "configmap/rollouts-demo-config",
        "rollout.argoproj.io/rollouts-demo",
    ] {
        assert!(got.contains(expected), "{expected} in:\n{got}");
    }
}

#[test]
#[ignore = "needs kubectl; run by .ci/run"]
fn a_charts_other_kinds_are_applied_stored_and_listed() {
    let cluster = Cluster::start();
    let rendered = repo_file("tests/fixtures/helm/rendered.yaml");
    cluster.ok(&["apply", "-n", "my-demo", "-f", rendered.to_str().unwrap()]);
    let got = cluster.ok(&[
        "get",
        "configmaps,secrets,serviceaccounts,deployments,hpa,ingresses,netpol,events,leases",
        "-n",
        "my-demo",
    ]);
    for expected in [
        "configmap/rollouts-demo-config",
        "secret/rollouts-demo-db",
        "serviceaccount/rollouts-demo",
        "deployment.apps/redis",
        "horizontalpodautoscaler.autoscaling/rollouts-demo",
        "ingress.networking.k8s.io/rollouts-demo",
        "networkpolicy.networking.k8s.io/rollouts-demo",
    ] {
        assert!(got.contains(expected), "{expected} in:\n{got}");
    }
    let value = cluster.ok(&[
        "get",
        "cm",
        "rollouts-demo-config",
        "-n",
        "my-demo",
        "-o",
        "jsonpath={.data.LOG_LEVEL}",
    ]);
    assert_eq!(value, "info");
    // kubectl's typed commands send protobuf, which canarysim does not read: it says so.
    let out = cluster.run(&[
        "create",
        "configmap",
        "x",
        "--from-literal=a=b",
        "-n",
        "my-demo",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("kubectl apply -f"),
        "{err}"
    );
}

#[test]
#[ignore = "needs kubectl; run by .ci/run"]
fn apply_starts_the_rollout_the_promote_patch_advances_it_and_get_w_prints_each_weight() {
    let cluster = Cluster::start();
    // A field of the user's own, which the controller's patches must keep.
    cluster.ok(&["annotate", "vs", "rollouts-demo-vsvc", "team=payments"]);
    let mut watch = cluster
        .kubectl()
        .args([
            "get",
            "vs",
            "rollouts-demo-vsvc",
            "-w",
            "-o",
            "jsonpath={.spec.http[0].route[*].weight}{\"\\n\"}",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut watched = BufReader::new(watch.stdout.take().unwrap()).lines();
    assert_eq!(watched.next().unwrap().unwrap(), "100 0");
    let applied = cluster.ok(&[
        "apply",
        "-f",
        repo_file("scenarios/manifests/seed-004-rollout-update.yaml")
            .to_str()
            .unwrap(),
    ]);
    assert!(
        applied.contains("rollout.argoproj.io/rollouts-demo configured"),
        "{applied}"
    );
    assert_eq!(
        cluster.ok(&["get", "vs", "rollouts-demo-vsvc", "-o", WEIGHTS]),
        "80 20"
    );
    let paused = cluster.ok(&[
        "get",
        "rollout",
        "rollouts-demo",
        "-o",
        "jsonpath={.status.phase} {.status.pauseConditions[0].reason} {.status.currentStepIndex}",
    ]);
    assert_eq!(paused, "Paused CanaryPauseStep 1");
    cluster.ok(&[
        "patch",
        "rollout",
        "rollouts-demo",
        "--type",
        "merge",
        "--subresource",
        "status",
        "-p",
        r#"{"status":{"pauseConditions":null}}"#,
    ]);
    assert_eq!(
        cluster.ok(&[
            "get",
            "rollout",
            "rollouts-demo",
            "-o",
            "jsonpath={.status.phase}"
        ]),
        "Healthy"
    );
    let mut seen = Vec::new();
    while seen.last().map(String::as_str) != Some("100 0") {
        seen.push(watched.next().expect("a line per change").unwrap());
    }
    let _ = watch.kill();
    let _ = watch.wait();
    // A line per write to the VirtualService: each step's weights, then back to stable
    // after full promotion.
    assert_eq!(seen, ["80 20", "60 40", "40 60", "20 80", "0 100", "100 0"]);
    let yaml = cluster.ok(&["get", "vs", "rollouts-demo-vsvc", "-o", "yaml"]);
    let vs: serde_json::Value = serde_yaml::from_str(&yaml).unwrap();
    assert_eq!(vs["metadata"]["annotations"]["team"], "payments");
    assert_eq!(vs["spec"]["gateways"][0], "rollouts-demo-gateway");
    let rs = cluster.ok(&["get", "rs"]);
    assert!(rs.contains("rollouts-demo-5cf4fb69f8"), "{rs}");
}

#[test]
#[ignore = "needs kubectl; run by .ci/run"]
fn eight_kubectl_writers_lose_no_update() {
    const WRITERS: usize = 8;
    const EACH: u64 = 4;
    let cluster = std::sync::Arc::new(Cluster::start());
    cluster.ok(&["annotate", "svc", "rollouts-demo-canary", "count=0"]);
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| {
            let cluster = cluster.clone();
            std::thread::spawn(move || {
                let (mut won, mut lost) = (0u64, 0u64);
                while won < EACH {
                    let json = cluster.ok(&["get", "svc", "rollouts-demo-canary", "-o", "json"]);
                    let mut svc: serde_json::Value = serde_json::from_str(&json).unwrap();
                    let n: u64 = svc["metadata"]["annotations"]["count"]
                        .as_str()
                        .unwrap()
                        .parse()
                        .unwrap();
                    svc["metadata"]["annotations"]["count"] = (n + 1).to_string().into();
                    let file = support::write_temp("svc.json", &svc.to_string());
                    let out = cluster.run(&["replace", "-f", file.to_str().unwrap()]);
                    if out.status.success() {
                        won += 1;
                    } else {
                        let err = String::from_utf8_lossy(&out.stderr);
                        assert!(
                            err.contains("Error from server (Conflict)")
                                && err.contains("the object has been modified"),
                            "a failed replace is a conflict: {err}"
                        );
                        lost += 1;
                    }
                }
                (won, lost)
            })
        })
        .collect();
    let results: Vec<(u64, u64)> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    let won: u64 = results.iter().map(|r| r.0).sum();
    let lost: u64 = results.iter().map(|r| r.1).sum();
    let count = cluster.ok(&[
        "get",
        "svc",
        "rollouts-demo-canary",
        "-o",
        "jsonpath={.metadata.annotations.count}",
    ]);
    assert_eq!(count, won.to_string(), "no lost update");
    assert_eq!(won, WRITERS as u64 * EACH);
    eprintln!("{WRITERS} kubectl writers: {won} replaced, {lost} got 409");
}

#[test]
#[ignore = "needs kubectl; run by .ci/run"]
fn errors_are_printed_as_kubectl_prints_a_real_servers() {
    let cluster = Cluster::start();
    let err = |args: &[&str]| {
        let out = cluster.run(args);
        assert!(!out.status.success(), "kubectl {args:?} should fail");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(cluster.ok(&["get", "ns"]).contains("my-demo   Active"));
    assert!(
        err(&["get", "widgets"]).contains("the server doesn't have a resource type \"widgets\"")
    );
    assert!(
        err(&["get", "ro", "nope"])
            .contains("Error from server (NotFound): rollouts.argoproj.io \"nope\" not found")
    );
    let bad = support::write_temp(
        "bad.yaml",
        "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata: {name: bad}\nspec: {replicas: many}\n",
    );
    let invalid = err(&["apply", "-f", bad.to_str().unwrap()]);
    assert!(
        invalid.contains(
            "The Rollout \"bad\" is invalid: spec.replicas: invalid type: string \"many\""
        ),
        "{invalid}"
    );
    let patch = err(&[
        "patch",
        "ro",
        "rollouts-demo",
        "--type",
        "json",
        "-p",
        r#"[{"op":"remove","path":"/spec/nope"}]"#,
    ]);
    assert!(
        patch.contains("Error from server (BadRequest): the JSON patch cannot be applied"),
        "{patch}"
    );
    let server_side = err(&[
        "apply",
        "--server-side",
        "-f",
        repo_file("scenarios/manifests/seed-004-rollout-update.yaml")
            .to_str()
            .unwrap(),
    ]);
    assert!(
        server_side.contains("does not implement server-side apply"),
        "{server_side}"
    );
    // Still serving, and nothing was changed by the failures.
    let ro = cluster.ok(&[
        "get",
        "ro",
        "rollouts-demo",
        "-o",
        "jsonpath={.status.phase}",
    ]);
    assert_eq!(ro, "Healthy");
}

#[test]
#[ignore = "needs kubectl; run by .ci/run"]
fn a_stored_deployment_is_scaled_and_its_status_written_through_its_subresources() {
    let cluster = Cluster::start();
    let rendered = repo_file("tests/fixtures/helm/rendered.yaml");
    cluster.ok(&["apply", "-n", "my-demo", "-f", rendered.to_str().unwrap()]);
    let scaled = cluster.ok(&[
        "scale",
        "deployment",
        "redis",
        "-n",
        "my-demo",
        "--replicas",
        "3",
    ]);
    assert!(scaled.contains("deployment.apps/redis scaled"), "{scaled}");
    let get = |path: &str| {
        cluster.ok(&[
            "get",
            "deploy",
            "redis",
            "-n",
            "my-demo",
            "-o",
            &format!("jsonpath={{{path}}}"),
        ])
    };
    assert_eq!(get(".spec.replicas"), "3");
    // What a controller writes, through `/status`; the spec in the same patch is ignored.
    cluster.ok(&[
        "patch",
        "deploy",
        "redis",
        "-n",
        "my-demo",
        "--subresource",
        "status",
        "--type",
        "merge",
        "-p",
        r#"{"status":{"replicas":3,"readyReplicas":2},"spec":{"replicas":9}}"#,
    ]);
    assert_eq!(get(".status.readyReplicas"), "2");
    assert_eq!(get(".spec.replicas"), "3");
    // Re-applying the chart leaves the status alone and sets the chart's count again.
    cluster.ok(&["apply", "-n", "my-demo", "-f", rendered.to_str().unwrap()]);
    assert_eq!(get(".status.readyReplicas"), "2");
    assert_eq!(get(".spec.replicas"), "1");
    let table = cluster.ok(&["get", "deploy", "redis", "-n", "my-demo"]);
    assert!(
        table.starts_with("NAME    READY   UP-TO-DATE   AVAILABLE   AGE"),
        "Kubernetes' columns:\n{table}"
    );
    assert!(
        table.contains("2/1"),
        "READY is readyReplicas/spec.replicas:\n{table}"
    );
}

#[test]
#[ignore = "needs kubectl; run by .ci/run"]
fn kubectl_scale_sets_the_rollouts_replicas_and_the_controller_follows() {
    let cluster = Cluster::start();
    let resources = cluster.ok(&["api-resources", "--api-group", "argoproj.io", "-o", "name"]);
    assert!(resources.contains("rollouts.argoproj.io"), "{resources}");
    let scaled = cluster.ok(&["scale", "rollout", "rollouts-demo", "--replicas", "5"]);
    assert!(
        scaled.contains("rollout.argoproj.io/rollouts-demo scaled"),
        "{scaled}"
    );
    let replicas = |path: &str| {
        cluster.ok(&[
            "get",
            "ro",
            "rollouts-demo",
            "-o",
            &format!("jsonpath={{{path}}}"),
        ])
    };
    assert_eq!(replicas(".spec.replicas"), "5");
    // Held, the write settled before kubectl's next request: the stable ReplicaSet has 5.
    assert_eq!(replicas(".status.replicas"), "5");
    // With a precondition kubectl reads the Scale and sends it back whole (PUT).
    let out = cluster.run(&[
        "scale",
        "rollout",
        "rollouts-demo",
        "--current-replicas",
        "4",
        "--replicas",
        "2",
    ]);
    assert!(!out.status.success(), "the count is 5, not 4");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Expected replicas to be 4, was 5"), "{err}");
    cluster.ok(&[
        "scale",
        "rollout",
        "rollouts-demo",
        "--current-replicas",
        "5",
        "--replicas",
        "2",
    ]);
    assert_eq!(replicas(".spec.replicas"), "2");
    assert_eq!(replicas(".status.replicas"), "2");
    // A ReplicaSet's Scale, as `kubectl get --subresource` reads it.
    let rs = cluster.ok(&["get", "rs", "-o", "jsonpath={.items[0].metadata.name}"]);
    let spec = cluster.ok(&[
        "get",
        "rs",
        &rs,
        "--subresource",
        "scale",
        "-o",
        "jsonpath={.spec.replicas}",
    ]);
    assert_eq!(spec, "2");
}

/// The Gateway API objects' status as an implementation writes it, read back by kubectl:
/// the route accepted by its Gateway but with a backendRef that does not resolve, the
/// Gateway programmed with the route counted on its listener.
#[test]
#[ignore = "needs kubectl; run by .ci/run"]
fn the_gateway_api_status_is_served_as_an_implementation_writes_it() {
    let cluster = Cluster::serving(Some(&repo_file(
        "scenarios/gateway-api-missing-backend.yaml",
    )));
    let conditions =
        "jsonpath={range .status.parents[0].conditions[*]}{.type}={.status}/{.reason} {end}";
    let route = cluster.ok(&[
        "get",
        "httproute",
        "argo-rollouts-http-route",
        "-o",
        conditions,
    ]);
    assert_eq!(
        route.trim(),
        "Accepted=True/Accepted ResolvedRefs=False/BackendNotFound"
    );
    let gateway = cluster.ok(&[
        "get",
        "gateways.gateway.networking.k8s.io",
        "istio-gateway",
        "-o",
        "jsonpath={.status.conditions[1].type}={.status.conditions[1].status} {.status.listeners[0].attachedRoutes}",
    ]);
    assert_eq!(gateway.trim(), "Programmed=True 1");
}

#[test]
#[ignore = "needs kubectl; run by .ci/run"]
fn load_jobs_manifests_are_applied_and_stored() {
    use clap::Parser;
    let cluster = Cluster::start();
    let dir = support::temp_dir();
    for (file, extra) in [
        ("jobs.yaml", None),
        ("analysis.yaml", Some("--analysis-template")),
    ] {
        let mut argv = vec![
            "canarysim",
            "load",
            "job",
            "--image",
            "registry.example/canarysim:1",
        ];
        argv.extend(extra);
        argv.extend([
            "--",
            "http://gateway.example/",
            "-n",
            "60000",
            "--expect",
            "yellow=20%",
        ]);
        let (code, out, err) = canarysim::cli::execute(canarysim::cli::Cli::parse_from(argv));
        assert_eq!(code, 0, "{err}");
        let path = dir.path().join(file);
        std::fs::write(&path, out).unwrap();
        cluster.ok(&["apply", "-n", "my-demo", "-f", path.to_str().unwrap()]);
    }
    let got = cluster.ok(&["get", "jobs,services,analysistemplates", "-n", "my-demo"]);
    for expected in [
        "job.batch/canarysim-load-coordinator",
        "job.batch/canarysim-load-workers",
        "service/canarysim-load-coordinator",
        "analysistemplate.argoproj.io/canarysim-load",
    ] {
        assert!(got.contains(expected), "{expected} in:\n{got}");
    }
}
