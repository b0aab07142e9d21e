//! A load sent in shards (`load URL --shard I/N --out FILE`) and judged as one
//! (`load merge`): the merged verdict is the one a single load of the same requests gets;
//! shards that saw different splits are flagged and judged each on its own; files that are
//! not one load's shards are refused. And the arithmetic under it: adding tallies is exact,
//! in any order and grouping.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use canarysim::load::result_file::ResultFile;
use canarysim::load::tally::{Ending, Tally};
use canarysim::load::tally_record::TallyRecord;
use proptest::prelude::*;

use super::http_load::{a_fifth_of_connections_to_yellow, json, load, servers};
use crate::support;

/// A stand-in for a gateway that splits per request: answer `i` (counted over every
/// connection) names the version `pick(i)` gives, as a weighted round robin does.
fn per_request_front(
    rt: &tokio::runtime::Runtime,
    pick: impl Fn(u64) -> &'static str + Send + Sync + 'static,
) -> SocketAddr {
    use hyper::service::service_fn;
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let address = listener.local_addr().unwrap();
    let count = Arc::new(AtomicU64::new(0));
    let pick = Arc::new(pick);
    rt.spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (count, pick) = (count.clone(), pick.clone());
            tokio::spawn(async move {
                let service = service_fn(move |_req| {
                    let version = pick(count.fetch_add(1, Ordering::Relaxed));
                    async move {
                        Ok::<_, Infallible>(
                            hyper::Response::builder()
                                .header("x-version", version)
                                .body(http_body_util::Full::new(bytes::Bytes::from_static(b"{}")))
                                .unwrap(),
                        )
                    }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
    address
}

/// One in five answers from yellow: exactly 20 % of any run of five.
fn a_fifth(i: u64) -> &'static str {
    if i % 5 == 4 { "yellow" } else { "blue" }
}

/// One in four: 25 %.
fn a_quarter(i: u64) -> &'static str {
    if i % 4 == 3 { "yellow" } else { "blue" }
}

/// Sends shard `i` of `n` to `url` with `args`; its result file's path.
fn shard(dir: &Path, url: &str, i: u32, n: u32, args: &[&str]) -> String {
    let out = dir.join(format!("shard-{i}.json")).display().to_string();
    let shard = format!("{i}/{n}");
    let mut argv = vec![url, "--shard", &shard, "--out", &out];
    argv.extend_from_slice(args);
    let (code, stdout, err) = load(&argv);
    assert!(code == 0 || code == 3, "{stdout}{err}");
    out
}

fn merge(args: &[&str]) -> (u8, String, String) {
    use clap::Parser;
    let mut argv = vec!["canarysim", "load", "merge"];
    argv.extend_from_slice(args);
    canarysim::cli::execute(canarysim::cli::Cli::parse_from(argv))
}

#[test]
fn three_shards_of_a_fair_split_merge_to_the_single_loads_pass() {
    let rt = servers();
    let front = per_request_front(&rt, a_fifth);
    let url = format!("http://{front}/");
    let dir = support::temp_dir();
    let expect = ["--expect", "yellow=20%", "--within", "1"];
    let files: Vec<String> = (0..3)
        .map(|i| shard(dir.path(), &url, i, 3, &["-n", "12000", "-c", "4"]))
        .collect();
    let mut args: Vec<&str> = files.iter().map(String::as_str).collect();
    args.extend_from_slice(&expect);
    args.extend_from_slice(&["--format", "json"]);
    let (code, out, err) = merge(&args);
    assert_eq!(code, 0, "{out}{err}");
    let merged = json(&out);
    assert_eq!(merged["agreement"]["finding"], "same split", "{out}");
    assert_eq!(merged["per_shard"].as_array().unwrap().len(), 0);
    // A single load of the same 12,000 requests over the shards' 12 connections.
    let mut single = vec![url.as_str(), "-n", "12000", "-c", "12", "--format", "json"];
    single.extend_from_slice(&expect);
    let (single_code, single_out, _) = load(&single);
    let single = json(&single_out);
    assert_eq!(single_code, code);
    let m = &merged["merged"];
    for field in ["sent", "classes", "unit", "effective_n", "connections"] {
        assert_eq!(m[field], single[field], "{field}");
    }
    for field in ["outcome", "split"] {
        assert_eq!(m["verdict"][field], single["verdict"][field], "{field}");
    }
    let counts = |r: &serde_json::Value| -> Vec<(String, u64)> {
        r["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                let name = v["version"].as_str().unwrap().to_string();
                (name, v["responses"].as_u64().unwrap())
            })
            .collect()
    };
    assert_eq!(counts(m), counts(&single));
    assert_eq!(
        counts(m),
        [("blue".into(), 9_600), ("yellow".into(), 2_400)]
    );
    // Each shard alone (4,000 requests) cannot decide ±1 point; together they pass.
    let (alone, _, _) = load(&[&url, "-n", "4000", "-c", "4", "--expect", "yellow=20%"]);
    assert_eq!(alone, 3);
}

#[test]
fn shards_through_a_gateway_that_splits_differently_are_flagged_and_judged_apart() {
    let rt = servers();
    let fair = per_request_front(&rt, a_fifth);
    let biased = per_request_front(&rt, a_quarter);
    let dir = support::temp_dir();
    // One URL; the third worker's connections reach another gateway replica.
    let files: Vec<String> = (0..3)
        .map(|i| {
            let to = if i == 2 { biased } else { fair };
            let connect_to = format!("gateway.local:80:{to}");
            let args = ["-n", "36000", "-c", "4", "--connect-to", &connect_to];
            shard(dir.path(), "http://gateway.local/", i, 3, &args)
        })
        .collect();
    let mut args: Vec<&str> = files.iter().map(String::as_str).collect();
    args.extend_from_slice(&["--expect", "yellow=20%", "--format", "json"]);
    let (code, out, err) = merge(&args);
    let r = json(&out);
    assert_eq!(r["agreement"]["finding"], "different splits", "{out}{err}");
    let outcomes: Vec<&str> = r["per_shard"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["verdict"]["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["pass", "pass", "fail"]);
    assert_eq!(code, 1, "a shard's split is wrong");
    // The text says so before the merged figures, shows the union only for reference, and
    // ends on the worst shard's verdict.
    let mut args: Vec<&str> = files.iter().map(String::as_str).collect();
    args.extend_from_slice(&["--expect", "yellow=20%"]);
    let (_, text, _) = merge(&args);
    assert!(text.contains("shards: different splits"), "{text}");
    let verdicts: Vec<&str> = text.lines().filter(|l| l.starts_with("verdict:")).collect();
    assert_eq!(verdicts.len(), 4, "three shards' and the merge's: {text}");
    assert!(
        verdicts[3].starts_with("verdict: FAIL — the shards split differently"),
        "{text}"
    );
    assert!(
        text.contains("the union, were it one split (not the verdict: the shards differ):"),
        "{text}"
    );
}

#[test]
fn shards_through_a_per_connection_balancer_are_judged_on_all_their_connections() {
    let rt = servers();
    let (lb, _pods) = a_fifth_of_connections_to_yellow(&rt);
    let url = format!("http://{lb}/");
    let dir = support::temp_dir();
    let files: Vec<String> = (0..3)
        .map(|i| shard(dir.path(), &url, i, 3, &["-n", "1500", "-c", "10"]))
        .collect();
    let mut args: Vec<&str> = files.iter().map(String::as_str).collect();
    args.extend_from_slice(&["--expect", "yellow=20%", "--format", "json"]);
    let (code, out, err) = merge(&args);
    let r = json(&out);
    assert_eq!(r["merged"]["unit"], "connection", "{out}{err}");
    assert_eq!(r["merged"]["unit_evidence"]["finding"], "per connection");
    assert_eq!(
        r["merged"]["effective_n"], 30,
        "n = every shard's connections"
    );
    assert_eq!(r["agreement"]["unit"], "connection");
    // 30 connections cannot show ±1 point: the data cannot tell, which is no pass.
    assert_eq!(code, 3);
}

#[test]
fn files_that_are_not_one_loads_shards_are_refused_with_the_reason() {
    let rt = servers();
    let front = per_request_front(&rt, a_fifth);
    let dir = support::temp_dir();
    let url = format!("http://{front}/");
    let a = shard(dir.path(), &url, 0, 2, &["-n", "100", "-c", "1"]);
    let twice = merge(&[&a, &a]);
    assert_eq!(twice.0, 2);
    assert!(twice.2.contains("shard 0/2 again"), "{}", twice.2);
    let other_dir = support::temp_dir();
    let b = shard(
        other_dir.path(),
        "http://elsewhere.local/",
        1,
        2,
        &{
            let connect_to = format!("elsewhere.local:80:{front}");
            ["-n", "100", "-c", "1", "--connect-to", &connect_to].map(String::from)
        }
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>(),
    );
    let (code, _, err) = merge(&[&a, &b]);
    assert_eq!(code, 2);
    assert!(err.contains("URL \"http://elsewhere.local/\""), "{err}");
    // A broken file: where, and what was expected.
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{\n  \"format\": 3\n}\n").unwrap();
    let (code, _, err) = merge(&[broken.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("broken.json:2:13: invalid type"), "{err}");
    // A shard's flags are checked before any request: its index as the flag is read...
    let refused = <canarysim::cli::Cli as clap::Parser>::try_parse_from([
        "canarysim",
        "load",
        &url,
        "--shard",
        "3/3",
    ])
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(
        refused.contains("invalid value '3/3' for '--shard <I/N>': expected I/N"),
        "{refused}"
    );
    // ...and with the other flags.
    for (flags, says) in [
        (
            vec!["-n", "2", "--shard", "2/3"],
            "fewer requests than the 3 shards",
        ),
        (
            vec![
                "--shard",
                "0/2",
                "--until-decided",
                "--expect",
                "yellow=20%",
            ],
            "cannot go with --shard",
        ),
    ] {
        let mut argv = vec![url.as_str()];
        argv.extend(flags);
        let (code, _, err) = load(&argv);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(says), "{err}");
    }
}

#[test]
fn a_result_file_follows_its_committed_schema() {
    let schema_file = Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/load-result.schema.json");
    support::assert_committed_as_generated(
        &schema_file,
        &(serde_json::to_string_pretty(&ResultFile::json_schema()).unwrap() + "\n"),
        "cargo test --test http_load -- shards::",
    );
    let rt = servers();
    let front = per_request_front(&rt, a_fifth);
    let dir = support::temp_dir();
    let file = shard(dir.path(), &format!("http://{front}/"), 1, 2, &["-n", "50"]);
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&schema_file).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&written)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(
        written["shard"],
        serde_json::json!({"index": 1, "count": 2})
    );
    assert_eq!(
        written["tally"]["sent"], 25,
        "shard 1 of 2 sends its half of -n 50"
    );
    let mut broken = written.clone();
    broken["tally"].as_object_mut().unwrap().remove("latency");
    assert!(!validator.is_valid(&broken));
}

/// One request's end as a test draws it.
fn ending(k: u8) -> (Ending, Option<&'static str>) {
    match k % 8 {
        0 => (Ending::Reset, None),
        1 => (Ending::Status(503), Some("yellow")),
        2 => (Ending::Status(200), None),
        3 | 4 => (Ending::Status(200), Some("yellow")),
        _ => (Ending::Status(200), Some("blue")),
    }
}

/// A tally of `draws`, a new connection where `new_connection` says.
fn tally_of(draws: &[(u8, bool, u16)]) -> Tally {
    let mut t = Tally::default();
    let mut conn = t.opened();
    for &(k, new_connection, latency) in draws {
        if new_connection {
            t.closed(std::mem::take(&mut conn));
            conn = t.opened();
        }
        let (end, version) = ending(k);
        t.record(Some(&mut conn), end, version, u64::from(latency));
    }
    t.closed(conn);
    t
}

fn merged(records: &[TallyRecord]) -> TallyRecord {
    let mut t = Tally::default();
    for r in records {
        t.merge(r.to_tally().unwrap());
    }
    TallyRecord::of(&t)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, rng_seed: proptest::test_runner::RngSeed::Fixed(31), ..ProptestConfig::default() })]

    /// Shards' records, read back and added in any order or grouping, count what the
    /// whole load's tally counts; sent is the sum of the classes.
    #[test]
    fn merging_is_exact_in_any_order_and_grouping(
        a in prop::collection::vec((any::<u8>(), any::<bool>(), 1u16..60_000), 0..300),
        b in prop::collection::vec((any::<u8>(), any::<bool>(), 1u16..60_000), 0..300),
        c in prop::collection::vec((any::<u8>(), any::<bool>(), 1u16..60_000), 0..300),
    ) {
        let (ta, tb, tc) = (tally_of(&a), tally_of(&b), tally_of(&c));
        let (ra, rb, rc) = (TallyRecord::of(&ta), TallyRecord::of(&tb), TallyRecord::of(&tc));
        let abc = merged(&[ra.clone(), rb.clone(), rc.clone()]);
        let mut whole = ta.clone();
        whole.merge(tb);
        whole.merge(tc);
        let whole_t = whole;
        // Versions are listed in the order first seen, which the order of merging moves:
        // compare them as sets.
        let sorted = |mut r: TallyRecord| { r.versions.sort_by(|x, y| x.version.cmp(&y.version)); r };
        prop_assert_eq!(sorted(abc.clone()), sorted(TallyRecord::of(&whole_t)));
        prop_assert_eq!(sorted(merged(&[rc.clone(), ra.clone(), rb.clone()])), sorted(abc.clone()));
        let ab = merged(&[ra, rb]);
        prop_assert_eq!(sorted(merged(&[ab, rc])), sorted(abc.clone()));
        prop_assert_eq!(abc.sent, abc.classes.total());
        prop_assert_eq!(abc.sent, (a.len() + b.len() + c.len()) as u64);
    }
}

