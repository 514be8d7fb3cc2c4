//! The physical limit of a rollout (issue 15): with pods that take a fixed time to start and
//! become ready, no controller can finish a rollout faster than its waves times that time. The
//! benchmarks print this ideal beside what they measured.
//!
//! A wave is one round of "replace as many pods as the strategy allows, then wait for them":
//! everything a controller does between waves (API writes, scheduling, watches) is overhead on
//! top of the ideal.

use std::time::Duration;

/// How long one pod takes, as the simulated kubelets are configured.
#[derive(Clone, Copy, Debug, Default)]
pub struct PodTimes {
    /// From binding to containers running (`startDelay`).
    pub start: Duration,
    /// From running to Ready (`readinessDelay`).
    pub readiness: Duration,
    /// The workload's `minReadySeconds`: Ready this long before it counts as available.
    pub min_ready: Duration,
    /// A deleted pod's grace period as the simulator runs it (grace seconds times `graceScale`).
    pub grace: Duration,
}

impl PodTimes {
    /// From a pod's creation to it counting as available.
    pub fn until_available(&self) -> Duration {
        self.start + self.readiness + self.min_ready
    }

    /// One wave of a strategy that deletes a pod before creating its replacement (DaemonSet with
    /// `maxUnavailable`, StatefulSet): the old pod's grace, then the new one to available.
    pub fn replace_in_place(&self) -> Duration {
        self.grace + self.until_available()
    }
}

/// Resolves an int-or-percent flag (`25%`, `3`) against `total`: percentages round up for a surge
/// and down for unavailability, as upstream's `GetScaledValueFromIntOrPercent` callers do.
pub fn resolve(value: &str, total: i32, round_up: bool) -> Option<i32> {
    match value.strip_suffix('%') {
        Some(p) => {
            let p: i64 = p.trim().parse().ok()?;
            let scaled = i64::from(total) * p;
            let v = if round_up {
                (scaled + 99).div_euclid(100)
            } else {
                scaled.div_euclid(100)
            };
            i32::try_from(v).ok()
        }
        None => value.trim().parse().ok(),
    }
}

/// Waves of a Deployment's rolling update from one template to the next, old pods all available
/// at the start: each wave scales the old ReplicaSet down as far as `max_unavailable` allows and
/// the new one up as far as `max_surge` allows, then waits for the new pods. `None` when the
/// strategy can make no progress (both 0).
pub fn deployment_waves(replicas: i32, max_surge: i32, max_unavailable: i32) -> Option<u32> {
    let (n, surge, unavailable) = (replicas.max(0), max_surge.max(0), max_unavailable.max(0));
    let (max_total, min_available) = (n + surge, n - unavailable.min(n));
    let (mut old, mut new_ready, mut waves) = (n, 0, 0u32);
    loop {
        old -= (old + new_ready - min_available).clamp(0, old);
        if new_ready >= n && old == 0 {
            return Some(waves);
        }
        let new_total = n.min(max_total - old);
        if new_total <= new_ready {
            return None;
        }
        new_ready = new_total;
        waves += 1;
    }
}

/// Waves of a rolling update that replaces at most `at_once` of `pods` pods at a time (a
/// DaemonSet's `maxUnavailable` or `maxSurge`, a StatefulSet's `maxUnavailable`).
pub fn batched_waves(pods: i32, at_once: i32) -> Option<u32> {
    if pods <= 0 {
        return Some(0);
    }
    (at_once > 0).then(|| pods.unsigned_abs().div_ceil(at_once.unsigned_abs()))
}

/// Waves of a DaemonSet's rolling update over `pods` nodes with `max_unavailable` and no surge:
/// upstream's daemon controller rounds a percentage up (`util.UnavailableCount`), so 10% of 5
/// nodes is 1, not 0.
pub fn daemonset_waves(pods: i32, max_unavailable: &str) -> Option<u32> {
    batched_waves(pods, resolve(max_unavailable, pods, true)?)
}

/// Waves of a StatefulSet's rolling update of `replicas` with `max_unavailable`: upstream rounds
/// a percentage down but never below one pod (`getStatefulSetMaxUnavailable`), so 10% of 5
/// replicas is still one at a time rather than no progress.
pub fn statefulset_waves(replicas: i32, max_unavailable: &str) -> Option<u32> {
    batched_waves(replicas, resolve(max_unavailable, replicas, false)?.max(1))
}

/// [`deployment_waves`] from the strategy as written (`25%`, `3`): the surge rounded up and the
/// unavailability down, as upstream's `ResolveFenceposts` does.
pub fn deployment_rollout_waves(
    replicas: i32,
    max_surge: &str,
    max_unavailable: &str,
) -> Option<u32> {
    deployment_waves(
        replicas,
        resolve(max_surge, replicas, true)?,
        resolve(max_unavailable, replicas, false)?,
    )
}

