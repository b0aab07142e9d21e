//! The human-readable report of a scenario run.

use std::fmt::Write as _;

use crate::lint::Severity;
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
            // A load step's figures are laid out to fit already (wrapping would break its
            // tables); other steps' words are wrapped, hanging under the first.
            let laid_out = step.load.is_some() && step.detail.is_empty();
            let hanging = format!("{DETAIL_INDENT}  ");
            for line in step_detail(step).lines().filter(|l| !l.is_empty()) {
                let line = format!("{DETAIL_INDENT}{line}");
                if laid_out {
                    let _ = writeln!(out, "{line}");
                } else {
                    push_wrapped(&mut out, &line, WIDTH, &hanging);
                }
            }
        }
        for view in &step.views {
            let view = super::rollout_view::render(view, false);
            let _ = writeln!(out);
            for line in view.lines() {
                let _ = writeln!(out, "{DETAIL_INDENT}{line}");
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
            push_wrapped(
                &mut out,
                &format!("  {} {}", v.time, v.message),
                WIDTH,
                "    ",
            );
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
pub fn summary(reports: &[RunReport], invalid_files: &[String]) -> String {
    let width = reports
        .iter()
        .map(|r| r.name.len())
        .chain(invalid_files.iter().map(String::len))
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
    // A file that did not load is a row too: a summary that drops it reads as all passed.
    for file in invalid_files {
        let _ = writeln!(
            out,
            "{file:<width$}  {:<6}  {:>5}  {:>6}",
            "ERROR", "-", "-"
        );
    }
    let passed = reports.iter().filter(|r| r.passed).count();
    let _ = write!(out, "{passed} passed, {} failed", reports.len() - passed);
    if !invalid_files.is_empty() {
        let _ = write!(out, ", {} invalid", invalid_files.len());
    }
    out.push('\n');
    out
}

// Long: the summary top to bottom, one block per section it shows; every block only reads the
// report.
/// A load step in a few lines: where the requests went, each version's share with its
/// interval, errors and latency, and the fit to the configured split. Lines fit
/// [`DETAIL_WIDTH`], the run report's width less its indentation of a step's detail.
pub(crate) fn load_summary(r: &crate::outcome::LoadReport) -> String {
    use crate::verify::SplitUnit;
    let mut out = String::new();
    let prose = |out: &mut String, line: String| push_wrapped(out, &line, DETAIL_WIDTH, "  ");
    prose(
        &mut out,
        format!(
            "{} requests via {}, {} to {}",
            r.sent, r.path, r.started, r.ended
        ),
    );
    prose(
        &mut out,
        format!(
            "split per {}: {} effective draws; {} connection(s) opened",
            r.unit.noun(),
            r.effective_n,
            r.connections
        ),
    );
    let failed = r.not_found
        + r.no_healthy_upstream
        + r.unresolved_backend
        + r.upstream_failed
        + r.refused
        + r.fault_aborted;
    // The failures' classes only when there are failures: a row of zeros says nothing.
    let failures = if failed == 0 {
        String::new()
    } else {
        format!(
            " (404 {}, 503 no healthy upstream {}, {}503 upstream gone {}, refused {}{})",
            r.not_found,
            r.no_healthy_upstream,
            if r.unresolved_backend > 0 {
                format!("500 backend not resolved {}, ", r.unresolved_backend)
            } else {
                String::new()
            },
            r.upstream_failed,
            r.refused,
            if r.fault_aborted > 0 {
                format!(", fault abort {}", r.fault_aborted)
            } else {
                String::new()
            },
        )
    };
    let retries = match (r.retries, r.timed_out) {
        (0, 0) => String::new(),
        (retries, 0) => format!("; {retries} retries"),
        (retries, t) => format!("; {retries} retries, {t} answered 504 (route timeout)"),
    };
    prose(
        &mut out,
        format!(
            "sent {} = answered {} + failed {failed}{failures}{retries}",
            r.sent, r.answered
        ),
    );
    if let Some(capped) = &r.capped {
        prose(&mut out, capped.clone());
    }
    // Per connection the share and its interval are of the connections' choices; the
    // requests' share follows it only when every connection carries as many requests, so
    // both are shown.
    let per_connection = r.unit == SplitUnit::Connection;
    let per_client = r.unit == SplitUnit::Client;
    if let Some(switched) = r.clients_switched {
        prose(
            &mut out,
            format!(
                "session affinity: each client's requests follow its cookie, so each client is one draw (its version: the one its first request was sent to); {switched} of {} client(s) were sent to two versions",
                r.effective_n
            ),
        );
    }
    let mirrored = r.versions.iter().any(|v| v.mirrored > 0);
    let mut columns = vec![
        ("ROLE", Align::Left),
        ("VERSION", Align::Left),
        (share_heading(r.unit), Align::Right),
        ("99 % INTERVAL", Align::Left),
    ];
    if per_connection {
        columns.extend([("CONNS", Align::Right), ("REQ %", Align::Right)]);
    }
    if per_client {
        columns.extend([("CLIENTS", Align::Right), ("REQ %", Align::Right)]);
    }
    columns.extend([("ERRORS", Align::Right), ("ERR %", Align::Right)]);
    if mirrored {
        columns.push(("MIRRORED", Align::Right));
    }
    let intervals = intervals(r.versions.iter().map(|v| &v.interval));
    let rows: Vec<Vec<String>> = r
        .versions
        .iter()
        .zip(intervals)
        .map(|(v, interval)| {
            let mut row = vec![
                v.role.clone(),
                v.version.clone(),
                percent(v.unit_share),
                interval,
            ];
            if per_connection {
                row.extend([v.connections.to_string(), percent(v.share)]);
            }
            if per_client {
                row.extend([v.clients.unwrap_or(0).to_string(), percent(v.share)]);
            }
            row.extend([v.errors.to_string(), percent(v.error_rate)]);
            if mirrored {
                row.push(v.mirrored.to_string());
            }
            row
        })
        .collect();
    out.push_str(&table(&columns, &rows));
    // Latency in a table of its own: beside the split it would not fit.
    let latency_columns = [
        ("ROLE", Align::Left),
        ("VERSION", Align::Left),
        ("P50 ms", Align::Right),
        ("P99 ms", Align::Right),
        ("P99.9 ms", Align::Right),
    ];
    let latency_rows: Vec<Vec<String>> = r
        .versions
        .iter()
        .map(|v| {
            vec![
                v.role.clone(),
                v.version.clone(),
                millis(v.latency.p50),
                millis(v.latency.p99),
                millis(v.latency.p999),
            ]
        })
        .collect();
    out.push_str(&table(&latency_columns, &latency_rows));
    for v in &r.versions {
        // Retries and timeouts make the pods' view differ from the clients'.
        if v.pod_answers != v.responses || v.pod_errors != v.errors {
            prose(
                &mut out,
                format!(
                    "{} {}, the pods' view: {} answers, {} 5xx ({:.2} %)",
                    v.role,
                    v.version,
                    v.pod_answers,
                    v.pod_errors,
                    crate::verify::error_rate(v.pod_errors, v.pod_answers).0 * 100.0
                ),
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
        prose(
            &mut out,
            format!("configured: {}{fit}", configured.join(", ")),
        );
    }
    if let Some(q) = &r.sequential {
        prose(&mut out, sequential_line(q));
    }
    if let Some(m) = &r.latency_comparison {
        prose(
            &mut out,
            format!(
                "canary vs stable latency (Mann-Whitney): p = {:.4}, P(canary slower) = {:.3}",
                m.p_value_two_sided, m.effect
            ),
        );
    }
    out.trim_end().to_string()
}

/// Microseconds as milliseconds, for a column whose header says `ms`.
fn millis(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}

/// A share as a percentage, for a column whose header says `%`.
fn percent(share: f64) -> String {
    format!("{:.2}", share * 100.0)
}

/// Intervals of shares in percent, for the rows of a column: their bounds aligned, as
/// narrow as the widest bound allows.
fn intervals<'a>(all: impl Iterator<Item = &'a crate::verify::Interval> + Clone) -> Vec<String> {
    let bound = |x: f64| format!("{:.2}", x * 100.0);
    let width = all
        .clone()
        .flat_map(|i| [bound(i.lo).len(), bound(i.hi).len()])
        .max()
        .unwrap_or(0);
    all.map(|i| format!("[{:>width$}, {:>width$}]", bound(i.lo), bound(i.hi)))
        .collect()
}

/// The header of the column of shares: of the draws, which per connection are connections.
fn share_heading(unit: crate::verify::SplitUnit) -> &'static str {
    match unit {
        crate::verify::SplitUnit::Request => "SHARE %",
        crate::verify::SplitUnit::Connection => "CONN %",
        crate::verify::SplitUnit::Client => "CLIENT %",
    }
}

/// `canarysim compare`: per load step, the set weight beside what the mesh and the no-mesh
/// worlds delivered, a row for each world (side by side they would not fit [`WIDTH`]).
pub fn compare(r: &crate::outcome::CompareReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "compare {} (seed {}) — {}", r.name, r.seed, r.file);
    let _ = writeln!(out, "mesh:    the scenario as written");
    let _ = writeln!(
        out,
        "no mesh: trafficRouting removed (basic canary), clients without sidecars through kube-proxy"
    );
    let _ = writeln!(out);
    let columns = [
        ("STEP", Align::Right),
        ("TIME", Align::Left),
        ("SET", Align::Right),
        ("WORLD", Align::Left),
        ("VS", Align::Right),
        ("PODS %", Align::Right),
        ("SHARE %", Align::Right),
        ("99 % INTERVAL", Align::Left),
        ("DRAWS", Align::Left),
        ("ERROR", Align::Right),
    ];
    // The share, its interval, the draws behind it and its distance from the set weight in
    // points.
    let column_of_intervals = intervals(
        r.rows
            .iter()
            .flat_map(|row| [&row.mesh.interval, &row.no_mesh.interval]),
    );
    let mut interval_cells = column_of_intervals.into_iter();
    let mut observed = |o: &crate::outcome::Observed| {
        let unit = match o.unit {
            crate::verify::SplitUnit::Request => "req",
            crate::verify::SplitUnit::Connection => "conn",
            crate::verify::SplitUnit::Client => "clients",
        };
        [
            percent(o.share),
            interval_cells.next().unwrap_or_default(),
            format!("{} {unit}", o.effective_n),
            format!("{:+.2}", o.error_points),
        ]
    };
    let mut rows = Vec::new();
    for row in &r.rows {
        // The mesh routes by the VirtualService's weight, the basic canary by its pods.
        let vs = row
            .virtual_service_weight
            .map(|w| w.to_string())
            .unwrap_or_else(|| "-".into());
        let mut mesh = vec![
            row.step.to_string(),
            row.time.clone(),
            row.set_weight.to_string(),
            "mesh".into(),
            vs,
            String::new(),
        ];
        mesh.extend(observed(&row.mesh));
        rows.push(mesh);
        let mut no_mesh = vec![
            String::new(),
            String::new(),
            String::new(),
            "no mesh".into(),
            String::new(),
            format!("{:.1}", row.pod_ratio * 100.0),
        ];
        no_mesh.extend(observed(&row.no_mesh));
        rows.push(no_mesh);
    }
    out.push_str(&table(&columns, &rows));
    for n in &r.notes {
        push_wrapped(&mut out, &format!("note: {n}"), WIDTH, "  ");
    }
    for f in &r.failures {
        push_wrapped(&mut out, &format!("FAIL: {f}"), WIDTH, "  ");
    }
    out
}

/// `canarysim compare --ingress2gateway`: per load, the canary's share through ingress-nginx
/// and through the HTTPRoute ingress2gateway writes, and whether they differ.
pub fn migration(r: &crate::outcome::MigrationReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "compare {} (seed {}) — {}", r.name, r.seed, r.file);
    let _ = writeln!(out, "ingress-nginx: the scenario as written");
    let _ = writeln!(
        out,
        "HTTPRoute:     the same load through the Gateway API objects ingress2gateway writes from the Ingresses of that moment"
    );
    let _ = writeln!(out);
    let columns = [
        ("STEP", Align::Right),
        ("TIME", Align::Left),
        ("THROUGH", Align::Left),
        ("CONFIGURED %", Align::Right),
        ("OBSERVED %", Align::Right),
        ("DRAWS", Align::Right),
        ("SPLITS", Align::Left),
    ];
    let mut rows = Vec::new();
    for row in &r.rows {
        let p = if row.p_value < 1e-4 {
            "p < 0.0001".to_string()
        } else {
            format!("p = {:.4}", row.p_value)
        };
        let verdict = if row.configured_differ {
            format!("DIFFER as configured ({p})")
        } else if row.differ {
            format!("DIFFER ({p})")
        } else {
            format!("no difference seen ({p})")
        };
        let side = |s: &crate::outcome::MigrationSide| {
            [
                percent(s.configured),
                percent(s.observed),
                s.effective_n.to_string(),
            ]
        };
        let mut first = vec![
            row.step.to_string(),
            row.time.clone(),
            "ingress-nginx".into(),
        ];
        first.extend(side(&row.ingress_nginx));
        first.push(verdict);
        rows.push(first);
        let mut second = vec![String::new(), String::new(), "HTTPRoute".into()];
        second.extend(side(&row.http_route));
        second.push(String::new());
        rows.push(second);
    }
    out.push_str(&table(&columns, &rows));
    for w in &r.warnings {
        push_wrapped(&mut out, &format!("ingress2gateway: {w}"), WIDTH, "  ");
    }
    for n in &r.notes {
        push_wrapped(&mut out, &format!("note: {n}"), WIDTH, "  ");
    }
    for f in &r.failures {
        push_wrapped(&mut out, &format!("FAIL: {f}"), WIDTH, "  ");
    }
    out
}

