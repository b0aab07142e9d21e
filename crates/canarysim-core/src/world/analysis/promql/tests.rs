//! The evaluator against an in-memory Prometheus. Every expected number is worked out by
//! hand in the comment beside it, from the samples and Prometheus' documented algorithm,
//! never copied from the evaluator's output.

use super::*;

/// Series kept in memory, as the built-in Prometheus serves them.
struct Memory(Vec<Series>);

impl SeriesSource for Memory {
    fn series(&self, metric: &str) -> Vec<Series> {
        self.0
            .iter()
            .filter(|s| s.labels.get("__name__").map(String::as_str) == Some(metric))
            .cloned()
            .collect()
    }
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn series(name: &str, pairs: &[(&str, &str)], samples: Vec<(i64, f64)>) -> Series {
    let mut labels = labels(pairs);
    labels.insert("__name__".to_string(), name.to_string());
    Series { labels, samples }
}

/// A counter scraped every `step_s` seconds from `from_s` to `to_s` (inclusive), counting
/// `per_second` from zero at t = 0.
fn counter(
    name: &str,
    pairs: &[(&str, &str)],
    per_second: f64,
    from_s: i64,
    to_s: i64,
    step_s: usize,
) -> Series {
    let samples = (from_s..=to_s)
        .step_by(step_s)
        .map(|t| (t * 1000, per_second * t as f64))
        .collect();
    series(name, pairs, samples)
}

fn run(source: &Memory, q: &str, at_s: i64) -> QueryValue {
    match query(source, q, at_s * 1000) {
        Ok(v) => v,
        Err(e) => panic!("{q}: {e}"),
    }
}

fn vector(source: &Memory, q: &str, at_s: i64) -> Vec<(Labels, f64)> {
    match run(source, q, at_s) {
        QueryValue::Vector(v) => v,
        other => panic!("{q}: expected a vector, got {other:?}"),
    }
}

fn scalar(source: &Memory, q: &str, at_s: i64) -> f64 {
    match run(source, q, at_s) {
        QueryValue::Scalar(v) => v,
        other => panic!("{q}: expected a scalar, got {other:?}"),
    }
}

/// The one element's value of a vector result with no labels.
fn single(source: &Memory, q: &str, at_s: i64) -> f64 {
    match vector(source, q, at_s).as_slice() {
        [(l, v)] if l.is_empty() => *v,
        other => panic!("{q}: expected one unlabelled element, got {other:?}"),
    }
}

fn assert_close(actual: f64, expected: f64) {
    assert!(
        (actual - expected).abs() <= 1e-9 * expected.abs().max(1.0),
        "got {actual}, expected {expected}"
    );
}

/// The values of a vector result, keyed by one label.
fn by_label(v: &[(Labels, f64)], label: &str) -> Vec<(String, f64)> {
    v.iter()
        .map(|(l, x)| (l.get(label).cloned().unwrap_or_default(), *x))
        .collect()
}

fn gauges() -> Memory {
    Memory(vec![
        series("up", &[("job", "api"), ("instance", "a")], vec![(0, 1.0)]),
        series(
            "up",
            &[("job", "api-canary"), ("instance", "b")],
            vec![(0, 2.0)],
        ),
        series("up", &[("job", "web")], vec![(0, 3.0)]),
    ])
}

fn jobs(source: &Memory, q: &str) -> Vec<String> {
    vector(source, q, 60)
        .iter()
        .map(|(l, _)| l.get("job").cloned().unwrap_or_default())
        .collect()
}

#[test]
fn the_four_matchers_select_as_prometheus_does_with_regexes_anchored() {
    let m = gauges();
    assert_eq!(jobs(&m, r#"up{job="api"}"#), ["api"]);
    assert_eq!(jobs(&m, r#"up{job!="api"}"#), ["api-canary", "web"]);
    // Anchored: "api" does not match "api-canary", and "pi" matches nothing.
    assert_eq!(jobs(&m, r#"up{job=~"api"}"#), ["api"]);
    assert_eq!(jobs(&m, r#"up{job=~"pi"}"#), Vec::<String>::new());
    assert_eq!(jobs(&m, r#"up{job=~"api.*"}"#), ["api", "api-canary"]);
    assert_eq!(jobs(&m, r#"up{job!~"api.*"}"#), ["web"]);
    assert_eq!(jobs(&m, r#"up{job=~"api|web"}"#), ["api", "web"]);
    // A missing label matches as the empty string.
    assert_eq!(jobs(&m, r#"up{instance=""}"#), ["web"]);
    assert_eq!(jobs(&m, r#"up{instance!=""}"#), ["api", "api-canary"]);
    assert_eq!(jobs(&m, r#"{__name__="up", job="web"}"#), ["web"]);
    // A raw series keeps its name.
    let v = vector(&m, r#"up{job="web"}"#, 60);
    assert_eq!(v, [(labels(&[("__name__", "up"), ("job", "web")]), 3.0)]);
}

#[test]
fn an_instant_selector_looks_back_five_minutes_left_open_and_offset_shifts_it() {
    let m = Memory(vec![series("g", &[], vec![(0, 1.0), (120_000, 2.0)])]);
    assert_eq!(single_named(&m, "g", 120), 2.0);
    // 1m earlier the latest sample is the one at 0.
    assert_eq!(single_named(&m, "g offset 1m", 120), 1.0);
    // The window is (t - 5m, t]: at 419.999 s the sample at 120 s is still in it, at
    // 420 s it is not.
    assert_eq!(
        match query(&m, "g", 419_999) {
            Ok(QueryValue::Vector(v)) => v.len(),
            other => panic!("{other:?}"),
        },
        1
    );
    assert!(vector(&m, "g", 420).is_empty());
    // `@ 60` reads at 60 s whenever the query runs.
    assert_eq!(single_named(&m, "g @ 60", 600), 1.0);
    // A staleness marker ends the series.
    let stale = Memory(vec![series(
        "g",
        &[],
        vec![(0, 1.0), (30_000, STALE_MARKER)],
    )]);
    assert_eq!(single_named(&stale, "g", 15), 1.0);
    assert!(vector(&stale, "g", 45).is_empty());
    assert_eq!(single(&stale, "count_over_time(g[1m])", 45), 1.0);
}

/// The value of a one-element result that kept its metric name.
fn single_named(m: &Memory, q: &str, at_s: i64) -> f64 {
    match vector(m, q, at_s).as_slice() {
        [(_, v)] => *v,
        other => panic!("{q}: expected one element, got {other:?}"),
    }
}

const SUCCESS_RATE: &str = r#"sum(irate(istio_requests_total{reporter="source",destination_service=~"svc.ns.svc.cluster.local",response_code!~"5.*"}[5m])) / sum(irate(istio_requests_total{reporter="source",destination_service=~"svc.ns.svc.cluster.local"}[5m]))"#;

fn istio_requests(service: &str, reporter: &str, code: &str, per_second: f64) -> Series {
    counter(
        "istio_requests_total",
        &[
            ("destination_service", service),
            ("reporter", reporter),
            ("response_code", code),
        ],
        per_second,
        0,
        600,
        15,
    )
}

#[test]
fn the_argo_istio_success_rate_is_the_share_of_non_5xx_requests() {
    let svc = "svc.ns.svc.cluster.local";
    let m = Memory(vec![
        istio_requests(svc, "source", "200", 9.0),
        istio_requests(svc, "source", "503", 1.0),
        // Neither of these counts: the other reporter, and a service the regex would match
        // only unanchored.
        istio_requests(svc, "destination", "500", 100.0),
        istio_requests("svc.ns.svc.cluster.local.evil", "source", "500", 50.0),
    ]);
    // irate at 600 s uses the samples at 585 s and 600 s: 9·15/15 = 9 per second of 200s
    // and 1·15/15 = 1 of 503s, so 9 / (9 + 1) = 0.9.
    assert_eq!(single(&m, SUCCESS_RATE, 600), 0.9);
}

#[test]
fn the_success_rate_without_traffic_is_empty_and_with_idle_counters_nan() {
    let svc = "svc.ns.svc.cluster.local";
    // No series match: both sums are empty, and so is their quotient.
    let none = Memory(vec![istio_requests(
        "other.ns.svc.cluster.local",
        "source",
        "200",
        9.0,
    )]);
    assert_eq!(run(&none, SUCCESS_RATE, 600), QueryValue::Vector(vec![]));
    // Counters that stopped: both irates are 0, and 0/0 is NaN.
    let idle = Memory(vec![
        istio_requests(svc, "source", "200", 0.0),
        istio_requests(svc, "source", "503", 0.0),
    ]);
    assert!(single(&idle, SUCCESS_RATE, 600).is_nan());
}

#[test]
fn rate_and_increase_extrapolate_as_prometheus_when_the_window_starts_before_the_series() {
    // A counter that appears at 150 s and gains 1 per second: 2, 12, 22, 32 at 150, 160,
    // 170 and 180 s.
    let m = Memory(vec![series(
        "c",
        &[],
        vec![
            (150_000, 2.0),
            (160_000, 12.0),
            (170_000, 22.0),
            (180_000, 32.0),
        ],
    )]);
    // At 180 s, [1m] is (120 s, 180 s]. extrapolatedRate: the samples rise by 30 over the
    // sampled 30 s (average gap 10 s, threshold 1.1·10 = 11 s). The start is 30 s from the
    // first sample, beyond 11 s, so it is taken as half a gap, 5 s; but the counter would
    // reach zero 30·2/30 = 2 s before its first sample, which is sooner, so 2 s. The end
    // is 0 s away. increase = 30 · (30 + 2 + 0)/30 = 32, rate = 32 / 60 s.
    assert_close(single(&m, "increase(c[1m])", 180), 32.0);
    assert_close(single(&m, "rate(c[1m])", 180), 32.0 / 60.0);
    // delta is not a counter's: no zero limit, so the start stays 5 s: 30·35/30 = 35.
    assert_close(single(&m, "delta(c[1m])", 180), 35.0);
    // At 200 s, (140 s, 200 s]: the start is 10 s away (< 11 s: extrapolate all the way,
    // but the zero point, 2 s, is nearer); the end is 20 s away (>= 11 s: half a gap,
    // 5 s). increase = 30 · (30 + 2 + 5)/30 = 37.
    assert_close(single(&m, "increase(c[1m])", 200), 37.0);
    assert_close(single(&m, "rate(c[1m])", 200), 37.0 / 60.0);
    // One sample in the window is not enough for a rate.
    assert!(vector(&m, "rate(c[15s])", 150).is_empty());
}

#[test]
fn a_counter_reset_is_added_back() {
    // 0, 15, 30, then the process restarts: 5, 20 at 0, 15, 30, 45, 60 s.
    let m = Memory(vec![series(
        "c",
        &[],
        vec![
            (0, 0.0),
            (15_000, 15.0),
            (30_000, 30.0),
            (45_000, 5.0),
            (60_000, 20.0),
        ],
    )]);
    // [1m] at 60 s is (0 s, 60 s]: the sample at 0 s is out. The rise is 20 - 15 = 5 plus
    // 30 for the reset: 35 over 45 s. Average gap 15 s, threshold 16.5 s; the start is
    // 15 s away (extrapolate to it; the zero point 45·15/35 ≈ 19.3 s is further), the end
    // 0 s. increase = 35 · 60/45 = 46.67, rate = that / 60.
    assert_close(single(&m, "increase(c[1m])", 60), 35.0 * 60.0 / 45.0);
    assert_close(single(&m, "rate(c[1m])", 60), 35.0 * 60.0 / 45.0 / 60.0);
    assert_eq!(single(&m, "resets(c[1m])", 60), 1.0);
    // irate across the reset takes the new value as the increase: 5 over 15 s.
    assert_close(single(&m, "irate(c[1m])", 45), 5.0 / 15.0);
    // After it, (20 - 5)/15 = 1 per second.
    assert_close(single(&m, "irate(c[1m])", 60), 1.0);
    // idelta is a gauge's: 5 - 30 = -25.
    assert_eq!(single(&m, "idelta(c[1m])", 45), -25.0);
}

fn bucket(workload: &str, le: &str, per_second: f64) -> Series {
    counter(
        "istio_request_duration_milliseconds_bucket",
        &[
            ("destination_service", "svc.ns.svc.cluster.local"),
            ("destination_workload", workload),
            ("le", le),
            ("reporter", "source"),
        ],
        per_second,
        0,
        120,
        15,
    )
}

const P99: &str = r#"histogram_quantile(0.99, sum(rate(istio_request_duration_milliseconds_bucket{reporter="source",destination_service=~"svc.ns.svc.cluster.local"}[1m])) by (le))"#;

fn latency_buckets() -> Memory {
    Memory(vec![
        // Requests per second at or below each bound, for two workloads.
        bucket("stable", "10", 50.0),
        bucket("stable", "50", 80.0),
        bucket("stable", "100", 100.0),
        bucket("stable", "+Inf", 100.0),
        bucket("canary", "10", 30.0),
        bucket("canary", "50", 70.0),
        bucket("canary", "100", 99.0),
        bucket("canary", "+Inf", 100.0),
    ])
}

#[test]
fn histogram_quantile_interpolates_within_the_bucket_of_the_rank() {
    let m = latency_buckets();
    // Each rate over (60 s, 120 s] is the bucket's per-second count: samples at 75..120 s
    // rise by 45·r; the start is 15 s away (< 16.5 s, and the zero point is 75 s away), so
    // the factor is 60/45 and the rate 45·r·(60/45)/60 = r. Summed by le: 10 → 80,
    // 50 → 150, 100 → 199, +Inf → 200.
    // q = 0.99: rank 198 falls in the (50, 100] bucket (199 >= 198 > 150), whose 49
    // observations spread evenly: 50 + 50 · (198 - 150)/49 = 98.9796 ms.
    assert_close(single(&m, P99, 120), 50.0 + 50.0 * 48.0 / 49.0);
    // The median: rank 100 in (10, 50]: 10 + 40 · (100 - 80)/70.
    let p50 = P99.replace("0.99", "0.5");
    assert_close(single(&m, &p50, 120), 10.0 + 40.0 * 20.0 / 70.0);
    // q = 0.999: rank 199.8 is past le=100 (199): the +Inf bucket answers with the
    // highest finite bound, 100.
    let p999 = P99.replace("0.99", "0.999");
    assert_close(single(&m, &p999, 120), 100.0);
    // Out-of-range quantiles.
    assert_eq!(single(&m, &P99.replace("0.99", "1.5"), 120), f64::INFINITY);
    assert_eq!(
        single(&m, &P99.replace("0.99", "-0.5"), 120),
        f64::NEG_INFINITY
    );
    // Without `by (le)`, per workload: the stable one's 0.99 rank 99 is in (50, 100]
    // with 20 observations above 80: 50 + 50 · 19/20 = 97.5.
    let per_workload = P99.replace("by (le)", "by (le, destination_workload)");
    let v = vector(&m, &per_workload, 120);
    let stable = by_label(&v, "destination_workload");
    assert_eq!(stable.len(), 2);
    assert_eq!(stable[1].0, "stable");
    assert_close(stable[1].1, 97.5);
}

#[test]
fn histogram_quantile_is_nan_without_an_inf_bucket_or_with_fewer_than_two_buckets() {
    let at = |le: &str, v: f64| series("h_bucket", &[("le", le)], vec![(0, v)]);
    // No +Inf bucket.
    let m = Memory(vec![at("10", 5.0), at("20", 10.0)]);
    assert!(single(&m, "histogram_quantile(0.5, h_bucket)", 0).is_nan());
    // Only the +Inf bucket.
    let m = Memory(vec![at("+Inf", 10.0)]);
    assert!(single(&m, "histogram_quantile(0.5, h_bucket)", 0).is_nan());
    // No observations.
    let m = Memory(vec![at("10", 0.0), at("+Inf", 0.0)]);
    assert!(single(&m, "histogram_quantile(0.5, h_bucket)", 0).is_nan());
    // Elements without an `le` are skipped: nothing is left.
    let m = Memory(vec![series("h_bucket", &[], vec![(0, 1.0)])]);
    assert!(vector(&m, "histogram_quantile(0.5, h_bucket)", 0).is_empty());
    // The lowest bucket starts at 0: rank 2.5 of 10 in (0, 10] with 5: 0 + 10 · 2.5/5.
    let m = Memory(vec![at("10", 5.0), at("+Inf", 10.0)]);
    assert_eq!(single(&m, "histogram_quantile(0.25, h_bucket)", 0), 5.0);
}

fn workloads() -> Memory {
    let requests = |workload: &str, pod: &str, code: &str, per_second: f64| {
        counter(
            "istio_requests_total",
            &[
                ("destination_workload", workload),
                ("pod", pod),
                ("reporter", "source"),
                ("response_code", code),
            ],
            per_second,
            0,
            120,
            15,
        )
    };
    Memory(vec![
        requests("stable", "stable-1", "200", 5.0),
        requests("stable", "stable-2", "200", 4.0),
        requests("stable", "stable-2", "503", 1.0),
        requests("canary", "canary-1", "200", 4.0),
    ])
}

#[test]
fn sum_by_keeps_only_the_listed_labels_in_order_of_first_appearance() {
    let m = workloads();
    // Rates are exact per-second counts (see the histogram test for the factor 60/45):
    // stable 5 + 4 + 1 = 10, canary 4. Series come sorted by labels, so the canary's
    // group is first.
    let v = vector(
        &m,
        "sum by (destination_workload) (rate(istio_requests_total[1m]))",
        120,
    );
    assert_eq!(v.len(), 2);
    assert_eq!(v[0].0, labels(&[("destination_workload", "canary")]));
    assert_close(v[0].1, 4.0);
    assert_eq!(v[1].0, labels(&[("destination_workload", "stable")]));
    assert_close(v[1].1, 10.0);
    // `by` after the argument means the same.
    let after = vector(
        &m,
        "sum(rate(istio_requests_total[1m])) by (destination_workload)",
        120,
    );
    assert_eq!(after.len(), 2);
}

#[test]
fn sum_without_drops_the_listed_labels_and_the_name() {
    let m = workloads();
    let v = vector(
        &m,
        "sum without (pod, response_code) (istio_requests_total)",
        120,
    );
    // At 120 s the counters read 120·r: stable 120·(5 + 4 + 1) = 1200, canary 480.
    assert_eq!(
        v,
        [
            (
                labels(&[("destination_workload", "canary"), ("reporter", "source")]),
                480.0
            ),
            (
                labels(&[("destination_workload", "stable"), ("reporter", "source")]),
                1200.0
            ),
        ]
    );
}

#[test]
fn the_other_aggregations() {
    let m = workloads();
    let at = |q: &str| vector(&m, q, 120);
    // Values at 120 s: canary-1 480, stable-1 600, stable-2 200 (503), stable-2 480 (200).
    assert_eq!(at("count(istio_requests_total)")[0].1, 4.0);
    assert_eq!(at("max(istio_requests_total)")[0].1, 600.0);
    assert_eq!(at("min(istio_requests_total)")[0].1, 120.0);
    // (480 + 600 + 120 + 480)/4 = 420.
    assert_eq!(at("avg(istio_requests_total)")[0].1, 420.0);
    // Sorted 120, 480, 480, 600: the median's rank 1.5 is halfway between 480 and 480.
    assert_eq!(at("quantile(0.5, istio_requests_total)")[0].1, 480.0);
    // Rank 0.25·3 = 0.75 between 120 and 480: 120 + 0.75·360 = 390.
    assert_eq!(at("quantile(0.25, istio_requests_total)")[0].1, 390.0);
    // topk keeps every label, the name too, best first.
    let top = at("topk(2, istio_requests_total)");
    assert_eq!(
        by_label(&top, "pod"),
        [("stable-1".into(), 600.0), ("canary-1".into(), 480.0)]
    );
    assert_eq!(
        top[0].0.get("__name__").map(String::as_str),
        Some("istio_requests_total")
    );
    let bottom = at("bottomk(1, istio_requests_total)");
    assert_eq!(by_label(&bottom, "pod"), [("stable-2".into(), 120.0)]);
    // Two groups, the larger of each.
    let per_workload = at("topk by (destination_workload) (1, istio_requests_total)");
    assert_eq!(
        by_label(&per_workload, "pod"),
        [("canary-1".into(), 480.0), ("stable-1".into(), 600.0)]
    );
    // 480 twice, 600 and 120 once each.
    let counts = at(r#"count_values("value", istio_requests_total)"#);
    let mut counts = by_label(&counts, "value");
    counts.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        counts,
        [
            ("120".into(), 1.0),
            ("480".into(), 2.0),
            ("600".into(), 1.0)
        ]
    );
    // Population standard deviation of 2 and 4: mean 3, variance 1.
    let g = Memory(vec![
        series("g", &[("i", "1")], vec![(0, 2.0)]),
        series("g", &[("i", "2")], vec![(0, 4.0)]),
    ]);
    assert_eq!(single(&g, "stddev(g)", 0), 1.0);
    assert_eq!(single(&g, "stdvar(g)", 0), 1.0);
    assert_eq!(single(&g, "group(g)", 0), 1.0);
}

#[test]
fn comparisons_filter_and_bool_returns_zero_or_one() {
    let m = gauges();
    // up is 1, 2, 3: `> 1` keeps 2 and 3 as they are, the name included.
    let kept = vector(&m, "up > 1", 60);
    assert_eq!(
        by_label(&kept, "job"),
        [("api-canary".into(), 2.0), ("web".into(), 3.0)]
    );
    assert!(kept.iter().all(|(l, _)| l.contains_key("__name__")));
    // The scalar on the left: the vector's value is kept (3 > 2 is the only match).
    assert_eq!(
        by_label(&vector(&m, "2 < up", 60), "job"),
        [("web".into(), 3.0)]
    );
    // `bool` answers for every element, without the name.
    let answered = vector(&m, "up > bool 1", 60);
    assert_eq!(
        by_label(&answered, "job"),
        [
            ("api".into(), 0.0),
            ("api-canary".into(), 1.0),
            ("web".into(), 1.0)
        ]
    );
    assert!(answered.iter().all(|(l, _)| !l.contains_key("__name__")));
    assert_eq!(scalar(&m, "1 < bool 2", 0), 1.0);
    assert_eq!(scalar(&m, "2 == bool 3", 0), 0.0);
    // Between vectors, matched on all labels but the name: 2 > 1.5 only for api-canary.
    let v = Memory(vec![
        series("a", &[("job", "x")], vec![(0, 1.0)]),
        series("a", &[("job", "y")], vec![(0, 2.0)]),
        series("b", &[("job", "x")], vec![(0, 1.5)]),
        series("b", &[("job", "y")], vec![(0, 1.5)]),
    ]);
    assert_eq!(
        by_label(&vector(&v, "a > b", 0), "job"),
        [("y".into(), 2.0)]
    );
    assert_eq!(
        by_label(&vector(&v, "a >= bool b", 0), "job"),
        [("x".into(), 0.0), ("y".into(), 1.0)]
    );
}

#[test]
fn scalar_arithmetic_follows_ieee_and_precedence() {
    let m = Memory(vec![]);
    assert_eq!(scalar(&m, "1 + 2 * 3", 0), 7.0);
    assert_eq!(scalar(&m, "(1 + 2) * 3", 0), 9.0);
    // ^ is right-associative: 2^(3^2) = 2^9.
    assert_eq!(scalar(&m, "2 ^ 3 ^ 2", 0), 512.0);
    assert_eq!(scalar(&m, "7 % 4", 0), 3.0);
    assert_eq!(scalar(&m, "-7 % 4", 0), -3.0);
    assert_eq!(scalar(&m, "1 / 0", 0), f64::INFINITY);
    assert_eq!(scalar(&m, "-1 / 0", 0), f64::NEG_INFINITY);
    assert!(scalar(&m, "0 / 0", 0).is_nan());
    assert_eq!(scalar(&m, "-(2 - 5)", 0), 3.0);
    assert_eq!(scalar(&m, "time()", 90), 90.0);
    assert_eq!(run(&m, r#""text""#, 0), QueryValue::String("text".into()));
    assert_eq!(single(&m, "vector(2) * 3", 0), 6.0);
    assert_eq!(scalar(&m, "scalar(vector(4)) / 2", 0), 2.0);
    // An empty sum falls back to the `or`'s right side, as Argo templates often ask.
    assert_eq!(single(&m, "sum(missing) or vector(0)", 0), 0.0);
    // A query parsed once evaluates like the text.
    let parsed = parse("1 + 1").expect("valid");
    assert_eq!(evaluate(&m, &parsed, 0), Ok(QueryValue::Scalar(2.0)));
}

#[test]
fn vector_arithmetic_matches_labels_and_drops_the_name() {
    let m = Memory(vec![
        series("req", &[("job", "x"), ("code", "200")], vec![(0, 90.0)]),
        series("req", &[("job", "x"), ("code", "500")], vec![(0, 10.0)]),
        series("total", &[("job", "x")], vec![(0, 100.0)]),
        series("limit", &[("job", "x")], vec![(0, 50.0)]),
    ]);
    // One-to-one on all labels but the name.
    assert_eq!(
        vector(&m, "total - limit", 0),
        [(labels(&[("job", "x")]), 50.0)]
    );
    // Many-to-one: each code's share of the total, the codes kept.
    let shares = vector(&m, "req / ignoring(code) group_left total", 0);
    assert_eq!(
        by_label(&shares, "code"),
        [("200".into(), 0.9), ("500".into(), 0.1)]
    );
    assert!(shares.iter().all(|(l, _)| !l.contains_key("__name__")));
    // The same with the sides swapped.
    let swapped = vector(&m, "total / on(job) group_right req", 0);
    assert_eq!(
        by_label(&swapped, "code"),
        [("200".into(), 100.0 / 90.0), ("500".into(), 10.0)]
    );
    // Without group_left, two elements match one: an error, as in Prometheus.
    assert!(matches!(
        query(&m, "req / on(job) total", 0),
        Err(QueryError::Eval(e)) if e.contains("many-to-one matching must be explicit")
    ));
    // Set operators keep elements as they are.
    assert_eq!(vector(&m, "req and on(job) total", 0).len(), 2);
    assert_eq!(vector(&m, r#"req unless req{code="500"}"#, 0).len(), 1);
    assert_eq!(vector(&m, "total or limit", 0).len(), 1);
    assert_eq!(vector(&m, "total or req", 0).len(), 3);
    // Scalar on either side; an arithmetic result has no name.
    assert_eq!(
        vector(&m, "total * 2", 0),
        [(labels(&[("job", "x")]), 200.0)]
    );
    assert_eq!(
        vector(&m, "1 - total / 200", 0),
        [(labels(&[("job", "x")]), 0.5)]
    );
    // `or` matches on all labels but the name, so b adds nothing to a; on the name,
    // it adds b. Dropping those names then makes the two elements one: Prometheus refuses.
    let twins = Memory(vec![
        series("a", &[("job", "x")], vec![(0, 1.0)]),
        series("b", &[("job", "x")], vec![(0, 2.0)]),
    ]);
    assert_eq!(vector(&twins, "a or b", 0).len(), 1);
    assert_eq!(vector(&twins, "a or on(__name__) b", 0).len(), 2);
    assert!(matches!(
        query(&twins, "-(a or on(__name__) b)", 0),
        Err(QueryError::Eval(e)) if e.contains("same labelset")
    ));
}

#[test]
fn functions_over_ranges_and_values() {
    // A gauge at 10, 30, 20, 40 at 15, 30, 45, 60 s.
    let m = Memory(vec![series(
        "g",
        &[("job", "x")],
        vec![
            (15_000, 10.0),
            (30_000, 30.0),
            (45_000, 20.0),
            (60_000, 40.0),
        ],
    )]);
    let at = |q: &str| single_value(&m, q, 60);
    assert_eq!(at("sum_over_time(g[1m])"), 100.0);
    assert_eq!(at("avg_over_time(g[1m])"), 25.0);
    assert_eq!(at("min_over_time(g[1m])"), 10.0);
    assert_eq!(at("max_over_time(g[1m])"), 40.0);
    assert_eq!(at("count_over_time(g[1m])"), 4.0);
    assert_eq!(at("last_over_time(g[1m])"), 40.0);
    assert_eq!(at("changes(g[1m])"), 3.0);
    // (30 s, 60 s] leaves out the sample at 30 s: 20 and 40.
    assert_eq!(at("sum_over_time(g[30s])"), 60.0);
    // Only last_over_time keeps the name.
    let last = vector(&m, "last_over_time(g[1m])", 60);
    assert_eq!(last[0].0.get("__name__").map(String::as_str), Some("g"));
    assert!(
        !vector(&m, "max_over_time(g[1m])", 60)[0]
            .0
            .contains_key("__name__")
    );
    // Value functions: 40 → …
    assert_eq!(at("sqrt(g)"), 40f64.sqrt());
    assert_eq!(at("abs(-g)"), 40.0);
    assert_eq!(at("ceil(g / 3)"), 14.0);
    assert_eq!(at("floor(g / 3)"), 13.0);
    // Ties round up: 40/16 = 2.5 → 3; to the nearest 15: 40 → 45.
    assert_eq!(at("round(g / 16)"), 3.0);
    assert_eq!(at("round(g, 15)"), 45.0);
    assert_eq!(at("clamp_max(g, 25)"), 25.0);
    assert_eq!(at("clamp_min(g, 50)"), 50.0);
    assert_eq!(at("clamp(g, 0, 100)"), 40.0);
    assert!(vector(&m, "clamp(g, 10, 0)", 60).is_empty());
    assert_eq!(at("exp(ln(g))"), 40f64.ln().exp());
    // A subquery: g at every whole minute in (0 s, 120 s] is g at 60 s (40) and at
    // 120 s (the lookback still sees 40), so the max is 40 and there are 2 points.
    assert_eq!(single_value(&m, "max_over_time(g[2m:1m])", 120), 40.0);
    assert_eq!(single_value(&m, "count_over_time(g[2m:1m])", 120), 2.0);
    // absent: nothing named `missing`, labelled by the equality matchers.
    assert_eq!(
        vector(&m, r#"absent(missing{job="x", env=~"a.*"})"#, 60),
        [(labels(&[("job", "x")]), 1.0)]
    );
    assert!(vector(&m, "absent(g)", 60).is_empty());
    assert!(scalar(&m, r#"scalar(g{job="none"})"#, 60).is_nan());
    let replaced = vector(&m, r#"label_replace(g, "team", "t-$1", "job", "(.*)")"#, 60);
    assert_eq!(replaced[0].0.get("team").map(String::as_str), Some("t-x"));
}

/// The value of a one-element result, whatever its labels.
fn single_value(m: &Memory, q: &str, at_s: i64) -> f64 {
    single_named(m, q, at_s)
}

#[test]
fn parse_errors_say_what_was_expected() {
    let m = Memory(vec![]);
    let error = |q: &str| match query(&m, q, 0) {
        Err(QueryError::Parse(_)) => query(&m, q, 0).err().map(|e| e.to_string()),
        other => panic!("{q}: expected a parse error, got {other:?}"),
    };
    assert_eq!(
        error("sum(rate(x[5m])").as_deref(),
        Some("parse error: unclosed left parenthesis")
    );
    assert_eq!(
        error("rate(x)").as_deref(),
        Some("parse error: expected type matrix in call to function 'rate', got vector")
    );
    assert_eq!(
        error("sum(rate(x[5m])) /").as_deref(),
        Some("parse error: unexpected end of input")
    );
    assert_eq!(
        error("sum(x) bar").as_deref(),
        Some("parse error: 1:8: unexpected \"bar\"")
    );
    assert_eq!(
        error("sum by (a) x").as_deref(),
        Some("parse error: 1:12: unexpected \"x\"")
    );
    assert!(
        matches!(parse("no_such_function(x)"), Err(QueryError::Parse(e)) if e.contains("no_such_function"))
    );
}

#[test]
fn what_is_not_implemented_is_an_error_naming_it() {
    let m = gauges();
    let unsupported = |q: &str| match query(&m, q, 0) {
        Err(e @ QueryError::Unsupported(_)) => e.to_string(),
        other => panic!("{q}: expected Unsupported, got {other:?}"),
    };
    assert_eq!(
        unsupported("day_of_week(up)"),
        "the function day_of_week() is not supported by canarysim's PromQL evaluator"
    );
    assert!(unsupported("limitk(1, up)").contains("limitk"));
    assert!(unsupported("up[5m]").contains("range-vector result"));
    assert!(unsupported(r#"{__name__=~"u.*"}"#).contains("metric name"));
    assert!(unsupported("up + fill(0) up").contains("fill"));
}

#[test]
fn durations_no_duration_can_be_are_refused_before_the_parser_panics() {
    // Found by fuzzing (analysis_query): promql-parser panicked in Duration::from_secs_f64.
    let m = gauges();
    let huge = format!("ra[{}]", "3".repeat(81));
    let refused = query(&m, &huge, 60_000).unwrap_err().to_string();
    assert!(
        refused.starts_with("parse error: 1:4: duration \"333")
            && refused.ends_with("is out of range (Prometheus takes at most 292 years)"),
        "{refused}"
    );
    for bad in [
        "up[5m:1e30]",
        "up[1e999]",
        "up[Inf]",
        "up[NaN]",
        "rate(up[5m:1e30])",
        "up offset 1e30",
        "up offset -1e30",
        "up[1e999m]",
    ] {
        let e = query(&m, bad, 60_000).unwrap_err().to_string();
        assert!(e.contains("is out of range"), "{bad}: {e}");
    }
    // Durations in range, and large numbers outside durations, are read as before.
    for fine in [
        "up[9223372036]",
        "max_over_time(up[5m] offset 1h)",
        "max_over_time(rate(job:up:rate5m[5m])[1h:1m])",
        "up > 1e30",
        r#"up{job="[1e999]"}"#,
    ] {
        assert!(super::parse(fine).is_ok(), "{fine}");
    }
}
