//! Replica arithmetic of the Argo Rollouts canary strategy.
//!
//! This is a faithful port of the pure arithmetic in argo-rollouts
//! `utils/replicaset/canary.go`, `utils/replicaset/replicaset.go` (fenceposts),
//! `utils/defaults/defaults.go` (defaults) and `utils/weightutil/weight.go`
//! (`MaxTrafficWeight`). The port follows the newest upstream text available to us
//! (canary.go / canary_test.go at commit `01240d81`, 2026, which already contains the
//! #4898 explicit-abort-delay fix and the #4973 aborted-canary ceiling). Quirks are
//! kept on purpose: int32 multiplications that can wrap, float rounding, the
//! "stable RS is the new RS" double counting, etc.
//!
//! Everything here is plain data in / plain data out. The "core" functions take
//! already-resolved values (weight, setCanaryScale in effect, fenceposts). The
//! [`RolloutView`] helpers resolve those values from a minimal view of a Rollout
//! (`spec` + `status`) and a list of [`StepInfo`] exactly like the Go functions that
//! take a `*v1alpha1.Rollout`.
//!
//! Not in these files (so not ported): any "stable can take 100 − weight" gate. The
//! only availability gates here are [`replica_progress_threshold_met`] and
//! [`at_desired_replica_counts_for_canary`].

/// `defaults.DefaultMaxSurge`: a *string*, so it is a percentage (25%).
pub const DEFAULT_MAX_SURGE: &str = "25";
/// `defaults.DefaultMaxUnavailable`: a *string*, so it is a percentage (25%).
pub const DEFAULT_MAX_UNAVAILABLE: &str = "25";
/// `weightutil.MaxTrafficWeight` default.
pub const DEFAULT_MAX_TRAFFIC_WEIGHT: i32 = 100;
/// `defaults.DefaultReplicas` (used when `spec.replicas` is nil).
pub const DEFAULT_REPLICAS: i32 = 1;

/// `intstr.IntOrString`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IntOrPercent {
    /// An absolute count.
    Int(i32),
    /// Any string; treated as a percentage with every `%` removed (so `"25"` is 25%).
    Str(String),
}

/// Resolved maxSurge / maxUnavailable, in pods.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fenceposts {
    pub max_surge: i32,
    pub max_unavailable: i32,
}

/// Counts of one ReplicaSet (`spec.replicas`, `status.replicas`, `status.availableReplicas`).
/// An absent ReplicaSet is `None` wherever an `Option<RsCounts>` is taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RsCounts {
    /// `spec.replicas`
    pub spec: i32,
    /// `status.replicas` (only read by [`all_desired_are_created`]).
    pub replicas: i32,
    /// `status.availableReplicas`
    pub available: i32,
}

impl RsCounts {
    /// `spec` and `available`; `status.replicas` is set equal to `spec`.
    pub fn new(spec: i32, available: i32) -> Self {
        RsCounts {
            spec,
            replicas: spec,
            available,
        }
    }
}

/// `v1alpha1.SetCanaryScale`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CanaryScale {
    pub replicas: Option<i32>,
    pub weight: Option<i32>,
    pub match_traffic_weight: bool,
}

/// The two fields of a canary step that matter for replica arithmetic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepInfo {
    pub set_weight: Option<i32>,
    pub set_canary_scale: Option<CanaryScale>,
}

/// Result of `GetCanaryReplicasOrWeight`: an explicit canary count
/// (setCanaryScale.replicas) or a weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicasOrWeight {
    Replicas(i32),
    Weight(i32),
}

/// `status.canary.weights` (only the two weights are used).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrafficWeights {
    pub canary: i32,
    pub stable: i32,
}

/// `v1alpha1.ReplicaProgressThreshold.Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressType {
    Percentage,
    Pods,
}

/// `v1alpha1.ReplicaProgressThreshold`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaProgressThreshold {
    pub kind: ProgressType,
    pub value: i32,
}

// ---------------------------------------------------------------------------------------
// Fenceposts (replicaset.go)
// ---------------------------------------------------------------------------------------

/// Mirrors the deprecated `intstr.GetValueFromIntOrPercent` (the one Argo calls): an Int
/// is absolute; a String has *every* `%` removed and is a percentage of `total`,
/// computed as `value * total / 100` in float64 then ceil (`round_up`) or floor.
fn value_from_int_or_percent(v: &IntOrPercent, total: i32, round_up: bool) -> Result<i64, String> {
    match v {
        IntOrPercent::Int(i) => Ok(i64::from(*i)),
        IntOrPercent::Str(s) => {
            let pct = crate::go::atoi(&s.replace('%', ""))
                .map_err(|e| format!("invalid value for IntOrString: invalid value {s:?}: {e}"))?;
            let x = pct as f64 * f64::from(total) / 100.0;
            Ok(if round_up { x.ceil() } else { x.floor() } as i64)
        }
    }
}

