//! The human-readable report of a scenario run.

use std::fmt::Write as _;

use crate::outcome::RunReport;

/// Renders a run: each step with its time and verdict, the `get rollout` view at each
/// pause, invariant violations, and the verdict.
pub fn render(report: &RunReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "scenario {} (seed {}) — {}{}",
        report.name,
        report.seed,
        report.file,
        report
            .mode
            .as_ref()
            .map(|m| format!(" — {m}"))
            .unwrap_or_default()
    );
    for line in report.description.lines() {
        let _ = writeln!(out, "  {line}");
    }
    let _ = writeln!(out);
    // Before the steps: what the run does not simulate colours every figure below.
    for w in &report.warnings {
        let _ = writeln!(out, "{w}");
    }
    if !report.warnings.is_empty() {
        let _ = writeln!(out);
    }
    for step in &report.steps {
        let mark = if step.passed { "✔" } else { "✖" };
        let _ = writeln!(
            out,
            "{mark} {:>2}  {:<9} {}",
            step.index, step.time, step.summary
        );
        if step.passed && step.action == "expect" {
            // A passing expectation lists what held in the JSON report; here a count does.
            let held = step.detail.split(", ").filter(|s| !s.is_empty()).count();
            let _ = writeln!(out, "        {held} check(s) held");
        } else {
            for line in step_detail(step).lines().filter(|l| !l.is_empty()) {
                let _ = writeln!(out, "        {line}");
            }
        }
        for view in &step.views {
            let view = super::rollout_view::render(view, false);
            let _ = writeln!(out);
            for line in view.lines() {
                let _ = writeln!(out, "        {line}");
            }
            let _ = writeln!(out);
        }
    }
    let _ = writeln!(out);
    if report.violations.is_empty() {
        let _ = writeln!(out, "invariants: held at every event");
    } else {
        let _ = writeln!(out, "invariants: {} violation(s)", report.violations.len());
        for v in &report.violations {
            let _ = writeln!(out, "  {} {}", v.time, v.message);
        }
    }
    let failed = report.steps.iter().filter(|s| !s.passed).count();
    if report.passed {
        let _ = writeln!(out, "PASSED: {} steps", report.steps.len());
    } else {
        let _ = writeln!(
            out,
            "FAILED: {failed} of {} steps failed",
            report.steps.len()
        );
    }
    out
}

/// The summary table of a directory run.
pub fn summary(reports: &[RunReport]) -> String {
    let width = reports
        .iter()
        .map(|r| r.name.len())
        .max()
        .unwrap_or(8)
        .max(8);
    let mut out = String::new();
    let _ = writeln!(out, "{:<width$}  RESULT  STEPS  FAILED", "SCENARIO");
    for r in reports {
        let failed = r.steps.iter().filter(|s| !s.passed).count();
        let _ = writeln!(
            out,
            "{:<width$}  {:<6}  {:>5}  {:>6}",
            r.name,
            if r.passed { "pass" } else { "FAIL" },
            r.steps.len(),
            failed
        );
    }
    let passed = reports.iter().filter(|r| r.passed).count();
    let _ = writeln!(out, "{passed} passed, {} failed", reports.len() - passed);
    out
}

