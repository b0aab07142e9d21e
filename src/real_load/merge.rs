//! `canarysim load merge`: the result files of a load sent from several places, judged as
//! the one load of their union. Counts and latency histograms are added (exact: a single
//! load of the same requests would have counted the same), and the connections' evidence on
//! the unit of randomisation is kept, so the verdict is the one `real_load::judge` gives a
//! single load. Before that, a chi-square test of homogeneity asks whether the shards saw
//! the same split: workers in different zones may reach gateway replicas that split
//! differently, and a sum of two different splits passes for neither. If they differ, the
//! report says so and judges each shard on its own.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{Expectations, INCONCLUSIVE_EXIT, LoadShape, judge};
use crate::load::http::HttpOutcome;
use crate::load::result_file::ResultFile;
use crate::load::tally::Tally;
use crate::outcome::{Agreement, AgreementFinding, MergeReport, ShardSummary};
use crate::verify::{self, Outcome, SplitUnit};

/// Adds the files up and judges them. Files of different URLs, canarysim versions,
/// protocols or classifiers, or the same shard twice, are refused: they are not one load.
pub fn merge(
    files: &[(String, ResultFile)],
    expect: Option<&Expectations>,
    confidence: f64,
    forced: Option<SplitUnit>,
) -> Result<MergeReport, String> {
    let (first_name, first) = files.first().ok_or("no result file to merge")?;
    for (name, f) in files {
        same_load(first_name, first, name, f)?;
    }
    let missing_shards = missing_shards(files)?;
    let tallies: Vec<Tally> = files
        .iter()
        .map(|(name, f)| {
            f.tally
                .to_tally()
                .map_err(|e| format!("{name}: tally: {e}"))
        })
        .collect::<Result<_, _>>()?;
    let mut union = Tally::default();
    for t in &tallies {
        union.merge(t.clone());
    }
    let shape = merged_shape(files);
    let merged = judge(
        &first.url,
        &shape,
        &merged_outcome(files, union),
        expect,
        forced,
    );
    let unit = merged.unit;
    let versions: Vec<String> = merged.versions.iter().map(|v| v.version.clone()).collect();
    let draws: Vec<Vec<u64>> = tallies
        .iter()
        .map(|t| {
            versions
                .iter()
                .map(|name| {
                    t.versions
                        .iter()
                        .find(|v| &v.version == name)
                        .map_or(0, |v| v.draws(unit))
                })
                .collect()
        })
        .collect();
    let agreement = agreement(&draws, unit, confidence);
    let per_shard = if agreement.shards_differ() {
        files
            .iter()
            .zip(&tallies)
            .map(|((_, f), t)| judge(&f.url, &f.load, &outcome_of(f, t.clone()), expect, forced))
            .collect()
    } else {
        Vec::new()
    };
    let shards = files
        .iter()
        .zip(&draws)
        .map(|((name, f), d)| ShardSummary {
            file: name.clone(),
            shard: f.shard.map(|s| format!("{}/{}", s.index, s.count)),
            address: f.address.clone(),
            sent: f.tally.sent,
            draws: versions.iter().cloned().zip(d.iter().copied()).collect(),
        })
        .collect();
    Ok(MergeReport {
        shards,
        missing_shards,
        agreement,
        merged,
        per_shard,
    })
}

/// `load`'s exit code for the merge: that of the verdict it stands on (the union's, or
/// when the shards differ the worst shard's).
pub fn exit_code(report: &MergeReport) -> u8 {
    match report.deciding_verdict().map(|(outcome, _)| outcome) {
        Some(Outcome::Fail) => 1,
        Some(Outcome::Inconclusive) => INCONCLUSIVE_EXIT,
        _ => 0,
    }
}

fn same_load(
    first_name: &str,
    first: &ResultFile,
    name: &str,
    f: &ResultFile,
) -> Result<(), String> {
    let differ = |what: &str, a: &str, b: &str| {
        Err(format!(
            "{name}: {what} {b:?}, but {first_name} has {a:?}: a merge adds up the shards of one load"
        ))
    };
    if f.url != first.url {
        return differ("URL", &first.url, &f.url);
    }
    if f.canarysim_version != first.canarysim_version {
        return differ(
            "canarysim version",
            &first.canarysim_version,
            &f.canarysim_version,
        );
    }
    if f.protocol != first.protocol {
        return differ("protocol", &first.protocol, &f.protocol);
    }
    if f.load.classify != first.load.classify {
        return differ("classifier", &first.load.classify, &f.load.classify);
    }
    if f.load.keepalive != first.load.keepalive {
        return Err(format!(
            "{name}: keep-alive is {}, but {first_name} has {}: a merge adds up the shards of one load",
            f.load.keepalive, first.load.keepalive
        ));
    }
    if f.load.until_decided {
        return Err(format!(
            "{name}: a load stopped by --until-decided decided on its own; it cannot be added to others"
        ));
    }
    Ok(())
}

