//! One step's measurement: waiting for the data plane to take the new weight, the load,
//! the verdict, and the row.

use std::time::Instant;

use super::{COMPLETION_REQUESTS, FollowError, Follower, Reading, StepRow, TICK};
use crate::load::http::Extent;
use crate::model::Object;
use crate::real_load::Expectations;
use crate::verify::Outcome;

impl Follower<'_, '_, '_> {
    /// Settles, loads and judges one step; the row is reported. A step whose router
    /// weight cannot be read, or whose load cannot be sent, gets a row that is not judged.
    pub(super) fn measure_step(&mut self, before: Reading) -> Result<Outcome, FollowError> {
        let version = self.version(&before.standing)?;
        let Some(weight) = before.router_weight() else {
            let note = match before.routes.first() {
                Some(r) => format!("not judged: the weights of {} add up to nothing", r.label),
                None => format!(
                    "not judged: no router object of {} carries a weight to the canary: {}",
                    self.o.rollout,
                    self.missing_now()
                ),
            };
            return Ok(self.unjudged(&before, &note));
        };
        let previous = before.as_percent(before.standing.previous_set_weight);
        let (settled, report) = match self.settle_and_load(&version, weight, previous) {
            Ok(m) => m,
            Err(e) => return Ok(self.unjudged(&before, &format!("not judged: {e}"))),
        };
        let after = self.read_rollout().map(|(_, r)| r);
        let moved = after.as_ref().map_or(true, |a| before.moved(a));
        let mut row = self.row(&before, &version, Some(weight), settled, &report);
        if moved {
            row.verdict = Some(Outcome::Inconclusive);
            row.note = "not judged: the rollout or its router object changed during the load; a smaller --requests, or a longer pause, would decide".into();
        } else if !before.holds_set_weight() {
            let written = before.written().unwrap_or_default();
            row.note = format!(
                "the router object holds weight {written} ({weight} %), not the step's {}: the load is judged against the router object",
                before.standing.set_weight
            );
        } else if let Some(detail) = before.routes.first().and_then(|r| r.detail.as_ref()) {
            row.note = format!("{detail}: the load is judged against {weight} %");
        }
        let outcome = row.verdict.unwrap_or(Outcome::Inconclusive);
        self.emit(row);
        Ok(outcome)
    }

    /// A row for a step that is not judged; its outcome.
    fn unjudged(&mut self, reading: &Reading, note: &str) -> Outcome {
        let mut row = self.bare_row(Some(reading), note);
        row.verdict = Some(Outcome::Inconclusive);
        self.emit(row);
        Outcome::Inconclusive
    }

    /// After the promotion every request should reach the new version.
    pub(super) fn measure_completion(&mut self, rollout: &Object) -> Result<(), FollowError> {
        let reading = self.read(rollout)?;
        let version = self.version(&reading.standing)?;
        // The data plane moves from the last step's weight to all on the new pods.
        let previous = reading.as_percent(reading.standing.last_held_weight);
        let (settled, report) = match self.settle_and_load(&version, 100.0, previous) {
            Ok(m) => m,
            Err(e) => {
                let mut row = self.bare_row(Some(&reading), &format!("completed; not judged: {e}"));
                row.step = None;
                row.verdict = Some(Outcome::Inconclusive);
                self.emit(row);
                return Ok(());
            }
        };
        let mut row = self.row(&reading, &version, None, settled, &report);
        row.step = None;
        row.expected = Some(100.0);
        row.note = format!("completed: every request should reach {version}");
        if self.read_rollout().map_or(true, |(_, now)| {
            now.standing.current_hash != reading.standing.current_hash
        }) {
            row.verdict = Some(Outcome::Inconclusive);
            row.note = "not judged: a new update started during the load".into();
        }
        self.emit(row);
        Ok(())
    }

    /// [`Self::settle`] from `previous` to `weight`, then [`Self::load`]: the seconds waited
    /// and the load's report.
    fn settle_and_load(
        &self,
        version: &str,
        weight: f64,
        previous: f64,
    ) -> Result<(f64, crate::outcome::HttpLoadReport), FollowError> {
        let settled = self.settle(version, weight, previous)?;
        Ok((settled, self.load(version, weight)?))
    }

    /// Waits until two probes in a row find the share of `version` nearer `weight` than
    /// `previous` (the data plane has taken the change; one probe alone could be noise),
    /// at most `--settle`. Returns the seconds waited.
    fn settle(&self, version: &str, weight: f64, previous: f64) -> Result<f64, FollowError> {
        let start = Instant::now();
        if previous == weight {
            return Ok(0.0);
        }
        let probe = (self.o.requests / 50).clamp(100, 1000);
        let mut nearer = 0;
        loop {
            let mut load = self.o.load.clone();
            load.extent = Extent::new(Some(probe), None).map_err(FollowError::Load)?;
            let outcome = crate::load::http::send(&load, &|_| {})
                .map_err(|e| FollowError::Load(e.to_string()))?;
            let t = &outcome.tally;
            let classified = t.classified().max(1);
            let share = t
                .versions
                .iter()
                .filter(|v| v.version == version)
                .map(|v| v.responses)
                .sum::<u64>() as f64
                * 100.0
                / classified as f64;
            nearer = if (share - weight).abs() < (share - previous).abs() {
                nearer + 1
            } else {
                0
            };
            if nearer == 2 {
                return Ok(start.elapsed().as_secs_f64());
            }
            if start.elapsed() > self.o.settle {
                (self.hooks.say)(&format!(
                    "the data plane still gives {version} {share:.1} % after --settle {}: measuring anyway",
                    humantime::format_duration(self.o.settle)
                ));
                return Ok(start.elapsed().as_secs_f64());
            }
            std::thread::sleep(TICK);
        }
    }

    /// The load of one step, judged against `version` at `weight` percent. It stops as
    /// soon as the sequential test decides (`load --until-decided`), at most `--requests`.
    /// Each request on a connection of its own when every answer should come from one
    /// version: one version on kept-alive connections cannot tell a gateway that picks per
    /// connection, so its few connections would be the only draws.
    fn load(
        &self,
        version: &str,
        weight: f64,
    ) -> Result<crate::outcome::HttpLoadReport, FollowError> {
        let mut load = self.o.load.clone();
        let requests = if weight >= 100.0 {
            load.traffic.keepalive = false;
            self.o.requests.min(COMPLETION_REQUESTS)
        } else {
            self.o.requests
        };
        load.extent = Extent::new(Some(requests), None).map_err(FollowError::Load)?;
        load.traffic.stop = Some(crate::load::StopRule {
            key: version.to_string(),
            share: weight / 100.0,
            test: crate::load::StopTest::Verdict {
                within: self.o.within / 100.0,
                confidence: self.o.confidence,
            },
        });
        (self.hooks.say)(&format!(
            "sending up to {requests} requests to {}, expecting {version} at {weight} %",
            self.o.url
        ));
        let progress = crate::progress::LoadProgress::new(self.o.quiet, Some(requests), None);
        let outcome = crate::load::http::send(&load, &|s| progress.update(s));
        progress.finish();
        let outcome = outcome.map_err(|e| FollowError::Load(e.to_string()))?;
        let expect = Expectations {
            shares: vec![(version.to_string(), weight / 100.0)],
            within: self.o.within,
            confidence: self.o.confidence,
        };
        Ok(crate::real_load::judge(
            &self.o.url,
            &crate::real_load::LoadShape::of(&load),
            &outcome,
            Some(&expect),
            None,
        ))
    }

    fn row(
        &self,
        reading: &Reading,
        version: &str,
        router_weight: Option<f64>,
        settled: f64,
        report: &crate::outcome::HttpLoadReport,
    ) -> StepRow {
        let s = &reading.standing;
        let arm = report.verdict.as_ref().and_then(|v| v.split.arms.first());
        StepRow {
            time: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            step: s.step,
            steps: s.steps,
            phase: s.phase.clone(),
            set_weight: s.share_meant(s.set_weight),
            router_weight,
            route: reading
                .routes
                .first()
                .map(|r| r.label.clone())
                .unwrap_or_default(),
            version: version.to_string(),
            expected: arm.map(|a| a.expected_share * 100.0),
            observed: arm.map(|a| a.observed_share * 100.0),
            interval: arm.map(|a| [a.interval.lo * 100.0, a.interval.hi * 100.0]),
            unit: Some(report.unit),
            effective_n: report.effective_n,
            sent: report.sent,
            settle_seconds: settled,
            verdict: report.verdict.as_ref().map(|v| v.outcome),
            note: report
                .verdict
                .as_ref()
                .map(|v| v.advice.clone())
                .unwrap_or_default(),
        }
    }

    /// The row that ends the watch without a load.
    pub(super) fn end_row(&mut self, reading: Option<&Reading>, note: &str) {
        let row = self.bare_row(reading, note);
        self.emit(row);
    }

    /// A row without a load: what `reading` says, and `note`.
    pub(super) fn bare_row(&self, reading: Option<&Reading>, note: &str) -> StepRow {
        let s = reading.map(|r| r.standing.clone());
        StepRow {
            time: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            step: s.as_ref().and_then(|s| s.step),
            steps: s.as_ref().map_or(0, |s| s.steps),
            phase: s.as_ref().map(|s| s.phase.clone()).unwrap_or_default(),
            set_weight: s.as_ref().map_or(0.0, |s| s.share_meant(s.set_weight)),
            router_weight: reading.and_then(Reading::router_weight),
            route: reading
                .and_then(|r| r.routes.first())
                .map(|r| r.label.clone())
                .unwrap_or_default(),
            version: String::new(),
            expected: None,
            observed: None,
            interval: None,
            unit: None,
            effective_n: 0,
            sent: 0,
            settle_seconds: 0.0,
            verdict: None,
            note: note.to_string(),
        }
    }
}
