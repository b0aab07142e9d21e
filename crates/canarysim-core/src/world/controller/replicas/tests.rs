//! Tests of the parent module.
use super::*;

fn int(i: i32) -> IntOrPercent {
    IntOrPercent::Int(i)
}
fn pct(s: &str) -> IntOrPercent {
    IntOrPercent::Str(s.to_string())
}
fn rs(spec: i32, available: i32) -> Option<RsCounts> {
    Some(RsCounts::new(spec, available))
}
fn fence(surge: i32, unavailable: i32) -> Fenceposts {
    Fenceposts {
        max_surge: surge,
        max_unavailable: unavailable,
    }
}
fn scs(replicas: Option<i32>, weight: Option<i32>, match_traffic_weight: bool) -> CanaryScale {
    CanaryScale {
        replicas,
        weight,
        match_traffic_weight,
    }
}
fn weights(canary: i32, stable: i32) -> Option<TrafficWeights> {
    Some(TrafficWeights { canary, stable })
}
fn set_weight_steps(ws: &[i32]) -> Vec<StepInfo> {
    ws.iter()
        .map(|&w| StepInfo {
            set_weight: Some(w),
            set_canary_scale: None,
        })
        .collect()
}

// ---------------- worked examples from the brief ----------------

#[test]
fn fenceposts_default_strings_are_25_percent() {
    let f = resolve_fenceposts(None, None, 10).unwrap();
    assert_eq!(f, fence(3, 2)); // ceil(2.5), floor(2.5)
    let f = resolve_fenceposts(Some(&pct("25")), Some(&pct("25%")), 10).unwrap();
    assert_eq!(f, fence(3, 2));
}

#[test]
fn fenceposts_string_without_percent_is_a_percentage() {
    // "1" = 1% of 10 → surge ceil(0.1) = 1, unavailable floor(0.1) = 0
    let f = resolve_fenceposts(Some(&pct("1")), Some(&pct("1")), 10).unwrap();
    assert_eq!(f, fence(1, 0));
    // every "%" is removed
    let f = resolve_fenceposts(Some(&pct("%5%0%")), Some(&int(0)), 10).unwrap();
    assert_eq!(f, fence(5, 0));
}

#[test]
fn fenceposts_int_is_absolute() {
    let f = resolve_fenceposts(Some(&int(3)), Some(&int(20)), 10).unwrap();
    assert_eq!(f, fence(3, 20));
}

#[test]
fn fenceposts_both_zero_percent_gives_unavailable_one() {
    let f = resolve_fenceposts(Some(&pct("0%")), Some(&pct("0%")), 10).unwrap();
    assert_eq!(f, fence(0, 1));
    assert_eq!(
        canary_fenceposts(Some(&pct("0%")), Some(&pct("0%")), 10),
        fence(0, 1)
    );
}

#[test]
fn fenceposts_junk_strings_are_errors() {
    assert!(resolve_fenceposts(Some(&pct("abc")), None, 10).is_err());
    assert!(resolve_fenceposts(None, Some(&pct("%")), 10).is_err());
    assert!(resolve_fenceposts(None, Some(&pct("1.5%")), 10).is_err());
    // MaxSurge/MaxUnavailable swallow the error as 0/0
    assert_eq!(
        canary_fenceposts(Some(&pct("abc")), Some(&int(4)), 10),
        fence(0, 0)
    );
}

#[test]
fn fenceposts_max_unavailable_capped_at_n_and_zero_for_zero_replicas() {
    assert_eq!(
        canary_fenceposts(Some(&int(1)), Some(&int(20)), 10),
        fence(1, 10)
    );
    assert_eq!(
        canary_fenceposts(Some(&int(1)), Some(&int(20)), 0),
        fence(1, 0)
    );
    // surge is not capped
    assert_eq!(
        canary_fenceposts(Some(&int(50)), Some(&int(0)), 10),
        fence(50, 0)
    );
}

#[test]
fn weight_is_max_when_promote_full_or_no_stable_or_current_is_stable() {
    let steps = set_weight_steps(&[20]);
    let base = CanaryState {
        replicas: 10,
        steps: &steps,
        stable_rs: "stable",
        current_pod_hash: "canary",
        ..Default::default()
    };
    assert_eq!(
        base.replicas_or_weight(None, None, false),
        ReplicasOrWeight::Weight(20)
    );
    let v = CanaryState {
        promote_full: true,
        ..base
    };
    assert_eq!(
        v.replicas_or_weight(None, None, false),
        ReplicasOrWeight::Weight(100)
    );
    let v = CanaryState {
        stable_rs: "",
        ..base
    };
    assert_eq!(
        v.replicas_or_weight(None, None, false),
        ReplicasOrWeight::Weight(100)
    );
    let v = CanaryState {
        current_pod_hash: "stable",
        ..base
    };
    assert_eq!(
        v.replicas_or_weight(None, None, false),
        ReplicasOrWeight::Weight(100)
    );
}

#[test]
fn weight_uses_nearest_set_canary_scale_with_traffic_routing() {
    let steps = [
        StepInfo {
            set_weight: Some(10),
            set_canary_scale: Some(scs(Some(3), None, false)),
        },
        StepInfo {
            set_weight: Some(40),
            set_canary_scale: None,
        },
        StepInfo {
            set_weight: None,
            set_canary_scale: Some(scs(None, None, true)),
        },
    ];
    let v = CanaryState {
        replicas: 10,
        steps: &steps,
        current_step_index: Some(1),
        traffic_routing: true,
        stable_rs: "s",
        current_pod_hash: "c",
        ..Default::default()
    };
    assert_eq!(
        v.replicas_or_weight(None, None, false),
        ReplicasOrWeight::Replicas(3)
    );
    // matchTrafficWeight on the nearest one disables it
    let v2 = CanaryState {
        current_step_index: Some(2),
        ..v
    };
    assert_eq!(
        v2.replicas_or_weight(None, None, false),
        ReplicasOrWeight::Weight(40)
    );
    // without traffic routing it is ignored
    let v3 = CanaryState {
        traffic_routing: false,
        ..v
    };
    assert_eq!(
        v3.replicas_or_weight(None, None, false),
        ReplicasOrWeight::Weight(40)
    );
    // on abort ignored unless abortScaleDownDelaySeconds: 0
    let v4 = CanaryState { aborted: true, ..v };
    assert_eq!(
        v4.replicas_or_weight(None, None, false),
        ReplicasOrWeight::Weight(0)
    );
    let v5 = CanaryState {
        aborted: true,
        abort_scale_down_delay_seconds: Some(0),
        ..v
    };
    assert_eq!(
        v5.replicas_or_weight(None, None, false),
        ReplicasOrWeight::Replicas(3)
    );
}