/// `canarysim check`: the settings once, then per Rollout its table (one row per pause:
/// the weights, the share through its router with the verdict, the share without a mesh),
/// its end, its lint findings and notes; then what was left out and the verdict.
pub fn check(r: &crate::outcome::CheckReport) -> String {
    let mut out = String::new();
    let s = &r.settings;
    push_wrapped(
        &mut out,
        &format!(
            "check: at each pause {} over {} (seed {}; without a VirtualService, a new \
             connection per request); a share passes within {} of the step's weight at {} % \
             confidence; no mesh: trafficRouting removed, clients without sidecars through \
             kube-proxy",
            count(s.requests as usize, "request"),
            count(s.connections as usize, "connection"),
            s.seed,
            count(s.within_points as usize, "point"),
            s.confidence * 100.0
        ),
        WIDTH,
        "  ",
    );
    for ro in &r.rollouts {
        rollout_check(&mut out, ro);
    }
    if !r.left_out.is_empty() || !r.other_findings.is_empty() {
        let _ = writeln!(out);
    }
    for l in &r.left_out {
        push_wrapped(&mut out, &format!("left out: {l}"), WIDTH, "  ");
    }
    if !r.other_findings.is_empty() {
        push_findings(&mut out, "lint, other objects", &r.other_findings);
    }
    let _ = writeln!(out);
    let failed = r.rollouts.iter().filter(|ro| !ro.passed).count();
    let checked = r.rollouts.len();
    let undecided = r.rollouts.iter().any(|ro| {
        ro.rows
            .iter()
            .any(|row| row.verdict == Some(crate::verify::Outcome::Inconclusive))
    });
    let wrong = r.rollouts.iter().any(|ro| {
        !ro.failures.is_empty()
            || ro
                .rows
                .iter()
                .any(|row| row.verdict == Some(crate::verify::Outcome::Fail))
    });
    let _ = if r.passed {
        writeln!(out, "PASSED: {} checked", count(checked, "Rollout"))
    } else if undecided && !wrong {
        writeln!(
            out,
            "CANNOT TELL YET: more traffic would decide (above); nothing was found wrong"
        )
    } else if failed == 0 {
        writeln!(out, "FAILED: lint errors about other objects")
    } else {
        writeln!(out, "FAILED: {failed} of {}", count(checked, "Rollout"))
    };
    out
}

