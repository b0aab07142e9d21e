//! `canarysim load` on real loopback sockets against real pods (`pod_server`), through the
//! CLI entry point as the binary runs it. Every load is bounded in count (and the timeouts
//! in time); every server is on 127.0.0.1 with a port the system picks, and stops with the
//! test.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::support;
use support::accounted;

use canarysim::cli::{Cli, execute};
use canarysim::pod_server::{self, PodSpec, RunningPod};
use clap::Parser;

pub(crate) fn load(args: &[&str]) -> (u8, String, String) {
    let mut argv = vec!["canarysim", "load", "--quiet"];
    argv.extend_from_slice(args);
    execute(Cli::parse_from(argv))
}

pub(crate) fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// A runtime for the test's servers (the load runs its own).
pub(crate) fn servers() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

pub(crate) fn pod(rt: &tokio::runtime::Runtime, spec: PodSpec) -> RunningPod {
    rt.block_on(pod_server::start(spec, "127.0.0.1:0".parse().unwrap()))
        .unwrap()
}

/// An L4 balancer on loopback: each accepted connection is spliced whole to one backend,
/// chosen by connection number (`pick(i)`), as HAProxy in TCP mode or kube-proxy choose.
pub(crate) fn l4_balancer(
    rt: &tokio::runtime::Runtime,
    backends: Vec<SocketAddr>,
    pick: impl Fn(u64) -> usize + Send + 'static,
) -> SocketAddr {
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let address = listener.local_addr().unwrap();
    let count = Arc::new(AtomicU64::new(0));
    rt.spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let i = count.fetch_add(1, Ordering::Relaxed);
            let to = backends[pick(i)];
            tokio::spawn(async move {
                if let Ok(mut upstream) = tokio::net::TcpStream::connect(to).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                }
            });
        }
    });
    address
}

#[test]
fn one_backend_every_request_accounted_and_the_verdict_passes() {
    let rt = servers();
    let blue = pod(&rt, PodSpec::new("blue"));
    let url = format!("http://{}/", blue.address);
    // Without keep-alive every request is a draw of its own.
    let args = ["-n", "600", "-c", "4", "--disable-keepalive"];
    let (code, out, err) = load(&[&[url.as_str()][..], &args, &["--expect", "blue=100%"]].concat());
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("sent 600 "), "{out}");
    assert!(out.contains("2xx 600,"), "{out}");
    assert!(out.contains("verdict: PASS"), "{out}");
    let (code, out, _) = load(
        &[
            &[url.as_str()][..],
            &args,
            &["--expect", "yellow=20%", "--format", "json"],
        ]
        .concat(),
    );
    assert_eq!(code, 1, "blue answers everything: 20 % yellow fails");
    let r = json(&out);
    assert_eq!(r["sent"], 600);
    assert_eq!(r["classes"]["2xx"], 600);
    assert_eq!(r["verdict"]["outcome"], "fail");
    assert_eq!(r["verdict"]["passes"], false);
    assert_eq!(r["versions"][0]["version"], "blue");
    assert_eq!(r["connections_opened"], 600);
}

#[test]
fn one_version_over_few_keepalive_connections_is_inconclusive_not_a_pass() {
    // Four keep-alive connections that all reached blue: through a gateway that picks per
    // connection, that happens 41 % of the time with 20 % of connections on the canary.
    // A rollback check (canary 0 %) must not pass on it: each connection is one draw.
    let rt = servers();
    let blue = pod(&rt, PodSpec::new("blue"));
    let url = format!("http://{}/", blue.address);
    let (code, out, err) = load(&[&url, "-n", "600", "-c", "4", "--expect", "yellow=0%"]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.contains("verdict: INCONCLUSIVE"), "{out}");
    assert!(
        out.contains("UNIT OF RANDOMISATION: PER CONNECTION"),
        "{out}"
    );
    assert!(out.contains("--disable-keepalive"), "{out}");
    assert!(out.contains("canarysim plan 0% --within 1"), "{out}");
    // The same pod without keep-alive: 600 draws show canary 0 % within a point.
    let (code, out, err) = load(&[
        &url,
        "-n",
        "600",
        "-c",
        "4",
        "--disable-keepalive",
        "--expect",
        "yellow=0%",
    ]);
    assert_eq!(code, 0, "{out}{err}");
}

/// kube-proxy's iptables mode: each connection's pod drawn at random, 1 in 5 the canary
/// (seeded per run: a hash of the run and the connection's number).
fn random_fifth(run: u64) -> impl Fn(u64) -> usize + Send + 'static {
    move |i| {
        let mut x = (run << 32 | i).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x ^= x >> 29;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^= x >> 32;
        usize::from(x % 5 == 0)
    }
}

