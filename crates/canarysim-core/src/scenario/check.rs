//! `canarysim check`: no scenario to write. Each canary Rollout of a set of manifests is
//! played through the scenario `canarysim init` writes for it (deploy, a new image, every
//! step, a load and a verdict at each pause), once as written and once without a mesh
//! (`compare`), and the lint findings about its objects are set beside it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::compare::compared;
use super::init::{ManifestSource, Options, scenario_with};
use super::plan::{Files, Plan, StepKind};
use crate::lint::{Diagnostic, Severity};
use crate::model::{Kind, Manifest};
pub use crate::outcome::{CheckReport, CheckRow, CheckSettings, Finding, RolloutCheck};

/// Where the scenario played for one Rollout is said to be: it has no file, and the
/// manifests' paths are read as given (relative to the working folder).
const SCENARIO_PATH: &str = "canarysim-check";

/// The JSON Schema (draft 2020-12) of `canarysim check --format json`:
/// `schemas/check.schema.json` is this, and a test keeps the two equal.
pub fn json_schema() -> Value {
    let mut schema =
        serde_json::to_value(schemars::schema_for!(CheckReport)).expect("a schema is plain JSON");
    schema["$id"] = "https://github.com/canarysim/canarysim/schemas/check.schema.json".into();
    schema["title"] = "canarysim check report".into();
    schema
}

/// What `check` sends at each pause.
#[derive(Debug, Clone)]
pub struct Settings {
    pub requests: u64,
    /// None: `init`'s choice (the scenario format's default, or per client 100,000).
    pub connections: Option<u32>,
    pub seed: Option<u64>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            requests: super::init::REQUESTS,
            connections: None,
            seed: None,
        }
    }
}

/// The scenario `init` wrote, at [`SCENARIO_PATH`]; every other file from `files`.
struct WithScenario<'a> {
    text: String,
    files: &'a dyn Files,
}

impl Files for WithScenario<'_> {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        if path == Path::new(SCENARIO_PATH) {
            Ok(self.text.clone())
        } else {
            self.files.read(path)
        }
    }
}

/// Checks every canary Rollout of `sources` (each source with the objects it holds; a
/// `File` source's path is read through `files`), with `findings` from `canarysim lint`
/// over the same manifests. Err when there is nothing to check or a scenario cannot load.
pub fn check(
    sources: &[(ManifestSource, Vec<Manifest>)],
    files: &dyn Files,
    findings: &[Diagnostic],
    settings: &Settings,
) -> Result<CheckReport, String> {
    let manifests: Vec<&Manifest> = sources.iter().flat_map(|(_, m)| m).collect();
    let mut left_out = std::collections::BTreeSet::new();
    let mut rollouts = Vec::new();
    let mut attributed = vec![false; findings.len()];
    let mut seed = None;
    let mut seen = std::collections::BTreeSet::new();
    let keys: Vec<(String, String)> = manifests
        .iter()
        .filter(|m| m.object.kind == Kind::Rollout)
        .map(|m| {
            (
                m.object.namespace().to_string(),
                m.object.name().to_string(),
            )
        })
        .filter(|key| seen.insert(key.clone()))
        .collect();
    if keys.is_empty() {
        return Err("no Rollout among the manifests: nothing to check".into());
    }
    for (namespace, name) in keys {
        let options = Options {
            requests: Some(settings.requests),
            connections: settings.connections,
            only: Some((namespace.clone(), name.clone())),
            resume: None,
        };
        let written = match scenario_with(sources, &options) {
            Ok(w) => w,
            Err(why) => {
                left_out.insert(why);
                continue;
            }
        };
        left_out.extend(written.notes);
        let Some(rollout) = manifests.iter().find(|m| {
            m.object.kind == Kind::Rollout
                && m.object.namespace() == namespace
                && m.object.name() == name
        }) else {
            continue;
        };
        let files = WithScenario {
            text: written.text,
            files,
        };
        let mut plan = super::load_runnable(&PathBuf::from(SCENARIO_PATH), &files)
            .map_err(|e| e.to_string())?;
        let notes = skip_missing_analysis(&mut plan, &name);
        let mine = own_findings(rollout, &manifests, findings, &mut attributed);
        let result = play(&plan, &name, settings, notes, mine, rollout);
        seed = Some(settings.seed.unwrap_or(plan.seed));
        rollouts.push(result);
    }
    let other_findings: Vec<Finding> = findings
        .iter()
        .zip(&attributed)
        .filter(|(_, mine)| !**mine)
        .map(|(d, _)| finding(d))
        .collect();
    let passed = !rollouts.is_empty()
        && rollouts.iter().all(|r| r.passed)
        && other_findings.iter().all(|f| f.severity != Severity::Error);
    if rollouts.is_empty() {
        return Err(format!(
            "no Rollout canarysim can check: {}",
            left_out.into_iter().collect::<Vec<_>>().join("; ")
        ));
    }
    Ok(CheckReport {
        settings: CheckSettings {
            requests: settings.requests,
            connections: settings
                .connections
                .unwrap_or(crate::load::Traffic::default().connections),
            seed: seed.unwrap_or_default(),
            within_points: super::init::WITHIN_POINTS,
            confidence: super::init::CONFIDENCE,
        },
        rollouts,
        left_out: left_out.into_iter().collect(),
        other_findings,
        passed,
    })
}