/// Mirrors `resolveFenceposts` with the arguments its callers pass
/// (`defaults.GetMaxSurgeOrDefault` / `GetMaxUnavailableOrDefault`): `None` means the
/// default string `"25"` (25%). Surge rounds up, unavailable rounds down; if both resolve
/// to 0, unavailable becomes 1. No capping here (see [`canary_fenceposts`]).
/// Results are truncated to int32 like Go's `int32(...)` conversion.
pub fn resolve_fenceposts(
    max_surge: Option<&IntOrPercent>,
    max_unavailable: Option<&IntOrPercent>,
    desired: i32,
) -> Result<Fenceposts, String> {
    let default_surge = IntOrPercent::Str(DEFAULT_MAX_SURGE.to_string());
    let default_unavailable = IntOrPercent::Str(DEFAULT_MAX_UNAVAILABLE.to_string());
    let surge = value_from_int_or_percent(max_surge.unwrap_or(&default_surge), desired, true)?;
    let mut unavailable = value_from_int_or_percent(
        max_unavailable.unwrap_or(&default_unavailable),
        desired,
        false,
    )?;
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    Ok(Fenceposts {
        max_surge: surge as i32,
        max_unavailable: unavailable as i32,
    })
}

/// Mirrors `MaxSurge(rollout)` + `MaxUnavailable(rollout)` for a canary rollout with
/// `n = spec.replicas`. Errors (caught by validation upstream) resolve to 0 for both
/// values. maxUnavailable is 0 when `n == 0` and is capped at `n`; maxSurge is not capped.
/// This is what [`basic_canary_counts`] expects as its `fence`.
pub fn canary_fenceposts(
    max_surge: Option<&IntOrPercent>,
    max_unavailable: Option<&IntOrPercent>,
    n: i32,
) -> Fenceposts {
    let resolved = resolve_fenceposts(max_surge, max_unavailable, n).unwrap_or_default();
    let max_unavailable = if n == 0 {
        0
    } else {
        resolved.max_unavailable.min(n)
    };
    Fenceposts {
        max_surge: resolved.max_surge,
        max_unavailable,
    }
}

// ---------------------------------------------------------------------------------------
// Basic (replica-weighted) canary
// ---------------------------------------------------------------------------------------

/// Mirrors `approximateWeightedCanaryStableReplicaCounts`: the (canary, stable) counts
/// whose canary/total ratio is closest to `desired_weight / max_weight`, the total being
/// `spec_replicas` or (if `max_surge > 0`) `spec_replicas + 1`. Returns `(canary, stable)`.
pub fn approximate_weighted_canary_stable_replica_counts(
    spec_replicas: i32,
    desired_weight: i32,
    max_weight: i32,
    max_surge: i32,
) -> (i32, i32) {
    if spec_replicas == 0 {
        return (0, 0);
    }
    // Go: float64(specReplicas*desiredWeight) -- an int32 product (wraps).
    let product = f64::from(spec_replicas.wrapping_mul(desired_weight));
    let ceil_count = (product / f64::from(max_weight)).ceil() as i32;
    let floor_count = (product / f64::from(max_weight)).floor() as i32;
    let tied = floor_ceiling_tied(desired_weight, max_weight, spec_replicas);
    let zero_allowed = desired_weight == max_weight
        || desired_weight == 0
        || (spec_replicas == 1 && max_surge == 0);

    // (canary, total)
    let mut options: Vec<(i32, i32)> = Vec::with_capacity(4);
    if ceil_count < spec_replicas || zero_allowed {
        options.push((ceil_count, spec_replicas));
    }
    if !tied && (floor_count != 0 || zero_allowed) {
        options.push((floor_count, spec_replicas));
    }
    if max_surge > 0 {
        options.push((ceil_count, spec_replicas + 1));
        let surge_tied = floor_ceiling_tied(desired_weight, max_weight, spec_replicas + 1);
        if !surge_tied && (floor_count != 0 || zero_allowed) {
            options.push((floor_count, spec_replicas + 1));
        }
    }
    if options.is_empty() {
        // "should not get here"
        return (0, spec_replicas);
    }
    let mut best = options[0];
    let mut best_delta = weight_delta(desired_weight, max_weight, best.0, best.1);
    for &opt in &options[1..] {
        let delta = weight_delta(desired_weight, max_weight, opt.0, opt.1);
        if delta < best_delta {
            best = opt;
            best_delta = delta;
        }
    }
    (best.0, best.1 - best.0)
}

/// `floorCeilingTied`: fractional part (Go `math.Modf`) of `total * (w / maxW)` is exactly .5.
fn floor_ceiling_tied(desired_weight: i32, max_weight: i32, total_replicas: i32) -> bool {
    let x = f64::from(total_replicas) * (f64::from(desired_weight) / f64::from(max_weight));
    x.fract() == 0.5
}

/// `weightDelta`: `|float64(canary*maxWeight)/float64(total) - desired|` (int32 product).
fn weight_delta(desired_weight: i32, max_weight: i32, canary: i32, total: i32) -> f64 {
    let actual = f64::from(canary.wrapping_mul(max_weight)) / f64::from(total);
    (actual - f64::from(desired_weight)).abs()
}

