//! What a load step observed, as a report, and the `expect_split` verdict on it. The
//! statistics are `verify`'s; this module only chooses what to compare.

use super::format::ExpectSplit;
use crate::endpoints::Role;
use crate::load::{LoadResult, SplitUnit};
pub use crate::outcome::{LoadReport, RoleShare, VersionReport};
use crate::verify::{self, Outcome, SplitVerdict};

/// Effective sample size: answered requests, or connections when each connection chose,
/// or clients when each client drew.
pub fn effective_n(r: &LoadResult) -> u64 {
    r.arms.iter().map(|a| a.draws(r.unit)).sum()
}

pub fn load_report(r: &LoadResult) -> LoadReport {
    let n_eff = effective_n(r);
    let versions = r
        .arms
        .iter()
        .map(|a| {
            let (pod_answers, pod_errors) = r
                .pods
                .iter()
                .filter(|p| p.role == a.role && p.version == a.version)
                .fold((0, 0), |(n, e), p| (n + p.responses, e + p.errors));
            VersionReport {
                pod_answers,
                pod_errors,
                ..VersionReport::of(a, r.unit, r.answered, n_eff)
            }
        })
        .collect();
    let fit = (!r.configured.is_empty() && n_eff > 0).then(|| {
        let observed: Vec<u64> = r
            .configured
            .iter()
            .map(|(role, _)| {
                r.arms
                    .iter()
                    .filter(|a| a.role == *role)
                    .map(|a| a.draws(r.unit))
                    .sum::<u64>()
            })
            .collect();
        let shares: Vec<f64> = r.configured.iter().map(|(_, s)| *s).collect();
        verify::chi_square_gof(&observed, &shares)
    });
    let latencies = |role: Role| {
        let mut all = verify::LatencyRecorder::new();
        for a in r.arms.iter().filter(|a| a.role == role) {
            all.merge(&a.latency);
        }
        all
    };
    let (canary, stable) = (latencies(Role::Canary), latencies(Role::Stable));
    let latency_comparison = (canary.count() >= 20 && stable.count() >= 20)
        .then(|| verify::mann_whitney_recorded(&canary, &stable));
    LoadReport {
        path: r.path.clone(),
        unit: r.unit,
        clients_switched: (r.unit == SplitUnit::Client).then_some(r.clients_switched),
        effective_n: n_eff,
        sent: r.sent,
        answered: r.answered,
        not_found: r.not_found,
        no_healthy_upstream: r.no_healthy_upstream,
        unresolved_backend: r.unresolved_backend,
        refused: r.refused,
        upstream_failed: r.upstream_failed,
        fault_aborted: r.fault_aborted,
        timed_out: r.timed_out,
        retries: r.retries,
        connections: r.connections_opened,
        started: r.started.to_string(),
        ended: r.ended.to_string(),
        versions,
        pods: r.pods.clone(),
        configured: r
            .configured
            .iter()
            .map(|(role, share)| RoleShare {
                role: role.as_str().to_string(),
                share: *share,
            })
            .collect(),
        fit,
        latency_comparison,
        sequential: r.sequential.clone(),
        capped: r.capped.clone(),
    }
}

/// The outcomes an `expect_split` accepts: `accept`, else the older `verdict` (`fail`:
/// not shown within tolerance, fail or inconclusive), else pass only.
fn accepted_outcomes(e: &ExpectSplit) -> Vec<Outcome> {
    match (&e.accept, e.verdict) {
        (Some(accept), _) => accept.to_vec(),
        (None, Some(super::format::VerdictExpect::Fail)) => {
            vec![Outcome::Fail, Outcome::Inconclusive]
        }
        _ => vec![Outcome::Pass],
    }
}