#[test]
fn current_set_weight_rules() {
    let steps = [
        StepInfo {
            set_weight: None,
            set_canary_scale: None,
        },
        StepInfo {
            set_weight: Some(30),
            set_canary_scale: None,
        },
        StepInfo::default(),
    ];
    assert_eq!(current_set_weight(false, Some(0), &steps, 100), 0); // none at or before
    assert_eq!(current_set_weight(false, Some(2), &steps, 100), 30);
    assert_eq!(current_set_weight(false, Some(3), &steps, 100), 100); // past the last step
    assert_eq!(current_set_weight(false, None, &[], 100), 100); // no steps
    assert_eq!(current_set_weight(true, Some(2), &steps, 100), 0); // aborted
}

#[test]
fn approximate_n1_w1_surge1() {
    assert_eq!(
        approximate_weighted_canary_stable_replica_counts(1, 1, 100, 1),
        (1, 1)
    );
}

#[test]
fn approximate_n3_w10_surge1() {
    assert_eq!(
        approximate_weighted_canary_stable_replica_counts(3, 10, 100, 1),
        (1, 3)
    );
}

#[test]
fn approximate_n10_w24_surge1() {
    assert_eq!(
        approximate_weighted_canary_stable_replica_counts(10, 24, 100, 1),
        (3, 8)
    );
}

#[test]
fn approximate_zero_replicas() {
    assert_eq!(
        approximate_weighted_canary_stable_replica_counts(0, 50, 100, 1),
        (0, 0)
    );
}

#[test]
fn traffic_routed_min_pods_n10_w5() {
    let mut p = TrafficRoutedParams::new(10, ReplicasOrWeight::Weight(5));
    p.min_pods_per_replica_set = Some(2);
    assert_eq!(traffic_routed_canary_counts(&p), (2, 10));
}

#[test]
fn traffic_routed_set_canary_scale_weight_200_on_4_replicas() {
    let p = TrafficRoutedParams::new(4, ReplicasOrWeight::Weight(200));
    assert_eq!(traffic_routed_canary_counts(&p), (8, 4));
}

#[test]
fn traffic_routed_dynamic_w20_actual_stable_90() {
    let mut p = TrafficRoutedParams::new(10, ReplicasOrWeight::Weight(20));
    p.dynamic_stable_scale = true;
    p.weights = weights(10, 90);
    assert_eq!(traffic_routed_canary_counts(&p), (2, 9));
}

#[test]
fn dynamic_abort_weight_steps_20_60_stable_4_canary_6() {
    assert_eq!(dynamic_abort_weight(10, 100, &[20, 60], 6, 4, false), 20);
    let steps = set_weight_steps(&[20, 60]);
    let v = CanaryState {
        replicas: 10,
        steps: &steps,
        traffic_routing: true,
        dynamic_stable_scale: true,
        aborted: true,
        stable_rs: "stable",
        current_pod_hash: "canary",
        ..Default::default()
    };
    assert_eq!(v.desired_canary_weight(rs(6, 6), rs(4, 4), false), 20);
    assert_eq!(
        v.traffic_routed_counts(rs(6, 6), rs(4, 4), false, weights(60, 40)),
        (6, 8)
    );
}

#[test]
fn basic_w20_surge2_scales_canary_up_then_stable_down() {
    let f = fence(2, 0);
    assert_eq!(
        basic_canary_counts(10, 20, f, rs(0, 0), rs(10, 10), &[], false),
        (2, 10)
    );
    assert_eq!(
        basic_canary_counts(10, 20, f, rs(2, 2), rs(10, 10), &[], false),
        (2, 8)
    );
}

#[test]
fn basic_w50_surge2_unavailable1() {
    assert_eq!(
        basic_canary_counts(10, 50, fence(2, 1), rs(0, 0), rs(10, 10), &[], false),
        (2, 9)
    );
}

#[test]
fn basic_w30_surge0_unavailable3_scales_both_down() {
    assert_eq!(
        basic_canary_counts(10, 30, fence(0, 3), rs(4, 4), rs(8, 5), &[], false),
        (3, 7)
    );
}

#[test]
fn basic_single_replica_w49_keeps_stable() {
    assert_eq!(
        basic_canary_counts(1, 49, fence(0, 1), rs(0, 0), rs(1, 1), &[], false),
        (0, 1)
    );
}

#[test]
fn basic_single_replica_w51_drains_stable_then_adds_canary() {
    assert_eq!(
        basic_canary_counts(1, 51, fence(0, 1), rs(0, 0), rs(1, 1), &[], false),
        (0, 0)
    );
    assert_eq!(
        basic_canary_counts(1, 51, fence(0, 1), rs(0, 0), rs(0, 0), &[], false),
        (1, 0)
    );
}

#[test]
fn basic_w5_surge0_unavailable1_stable_first_then_canary() {
    let f = fence(0, 1);
    assert_eq!(
        basic_canary_counts(10, 5, f, rs(0, 0), rs(10, 10), &[], false),
        (0, 9)
    );
    assert_eq!(
        basic_canary_counts(10, 5, f, rs(0, 0), rs(9, 9), &[], false),
        (1, 9)
    );
}

