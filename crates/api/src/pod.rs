//! Pod readiness and availability, and controller references: the facts every workload
//! controller decides on.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::{
    api::core::v1::Pod,
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
};

/// When the pod's `Ready` condition last became True, if it is True.
pub fn ready_since(pod: &Pod) -> Option<Timestamp> {
    let cond = pod
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?;
    if cond.status != "True" {
        return None;
    }
    // A Ready condition without a transition time counts as ready since forever, as upstream.
    Some(
        cond.last_transition_time
            .as_ref()
            .map_or(Timestamp::UNIX_EPOCH, |t| t.0),
    )
}

/// Whether a container of the pod waits because its image does not pull (`ErrImagePull`, or
/// `ImagePullBackOff` between attempts, as the kubelet reports it).
pub fn fails_to_pull(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.state
                    .as_ref()
                    .and_then(|s| s.waiting.as_ref())
                    .and_then(|w| w.reason.as_deref())
                    .is_some_and(|r| r == "ErrImagePull" || r == "ImagePullBackOff")
            })
        })
}

/// Whether the pod's `Ready` condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    ready_since(pod).is_some()
}

/// How long until the pod becomes available (ready for `min_ready_seconds`): `Some(0)` if it is
/// available now, `None` if it is not ready at all. Controllers requeue after the returned time
/// instead of polling.
pub fn until_available(
    pod: &Pod,
    min_ready_seconds: i32,
    now: Timestamp,
) -> Option<SignedDuration> {
    let since = ready_since(pod)?;
    if min_ready_seconds <= 0 {
        return Some(SignedDuration::ZERO);
    }
    let at = since + SignedDuration::from_secs(i64::from(min_ready_seconds));
    Some(if at <= now {
        SignedDuration::ZERO
    } else {
        now.duration_until(at)
    })
}

/// Whether the pod is available: ready for at least `min_ready_seconds`.
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    until_available(pod, min_ready_seconds, now).is_some_and(|d| d.is_zero())
}

/// The pod's phase (`Pending` when unset).
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// Whether the pod is being deleted.
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Whether the pod counts for a controller: not terminal and not being deleted (upstream
/// `IsPodActive`).
pub fn is_active(pod: &Pod) -> bool {
    !matches!(phase(pod), "Succeeded" | "Failed") && !is_terminating(pod)
}

/// The owner reference with `controller: true`, if any.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
}

/// A controller reference to `owner`, with `blockOwnerDeletion` as upstream's controllers set it.
pub fn controller_ref(api_version: &str, kind: &str, owner: &ObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        name: owner.name.clone().unwrap_or_default(),
        uid: owner.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Whether a pod is still restarting after an in-place update: a container whose status
/// reports another image than its spec asks for has not been restarted by the kubelet yet, so
/// the pod must not count as available even if its `Ready` condition lags behind.
pub fn restarting_in_place(pod: &Pod) -> bool {
    let (Some(spec), Some(status)) = (pod.spec.as_ref(), pod.status.as_ref()) else {
        return false;
    };
    let statuses = status.container_statuses.as_deref().unwrap_or_default();
    spec.containers.iter().any(|c| {
        statuses.iter().any(|s| {
            s.name == c.name
                && c.image
                    .as_deref()
                    .is_some_and(|i| !crate::image::same(i, &s.image))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::{
        api::core::v1::{Container, ContainerStatus, PodCondition, PodSpec, PodStatus},
        apimachinery::pkg::apis::meta::v1::Time,
    };

    fn pod(ready: Option<(&str, i64)>, phase: &str) -> Pod {
        let conditions = ready.map(|(status, at)| {
            vec![PodCondition {
                type_: "Ready".into(),
                status: status.into(),
                last_transition_time: Some(Time(Timestamp::from_second(at).unwrap())),
                ..Default::default()
            }]
        });
        Pod {
            status: Some(PodStatus {
                phase: Some(phase.into()),
                conditions,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn availability_follows_min_ready_seconds() {
        let now = Timestamp::from_second(1_000).unwrap();
        let cases = [
            (None, 0, None),
            (Some(("False", 900)), 0, None),
            (Some(("True", 990)), 0, Some(0)),
            (Some(("True", 990)), 10, Some(0)),
            (Some(("True", 995)), 10, Some(5)),
            (Some(("True", 1_000)), 30, Some(30)),
        ];
        for (ready, min_ready, want) in cases {
            let got = until_available(&pod(ready, "Running"), min_ready, now).map(|d| d.as_secs());
            assert_eq!(got, want, "{ready:?} minReady {min_ready}");
            assert_eq!(
                is_available(&pod(ready, "Running"), min_ready, now),
                want == Some(0)
            );
        }
    }

    #[test]
    fn terminal_and_terminating_pods_are_not_active() {
        assert!(is_active(&pod(None, "Pending")));
        assert!(is_active(&pod(None, "Running")));
        assert!(!is_active(&pod(None, "Failed")));
        assert!(!is_active(&pod(None, "Succeeded")));
        let mut deleting = pod(None, "Running");
        deleting.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        assert!(!is_active(&deleting));
    }

    #[test]
    fn controller_refs_round_trip() {
        let owner = ObjectMeta {
            name: Some("web".into()),
            uid: Some("u1".into()),
            ..Default::default()
        };
        let r = controller_ref("apps/v1", "ReplicaSet", &owner);
        let meta = ObjectMeta {
            owner_references: Some(vec![r.clone()]),
            ..Default::default()
        };
        assert_eq!(controller_of(&meta), Some(&r));
        assert_eq!(r.block_owner_deletion, Some(true));
    }

    #[test]
    fn a_pod_whose_status_lags_its_images_is_restarting() {
        let pod = |spec_image: &str, status_image: Option<&str>| Pod {
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    image: Some(spec_image.into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                container_statuses: status_image.map(|i| {
                    vec![ContainerStatus {
                        name: "c".into(),
                        image: i.into(),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(restarting_in_place(&pod("app:2", Some("app:1"))));
        assert!(!restarting_in_place(&pod("app:2", Some("app:2"))));
        assert!(!restarting_in_place(&pod("app:2", None)));
    }
}