/// Mirrors `GetReplicasForScaleDown`: 0 for an absent RS; `spec` if `spec < available`;
/// `spec` if availability is ignored; otherwise `available`.
pub fn get_replicas_for_scale_down(rs: Option<RsCounts>, ignore_availability: bool) -> i32 {
    match rs {
        None => 0,
        Some(rs) if rs.spec < rs.available => rs.spec,
        Some(rs) if ignore_availability => rs.spec,
        Some(rs) => rs.available,
    }
}

/// `calculateScaleDownReplicaCount`.
fn calculate_scale_down_replica_count(
    drain_rs: Option<RsCounts>,
    desired: i32,
    scale_down_count: i32,
    drain_count: i32,
) -> i32 {
    match drain_rs {
        Some(rs) if rs.spec > desired => desired.max(rs.spec - scale_down_count),
        _ => drain_count,
    }
}

/// `adjustReplicaWithinLimits`; returns `(drain_count, adjust_count)`.
fn adjust_replica_within_limits(
    drain_rs: Option<RsCounts>,
    adjust_rs: Option<RsCounts>,
    mut drain_count: i32,
    mut adjust_count: i32,
    max_replica_count_allowed: i32,
    min_available_replica_count: i32,
) -> (i32, i32) {
    let mut total_available = 0;
    let mut over_the_limit = 0.max(adjust_count + drain_count - max_replica_count_allowed);
    if let Some(drain) = drain_rs {
        total_available += drain.available.min(drain_count);
    }
    if let Some(adjust) = adjust_rs {
        // 1. bring adjust RS within maxSurge
        adjust_count -= over_the_limit;
        // 2. availability of the adjusted count
        total_available += adjust.available.min(adjust_count);
        // 3. availability lost by (1)
        let extra_available_adjust = 0.max(adjust.available - adjust_count);
        // 4. distance from the maxUnavailable limit
        let more_needed = 0.max(min_available_replica_count - total_available);
        // 5. give back what is needed
        adjust_count += extra_available_adjust.min(more_needed);
        // 6./7. trim the drain RS by any remaining excess
        over_the_limit = 0.max(adjust_count + drain_count - max_replica_count_allowed);
        drain_count -= over_the_limit;
    }
    (drain_count, adjust_count)
}

/// Mirrors `CheckStableRSExists(newRS, stableRS)` in terms of this module's arguments:
/// the stable RS exists and is not the new (canary) RS.
pub fn check_stable_rs_exists(
    canary_exists: bool,
    stable_exists: bool,
    stable_is_new: bool,
) -> bool {
    if stable_is_new && canary_exists {
        return false;
    }
    stable_exists
}

/// The stable RS as Go sees it: when `stable_is_new`, the stable pointer is (normally the
/// same object as) the new RS; `stable` is used if given, else the canary counts.
fn effective_stable(
    canary: Option<RsCounts>,
    stable: Option<RsCounts>,
    stable_is_new: bool,
) -> Option<RsCounts> {
    if stable_is_new {
        stable.or(canary)
    } else {
        stable
    }
}

/// Mirrors `CalculateReplicaCountsForBasicCanary` (canary without traffic routing).
/// Returns this reconcile's next `(canary, stable)` spec counts.
///
/// * `n`: `spec.replicas` (already defaulted), `weight`: desired weight resolved by the
///   caller (`GetCanaryReplicasOrWeight`; without traffic routing this is always a
///   weight and max weight is always 100).
/// * `fence`: from [`canary_fenceposts`] (i.e. `MaxSurge` / capped `MaxUnavailable`).
/// * `canary`: the new RS; `stable`: the stable RS; `older`: every other RS.
/// * `stable_is_new`: the stable RS is the new RS (same name). Pass the same counts as
///   `stable` (or `None`: the canary counts are then used). Like Go, that RS is still fed
///   into the scale-down arithmetic (double counted, quirk kept) while the returned
///   stable count is 0 and the canary target is `n`.
pub fn basic_canary_counts(
    n: i32,
    weight: i32,
    fence: Fenceposts,
    canary: Option<RsCounts>,
    stable: Option<RsCounts>,
    older: &[RsCounts],
    stable_is_new: bool,
) -> (i32, i32) {
    let max_surge = fence.max_surge;
    let (mut desired_new, mut desired_stable) = approximate_weighted_canary_stable_replica_counts(
        n,
        weight,
        DEFAULT_MAX_TRAFFIC_WEIGHT,
        max_surge,
    );

    let stable_rs = effective_stable(canary, stable, stable_is_new);
    let scale_stable = check_stable_rs_exists(canary.is_some(), stable_rs.is_some(), stable_is_new);

    let mut new_count = canary.map_or(0, |c| c.spec);
    let mut stable_count = 0;
    if scale_stable {
        stable_count = stable_rs.map_or(0, |s| s.spec);
    } else {
        // No stable RS, or it is the new RS: go straight to 100% new.
        desired_new = n;
        desired_stable = 0;
    }

    let max_replica_count_allowed = n + max_surge;
    let older_total: i32 = older.iter().map(|r| r.spec).sum();
    let total_current = older_total
        + canary.map_or(0, |c| c.spec)
        + if scale_stable {
            stable_rs.map_or(0, |s| s.spec)
        } else {
            0
        };
    let mut scale_up = max_replica_count_allowed - total_current;

    if let (true, Some(s)) = (scale_stable, stable_rs)
        && s.spec < desired_stable
        && scale_up > 0
    {
        if s.spec + scale_up < desired_stable {
            stable_count = s.spec + scale_up;
            scale_up = 0;
        } else {
            stable_count = desired_stable;
            scale_up -= desired_stable - s.spec;
        }
    }

    if let Some(c) = canary
        && c.spec < desired_new
        && scale_up > 0
    {
        new_count = if c.spec + scale_up < desired_new {
            c.spec + scale_up
        } else {
            desired_new
        };
    }

    if older_total > 0 {
        // Older RSs are scaled down first (elsewhere).
        return (new_count, stable_count);
    }

    let min_available = n - fence.max_unavailable;
    let is_increasing = canary.is_none_or(|c| desired_new >= c.spec);
    let to_scale_down = get_replicas_for_scale_down(canary, !is_increasing)
        + get_replicas_for_scale_down(stable_rs, is_increasing);
    if to_scale_down <= min_available {
        return (new_count, stable_count);
    }

    let scale_down = to_scale_down - min_available;
    if !is_increasing {
        new_count = calculate_scale_down_replica_count(canary, desired_new, scale_down, new_count);
        (new_count, stable_count) = adjust_replica_within_limits(
            canary,
            stable_rs,
            new_count,
            stable_count,
            max_replica_count_allowed,
            min_available,
        );
    } else if scale_stable {
        stable_count =
            calculate_scale_down_replica_count(stable_rs, desired_stable, scale_down, stable_count);
        (stable_count, new_count) = adjust_replica_within_limits(
            stable_rs,
            canary,
            stable_count,
            new_count,
            max_replica_count_allowed,
            min_available,
        );
    }
    (new_count, stable_count)
}

