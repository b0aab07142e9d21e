//! The accounting of a real load: every request ends in exactly one class, answers are
//! counted per version, and each connection records which versions answered on it, so that
//! the unit of randomisation (request or connection) can be measured rather than assumed.

use std::collections::BTreeMap;

use super::ArmStats;
use crate::endpoints::Role;
use crate::verify::{LatencyRecorder, SplitUnit};

/// How one request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// A response with this status.
    Status(u16),
    /// The connection was refused (nothing listens).
    Refused,
    /// The connection was reset or closed before the response was complete.
    Reset,
    /// No complete response within the timeout (or no connection within it).
    Timeout,
    /// The peer spoke something other than the expected HTTP (or TLS failed).
    Protocol,
    /// Still in flight when the load's duration (`-z`) ran out: cut there, so that a
    /// duration bounds the load whatever the peer sends.
    Deadline,
}

/// Requests per way of ending; their sum is the number sent.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct Classes {
    #[serde(rename = "2xx")]
    pub s2xx: u64,
    #[serde(rename = "3xx")]
    pub s3xx: u64,
    #[serde(rename = "4xx")]
    pub s4xx: u64,
    /// 5xx other than 502, 503 and 504.
    #[serde(rename = "5xx")]
    pub s5xx: u64,
    #[serde(rename = "502")]
    pub s502: u64,
    #[serde(rename = "503")]
    pub s503: u64,
    #[serde(rename = "504")]
    pub s504: u64,
    /// Any other status (1xx as a final answer, or beyond 599).
    pub other_status: u64,
    pub refused: u64,
    pub reset: u64,
    pub timeout: u64,
    pub protocol_error: u64,
    /// In flight when `-z` ran out (neither the peer's failure nor an answer).
    pub deadline: u64,
}

impl Classes {
    fn add(&mut self, ending: Ending) {
        let slot = match ending {
            Ending::Status(200..=299) => &mut self.s2xx,
            Ending::Status(300..=399) => &mut self.s3xx,
            Ending::Status(400..=499) => &mut self.s4xx,
            Ending::Status(502) => &mut self.s502,
            Ending::Status(503) => &mut self.s503,
            Ending::Status(504) => &mut self.s504,
            Ending::Status(500..=599) => &mut self.s5xx,
            Ending::Status(_) => &mut self.other_status,
            Ending::Refused => &mut self.refused,
            Ending::Reset => &mut self.reset,
            Ending::Timeout => &mut self.timeout,
            Ending::Protocol => &mut self.protocol_error,
            Ending::Deadline => &mut self.deadline,
        };
        *slot += 1;
    }

    pub fn total(&self) -> u64 {
        self.s2xx
            + self.s3xx
            + self.s4xx
            + self.s5xx
            + self.s502
            + self.s503
            + self.s504
            + self.other_status
            + self.refused
            + self.reset
            + self.timeout
            + self.protocol_error
            + self.deadline
    }

    pub(crate) fn merge(&mut self, o: &Classes) {
        self.s2xx += o.s2xx;
        self.s3xx += o.s3xx;
        self.s4xx += o.s4xx;
        self.s5xx += o.s5xx;
        self.s502 += o.s502;
        self.s503 += o.s503;
        self.s504 += o.s504;
        self.other_status += o.other_status;
        self.refused += o.refused;
        self.reset += o.reset;
        self.timeout += o.timeout;
        self.protocol_error += o.protocol_error;
        self.deadline += o.deadline;
    }
}

/// One client connection while it lives.
#[derive(Debug, Clone, Default)]
pub struct Connection {
    answered: u64,
    first: Option<usize>,
    last: Option<usize>,
    mixed: bool,
}

/// Everything a real load observed. Workers keep one each and merge at the end.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub sent: u64,
    pub classes: Classes,
    /// Per version as the classifier named them; every role is [`Role::Other`] (a real
    /// gateway's answers carry no role).
    pub versions: Vec<ArmStats>,
    /// Responses no classifier could assign a version.
    pub unclassified: u64,
    /// Those responses by status.
    pub unclassified_status: BTreeMap<u16, u64>,
    /// Latency of every response, microseconds.
    pub latency: LatencyRecorder,
    /// Connections opened (successfully).
    pub connections: u64,
    /// Bytes of response bodies read (all of them, kept or not).
    pub body_bytes: u64,
    /// Connections that carried two or more classified answers, by how many they carried:
    /// (connections, of which answered by one version only).
    pub(crate) multi: BTreeMap<u64, (u64, u64)>,
}

