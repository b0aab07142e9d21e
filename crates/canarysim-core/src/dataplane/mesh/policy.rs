//! What an HTTP route does around the upstream call, as Envoy does it from Istio's
//! VirtualService: fault injection (delay, abort), retries (how many, on what, per-try
//! timeout, jittered back-off, another host each time) and the route timeout.
//!
//! [`HttpPolicy::serve`] runs one client request: it asks the caller for each attempt's
//! outcome (the caller picks the endpoint and draws the pod's answer), so the semantics live
//! here and the load driver only counts.

use rand::RngCore;
use serde_json::Value;

/// Envoy's default retry back-off base (`base_interval`, 25 ms).
const BACKOFF_BASE_US: u64 = 25_000;

/// `retryOn` conditions, as Envoy's router understands them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetryOn {
    /// `5xx`: any 5xx answer, a connect failure, a reset or a per-try timeout.
    pub five_xx: bool,
    /// `gateway-error`: 502, 503, 504 (a per-try timeout counts as 504).
    pub gateway_error: bool,
    /// `connect-failure` (and `refused-stream`, `reset`): the pod is gone or refuses.
    pub connect_failure: bool,
    /// `retriable-status-codes` plus bare status codes in `retryOn`.
    codes: [u16; 8],
    n_codes: u8,
}

impl RetryOn {
    fn add_code(&mut self, code: u16) {
        if (self.n_codes as usize) < self.codes.len() && !self.codes().contains(&code) {
            self.codes[self.n_codes as usize] = code;
            self.n_codes += 1;
        }
    }

    pub fn codes(&self) -> &[u16] {
        &self.codes[..self.n_codes as usize]
    }

    /// Whether an answer with this status is retried.
    pub fn status(&self, status: u16) -> bool {
        (self.five_xx && (500..600).contains(&status))
            || (self.gateway_error && matches!(status, 502..=504))
            || self.codes().contains(&status)
    }

    /// Whether a connection that fails (the pod is gone) is retried.
    pub fn connect_failure(&self) -> bool {
        self.five_xx || self.gateway_error || self.connect_failure
    }

    /// Whether a per-try timeout is retried.
    pub(crate) fn per_try_timeout(&self) -> bool {
        self.five_xx || self.gateway_error
    }

    /// Parses Istio's `retryOn` (comma-separated Envoy conditions and status codes). Unknown
    /// conditions are returned so the translation can note them.
    pub fn parse(text: &str) -> (RetryOn, Vec<String>) {
        let mut on = RetryOn::default();
        let mut unknown = Vec::new();
        for token in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            match token {
                "5xx" => on.five_xx = true,
                "gateway-error" => on.gateway_error = true,
                "connect-failure" | "refused-stream" | "reset" | "reset-before-request" => {
                    on.connect_failure = true
                }
                // gRPC conditions and header-driven ones never fire for the simulated
                // HTTP/1.1 answers; they are accepted silently as Istio's default uses them.
                "unavailable" | "cancelled" | "deadline-exceeded" | "resource-exhausted"
                | "internal" | "retriable-headers" | "envoy-ratelimited" => {}
                "retriable-4xx" => on.add_code(409),
                "retriable-status-codes" => {}
                other => match other.parse::<u16>() {
                    Ok(code) => on.add_code(code),
                    Err(_) => unknown.push(other.to_string()),
                },
            }
        }
        (on, unknown)
    }
}

/// `retries` of an http route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub attempts: u32,
    pub on: RetryOn,
    pub per_try_timeout_us: Option<u64>,
}

impl RetryPolicy {
    /// Istio's default when a route sets no `retries` (and for routes of Services that no
    /// VirtualService covers): 2 retries on connect-failure, refused-stream, unavailable,
    /// cancelled and retriable-status-codes 503, each to another host.
    pub const fn istio_default() -> Self {
        RetryPolicy {
            attempts: 2,
            on: RetryOn {
                five_xx: false,
                gateway_error: false,
                connect_failure: true,
                codes: [503, 0, 0, 0, 0, 0, 0, 0],
                n_codes: 1,
            },
            per_try_timeout_us: None,
        }
    }