// ---------------------------------------------------------------------------------------
// Traffic-routed canary
// ---------------------------------------------------------------------------------------

/// Mirrors `trafficWeightToReplicas`: `ceil(weight * replicas / max_weight)` in float64.
pub fn traffic_weight_to_replicas(replicas: i32, weight: i32, max_weight: i32) -> i32 {
    (f64::from(weight) * f64::from(replicas) / f64::from(max_weight)).ceil() as i32
}

/// Mirrors `CheckMinPodsPerReplicaSet` for a traffic-routed canary: 0 stays 0; otherwise
/// at least `min(min_pods_per_replica_set, n)`. (Upstream returns `count` unchanged when
/// traffic routing is absent; callers of this module only use it with traffic routing.)
pub fn check_min_pods_per_replica_set(
    count: i32,
    min_pods_per_replica_set: Option<i32>,
    n: i32,
) -> i32 {
    if count == 0 {
        return count;
    }
    match min_pods_per_replica_set {
        None => count,
        Some(min_pods) => count.max(min_pods.min(n)),
    }
}

/// Inputs of [`traffic_routed_canary_counts`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrafficRoutedParams {
    /// `spec.replicas` (defaulted).
    pub n: i32,
    /// `GetCanaryReplicasOrWeight` result.
    pub target: ReplicasOrWeight,
    /// `MaxTrafficWeight` (100 unless `trafficRouting.maxTrafficWeight`).
    pub max_weight: i32,
    pub min_pods_per_replica_set: Option<i32>,
    pub dynamic_stable_scale: bool,
    /// `status.abort`
    pub aborted: bool,
    /// `status.promoteFull`
    pub promote_full: bool,
    /// `status.canary.weights` (actual weights last set on the router), if any.
    pub weights: Option<TrafficWeights>,
    /// `newRS.spec.replicas`, `None` when there is no new RS.
    pub canary_spec: Option<i32>,
    /// `CheckStableRSExists(newRS, stableRS)`.
    pub stable_exists_and_differs: bool,
    /// `UseSetCanaryScale(rollout) != nil` (even a setCanaryScale with neither field).
    pub set_canary_scale_in_use: bool,
}

impl TrafficRoutedParams {
    /// `n` and `target`; max weight 100, everything else off / absent.
    pub fn new(n: i32, target: ReplicasOrWeight) -> Self {
        TrafficRoutedParams {
            n,
            target,
            max_weight: DEFAULT_MAX_TRAFFIC_WEIGHT,
            min_pods_per_replica_set: None,
            dynamic_stable_scale: false,
            aborted: false,
            promote_full: false,
            weights: None,
            canary_spec: None,
            stable_exists_and_differs: false,
            set_canary_scale_in_use: false,
        }
    }
}