#[test]
fn a_rollback_check_through_a_per_connection_balancer_never_passes() {
    // Canary 0 % expected (the rollout was aborted), but the balancer still sends 20 % of
    // connections to yellow. Few keep-alive connections often all land on blue (0.8^c):
    // that must never pass as "0 % canary".
    let rt = servers();
    let blue = pod(&rt, PodSpec::new("blue"));
    let yellow = pod(&rt, PodSpec::new("yellow"));
    for connections in ["1", "4"] {
        let mut outcomes = std::collections::BTreeMap::<String, u32>::new();
        let mut all_blue = 0;
        for run in 0..100 {
            let lb = l4_balancer(&rt, vec![blue.address, yellow.address], random_fifth(run));
            let (code, out, err) = load(&[
                &format!("http://{lb}/"),
                "-n",
                "200",
                "-c",
                connections,
                "--expect",
                "yellow=0%",
                "--format",
                "json",
            ]);
            let r = json(&out);
            let outcome = r["verdict"]["outcome"].as_str().unwrap().to_string();
            assert_ne!(outcome, "pass", "-c {connections}, run {run}: {out}{err}");
            assert_eq!(code, if outcome == "fail" { 1 } else { 3 });
            let versions = r["versions"].as_array().unwrap();
            all_blue += u32::from(versions.len() == 1 && versions[0]["version"] == "blue");
            *outcomes.entry(outcome).or_default() += 1;
        }
        // The trap was there: some runs saw blue only.
        assert!(all_blue > 0, "-c {connections}: {outcomes:?}");
        println!("-c {connections}: {outcomes:?}, blue only in {all_blue} of 100");
    }
}

#[test]
fn until_decided_never_fails_a_fair_per_connection_split() {
    // The sequential test counts connections until a connection shows two versions; with
    // a per-connection balancer none does, so requests never count as independent draws.
    let rt = servers();
    let blue = pod(&rt, PodSpec::new("blue"));
    let yellow = pod(&rt, PodSpec::new("yellow"));
    for run in 0..20 {
        let lb = l4_balancer(&rt, vec![blue.address, yellow.address], random_fifth(run));
        for extra in [&["-c", "4"][..], &["-c", "4", "--disable-keepalive"][..]] {
            let (_, out, err) = load(
                &[
                    &[
                        format!("http://{lb}/").as_str(),
                        "-n",
                        "3000",
                        "--expect",
                        "yellow=20%",
                        "--within",
                        "5",
                        "--until-decided",
                        "--format",
                        "json",
                    ][..],
                    extra,
                ]
                .concat(),
            );
            let r = json(&out);
            let decision = r["sequential"]["decision"].as_str().unwrap();
            assert_ne!(decision, "fail", "run {run} {extra:?}: {out}{err}");
            // Without keep-alive each request is a connection: the units are one.
            let unit = if extra.len() == 2 {
                "connection"
            } else {
                "request"
            };
            assert_eq!(r["sequential"]["unit"], unit, "{out}");
            if extra.len() == 2 {
                // Four keep-alive connections are four draws: nothing decides.
                assert_eq!(decision, "inconclusive", "{out}");
            }
        }
    }
}