/// Plays one Rollout's plan with and without the mesh and reads the verdict of each pause.
fn play(
    plan: &Plan,
    name: &str,
    settings: &Settings,
    notes: Vec<String>,
    findings: Vec<Finding>,
    rollout: &Manifest,
) -> RolloutCheck {
    let c = compared(plan, settings.seed, Some(name));
    let rows: Vec<CheckRow> = c
        .report
        .rows
        .iter()
        .zip(&c.contexts)
        .map(|(row, context)| {
            // `init` writes the verdict right after the load.
            let split = c
                .mesh
                .steps
                .iter()
                .find(|s| s.index == row.step + 1 && s.split.is_some());
            // A blue-green row's SET is the share the verdict expects, not the switch as
            // the controller made it: an early switch shows SET 0 beside observed 100.
            let set_weight = context
                .service
                .as_ref()
                .and_then(|_| expected_share(plan, row.step, &context.version))
                .unwrap_or(row.set_weight);
            CheckRow {
                step: context.canary_step,
                service: context.service.clone(),
                time: row.time.clone(),
                set_weight,
                router_weight: row.virtual_service_weight,
                observed: row.mesh.clone(),
                verdict: split.and_then(|s| s.split.as_ref()).map(|v| v.outcome),
                advice: split
                    .and_then(|s| s.split.as_ref())
                    .map(advice)
                    .unwrap_or_default(),
                pod_ratio: row.pod_ratio,
                no_mesh: row.no_mesh.clone(),
            }
        })
        .collect();
    let view = c.mesh.final_views.iter().find(|v| v.name == name);
    let mut notes = notes;
    let spec = rollout
        .object
        .spec_as::<crate::model::rollout::RolloutSpec>()
        .ok();
    let max = spec
        .as_ref()
        .and_then(|s| s.canary())
        .map(|c| c.max_traffic_weight());
    if let Some(max) = max.filter(|m| *m != 100) {
        notes.push(format!(
            "maxTrafficWeight {max}: SET and ROUTER are of {max}, so the share each pause must reach is SET ÷ {max}"
        ));
    }
    if rows
        .iter()
        .any(|r| r.observed.unit == crate::verify::SplitUnit::Client)
    {
        let clients = settings.connections.unwrap_or(super::init::CLIENTS);
        notes.push(format!(
            "session affinity (affinity: cookie): SHARE is of clients, each of the loads' {clients} connections a client pinned by its cookie and one draw"
        ));
    }
    notes.extend(c.report.notes.iter().cloned());
    // A wrong share is the table's own row; what else failed (a wait that timed out, a
    // rollout that degraded) is said apart.
    let failures = c.failures_beside_splits.clone();
    let passed = failures.is_empty()
        && rows
            .iter()
            .all(|r: &CheckRow| r.verdict == Some(crate::verify::Outcome::Pass))
        && findings.iter().all(|f| f.severity != Severity::Error);
    RolloutCheck {
        name: name.to_string(),
        namespace: rollout.object.namespace().to_string(),
        location: {
            let at = rollout.locate("");
            format!("{at}{}", at.template_note())
        },
        router: c
            .contexts
            .first()
            .map(|r| r.path.clone())
            .unwrap_or_default(),
        steps: rollout.object.spec()["strategy"]["canary"]["steps"]
            .as_array()
            .map_or(0, Vec::len),
        rows,
        findings,
        notes,
        phase: view.map(|v| v.status.clone()).unwrap_or_default(),
        message: view.map(|v| v.message.clone()).unwrap_or_default(),
        failures,
        passed,
    }
}