#[test]
fn basic_both_zero_percent_uses_unavailable_one() {
    let f = canary_fenceposts(Some(&pct("0%")), Some(&pct("0%")), 10);
    assert_eq!(
        basic_canary_counts(10, 10, f, rs(0, 0), rs(10, 10), &[], false),
        (0, 9)
    );
}

#[test]
fn at_desired_checks_canary_availability_and_stable_creation_only() {
    // canary spec = available = desired; stable spec = status.replicas = desired
    let canary = Some(RsCounts {
        spec: 3,
        replicas: 1,
        available: 3,
    });
    let stable = Some(RsCounts {
        spec: 1,
        replicas: 1,
        available: 0,
    });
    assert!(at_desired_replica_counts_for_canary(
        false,
        false,
        None,
        (3, 1),
        canary,
        stable,
        &[]
    ));
    let lagging = Some(RsCounts {
        spec: 1,
        replicas: 2,
        available: 1,
    });
    assert!(!at_desired_replica_counts_for_canary(
        false,
        false,
        None,
        (3, 1),
        canary,
        lagging,
        &[]
    ));
    // dynamic stable scale with traffic routing: stable is not checked
    assert!(at_desired_replica_counts_for_canary(
        true,
        true,
        None,
        (3, 1),
        canary,
        lagging,
        &[]
    ));
    // basic canary: older RSs must have no available pods; traffic-routed: ignored
    let older = [RsCounts::new(1, 1)];
    assert!(!at_desired_replica_counts_for_canary(
        false,
        false,
        None,
        (3, 1),
        canary,
        stable,
        &older
    ));
    assert!(at_desired_replica_counts_for_canary(
        true,
        false,
        None,
        (3, 1),
        canary,
        stable,
        &older
    ));
}

// ---------------- upstream: TestCalculateReplicaCountsForCanary ----------------

struct Case {
    name: &'static str,
    n: i32,
    set_weight: i32,
    max_surge: IntOrPercent,
    max_unavailable: IntOrPercent,
    promote_full: bool,
    stable: (i32, i32),
    canary: (i32, i32),
    exp_stable: i32,
    exp_canary: i32,
    older: Option<(i32, i32)>,
    scs: Option<CanaryScale>,
    traffic_routing: bool,
    abort_delay: Option<i32>,
    aborted: bool,
    min_pods: Option<i32>,
}

