//! The rolling update: which pods of an old revision to replace this sync, and how (seed 003,
//! maxUnavailable; seed 004, in-place; upstream's `updateStatefulSetAfterInvariantEstablished`).
//!
//! Pods are replaced from the highest ordinal down to `partition`; ordinals below it are never
//! touched. Up to `maxUnavailable` kept pods may be unavailable at once, counting every kept
//! ordinal (a missing, terminating, not ready or restarting pod is unavailable), so each sync
//! replaces at most `maxUnavailable - unavailable` pods. What that means per pod management
//! policy falls out of the scaling pass that runs first ([`super::pods::plan_scaling`]):
//!
//! - `Parallel` reaches this step whatever the pods' health, so as soon as one replaced pod is
//!   available again the next one goes: maxUnavailable pods are always in flight (seed 003's
//!   choice 2).
//! - `OrderedReady` reaches it only when every kept pod is available, so a batch of
//!   maxUnavailable pods goes at once and the next batch waits for all of them: never out of
//!   order (seed 003's choice 1).
//!
//! A pod is replaced in place (its images patched, same UID, node and claims) when the set's
//! `podUpdatePolicy` is `InPlaceIfPossible` and its revision's template differs from the update
//! revision's only in `spec.containers[*].image` ([`in_place_patch`]); otherwise it is deleted
//! and recreated on the update revision.

use super::pods::Slot;
use crate::{daemonset::update::in_place_images, history::CONTROLLER_REVISION_HASH};
use api::intstr::{IntOrPercent, IntOrPercentError, scaled_value_or};
use serde_json::{Value, json};

/// `maxUnavailable` resolved against `replicas`: absent means 1, percentages round down, and
/// the result is never below 1 (so a small set with `10%` still makes progress), as upstream's
/// `getStatefulSetMaxUnavailable`. It may exceed `replicas`: then every pod may go at once.
pub fn max_unavailable(value: Option<&Value>, replicas: i32) -> Result<i32, IntOrPercentError> {
    let n = scaled_value_or(value, IntOrPercent::Int(1), replicas, false)?;
    Ok(n.max(1))
}

/// What the update step decides on about one kept ordinal (beyond [`super::pods::Facts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Member {
    /// The ordinal and its pod.
    pub slot: Slot,
    /// The pod is on the update revision.
    pub updated: bool,
}

/// The ordinals to replace this sync, highest first. `members` are the kept ordinals, lowest
/// first; `partition` the lowest ordinal that may be replaced (`start + partition`).
pub fn plan(members: &[Member], partition: i32, max_unavailable: i32) -> Vec<i32> {
    let unavailable = members
        .iter()
        .filter(|m| m.slot.pod.is_none_or(|p| p.unavailable()))
        .count();
    let budget = usize::try_from(max_unavailable)
        .unwrap_or(0)
        .saturating_sub(unavailable);
    members
        .iter()
        .rev()
        .take_while(|m| m.slot.ordinal >= partition)
        .filter(|m| !m.updated && m.slot.pod.is_some_and(|p| !p.terminating))
        .take(budget)
        .map(|m| m.slot.ordinal)
        .collect()
}

/// The strategic merge patch that moves a pod from the template `old` to `new` in place, or
/// `None` if they differ in more than container images. It sets every container's image, the
/// revision label, and the pod's `resourceVersion` as a precondition, so a pod that changed
/// since the controller looked (it may have been replaced) is not patched.
pub fn in_place_patch(
    old: &Value,
    new: &Value,
    revision: &str,
    resource_version: Option<&str>,
) -> Option<Value> {
    let containers: Vec<Value> = if old == new {
        // Same template under another revision name (a duplicate revision): relabel only.
        Vec::new()
    } else {
        in_place_images(old, new)?
            .into_iter()
            .map(|(name, image)| json!({"name": name, "image": image}))
            .collect()
    };
    let mut patch = json!({
        "metadata": {
            "labels": {CONTROLLER_REVISION_HASH: revision},
            "resourceVersion": resource_version,
        },
    });
    if !containers.is_empty() {
        patch["spec"] = json!({"containers": containers});
    }
    Some(patch)
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::type_complexity,
    reason = "table-driven cases spell out their columns"
)]
mod tests {
    use super::*;
    use crate::statefulset::pods::Facts;