impl Tally {
    /// An empty tally that knows `other`'s versions at the same indexes: a connection
    /// `other` opened (the probe's, adopted by a worker) refers to them by index.
    pub fn adopting(other: &Tally) -> Tally {
        Tally {
            versions: other
                .versions
                .iter()
                .map(|v| ArmStats::new(v.role, v.version.clone()))
                .collect(),
            ..Tally::default()
        }
    }

    fn version_index(&mut self, version: &str) -> usize {
        match self.versions.iter().position(|v| v.version == version) {
            Some(i) => i,
            None => {
                self.versions
                    .push(ArmStats::new(Role::Other, version.to_string()));
                self.versions.len() - 1
            }
        }
    }

    /// A connection was opened.
    pub fn opened(&mut self) -> Connection {
        self.connections += 1;
        Connection::default()
    }

    /// One request's end, on `conn` (None: no connection could be made for it); what it
    /// told of its connection.
    pub fn record(
        &mut self,
        conn: Option<&mut Connection>,
        ending: Ending,
        version: Option<&str>,
        latency_us: u64,
    ) -> OnConnection {
        self.sent += 1;
        self.classes.add(ending);
        let Ending::Status(status) = ending else {
            // Lost on a connection a version had answered on: that version's loss (a cut at
            // the load's end is the load's doing, nobody's loss).
            if let Some(i) = conn
                .and_then(|c| c.last)
                .filter(|_| ending != Ending::Deadline)
            {
                self.versions[i].lost += 1;
            }
            return OnConnection::Nothing;
        };
        self.latency.record(latency_us);
        let Some(version) = version else {
            self.unclassified += 1;
            *self.unclassified_status.entry(status).or_default() += 1;
            return OnConnection::Nothing;
        };
        let i = self.version_index(version);
        let v = &mut self.versions[i];
        v.responses += 1;
        v.errors += u64::from(status >= 500);
        v.latency.record(latency_us);
        let Some(c) = conn else {
            return OnConnection::Nothing;
        };
        c.answered += 1;
        c.last = Some(i);
        match c.first {
            None => {
                c.first = Some(i);
                v.connections += 1;
                OnConnection::First
            }
            Some(f) if f != i && !c.mixed => {
                c.mixed = true;
                OnConnection::SecondVersion
            }
            Some(_) => OnConnection::Nothing,
        }
    }

    /// A connection ended (closed by either side, or the load is over).
    pub fn closed(&mut self, conn: Connection) {
        if conn.answered >= 2 {
            let slot = self.multi.entry(conn.answered).or_default();
            slot.0 += 1;
            slot.1 += u64::from(!conn.mixed);
        }
    }

    pub fn merge(&mut self, o: Tally) {
        self.sent += o.sent;
        self.classes.merge(&o.classes);
        self.unclassified += o.unclassified;
        for (status, n) in o.unclassified_status {
            *self.unclassified_status.entry(status).or_default() += n;
        }
        self.latency.merge(&o.latency);
        self.connections += o.connections;
        self.body_bytes += o.body_bytes;
        for v in o.versions {
            let i = self.version_index(&v.version);
            self.versions[i].merge(&v);
        }
        for (k, (n, same)) in o.multi {
            let slot = self.multi.entry(k).or_default();
            slot.0 += n;
            slot.1 += same;
        }
    }

    /// Responses that carried a version.
    pub fn classified(&self) -> u64 {
        self.versions.iter().map(|v| v.responses).sum()
    }