impl Default for Case {
    fn default() -> Self {
        Case {
            name: "",
            n: 0,
            set_weight: 0,
            max_surge: int(0),
            max_unavailable: int(0),
            promote_full: false,
            stable: (0, 0),
            canary: (0, 0),
            exp_stable: 0,
            exp_canary: 0,
            older: None,
            scs: None,
            traffic_routing: false,
            abort_delay: None,
            aborted: false,
            min_pods: None,
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn basic(
    name: &'static str,
    n: i32,
    w: i32,
    surge: IntOrPercent,
    unav: IntOrPercent,
    stable: (i32, i32),
    canary: (i32, i32),
    exp_stable: i32,
    exp_canary: i32,
) -> Case {
    Case {
        name,
        n,
        set_weight: w,
        max_surge: surge,
        max_unavailable: unav,
        stable,
        canary,
        exp_stable,
        exp_canary,
        ..Default::default()
    }
}

#[rustfmt::skip]
fn upstream_cases() -> Vec<Case> {
    vec![
        basic("Do not add extra RSs in scaleDownCount when .Spec.Replica < AvailableReplicas", 10, 100, int(3), int(0), (7, 8), (6, 3), 7, 6),
        basic("Use max surge int to scale up canary", 10, 20, int(2), int(0), (10, 10), (0, 0), 10, 2),
        basic("Use max surge percentage to scale up canary", 10, 20, pct("20%"), int(0), (10, 10), (0, 0), 10, 2),
        basic("Scale down extra stable replicas", 10, 20, pct("20%"), int(0), (10, 10), (2, 2), 8, 2),
        basic("Do not go past max surge", 10, 30, int(2), int(0), (10, 10), (0, 0), 10, 2),
        basic("Use max unavailable int to scale down stableRS", 10, 20, int(0), int(2), (10, 10), (0, 0), 8, 0),
        basic("Use max surge percentage to scale down stableRS", 10, 20, int(0), pct("20%"), (10, 10), (0, 0), 8, 0),
        basic("Do not go past max unavailable", 10, 30, int(0), int(2), (10, 10), (0, 0), 8, 0),
        basic("Use Max Surge and Max Unavailable", 10, 50, int(2), int(1), (10, 10), (0, 0), 9, 2),
        basic("Scale canaryRS to zero on setWeight of 0%", 10, 0, int(1), int(1), (10, 10), (1, 1), 10, 0),
        basic("Scale stable to zero on setWeight of 100%", 10, 100, int(1), int(1), (1, 1), (10, 10), 0, 10),
        basic("Do not scale canaryRS down to zero on non-zero weight", 1, 20, int(1), int(0), (1, 1), (0, 0), 1, 1),
        basic("Do not scale canaryRS down to zero on non-100 weight", 1, 90, int(1), int(0), (1, 1), (0, 0), 1, 1),
        basic("Scale canaryRS to zero on <50 weight without surge", 1, 49, int(0), int(1), (1, 1), (0, 0), 1, 0),
        basic("Scale stableRS down to zero on >=50 weight without surge", 1, 51, int(0), int(1), (1, 1), (0, 0), 0, 0),
        basic("Scale canaryRS to one on >=50 weight without surge and stable replicas", 1, 51, int(0), int(1), (0, 0), (0, 0), 0, 1),
        Case {
            older: Some((3, 3)),
            ..basic("Scale up Stable before canaryRS", 10, 30, int(1), int(0), (1, 1), (0, 0), 7, 1)
        },
        basic("Scale down canaryRS and stable", 10, 30, int(0), int(3), (8, 5), (4, 4), 7, 3),
        basic("Scale down stable and canary available", 10, 100, int(1), int(0), (10, 2), (10, 8), 2, 9),
        Case {
            older: Some((3, 3)),
            ..basic("Do not scale down canaryRS or stable when older RS count >= scaleDownCount", 10, 30, int(0), int(1), (8, 6), (4, 2), 8, 4)
        },
        basic("Do not round past maxSurge with uneven setWeight divisor", 10, 5, int(0), int(1), (10, 10), (0, 0), 9, 0),
        basic("Do not round past maxSurge with uneven setWeight divisor (part 2)", 10, 5, int(0), int(1), (9, 9), (0, 0), 9, 1),
        basic("Use maxUnavailable of 1 when percentage of maxUnavailable and maxSurge result in 0 replicas", 10, 10, pct("0%"), pct("0%"), (10, 10), (0, 0), 9, 0),
        Case {
            name: "For canary replicas, use setCanaryScale.replicas when specified along with trafficRouting (and ignore setWeight)",
            n: 1,
            stable: (1, 1),
            exp_stable: 1,
            exp_canary: 9,
            set_weight: 100,
            scs: Some(scs(Some(9), None, false)),
            traffic_routing: true,
            ..Default::default()
        },
        Case {
            name: "Use setCanaryScale.weight for canary replicas when specified with trafficRouting (and ignore setWeight)",
            n: 4,
            stable: (4, 4),
            exp_stable: 4,
            exp_canary: 8,
            set_weight: 100,
            scs: Some(scs(None, Some(200), false)),
            traffic_routing: true,
            ..Default::default()
        },
        Case {
            scs: Some(scs(Some(9), Some(100), true)),
            traffic_routing: true,
            ..basic("Ignore setCanaryScale replicas/weight when matchTrafficWeight is true", 10, 20, pct("20%"), int(0), (10, 10), (0, 0), 10, 2)
        },
        Case {
            scs: Some(scs(Some(9), Some(100), false)),
            traffic_routing: false,
            ..basic("Ignore setCanaryScale when trafficRouting is missing and use setWeight for replicas", 10, 20, pct("20%"), int(0), (10, 10), (0, 0), 10, 2)
        },
        basic("honor maxSurge during scale up when stableRS unavailable", 4, 100, int(1), int(0), (4, 1), (0, 0), 4, 1),
        basic("scale down to maxunavailable without exceeding maxSurge", 3, 99, int(0), int(2), (3, 3), (0, 0), 1, 0),
        basic("scale down to maxunavailable without exceeding maxSurge (part 2)", 3, 99, int(0), int(2), (1, 1), (0, 0), 1, 2),
        basic("honor maxUnavailable during scale down stableRS unavailable", 4, 100, int(1), int(0), (4, 1), (1, 1), 3, 1),
        basic("honor maxUnavailable when aborting or reducing weight part 1", 4, 0, int(1), int(0), (0, 0), (4, 4), 1, 4),
        basic("honor maxUnavailable when aborting or reducing weight part 2", 4, 0, int(1), int(0), (1, 0), (4, 4), 1, 4),
        basic("honor maxUnavailable when aborting or reducing weight part 3", 4, 0, int(1), int(0), (1, 1), (4, 4), 1, 3),
        Case {
            promote_full: true,
            ..basic("promote full does not consider weight", 4, 1, int(4), int(4), (4, 4), (0, 0), 0, 4)
        },
        Case {
            promote_full: true,
            ..basic("promote full still honors maxSurge/maxUnavailable", 4, 1, int(3), int(0), (4, 4), (0, 0), 4, 3)
        },
        Case {
            name: "aborted with abortScaleDownDelaySeconds:0 and setCanaryScale",
            n: 1,
            scs: Some(scs(Some(1), None, false)),
            traffic_routing: true,
            abort_delay: Some(0),
            aborted: true,
            stable: (1, 1),
            canary: (1, 1),
            exp_stable: 1,
            exp_canary: 1,
            ..Default::default()
        },
        Case {
            name: "aborted with abortScaleDownDelaySeconds>0 and setCanaryScale",
            n: 1,
            scs: Some(scs(Some(1), None, false)),
            traffic_routing: true,
            abort_delay: Some(30),
            aborted: true,
            stable: (1, 1),
            canary: (1, 1),
            exp_stable: 1,
            exp_canary: 0,
            ..Default::default()
        },
        Case {
            name: "Honor MinPodsPerReplicaSet when using trafficRouting and starting canary",
            n: 10,
            set_weight: 5,
            stable: (10, 10),
            traffic_routing: true,
            min_pods: Some(2),
            exp_stable: 10,
            exp_canary: 2,
            ..Default::default()
        },
        Case {
            name: "Cap MinPodsPerReplicaSet when it exceeds rollout replicas with trafficRouting",
            n: 1,
            set_weight: 100,
            promote_full: true,
            stable: (1, 1),
            traffic_routing: true,
            min_pods: Some(2),
            exp_stable: 1,
            exp_canary: 1,
            ..Default::default()
        },
    ]
}

#[test]
fn upstream_calculate_replica_counts_for_canary_table() {
    let cases = upstream_cases();
    assert_eq!(cases.len(), 40);
    for c in &cases {
        let steps = [StepInfo {
            set_weight: Some(c.set_weight),
            set_canary_scale: c.scs,
        }];
        let view = CanaryState {
            replicas: c.n,
            max_surge: Some(&c.max_surge),
            max_unavailable: Some(&c.max_unavailable),
            steps: &steps,
            traffic_routing: c.traffic_routing,
            min_pods_per_replica_set: c.min_pods,
            abort_scale_down_delay_seconds: c.abort_delay,
            aborted: c.aborted,
            promote_full: c.promote_full,
            stable_rs: "stable",
            current_pod_hash: "canary",
            ..Default::default()
        };
        let (canary, stable) = if c.traffic_routing {
            // upstream passes (rollout, nil, nil, nil)
            view.traffic_routed_counts(None, None, false, None)
        } else {
            let older: Vec<RsCounts> = c.older.iter().map(|&(s, a)| RsCounts::new(s, a)).collect();
            view.basic_counts(
                rs(c.canary.0, c.canary.1),
                rs(c.stable.0, c.stable.1),
                &older,
                false,
            )
        };
        assert_eq!(canary, c.exp_canary, "canary: {}", c.name);
        assert_eq!(stable, c.exp_stable, "stable: {}", c.name);
    }
}

// ---------------- upstream: TestApproximateWeightedNewStableReplicaCounts ----------------

#[rustfmt::skip]
#[test]
fn upstream_approximate_weighted_new_stable_replica_counts() {
    // (replicas, weight, maxWeight, maxSurge, expCanary, expStable)
    let cases: [(i32, i32, i32, i32, i32, i32); 56] = [
        (0, 0, 100, 0, 0, 0),
        (0, 50, 100, 0, 0, 0),
        (0, 100, 100, 0, 0, 0),
        (0, 0, 100, 1, 0, 0),
        (0, 50, 100, 1, 0, 0),
        (0, 100, 100, 1, 0, 0),
        (1, 0, 100, 0, 0, 1),
        (1, 1, 100, 0, 0, 1),
        (1, 49, 100, 0, 0, 1),
        (1, 50, 100, 0, 1, 0),
        (1, 99, 100, 0, 1, 0),
        (1, 100, 100, 0, 1, 0),
        (1, 0, 100, 1, 0, 1),
        (1, 1, 100, 1, 1, 1),
        (1, 49, 100, 1, 1, 1),
        (1, 50, 100, 1, 1, 1),
        (1, 99, 100, 1, 1, 1),
        (1, 100, 100, 1, 1, 0),
        (2, 0, 100, 0, 0, 2),
        (2, 1, 100, 0, 1, 1),
        (2, 50, 100, 0, 1, 1),
        (2, 99, 100, 0, 1, 1),
        (2, 100, 100, 0, 2, 0),
        (2, 0, 100, 1, 0, 2),
        (2, 1, 100, 1, 1, 2),
        (2, 50, 100, 1, 1, 1),
        (2, 99, 100, 1, 2, 1),
        (2, 100, 100, 1, 2, 0),
        (3, 10, 100, 0, 1, 2),
        (3, 25, 100, 0, 1, 2),
        (3, 33, 100, 0, 1, 2),
        (3, 34, 100, 0, 1, 2),
        (3, 49, 100, 0, 1, 2),
        (3, 50, 100, 0, 2, 1),
        (3, 10, 100, 1, 1, 3),
        (3, 25, 100, 1, 1, 3),
        (3, 33, 100, 1, 1, 2),
        (3, 34, 100, 1, 1, 2),
        (3, 49, 100, 1, 2, 2),
        (3, 50, 100, 1, 2, 2),
        (10, 0, 100, 1, 0, 10),
        (10, 1, 100, 0, 1, 9),
        (10, 14, 100, 0, 1, 9),
        (10, 15, 100, 0, 2, 8),
        (10, 16, 100, 0, 2, 8),
        (10, 99, 100, 0, 9, 1),
        (10, 100, 100, 1, 10, 0),
        (10, 0, 100, 1, 0, 10),
        (10, 1, 100, 1, 1, 10),
        (10, 18, 100, 1, 2, 9),
        (10, 19, 100, 1, 2, 9),
        (10, 20, 100, 1, 2, 8),
        (10, 23, 100, 1, 2, 8),
        (10, 24, 100, 1, 3, 8),
        (10, 25, 100, 1, 3, 8),
        (10, 99, 100, 1, 10, 1),
    ];
    // The upstream table also ends with (10, 100, 100, 1) → (10, 0); it is the same as
    // the entry above and checked here explicitly.
    assert_eq!(approximate_weighted_canary_stable_replica_counts(10, 100, 100, 1), (10, 0));
    for (n, w, mw, surge, exp_c, exp_s) in cases {
        assert_eq!(
            approximate_weighted_canary_stable_replica_counts(n, w, mw, surge),
            (exp_c, exp_s),
            "replicas:{n} weight:{w} maxweight:{mw} surge:{surge}"
        );
    }
}

// ---------------- upstream: smaller tests ----------------

fn upstream_rollout<'a>(n: i32, set_weight: i32, steps: &'a mut Vec<StepInfo>) -> CanaryState<'a> {
    // newRollout(n, setWeight, intstr 0, intstr 1, "canary", "stable", nil, nil)
    steps.insert(
        0,
        StepInfo {
            set_weight: Some(set_weight),
            set_canary_scale: None,
        },
    );
    CanaryState {
        replicas: n,
        steps,
        stable_rs: "stable",
        current_pod_hash: "canary",
        ..Default::default()
    }
}

#[test]
fn upstream_calculate_replica_counts_for_new_deployment() {
    let f = fence(0, 1);
    // stableRS and newRS are the same RS (name "stable"), both 10 spec / 0 available
    assert_eq!(
        basic_canary_counts(10, 10, f, rs(10, 0), rs(10, 0), &[], true),
        (10, 0)
    );
}

#[test]
fn upstream_calculate_replica_counts_for_canary_traffic_routing() {
    let mut steps = vec![];
    let mut v = upstream_rollout(10, 10, &mut steps);
    v.traffic_routing = true;
    assert_eq!(v.traffic_routed_counts(None, None, false, None), (1, 10));
}

#[test]
fn upstream_calculate_replica_counts_for_canary_stable_rs_edge_cases() {
    let steps = set_weight_steps(&[10]);
    let v = CanaryState {
        replicas: 10,
        max_surge: Some(&IntOrPercent::Int(0)),
        max_unavailable: Some(&IntOrPercent::Int(1)),
        steps: &steps,
        ..Default::default()
    };
    assert_eq!(v.basic_counts(rs(9, 9), None, &[], false), (10, 0));
    assert_eq!(v.basic_counts(rs(9, 9), rs(9, 9), &[], true), (10, 0));
}

#[test]
fn upstream_traffic_weight_to_replicas() {
    assert_eq!(traffic_weight_to_replicas(10, 0, 100), 0);
    assert_eq!(traffic_weight_to_replicas(10, 20, 100), 2);
    assert_eq!(traffic_weight_to_replicas(10, 25, 100), 3);
    assert_eq!(traffic_weight_to_replicas(10, 33, 100), 4);
    assert_eq!(traffic_weight_to_replicas(10, 99, 100), 10);
    assert_eq!(traffic_weight_to_replicas(10, 100, 100), 10);
    assert_eq!(traffic_weight_to_replicas(23, 100000000, 100000000), 23);
}

#[test]
fn upstream_get_current_set_weight() {
    let steps = set_weight_steps(&[10]);
    assert_eq!(current_set_weight(false, Some(1), &steps, 100), 100);
    assert_eq!(current_set_weight(false, Some(0), &steps, 100), 10);
    assert_eq!(current_set_weight(true, Some(0), &steps, 100), 0);
}

#[test]
fn upstream_get_replicas_for_scale_down() {
    assert_eq!(get_replicas_for_scale_down(None, false), 0);
    assert_eq!(get_replicas_for_scale_down(rs(3, 5), false), 3);
    assert_eq!(get_replicas_for_scale_down(rs(3, 2), true), 3);
    assert_eq!(get_replicas_for_scale_down(rs(3, 2), false), 2);
}

#[test]
fn upstream_get_canary_replicas_or_weight() {
    // full promote
    let v = CanaryState {
        promote_full: true,
        ..Default::default()
    };
    assert_eq!(
        v.replicas_or_weight(None, None, false),
        ReplicasOrWeight::Weight(100)
    );
    // canary step weight
    let steps = [
        StepInfo {
            set_weight: Some(10),
            set_canary_scale: None,
        },
        StepInfo {
            set_weight: None,
            set_canary_scale: Some(scs(None, Some(20), false)),
        },
    ];
    let v = CanaryState {
        steps: &steps,
        traffic_routing: true,
        current_step_index: Some(1),
        stable_rs: "stable-rs",
        ..Default::default()
    };
    assert_eq!(
        v.replicas_or_weight(None, None, false),
        ReplicasOrWeight::Weight(20)
    );
    // canary step replicas
    let steps = [
        StepInfo {
            set_weight: Some(10),
            set_canary_scale: None,
        },
        StepInfo {
            set_weight: None,
            set_canary_scale: Some(scs(Some(5), None, false)),
        },
    ];
    let v = CanaryState { steps: &steps, ..v };
    assert_eq!(
        v.replicas_or_weight(None, None, false),
        ReplicasOrWeight::Replicas(5)
    );
    // blue-green-ish rollout: aborted, no stableRS → full weight
    let v = CanaryState {
        aborted: true,
        ..Default::default()
    };
    assert_eq!(
        v.replicas_or_weight(None, None, false),
        ReplicasOrWeight::Weight(100)
    );
}

#[test]
fn upstream_all_desired_are_available() {
    let r = |spec, available| {
        Some(RsCounts {
            spec,
            replicas: 0,
            available,
        })
    };
    assert!(all_desired_are_available(r(10, 10), 10));
    assert!(!all_desired_are_available(r(10, 9), 10));
    assert!(!all_desired_are_available(None, 10));
    // (the two upstream cases with a nil spec.replicas are not representable: spec is i32)
}

#[test]
fn upstream_all_replica_progress_threshold_met() {
    let pctt = |v| {
        Some(ReplicaProgressThreshold {
            kind: ProgressType::Percentage,
            value: v,
        })
    };
    let pods = |v| {
        Some(ReplicaProgressThreshold {
            kind: ProgressType::Pods,
            value: v,
        })
    };
    let r = |spec, available| {
        Some(RsCounts {
            spec,
            replicas: 0,
            available,
        })
    };
    assert!(replica_progress_threshold_met(pctt(90), r(0, 9), 10));
    assert!(replica_progress_threshold_met(pods(9), r(0, 9), 10));
    assert!(!replica_progress_threshold_met(pctt(90), r(0, 8), 10));
    assert!(!replica_progress_threshold_met(pods(8), r(0, 7), 10));
    assert!(replica_progress_threshold_met(pods(-100), r(10, 10), 10));
    assert!(!replica_progress_threshold_met(None, r(5, 10), 10));
    assert!(!replica_progress_threshold_met(pods(5), None, 10));
    assert!(replica_progress_threshold_met(pctt(100), r(0, 100), 10));
    assert!(replica_progress_threshold_met(pctt(90), r(0, 0), 0));
}

#[test]
fn upstream_at_desired_replica_counts_for_canary() {
    let surge = IntOrPercent::Int(1);
    let unav = IntOrPercent::Int(1);
    let view = |steps: &'static [StepInfo]| CanaryState {
        replicas: 4,
        max_surge: Some(&surge),
        max_unavailable: Some(&unav),
        steps,
        stable_rs: "stable",
        current_pod_hash: "current",
        ..Default::default()
    };
    static STEPS_50: [StepInfo; 1] = [StepInfo {
        set_weight: Some(50),
        set_canary_scale: Some(CanaryScale {
            replicas: Some(2),
            weight: Some(2),
            match_traffic_weight: false,
        }),
    }];
    static STEPS_75: [StepInfo; 1] = [StepInfo {
        set_weight: Some(75),
        set_canary_scale: Some(CanaryScale {
            replicas: None,
            weight: None,
            match_traffic_weight: false,
        }),
    }];
    let r = |spec, available, replicas| {
        Some(RsCounts {
            spec,
            replicas,
            available,
        })
    };
    let w = weights(50, 50);
    // we are at desired replica counts and availability
    assert!(view(&STEPS_50).at_desired_replica_counts(r(2, 2, 2), r(2, 2, 2), &[], false, w));
    // new replicaset is not at desired counts or availability
    assert!(!view(&STEPS_50).at_desired_replica_counts(r(2, 1, 2), r(2, 2, 2), &[], false, w));
    // stable replicaset is not at desired counts or availability
    let w = weights(75, 25);
    assert!(!view(&STEPS_75).at_desired_replica_counts(r(3, 3, 3), r(2, 2, 2), &[], false, w));
    // stable replicaset is not at desired availability but is at correct count
    assert!(view(&STEPS_75).at_desired_replica_counts(r(3, 3, 1), r(1, 0, 1), &[], false, w));
    // when status field lags behind spec.replicas we fail
    let w = weights(50, 50);
    assert!(!view(&STEPS_50).at_desired_replica_counts(r(2, 2, 2), r(2, 2, 3), &[], false, w));
}