/// Mirrors `CalculateReplicaCountsForTrafficRoutedCanary`; returns `(canary, stable)`.
///
/// * canary = setCanaryScale.replicas (raw), else `max(minPods, ceil(W·N/maxW))`.
/// * without dynamicStableScale: stable = N.
/// * with it: stable = max(ceil((maxW−W)·N/maxW), ceil(actualStable·N/maxW)); on abort
///   canary = max(canary, ceil(actualCanary·N/maxW)), then capped at
///   max(ceil(actualCanary·N/maxW), newRS.spec) when there is a new RS, not promoteFull,
///   a separate stable RS and no setCanaryScale in use (#4973); minPods on both.
pub fn traffic_routed_canary_counts(p: &TrafficRoutedParams) -> (i32, i32) {
    let n = p.n;
    let max_weight = p.max_weight;
    let (mut canary, desired_weight) = match p.target {
        ReplicasOrWeight::Replicas(r) => (r, 0),
        ReplicasOrWeight::Weight(w) => (
            check_min_pods_per_replica_set(
                traffic_weight_to_replicas(n, w, max_weight),
                p.min_pods_per_replica_set,
                n,
            ),
            w,
        ),
    };

    if !p.dynamic_stable_scale {
        return (canary, n);
    }

    let mut stable = traffic_weight_to_replicas(n, max_weight - desired_weight, max_weight);
    if let Some(weights) = p.weights {
        stable = stable.max(traffic_weight_to_replicas(n, weights.stable, max_weight));
        if p.aborted {
            let traffic_count = traffic_weight_to_replicas(n, weights.canary, max_weight);
            canary = traffic_count.max(canary);
            if let Some(spec) = p.canary_spec
                && !p.promote_full
                && p.stable_exists_and_differs
                && !p.set_canary_scale_in_use
            {
                let committed_ceiling = traffic_count.max(spec);
                canary = canary.min(committed_ceiling);
            }
        }
    }
    (
        check_min_pods_per_replica_set(canary, p.min_pods_per_replica_set, n),
        check_min_pods_per_replica_set(stable, p.min_pods_per_replica_set, n),
    )
}

// ---------------------------------------------------------------------------------------
// Desired weight
// ---------------------------------------------------------------------------------------

/// Mirrors the abort + dynamicStableScale branch of `GetDesiredCanaryWeight` (only valid
/// when both the new RS and the stable RS exist). `set_weights` are the setWeight values
/// of the steps in step order (steps without setWeight omitted).
///
/// expected = n − stable.available; c = max(expected, canary.available), or just
/// `expected` when `explicit_abort_delay` ([`has_explicit_abort_scale_down_delay`]).
/// Walks the steps backwards and returns the first setWeight with
/// `ceil(weight·n/maxW) < c`; none → 0.
pub fn dynamic_abort_weight(
    n: i32,
    max_weight: i32,
    set_weights: &[i32],
    canary_available: i32,
    stable_available: i32,
    explicit_abort_delay: bool,
) -> i32 {
    let expected = n - stable_available;
    let canary_replicas = if explicit_abort_delay {
        expected
    } else {
        expected.max(canary_available)
    };
    set_weights
        .iter()
        .rev()
        .copied()
        .find(|&w| traffic_weight_to_replicas(n, w, max_weight) < canary_replicas)
        .unwrap_or(0)
}

/// `defaults.HasExplicitAbortScaleDownDelay` (its source was not available to us; inferred
/// from upstream tests and `GetAbortScaleDownDelaySecondsOrDefault`): the canary has
/// traffic routing and `abortScaleDownDelaySeconds` is set to a value > 0. An explicit 0
/// ("leave the canary up") does not count, as upstream tests require.
pub fn has_explicit_abort_scale_down_delay(
    traffic_routing: bool,
    abort_scale_down_delay_seconds: Option<i32>,
) -> bool {
    traffic_routing && matches!(abort_scale_down_delay_seconds, Some(d) if d > 0)
}

/// `GetCurrentCanaryStep`: index of the current step, `None` when there are no steps or
/// the index is past the last step. (A negative index would panic in Go; here it is `None`.)
pub fn current_canary_step(current_step_index: Option<i32>, step_count: usize) -> Option<usize> {
    if step_count == 0 {
        return None;
    }
    let idx = usize::try_from(current_step_index.unwrap_or(0)).ok()?;
    (idx < step_count).then_some(idx)
}

/// Mirrors `GetCurrentSetWeight`: 0 if aborted; `max_weight` if there is no current step
/// (no steps, or index past the last step); else the latest setWeight at or before the
/// current step; else 0.
pub fn current_set_weight(
    aborted: bool,
    current_step_index: Option<i32>,
    steps: &[StepInfo],
    max_weight: i32,
) -> i32 {
    if aborted {
        return 0;
    }
    let Some(idx) = current_canary_step(current_step_index, steps.len()) else {
        return max_weight;
    };
    crate::model::vocabulary::latest_set_weight(steps, idx, |s| s.set_weight)
}

/// Mirrors `UseSetCanaryScale`: only with traffic routing; on abort only when
/// `abortScaleDownDelaySeconds` is explicitly 0; then the nearest setCanaryScale at or
/// before the current step, unless that one has `matchTrafficWeight: true`.
pub fn use_set_canary_scale(
    traffic_routing: bool,
    aborted: bool,
    abort_scale_down_delay_seconds: Option<i32>,
    current_step_index: Option<i32>,
    steps: &[StepInfo],
) -> Option<CanaryScale> {
    if !traffic_routing {
        return None;
    }
    // GetAbortScaleDownDelaySecondsOrDefault returns nil only for an explicit 0.
    if aborted && abort_scale_down_delay_seconds != Some(0) {
        return None;
    }
    let idx = current_canary_step(current_step_index, steps.len())?;
    let scs = steps[..=idx]
        .iter()
        .rev()
        .find_map(|s| s.set_canary_scale)?;
    if scs.match_traffic_weight {
        None
    } else {
        Some(scs)
    }
}

