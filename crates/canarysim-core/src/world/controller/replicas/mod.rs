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
//! [`CanaryState`] helpers resolve those values from a minimal view of a Rollout
//! (`spec` + `status`) and a list of [`StepInfo`] exactly like the Go functions that
//! take a `*v1alpha1.Rollout`.
//!
//! Not in these files (so not ported): any "stable can take 100 − weight" gate. The
//! only availability gates here are [`replica_progress_threshold_met`] and
//! [`at_desired_replica_counts_for_canary`].

/// `defaults.DefaultMaxSurge`: a *string*, so it is a percentage (25%).
pub(crate) const DEFAULT_MAX_SURGE: &str = "25";
/// `defaults.DefaultMaxUnavailable`: a *string*, so it is a percentage (25%).
pub(crate) const DEFAULT_MAX_UNAVAILABLE: &str = "25";
/// `weightutil.MaxTrafficWeight` default.
pub(crate) const DEFAULT_MAX_TRAFFIC_WEIGHT: i32 = 100;
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
pub(crate) fn resolve_fenceposts(
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
pub(crate) fn approximate_weighted_canary_stable_replica_counts(
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
        // Go's int32 addition wraps.
        let surged = spec_replicas.wrapping_add(1);
        options.push((ceil_count, surged));
        let surge_tied = floor_ceiling_tied(desired_weight, max_weight, surged);
        if !surge_tied && (floor_count != 0 || zero_allowed) {
            options.push((floor_count, surged));
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
pub(crate) fn get_replicas_for_scale_down(rs: Option<RsCounts>, ignore_availability: bool) -> i32 {
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
pub(crate) fn check_stable_rs_exists(
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
pub(crate) fn traffic_weight_to_replicas(replicas: i32, weight: i32, max_weight: i32) -> i32 {
    (f64::from(weight) * f64::from(replicas) / f64::from(max_weight)).ceil() as i32
}

/// Mirrors `CheckMinPodsPerReplicaSet` for a traffic-routed canary: 0 stays 0; otherwise
/// at least `min(min_pods_per_replica_set, n)`. (Upstream returns `count` unchanged when
/// traffic routing is absent; callers of this module only use it with traffic routing.)
pub(crate) fn check_min_pods_per_replica_set(
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
pub(crate) fn dynamic_abort_weight(
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
pub(crate) fn has_explicit_abort_scale_down_delay(
    traffic_routing: bool,
    abort_scale_down_delay_seconds: Option<i32>,
) -> bool {
    traffic_routing && matches!(abort_scale_down_delay_seconds, Some(d) if d > 0)
}

/// `GetCurrentCanaryStep`: index of the current step, `None` when there are no steps or
/// the index is past the last step. (A negative index would panic in Go; here it is `None`.)
pub(crate) fn current_canary_step(
    current_step_index: Option<i32>,
    step_count: usize,
) -> Option<usize> {
    if step_count == 0 {
        return None;
    }
    let idx = usize::try_from(current_step_index.unwrap_or(0)).ok()?;
    (idx < step_count).then_some(idx)
}

/// Mirrors `GetCurrentSetWeight`: 0 if aborted; `max_weight` if there is no current step
/// (no steps, or index past the last step); else the latest setWeight at or before the
/// current step; else 0.
pub(crate) fn current_set_weight(
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
pub(crate) fn use_set_canary_scale(
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
/// `GetDesiredCanaryWeight` value (see [`CanaryState::desired_canary_weight`]).
pub(crate) fn canary_replicas_or_weight(
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
pub struct CanaryState<'a> {
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

impl CanaryState<'_> {
    /// `weightutil.MaxTrafficWeight`.
    pub(crate) fn max_weight(&self) -> i32 {
        match (self.traffic_routing, self.max_traffic_weight) {
            (true, Some(w)) => w,
            _ => DEFAULT_MAX_TRAFFIC_WEIGHT,
        }
    }

    /// `MaxSurge(rollout)` / `MaxUnavailable(rollout)`.
    pub(crate) fn fenceposts(&self) -> Fenceposts {
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
    pub(crate) fn current_set_weight(&self) -> i32 {
        current_set_weight(
            self.aborted,
            self.current_step_index,
            self.steps,
            self.max_weight(),
        )
    }

    /// `GetDesiredCanaryWeight(rollout, newRS, stableRS)`.
    pub(crate) fn desired_canary_weight(
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
    pub(crate) fn replicas_or_weight(
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
    pub(crate) fn basic_counts(
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
    pub(crate) fn traffic_routed_counts(
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
    pub(crate) fn desired_counts(
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
    pub(crate) fn at_desired_replica_counts(
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
mod tests;
