//! The StatefulSet's status (upstream's `computeReplicaStatus`, `completeRollingUpdate` and
//! `inconsistentStatus`): what `kubectl get sts` and `kubectl rollout status sts` read.
//!
//! `currentRevision` is the revision the set is rolling away from; it becomes `updateRevision`
//! once every kept pod is updated and ready, which is what `kubectl rollout status` waits for.

use super::Set;
use crate::progress::{self, report::Report, rollout::Rollout};
use k8s_openapi::api::apps::v1::StatefulSetStatus;
use serde_json::{Value, json};

/// One pod as the counts see it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counted {
    /// Running and ready.
    pub ready: bool,
    /// Ready for `minReadySeconds`.
    pub available: bool,
    /// Being deleted.
    pub terminating: bool,
    /// Labelled with the current revision.
    pub current: bool,
    /// Labelled with the update revision.
    pub updated: bool,
}

/// The status a sync writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// Pods that exist.
    pub replicas: i32,
    /// Of those, running and ready.
    pub ready_replicas: i32,
    /// Of those, available.
    pub available_replicas: i32,
    /// Not terminating, on the current revision.
    pub current_replicas: i32,
    /// Not terminating, on the update revision.
    pub updated_replicas: i32,
    /// The revision the set rolls away from.
    pub current_revision: String,
    /// The revision of the set's template.
    pub update_revision: String,
    /// Hash collisions seen.
    pub collision_count: i32,
    /// The generation acted on.
    pub observed_generation: Option<i64>,
}

impl Status {
    /// Counts `pods` under the two revisions.
    pub fn count(
        pods: impl IntoIterator<Item = Counted>,
        current_revision: &str,
        update_revision: &str,
    ) -> Self {
        let mut s = Status {
            current_revision: current_revision.into(),
            update_revision: update_revision.into(),
            ..Default::default()
        };
        for p in pods {
            s.replicas += 1;
            if p.ready {
                s.ready_replicas += 1;
                if p.available {
                    s.available_replicas += 1;
                }
            }
            if !p.terminating {
                s.current_replicas += i32::from(p.current);
                s.updated_replicas += i32::from(p.updated);
            }
        }
        s
    }

    /// Ends a finished rolling update: with every one of `replicas` pods updated and ready, the
    /// update revision becomes the current one (upstream's `completeRollingUpdate`).
    pub fn complete_rolling_update(&mut self, rolling: bool, replicas: i32) {
        if rolling
            && self.updated_replicas == replicas
            && self.ready_replicas == replicas
            && self.replicas == replicas
        {
            self.current_replicas = self.updated_replicas;
            self.current_revision = self.update_revision.clone();
        }
    }

    /// Whether `stored` differs from this status in anything a write would change (upstream's
    /// `inconsistentStatus`, plus the collision count).
    pub fn differs_from(&self, stored: Option<&StatefulSetStatus>) -> bool {
        let Some(s) = stored else { return true };
        self.observed_generation > s.observed_generation
            || self.replicas != s.replicas
            || self.ready_replicas != s.ready_replicas.unwrap_or(0)
            || self.available_replicas != s.available_replicas.unwrap_or(0)
            || self.current_replicas != s.current_replicas.unwrap_or(0)
            || self.updated_replicas != s.updated_replicas.unwrap_or(0)
            || Some(&self.current_revision) != s.current_revision.as_ref()
            || Some(&self.update_revision) != s.update_revision.as_ref()
            || self.collision_count != s.collision_count.unwrap_or(0)
    }

    /// The status as JSON, for a merge patch of the `status` subresource.
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "replicas": self.replicas,
            "readyReplicas": self.ready_replicas,
            "availableReplicas": self.available_replicas,
            "currentReplicas": self.current_replicas,
            "updatedReplicas": self.updated_replicas,
            "currentRevision": self.current_revision,
            "updateRevision": self.update_revision,
            "collisionCount": self.collision_count,
        });
        if let (Some(g), Value::Object(m)) = (self.observed_generation, &mut v) {
            m.insert("observedGeneration".into(), json!(g));
        }
        v
    }
}

