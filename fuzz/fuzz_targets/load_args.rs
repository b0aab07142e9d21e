//! `canarysim load`'s argument handling, structure-aware: argument lists built from its
//! flags with any values (numbers, durations, shares, headers, free text), parsed as the
//! binary parses them and checked as before a load starts. Never a panic; and a load the
//! checks accept is one the load's clock arithmetic can run (its deadline, its timeout and
//! an open loop's schedule all fit), since those once panicked (`-z 5000000000000000h`,
//! `-q 1e-300`).
#![no_main]

use std::time::{Duration, Instant};

use canarysim::cli::{Cli, Command, plan_load};
use clap::Parser;
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;

const FLAGS: &[&str] = &[
    "-n",
    "-z",
    "-c",
    "-q",
    "--http2",
    "--disable-keepalive",
    "-m",
    "-H",
    "--host",
    "-t",
    "--insecure",
    "--cacert",
    "--sni",
    "--connect-to",
    "--classify",
    "--expect",
    "--within",
    "--confidence",
    "--until-decided",
    "--unit",
    "--format",
    "--quiet",
];
const UNITS: &[&str] = &["ns", "us", "ms", "s", "m", "h", "d", "w", "y", ""];
const URLS: &[&str] = &[
    "http://127.0.0.1:9/",
    "https://rollouts-demo.local/path?q=1",
    "http://[::1]:8080",
    "ftp://x/",
    "",
];

#[derive(Arbitrary, Debug)]
enum Value {
    Absent,
    Text(String),
    Count(u64),
    Signed(i64),
    Float(f64),
    Duration(u64, u8),
    Share(String, f64),
    Header(String, String),
}

#[derive(Arbitrary, Debug)]
struct Args {
    url: Result<u8, String>,
    flags: Vec<(u8, Value)>,
}

fuzz_target!(|input: Args| {
    let mut argv = vec!["canarysim".to_string(), "load".to_string()];
    argv.push(match input.url {
        Ok(i) => URLS[usize::from(i) % URLS.len()].to_string(),
        Err(text) => text,
    });
    for (flag, value) in input.flags.into_iter().take(24) {
        argv.push(FLAGS[usize::from(flag) % FLAGS.len()].to_string());
        match value {
            Value::Absent => {}
            Value::Text(t) => argv.push(t),
            Value::Count(n) => argv.push(n.to_string()),
            Value::Signed(n) => argv.push(n.to_string()),
            Value::Float(f) => argv.push(f.to_string()),
            Value::Duration(n, u) => {
                argv.push(format!("{n}{}", UNITS[usize::from(u) % UNITS.len()]))
            }
            Value::Share(v, f) => argv.push(format!("{v}={f}%")),
            Value::Header(k, v) => argv.push(format!("{k}: {v}")),
        }
    }
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
    let load = planned.load;
    let now = Instant::now();
    if let Some(d) = load.extent.duration() {
        assert!(now.checked_add(d).is_some(), "deadline overflows: {d:?}");
    }
    assert!(now.checked_add(load.timeout).is_some(), "timeout overflows");
    if let Some(rate) = load.traffic.arrival.rate() {
        // The open loop's last intended send, as its schedule computes it.
        let last = match (load.extent.requests(), load.extent.duration()) {
            (_, Some(d)) => d.as_secs_f64(),
            (Some(n), None) => n as f64 / rate,
            (None, None) => unreachable!("a load without -n or -z was accepted"),
        };
        assert!(
            Duration::try_from_secs_f64(last).is_ok_and(|d| now.checked_add(d).is_some()),
            "open-loop schedule overflows: rate {rate}"
        );
    }
});
