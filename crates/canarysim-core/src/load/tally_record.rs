//! A real load's [`Tally`] written out whole, so that loads sent from several machines add
//! up to exactly what one load of their union would have counted (`canarysim load merge`):
//! every count is added, the latency histograms are added (HdrHistogram, exact), and the
//! connections' evidence on the unit of randomisation is kept as the verdict uses it
//! (connections by how many answers they carried, and how many of those saw one version).
//! Averaging per-machine percentiles or shares would not be exact; adding these is.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ArmStats;
use super::tally::{Classes, Tally};
use crate::endpoints::Role;
use crate::verify::LatencyRecorder;

/// A [`Tally`] as a result file holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TallyRecord {
    /// Requests sent; the sum of `classes`.
    pub sent: u64,
    /// Requests per way of ending.
    pub classes: Classes,
    /// Answers no classifier could give a version.
    pub unclassified: u64,
    /// Those answers by status code.
    pub unclassified_status: BTreeMap<u16, u64>,
    /// Connections opened.
    pub connections: u64,
    /// Bytes of answer bodies read.
    pub body_bytes: u64,
    /// The latency of every answer, microseconds: HdrHistogram's V2 encoding in base64.
    pub latency: String,
    /// Per version, in the order first answered.
    pub versions: Vec<VersionRecord>,
    /// The connections that carried two answers or more, by how many they carried: what the
    /// unit of randomisation (request or connection) is measured from.
    pub multi_answer_connections: Vec<MultiAnswerConnections>,
}

/// One version's counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VersionRecord {
    /// The version as the classifier read it.
    pub version: String,
    /// Answers from it (any status).
    pub responses: u64,
    /// Its 5xx answers.
    pub errors: u64,
    /// Requests lost (reset, timeout) on a connection it had answered on last.
    pub lost: u64,
    /// Connections whose first classified answer came from it.
    pub connections: u64,
    /// Its answers' latency, microseconds: HdrHistogram V2, base64.
    pub latency: String,
}

/// How many connections carried `answers` classified answers, and how many of them were
/// answered by one version only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MultiAnswerConnections {
    pub answers: u64,
    pub connections: u64,
    pub one_version: u64,
}

impl TallyRecord {
    /// What `tally` counted.
    pub fn of(tally: &Tally) -> TallyRecord {
        TallyRecord {
            sent: tally.sent,
            classes: tally.classes.clone(),
            unclassified: tally.unclassified,
            unclassified_status: tally.unclassified_status.clone(),
            connections: tally.connections,
            body_bytes: tally.body_bytes,
            latency: tally.latency.to_base64_v2(),
            versions: tally
                .versions
                .iter()
                .map(|v| VersionRecord {
                    version: v.version.clone(),
                    responses: v.responses,
                    errors: v.errors,
                    lost: v.lost,
                    connections: v.connections,
                    latency: v.latency.to_base64_v2(),
                })
                .collect(),
            multi_answer_connections: tally
                .multi
                .iter()
                .map(
                    |(&answers, &(connections, one_version))| MultiAnswerConnections {
                        answers,
                        connections,
                        one_version,
                    },
                )
                .collect(),
        }
    }