/// Mirrors `GetCanaryReplicasOrWeight` given already-resolved pieces: `full` is
/// `promoteFull || status.stableRS == "" || currentPodHash == status.stableRS`;
/// `set_canary_scale` is [`use_set_canary_scale`]; `desired_weight` is the
/// `GetDesiredCanaryWeight` value (see [`RolloutView::desired_canary_weight`]).
pub fn canary_replicas_or_weight(
    full: bool,
    max_weight: i32,
    set_canary_scale: Option<CanaryScale>,
    desired_weight: i32,
) -> ReplicasOrWeight {
    if full {
        return ReplicasOrWeight::Weight(max_weight);
    }
    if let Some(scs) = set_canary_scale {
        if let Some(r) = scs.replicas {
            return ReplicasOrWeight::Replicas(r);
        } else if let Some(w) = scs.weight {
            return ReplicasOrWeight::Weight(w);
        }
    }
    ReplicasOrWeight::Weight(desired_weight)
}

// ---------------------------------------------------------------------------------------
// "At desired counts" gates
// ---------------------------------------------------------------------------------------

/// `allDesiredAreAvailable`: RS exists, spec == desired and available == desired.
pub fn all_desired_are_available(rs: Option<RsCounts>, desired: i32) -> bool {
    rs.is_some_and(|r| r.spec == desired && r.available == desired)
}

/// `allDesiredAreCreated`: RS exists, spec == desired and status.replicas == desired.
pub fn all_desired_are_created(rs: Option<RsCounts>, desired: i32) -> bool {
    rs.is_some_and(|r| r.spec == desired && r.replicas == desired)
}

/// Mirrors `ReplicaProgressThresholdMet`. Without a threshold, without an RS, or with a
/// negative threshold value: [`all_desired_are_available`]. Percentage: desired 0 → true,
/// else `available/desired·100 ≥ value` (1e-10 tolerance). Pods: `available ≥ value`.
/// With a threshold, `spec` is not checked.
pub fn replica_progress_threshold_met(
    threshold: Option<ReplicaProgressThreshold>,
    rs: Option<RsCounts>,
    desired: i32,
) -> bool {
    match (threshold, rs) {
        (Some(t), Some(rs)) if t.value >= 0 => match t.kind {
            ProgressType::Percentage => {
                if desired == 0 {
                    return true;
                }
                let pct = f64::from(rs.available) / f64::from(desired) * 100.0;
                let value = f64::from(t.value);
                pct >= value || (pct - value).abs() <= 1e-10
            }
            ProgressType::Pods => rs.available >= t.value,
        },
        _ => all_desired_are_available(rs, desired),
    }
}

/// Mirrors `AtDesiredReplicaCountsForCanary` given the desired `(canary, stable)` counts
/// computed by [`basic_canary_counts`] (no traffic routing) or
/// [`traffic_routed_canary_counts`]:
/// * canary: [`replica_progress_threshold_met`] (default: spec = available = desired);
/// * stable (unless traffic routing with dynamicStableScale): spec = status.replicas =
///   desired — availability of the stable RS is *not* checked;
/// * basic canary only: the older RSs have 0 available pods in total.
///
/// `stable` is the stable RS as Go sees it (the new RS itself when they are the same).
pub fn at_desired_replica_counts_for_canary(
    traffic_routing: bool,
    dynamic_stable_scale: bool,
    threshold: Option<ReplicaProgressThreshold>,
    desired: (i32, i32),
    canary: Option<RsCounts>,
    stable: Option<RsCounts>,
    older: &[RsCounts],
) -> bool {
    let (desired_canary, desired_stable) = desired;
    if !replica_progress_threshold_met(threshold, canary, desired_canary) {
        return false;
    }
    if (!traffic_routing || !dynamic_stable_scale)
        && !all_desired_are_created(stable, desired_stable)
    {
        return false;
    }
    if !traffic_routing && older.iter().map(|r| r.available).sum::<i32>() != 0 {
        return false;
    }
    true
}

// ---------------------------------------------------------------------------------------
// Rollout-level convenience (the Go functions that take *v1alpha1.Rollout)
// ---------------------------------------------------------------------------------------

/// The parts of a canary Rollout's spec and status that the replica arithmetic reads.
#[derive(Clone, Copy, Debug, Default)]
pub struct RolloutView<'a> {
    /// `spec.replicas` after `GetReplicasOrDefault` (nil → [`DEFAULT_REPLICAS`]).
    pub replicas: i32,
    pub max_surge: Option<&'a IntOrPercent>,
    pub max_unavailable: Option<&'a IntOrPercent>,
    pub steps: &'a [StepInfo],
    /// `status.currentStepIndex`
    pub current_step_index: Option<i32>,
    /// `spec.strategy.canary.trafficRouting != nil`
    pub traffic_routing: bool,
    /// `trafficRouting.maxTrafficWeight`
    pub max_traffic_weight: Option<i32>,
    pub dynamic_stable_scale: bool,
    pub min_pods_per_replica_set: Option<i32>,
    pub abort_scale_down_delay_seconds: Option<i32>,
    pub replica_progress_threshold: Option<ReplicaProgressThreshold>,
    /// `status.abort`
    pub aborted: bool,
    /// `status.promoteFull`
    pub promote_full: bool,
    /// `status.stableRS` (pod template hash, may be empty)
    pub stable_rs: &'a str,
    /// `status.currentPodHash`
    pub current_pod_hash: &'a str,
}