    pub(crate) const NONE: RetryPolicy = RetryPolicy {
        attempts: 0,
        on: RetryOn {
            five_xx: false,
            gateway_error: false,
            connect_failure: false,
            codes: [0; 8],
            n_codes: 0,
        },
        per_try_timeout_us: None,
    };
}

/// `fault` of an http route: each part applies to its percentage of requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fault {
    /// (fraction per million, delay in µs).
    pub delay: Option<(u32, u64)>,
    /// (fraction per million, HTTP status the proxy answers with).
    pub abort: Option<(u32, u16)>,
}

/// Everything an http route does around the upstream call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpPolicy {
    pub retry: RetryPolicy,
    /// The route `timeout` (covers every attempt and back-off); None: no timeout.
    pub timeout_us: Option<u64>,
    pub fault: Fault,
}

/// Routes of TCP/TLS and of a proxy-less caller: no retries, no timeout, no fault.
pub(crate) static NO_POLICY: HttpPolicy = HttpPolicy {
    retry: RetryPolicy::NONE,
    timeout_us: None,
    fault: Fault {
        delay: None,
        abort: None,
    },
};

/// An HTTP route with nothing set: Istio's default retries, no timeout, no fault. Also what
/// Istio gives the default route of a Service that no VirtualService covers.
pub(crate) static DEFAULT_POLICY: HttpPolicy = HttpPolicy {
    retry: RetryPolicy::istio_default(),
    timeout_us: None,
    fault: Fault {
        delay: None,
        abort: None,
    },
};

/// ingress-nginx's defaults: `proxy-next-upstream: error timeout` with
/// `proxy-next-upstream-tries: 3` (another pod after a failed connection, twice at most; a
/// 503 answer is not retried), no route timeout, no fault.
pub(crate) static INGRESS_NGINX_POLICY: HttpPolicy = HttpPolicy {
    retry: RetryPolicy {
        attempts: 2,
        on: RetryOn {
            five_xx: false,
            gateway_error: false,
            connect_failure: true,
            codes: [0; 8],
            n_codes: 0,
        },
        per_try_timeout_us: None,
    },
    timeout_us: None,
    fault: Fault {
        delay: None,
        abort: None,
    },
};

/// One attempt's outcome, as the caller observed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// No endpoint to send to (no healthy upstream): final, never retried.
    NoEndpoint,
    /// The connection failed: the pod has gone (Envoy: connect failure / reset).
    ConnectFailure,
    /// The pod answered `status` after `latency_us`.
    Answered { status: u16, latency_us: u64 },
    /// The per-try timeout fired first (the proxy counts it as a 504).
    PerTryTimeout,
}

/// What the client saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientOutcome {
    /// The last attempt's answer reached the client (`status`, total latency).
    Answered { status: u16, latency_us: u64 },
    /// The route timeout fired first: Envoy answers 504 `upstream request timeout`.
    TimedOut { latency_us: u64 },
    /// The fault filter answered without calling upstream.
    FaultAborted { status: u16, latency_us: u64 },
    /// No healthy upstream (503 from the proxy).
    NoEndpoint,
    /// Every attempt failed to connect: 503 `upstream connect error`.
    ConnectFailure { latency_us: u64 },
}

/// Counts of one request's attempts, for the pods' view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AttemptCounts {
    /// Attempts after the first.
    pub retries: u32,
}