    /// The tally again, after checking that the counts agree with each other (a file
    /// edited by hand, or cut short, is refused rather than judged). The error names the
    /// field.
    pub fn to_tally(&self) -> Result<Tally, String> {
        if self.classes.total() != self.sent {
            return Err(format!(
                "sent is {} but classes add up to {}",
                self.sent,
                self.classes.total()
            ));
        }
        let mut tally = Tally {
            sent: self.sent,
            classes: self.classes.clone(),
            unclassified: self.unclassified,
            unclassified_status: self.unclassified_status.clone(),
            connections: self.connections,
            body_bytes: self.body_bytes,
            latency: LatencyRecorder::from_base64_v2(&self.latency)
                .map_err(|e| format!("latency: {e}"))?,
            ..Tally::default()
        };
        for (i, v) in self.versions.iter().enumerate() {
            if self.versions[..i].iter().any(|w| w.version == v.version) {
                return Err(format!("versions: {:?} appears twice", v.version));
            }
            let mut stats = ArmStats::new(Role::Other, v.version.clone());
            stats.responses = v.responses;
            stats.errors = v.errors;
            stats.lost = v.lost;
            stats.connections = v.connections;
            stats.latency = LatencyRecorder::from_base64_v2(&v.latency)
                .map_err(|e| format!("versions[{i}].latency: {e}"))?;
            tally.versions.push(stats);
        }
        for m in &self.multi_answer_connections {
            if m.answers < 2 || m.one_version > m.connections {
                return Err(format!(
                    "multi_answer_connections: {} connection(s) with {} answers, {} of one version: expected at least 2 answers and no more of one version than connections",
                    m.connections, m.answers, m.one_version
                ));
            }
            let slot = tally.multi.entry(m.answers).or_default();
            slot.0 += m.connections;
            slot.1 += m.one_version;
        }
        let answered = tally.classified() + tally.unclassified;
        let statuses = tally.sent
            - tally.classes.refused
            - tally.classes.reset
            - tally.classes.timeout
            - tally.classes.protocol_error
            - tally.classes.deadline;
        if answered != statuses {
            return Err(format!(
                "the versions' responses and unclassified add up to {answered}, but classes count {statuses} answers"
            ));
        }
        Ok(tally)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::tally::Ending;

    /// A tally with two versions, keep-alive connections of mixed and single versions, and
    /// failures of several kinds.
    fn counted(seed: u64, requests: u64) -> Tally {
        let mut t = Tally::default();
        let mut conn = t.opened();
        for i in 0..requests {
            let k = i.wrapping_mul(2_654_435_761).wrapping_add(seed) % 97;
            if i % 7 == 0 {
                t.closed(std::mem::take(&mut conn));
                conn = t.opened();
            }
            let (ending, version) = match k {
                0 => (Ending::Reset, None),
                1 => (Ending::Timeout, None),
                2 => (Ending::Status(503), Some("yellow")),
                3 => (Ending::Status(200), None),
                4..=22 => (Ending::Status(200), Some("yellow")),
                _ => (Ending::Status(200), Some("blue")),
            };
            t.record(Some(&mut conn), ending, version, 100 + k * 37);
        }
        t.closed(conn);
        t
    }

    #[test]
    fn a_tally_written_out_and_read_back_is_the_same_tally() {
        let t = counted(3, 5_000);
        let back = TallyRecord::of(&t).to_tally().unwrap();
        assert_eq!(TallyRecord::of(&back), TallyRecord::of(&t));
        assert_eq!(back.unit_evidence(), t.unit_evidence());
        assert_eq!(back.latency.summary(), t.latency.summary());
    }

    #[test]
    fn merged_records_count_what_one_tally_of_the_union_counts() {
        let (a, b) = (counted(1, 3_000), counted(2, 4_000));
        let mut union = a.clone();
        union.merge(b.clone());
        let mut merged = TallyRecord::of(&a).to_tally().unwrap();
        merged.merge(TallyRecord::of(&b).to_tally().unwrap());
        assert_eq!(TallyRecord::of(&merged), TallyRecord::of(&union));
        assert_eq!(merged.sent, 7_000);
    }

    #[test]
    fn counts_that_disagree_are_refused_with_the_field_named() {
        let mut r = TallyRecord::of(&counted(1, 500));
        r.sent += 1;
        assert!(r.to_tally().unwrap_err().starts_with("sent is 501"));
        let mut r = TallyRecord::of(&counted(1, 500));
        r.versions[0].latency = "not a histogram".into();
        assert!(
            r.to_tally()
                .unwrap_err()
                .starts_with("versions[0].latency: not base64")
        );
        let mut r = TallyRecord::of(&counted(1, 500));
        r.versions[1].responses += 5;
        assert!(r.to_tally().unwrap_err().contains("add up to"));
    }
}