// ---------------- upstream: TestCalculateReplicaCountsForCanaryTrafficRoutingDynamicScale ----------------

#[rustfmt::skip]
#[test]
fn upstream_traffic_routing_dynamic_scale_table() {
    struct D {
        name: &'static str,
        replicas: i32,
        max_replicas: i32,
        abort: bool,
        steps: &'static [i32],
        canary_weight: i32,
        stable_weight: i32,
        canary_rs: i32,
        stable_rs: i32,
        stable_available: i32,
        exp_canary: i32,
        exp_stable: i32,
    }
    let cases = [
        D { name: "Should scale stable replica up depending on next expected canary downscale step, if abort is true", replicas: 10, max_replicas: 20, abort: true, steps: &[60], canary_weight: 60, stable_weight: 40, canary_rs: 6, stable_rs: 4, stable_available: 4, exp_canary: 6, exp_stable: 8 },
        D { name: "Should scale stable replica up depending on available canary replicas, if actual number of canaries is less than expected and abort is true", replicas: 10, max_replicas: 20, abort: true, steps: &[60], canary_weight: 60, stable_weight: 40, canary_rs: 1, stable_rs: 4, stable_available: 4, exp_canary: 6, exp_stable: 8 },
        D { name: "Should scale stable replica up depending on available stable replicas, if abort is true", replicas: 10, max_replicas: 20, abort: true, steps: &[60], canary_weight: 60, stable_weight: 40, canary_rs: 2, stable_rs: 8, stable_available: 4, exp_canary: 6, exp_stable: 8 },
        D { name: "Should scale stable up as if canaries are scaled down to 0 if stable and canary replicas not passed, and abort is true", replicas: 10, max_replicas: 20, abort: true, steps: &[60], canary_weight: 60, stable_weight: 40, canary_rs: 0, stable_rs: 0, stable_available: 0, exp_canary: 6, exp_stable: 10 },
        D { name: "Should scale down stable", replicas: 10, max_replicas: 10, abort: false, steps: &[], canary_weight: 10, stable_weight: 90, canary_rs: 0, stable_rs: 0, stable_available: 0, exp_canary: 1, exp_stable: 9 },
        D { name: "Should take max of desired canary (20) > actual (10)", replicas: 10, max_replicas: 20, abort: false, steps: &[], canary_weight: 10, stable_weight: 90, canary_rs: 0, stable_rs: 0, stable_available: 0, exp_canary: 2, exp_stable: 9 },
        D { name: "Should leave canary scaled up if there is still traffic to it on abort", replicas: 10, max_replicas: 20, abort: true, steps: &[], canary_weight: 20, stable_weight: 80, canary_rs: 0, stable_rs: 0, stable_available: 0, exp_canary: 2, exp_stable: 10 },
        D { name: "Should reduce canary when there is less traffic to it on abort", replicas: 10, max_replicas: 20, abort: true, steps: &[], canary_weight: 10, stable_weight: 90, canary_rs: 0, stable_rs: 0, stable_available: 0, exp_canary: 1, exp_stable: 10 },
    ];
    for d in &cases {
        let mut steps = set_weight_steps(d.steps);
        let mut v = upstream_rollout(d.replicas, d.max_replicas, &mut steps);
        v.traffic_routing = true;
        v.dynamic_stable_scale = true;
        v.aborted = d.abort;
        let stable = (d.stable_rs > 0).then(|| RsCounts::new(d.stable_rs, d.stable_available));
        // upstream builds the canary RS with available = spec
        let canary = (d.canary_rs > 0).then(|| RsCounts::new(d.canary_rs, d.canary_rs));
        let got = v.traffic_routed_counts(canary, stable, false, weights(d.canary_weight, d.stable_weight));
        assert_eq!(got, (d.exp_canary, d.exp_stable), "{}", d.name);
    }
}