impl HttpPolicy {
    /// The route's policy from its VirtualService JSON (`retries`, `timeout`, `fault`);
    /// problems are pushed to `notes`.
    pub(crate) fn from_route(route: &Value, notes: &mut Vec<String>) -> HttpPolicy {
        let duration = |v: &Value, field: &str, notes: &mut Vec<String>| -> Option<u64> {
            let text = v.as_str()?;
            match crate::model::duration::go_parse_duration(text) {
                Some(ns) if ns >= 0 => Some((ns / 1000) as u64),
                _ => {
                    notes.push(format!("{field} {text:?} is ignored: not a duration"));
                    None
                }
            }
        };
        let retry = match route.get("retries") {
            None | Some(Value::Null) => RetryPolicy::istio_default(),
            Some(r) => {
                let attempts = r["attempts"].as_i64().unwrap_or(0).max(0) as u32;
                let (on, unknown) = match r["retryOn"].as_str() {
                    Some(text) => RetryOn::parse(text),
                    // Istio's default retryOn when `retries` sets none.
                    None => (RetryPolicy::istio_default().on, Vec::new()),
                };
                for u in unknown {
                    notes.push(format!(
                        "retries.retryOn {u:?} is not a condition canarysim knows; it never fires"
                    ));
                }
                RetryPolicy {
                    attempts,
                    on,
                    per_try_timeout_us: duration(
                        &r["perTryTimeout"],
                        "retries.perTryTimeout",
                        notes,
                    ),
                }
            }
        };
        let timeout_us = duration(&route["timeout"], "timeout", notes).filter(|t| *t > 0);
        let percent = |v: &Value| -> u32 {
            // No percentage: Istio applies the fault to every request.
            v["percentage"]["value"].as_f64().map_or(1_000_000.0, |p| {
                (p * 10_000.0).round().clamp(0.0, 1_000_000.0)
            }) as u32
        };
        let fault = Fault {
            delay: route["fault"]["delay"].as_object().and_then(|_| {
                let d = &route["fault"]["delay"];
                let us = duration(&d["fixedDelay"], "fault.delay.fixedDelay", notes)?;
                Some((percent(d), us))
            }),
            abort: route["fault"]["abort"].as_object().and_then(|_| {
                let a = &route["fault"]["abort"];
                match a["httpStatus"].as_u64() {
                    Some(status) => Some((percent(a), status as u16)),
                    None => {
                        notes.push("fault.abort without httpStatus (grpcStatus, http2Error) is not simulated".into());
                        None
                    }
                }
            }),
        };
        HttpPolicy {
            retry,
            timeout_us,
            fault,
        }
    }

    /// Whether this request's outcome can differ from its first attempt's answer, given
    /// what the endpoints can answer: the fast loops may skip [`HttpPolicy::serve`] when not.
    pub(crate) fn is_inert(&self, can_fail_retriably: bool) -> bool {
        self.fault.delay.is_none()
            && self.fault.abort.is_none()
            && self.timeout_us.is_none()
            && self.retry.per_try_timeout_us.is_none()
            && (self.retry.attempts == 0 || !can_fail_retriably)
    }

    /// The fault filter's draw for one request: its delay in µs (0: none), then whether it
    /// is aborted and with which status.
    pub fn draw_fault<R: RngCore + ?Sized>(&self, rng: &mut R) -> (u64, Option<u16>) {
        let sample = |rng: &mut R, per_million: u32| {
            per_million >= 1_000_000 || rng.next_u64() % 1_000_000 < u64::from(per_million)
        };
        let delay = match self.fault.delay {
            Some((p, delay)) if sample(rng, p) => delay,
            _ => 0,
        };
        let abort = match self.fault.abort {
            Some((p, status)) if sample(rng, p) => Some(status),
            _ => None,
        };
        (delay, abort)
    }

    /// An attempt as the policy sees it: an answer slower than the per-try timeout is that
    /// timeout.
    pub(crate) fn per_try(&self, attempt: Attempt) -> Attempt {
        match (attempt, self.retry.per_try_timeout_us) {
            (Attempt::Answered { latency_us, .. }, Some(ptt)) if latency_us > ptt => {
                Attempt::PerTryTimeout
            }
            _ => attempt,
        }
    }

    /// Whether the policy's `retryOn` covers an attempt that ended so (the attempt count
    /// aside).
    pub fn retries_on(&self, attempt: &Attempt) -> bool {
        match *attempt {
            Attempt::NoEndpoint => false,
            Attempt::ConnectFailure => self.retry.on.connect_failure(),
            Attempt::PerTryTimeout => self.retry.on.per_try_timeout(),
            Attempt::Answered { status, .. } => self.retry.on.status(status),
        }
    }

    /// Envoy's fully jittered exponential back-off before retry `n` (1 for the first):
    /// uniform in [0, 25 ms × (2^n − 1)).
    pub fn backoff_us<R: RngCore + ?Sized>(n: u32, rng: &mut R) -> u64 {
        let ceiling = BACKOFF_BASE_US * ((1u64 << n.min(10)) - 1);
        rng.next_u64() % ceiling.max(1)
    }