#[test]
fn a_coordinator_releases_three_workers_together_and_judges_them_as_merge_does() {
    use clap::Parser;
    let rt = servers();
    let front = per_request_front(&rt, a_fifth);
    let url = format!("http://{front}/");
    let dir = support::temp_dir();
    let listen = format!("127.0.0.1:{}", support::free_port());
    let coordinator = {
        let listen = listen.clone();
        std::thread::spawn(move || {
            canarysim::cli::execute(canarysim::cli::Cli::parse_from([
                "canarysim",
                "load",
                "coordinate",
                "--expect-workers",
                "3",
                "--listen",
                &listen,
                "--timeout",
                "120s",
                "--expect",
                "yellow=20%",
                "--format",
                "json",
            ]))
        })
    };
    let coordinator_url = format!("http://{listen}");
    // Each worker waits for the others at the coordinator, then sends; a worker started
    // before the coordinator listens would not reach it, so they start once it does.
    while std::net::TcpStream::connect(&listen).is_err() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let worker = |i: u32| {
        let (url, coordinator_url) = (url.clone(), coordinator_url.clone());
        let out = dir.path().join(format!("worker-{i}.json"));
        std::thread::spawn(move || {
            let (shard, out_path) = (format!("{i}/3"), out.display().to_string());
            load(&[
                &url,
                "-n",
                "12000",
                "-c",
                "4",
                "--shard",
                &shard,
                "--out",
                &out_path,
                "--coordinator",
                &coordinator_url,
            ])
        })
    };
    let mut workers = vec![worker(0), worker(1)];
    // The third comes later: the first two must not send before it is ready.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let third_started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    workers.push(worker(2));
    for worker in workers {
        let (code, out, err) = worker.join().unwrap();
        assert_eq!(code, 0, "a worker exits 0 once delivered: {out}{err}");
    }
    let (code, out, err) = coordinator.join().unwrap();
    assert_eq!(code, 0, "{out}{err}");
    let coordinated = json(&out);
    assert_eq!(coordinated["merged"]["sent"], 12_000, "{out}");
    // `load merge` of the same results gives the same verdict and exit code.
    let files = support::worker_files(dir.path(), 3);
    let mut args: Vec<&str> = files.iter().map(String::as_str).collect();
    args.extend_from_slice(&["--expect", "yellow=20%", "--format", "json"]);
    for file in &files {
        let written: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        let started = written["started_unix_ms"].as_u64().unwrap();
        assert!(
            started >= third_started,
            "{file} started before every worker was ready"
        );
    }
    let (merge_code, merge_out, _) = merge(&args);
    let merged = json(&merge_out);
    assert_eq!(merge_code, code);
    assert_eq!(merged["merged"], coordinated["merged"]);
    assert_eq!(merged["agreement"], coordinated["agreement"]);
}