// ---------------- upstream: TestGetDesiredCanaryWeightOnAbortWithScaleDownDelay ----------------

fn aborted_delay_view<'a>(steps: &'a [StepInfo], abort_delay: Option<i32>) -> CanaryState<'a> {
    CanaryState {
        replicas: 10,
        steps,
        traffic_routing: true,
        dynamic_stable_scale: true,
        abort_scale_down_delay_seconds: abort_delay,
        aborted: true,
        stable_rs: "stable",
        current_pod_hash: "canary",
        ..Default::default()
    }
}

#[test]
fn upstream_desired_canary_weight_on_abort_with_scale_down_delay() {
    let steps = set_weight_steps(&[10, 50]);
    // (name, abortDelay, stableAvailable, expectedWeight)
    let cases = [
        (
            "no explicit delay: weight is held up by canary size (progressive drain unchanged)",
            None,
            9,
            10,
        ),
        (
            "explicit delay: weight steps down gradually while stable is scaling up",
            Some(30),
            5,
            10,
        ),
        (
            "explicit delay: weight reaches zero once stable nearly covers spec.Replicas (deadlock case)",
            Some(30),
            9,
            0,
        ),
        (
            "explicit zero delay (leave canary up indefinitely): weight is held up by canary size",
            Some(0),
            9,
            10,
        ),
    ];
    for (name, delay, stable_available, expected) in cases {
        let v = aborted_delay_view(&steps, delay);
        let got = v.desired_canary_weight(rs(5, 5), rs(stable_available, stable_available), false);
        assert_eq!(got, expected, "{name}");
    }
    // stable scales to spec.Replicas once weight reaches zero
    let v = aborted_delay_view(&steps, Some(30));
    let (_, stable) = v.traffic_routed_counts(rs(5, 5), rs(9, 9), false, weights(10, 90));
    assert_eq!(stable, 10);
}