/// A phase's physical limit: how many waves it takes and the least time each wave can take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    /// Rounds of "replace what the strategy allows, then wait": what the overhead is spread on.
    pub waves: u32,
    /// The least one wave can take: the pods' delays, which no controller can shorten.
    pub per_wave: Duration,
}

impl Limit {
    /// The least time the whole phase can take.
    pub fn ideal(&self) -> Duration {
        self.per_wave * self.waves
    }

    /// `measured` as ideal plus overhead: what everything but the waiting (API writes,
    /// scheduling, watches, the controllers' queues) added to each wave, in seconds. Negative only
    /// if the pods were quicker than configured, which says the ideal is wrong.
    pub fn overhead_per_wave(&self, measured: Duration) -> f64 {
        (measured.as_secs_f64() - self.ideal().as_secs_f64()) / f64::from(self.waves.max(1))
    }
}

/// `measured` as a multiple of `ideal`, printed beside both.
pub fn versus(ideal: Duration, measured: Duration) -> String {
    if ideal.is_zero() {
        // Without delays there is no wait to compare with: the whole time is work.
        return format!(
            "ideal 0s (no delays), measured {:.2}s, all of it work",
            measured.as_secs_f64()
        );
    }
    format!(
        "ideal {:.2}s, measured {:.2}s = {:.2}x the ideal",
        ideal.as_secs_f64(),
        measured.as_secs_f64(),
        measured.as_secs_f64() / ideal.as_secs_f64()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_round_like_upstream() {
        assert_eq!(resolve("25%", 2_000, true), Some(500));
        assert_eq!(resolve("10%", 5, true), Some(1));
        assert_eq!(resolve("10%", 5, false), Some(0));
        assert_eq!(resolve("3", 100, false), Some(3));
        assert_eq!(resolve("x%", 100, false), None);
    }

    #[test]
    fn a_deployment_rolls_in_the_waves_its_strategy_allows() {
        // 25%/25% of 2,000: 1,000 new at once, then the other 1,000.
        assert_eq!(deployment_waves(2_000, 500, 500), Some(2));
        // One at a time, surging: one wave per pod.
        assert_eq!(deployment_waves(3, 1, 0), Some(3));
        // Everything may go at once.
        assert_eq!(deployment_waves(10, 0, 10), Some(1));
        assert_eq!(deployment_waves(10, 0, 0), None);
    }

    #[test]
    fn batches_are_rounded_up() {
        assert_eq!(batched_waves(500, 50), Some(10));
        assert_eq!(batched_waves(1_000, 100), Some(10));
        assert_eq!(batched_waves(7, 3), Some(3));
        assert_eq!(batched_waves(7, 0), None);
    }

    #[test]
    fn each_controller_rounds_its_max_unavailable_as_upstream_does() {
        // Issue 42's DaemonSet: 500 nodes, 10% at a time.
        assert_eq!(daemonset_waves(500, "10%"), Some(10));
        // A DaemonSet rounds up: 10% of 5 nodes is 1 node, 5 waves.
        assert_eq!(daemonset_waves(5, "10%"), Some(5));
        assert_eq!(daemonset_waves(500, "0"), None);
        // Issue 42's StatefulSet: 1,000 replicas, 10% at a time.
        assert_eq!(statefulset_waves(1_000, "10%"), Some(10));
        assert_eq!(statefulset_waves(20, "10%"), Some(10));
        // A StatefulSet rounds down, but at least one pod goes at a time.
        assert_eq!(statefulset_waves(5, "10%"), Some(5));
        assert_eq!(statefulset_waves(5, "0"), Some(5));
        assert_eq!(statefulset_waves(5, "x"), None);
        // Issue 42's Deployment: 2,000 replicas, 25%/25%.
        assert_eq!(deployment_rollout_waves(2_000, "25%", "25%"), Some(2));
        assert_eq!(deployment_rollout_waves(40, "25%", "25%"), Some(2));
        assert_eq!(deployment_rollout_waves(2_000, "0", "0"), None);
    }

    #[test]
    fn the_overhead_is_spread_over_the_waves() {
        let limit = Limit {
            waves: 10,
            per_wave: Duration::from_secs(5),
        };
        assert_eq!(limit.ideal(), Duration::from_secs(50));
        let overhead = limit.overhead_per_wave(Duration::from_secs(53));
        assert!((overhead - 0.3).abs() < 1e-9, "{overhead}");
        assert!(limit.overhead_per_wave(Duration::from_secs(49)) < 0.0);
    }

    #[test]
    fn a_wave_in_place_waits_for_the_grace_then_the_new_pod() {
        let t = PodTimes {
            readiness: Duration::from_secs(1),
            grace: Duration::from_millis(300),
            ..Default::default()
        };
        assert_eq!(t.replace_in_place(), Duration::from_millis(1_300));
        assert_eq!(t.until_available(), Duration::from_secs(1));
    }
}
