//! `canarysim load` against a real gateway: what the real load observed (`load::http`),
//! judged by `verify` as a scenario's `expect_split` is judged, as report data (`outcome`).
//! The unit of randomisation is measured from the connections, not assumed.

use crate::load::http::HttpOutcome;
pub use crate::load::shape::LoadShape;
use crate::load::tally::UnitFinding;
use crate::outcome::{ExpectedShare, HttpLoadReport, HttpVerdict, UnitReport, VersionReport};
use crate::verify::{self, Outcome, SplitUnit};

pub mod coordinator;
pub mod job;
pub mod merge;

/// `canarysim load`'s exit code when the data cannot decide (0 pass, 1 fail, 2 bad input);
/// `watch` exits with it too.
pub const INCONCLUSIVE_EXIT: u8 = 3;

/// `--expect VALUE=SHARE` (repeatable), `--within` and `--confidence`.
#[derive(Debug, Clone, PartialEq)]
pub struct Expectations {
    /// Version and expected share (0..1), in the order given.
    pub shares: Vec<(String, f64)>,
    /// Points either side of each expected share.
    pub within: f64,
    /// 0..1.
    pub confidence: f64,
}

/// `VALUE=SHARE` with SHARE as `20%`, `20` or `0.2`.
pub fn parse_expect(s: &str) -> Result<(String, f64), String> {
    let expected = || format!("--expect {s:?}: expected VALUE=SHARE, e.g. yellow=20%");
    let (value, share) = s.rsplit_once('=').ok_or_else(expected)?;
    if value.is_empty() {
        return Err(expected());
    }
    let share = share.trim();
    let number: f64 = share
        .trim_end_matches('%')
        .parse()
        .map_err(|_| expected())?;
    let fraction = if share.ends_with('%') || number > 1.0 {
        number / 100.0
    } else {
        number
    };
    if !(0.0..=1.0).contains(&fraction) {
        return Err(format!(
            "--expect {s:?}: a share lies between 0 % and 100 %"
        ));
    }
    Ok((value.to_string(), fraction))
}