/// The share of `version` the `expect_split` right after load step `load_step` (1-based)
/// expects, in whole points: named, or what the other versions named leave.
fn expected_share(plan: &Plan, load_step: usize, version: &str) -> Option<i32> {
    let StepKind::ExpectSplit(split) = &plan.steps.get(load_step)?.kind else {
        return None;
    };
    let share = match split.shares.get(version) {
        Some(share) => share.0,
        None => 100.0 - split.shares.values().map(|s| s.0).sum::<f64>(),
    };
    Some(share.round() as i32)
}

/// The findings located in the Rollout's own document or in those of the objects it names
/// (its Services, VirtualServices, DestinationRule, analysis templates); marks them taken.
fn own_findings(
    rollout: &Manifest,
    manifests: &[&Manifest],
    findings: &[Diagnostic],
    taken: &mut [bool],
) -> Vec<Finding> {
    let named = named_objects(rollout);
    let ns = rollout.object.namespace();
    let mine: Vec<&Manifest> = manifests
        .iter()
        .copied()
        .filter(|m| {
            m.object.namespace() == ns
                && (std::ptr::eq(*m, rollout)
                    || named
                        .iter()
                        .any(|(kind, n)| *kind == m.object.kind && n == m.object.name()))
        })
        .collect();
    let mut out = Vec::new();
    for (i, d) in findings.iter().enumerate() {
        if owner(d, manifests).is_some_and(|o| mine.iter().any(|m| std::ptr::eq(*m, o))) {
            taken[i] = true;
            out.push(finding(d));
        }
    }
    out
}

/// The manifest a finding is about: the last document of its file that starts at or
/// before the finding's line.
fn owner<'m>(d: &Diagnostic, manifests: &[&'m Manifest]) -> Option<&'m Manifest> {
    manifests
        .iter()
        .copied()
        .filter(|m| {
            let at = m.locate("");
            at.file == d.location.file && at.line <= d.location.line
        })
        .max_by_key(|m| m.locate("").line)
}

/// The objects a Rollout names, by kind.
fn named_objects(rollout: &Manifest) -> Vec<(Kind, String)> {
    let canary = &rollout.object.spec()["strategy"]["canary"];
    let istio = &canary["trafficRouting"]["istio"];
    let mut out = Vec::new();
    let mut add = |kind: Kind, v: &Value| {
        if let Some(name) = v.as_str() {
            // `name.namespace` or a host form: the object's own name comes first.
            out.push((kind, name.split('.').next().unwrap_or(name).to_string()));
        }
    };
    add(Kind::Service, &canary["stableService"]);
    add(Kind::Service, &canary["canaryService"]);
    add(Kind::VirtualService, &istio["virtualService"]["name"]);
    for vs in istio["virtualServices"].as_array().into_iter().flatten() {
        add(Kind::VirtualService, &vs["name"]);
    }
    add(Kind::DestinationRule, &istio["destinationRule"]["name"]);
    let blue_green = &rollout.object.spec()["strategy"]["blueGreen"];
    add(Kind::Service, &blue_green["activeService"]);
    add(Kind::Service, &blue_green["previewService"]);
    let steps = canary["steps"].as_array().into_iter().flatten();
    let analyses = steps.map(|s| &s["analysis"]).chain([
        &canary["analysis"],
        &blue_green["prePromotionAnalysis"],
        &blue_green["postPromotionAnalysis"],
    ]);
    for template in analyses.flat_map(|a| template_refs(&a["templates"])) {
        add(template.0, &Value::String(template.1));
    }
    out
}

/// The templates a list of template references names (an analysis's or a template's
/// `templates`), by kind.
fn template_refs(templates: &Value) -> Vec<TemplateKey> {
    let refs = templates.as_array().into_iter().flatten();
    refs.filter_map(|t| {
        let kind = if t["clusterScope"].as_bool() == Some(true) {
            Kind::ClusterAnalysisTemplate
        } else {
            Kind::AnalysisTemplate
        };
        Some((kind, t["templateName"].as_str()?.to_string()))
    })
    .collect()
}

/// An AnalysisTemplate or ClusterAnalysisTemplate, by kind and name.
type TemplateKey = (Kind, String);

/// What canarysim can do with the analysis templates among a plan's manifests.
struct TemplateSupport {
    present: Vec<TemplateKey>,
    /// Why a template cannot be measured here: a provider neither run nor scripted.
    unrunnable: BTreeMap<TemplateKey, String>,
    /// What measuring a template here assumes: a Job's outcome, scripted.
    assumed: BTreeMap<TemplateKey, String>,
}

