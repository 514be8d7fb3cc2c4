//! The memory the benchmarks hold a control plane to: a fixed part and a part per 10,000 pods,
//! printed beside each peak RSS, so that memory that grows between two weeks' work shows in the
//! next run instead of going unnoticed (issue 44: 1.6 GiB became 3.4 GiB and nothing said so).
//! README's scale section states the same figures.

/// A peak-RSS budget: `base` MiB plus `per_10k_pods` MiB for every 10,000 pods.
#[derive(Clone, Copy, Debug)]
pub(super) struct Budget {
    /// What the process takes before it holds any pod.
    base_mib: f64,
    /// What every 10,000 pods add: their objects in the watch cache and the store, the Events
    /// recorded about them (up to the API server's Event budget), their simulation.
    per_10k_pods_mib: f64,
    /// What runs in the process, for the printed line.
    what: &'static str,
}

/// The API server on its default store (SQLite) with simulated nodes and their Events
/// (`bench nodes`).
pub(super) const API_SERVER_AND_NODES: Budget = Budget {
    base_mib: 100.0,
    per_10k_pods_mib: 120.0,
    what: "API server, SQLite store and simulated nodes",
};

/// Everything `rollwright up` runs: the API server, the scheduler, the controllers (whose
/// informers hold every pod once more) and simulated nodes (`bench phases`). Set from session
/// 21's run (221-277 MiB with 500 pods, 409-503 MiB with 3,000): at these few thousand pods the
/// watch cache's histories (up to 64 MiB per resource) are still filling, so the part per pod is
/// larger than at 150,000, where `API_SERVER_AND_NODES` holds.
pub(super) const CONTROL_PLANE: Budget = Budget {
    base_mib: 250.0,
    per_10k_pods_mib: 1000.0,
    what: "the whole control plane of `up`",
};

impl Budget {
    /// The budget for `pods` pods, in MiB.
    pub(super) fn mib(&self, pods: usize) -> f64 {
        self.base_mib + self.per_10k_pods_mib * pods as f64 / 10_000.0
    }

    /// One line: the peak beside the budget for `pods`, and whether it kept to it.
    pub(super) fn verdict(&self, peak_mib: f64, pods: usize) -> String {
        let budget = self.mib(pods);
        format!(
            "peak RSS {peak_mib:.0} MiB; budget {budget:.0} MiB for {pods} pods ({} MiB + {} MiB per 10,000 pods, {}): {}",
            self.base_mib,
            self.per_10k_pods_mib,
            self.what,
            if peak_mib <= budget { "within" } else { "OVER" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_grows_with_the_pods_and_says_when_it_is_exceeded() {
        let b = API_SERVER_AND_NODES;
        assert_eq!(b.mib(0), b.base_mib);
        assert_eq!(b.mib(150_000), b.base_mib + 15.0 * b.per_10k_pods_mib);
        assert!(b.verdict(b.mib(150_000), 150_000).ends_with(": within"));
        assert!(b.verdict(b.mib(150_000) + 1.0, 150_000).ends_with(": OVER"));
    }
}