    /// Runs one client request on the virtual clock: the fault filter, then attempts (each
    /// one from `attempt`, which picks a host other than the previous ones where it can),
    /// retried per the policy with Envoy's back-off, all within the route timeout. Live
    /// mode runs the same decisions on the wall clock (`live::policy`).
    pub fn serve<R: RngCore + ?Sized>(
        &self,
        rng: &mut R,
        mut attempt: impl FnMut(u32) -> Attempt,
    ) -> (ClientOutcome, AttemptCounts) {
        let mut counts = AttemptCounts::default();
        let (delay, abort) = self.draw_fault(rng);
        let mut elapsed = delay;
        if let Some(status) = abort {
            return (
                ClientOutcome::FaultAborted {
                    status,
                    latency_us: elapsed.max(1),
                },
                counts,
            );
        }
        // The route timeout starts at the router, after the fault filter's delay.
        let deadline = self.timeout_us.map(|t| elapsed + t);
        let mut n = 0u32;
        loop {
            let outcome = self.per_try(attempt(n));
            let final_outcome = match outcome {
                Attempt::NoEndpoint => return (ClientOutcome::NoEndpoint, counts),
                Attempt::ConnectFailure => ClientOutcome::ConnectFailure {
                    latency_us: elapsed.max(1),
                },
                Attempt::PerTryTimeout => {
                    elapsed += self.retry.per_try_timeout_us.unwrap_or(0);
                    ClientOutcome::Answered {
                        status: 504,
                        latency_us: elapsed,
                    }
                }
                Attempt::Answered { status, latency_us } => {
                    elapsed += latency_us;
                    ClientOutcome::Answered {
                        status,
                        latency_us: elapsed,
                    }
                }
            };
            if let Some(out) = timed_out(deadline, elapsed) {
                return (out, counts);
            }
            if !self.retries_on(&outcome) || n >= self.retry.attempts {
                return (final_outcome, counts);
            }
            n += 1;
            counts.retries += 1;
            elapsed += Self::backoff_us(n, rng);
            if let Some(out) = timed_out(deadline, elapsed) {
                return (out, counts);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(route: Value) -> HttpPolicy {
        let mut notes = Vec::new();
        let p = HttpPolicy::from_route(&route, &mut notes);
        assert!(notes.is_empty(), "{notes:?}");
        p
    }

    fn answers(list: &[Attempt]) -> impl FnMut(u32) -> Attempt + '_ {
        move |n| list[n as usize]
    }

    fn ok(latency_us: u64) -> Attempt {
        Attempt::Answered {
            status: 200,
            latency_us,
        }
    }

    fn status(status: u16) -> Attempt {
        Attempt::Answered {
            status,
            latency_us: 1000,
        }
    }

    #[test]
    fn istio_default_retries_503_and_connect_failures_twice_but_not_500() {
        let p = policy(json!({}));
        let mut rng = crate::random::stream(1, "policy");
        let (out, counts) = p.serve(
            &mut rng,
            answers(&[status(503), Attempt::ConnectFailure, ok(1000)]),
        );
        assert!(
            matches!(out, ClientOutcome::Answered { status: 200, .. }),
            "{out:?}"
        );
        assert_eq!(counts.retries, 2);
        let (out, counts) = p.serve(&mut rng, answers(&[status(500)]));
        assert!(matches!(out, ClientOutcome::Answered { status: 500, .. }));
        assert_eq!(counts.retries, 0);
        let (out, counts) = p.serve(&mut rng, answers(&[status(503), status(503), status(503)]));
        assert!(matches!(out, ClientOutcome::Answered { status: 503, .. }));
        assert_eq!(
            counts.retries, 2,
            "two retries, then the last answer stands"
        );
    }

    #[test]
    fn retries_as_configured() {
        let p =
            policy(json!({"retries": {"attempts": 3, "retryOn": "5xx", "perTryTimeout": "50ms"}}));
        let mut rng = crate::random::stream(1, "policy");
        let (out, counts) = p.serve(
            &mut rng,
            answers(&[status(500), ok(60_000), status(502), ok(2000)]),
        );
        assert!(
            matches!(out, ClientOutcome::Answered { status: 200, .. }),
            "{out:?}"
        );
        assert_eq!(
            counts.retries, 3,
            "500, per-try timeout, 502 are all retried"
        );
        let off = policy(json!({"retries": {"attempts": 0}}));
        let (out, _) = off.serve(&mut rng, answers(&[Attempt::ConnectFailure]));
        assert!(matches!(out, ClientOutcome::ConnectFailure { .. }));
        let gw = policy(json!({"retries": {"attempts": 2, "retryOn": "gateway-error"}}));
        let (out, counts) = gw.serve(&mut rng, answers(&[status(500)]));
        assert!(matches!(out, ClientOutcome::Answered { status: 500, .. }));
        assert_eq!(counts.retries, 0);
    }

    #[test]
    fn timeout_covers_attempts_and_backoff() {
        let p = policy(json!({"timeout": "100ms", "retries": {"attempts": 5, "retryOn": "5xx"}}));
        let mut rng = crate::random::stream(1, "policy");
        let slow = [ok(150_000)];
        let (out, _) = p.serve(&mut rng, answers(&slow));
        assert_eq!(
            out,
            ClientOutcome::TimedOut {
                latency_us: 100_000
            }
        );
        let failing = [
            Attempt::Answered {
                status: 500,
                latency_us: 40_000,
            },
            Attempt::Answered {
                status: 500,
                latency_us: 40_000,
            },
            Attempt::Answered {
                status: 500,
                latency_us: 40_000,
            },
            Attempt::Answered {
                status: 500,
                latency_us: 40_000,
            },
        ];
        let (out, _) = p.serve(&mut rng, answers(&failing));
        assert_eq!(
            out,
            ClientOutcome::TimedOut {
                latency_us: 100_000
            }
        );
    }

    #[test]
    fn faults_apply_to_their_percentage() {
        let p = policy(json!({"fault": {
            "abort": {"percentage": {"value": 10.0}, "httpStatus": 418},
            "delay": {"percentage": {"value": 50.0}, "fixedDelay": "7s"}}}));
        let mut rng = crate::random::stream(3, "policy");
        let (mut aborted, mut delayed) = (0, 0);
        for _ in 0..100_000 {
            match p.serve(&mut rng, |_| ok(1000)).0 {
                ClientOutcome::FaultAborted { status: 418, .. } => aborted += 1,
                ClientOutcome::Answered { latency_us, .. } if latency_us > 7_000_000 => {
                    delayed += 1
                }
                ClientOutcome::Answered { .. } => {}
                other => panic!("{other:?}"),
            }
        }
        assert!((9_500..10_500).contains(&aborted), "{aborted}");
        // Delayed and not aborted: 50 % of the 90 %.
        assert!((44_000..46_000).contains(&delayed), "{delayed}");
    }

    #[test]
    fn backoff_is_jittered_within_envoys_bounds() {
        let p = policy(json!({"retries": {"attempts": 2, "retryOn": "5xx"}}));
        let mut rng = crate::random::stream(4, "policy");
        let mut max = 0;
        for _ in 0..10_000 {
            let a = [
                Attempt::Answered {
                    status: 500,
                    latency_us: 0,
                },
                Attempt::Answered {
                    status: 500,
                    latency_us: 0,
                },
                ok(0),
            ];
            if let (ClientOutcome::Answered { latency_us, .. }, _) = p.serve(&mut rng, answers(&a))
            {
                max = max.max(latency_us);
            }
        }
        // First back-off below 25 ms, second below 75 ms.
        assert!(max < 100_000 && max > 80_000, "{max}");
    }

    #[test]
    fn unknown_conditions_and_bad_durations_are_noted() {
        let mut notes = Vec::new();
        let p = HttpPolicy::from_route(
            &json!({"retries": {"attempts": 1, "retryOn": "5xx,bogus"}, "timeout": "soon"}),
            &mut notes,
        );
        assert!(p.retry.on.five_xx);
        assert_eq!(p.timeout_us, None);
        assert_eq!(notes.len(), 2, "{notes:?}");
    }
}

/// The route timeout's answer once `elapsed` has passed the deadline.
fn timed_out(deadline: Option<u64>, elapsed: u64) -> Option<ClientOutcome> {
    let t = deadline.filter(|t| elapsed > *t)?;
    Some(ClientOutcome::TimedOut {
        latency_us: t.max(1),
    })
}

/// A DestinationRule's `outlierDetection`, as Envoy runs it per proxy and cluster: a host
/// that answers `consecutive_5xx` 5xx in a row (connect failures included) is ejected for
/// `base_ejection_us` × the times it has been ejected; at most `max_ejection_percent` of the
/// cluster's hosts are out at once, but at least one may be; with Istio's default
/// minHealthPercent of 0 there is no panic mode, so a cluster whose hosts are all ejected
/// has no healthy upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutlierDetection {
    pub consecutive_5xx: u32,
    /// Only 502, 503, 504 count (`consecutiveGatewayErrors`), when set.
    pub consecutive_gateway: Option<u32>,
    pub base_ejection_us: u64,
    pub max_ejection_percent: u32,
}

impl OutlierDetection {
    /// From `trafficPolicy.outlierDetection` (Istio's defaults: 5 consecutive 5xx, 30 s,
    /// 10 %); notes what is not simulated.
    pub(crate) fn from_value(v: &Value, notes: &mut Vec<String>) -> Option<OutlierDetection> {
        let o = v.as_object()?;
        for field in o.keys() {
            if !matches!(
                field.as_str(),
                "consecutive5xxErrors"
                    | "consecutiveErrors"
                    | "consecutiveGatewayErrors"
                    | "baseEjectionTime"
                    | "maxEjectionPercent"
                    | "interval"
                    | "minHealthPercent"
            ) {
                notes.push(format!("outlierDetection.{field} is not simulated"));
            }
        }
        if v["minHealthPercent"].as_i64().is_some_and(|p| p > 0) {
            notes.push(
                "outlierDetection.minHealthPercent above 0 (panic mode) is not simulated".into(),
            );
        }
        let count = |f: &str| v[f].as_u64().map(|n| n as u32);
        let base = v["baseEjectionTime"]
            .as_str()
            .and_then(crate::model::duration::go_parse_duration)
            .filter(|ns| *ns > 0)
            .map_or(30_000_000, |ns| (ns / 1000) as u64);
        Some(OutlierDetection {
            consecutive_5xx: count("consecutive5xxErrors")
                .or_else(|| count("consecutiveErrors"))
                .unwrap_or(5),
            consecutive_gateway: count("consecutiveGatewayErrors").filter(|n| *n > 0),
            base_ejection_us: base,
            max_ejection_percent: count("maxEjectionPercent").unwrap_or(10),
        })
    }