// ---------------- upstream: TestAbortedCanaryNotScaledUpOnStableAvailabilityGap ----------------

#[rustfmt::skip]
#[test]
fn upstream_aborted_canary_not_scaled_up_on_stable_availability_gap() {
    let steps5 = set_weight_steps(&[5, 10, 20, 50, 100]);
    let steps2 = set_weight_steps(&[10, 50]);
    let view = |n: i32, steps: &'static [StepInfo]| CanaryState {
        replicas: n,
        steps,
        traffic_routing: true,
        dynamic_stable_scale: true,
        aborted: true,
        stable_rs: "stable",
        current_pod_hash: "canary",
        ..Default::default()
    };
    let steps5: &'static [StepInfo] = Box::leak(steps5.into_boxed_slice());
    let steps2: &'static [StepInfo] = Box::leak(steps2.into_boxed_slice());
    // (name, n, stable spec/avail, canary spec/avail, weights, steps, expected)
    type Row = (&'static str, i32, (i32, i32), (i32, i32), (i32, i32), &'static [StepInfo], (i32, i32));
    let cases: [Row; 3] = [
        ("canary drained to 0 should not scale up when spec.replicas increases and stable lags", 12, (12, 10), (0, 0), (0, 100), steps5, (0, 12)),
        ("canary drained to 0 should not scale up when stable availability dips due to eviction", 10, (10, 7), (0, 0), (0, 100), steps5, (0, 10)),
        ("active abort drain is not affected by the ceiling cap", 10, (5, 5), (5, 5), (50, 50), steps2, (5, 9)),
    ];
    for (name, n, st, ca, w, steps, expected) in cases {
        let v = view(n, steps);
        let got = v.traffic_routed_counts(rs(ca.0, ca.1), rs(st.0, st.1), false, weights(w.0, w.1));
        assert_eq!(got, expected, "{name}");
    }

    // promote-full while aborted is not capped at drained canary size
    let v = CanaryState {
        promote_full: true,
        ..view(10, steps5)
    };
    assert_eq!(v.traffic_routed_counts(rs(0, 0), rs(10, 8), false, weights(0, 100)), (10, 10));

    // rollback onto stable pod hash is not capped at 0 (newRS and stableRS are the same RS)
    let rollback_steps: &'static [StepInfo] = steps5;
    let v = CanaryState {
        current_pod_hash: "stable",
        ..view(10, rollback_steps)
    };
    assert_eq!(v.traffic_routed_counts(rs(0, 0), rs(10, 8), true, weights(0, 100)), (10, 10));

    // abortScaleDownDelaySeconds:0 with setCanaryScale keeps canary scaled up
    let scs_steps: &'static [StepInfo] = Box::leak(Box::new([StepInfo {
        set_weight: Some(100),
        set_canary_scale: Some(scs(Some(1), None, false)),
    }]));
    let v = CanaryState {
        abort_scale_down_delay_seconds: Some(0),
        ..view(10, scs_steps)
    };
    assert_eq!(v.traffic_routed_counts(rs(0, 0), rs(10, 10), false, weights(0, 100)), (1, 10));
}