/// A load step in a few lines: where the requests went, each version's share with its
/// interval, errors and latency, and the fit to the configured split.
pub fn load_summary(r: &crate::outcome::LoadReport) -> String {
    let mut out = String::new();
    let unit = match r.unit {
        crate::verify::SplitUnit::Request => "split per request",
        crate::verify::SplitUnit::Connection => "split per connection",
    };
    let _ = writeln!(
        out,
        "{} requests via {} ({unit}, {} effective draws), {} to {}",
        r.sent, r.path, r.effective_n, r.started, r.ended
    );
    let _ = writeln!(
        out,
        "sent {} = answered {} + failed {} (404 {}, 503 no healthy upstream {}, 503 upstream gone {}, refused {}{}); {} connection(s) opened{}",
        r.sent,
        r.answered,
        r.not_found + r.no_healthy_upstream + r.upstream_failed + r.refused + r.fault_aborted,
        r.not_found,
        r.no_healthy_upstream,
        r.upstream_failed,
        r.refused,
        if r.fault_aborted > 0 {
            format!(", fault abort {}", r.fault_aborted)
        } else {
            String::new()
        },
        r.connections,
        match (r.retries, r.timed_out) {
            (0, 0) => String::new(),
            (retries, 0) => format!("; {retries} retries"),
            (retries, t) => format!("; {retries} retries, {t} answered 504 (route timeout)"),
        }
    );
    if let Some(capped) = &r.capped {
        let _ = writeln!(out, "{capped}");
    }
    for v in &r.versions {
        // Per connection, the interval is of the connections' choices; the requests' share
        // follows it only when every connection carries as many requests.
        let requests = match r.unit {
            crate::verify::SplitUnit::Request => String::new(),
            crate::verify::SplitUnit::Connection => format!(
                " of connections ({} connections, {:.2} % of requests)",
                v.connections,
                v.share * 100.0
            ),
        };
        let _ = writeln!(
            out,
            "{:<6} {:<10} {:>6.2} %  [{:>6.2}, {:>6.2}] (99 %){requests}  errors {} ({:.2} %)  p50 {}  p99 {}  p99.9 {}{}",
            v.role,
            v.version,
            v.unit_share * 100.0,
            v.interval.lo * 100.0,
            v.interval.hi * 100.0,
            v.errors,
            v.error_rate * 100.0,
            millis(v.latency.p50),
            millis(v.latency.p99),
            millis(v.latency.p999),
            if v.mirrored > 0 {
                format!("  mirrored {}", v.mirrored)
            } else {
                String::new()
            }
        );
        // Retries and timeouts make the pods' view differ from the clients'.
        if v.pod_answers != v.responses || v.pod_errors != v.errors {
            let _ = writeln!(
                out,
                "                  pods' view: {} answers, {} 5xx ({:.2} %)",
                v.pod_answers,
                v.pod_errors,
                crate::verify::error_rate(v.pod_errors, v.pod_answers).0 * 100.0
            );
        }
    }
    if !r.configured.is_empty() {
        let configured: Vec<String> = r
            .configured
            .iter()
            .map(|c| format!("{} {:.2} %", c.role, c.share * 100.0))
            .collect();
        let fit = r
            .fit
            .as_ref()
            .map(|f| format!("; goodness of fit p = {:.4}", f.p_value))
            .unwrap_or_default();
        let _ = writeln!(out, "configured: {}{fit}", configured.join(", "));
    }
    if let Some(q) = &r.sequential {
        let _ = writeln!(out, "{}", sequential_line(q));
    }
    if let Some(m) = &r.latency_comparison {
        let _ = writeln!(
            out,
            "canary vs stable latency (Mann-Whitney): p = {:.4}, P(canary slower) = {:.3}",
            m.p_value_two_sided, m.effect
        );
    }
    out.trim_end().to_string()
}

/// Microseconds as milliseconds.
fn millis(us: u64) -> String {
    format!("{:.2}ms", us as f64 / 1000.0)
}

/// `canarysim compare`: per load step, the set weight beside what the mesh and the no-mesh
/// worlds delivered.
pub fn compare(r: &crate::outcome::CompareReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "compare {} (seed {}) — {}", r.name, r.seed, r.file);
    let _ = writeln!(
        out,
        "mesh: the scenario as written; no mesh: trafficRouting removed (basic canary), clients without sidecars through kube-proxy"
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:>4}  {:<9} {:>4} {:>4}  {:<28} {:>6}  {:>6}  {:<36} {:>6}",
        "STEP",
        "TIME",
        "SET",
        "VS",
        "MESH OBSERVED (99 %)",
        "ERROR",
        "PODS",
        "NO MESH OBSERVED (99 %)",
        "ERROR"
    );
    for row in &r.rows {
        let cell = |o: &crate::outcome::Observed| {
            let unit = match o.unit {
                crate::verify::SplitUnit::Request => "req",
                crate::verify::SplitUnit::Connection => "conn",
            };
            format!(
                "{:>6.2} % [{:.2}, {:.2}] n={} {unit}",
                o.share * 100.0,
                o.interval.lo * 100.0,
                o.interval.hi * 100.0,
                o.effective_n
            )
        };
        let _ = writeln!(
            out,
            "{:>4}  {:<9} {:>4} {:>4}  {:<28} {:>+6.2}  {:>5.1}%  {:<36} {:>+6.2}",
            row.step,
            row.time,
            row.set_weight,
            row.virtual_service_weight
                .map(|w| w.to_string())
                .unwrap_or_else(|| "-".into()),
            cell(&row.mesh),
            row.mesh.error_points,
            row.pod_ratio * 100.0,
            cell(&row.no_mesh),
            row.no_mesh.error_points
        );
    }
    for n in &r.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