    /// Whether an answer counts against the host.
    fn counts(&self, status: Option<u16>) -> (bool, bool) {
        match status {
            // A connect failure counts as a 5xx (and a gateway error: 503).
            None => (true, true),
            Some(s) => ((500..600).contains(&s), matches!(s, 502..=504)),
        }
    }
}

/// One host's record with one proxy's outlier detector.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostHealth {
    consecutive_5xx: u32,
    consecutive_gateway: u32,
    times_ejected: u32,
    ejected_until_us: u64,
}

impl HostHealth {
    pub fn is_ejected(&self, now_us: u64) -> bool {
        now_us < self.ejected_until_us
    }

    /// Records an answer (`None`: the connection failed) at `now_us`. `ejected_in_cluster`
    /// and `hosts` are the cluster's current ejections and size. True when this ejects the
    /// host.
    pub fn record(
        &mut self,
        od: &OutlierDetection,
        status: Option<u16>,
        now_us: u64,
        ejected_in_cluster: usize,
        hosts: usize,
    ) -> bool {
        let (five_xx, gateway) = od.counts(status);
        self.consecutive_5xx = if five_xx { self.consecutive_5xx + 1 } else { 0 };
        self.consecutive_gateway = if gateway {
            self.consecutive_gateway + 1
        } else {
            0
        };
        let tripped = (od.consecutive_5xx > 0 && self.consecutive_5xx >= od.consecutive_5xx)
            || od
                .consecutive_gateway
                .is_some_and(|n| self.consecutive_gateway >= n);
        if !tripped || self.is_ejected(now_us) {
            return false;
        }
        let allowed = ejected_in_cluster == 0
            || (ejected_in_cluster + 1) * 100 <= od.max_ejection_percent as usize * hosts;
        if !allowed {
            return false;
        }
        self.times_ejected += 1;
        self.ejected_until_us = now_us + od.base_ejection_us * u64::from(self.times_ejected);
        self.consecutive_5xx = 0;
        self.consecutive_gateway = 0;
        true
    }
}