impl TemplateSupport {
    fn of(plan: &Plan) -> Self {
        let mut support = TemplateSupport {
            present: Vec::new(),
            unrunnable: BTreeMap::new(),
            assumed: BTreeMap::new(),
        };
        for m in plan.manifests.iter().filter(|m| {
            matches!(
                m.object.kind,
                Kind::AnalysisTemplate | Kind::ClusterAnalysisTemplate
            )
        }) {
            support
                .present
                .push((m.object.kind, m.object.name().to_string()));
        }
        for (m, metric) in super::init::template_metrics(&plan.manifests) {
            let key = (m.object.kind, m.object.name().to_string());
            let metric_name = metric["name"].as_str().unwrap_or_default();
            let provider = crate::analysis::provider::kind(&metric["provider"]).unwrap_or("no");
            let scripted = plan.cluster.analysis_results.contains_key(metric_name);
            if provider == "job" && scripted {
                support.assumed.entry(key).or_insert(format!(
                    "metric '{metric_name}' is a Job, which canarysim does not run: each job is assumed to succeed"
                ));
            } else if provider != "prometheus" && !scripted {
                support.unrunnable.entry(key).or_insert(format!(
                    "metric '{metric_name}' uses the {provider} provider, which canarysim does not run"
                ));
            }
        }
        support.through_nested_templates(plan);
        support
    }

    /// A template that nests another inherits what keeps that one from running, or what it
    /// assumes (nesting is followed as deep as it goes).
    fn through_nested_templates(&mut self, plan: &Plan) {
        let nesting: Vec<(TemplateKey, Vec<TemplateKey>)> = plan
            .manifests
            .iter()
            .filter(|m| {
                self.present
                    .contains(&(m.object.kind, m.object.name().to_string()))
            })
            .map(|m| {
                let key = (m.object.kind, m.object.name().to_string());
                (key, template_refs(&m.object.spec()["templates"]))
            })
            .filter(|(_, nested)| !nested.is_empty())
            .collect();
        // Each pass settles at least one more level; a cycle stops at the count.
        for _ in 0..=nesting.len() {
            let mut changed = false;
            for (outer, nested) in &nesting {
                for inner in nested {
                    let label = format!("{:?} '{}'", inner.0, inner.1);
                    let why = if !self.present.contains(inner) {
                        Some(format!("it nests {label}, not among the manifests"))
                    } else {
                        self.unrunnable
                            .get(inner)
                            .map(|w| format!("it nests {label}: {w}"))
                    };
                    if let Some(why) = why.filter(|_| !self.unrunnable.contains_key(outer)) {
                        self.unrunnable.insert(outer.clone(), why);
                        changed = true;
                    }
                    if let Some(w) = self.assumed.get(inner).cloned() {
                        if !self.assumed.contains_key(outer) {
                            self.assumed
                                .insert(outer.clone(), format!("it nests {label}: {w}"));
                            changed = true;
                        }
                    }
                }
            }
            if !changed {
                break;
            }
        }
    }

    /// Why this analysis cannot run, if it cannot.
    fn cannot_run(&self, analysis: &Value) -> Option<String> {
        self.reasons(analysis, |t| {
            if !self.present.contains(t) {
                Some(" is not among the manifests".to_string())
            } else {
                self.unrunnable.get(t).map(|why| format!(": {why}"))
            }
        })
    }

    /// What running this analysis assumes, if anything.
    fn assumes(&self, analysis: &Value) -> Option<String> {
        self.reasons(analysis, |t| {
            self.assumed.get(t).map(|why| format!(": {why}"))
        })
    }

    /// Each template the analysis names, labelled, followed by what `about` says of it.
    fn reasons(
        &self,
        analysis: &Value,
        about: impl Fn(&TemplateKey) -> Option<String>,
    ) -> Option<String> {
        let wanted = template_refs(&analysis["templates"]);
        let reasons: Vec<String> = wanted
            .iter()
            .filter_map(|t| {
                let said = about(t)?;
                Some(format!("{:?} '{}'{said}", t.0, t.1))
            })
            .collect();
        (!reasons.is_empty()).then(|| reasons.join("; "))
    }

    /// Notes what an analysis skips or assumes; true when it cannot run.
    fn describe(&self, what: &str, analysis: &Value, notes: &mut Vec<String>) -> bool {
        if let Some(why) = self.cannot_run(analysis) {
            notes.push(format!("{what} skipped: {why}"));
            return true;
        }
        if let Some(why) = self.assumes(analysis) {
            notes.push(format!("{what}: {why}"));
        }
        false
    }
}