/// `canarysim load`: what was sent and how each request ended, the unit of randomisation as
/// measured (prominent: it changes what the shares mean), the shares with their intervals,
/// errors and latency per version, and the verdict.
pub fn http_load(r: &crate::outcome::HttpLoadReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} → {} ({}, {} connection(s), {}{})",
        r.url,
        r.address,
        r.protocol,
        r.connections,
        if r.keepalive {
            "keep-alive"
        } else {
            "a connection per request"
        },
        r.rate
            .map(|q| format!(", open loop at {q} req/s"))
            .unwrap_or_default()
    );
    let c = &r.classes;
    let failed = [
        ("refused", c.refused),
        ("reset", c.reset),
        ("timeout", c.timeout),
        ("protocol error", c.protocol_error),
        ("other status", c.other_status),
    ];
    let mut endings = format!(
        "2xx {}, 3xx {}, 4xx {}, 5xx {}, 502 {}, 503 {}, 504 {}",
        c.s2xx, c.s3xx, c.s4xx, c.s5xx, c.s502, c.s503, c.s504
    );
    for (name, n) in failed {
        endings.push_str(&format!(", {name} {n}"));
    }
    let _ = writeln!(
        out,
        "sent {} in {:.2} s ({:.0} req/s) = {endings}; {} connection(s) opened",
        r.sent, r.elapsed_seconds, r.throughput, r.connections_opened
    );
    if r.unclassified > 0 {
        let _ = writeln!(
            out,
            "{} response(s) carried no version ({}): not counted in the shares",
            r.unclassified, r.classify
        );
    }
    let u = &r.unit_evidence;
    let heading = match (r.unit, u.forced) {
        (_, true) => format!(
            "unit of randomisation: per {} (set with --unit; measured: {})",
            unit_word(r.unit),
            u.finding
        ),
        (crate::verify::SplitUnit::Connection, false) => {
            "UNIT OF RANDOMISATION: PER CONNECTION".to_string()
        }
        (crate::verify::SplitUnit::Request, false) => {
            format!("unit of randomisation: {}", u.finding)
        }
    };
    let _ = writeln!(out, "{heading}: {}", u.explanation);
    // SHARE is of the draws: answers, or per connection the connections' first answers.
    let _ = writeln!(
        out,
        "{:<12} {:>9} {:>8}  {:<20} {:>6} {:>7} {:>5}  {:>9} {:>9} {:>9} {:>9} {:>9}",
        "VERSION",
        "ANSWERS",
        match r.unit {
            crate::verify::SplitUnit::Request => "SHARE",
            crate::verify::SplitUnit::Connection => "CONN %",
        },
        "99 % INTERVAL",
        "CONNS",
        "ERRORS",
        "LOST",
        "P50",
        "P90",
        "P99",
        "P99.9",
        "MAX"
    );
    for v in &r.versions {
        let _ = writeln!(
            out,
            "{:<12} {:>9} {:>6.2} %  [{:>6.2}, {:>6.2}] %   {:>6} {:>7} {:>5}  {:>9} {:>9} {:>9} {:>9} {:>9}",
            v.version,
            v.responses,
            v.unit_share * 100.0,
            v.interval.lo * 100.0,
            v.interval.hi * 100.0,
            v.connections,
            v.errors,
            v.lost,
            millis(v.latency.p50),
            millis(v.latency.p90),
            millis(v.latency.p99),
            millis(v.latency.p999),
            millis(v.latency.max),
        );
    }
    if let Some(q) = &r.sequential {
        let _ = writeln!(out, "{}", sequential_line(q));
    }
    match &r.verdict {
        None => {
            let _ = writeln!(out, "no --expect given: no verdict");
        }
        Some(v) => {
            let s = &v.split;
            let _ = match v.decided_by.as_str() {
                "interval" => writeln!(out, "verdict: {} — {}", v.outcome.heading(), s.explanation),
                by => writeln!(
                    out,
                    "verdict: {} — decided by the {by} (see above); the intervals at the stopping point, for information: {}",
                    v.outcome.heading(),
                    s.explanation
                ),
            };
            if !v.advice.is_empty() {
                let _ = writeln!(out, "  to decide: {}", v.advice);
            }
            for (e, arm) in v.expected.iter().zip(&s.arms) {
                let _ = writeln!(
                    out,
                    "  {}: observed {:.2} % of {}s, {:.1} % interval [{:.2}, {:.2}] %, expected {:.2} ± {} %: {}",
                    e.version,
                    arm.observed_share * 100.0,
                    unit_word(r.unit),
                    s.per_arm_confidence * 100.0,
                    arm.interval.lo * 100.0,
                    arm.interval.hi * 100.0,
                    arm.expected_share * 100.0,
                    s.within_points,
                    arm.relation()
                );
            }
            let _ = writeln!(out, "  goodness of fit: p = {:.4}", s.gof.p_value);
        }
    }
    out
}

