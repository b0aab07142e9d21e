//! `canarysim load`'s response handling, structure-aware: any sequence of connections
//! opened and closed and of requests ending in any way (any status, any `--classify`
//! against any headers and body, whole or its first bytes only, refused, reset, timeout,
//! protocol error, cut at the deadline), judged against any `--expect`, `--within`,
//! `--confidence` and `--unit`, and rendered as text and JSON. Never a panic, and every
//! request in exactly one class (sent = the sum of the classes).
#![no_main]

use std::time::Duration;

use canarysim::cli::{Cli, Command, plan_load};
use canarysim::load::http::HttpOutcome;
use canarysim::load::tally::{Connection, Ending, Tally};
use canarysim::verify::SplitUnit;
use clap::Parser;
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Event {
    Open,
    Answer {
        connection: Option<u8>,
        status: u16,
        header: Option<String>,
        body: Vec<u8>,
        /// The body is the first bytes of a longer one.
        cut: bool,
        latency_us: u32,
    },
    Fail {
        connection: Option<u8>,
        kind: u8,
    },
    Close(u8),
}

#[derive(Arbitrary, Debug)]
struct Input {
    classify: Option<String>,
    expect: Vec<(String, f64)>,
    within: f64,
    confidence: f64,
    unit: Option<bool>,
    events: Vec<Event>,
}

fuzz_target!(|input: Input| {
    let mut argv: Vec<String> = ["canarysim", "load", "http://127.0.0.1:9/", "-n", "1"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if let Some(c) = &input.classify {
        argv.push(format!("--classify={c}"));
    }
    for (version, share) in input.expect.iter().take(4) {
        argv.push(format!("--expect={version}={share}%"));
    }
    argv.push(format!("--within={}", input.within));
    argv.push(format!("--confidence={}", input.confidence));
    let Ok(cli) = Cli::try_parse_from(argv) else {
        return;
    };
    let Command::Load(command) = cli.command else {
        return;
    };
    let Some(args) = command.load else {
        return;
    };
    let Ok(planned) = plan_load(&args) else {
        return;
    };
    let classifier = &planned.load.classifier;
    let mut tally = Tally::default();
    let mut open: Vec<Connection> = Vec::new();
    for event in input.events.into_iter().take(2000) {
        match event {
            Event::Open => open.push(tally.opened()),
            Event::Answer {
                connection,
                status,
                header,
                body,
                cut,
                latency_us,
            } => {
                let version = classifier.version(
                    |name| (name == "x-version").then_some(header.as_deref()).flatten(),
                    &body,
                    !cut,
                );
                let n = open.len();
                let conn = connection
                    .filter(|_| n > 0)
                    .map(|c| &mut open[usize::from(c) % n]);
                tally.record(
                    conn,
                    Ending::Status(status),
                    version.as_deref(),
                    u64::from(latency_us),
                );
            }
            Event::Fail { connection, kind } => {
                let ending = match kind % 5 {
                    0 => Ending::Refused,
                    1 => Ending::Reset,
                    2 => Ending::Timeout,
                    3 => Ending::Protocol,
                    _ => Ending::Deadline,
                };
                let n = open.len();
                let conn = connection
                    .filter(|_| n > 0)
                    .map(|c| &mut open[usize::from(c) % n]);
                tally.record(conn, ending, None, 0);
            }
            Event::Close(c) if !open.is_empty() => {
                let i = usize::from(c) % open.len();
                tally.closed(open.swap_remove(i));
            }
            Event::Close(_) => {}
        }
    }
    for conn in open {
        tally.closed(conn);
    }
    assert_eq!(
        tally.sent,
        tally.classes.total(),
        "sent = the sum of the classes"
    );
    let outcome = HttpOutcome {
        tally,
        elapsed: Duration::from_millis(1500),
        decided: None,
        undecided: "inconclusive",
        sequential_draws: 0,
        address: "127.0.0.1:9".into(),
        protocol: "HTTP/1.1",
    };
    let forced = input.unit.map(|per_request| {
        if per_request {
            SplitUnit::Request
        } else {
            SplitUnit::Connection
        }
    });
    let report = canarysim::real_load::judge(
        &args.url,
        &canarysim::real_load::LoadShape::of(&planned.load),
        &outcome,
        planned.expectations.as_ref(),
        forced,
    );
    let _ = canarysim::report::text::http_load(&report);
    let json = serde_json::to_value(&report).expect("the report serialises");
    assert_eq!(json["sent"], outcome.tally.sent);
    // A pass needs every interval inside the tolerance; a fail one wholly outside.
    if let Some(v) = &report.verdict {
        let arms = &v.split.arms;
        match v.outcome {
            canarysim::verify::Outcome::Pass => assert!(arms.iter().all(|a| a.inside)),
            canarysim::verify::Outcome::Fail => assert!(arms.iter().any(|a| a.outside)),
            canarysim::verify::Outcome::Inconclusive => {}
        }
    }
});