/// `1 request`, `2 requests`, `0 errors`.
pub fn count(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// One Rollout of `check`: where it is, its table, its end, findings, notes and failures.
fn rollout_check(out: &mut String, ro: &crate::outcome::RolloutCheck) {
    let columns = [
        ("STEP", Align::Right),
        ("SET", Align::Right),
        ("ROUTER", Align::Right),
        ("SHARE %", Align::Right),
        ("99 % INTERVAL", Align::Left),
        ("VERDICT", Align::Left),
        ("NEW PODS %", Align::Right),
        ("NO MESH %", Align::Right),
        ("99 % INTERVAL", Align::Left),
    ];
    let _ = writeln!(out);
    push_wrapped(
        out,
        &format!(
            "Rollout {} (namespace {}) — {}",
            ro.name, ro.namespace, ro.location
        ),
        WIDTH,
        "  ",
    );
    if !ro.router.is_empty() {
        push_wrapped(out, &format!("through: {}", ro.router), WIDTH, "  ");
    }
    let mesh = intervals(ro.rows.iter().map(|row| &row.observed.interval));
    let no_mesh = intervals(ro.rows.iter().map(|row| &row.no_mesh.interval));
    let rows: Vec<Vec<String>> = ro
        .rows
        .iter()
        .zip(mesh.into_iter().zip(no_mesh))
        .map(|(row, (mesh, no_mesh))| {
            vec![
                row.service.clone().unwrap_or_else(|| {
                    row.step
                        .map(|i| format!("{i}/{}", ro.steps))
                        .unwrap_or_else(|| "-".into())
                }),
                row.set_weight.to_string(),
                row.router_weight
                    .map(|w| w.to_string())
                    .unwrap_or_else(|| "-".into()),
                percent(row.observed.share),
                mesh,
                row.verdict.map(|v| v.as_str()).unwrap_or("-").to_string(),
                format!("{:.1}", row.pod_ratio * 100.0),
                percent(row.no_mesh.share),
                format!("{no_mesh} {} conn", row.no_mesh.effective_n),
            ]
        })
        .collect();
    if rows.is_empty() {
        let _ = writeln!(
            out,
            "no pause with a route (VirtualService, HTTPRoute or Ingress) to send traffic through"
        );
    } else {
        out.push_str(&table(&columns, &rows));
    }
    for row in ro.rows.iter().filter(|row| !row.advice.is_empty()) {
        let step = row
            .step
            .map(|i| format!("{i}/{}", ro.steps))
            .unwrap_or_default();
        push_wrapped(out, &format!("step {step}: {}", row.advice), WIDTH, "  ");
    }
    let end = if ro.message.is_empty() {
        format!("end: {}", ro.phase)
    } else {
        format!("end: {} ({})", ro.phase, ro.message)
    };
    push_wrapped(out, &end, WIDTH, "  ");
    push_findings(out, "lint", &ro.findings);
    for n in &ro.notes {
        push_wrapped(out, &format!("note: {n}"), WIDTH, "  ");
    }
    for f in &ro.failures {
        push_wrapped(out, &format!("FAIL: {f}"), WIDTH, "  ");
    }
}

/// `lint: 0 errors, 1 warning`, then each finding as `canarysim lint` prints it.
fn push_findings(out: &mut String, heading: &str, findings: &[crate::outcome::Finding]) {
    let errors = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    let _ = writeln!(
        out,
        "{heading}: {}, {}",
        count(errors, "error"),
        count(findings.len() - errors, "warning")
    );
    for f in findings {
        push_wrapped(
            out,
            &format!("  {}: {}: {}", f.location, f.severity.as_str(), f.message),
            WIDTH,
            "    ",
        );
    }
}

/// `canarysim load`: what was sent and how each request ended, the unit of randomisation as
/// measured (prominent: it changes what the shares mean), the shares with their intervals,
/// errors and latency per version (two tables: one would not fit [`WIDTH`]), and the
/// verdict.
pub fn http_load(r: &crate::outcome::HttpLoadReport) -> String {
    http_load_judged_as(r, "verdict")
}

// Long: the report top to bottom, one block per section it shows; every block only reads the
// report.
/// [`http_load`], its verdict line headed `label`: a merge whose shards split differently
/// shows their union for reference, not as the verdict.
fn http_load_judged_as(r: &crate::outcome::HttpLoadReport, label: &str) -> String {
    let mut out = String::new();
    let prose =
        |out: &mut String, line: String, hanging: &str| push_wrapped(out, &line, WIDTH, hanging);
    prose(
        &mut out,
        format!(
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
        ),
        "  ",
    );
    let c = &r.classes;
    let _ = writeln!(
        out,
        "sent {} in {:.2} s ({:.0} req/s); {} connection(s) opened",
        r.sent, r.elapsed_seconds, r.throughput, r.connections_opened
    );
    // Every request ends in one of these: their sum is what was sent.
    prose(
        &mut out,
        format!(
            "  answered: 2xx {}, 3xx {}, 4xx {}, 5xx {}, 502 {}, 503 {}, 504 {}, other status {}",
            c.s2xx, c.s3xx, c.s4xx, c.s5xx, c.s502, c.s503, c.s504, c.other_status
        ),
        "    ",
    );
    prose(
        &mut out,
        format!(
            "  no answer: refused {}, reset {}, timeout {}, protocol error {}, cut at the -z deadline {}",
            c.refused, c.reset, c.timeout, c.protocol_error, c.deadline
        ),
        "    ",
    );
    if r.unclassified > 0 {
        prose(
            &mut out,
            format!(
                "{} response(s) carried no version ({}): not counted in the shares",
                r.unclassified, r.classify
            ),
            "  ",
        );
    }
    let u = &r.unit_evidence;
    let heading = match (r.unit, u.forced) {
        (_, true) => format!(
            "unit of randomisation: per {} (set with --unit; measured: {})",
            r.unit.noun(),
            u.finding
        ),
        (crate::verify::SplitUnit::Connection, false) => {
            "UNIT OF RANDOMISATION: PER CONNECTION".to_string()
        }
        (crate::verify::SplitUnit::Request, false) => {
            format!("unit of randomisation: {}", u.finding)
        }
        // A real load keeps no cookies: never measured per client.
        (crate::verify::SplitUnit::Client, false) => "UNIT OF RANDOMISATION: PER CLIENT".into(),
    };
    prose(&mut out, format!("{heading}: {}", u.explanation), "  ");
    let _ = writeln!(out);
    // SHARE is of the draws: answers, or per connection the connections' first answers.
    let split_columns = [
        ("VERSION", Align::Left),
        ("ANSWERS", Align::Right),
        (share_heading(r.unit), Align::Right),
        ("99 % INTERVAL", Align::Left),
        ("CONNS", Align::Right),
        ("ERRORS", Align::Right),
        ("LOST", Align::Right),
    ];
    let intervals = intervals(r.versions.iter().map(|v| &v.interval));
    let split_rows: Vec<Vec<String>> = r
        .versions
        .iter()
        .zip(intervals)
        .map(|(v, interval)| {
            vec![
                v.version.clone(),
                v.responses.to_string(),
                percent(v.unit_share),
                interval,
                v.connections.to_string(),
                v.errors.to_string(),
                v.lost.unwrap_or(0).to_string(),
            ]
        })
        .collect();
    out.push_str(&table(&split_columns, &split_rows));
    let _ = writeln!(out);
    let latency_columns = [
        ("VERSION", Align::Left),
        ("P50 ms", Align::Right),
        ("P90 ms", Align::Right),
        ("P99 ms", Align::Right),
        ("P99.9 ms", Align::Right),
        ("MAX ms", Align::Right),
    ];
    let latency_rows: Vec<Vec<String>> = r
        .versions
        .iter()
        .map(|v| {
            let l = &v.latency;
            vec![
                v.version.clone(),
                millis(l.p50),
                millis(l.p90),
                millis(l.p99),
                millis(l.p999),
                millis(l.max),
            ]
        })
        .collect();
    out.push_str(&table(&latency_columns, &latency_rows));
    let _ = writeln!(out);
    if let Some(q) = &r.sequential {
        prose(&mut out, sequential_line(q), "  ");
    }
    match &r.verdict {
        None => {
            let _ = writeln!(out, "no --expect given: no verdict");
        }
        Some(v) => {
            let s = &v.split;
            let verdict = match v.decided_by.as_str() {
                "interval" => format!("{label}: {} — {}", v.outcome.heading(), s.explanation),
                by => format!(
                    "{label}: {} — decided by the {by} (see above); the intervals at the stopping point, for information: {}",
                    v.outcome.heading(),
                    s.explanation
                ),
            };
            prose(&mut out, verdict, "  ");
            if !v.advice.is_empty() {
                prose(&mut out, format!("  to decide: {}", v.advice), "    ");
            }
            for (e, arm) in v.expected.iter().zip(&s.arms) {
                prose(
                    &mut out,
                    format!(
                        "  {}: observed {:.2} % of {}s, {:.1} % interval [{:.2}, {:.2}] %, expected {:.2} ± {} %: {}",
                        e.version,
                        arm.observed_share * 100.0,
                        r.unit.noun(),
                        s.per_arm_confidence * 100.0,
                        arm.interval.lo * 100.0,
                        arm.interval.hi * 100.0,
                        arm.expected_share * 100.0,
                        s.within_points,
                        arm.relation()
                    ),
                    "    ",
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
        crate::verify::SplitUnit::Client => "clients",
    };
    if q.decision.starts_with("not applicable") {
        return format!("sequential test: {} ({} answers)", q.decision, q.after);
    }
    format!(
        "sequential test: {} after {} {draws}{planned}",
        q.decision, q.after
    )
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
    push_wrapped(
        &mut out,
        "draws are requests when the gateway picks per request, connections when it picks per connection (then send with --disable-keepalive, or open that many connections)",
        WIDTH,
        "",
    );
    let _ = writeln!(out);
    // Each size, then what it decides; the words wrap under the words.
    let hanging = " ".repeat(14);
    let sizes = [
        (
            p.interval_draws,
            format!(
                "the interval is ±{} points wide if exactly {} is observed (a right split then passes only when observed almost exactly)",
                (p.within * 1e4).round() / 1e2,
                share(p.expected)
            ),
        ),
        (
            p.pass_draws,
            format!(
                "a right split ({}) passes with a {} chance",
                share(p.expected),
                share(p.power)
            ),
        ),
        (
            p.fail_draws,
            format!(
                "a split at {} (off by twice the tolerance) fails with a {} chance",
                share(p.wrong_share),
                share(p.power)
            ),
        ),
    ];
    for (draws, what) in sizes {
        push_wrapped(&mut out, &format!("{draws:>12}  {what}"), WIDTH, &hanging);
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<24} {:>9} {:>13} {:>9}",
        format!("at {} draws", p.draws),
        "PASS",
        "INCONCLUSIVE",
        "FAIL"
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
    // The command to send that many, last, on a line of its own: it is copied whole.
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "to send them: canarysim load URL -n {} --expect VERSION={} --within {} --confidence {}",
        p.draws,
        share(p.expected).replace(' ', ""),
        (p.within * 1e4).round() / 1e2,
        share(p.confidence).replace(' ', "")
    );
    out
}

/// The widest line a report prints, in characters: tables fit a 100-column terminal, and
/// prose wraps there.
pub const WIDTH: usize = 100;

/// How the run report indents a step's detail.
const DETAIL_INDENT: &str = "        ";

/// The width of a step's detail, which the run report indents by `DETAIL_INDENT`.
pub(crate) const DETAIL_WIDTH: usize = WIDTH - DETAIL_INDENT.len();

/// A column's alignment: names to the left, figures to the right.
#[derive(Clone, Copy)]
enum Align {
    Left,
    Right,
}

/// `rows` under the headers of `columns`, each column as wide as its widest cell (in
/// characters, as the terminal counts them), two spaces apart, no trailing spaces.
fn table(columns: &[(&str, Align)], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = columns.iter().map(|(h, _)| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| -> String {
        let padded: Vec<String> = cells
            .zip(columns.iter().zip(&widths))
            .map(|(cell, ((_, align), &width))| match align {
                Align::Left => format!("{cell:<width$}"),
                Align::Right => format!("{cell:>width$}"),
            })
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(&mut columns.iter().map(|(h, _)| *h));
    for row in rows {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
    }
    out
}

/// Appends `line` broken at spaces into lines of at most `width` characters, each further
/// line starting with `hanging`. A word longer than a line is left whole.
fn push_wrapped(out: &mut String, line: &str, width: usize, hanging: &str) {
    let body = line.trim_start_matches(' ');
    let mut current = line[..line.len() - body.len()].to_string();
    let mut length = current.chars().count();
    let mut words_on_line = 0;
    // "± 1" reads as one figure, and a `command` in backticks is copied whole: each is
    // kept on one line.
    let mut words: Vec<String> = Vec::new();
    let mut in_backticks = false;
    for word in body.split(' ') {
        match words.last_mut() {
            // A unit stays with its figure: "1 %" is not broken either.
            Some(last) if last == "±" || in_backticks || word.starts_with('%') => {
                last.push(' ');
                last.push_str(word);
            }
            _ => words.push(word.to_string()),
        }
        if word.matches('`').count() % 2 == 1 {
            in_backticks = !in_backticks;
        }
    }
    let mut broken = false;
    for word in &words {
        // Two spaces where the line breaks would indent the next line by one more.
        if broken && words_on_line == 0 && word.is_empty() {
            continue;
        }
        let word_length = word.chars().count();
        if words_on_line > 0 && length + 1 + word_length > width {
            out.push_str(current.trim_end());
            out.push('\n');
            current = hanging.to_string();
            length = hanging.chars().count();
            words_on_line = 0;
            broken = true;
        }
        if words_on_line > 0 {
            current.push(' ');
            length += 1;
        }
        current.push_str(word);
        length += word_length;
        words_on_line += 1;
    }
    out.push_str(current.trim_end());
    out.push('\n');
}

/// The report for people: each shard's part, whether they agree, then the merged load as
/// `load` prints one (and, when the shards differ, each shard's).
pub fn load_merge(report: &crate::outcome::MergeReport) -> String {
    let mut out = String::new();
    let count = report.shards.len();
    out.push_str(&format!(
        "{count} result file(s), judged as one load of {} requests\n",
        report.merged.sent
    ));
    for s in &report.shards {
        let shard = s
            .shard
            .as_ref()
            .map_or("whole load".to_string(), |s| format!("shard {s}"));
        let total: u64 = s.draws.values().sum();
        let shares: Vec<String> = s
            .draws
            .iter()
            .map(|(v, n)| format!("{v} {:.2} %", 100.0 * *n as f64 / total.max(1) as f64))
            .collect();
        out.push_str(&format!(
            "  {:<12} {:>9} sent  {}  ({}, {})\n",
            shard,
            s.sent,
            shares.join(", "),
            s.file,
            s.address
        ));
    }
    if !report.missing_shards.is_empty() {
        let missing: Vec<String> = report.missing_shards.iter().map(u32::to_string).collect();
        out.push_str(&format!(
            "  missing: shard(s) {} (judged on the shards given)\n",
            missing.join(", ")
        ));
    }
    out.push_str(&format!(
        "shards: {}: {}\n\n",
        report.agreement.finding, report.agreement.explanation
    ));
    if !report.agreement.shards_differ() {
        out.push_str(&http_load(&report.merged));
        return out;
    }
    // The union of two different splits is the split of neither: shown, never the verdict.
    out.push_str(&http_load_judged_as(
        &report.merged,
        "the union, were it one split (not the verdict: the shards differ)",
    ));
    for (s, r) in report.shards.iter().zip(&report.per_shard) {
        out.push_str(&format!("\n== {} ({})\n", s.file, s.address));
        out.push_str(&http_load(r));
    }
    if let Some((outcome, file)) = report.deciding_verdict() {
        out.push('\n');
        push_wrapped(
            &mut out,
            &format!(
                "verdict: {} — the shards split differently, so the merge takes the worst of their verdicts ({})",
                outcome.heading(),
                file.unwrap_or("the union")
            ),
            WIDTH,
            "  ",
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrapped(line: &str, width: usize, hanging: &str) -> String {
        let mut out = String::new();
        push_wrapped(&mut out, line, width, hanging);
        out
    }

    #[test]
    fn prose_wraps_at_spaces_under_a_hanging_indent() {
        assert_eq!(
            wrapped("  one two three four", 10, "    "),
            "  one two\n    three\n    four\n"
        );
        // Counted in characters, not bytes: "±" is one column.
        assert_eq!(wrapped("± ± ± ±", 7, ""), "± ± ± ±\n");
        // A word wider than the line stays whole, on a line of its own.
        assert_eq!(
            wrapped("a https://example.com/long b", 8, ""),
            "a\nhttps://example.com/long\nb\n"
        );
        assert_eq!(wrapped("short", 100, "  "), "short\n");
        assert_eq!(
            wrapped("expected ± 1 points", 11, ""),
            "expected\n± 1 points\n"
        );
        assert_eq!(
            wrapped("expected 100 ± 1 %: in", 14, ""),
            "expected 100\n± 1 %: in\n"
        );
        assert_eq!(
            wrapped("see `canarysim plan 0%` now", 12, ""),
            "see\n`canarysim plan 0%`\nnow\n"
        );
    }

    #[test]
    fn a_table_aligns_its_columns_to_the_widest_cell() {
        let rows = vec![
            vec!["blue".to_string(), "79.96".to_string()],
            vec!["yellow".to_string(), "100.00".to_string()],
        ];
        let text = table(&[("VERSION", Align::Left), ("%", Align::Right)], &rows);
        assert_eq!(text, "VERSION       %\nblue      79.96\nyellow   100.00\n");
    }
}