/// What the sequential test decided, in one line.
fn sequential_line(q: &crate::load::Sequential) -> String {
    let planned = q
        .planned
        .map(|n| format!(" (the load sends at most {n} requests)"))
        .unwrap_or_default();
    let draws = match q.unit {
        crate::verify::SplitUnit::Request => "answers",
        crate::verify::SplitUnit::Connection => "connections (each connection's first answer)",
    };
    if q.decision.starts_with("not applicable") {
        return format!("sequential test: {} ({} answers)", q.decision, q.after);
    }
    format!(
        "sequential test: {} after {} {draws}{planned}",
        q.decision, q.after
    )
}

fn unit_word(unit: crate::verify::SplitUnit) -> &'static str {
    match unit {
        crate::verify::SplitUnit::Request => "request",
        crate::verify::SplitUnit::Connection => "connection",
    }
}

/// A step's detail as the text report shows it: a load step's figures rendered from its
/// data, any other step's own words.
pub fn step_detail(step: &crate::outcome::StepReport) -> std::borrow::Cow<'_, str> {
    match &step.load {
        Some(load) if step.detail.is_empty() => std::borrow::Cow::Owned(load_summary(load)),
        _ => std::borrow::Cow::Borrowed(step.detail.as_str()),
    }
}

/// `canarysim plan`: the sizes that decide, and each outcome's chance at the larger.
pub fn plan(p: &crate::verify::plan::SamplePlan) -> String {
    let pct = |x: f64| format!("{:.2} %", x * 100.0);
    let share = |x: f64| format!("{} %", (x * 1e4).round() / 1e2);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} ± {} points at {} confidence, planned for a {} chance of deciding right",
        share(p.expected),
        (p.within * 1e4).round() / 1e2,
        share(p.confidence),
        share(p.power)
    );
    let _ = writeln!(
        out,
        "draws are requests when the gateway picks per request, connections when it picks per connection (then send with --disable-keepalive, or open that many connections)"
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:>12}  the interval is ±{} points wide if exactly {} is observed (a right split then passes only when observed almost exactly)",
        p.interval_draws,
        (p.within * 1e4).round() / 1e2,
        share(p.expected)
    );
    let _ = writeln!(
        out,
        "{:>12}  a right split ({}) passes with a {} chance",
        p.pass_draws,
        share(p.expected),
        share(p.power)
    );
    let _ = writeln!(
        out,
        "{:>12}  a split at {} (off by twice the tolerance) fails with a {} chance",
        p.fail_draws,
        share(p.wrong_share),
        share(p.power)
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "at {} draws (e.g. canarysim load URL -n {} --expect VERSION={} --within {} --confidence {}):",
        p.draws,
        p.draws,
        share(p.expected).replace(' ', ""),
        (p.within * 1e4).round() / 1e2,
        share(p.confidence).replace(' ', "")
    );
    let _ = writeln!(
        out,
        "{:<24} {:>9} {:>13} {:>9}",
        "", "PASS", "INCONCLUSIVE", "FAIL"
    );
    for (name, c) in [
        (
            format!("right split ({})", share(p.expected)),
            p.right_split,
        ),
        (format!("split at {}", share(p.wrong_share)), p.wrong_split),
    ] {
        let _ = writeln!(
            out,
            "{name:<24} {:>9} {:>13} {:>9}",
            pct(c.pass),
            pct(c.inconclusive),
            pct(c.fail)
        );
    }
    out
}
