//! `canarysim load job`: the manifests that run a load in shards inside a cluster. A
//! Service and a Job for the coordinator (`load coordinate`), and an Indexed Job whose pod `I`
//! sends shard `I/N` (`completionMode: Indexed`; the index read from the pod's
//! `batch.kubernetes.io/job-completion-index` annotation). Or the same two Jobs as the
//! metrics of an Argo Rollouts AnalysisTemplate: Argo runs both, and the coordinator's exit
//! code (0 pass) is the verdict.

use serde_json::{Value, json};

/// What the manifests need.
pub struct JobPlan<'a> {
    pub name: &'a str,
    pub namespace: Option<&'a str>,
    pub image: &'a str,
    pub workers: u32,
    /// `load coordinate`'s wait for every result, e.g. `1h`.
    pub timeout: &'a str,
    /// `load`'s URL and flags, as the user gave them.
    pub load: &'a [String],
    /// `--expect`, `--within`, `--confidence`, `--unit` among them: the coordinator's.
    pub verdict: Vec<String>,
}

/// The port the coordinator listens on in its pod.
const PORT: u32 = 8080;

impl JobPlan<'_> {
    fn metadata(&self, name: &str, role: &str) -> Value {
        let mut m = json!({
            "name": name,
            "labels": {
                "app.kubernetes.io/name": "canarysim-load",
                "app.kubernetes.io/instance": self.name,
                "canarysim.io/role": role,
            },
        });
        if let Some(ns) = self.namespace {
            m["namespace"] = json!(ns);
        }
        m
    }

    fn coordinator_name(&self) -> String {
        format!("{}-coordinator", self.name)
    }

    /// The Service the workers reach the coordinator through.
    pub fn service(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": self.metadata(&self.coordinator_name(), "coordinator"),
            "spec": {
                "selector": {
                    "app.kubernetes.io/instance": self.name,
                    "canarysim.io/role": "coordinator",
                },
                "ports": [{"name": "http", "port": PORT, "targetPort": PORT}],
            },
        })
    }

    /// The coordinator's Job spec: one pod, never retried (its exit code is the verdict).
    pub fn coordinator_spec(&self) -> Value {
        let mut args = vec![
            "load".to_string(),
            "coordinate".into(),
            "--expect-workers".into(),
            self.workers.to_string(),
            "--listen".into(),
            format!("0.0.0.0:{PORT}"),
            "--timeout".into(),
            self.timeout.to_string(),
        ];
        args.extend(self.verdict.iter().cloned());
        json!({
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": self.metadata("", "coordinator")["labels"]},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "coordinator",
                        "image": self.image,
                        "command": ["canarysim"],
                        "args": args,
                        "ports": [{"name": "http", "containerPort": PORT}],
                    }],
                },
            },
        })
    }

    /// The workers' Indexed Job spec: pod `I` sends shard `I/N`, restarted while the
    /// coordinator is not reachable yet.
    pub fn workers_spec(&self) -> Value {
        let mut args = vec!["load".to_string()];
        args.extend(self.load.iter().cloned());
        args.extend([
            "--quiet".to_string(),
            "--shard".into(),
            format!("$(SHARD_INDEX)/{}", self.workers),
            "--coordinator".into(),
            format!("http://{}:{PORT}", self.coordinator_name()),
        ]);
        json!({
            "completionMode": "Indexed",
            "completions": self.workers,
            "parallelism": self.workers,
            "backoffLimit": 6 * self.workers,
            "template": {
                "metadata": {"labels": self.metadata("", "worker")["labels"]},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "containers": [{
                        "name": "worker",
                        "image": self.image,
                        "command": ["canarysim"],
                        "args": args,
                        "env": [{
                            "name": "SHARD_INDEX",
                            "valueFrom": {"fieldRef": {
                                "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']",
                            }},
                        }],
                    }],
                },
            },
        })
    }

    /// The Service and the two Jobs, for `kubectl apply`.
    pub fn manifests(&self) -> Vec<Value> {
        let job = |name: String, role: &str, spec: Value| {
            json!({
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": self.metadata(&name, role),
                "spec": spec,
            })
        };
        vec![
            self.service(),
            job(
                self.coordinator_name(),
                "coordinator",
                self.coordinator_spec(),
            ),
            job(
                format!("{}-workers", self.name),
                "worker",
                self.workers_spec(),
            ),
        ]
    }

    /// The Service, and an AnalysisTemplate whose two `job` metrics are the coordinator and
    /// the workers: the analysis passes when the coordinator's verdict does.
    pub fn analysis_template(&self) -> Vec<Value> {
        let metric = |name: &str, spec: Value| {
            json!({
                "name": name,
                "provider": {"job": {"spec": spec}},
            })
        };
        vec![
            self.service(),
            json!({
                "apiVersion": "argoproj.io/v1alpha1",
                "kind": "AnalysisTemplate",
                "metadata": self.metadata(self.name, "analysis"),
                "spec": {
                    "metrics": [
                        metric("split", self.coordinator_spec()),
                        metric("load", self.workers_spec()),
                    ],
                },
            }),
        ]
    }
}

/// Manifests as one YAML stream, after a comment saying what they are.
pub fn to_yaml(header: &str, manifests: &[Value]) -> String {
    let mut out = String::new();
    for line in header.lines() {
        out.push_str(&format!("# {line}\n"));
    }
    for m in manifests {
        out.push_str("---\n");
        out.push_str(&crate::model::yaml::to_yaml(m).unwrap_or_default());
    }
    out
}
