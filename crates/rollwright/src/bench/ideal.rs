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