    /// What the connections say about the unit of randomisation. Per request only when a
    /// connection saw two versions (or none carried two answers, when both units are one):
    /// otherwise a gateway that picks per connection would have looked the same, so the
    /// verdict counts connections.
    pub fn unit_evidence(&self) -> UnitEvidence {
        let (multi, single) = self
            .multi
            .values()
            .fold((0, 0), |(n, s), (cn, cs)| (n + cn, s + cs));
        let n = self.classified().max(1) as f64;
        let shares: Vec<f64> = self
            .versions
            .iter()
            .map(|v| v.responses as f64 / n)
            .collect();
        // If each request were routed on its own with these shares, how likely is it that
        // every multi-request connection saw one version only? ln Π_conn Σ_v p_v^k.
        let ln_chance: f64 = self
            .multi
            .iter()
            .map(|(&k, &(count, _))| {
                let p: f64 = shares.iter().map(|p| p.powf(k as f64)).sum();
                count as f64 * p.max(f64::MIN_POSITIVE).ln()
            })
            .sum();
        let unit = if multi == 0 {
            UnitFinding::OneAnswerPerConnection
        } else if single < multi {
            UnitFinding::PerRequest
        } else if self.versions.len() >= 2 && ln_chance < CHANCE_THRESHOLD.ln() {
            UnitFinding::PerConnection
        } else {
            UnitFinding::Undetermined
        };
        UnitEvidence {
            finding: unit,
            multi_request_connections: multi,
            single_version_connections: single,
            chance_if_per_request: ln_chance.exp(),
        }
    }
}

/// A per-request router shows every multi-request connection one version only with at most
/// this probability before the load calls the split per connection.
const CHANCE_THRESHOLD: f64 = 1e-3;

/// What one answer told of its connection (for a sequential test that follows the unit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnConnection {
    /// The connection's first classified answer: the connection's draw.
    First,
    /// The first answer of a second version on the connection: the gateway picks per
    /// request.
    SecondVersion,
    Nothing,
}

/// What the connections showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitFinding {
    /// Some connection saw two versions: the gateway picks per request.
    PerRequest,
    /// No connection carried two answers (no keep-alive): each request is a connection,
    /// both units are one.
    OneAnswerPerConnection,
    /// Every multi-request connection saw one version, beyond chance.
    PerConnection,
    /// Every multi-request connection saw one version, but that may be chance (few
    /// answers on them, or one version answered at all): judged per connection, since a
    /// per-connection gateway would look the same.
    Undetermined,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UnitEvidence {
    pub finding: UnitFinding,
    pub multi_request_connections: u64,
    pub single_version_connections: u64,
    /// The probability of what was seen if each request were routed on its own.
    pub chance_if_per_request: f64,
}