/// The shard indexes no file brought; the same shard twice, or shards of loads split
/// differently, are refused.
fn missing_shards(files: &[(String, ResultFile)]) -> Result<Vec<u32>, String> {
    let mut seen: BTreeMap<u32, &str> = BTreeMap::new();
    let mut count = None;
    for (name, f) in files {
        let Some(shard) = f.shard else {
            continue;
        };
        match count {
            None => count = Some((shard.count, name.as_str())),
            Some((n, other)) if n != shard.count => {
                return Err(format!(
                    "{name}: shard {}/{}, but {other} is one of {n} shards",
                    shard.index, shard.count
                ));
            }
            _ => {}
        }
        if let Some(other) = seen.insert(shard.index, name) {
            return Err(format!(
                "{name}: shard {}/{} again ({other} is the same shard)",
                shard.index, shard.count
            ));
        }
    }
    Ok(count.map_or(Vec::new(), |(n, _)| {
        (0..n).filter(|i| !seen.contains_key(i)).collect()
    }))
}

/// The shards' flags together: their connections, rates and requests added.
fn merged_shape(files: &[(String, ResultFile)]) -> LoadShape {
    let shapes: Vec<&LoadShape> = files.iter().map(|(_, f)| &f.load).collect();
    let sum = |get: &dyn Fn(&LoadShape) -> Option<f64>| -> Option<f64> {
        shapes.iter().map(|s| get(s)).sum()
    };
    LoadShape {
        connections: shapes.iter().map(|s| s.connections).sum(),
        keepalive: shapes[0].keepalive,
        rate: sum(&|s| s.rate),
        classify: shapes[0].classify.clone(),
        requests: shapes.iter().map(|s| s.requests).sum(),
        until_decided: false,
    }
}

/// The union's outcome: from the first start to the last end, every address named.
fn merged_outcome(files: &[(String, ResultFile)], tally: Tally) -> HttpOutcome {
    let start = files.iter().map(|(_, f)| f.started_unix_ms).min();
    let end = files.iter().map(|(_, f)| f.ended_unix_ms).max();
    let longest = files
        .iter()
        .map(|(_, f)| f.elapsed_seconds)
        .fold(0.0, f64::max);
    let span = match (start, end) {
        (Some(s), Some(e)) if e > s => Duration::from_millis(e - s),
        _ => Duration::from_secs_f64(longest.max(0.0)),
    };
    let mut addresses: Vec<&str> = files.iter().map(|(_, f)| f.address.as_str()).collect();
    addresses.sort_unstable();
    addresses.dedup();
    let mut outcome = outcome_of(&files[0].1, tally);
    outcome.elapsed = span.max(Duration::from_secs_f64(longest.max(0.0)));
    outcome.address = addresses.join(", ");
    outcome
}

/// One file's outcome, as `load` had it (no sequential test: merged loads have none).
fn outcome_of(f: &ResultFile, tally: Tally) -> HttpOutcome {
    HttpOutcome {
        tally,
        elapsed: Duration::from_secs_f64(f.elapsed_seconds.max(0.0)),
        decided: None,
        undecided: "undecided",
        sequential_draws: 0,
        address: f.address.clone(),
        protocol: if f.protocol == "HTTP/2" {
            "HTTP/2"
        } else {
            "HTTP/1.1"
        },
    }
}

fn agreement(draws: &[Vec<u64>], unit: SplitUnit, confidence: f64) -> Agreement {
    let rows: Vec<&[u64]> = draws.iter().map(Vec::as_slice).collect();
    let test = verify::chi_square_homogeneity_of(&rows);
    let unit_word = match unit {
        SplitUnit::Request => "answers",
        other => other.plural(),
    };
    let (finding, explanation) = if draws.len() < 2 {
        (
            AgreementFinding::OneShard,
            "one file: nothing to compare".to_string(),
        )
    } else if test.dof == 0 {
        (
            AgreementFinding::SameSplit,
            format!("every shard's {unit_word} came from the same one version"),
        )
    } else if test.min_expected < 5.0 {
        (
            AgreementFinding::TooFewToTell,
            format!(
                "too few {unit_word} per shard and version to test whether the shards saw one split (smallest expected count {:.1}, the test needs 5): judged together",
                test.min_expected
            ),
        )
    } else if test.p_value < 1.0 - confidence {
        (
            AgreementFinding::DifferentSplits,
            format!(
                "the shards' {unit_word} per version differ more than chance allows (chi-square {:.1}, {} degrees of freedom, p = {:.1e}): the workers reached gateways that split differently, so each shard is judged on its own",
                test.statistic, test.dof, test.p_value
            ),
        )
    } else {
        (
            AgreementFinding::SameSplit,
            format!(
                "the shards' {unit_word} per version agree (chi-square {:.1}, {} degrees of freedom, p = {:.2}): judged as one load",
                test.statistic, test.dof, test.p_value
            ),
        )
    };
    Agreement {
        finding,
        unit,
        statistic: test.statistic,
        dof: test.dof,
        p_value: test.p_value,
        min_expected: test.min_expected,
        explanation,
    }
}