#[cfg(test)]
mod outlier_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn five_consecutive_5xx_eject_for_the_base_time_times_the_ejections() {
        let mut notes = Vec::new();
        let od = OutlierDetection::from_value(
            &json!({"consecutive5xxErrors": 3, "baseEjectionTime": "10s", "maxEjectionPercent": 50}),
            &mut notes,
        )
        .unwrap();
        assert!(notes.is_empty());
        let mut h = HostHealth::default();
        assert!(!h.record(&od, Some(500), 0, 0, 4));
        assert!(
            !h.record(&od, Some(200), 1, 0, 4),
            "a success resets the count"
        );
        assert!(!h.record(&od, Some(503), 2, 0, 4));
        assert!(!h.record(&od, None, 3, 0, 4));
        assert!(h.record(&od, Some(500), 4, 0, 4));
        assert!(h.is_ejected(10_000_003) && !h.is_ejected(10_000_004));
        for t in 0..3 {
            h.record(&od, Some(500), 20_000_000 + t, 0, 4);
        }
        assert!(
            h.is_ejected(20_000_002 + 19_999_999),
            "second ejection lasts twice as long"
        );
    }

    #[test]
    fn max_ejection_percent_leaves_hosts_but_one_may_always_go() {
        let od = OutlierDetection::from_value(&json!({"consecutive5xxErrors": 1}), &mut Vec::new())
            .unwrap();
        assert_eq!(od.max_ejection_percent, 10);
        let mut h = HostHealth::default();
        assert!(h.record(&od, Some(500), 0, 0, 2), "the first host may go");
        let mut other = HostHealth::default();
        assert!(
            !other.record(&od, Some(500), 0, 1, 2),
            "a second one would exceed 10 %"
        );
    }

    #[test]
    fn gateway_errors_alone_when_only_they_are_configured() {
        let od = OutlierDetection::from_value(
            &json!({"consecutive5xxErrors": 0, "consecutiveGatewayErrors": 2}),
            &mut Vec::new(),
        )
        .unwrap();
        let mut h = HostHealth::default();
        assert!(!h.record(&od, Some(500), 0, 0, 1));
        assert!(!h.record(&od, Some(500), 0, 0, 1));
        assert!(!h.record(&od, Some(503), 0, 0, 1));
        assert!(h.record(&od, Some(502), 0, 0, 1));
    }
}