impl RolloutView<'_> {
    /// `weightutil.MaxTrafficWeight`.
    pub fn max_weight(&self) -> i32 {
        match (self.traffic_routing, self.max_traffic_weight) {
            (true, Some(w)) => w,
            _ => DEFAULT_MAX_TRAFFIC_WEIGHT,
        }
    }

    /// `MaxSurge(rollout)` / `MaxUnavailable(rollout)`.
    pub fn fenceposts(&self) -> Fenceposts {
        canary_fenceposts(self.max_surge, self.max_unavailable, self.replicas)
    }

    /// `UseSetCanaryScale(rollout)`.
    pub fn set_canary_scale(&self) -> Option<CanaryScale> {
        use_set_canary_scale(
            self.traffic_routing,
            self.aborted,
            self.abort_scale_down_delay_seconds,
            self.current_step_index,
            self.steps,
        )
    }

    /// `GetCurrentSetWeight(rollout)`.
    pub fn current_set_weight(&self) -> i32 {
        current_set_weight(
            self.aborted,
            self.current_step_index,
            self.steps,
            self.max_weight(),
        )
    }

    /// `GetDesiredCanaryWeight(rollout, newRS, stableRS)`.
    pub fn desired_canary_weight(
        &self,
        canary: Option<RsCounts>,
        stable: Option<RsCounts>,
        stable_is_new: bool,
    ) -> i32 {
        let stable = effective_stable(canary, stable, stable_is_new);
        if self.aborted
            && self.dynamic_stable_scale
            && let (Some(c), Some(s)) = (canary, stable)
        {
            let set_weights: Vec<i32> = self.steps.iter().filter_map(|s| s.set_weight).collect();
            return dynamic_abort_weight(
                self.replicas,
                self.max_weight(),
                &set_weights,
                c.available,
                s.available,
                has_explicit_abort_scale_down_delay(
                    self.traffic_routing,
                    self.abort_scale_down_delay_seconds,
                ),
            );
        }
        self.current_set_weight()
    }

    /// `GetCanaryReplicasOrWeight(rollout, newRS, stableRS)`.
    pub fn replicas_or_weight(
        &self,
        canary: Option<RsCounts>,
        stable: Option<RsCounts>,
        stable_is_new: bool,
    ) -> ReplicasOrWeight {
        let full = self.promote_full
            || self.stable_rs.is_empty()
            || self.current_pod_hash == self.stable_rs;
        if full {
            return ReplicasOrWeight::Weight(self.max_weight());
        }
        canary_replicas_or_weight(
            false,
            self.max_weight(),
            self.set_canary_scale(),
            self.desired_canary_weight(canary, stable, stable_is_new),
        )
    }

    /// `CalculateReplicaCountsForBasicCanary(rollout, newRS, stableRS, otherRSs)`.
    pub fn basic_counts(
        &self,
        canary: Option<RsCounts>,
        stable: Option<RsCounts>,
        older: &[RsCounts],
        stable_is_new: bool,
    ) -> (i32, i32) {
        let weight = match self.replicas_or_weight(canary, stable, stable_is_new) {
            ReplicasOrWeight::Weight(w) => w,
            ReplicasOrWeight::Replicas(_) => 0,
        };
        basic_canary_counts(
            self.replicas,
            weight,
            self.fenceposts(),
            canary,
            stable,
            older,
            stable_is_new,
        )
    }

    /// `CalculateReplicaCountsForTrafficRoutedCanary(rollout, newRS, stableRS, weights)`.
    pub fn traffic_routed_counts(
        &self,
        canary: Option<RsCounts>,
        stable: Option<RsCounts>,
        stable_is_new: bool,
        weights: Option<TrafficWeights>,
    ) -> (i32, i32) {
        let stable_rs = effective_stable(canary, stable, stable_is_new);
        let params = TrafficRoutedParams {
            n: self.replicas,
            target: self.replicas_or_weight(canary, stable, stable_is_new),
            max_weight: self.max_weight(),
            min_pods_per_replica_set: self.min_pods_per_replica_set,
            dynamic_stable_scale: self.dynamic_stable_scale,
            aborted: self.aborted,
            promote_full: self.promote_full,
            weights,
            canary_spec: canary.map(|c| c.spec),
            stable_exists_and_differs: check_stable_rs_exists(
                canary.is_some(),
                stable_rs.is_some(),
                stable_is_new,
            ),
            set_canary_scale_in_use: self.set_canary_scale().is_some(),
        };
        traffic_routed_canary_counts(&params)
    }

    /// Basic or traffic-routed counts, whichever applies (as `AtDesiredReplicaCountsForCanary`
    /// and `NewRSNewReplicas` pick them).
    pub fn desired_counts(
        &self,
        canary: Option<RsCounts>,
        stable: Option<RsCounts>,
        older: &[RsCounts],
        stable_is_new: bool,
        weights: Option<TrafficWeights>,
    ) -> (i32, i32) {
        if self.traffic_routing {
            self.traffic_routed_counts(canary, stable, stable_is_new, weights)
        } else {
            self.basic_counts(canary, stable, older, stable_is_new)
        }
    }

    /// `AtDesiredReplicaCountsForCanary(rollout, newRS, stableRS, olderRSs, weights)`.
    pub fn at_desired_replica_counts(
        &self,
        canary: Option<RsCounts>,
        stable: Option<RsCounts>,
        older: &[RsCounts],
        stable_is_new: bool,
        weights: Option<TrafficWeights>,
    ) -> bool {
        let desired = self.desired_counts(canary, stable, older, stable_is_new, weights);
        at_desired_replica_counts_for_canary(
            self.traffic_routing,
            self.dynamic_stable_scale,
            self.replica_progress_threshold,
            desired,
            canary,
            effective_stable(canary, stable, stable_is_new),
            older,
        )
    }
}