#[test]
fn a_coordinator_without_every_worker_says_who_is_missing_and_gives_no_verdict() {
    use clap::Parser;
    let listen = format!("127.0.0.1:{}", support::free_port());
    let (code, out, err) = canarysim::cli::execute(canarysim::cli::Cli::parse_from([
        "canarysim",
        "load",
        "coordinate",
        "--expect-workers",
        "2",
        "--listen",
        &listen,
        "--timeout",
        "300ms",
    ]));
    assert_eq!(code, 3, "{out}{err}");
    assert!(
        err.contains("0 of 2 workers delivered within 300ms; missing: 0, 1"),
        "{err}"
    );
    // A worker whose coordinator is gone is an error, not a pass.
    let (code, _, err) = load(&[
        "http://127.0.0.1:9/",
        "-n",
        "10",
        "--shard",
        "0/2",
        "--coordinator",
        &format!("http://{listen}"),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot reach the coordinator"), "{err}");
}

/// `canarysim load job …` with `args`; its exit code and output.
fn job(args: &[&str]) -> (u8, String, String) {
    use clap::Parser;
    let mut argv = vec!["canarysim", "load", "job"];
    argv.extend_from_slice(args);
    canarysim::cli::execute(canarysim::cli::Cli::parse_from(argv))
}

/// A YAML stream's documents.
fn documents(text: &str) -> Vec<serde_json::Value> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(text)
        .map(|d| serde_json::to_value(serde_yaml::Value::deserialize(d).unwrap()).unwrap())
        .collect()
}

#[test]
fn load_job_prints_an_indexed_job_of_workers_and_a_coordinator_that_lint_reads() {
    let load_flags = [
        "--",
        "http://gateway.example/",
        "-n",
        "60000",
        "-c",
        "8",
        "--expect",
        "yellow=20%",
    ];
    let mut args = vec!["--image", "registry.example/canarysim:1", "--name", "split"];
    args.extend_from_slice(&load_flags);
    let (code, out, err) = job(&args);
    assert_eq!(code, 0, "{err}");
    let docs = documents(&out);
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["Service", "Job", "Job"], "{out}");
    let workers = &docs[2]["spec"];
    assert_eq!(workers["completionMode"], "Indexed");
    assert_eq!(
        (
            workers["completions"].as_u64(),
            workers["parallelism"].as_u64()
        ),
        (Some(3), Some(3))
    );
    let worker_args = workers["template"]["spec"]["containers"][0]["args"].to_string();
    for part in [
        "\"http://gateway.example/\"",
        "\"--shard\",\"$(SHARD_INDEX)/3\"",
        "\"--coordinator\",\"http://split-coordinator:8080\"",
    ] {
        assert!(worker_args.contains(part), "{part} in {worker_args}");
    }
    let coordinator_args = docs[1]["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    for part in [
        "\"--expect-workers\",\"3\"",
        "\"--expect\",\"yellow=20%\"",
        "\"0.0.0.0:8080\"",
    ] {
        assert!(
            coordinator_args.contains(part),
            "{part} in {coordinator_args}"
        );
    }
    assert_eq!(docs[0]["metadata"]["name"], "split-coordinator");
    // The AnalysisTemplate form: the two Jobs as its metrics, valid to canarysim lint.
    let mut args = vec![
        "--image",
        "registry.example/canarysim:1",
        "--analysis-template",
    ];
    args.extend_from_slice(&load_flags);
    let (code, out, _) = job(&args);
    assert_eq!(code, 0);
    let docs = documents(&out);
    assert_eq!(docs[1]["kind"], "AnalysisTemplate");
    let metrics: Vec<&str> = docs[1]["spec"]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(metrics, ["split", "load"]);
    let dir = support::temp_dir();
    let file = dir.path().join("analysis.yaml");
    std::fs::write(&file, &out).unwrap();
    use clap::Parser;
    let (code, lint_out, lint_err) = canarysim::cli::execute(canarysim::cli::Cli::parse_from([
        "canarysim",
        "lint",
        file.to_str().unwrap(),
    ]));
    assert_eq!(code, 0, "{lint_out}{lint_err}");
    // What the job sets itself, or a load that cannot be split so, is refused.
    for (flags, says) in [
        (
            vec!["--", "http://gw/", "-n", "10", "--shard", "0/2"],
            "the job's to set",
        ),
        (
            vec!["--parallelism", "4", "--", "http://gw/", "-n", "3"],
            "fewer requests than the 4 shards",
        ),
        (vec!["--", "not a url", "-n", "10"], "not a url"),
    ] {
        let mut args = vec!["--image", "x"];
        args.extend(flags);
        let (code, _, err) = job(&args);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(says), "{says} in {err}");
    }
}