/// Analysis that cannot run here is skipped, each said in a note: a template not among the
/// manifests (Argo would report the Rollout InvalidSpec), or a metric whose provider
/// canarysim does not run and nothing scripts (a web call, a Datadog query). Such a step
/// becomes one that keeps the weight; such background or blue-green promotion analysis is
/// dropped. A Job's outcome is scripted Successful by `init`: the analysis runs, with a note.
fn skip_missing_analysis(plan: &mut Plan, name: &str) -> Vec<String> {
    let support = TemplateSupport::of(plan);
    let mut notes = Vec::new();
    let Some(rollout) = plan
        .manifests
        .iter_mut()
        .find(|m| m.object.kind == Kind::Rollout && m.object.name() == name)
    else {
        return notes;
    };
    if let Some(bg) = rollout
        .object
        .value
        .pointer_mut("/spec/strategy/blueGreen")
        .and_then(Value::as_object_mut)
    {
        for (field, what) in [
            ("prePromotionAnalysis", "pre-promotion analysis"),
            ("postPromotionAnalysis", "post-promotion analysis"),
        ] {
            let skipped = bg
                .get(field)
                .is_some_and(|a| support.describe(what, a, &mut notes));
            if skipped {
                bg.remove(field);
            }
        }
    }
    let Some(canary) = rollout
        .object
        .value
        .pointer_mut("/spec/strategy/canary")
        .and_then(Value::as_object_mut)
    else {
        return notes;
    };
    let skipped = canary
        .get("analysis")
        .is_some_and(|a| support.describe("background analysis", a, &mut notes));
    if skipped {
        canary.remove("analysis");
    }
    let mut weight = 0;
    for (i, step) in canary
        .get_mut("steps")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .enumerate()
    {
        if let Some(w) = step["setWeight"].as_i64() {
            weight = w;
        }
        let Some(analysis) = step.get("analysis") else {
            continue;
        };
        let what = format!("step {i}: analysis");
        if let Some(why) = support.cannot_run(analysis) {
            // Same step count, same weight: the steps after it keep their indexes.
            *step = serde_json::json!({ "setWeight": weight });
            notes.push(format!(
                "{what} skipped (the weight stays {weight}%): {why}"
            ));
        } else if let Some(why) = support.assumes(analysis) {
            notes.push(format!("{what}: {why}"));
        }
    }
    notes
}

/// What would decide an inconclusive share; empty when decided.
fn advice(v: &crate::verify::SplitVerdict) -> String {
    if v.outcome != crate::verify::Outcome::Inconclusive {
        return String::new();
    }
    // Per connection or per client, each connection of the load that is answered is one
    // draw: more connections, and requests enough for each to send.
    let flag = match v.unit {
        crate::verify::SplitUnit::Request => "`--requests`",
        _ => "`--connections`, with `--requests` several times as many",
    };
    match v.units_to_decide {
        Some(n) => format!(
            "inconclusive: about {n} {} in all would decide if the share held ({flag})",
            v.unit.plural()
        ),
        None => "inconclusive: the share lies on the tolerance's edge; no amount of traffic \
                 would decide it at this tolerance"
            .into(),
    }
}

fn finding(d: &Diagnostic) -> Finding {
    // The templates may live elsewhere (installed apart, cluster-scoped): `check` skips
    // that analysis and says so, rather than failing what it can still check.
    let missing_template =
        d.check == crate::lint::Check::Reference && d.message.contains("AnalysisTemplate '");
    let (severity, why) = match d.severity {
        Severity::Error if missing_template => (
            Severity::Warning,
            "; check skipped this analysis, a cluster without the template reports the Rollout InvalidSpec",
        ),
        severity => (severity, ""),
    };
    Finding {
        location: d.location.to_string(),
        severity,
        message: format!("{}{why}{}", d.message, d.location.template_note()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rows_set_share_is_the_one_its_verdict_expects() {
        let files = WithScenario {
            text: "name: t\ntraffic: {host: demo}\nsteps:\n  - load: {requests: 10}\n  - expect_split: {blue: 100%}\n  - load: {requests: 10}\n  - expect_split: {blue: 70%, green: 30%}\n  - load: {requests: 10}\n  - wait: 1s\n".into(),
            files: &super::super::plan::Disk,
        };
        let plan = super::super::load_runnable(Path::new(SCENARIO_PATH), &files).unwrap();
        // Steps are numbered from 1: each load's verdict is the plan's next entry.
        assert_eq!(expected_share(&plan, 1, "green"), Some(0));
        assert_eq!(expected_share(&plan, 1, "blue"), Some(100));
        assert_eq!(expected_share(&plan, 3, "green"), Some(30));
        assert_eq!(expected_share(&plan, 5, "green"), None);
        assert_eq!(expected_share(&plan, 7, "green"), None);
    }
}