#[cfg(test)]
mod tests {
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
        let base = RolloutView {
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
        let v = RolloutView {
            promote_full: true,
            ..base
        };
        assert_eq!(
            v.replicas_or_weight(None, None, false),
            ReplicasOrWeight::Weight(100)
        );
        let v = RolloutView {
            stable_rs: "",
            ..base
        };
        assert_eq!(
            v.replicas_or_weight(None, None, false),
            ReplicasOrWeight::Weight(100)
        );
        let v = RolloutView {
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
        let v = RolloutView {
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
        let v2 = RolloutView {
            current_step_index: Some(2),
            ..v
        };
        assert_eq!(
            v2.replicas_or_weight(None, None, false),
            ReplicasOrWeight::Weight(40)
        );
        // without traffic routing it is ignored
        let v3 = RolloutView {
            traffic_routing: false,
            ..v
        };
        assert_eq!(
            v3.replicas_or_weight(None, None, false),
            ReplicasOrWeight::Weight(40)
        );
        // on abort ignored unless abortScaleDownDelaySeconds: 0
        let v4 = RolloutView { aborted: true, ..v };
        assert_eq!(
            v4.replicas_or_weight(None, None, false),
            ReplicasOrWeight::Weight(0)
        );
        let v5 = RolloutView {
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
        let v = RolloutView {
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
            let view = RolloutView {
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
                let older: Vec<RsCounts> =
                    c.older.iter().map(|&(s, a)| RsCounts::new(s, a)).collect();
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

    fn upstream_rollout<'a>(
        n: i32,
        set_weight: i32,
        steps: &'a mut Vec<StepInfo>,
    ) -> RolloutView<'a> {
        // newRollout(n, setWeight, intstr 0, intstr 1, "canary", "stable", nil, nil)
        steps.insert(
            0,
            StepInfo {
                set_weight: Some(set_weight),
                set_canary_scale: None,
            },
        );
        RolloutView {
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
        let v = RolloutView {
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
        let v = RolloutView {
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
        let v = RolloutView {
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
        let v = RolloutView { steps: &steps, ..v };
        assert_eq!(
            v.replicas_or_weight(None, None, false),
            ReplicasOrWeight::Replicas(5)
        );
        // blue-green-ish rollout: aborted, no stableRS → full weight
        let v = RolloutView {
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
        let view = |steps: &'static [StepInfo]| RolloutView {
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

    fn aborted_delay_view<'a>(steps: &'a [StepInfo], abort_delay: Option<i32>) -> RolloutView<'a> {
        RolloutView {
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
            let got =
                v.desired_canary_weight(rs(5, 5), rs(stable_available, stable_available), false);
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
        let view = |n: i32, steps: &'static [StepInfo]| RolloutView {
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
        let v = RolloutView {
            promote_full: true,
            ..view(10, steps5)
        };
        assert_eq!(v.traffic_routed_counts(rs(0, 0), rs(10, 8), false, weights(0, 100)), (10, 10));

        // rollback onto stable pod hash is not capped at 0 (newRS and stableRS are the same RS)
        let rollback_steps: &'static [StepInfo] = steps5;
        let v = RolloutView {
            current_pod_hash: "stable",
            ..view(10, rollback_steps)
        };
        assert_eq!(v.traffic_routed_counts(rs(0, 0), rs(10, 8), true, weights(0, 100)), (10, 10));

        // abortScaleDownDelaySeconds:0 with setCanaryScale keeps canary scaled up
        let scs_steps: &'static [StepInfo] = Box::leak(Box::new([StepInfo {
            set_weight: Some(100),
            set_canary_scale: Some(scs(Some(1), None, false)),
        }]));
        let v = RolloutView {
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
        let v = RolloutView {
            max_traffic_weight: Some(1000),
            ..Default::default()
        };
        assert_eq!(v.max_weight(), 100);
        let v = RolloutView {
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
}