/// `loadBalancer.consistentHash`: what a request's hash is computed from. Hosts are chosen
/// by rendezvous hashing over the pods' names, so a key keeps its pod while the pod stays
/// (Envoy's ring hash and Maglev share that property; their exact host order is not
/// reproduced).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HashOn {
    Header(String),
    QueryParameter(String),
    /// `httpCookie`: the cookie's value; a request without it (canarysim's clients keep no
    /// cookies) gets a fresh one when `ttl` is set, so it lands anywhere.
    Cookie(String),
    /// The client's address: one load generator, one address.
    SourceIp,
}

impl HashOn {
    /// From `loadBalancer.consistentHash`; None (with a note) for what is not simulated.
    pub(crate) fn from_value(v: &Value, notes: &mut Vec<String>) -> Option<HashOn> {
        let text = |f: &str| v[f].as_str().map(str::to_string);
        let on = if let Some(h) = text("httpHeaderName") {
            HashOn::Header(h.to_ascii_lowercase())
        } else if let Some(q) = text("httpQueryParameterName") {
            HashOn::QueryParameter(q)
        } else if let Some(c) = v["httpCookie"]["name"].as_str() {
            HashOn::Cookie(c.to_string())
        } else if v["useSourceIp"].as_bool() == Some(true) {
            HashOn::SourceIp
        } else {
            notes.push(
                "consistentHash without a key canarysim simulates; the default policy is used"
                    .into(),
            );
            return None;
        };
        if let Some(o) = v.as_object() {
            for k in o.keys() {
                if matches!(k.as_str(), "ringHash" | "maglev" | "minimumRingSize") {
                    continue;
                }
                if !matches!(
                    k.as_str(),
                    "httpHeaderName" | "httpQueryParameterName" | "httpCookie" | "useSourceIp"
                ) {
                    notes.push(format!("consistentHash.{k} is not simulated"));
                }
            }
        }
        Some(on)
    }