    #[test]
    fn max_unavailable_rounds_down_with_a_floor_of_one() {
        // (value, replicas, want)
        let cases = [
            (None, 5, 1),
            (Some(json!(1)), 5, 1),
            (Some(json!(3)), 5, 3),
            (Some(json!(8)), 5, 8),
            (Some(json!("10%")), 1000, 100),
            (Some(json!("10%")), 15, 1),
            (Some(json!("10%")), 5, 1),
            (Some(json!("50%")), 5, 2),
            (Some(json!("100%")), 5, 5),
            (Some(json!("30%")), 0, 1),
        ];
        for (value, replicas, want) in cases {
            assert_eq!(
                max_unavailable(value.as_ref(), replicas).unwrap(),
                want,
                "{value:?} of {replicas}"
            );
        }
        assert!(max_unavailable(Some(&json!("x")), 5).is_err());
    }

    /// One member per character, ordinals from 0: `O` old and available, `N` new and
    /// available, `n` new and not yet available, `o` old and not available, `x` terminating,
    /// `_` missing.
    fn members(spec: &str) -> Vec<Member> {
        spec.chars()
            .enumerate()
            .map(|(i, c)| {
                let available = Facts {
                    ready: true,
                    available: true,
                    ..Default::default()
                };
                let (pod, updated) = match c {
                    'O' => (Some(available), false),
                    'N' => (Some(available), true),
                    'n' => (Some(Facts::default()), true),
                    'o' => (Some(Facts::default()), false),
                    'x' => (
                        Some(Facts {
                            terminating: true,
                            ..available
                        }),
                        false,
                    ),
                    '_' => (None, true),
                    other => panic!("unknown member {other}"),
                };
                Member {
                    slot: Slot {
                        ordinal: i as i32,
                        pod,
                    },
                    updated,
                }
            })
            .collect()
    }

    #[test]
    fn replaces_from_the_top_within_max_unavailable_and_the_partition() {
        // (seed 003 case, pods, partition, maxUnavailable, want)
        let cases: Vec<(&str, &str, i32, i32, Vec<i32>)> = vec![
            (
                "maxUnavailable 1: the highest old pod",
                "OOOOO",
                0,
                1,
                vec![4],
            ),
            (
                "maxUnavailable 1: wait while one is out",
                "OOOOn",
                0,
                1,
                vec![],
            ),
            ("maxUnavailable 1: then the next", "OOOON", 0, 1, vec![3]),
            (">1 without partition", "OOOOO", 0, 2, vec![4, 3]),
            (
                ">1: keeps maxUnavailable in flight (choice 2 under Parallel)",
                "OOONn",
                0,
                2,
                vec![2],
            ),
            (
                ">1: a terminating pod uses the budget",
                "OOOxO",
                0,
                2,
                vec![4],
            ),
            (">1: a missing pod uses the budget", "OOO_O", 0, 2, vec![4]),
            (
                "> replicas: everything at once",
                "OOOOO",
                0,
                8,
                vec![4, 3, 2, 1, 0],
            ),
            (
                "partition, staged fewer than maxUnavailable",
                "OOOOO",
                3,
                3,
                vec![4, 3],
            ),
            (
                "partition, staged as many as maxUnavailable",
                "OOOOO",
                2,
                3,
                vec![4, 3, 2],
            ),
            (
                "partition, staged more than maxUnavailable",
                "OOOOO",
                1,
                2,
                vec![4, 3],
            ),
            (
                "partition, staged more: the rest later, never below it",
                "ONNNN",
                1,
                2,
                vec![],
            ),
            (
                "partition and maxUnavailable > replicas",
                "OOOOO",
                2,
                7,
                vec![4, 3, 2],
            ),
            (
                "an unavailable pod below the partition uses the budget, as upstream",
                "oOOOO",
                2,
                2,
                vec![4],
            ),
            ("over budget: nothing", "ooOOO", 0, 1, vec![]),
            ("all updated", "NNNNN", 0, 2, vec![]),
        ];
        for (name, pods, partition, max, want) in cases {
            assert_eq!(plan(&members(pods), partition, max), want, "{name}");
        }
    }

    #[test]
    fn in_place_only_for_image_changes() {
        let t = |image: &str, env: &str| {
            json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                {"name": "app", "image": image, "env": [{"name": "E", "value": env}]}]}})
        };
        let patch =
            in_place_patch(&t("app:1", "a"), &t("app:2", "a"), "web-2", Some("17")).unwrap();
        assert_eq!(
            patch,
            json!({"metadata": {"labels": {"controller-revision-hash": "web-2"}, "resourceVersion": "17"},
                   "spec": {"containers": [{"name": "app", "image": "app:2"}]}})
        );
        assert_eq!(
            in_place_patch(&t("app:1", "a"), &t("app:2", "b"), "web-2", None),
            None
        );
        assert_eq!(
            in_place_patch(&t("app:1", "a"), &t("app:1", "b"), "web-2", None),
            None
        );
        let relabel = in_place_patch(&t("app:1", "a"), &t("app:1", "a"), "web-3", None).unwrap();
        assert!(relabel.get("spec").is_none());
    }
}
