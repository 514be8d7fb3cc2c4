//! Every check of upstream's `policy/check_*.go`, one module each, and the table the evaluator
//! reads. A check may change between versions of the standards: each [`Versioned`] entry holds
//! from its minimum version until the next entry's.

use crate::{level::Level, verdict::Violation};
use serde_json::Value;

mod allow_privilege_escalation;
mod app_armor_profile;
mod capabilities_baseline;
mod capabilities_restricted;
mod host_namespaces;
mod host_path_volumes;
mod host_ports;
mod privileged;
mod proc_mount;
mod restricted_volumes;
mod run_as_non_root;
mod run_as_user;
mod se_linux_options;
mod seccomp_profile_baseline;
mod seccomp_profile_restricted;
mod sysctls;
mod windows_host_process;

/// Judges a pod's `metadata` and `spec`: `None` when it passes.
pub(crate) type CheckFn = fn(&Value, &Value) -> Option<Violation>;

/// One check of the standards.
pub(crate) struct Check {
    /// Upstream's check ID; the evaluator orders checks by it.
    pub id: &'static str,
    /// The lowest level it belongs to (restricted includes baseline).
    pub level: Level,
    /// Its versions, oldest first.
    pub versions: &'static [Versioned],
}

/// A check as it is from `v1.<min>` on.
pub(crate) struct Versioned {
    pub min: u64,
    pub check: CheckFn,
    /// Baseline checks this restricted check replaces at the restricted level.
    pub overrides: &'static [&'static str],
}

/// Every check: the baseline ones ordered by ID, then the restricted ones ordered by ID, which is
/// the order upstream reports violations in.
pub(crate) static CHECKS: &[Check] = &[
    app_armor_profile::CHECK,
    capabilities_baseline::CHECK,
    host_namespaces::CHECK,
    host_path_volumes::CHECK,
    host_ports::CHECK,
    privileged::CHECK,
    proc_mount::CHECK,
    se_linux_options::CHECK,
    seccomp_profile_baseline::CHECK,
    sysctls::CHECK,
    windows_host_process::CHECK,
    allow_privilege_escalation::CHECK,
    capabilities_restricted::CHECK,
    restricted_volumes::CHECK,
    run_as_non_root::CHECK,
    run_as_user::CHECK,
    seccomp_profile_restricted::CHECK,
];

#[cfg(test)]
pub(crate) mod test_support {
    //! Runs one check's version on a pod written as JSON, as upstream's check tests do.

    use super::*;

    /// The check `id` as it is at `v1.<minor>`, applied to `pod`.
    pub(crate) fn run(id: &str, minor: u64, pod: &Value) -> Option<Violation> {
        let check = CHECKS
            .iter()
            .find(|c| c.id == id)
            .unwrap_or_else(|| panic!("no check {id}"));
        let v = check
            .versions
            .iter()
            .rev()
            .find(|v| v.min <= minor)
            .unwrap_or_else(|| panic!("{id} has no version at v1.{minor}"));
        (v.check)(&pod["metadata"], &pod["spec"])
    }

    /// Asserts `pod` fails with `reason` and `detail`.
    #[track_caller]
    pub(crate) fn assert_violation(id: &str, minor: u64, pod: &Value, reason: &str, detail: &str) {
        let got = run(id, minor, pod).unwrap_or_else(|| panic!("{id} allowed {pod}"));
        assert_eq!((got.reason.as_str(), got.detail.as_str()), (reason, detail));
    }

    /// Asserts `pod` passes.
    #[track_caller]
    pub(crate) fn assert_allowed(id: &str, minor: u64, pod: &Value) {
        assert_eq!(run(id, minor, pod), None, "{id} refused {pod}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_ordered_and_consistent_as_upstreams_registry() {
        let ids = |level: Level| -> Vec<&str> {
            CHECKS
                .iter()
                .filter(|c| c.level == level)
                .map(|c| c.id)
                .collect()
        };
        let (baseline, restricted) = (ids(Level::Baseline), ids(Level::Restricted));
        // Go sorts the IDs bytewise, as Rust's str ordering does.
        for list in [&baseline, &restricted] {
            let mut sorted = list.clone();
            sorted.sort();
            assert_eq!(list, &sorted);
        }
        let split = baseline.len();
        assert!(CHECKS[..split].iter().all(|c| c.level == Level::Baseline));
        assert_eq!(baseline.len() + restricted.len(), CHECKS.len());
        for c in CHECKS {
            assert!(!c.versions.is_empty(), "{}", c.id);
            assert!(
                c.versions.windows(2).all(|w| w[0].min < w[1].min),
                "{}",
                c.id
            );
            for v in c.versions {
                for o in v.overrides {
                    assert_eq!(c.level, Level::Restricted, "{}", c.id);
                    assert!(baseline.contains(o), "{} overrides unknown {o}", c.id);
                }
            }
        }
    }
}