/// The `Progressing` condition after a sync that computed `after` ([`crate::progress`]):
/// progress is more pods updated, ready or available, or fewer old ones; the rollout is
/// complete when every pod exists and is available and every ordinal from the partition up is
/// updated, as `kubectl rollout status` judges it.
pub fn progress(set: &Set, after: &Status, now: jiff::Timestamp) -> Report {
    let stored = set.sts.status.as_ref();
    let conditions = progress::stored_conditions(stored.and_then(|s| s.conditions.as_ref()));
    let before = stored.map_or_else(progress::Counts::default, |s| progress::Counts {
        replicas: s.replicas,
        updated: s.updated_replicas.unwrap_or(0),
        ready: s.ready_replicas.unwrap_or(0),
        available: s.available_replicas.unwrap_or(0),
    });
    let ordinals = set.ordinals();
    let replicas = ordinals.replicas;
    let to_update = (ordinals.start + replicas - set.partition_ordinal()).clamp(0, replicas);
    let rollout = Rollout {
        kind: "StatefulSet",
        revision: &after.update_revision,
        deadline: None,
        paused: set.paused,
        before,
        after: progress::Counts {
            replicas: after.replicas,
            updated: after.updated_replicas,
            ready: after.ready_replicas,
            available: after.available_replicas,
        },
        complete: after.replicas == replicas
            && after.available_replicas == replicas
            && after.updated_replicas >= to_update,
        all_updated: after.updated_replicas >= to_update,
    };
    Report::new(&set.sts.metadata, set.rolling(), &conditions, rollout, now)
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::type_complexity,
    reason = "table-driven cases spell out their columns"
)]
mod tests {
    use super::*;

    /// `C`/`U` current/updated and available, `c`/`u` not ready, `r` updated, ready but not yet
    /// available, `x` current and terminating, `?` neither revision.
    fn pods(spec: &str) -> Vec<Counted> {
        spec.chars()
            .map(|c| {
                let ready = Counted {
                    ready: true,
                    available: true,
                    ..Default::default()
                };
                match c {
                    'C' => Counted {
                        current: true,
                        ..ready
                    },
                    'U' => Counted {
                        updated: true,
                        ..ready
                    },
                    'c' => Counted {
                        current: true,
                        ..Default::default()
                    },
                    'u' => Counted {
                        updated: true,
                        ..Default::default()
                    },
                    'r' => Counted {
                        updated: true,
                        ready: true,
                        ..Default::default()
                    },
                    'x' => Counted {
                        current: true,
                        terminating: true,
                        ..ready
                    },
                    '?' => ready,
                    other => panic!("unknown pod {other}"),
                }
            })
            .collect()
    }

    #[test]
    fn counts_and_completion() {
        // (pods, spec replicas, rolling, want (replicas, ready, available, current, updated, currentRevision))
        let cases: Vec<(&str, i32, bool, (i32, i32, i32, i32, i32, &str))> = vec![
            ("CCC", 3, true, (3, 3, 3, 3, 0, "a")),
            ("CCu", 3, true, (3, 2, 2, 2, 1, "a")),
            ("CxU", 3, true, (3, 3, 3, 1, 1, "a")),
            ("CUr", 3, true, (3, 3, 2, 1, 2, "a")),
            ("UUr", 3, true, (3, 3, 2, 3, 3, "b")),
            ("UUu", 3, true, (3, 2, 2, 0, 3, "a")),
            ("UUU", 3, false, (3, 3, 3, 0, 3, "a")),
            ("UU", 3, true, (2, 2, 2, 0, 2, "a")),
            ("UUUU", 3, true, (4, 4, 4, 0, 4, "a")),
            ("??U", 3, true, (3, 3, 3, 0, 1, "a")),
        ];
        for (spec, replicas, rolling, want) in cases {
            let mut s = Status::count(pods(spec), "a", "b");
            s.complete_rolling_update(rolling, replicas);
            let got = (
                s.replicas,
                s.ready_replicas,
                s.available_replicas,
                s.current_replicas,
                s.updated_replicas,
                s.current_revision.as_str(),
            );
            assert_eq!(got, want, "{spec} of {replicas}");
        }
    }

    #[test]
    fn a_write_only_when_something_changed() {
        let mut s = Status::count(pods("CU"), "a", "b");
        s.observed_generation = Some(2);
        assert!(s.differs_from(None));
        let stored: StatefulSetStatus = serde_json::from_value(s.to_json()).unwrap();
        assert!(!s.differs_from(Some(&stored)));
        let mut later = s.clone();
        later.observed_generation = Some(3);
        assert!(later.differs_from(Some(&stored)));
        let mut older = s.clone();
        older.observed_generation = Some(1);
        assert!(!older.differs_from(Some(&stored)));
        let mut moved = s.clone();
        moved.ready_replicas = 0;
        assert!(moved.differs_from(Some(&stored)));
    }
}