#[test]
fn basic_decreasing_rebalance_gives_availability_back_to_stable() {
    // canary 3 (none available) must shrink to 2; stable 4/4 is trimmed by the surge
    // excess (to 2), given back 1 for minAvailable 3, and the canary trimmed again to 1.
    assert_eq!(
        basic_canary_counts(4, 50, fence(0, 1), rs(3, 0), rs(4, 4), &[], false),
        (1, 3)
    );
}

// ---------------- quirks ----------------

#[test]
fn quirk_set_canary_scale_replicas_skip_min_pods_without_dynamic_scaling() {
    let mut p = TrafficRoutedParams::new(10, ReplicasOrWeight::Replicas(1));
    p.min_pods_per_replica_set = Some(3);
    assert_eq!(traffic_routed_canary_counts(&p), (1, 10));
    // ...but with dynamicStableScale minPods applies to both at the end
    p.dynamic_stable_scale = true;
    assert_eq!(traffic_routed_canary_counts(&p), (3, 10));
}

#[test]
fn quirk_has_explicit_abort_delay() {
    assert!(!has_explicit_abort_scale_down_delay(true, None));
    assert!(!has_explicit_abort_scale_down_delay(true, Some(0)));
    assert!(has_explicit_abort_scale_down_delay(true, Some(30)));
    assert!(!has_explicit_abort_scale_down_delay(false, Some(30)));
}

#[test]
fn quirk_max_traffic_weight_only_with_traffic_routing() {
    let v = CanaryState {
        max_traffic_weight: Some(1000),
        ..Default::default()
    };
    assert_eq!(v.max_weight(), 100);
    let v = CanaryState {
        traffic_routing: true,
        ..v
    };
    assert_eq!(v.max_weight(), 1000);
    let p = TrafficRoutedParams {
        max_weight: 1000,
        ..TrafficRoutedParams::new(10, ReplicasOrWeight::Weight(250))
    };
    assert_eq!(traffic_routed_canary_counts(&p), (3, 10));
}