    /// The request's hash key, or None when the request carries none (Envoy then picks a
    /// host at random).
    pub fn key(&self, headers: &[(&str, &str)], path: &str) -> Option<u64> {
        let value = match self {
            HashOn::Header(name) => headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| *v)?,
            HashOn::Cookie(name) => headers
                .iter()
                .filter(|(k, _)| k.eq_ignore_ascii_case("cookie"))
                .flat_map(|(_, v)| v.split(';'))
                .filter_map(|c| c.trim().split_once('='))
                .find(|(k, _)| k == name)
                .map(|(_, v)| v)?,
            HashOn::QueryParameter(name) => {
                let (_, query) = path.split_once('?')?;
                query
                    .split('&')
                    .filter_map(|kv| kv.split_once('='))
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v)?
            }
            HashOn::SourceIp => "127.0.0.1",
        };
        Some(fnv1a(value.as_bytes()))
    }
}

/// Rendezvous score of a key for a host: the host with the highest score takes the key.
pub fn rendezvous_score(key: u64, host: &str) -> u64 {
    let mut h = fnv1a(host.as_bytes()) ^ key;
    // splitmix64 finaliser: spreads the combined bits.
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

#[cfg(test)]
mod hash_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_come_from_header_cookie_query_or_source() {
        let h = HashOn::from_value(&json!({"httpHeaderName": "X-User"}), &mut Vec::new()).unwrap();
        let a = h.key(&[("x-user", "alice")], "/");
        assert!(a.is_some());
        assert_eq!(a, h.key(&[("X-USER", "alice")], "/x"));
        assert_ne!(a, h.key(&[("x-user", "bob")], "/"));
        assert_eq!(h.key(&[], "/"), None);
        let c = HashOn::from_value(
            &json!({"httpCookie": {"name": "sid", "ttl": "0s"}}),
            &mut Vec::new(),
        )
        .unwrap();
        assert!(c.key(&[("cookie", "a=1; sid=42")], "/").is_some());
        assert_eq!(c.key(&[("cookie", "a=1")], "/"), None);
        let q =
            HashOn::from_value(&json!({"httpQueryParameterName": "u"}), &mut Vec::new()).unwrap();
        assert!(q.key(&[], "/p?u=7").is_some());
        let s = HashOn::from_value(&json!({"useSourceIp": true}), &mut Vec::new()).unwrap();
        assert_eq!(s.key(&[], "/"), s.key(&[("x", "y")], "/other"));
    }

    #[test]
    fn rendezvous_keeps_keys_on_their_host_when_another_host_goes() {
        let hosts = ["pod-a", "pod-b", "pod-c", "pod-d"];
        fn best(key: u64, hs: &[&'static str]) -> &'static str {
            hs.iter()
                .copied()
                .max_by_key(|h| rendezvous_score(key, h))
                .unwrap()
        }
        let mut moved = 0;
        let mut per_host = std::collections::BTreeMap::new();
        for key in 0..10_000u64 {
            let before = best(key, &hosts);
            *per_host.entry(before).or_insert(0) += 1;
            let after = best(key, &hosts[..3]);
            if before != "pod-d" && before != after {
                moved += 1;
            }
        }
        assert_eq!(moved, 0, "only pod-d's keys move");
        assert!(
            per_host.values().all(|n| (2_200..2_800).contains(n)),
            "{per_host:?}"
        );
    }
}