#[test]
fn an_unreachable_target_is_exit_2_within_seconds() {
    // A port that was free a moment ago: nothing listens there now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Instant::now();
    let (code, out, err) = load(&[&format!("http://127.0.0.1:{port}/"), "-n", "10"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("cannot reach 127.0.0.1:"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn bad_arguments_are_exit_2_with_what_was_expected() {
    for (args, expected) in [
        (
            vec!["http://127.0.0.1:9/"],
            "-n/--requests N or -z/--duration D",
        ),
        (
            vec!["http://127.0.0.1:9/", "-n", "0"],
            "-n and -z must be above 0",
        ),
        (vec!["ftp://x/", "-n", "1"], "http:// or https://"),
        (
            vec!["http://127.0.0.1:9/", "-n", "1", "-H", "nocolon"],
            "'Name: value'",
        ),
        (
            vec!["http://127.0.0.1:9/", "-n", "1", "--classify", "xml:v"],
            "header:NAME",
        ),
        (
            vec!["http://127.0.0.1:9/", "-n", "1", "--expect", "blue"],
            "VALUE=SHARE",
        ),
        (
            vec!["http://127.0.0.1:9/", "-n", "1", "--connect-to", "x:1"],
            "HOST:PORT:ADDR:PORT",
        ),
        (
            vec!["http://127.0.0.1:9/", "-n", "1", "--until-decided"],
            "--expect",
        ),
        (
            vec!["http://127.0.0.1:9/", "-n", "1", "-q", "-5"],
            "-q/--rate",
        ),
        // Each of these once panicked on the clock's arithmetic, or ran without end.
        (
            vec!["http://127.0.0.1:9/", "-z", "5000000000000000h"],
            "a load runs at most 24h",
        ),
        (
            vec!["http://127.0.0.1:9/", "-n", "3", "-q", "1e-300"],
            "-q/--rate 1e-300: expected requests per second from 0.001 to 1000000000",
        ),
        (
            vec!["http://127.0.0.1:9/", "-n", "1000", "-q", "0.01"],
            "a load runs at most 24h (send fewer or faster, or add -z)",
        ),
        (
            vec!["http://127.0.0.1:9/", "-n", "1", "-t", "2h"],
            "-t/--timeout \"2h\": expected above 0 and at most 1h",
        ),
    ] {
        let (code, _, err) = load(&args);
        assert_eq!(code, 2, "{args:?}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}

/// Pods blue and yellow behind an [`l4_balancer`] that sends every fifth connection to
/// yellow: 20 % of connections. The pods stop when dropped.
pub(crate) fn a_fifth_of_connections_to_yellow(
    rt: &tokio::runtime::Runtime,
) -> (SocketAddr, [RunningPod; 2]) {
    let blue = pod(rt, PodSpec::new("blue"));
    let yellow = pod(rt, PodSpec::new("yellow"));
    let lb = l4_balancer(rt, vec![blue.address, yellow.address], |i| {
        usize::from(i % 5 == 4)
    });
    (lb, [blue, yellow])
}

#[test]
fn a_per_connection_balancer_is_recognised_and_judged_by_connections() {
    let rt = servers();
    let blue = pod(&rt, PodSpec::new("blue"));
    let yellow = pod(&rt, PodSpec::new("yellow"));
    // Every fifth connection to yellow: 20 % of connections.
    let lb = l4_balancer(&rt, vec![blue.address, yellow.address], |i| {
        usize::from(i % 5 == 4)
    });
    let (code, out, err) = load(&[
        &format!("http://{lb}/"),
        "-n",
        "2000",
        "-c",
        "20",
        "--expect",
        "yellow=20%",
        "--format",
        "json",
    ]);
    let r = json(&out);
    assert_eq!(r["unit"], "connection", "{out}{err}");
    assert_eq!(r["unit_evidence"]["finding"], "per connection");
    assert_eq!(r["effective_n"], 20, "n = connections, not requests");
    let yellow = r["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["version"] == "yellow")
        .unwrap();
    assert_eq!(yellow["connections"], 4);
    // 4 of 20 connections is exactly 20 %, but 20 draws cannot show ±1 point: the data
    // cannot tell (exit 3), which is not a wrong weight (exit 1).
    assert_eq!(code, 3);
    assert_eq!(r["verdict"]["outcome"], "inconclusive");
    assert_eq!(r["verdict"]["passes"], false);
    // The text report says so up front.
    let (_, text, _) = load(&[&format!("http://{lb}/"), "-n", "400", "-c", "10"]);
    assert!(
        text.contains("UNIT OF RANDOMISATION: PER CONNECTION"),
        "{text}"
    );
    // Forced per request, the same traffic is judged on its requests.
    let (_, out, _) = load(&[
        &format!("http://{lb}/"),
        "-n",
        "400",
        "-c",
        "10",
        "--unit",
        "request",
        "--format",
        "json",
    ]);
    let r = json(&out);
    assert_eq!(
        (r["unit"].as_str(), r["effective_n"].as_u64()),
        (Some("request"), Some(400))
    );
    assert_eq!(r["unit_evidence"]["forced"], true);
}

#[test]
fn a_new_connection_per_request_shows_the_split_per_request() {
    let rt = servers();
    let (lb, _pods) = a_fifth_of_connections_to_yellow(&rt);
    let (code, out, err) = load(&[
        &format!("http://{lb}/"),
        "-n",
        "500",
        "-c",
        "5",
        "--disable-keepalive",
        "--expect",
        "yellow=20%",
        "--within",
        "5",
        "--format",
        "json",
    ]);
    let r = json(&out);
    assert_eq!(r["connections_opened"], 500, "{out}{err}");
    assert_eq!(r["unit"], "request");
    assert_eq!(code, 0, "{out}");
    let yellow = r["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["version"] == "yellow")
        .unwrap()
        .clone();
    assert_eq!(
        yellow["responses"], 100,
        "every fifth connection, one request each"
    );
}

/// Issue 26: the text report fits a 100-column terminal, counted in characters (→, ±, —).
fn assert_fits_100_columns(text: &str) {
    for line in text.lines() {
        let width = line.chars().count();
        assert!(width <= 100, "a line of {width} columns:\n{line}\n\n{text}");
    }
}

#[test]
fn the_text_report_fits_100_columns_per_connection_and_per_request() {
    let rt = servers();
    let (lb, _pods) = a_fifth_of_connections_to_yellow(&rt);
    let url = format!("http://{lb}/");
    // Keep-alive through a per-connection balancer: the longest explanations and advice.
    let (code, text, err) = load(&[&url, "-n", "400", "-c", "10", "--expect", "yellow=20%"]);
    assert_eq!(code, 3, "{text}{err}");
    assert!(
        text.contains("UNIT OF RANDOMISATION: PER CONNECTION"),
        "{text}"
    );
    // The command to run next is never broken across lines.
    assert!(text.contains("`canarysim plan 20% --within 1"), "{text}");
    for header in [
        "VERSION  ANSWERS  CONN %  99 % INTERVAL",
        "VERSION  P50 ms  P90 ms  P99 ms  P99.9 ms  MAX ms",
    ] {
        assert!(text.contains(header), "{text}");
    }
    assert_fits_100_columns(&text);
    // A connection per request, two versions, and the sequential test's line.
    let (_, text, err) = load(&[
        &url,
        "-n",
        "500",
        "-c",
        "5",
        "--disable-keepalive",
        "--until-decided",
        "--expect",
        "yellow=20%",
        "--within",
        "10",
    ]);
    assert!(text.contains("VERSION  ANSWERS  SHARE %"), "{text}{err}");
    assert!(text.contains("sequential test: "), "{text}");
    assert_fits_100_columns(&text);
}

#[test]
fn errors_and_timeouts_are_counted_per_version_and_class() {
    let rt = servers();
    let flaky = pod(
        &rt,
        PodSpec::new("yellow").answering(Duration::ZERO, 0.5, 503),
    );
    let (_, out, err) = load(&[
        &format!("http://{}/", flaky.address),
        "-n",
        "400",
        "-c",
        "4",
        "--format",
        "json",
    ]);
    let r = json(&out);
    let errors = r["versions"][0]["errors"].as_u64().unwrap();
    assert_eq!(r["classes"]["503"].as_u64(), Some(errors), "{out}{err}");
    assert!((120..=280).contains(&errors), "about half of 400: {errors}");
    assert_eq!(
        r["classes"]["2xx"].as_u64().unwrap() + errors,
        400,
        "sent = the sum of the classes"
    );

    let slow = pod(
        &rt,
        PodSpec::new("blue").answering(Duration::from_millis(400), 0.0, 500),
    );
    let (_, out, err) = load(&[
        &format!("http://{}/", slow.address),
        "-n",
        "6",
        "-c",
        "3",
        "-t",
        "100ms",
        "--format",
        "json",
    ]);
    let r = json(&out);
    assert_eq!(r["classes"]["timeout"], 6, "{out}{err}");
    assert_eq!(r["sent"], 6);
}

#[test]
fn a_backend_killed_mid_run_ends_the_run_with_every_request_accounted() {
    let rt = servers();
    // Slow enough that every connection has a request in flight when the pod dies.
    let blue = pod(
        &rt,
        PodSpec::new("blue").answering(Duration::from_millis(50), 0.0, 500),
    );
    let url = format!("http://{}/", blue.address);
    // Bounded by count; the duration is a watchdog. The kill waits for answers, not for a
    // time (on a busy machine half a second once saw 9 answers).
    let runner = std::thread::spawn(move || {
        load(&[
            &url, "-n", "20000", "-z", "300s", "-c", "4", "-t", "1s", "--format", "json",
        ])
    });
    let watchdog = std::time::Instant::now() + Duration::from_secs(120);
    while blue.received().0 < 20 {
        assert!(
            std::time::Instant::now() < watchdog,
            "the pod never answered 20 requests"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    blue.stop();
    let (_, out, err) = runner.join().unwrap();
    let r = json(&out);
    let c = &r["classes"];
    let total: u64 = c
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(r["sent"].as_u64(), Some(total), "{out}{err}");
    assert!(c["2xx"].as_u64().unwrap() > 10, "{c}");
    let failed = c["refused"].as_u64().unwrap() + c["reset"].as_u64().unwrap();
    assert!(failed > 0, "requests after the kill fail: {c}");
    assert!(
        r["versions"][0]["lost"].as_u64().unwrap() >= 1,
        "the requests in flight are blue's losses: {out}"
    );
}

#[test]
fn http2_over_cleartext_multiplexes_on_one_connection_per_worker() {
    let rt = servers();
    let blue = pod(&rt, PodSpec::new("blue"));
    let (code, out, err) = load(&[
        &format!("http://{}/", blue.address),
        "-n",
        "300",
        "-c",
        "3",
        "--http2",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let r = json(&out);
    assert_eq!(r["protocol"], "HTTP/2");
    assert_eq!(r["classes"]["2xx"], 300);
    assert_eq!(r["connections_opened"], 3);
}

#[test]
fn until_decided_stops_before_the_most_it_may_send() {
    let rt = servers();
    let (lb, pods) = a_fifth_of_connections_to_yellow(&rt);
    let (code, out, err) = load(&[
        &format!("http://{lb}/"),
        "-n",
        "20000",
        "-c",
        "4",
        "--disable-keepalive",
        "--expect",
        "yellow=20%",
        "--within",
        "5",
        "--until-decided",
        "--format",
        "json",
    ]);
    let r = json(&out);
    assert_eq!(r["sequential"]["decision"], "pass", "{out}{err}");
    assert_eq!(r["verdict"]["outcome"], "pass");
    assert_eq!(r["verdict"]["decided_by"], "sequential test");
    assert!(r["sent"].as_u64().unwrap() < 20_000, "{out}");
    assert_eq!(code, 0);
    // Too few requests to decide: inconclusive at the cap, exit 3.
    let (code, out, err) = load(&[
        &format!("http://{}/", pods[0].address),
        "-n",
        "10",
        "--expect",
        "blue=100%",
        "--until-decided",
        "--format",
        "json",
    ]);
    assert_eq!(code, 3, "{out}{err}");
    assert_eq!(json(&out)["sequential"]["decision"], "inconclusive");
}

#[test]
fn the_json_report_follows_its_schema() {
    let rt = servers();
    let blue = pod(&rt, PodSpec::new("blue"));
    let (_, out, _) = load(&[
        &format!("http://{}/", blue.address),
        "-n",
        "100",
        "-c",
        "2",
        "--expect",
        "blue=100%",
        "--format",
        "json",
    ]);
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/http-load.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let report = json(&out);
    let errors: Vec<String> = validator
        .iter_errors(&report)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    // And the schema is strict enough to refuse a report that lacks a field.
    let mut broken = report.clone();
    broken.as_object_mut().unwrap().remove("classes");
    assert!(!validator.is_valid(&broken));
}

/// A TLS-terminating front for `backend` with a fresh self-signed certificate for
/// `demo.local` (ALPN h2 and http/1.1), as an ingress gateway terminates TLS. Returns its
/// address and the certificate's PEM file.
fn tls_front(
    rt: &tokio::runtime::Runtime,
    backend: SocketAddr,
    name: &str,
) -> (SocketAddr, support::TempFile) {
    let certified = rcgen::generate_simple_self_signed(vec!["demo.local".to_string()]).unwrap();
    let pem = support::write_temp(&format!("{name}-ca.pem"), &certified.cert.pem());
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![certified.cert.der().clone()], key)
    .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let address = listener.local_addr().unwrap();
    rt.spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(client).await else {
                    return;
                };
                if let Ok(mut upstream) = tokio::net::TcpStream::connect(backend).await {
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut upstream).await;
                }
            });
        }
    });
    (address, pem)
}

#[test]
fn https_through_a_port_forward_keeps_the_urls_name_for_sni_and_trust() {
    let rt = servers();
    let blue = pod(&rt, PodSpec::new("blue"));
    let (front, ca) = tls_front(&rt, blue.address, "trust");
    // The URL names the gateway's host; --connect-to sends to the forwarded port.
    let url = "https://demo.local/";
    let connect_to = format!("demo.local:443:127.0.0.1:{}", front.port());
    let ca = ca.to_str().unwrap();
    let (code, out, err) = load(&[
        url,
        "-n",
        "200",
        "-c",
        "2",
        "--connect-to",
        &connect_to,
        "--cacert",
        ca,
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let r = json(&out);
    assert_eq!(r["classes"]["2xx"], 200);
    assert_eq!(r["protocol"], "HTTP/1.1");
    assert_eq!(r["address"], format!("127.0.0.1:{}", front.port()));
    // HTTP/2 is negotiated by ALPN.
    let (_, out, err) = load(&[
        url,
        "-n",
        "200",
        "-c",
        "2",
        "--connect-to",
        &connect_to,
        "--cacert",
        ca,
        "--http2",
        "--format",
        "json",
    ]);
    let r = json(&out);
    assert_eq!(
        (r["protocol"].as_str(), r["classes"]["2xx"].as_u64()),
        (Some("HTTP/2"), Some(200)),
        "{out}{err}"
    );
    // Untrusted (the system's roots do not know this certificate): exit 2, saying why.
    let (code, _, err) = load(&[url, "-n", "10", "--connect-to", &connect_to]);
    assert_eq!(code, 2);
    assert!(err.contains("TLS"), "{err}");
    // A certificate refused is not another protocol.
    assert!(
        err.contains("cannot reach") && !err.contains("try http://"),
        "{err}"
    );
    // A server name the certificate does not cover: refused as well.
    let (code, _, err) = load(&[
        url,
        "-n",
        "10",
        "--connect-to",
        &connect_to,
        "--cacert",
        ca,
        "--sni",
        "other.local",
    ]);
    assert_eq!(code, 2, "{err}");
    // --insecure accepts it.
    let (code, out, err) = load(&[url, "-n", "50", "--connect-to", &connect_to, "--insecure"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("2xx 50,"), "{out}");
}

#[test]
fn an_open_loop_counts_latency_from_the_intended_send_time() {
    let rt = servers();
    let slow = pod(
        &rt,
        PodSpec::new("blue").answering(Duration::from_millis(50), 0.0, 500),
    );
    // One connection, 100 requests a second, each answered in 50 ms: the connection can
    // serve only 20 a second, so requests queue and their latency grows far past 50 ms.
    let (_, out, err) = load(&[
        &format!("http://{}/", slow.address),
        "-n",
        "40",
        "-c",
        "1",
        "-q",
        "100",
        "--format",
        "json",
    ]);
    let r = json(&out);
    assert_eq!(r["sent"], 40, "{out}{err}");
    let p99 = r["latency"]["p99"].as_u64().unwrap();
    let p50 = r["latency"]["p50"].as_u64().unwrap();
    assert!(p50 >= 50_000, "{p50}");
    assert!(
        p99 > 1_000_000,
        "the 40th request waited for 39 others: {p99} µs"
    );
    // A rate the connection keeps up with: no queueing, latency stays near 50 ms.
    let (_, out, _) = load(&[
        &format!("http://{}/", slow.address),
        "-n",
        "10",
        "-c",
        "4",
        "-q",
        "20",
        "--format",
        "json",
    ]);
    let r = json(&out);
    assert!(r["latency"]["p99"].as_u64().unwrap() < 500_000, "{out}");
    assert!(
        r["elapsed_seconds"].as_f64().unwrap() >= 0.4,
        "10 at 20/s take 0.45 s: {out}"
    );
}

/// An HTTP/1.1-only server, as nginx without `http2`: it answers HTTP/1 requests and
/// refuses HTTP/2's connection preface with a 400 and a close.
fn http1_only(rt: &tokio::runtime::Runtime) -> SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let address = listener.local_addr().unwrap();
    rt.spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 4096];
                while let Ok(n) = client.read(&mut buffer).await {
                    if n == 0 {
                        break;
                    }
                    let answer: &[u8] = if buffer.starts_with(b"PRI * HTTP/2.0") {
                        b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    } else {
                        b"HTTP/1.1 200 OK\r\nx-version: blue\r\ncontent-length: 0\r\n\r\n"
                    };
                    if client.write_all(answer).await.is_err() || answer.len() < 60 {
                        break;
                    }
                }
            });
        }
    });
    address
}

#[test]
fn a_protocol_the_target_does_not_speak_is_exit_2_at_once() {
    let rt = servers();
    let http1 = http1_only(&rt);
    // HTTP/2 with prior knowledge against an HTTP/1-only server.
    let started = Instant::now();
    let (code, out, err) = load(&[&format!("http://{http1}/"), "-n", "2000", "--http2"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(err.contains("offered HTTP/2 with prior knowledge"), "{err}");
    assert!(err.contains("drop --http2"), "{err}");
    // The same server in HTTP/1.1 is fine.
    let (code, out, err) = load(&[&format!("http://{http1}/"), "-n", "20", "-c", "2"]);
    assert_eq!(code, 0, "{out}{err}");
    // TLS against a plain port.
    let (code, out, err) = load(&[&format!("https://{http1}/"), "-n", "20", "--insecure"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("offered TLS"), "{err}");
    assert!(err.contains("try http://"), "{err}");
    // Plain HTTP against a TLS port.
    let blue = pod(&rt, PodSpec::new("blue"));
    let (front, _) = tls_front(&rt, blue.address, "plain-to-tls");
    let (code, out, err) = load(&[&format!("http://{front}/"), "-n", "20"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("offered HTTP/1.1 in plain text"), "{err}");
    assert!(err.contains("try https://"), "{err}");
}

#[test]
fn the_probe_is_the_loads_first_connection_not_an_extra_one() {
    // Round robin over two pods by connection number: with an extra, uncounted probe
    // connection, the load's first connection would land on yellow instead of blue.
    let rt = servers();
    let blue = pod(&rt, PodSpec::new("blue"));
    let yellow = pod(&rt, PodSpec::new("yellow"));
    let accepted = Arc::new(AtomicU64::new(0));
    let counter = accepted.clone();
    let lb = l4_balancer(&rt, vec![blue.address, yellow.address], move |i| {
        counter.fetch_add(1, Ordering::Relaxed);
        (i % 2) as usize
    });
    let (_, out, err) = load(&[
        &format!("http://{lb}/"),
        "-n",
        "50",
        "-c",
        "1",
        "--format",
        "json",
    ]);
    let r = json(&out);
    assert_eq!(r["connections_opened"], 1, "{out}{err}");
    assert_eq!(
        accepted.load(Ordering::Relaxed),
        1,
        "one connection reached the balancer"
    );
    assert_eq!(r["versions"][0]["version"], "blue", "{out}");
    assert_eq!(r["sent"], 50);
}

/// p50 of `canarysim load -c 1` against a pod answering after `latency`, in µs.
fn p50_against(rt: &tokio::runtime::Runtime, latency: Duration) -> u64 {
    let slow = pod(rt, PodSpec::new("blue").answering(latency, 0.0, 500));
    let (code, out, err) = load(&[
        &format!("http://{}/", slow.address),
        "-n",
        "1000",
        "-c",
        "1",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    json(&out)["latency"]["p50"].as_u64().unwrap()
}

#[test]
#[ignore = "timing: the pods' latency precision, run by .ci/run on a quiet machine"]
fn a_pods_latency_is_as_asked_within_a_quarter_of_a_millisecond() {
    // tokio's timer rounds a sleep up to the next millisecond (1 ms answered at 2.2 ms);
    // the pods' high-resolution timer must not. What a pod adds is measured against a pod
    // without latency in the same run, so the machine's round trip is not counted. The rest
    // is the pod's timer and both ends waking from an idle wait, which a virtual machine
    // makes slower the longer it idled: quiet runs of this check have given 54-121 µs
    // over 1 ms and 154-179 µs over 5 ms (a tenth of a millisecond failed a quiet CI run).
    // A shared machine only adds delay, so the least of up to three runs counts; an answer
    // before the latency is a defect in any run.
    let rt = servers();
    for latency in [1, 5] {
        let asked = latency * 1000;
        let most = asked + 250;
        let mut least = u64::MAX;
        for _ in 0..3 {
            let baseline = p50_against(&rt, Duration::ZERO);
            let p50 = p50_against(&rt, Duration::from_millis(latency));
            let added = p50.saturating_sub(baseline);
            println!(
                "--latency {latency}ms: p50 {p50} µs, without latency {baseline} µs: added {added} µs"
            );
            assert!(
                p50 >= asked,
                "{latency} ms: p50 {p50} µs, before the latency"
            );
            least = least.min(added);
            if least <= most {
                break;
            }
        }
        assert!(
            least <= most,
            "{latency} ms: the least the pod added in three runs: {least} µs"
        );
    }
}

#[test]
fn a_pod_never_answers_before_its_latency() {
    let rt = servers();
    let p50 = p50_against(&rt, Duration::from_millis(2));
    assert!(p50 >= 2_000, "p50 {p50} µs");
}

/// What a hostile server's body is.
#[derive(Clone, Copy)]
enum Body {
    /// Chunked, and never ends.
    Endless,
    /// This many bytes, with a Content-Length.
    Sized(u64),
}

/// A body generated as it is sent: a JSON object naming the version `yellow` in its first
/// bytes, then padding for ever, or up to its size and the object's end. The server holds
/// one chunk, shared.
struct Generated {
    head: Option<bytes::Bytes>,
    chunk: bytes::Bytes,
    /// Padding still to send (None: endless), then the object's end.
    left: Option<u64>,
    tail: Option<bytes::Bytes>,
}

impl Generated {
    const HEAD: &'static [u8] = br#"{"version": "yellow", "pad": ""#;
    const TAIL: &'static [u8] = br#""}"#;

    fn new(body: Body) -> Generated {
        let framing = (Generated::HEAD.len() + Generated::TAIL.len()) as u64;
        Generated {
            head: Some(bytes::Bytes::from_static(Generated::HEAD)),
            chunk: bytes::Bytes::from(vec![b'x'; 256 * 1024]),
            left: match body {
                Body::Endless => None,
                Body::Sized(n) => Some(n - framing),
            },
            tail: Some(bytes::Bytes::from_static(Generated::TAIL)),
        }
    }
}

impl hyper::body::Body for Generated {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Self::Error>>> {
        let next = match (self.head.take(), self.left) {
            (Some(head), _) => Some(head),
            (None, None) => Some(self.chunk.clone()),
            (None, Some(0)) => self.tail.take(),
            (None, Some(left)) => {
                let pad = self.chunk.slice(..self.chunk.len().min(left as usize));
                self.left = Some(left - pad.len() as u64);
                Some(pad)
            }
        };
        std::task::Poll::Ready(next.map(|data| Ok(hyper::body::Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        self.head.is_none() && self.left == Some(0) && self.tail.is_none()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        let pending = |b: &Option<bytes::Bytes>| b.as_ref().map_or(0, |b| b.len() as u64);
        match self.left {
            None => hyper::body::SizeHint::default(),
            Some(n) => {
                hyper::body::SizeHint::with_exact(pending(&self.head) + n + pending(&self.tail))
            }
        }
    }
}

/// A server on loopback answering every request (HTTP/1.1, or h2c with prior knowledge)
/// with a generated body that is huge or never ends; no `x-version` header, so the version
/// is in the body only.
fn hostile(rt: &tokio::runtime::Runtime, body: Body) -> SocketAddr {
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let address = listener.local_addr().unwrap();
    rt.spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let answer = hyper::service::service_fn(move |_| async move {
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(Generated::new(body)))
                });
                let _ = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .serve_connection(hyper_util::rt::TokioIo::new(stream), answer)
                .await;
            });
        }
    });
    address
}

/// Memory tests run one at a time: the peak they read is the process's.
static MEMORY: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `f` and returns how far the process's resident memory peaked above where it
/// stood before, in MB: the kernel's high-water mark (VmHWM) is reset to the current size
/// first (`/proc/self/clear_refs`), else read before and after.
#[cfg(target_os = "linux")]
fn peak_growth_mb<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let _one_at_a_time = MEMORY.lock().unwrap_or_else(|p| p.into_inner());
    let status = |field: &str| -> u64 {
        let text = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = text.lines().find(|l| l.starts_with(field)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    let before = if std::fs::write("/proc/self/clear_refs", "5").is_ok() {
        status("VmRSS:")
    } else {
        status("VmHWM:")
    };
    let out = f();
    (out, status("VmHWM:").saturating_sub(before) / 1024)
}

/// Elsewhere the memory is not measured.
#[cfg(not(target_os = "linux"))]
fn peak_growth_mb<T>(f: impl FnOnce() -> T) -> (T, u64) {
    (f(), 0)
}

/// Resident memory a load may add, whatever the bodies: a frame and a 64 KiB prefix per
/// connection, the runtimes and the report are a few MB (holding the bodies took GBs).
const MEMORY_BOUND_MB: u64 = 100;

#[test]
fn an_endless_body_ends_in_a_timeout_and_a_report_at_the_cost_of_a_frame() {
    let rt = servers();
    let endless = hostile(&rt, Body::Endless);
    let url = format!("http://{endless}/");
    for protocol in [&[][..], &["--http2"][..]] {
        let started = Instant::now();
        let ((code, out, err), grew) = peak_growth_mb(|| {
            load(
                &[
                    &[url.as_str()][..],
                    &["-n", "2", "-c", "2", "-t", "1s", "--format", "json"],
                    protocol,
                ]
                .concat(),
            )
        });
        assert_eq!(code, 0, "{out}{err}");
        let r = json(&out);
        let classes = accounted(&r);
        assert_eq!(classes, [("timeout".to_string(), 2)].into(), "{out}");
        assert!(
            r["body_bytes"].as_u64().unwrap() > 1 << 20,
            "the bodies were read as they came: {out}"
        );
        println!("{protocol:?}: peak memory grew {grew} MB");
        assert!(
            grew < MEMORY_BOUND_MB,
            "{protocol:?}: memory grew {grew} MB"
        );
        // A hang detector, not a timing assertion: each request gives up after 1 s.
        assert!(started.elapsed() < Duration::from_secs(60));
    }
}

#[test]
fn a_duration_cuts_a_body_in_progress_and_reports() {
    let rt = servers();
    let endless = hostile(&rt, Body::Endless);
    let ((code, out, err), grew) = peak_growth_mb(|| {
        load(&[
            &format!("http://{endless}/"),
            "-z",
            "1s",
            "-c",
            "3",
            "-t",
            "1h",
            "--format",
            "json",
        ])
    });
    assert_eq!(code, 0, "{out}{err}");
    let r = json(&out);
    let classes = accounted(&r);
    // The probe alone is in flight until the deadline; nothing starts after it.
    assert_eq!(classes, [("deadline".to_string(), 1)].into(), "{out}");
    assert!(
        r["elapsed_seconds"].as_f64().unwrap() < 30.0,
        "-z 1s ends the load, not the 1 h timeout: {out}"
    );
    println!("peak memory grew {grew} MB");
    assert!(grew < MEMORY_BOUND_MB, "memory grew {grew} MB");
    let (_, text, _) = load(&[&format!("http://{endless}/"), "-z", "300ms", "-c", "1"]);
    assert!(text.contains("cut at the -z deadline 1"), "{text}");
}

#[test]
fn huge_bodies_are_read_through_on_reused_connections_and_classified_by_their_start() {
    const SIZE: u64 = 200 << 20;
    let rt = servers();
    let huge = hostile(&rt, Body::Sized(SIZE));
    let url = format!("http://{huge}/");
    let ((code, out, err), grew) =
        peak_growth_mb(|| load(&[&url, "-n", "4", "-c", "2", "-t", "5m", "--format", "json"]));
    assert_eq!(code, 0, "{out}{err}");
    let r = json(&out);
    assert_eq!(accounted(&r), [("2xx".to_string(), 4)].into(), "{out}");
    // The default classifier finds the JSON field in the first bytes of a 200 MB body.
    assert_eq!(r["versions"][0]["version"], "yellow", "{out}");
    assert_eq!(r["versions"][0]["responses"], 4, "{out}");
    assert_eq!(r["body_bytes"].as_u64(), Some(4 * SIZE), "{out}");
    assert_eq!(
        r["connections_opened"], 2,
        "a body read to its end leaves its connection reusable: {out}"
    );
    println!("peak memory grew {grew} MB");
    assert!(grew < MEMORY_BOUND_MB, "memory grew {grew} MB");
    // So does a regular expression over the body.
    let (code, out, err) = load(&[
        &url,
        "-n",
        "1",
        "-c",
        "1",
        "-t",
        "5m",
        "--classify",
        r#"regex:"version": "(\w+)""#,
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(json(&out)["versions"][0]["version"], "yellow", "{out}");
}