/// `expect_split` on the last load: the outcome of its verdict (pass: every listed
/// version's interval lies inside its expected share ± `within`; fail: one lies wholly
/// outside; inconclusive: neither) must be one the step accepts. Versions not listed form
/// one remaining arm.
pub fn expect_split(r: &LoadResult, e: &ExpectSplit) -> (bool, String, SplitVerdict) {
    let within = e.within.map(|p| p.0).unwrap_or(1.0);
    let confidence = e.confidence.map(|p| p.0 / 100.0).unwrap_or(0.99);
    let expected: Vec<(String, f64)> = e
        .shares
        .iter()
        .map(|(key, share)| (key.clone(), share.0 / 100.0))
        .collect();
    let (names, verdict) = crate::load::judge_split(
        &r.arms,
        r.unit,
        r.answered,
        &expected,
        |arm, key| arm.matches(key),
        within,
        confidence,
    );
    let mut lines = verdict_lines(r.unit, &names, &verdict, within);
    let accepted = accepted_outcomes(e);
    let mut passed = accepted.contains(&verdict.outcome);
    if accepted != [Outcome::Pass] {
        let names: Vec<&str> = accepted.iter().map(|o| o.as_str()).collect();
        lines.push(format!(
            "outcome: {} (accepted: {}){}",
            verdict.outcome.as_str(),
            names.join(", "),
            if passed { "" } else { ": FAILED" }
        ));
    } else if verdict.outcome == Outcome::Inconclusive {
        let (key, share) = e
            .shares
            .iter()
            .next()
            .map_or(("canary", 0.0), |(k, s)| (k.as_str(), s.0));
        lines.push(format!(
            "inconclusive counts as a failure here: more draws would decide (`canarysim plan {share}% --within {within} --confidence {}%` gives how many for {key}), or `accept: [pass, inconclusive]`",
            confidence * 100.0
        ));
    }
    let mut check = |what: &str, expected: String, got: String| {
        let ok = expected == got;
        passed &= ok;
        lines.push(format!(
            "{what}: expected {expected}, got {got}{}",
            if ok { "" } else { ": FAILED" }
        ));
    };
    if let Some(unit) = e.unit {
        check("unit", unit.noun().into(), verdict.unit.noun().into());
    }
    if let Some(n) = e.effective_n {
        check(
            "effective n",
            n.to_string(),
            verdict.effective_n.to_string(),
        );
    }
    passed &= error_rates_hold(r, e, within, confidence, &mut lines);
    if let Some(want) = e.decided {
        let want = match want {
            super::format::Decided::Matches => "matches",
            super::format::Decided::Differs => "differs",
        };
        match &r.sequential {
            Some(q) => {
                let ok = q.decision == want;
                passed &= ok;
                lines.push(format!(
                    "sequential test: {} after {} answers (expected {want}){}",
                    q.decision,
                    q.after,
                    if ok { "" } else { ": FAILED" }
                ));
            }
            None => {
                passed = false;
                lines.push("sequential test: the last load had no `until_decided`".into());
            }
        }
    }
    if let Some(want) = e.latency_differs {
        let report = load_report(r);
        match report.latency_comparison {
            Some(m) => {
                let differs = m.p_value_two_sided < 1.0 - confidence;
                let ok = differs == want;
                passed &= ok;
                lines.push(format!(
                    "latency: Mann-Whitney p = {:.2e}, P(canary slower) = {:.3}: {} (expected {}){}",
                    m.p_value_two_sided,
                    m.effect,
                    if differs { "differs" } else { "no difference shown" },
                    if want { "differs" } else { "no difference" },
                    if ok { "" } else { ": FAILED" }
                ));
            }
            None => {
                passed = false;
                lines.push("latency: too few canary or stable answers to compare".into());
            }
        }
    }
    (passed, lines.join("\n"), verdict)
}

/// The verdict in lines: its heading and explanation, each arm's observed share against
/// its expected one, and the goodness of fit.
fn verdict_lines(
    unit: SplitUnit,
    names: &[(String, f64)],
    verdict: &SplitVerdict,
    within: f64,
) -> Vec<String> {
    let mut lines = vec![format!(
        "{}: {}",
        verdict.outcome.heading(),
        verdict.explanation
    )];
    let of_unit = match unit {
        SplitUnit::Request => String::new(),
        SplitUnit::Connection | SplitUnit::Client => format!(" of {}", unit.plural()),
    };
    for ((name, _), arm) in names.iter().zip(&verdict.arms) {
        let requests = match unit {
            SplitUnit::Request => String::new(),
            SplitUnit::Connection | SplitUnit::Client => {
                format!(" ({:.2} % of requests)", arm.request_share * 100.0)
            }
        };
        lines.push(format!(
            "{name}: observed {:.2} %{of_unit}{requests}, {:.1} % interval [{:.2}, {:.2}] %, expected {:.2} ± {within} %: {}",
            arm.observed_share * 100.0,
            verdict.per_arm_confidence * 100.0,
            arm.interval.lo * 100.0,
            arm.interval.hi * 100.0,
            arm.expected_share * 100.0,
            arm.relation()
        ));
    }
    lines.push(format!("goodness of fit: p = {:.4}", verdict.gof.p_value));
    lines
}

/// `errors:` expectations: each version's error rate interval inside its expected rate ±
/// `within`; a line per version, true when all hold.
fn error_rates_hold(
    r: &LoadResult,
    e: &ExpectSplit,
    within: f64,
    confidence: f64,
    lines: &mut Vec<String>,
) -> bool {
    let mut passed = true;
    for (key, rate) in &e.errors {
        let (responses, errors) = r
            .arms
            .iter()
            .filter(|a| a.matches(key))
            .fold((0, 0), |(n, k), a| (n + a.responses, k + a.errors));
        let ci = verify::proportion_interval(errors, responses, confidence);
        let (lo, hi) = (rate.0 - within, rate.0 + within);
        let ok = responses > 0
            && ci.interval.lo * 100.0 >= lo - 1e-9
            && ci.interval.hi * 100.0 <= hi + 1e-9;
        passed &= ok;
        lines.push(format!(
            "{key} errors: {errors} of {responses} ({:.2} %), interval [{:.2}, {:.2}] %, expected {} ± {within} %: {}",
            ci.estimate * 100.0,
            ci.interval.lo * 100.0,
            ci.interval.hi * 100.0,
            rate.0,
            if ok { "inside" } else { "NOT inside" }
        ));
    }
    passed
}