// Long: the report's figures, the verdict and the unit's explanation, in the order the report holds
// them.
/// The report of a finished real load, with the verdict when expectations were given.
pub fn judge(
    url: &str,
    load: &LoadShape,
    outcome: &HttpOutcome,
    expect: Option<&Expectations>,
    forced_unit: Option<SplitUnit>,
) -> HttpLoadReport {
    let t = &outcome.tally;
    let evidence = t.unit_evidence();
    let unit = evidence.unit(forced_unit);
    let classified = t.classified();
    let effective_n: u64 = t.versions.iter().map(|v| v.draws(unit)).sum();
    let mut versions: Vec<VersionReport> = t
        .versions
        .iter()
        .map(|v| VersionReport {
            lost: Some(v.lost),
            ..VersionReport::of(v, unit, classified, effective_n)
        })
        .collect();
    versions.sort_by(|a, b| {
        b.responses
            .cmp(&a.responses)
            .then(a.version.cmp(&b.version))
    });
    let sequential = load
        .until_decided
        .then(|| outcome.sequential(load.requests));
    let verdict = expect.map(|e| {
        // A real gateway's answers carry a version only: a name is the version read.
        let (names, split) = crate::load::judge_split(
            &t.versions,
            unit,
            classified,
            &e.shares,
            |v, name| v.version == name,
            e.within,
            e.confidence,
        );
        // With --until-decided the sequential test, made to stop early, decides; a
        // fixed-sample interval at its stopping point is shown, not used.
        let (verdict_outcome, decided_by) = match &sequential {
            Some(q) => (
                match q.decision.as_str() {
                    "pass" => Outcome::Pass,
                    "fail" => Outcome::Fail,
                    _ => Outcome::Inconclusive,
                },
                "sequential test",
            ),
            None => (split.outcome, "interval"),
        };
        let advice = if verdict_outcome == Outcome::Inconclusive {
            inconclusive_advice(load, e, &split)
        } else {
            String::new()
        };
        HttpVerdict {
            outcome: verdict_outcome,
            passes: verdict_outcome == Outcome::Pass,
            decided_by: decided_by.to_string(),
            advice,
            expected: names
                .into_iter()
                .map(|(version, share)| ExpectedShare { version, share })
                .collect(),
            split,
        }
    });
    let finding = match evidence.finding {
        UnitFinding::PerRequest | UnitFinding::OneAnswerPerConnection => "per request",
        UnitFinding::PerConnection => "per connection",
        UnitFinding::Undetermined => "undetermined",
    };
    let explanation = match evidence.finding {
        UnitFinding::PerConnection => format!(
            "every one of the {} connections that carried two or more answers was answered by one version only (chance if each request were routed on its own: {:.1e}): the gateway chooses per connection (an L4 balancer, HAProxy in TCP mode, kube-proxy), so each connection is one draw",
            evidence.multi_request_connections, evidence.chance_if_per_request
        ),
        UnitFinding::Undetermined if t.versions.len() < 2 => format!(
            "only {} answered, on {} connection(s) that carried two or more answers: a gateway that picks per connection would look the same, so each connection is one draw (n = {effective_n} connections); --disable-keepalive (each request a connection of its own) or more connections (-c) give more draws",
            t.versions
                .first()
                .map_or("one version", |v| v.version.as_str()),
            evidence.multi_request_connections,
        ),
        UnitFinding::Undetermined => format!(
            "each of the {} connection(s) that carried two or more answers saw one version, which may be chance ({:.2}) or a gateway that picks per connection: judged per connection (n = {effective_n} connections)",
            evidence.multi_request_connections, evidence.chance_if_per_request
        ),
        UnitFinding::OneAnswerPerConnection => {
            "no connection carried two answers (no keep-alive): each request is a draw".to_string()
        }
        UnitFinding::PerRequest => format!(
            "{} of {} connections carrying two or more answers saw more than one version: the gateway chooses per request",
            evidence.multi_request_connections - evidence.single_version_connections,
            evidence.multi_request_connections
        ),
    };
    let secs = outcome.elapsed.as_secs_f64();
    HttpLoadReport {
        url: url.to_string(),
        address: outcome.address.clone(),
        protocol: outcome.protocol.to_string(),
        connections: load.connections,
        keepalive: load.keepalive,
        rate: load.rate,
        classify: load.classify.clone(),
        elapsed_seconds: secs,
        throughput: if secs > 0.0 {
            t.sent as f64 / secs
        } else {
            0.0
        },
        sent: t.sent,
        classes: t.classes.clone(),
        unclassified: t.unclassified,
        connections_opened: t.connections,
        body_bytes: t.body_bytes,
        unit,
        unit_evidence: UnitReport {
            finding: finding.to_string(),
            forced: forced_unit.is_some(),
            multi_request_connections: evidence.multi_request_connections,
            single_version_connections: evidence.single_version_connections,
            chance_if_per_request: evidence.chance_if_per_request,
            explanation,
        },
        effective_n,
        versions,
        latency: t.latency.summary(),
        verdict,
        sequential,
    }
}

/// What would decide an inconclusive verdict: more draws of the unit in force (about how
/// many, if the shares held), and for keep-alive connections judged one draw each, more
/// connections or none kept alive.
fn inconclusive_advice(load: &LoadShape, e: &Expectations, split: &verify::SplitVerdict) -> String {
    let mut advice = Vec::new();
    if let (SplitUnit::Request, Some(total)) = (split.unit, split.units_to_decide) {
        advice.push(format!("-n {total}"));
    }
    if split.unit == SplitUnit::Connection && load.keepalive {
        advice.push(format!(
            "--disable-keepalive makes every request a connection, so a draw, of its own (or raise -c from {})",
            load.connections
        ));
    }
    if let Some((_, share)) = e.shares.first() {
        advice.push(format!(
            "`canarysim plan {}% --within {} --confidence {}% --power 99%` gives the size that decides with a 99 % chance",
            share * 100.0,
            e.within,
            e.confidence * 100.0
        ));
    }
    advice.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expect_reads_percent_and_fraction() {
        assert_eq!(parse_expect("yellow=20%").unwrap(), ("yellow".into(), 0.2));
        assert_eq!(parse_expect("yellow=20").unwrap(), ("yellow".into(), 0.2));
        assert_eq!(parse_expect("a=b=0.25").unwrap(), ("a=b".into(), 0.25));
        for bad in ["yellow", "=20%", "yellow=x", "yellow=120%"] {
            assert!(parse_expect(bad).unwrap_err().contains(bad));
        }
    }
}