impl UnitEvidence {
    /// The unit to judge by: the finding, unless `--unit` says otherwise. Per request only
    /// on evidence; undetermined is judged per connection (never a narrower interval than
    /// the data support).
    pub fn unit(&self, forced: Option<SplitUnit>) -> SplitUnit {
        forced.unwrap_or(match self.finding {
            UnitFinding::PerRequest | UnitFinding::OneAnswerPerConnection => SplitUnit::Request,
            UnitFinding::PerConnection | UnitFinding::Undetermined => SplitUnit::Connection,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `conns` connections of `per` requests each; connection i answered by `pick(i, j)`.
    fn run(conns: u64, per: u64, pick: impl Fn(u64, u64) -> &'static str) -> Tally {
        let mut t = Tally::default();
        for i in 0..conns {
            let mut c = t.opened();
            for j in 0..per {
                t.record(Some(&mut c), Ending::Status(200), Some(pick(i, j)), 100);
            }
            t.closed(c);
        }
        t
    }

    #[test]
    fn per_connection_routing_is_recognised_and_per_request_is_not() {
        let sticky = run(20, 50, |i, _| if i % 5 == 0 { "yellow" } else { "blue" });
        let e = sticky.unit_evidence();
        assert_eq!(e.finding, UnitFinding::PerConnection);
        assert_eq!(
            (e.multi_request_connections, e.single_version_connections),
            (20, 20)
        );
        assert_eq!(e.unit(None), SplitUnit::Connection);
        assert_eq!(e.unit(Some(SplitUnit::Request)), SplitUnit::Request);
        let yellow = &sticky.versions[sticky.version_index_of("yellow")];
        assert_eq!((yellow.responses, yellow.connections), (200, 4));

        let mixed = run(
            20,
            50,
            |i, j| if (i + j) % 5 == 0 { "yellow" } else { "blue" },
        );
        assert_eq!(mixed.unit_evidence().finding, UnitFinding::PerRequest);
    }

    #[test]
    fn a_few_short_connections_cannot_tell_the_unit_and_are_judged_per_connection() {
        // Two connections of two requests, one version each: likely by chance too.
        let t = run(2, 2, |i, _| if i == 0 { "yellow" } else { "blue" });
        let e = t.unit_evidence();
        assert_eq!(e.finding, UnitFinding::Undetermined);
        assert!(e.chance_if_per_request > 0.1, "{e:?}");
        assert_eq!(e.unit(None), SplitUnit::Connection);
    }

    #[test]
    fn one_version_on_keepalive_connections_is_judged_per_connection() {
        // Four keep-alive connections that all landed on blue: a per-connection gateway
        // sending 20 % of its connections to yellow does this 41 % of the time.
        let t = run(4, 1000, |_, _| "blue");
        let e = t.unit_evidence();
        assert_eq!(e.finding, UnitFinding::Undetermined);
        assert_eq!(e.unit(None), SplitUnit::Connection);
        // Without keep-alive every request is a connection: per request is the same unit.
        let t = run(400, 1, |_, _| "blue");
        let e = t.unit_evidence();
        assert_eq!(e.finding, UnitFinding::OneAnswerPerConnection);
        assert_eq!(e.unit(None), SplitUnit::Request);
    }

    #[test]
    fn an_answer_says_when_it_is_its_connections_draw_and_when_it_shows_per_request() {
        let mut t = Tally::default();
        let mut c = t.opened();
        let mut record = |v| t.record(Some(&mut c), Ending::Status(200), Some(v), 1);
        assert_eq!(record("blue"), OnConnection::First);
        assert_eq!(record("blue"), OnConnection::Nothing);
        assert_eq!(record("yellow"), OnConnection::SecondVersion);
        assert_eq!(record("blue"), OnConnection::Nothing);
        assert_eq!(record("yellow"), OnConnection::Nothing);
    }

    #[test]
    fn a_connection_adopted_from_another_tally_keeps_its_versions() {
        // The probe's tally sees blue answer on the connection; a worker adopts it.
        let mut probe = Tally::default();
        let mut c = probe.opened();
        probe.record(Some(&mut c), Ending::Status(200), Some("blue"), 10);
        let mut worker = Tally::adopting(&probe);
        worker.record(Some(&mut c), Ending::Status(200), Some("green"), 10);
        worker.record(Some(&mut c), Ending::Reset, None, 10);
        worker.closed(c);
        assert_eq!(worker.versions[0].version, "blue");
        assert_eq!(worker.versions[0].responses, 0);
        assert_eq!(worker.versions[1].lost, 1, "lost by green, its last");
        probe.merge(worker);
        assert_eq!(probe.versions[0].responses, 1);
        assert_eq!(probe.versions[1].responses, 1);
        // One connection, answered by both: mixed, in the unit-of-randomisation evidence.
        assert_eq!(probe.multi.get(&2), Some(&(1, 0)));
    }

    #[test]
    fn every_request_ends_in_one_class_and_losses_go_to_the_last_version() {
        let mut t = Tally::default();
        let mut c = t.opened();
        t.record(Some(&mut c), Ending::Status(200), Some("blue"), 10);
        t.record(Some(&mut c), Ending::Status(503), Some("blue"), 10);
        t.record(Some(&mut c), Ending::Reset, None, 10);
        // Cut at the load's end: counted, nobody's loss.
        t.record(Some(&mut c), Ending::Deadline, None, 10);
        t.closed(c);
        t.record(None, Ending::Refused, None, 10);
        t.record(None, Ending::Status(404), None, 10);
        let mut other = Tally::default();
        other.record(None, Ending::Timeout, None, 10);
        other.record(None, Ending::Status(504), Some("yellow"), 10);
        t.merge(other);
        assert_eq!(t.sent, 8);
        assert_eq!(t.classes.deadline, 1);
        assert_eq!(t.classes.total(), t.sent);
        assert_eq!(
            (
                t.classes.s2xx,
                t.classes.s503,
                t.classes.s504,
                t.classes.s4xx
            ),
            (1, 1, 1, 1)
        );
        assert_eq!(
            (t.classes.reset, t.classes.refused, t.classes.timeout),
            (1, 1, 1)
        );
        let blue = &t.versions[t.version_index_of("blue")];
        assert_eq!((blue.responses, blue.errors, blue.lost), (2, 1, 1));
        assert_eq!(t.unclassified, 1);
    }

    impl Tally {
        fn version_index_of(&self, v: &str) -> usize {
            self.versions.iter().position(|x| x.version == v).unwrap()
        }
    }
}
