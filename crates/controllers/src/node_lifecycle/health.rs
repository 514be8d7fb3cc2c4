//! Node health, as upstream's `monitorNodeHealth` and its tainting passes: when a node's kubelet
//! last showed a sign of life, the conditions a silent node gets, and the taints its conditions
//! call for. Pure functions over plain data; the controller does the writes.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::{
    api::{
        coordination::v1::Lease,
        core::v1::{Node, NodeCondition, Taint},
    },
    apimachinery::pkg::apis::meta::v1::Time,
};

/// The node's kubelet stopped heartbeating.
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// The node reports `Ready=False`.
pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
/// `MemoryPressure=True`.
pub const MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
/// `DiskPressure=True`.
pub const DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
/// `PIDPressure=True`.
pub const PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
/// `NetworkUnavailable=True`.
pub const NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";
/// `spec.unschedulable` (cordoned).
pub const UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// `NoExecute`: pods that do not tolerate the taint are evicted.
pub const NO_EXECUTE: &str = "NoExecute";
/// `NoSchedule`: no new pods that do not tolerate it.
pub const NO_SCHEDULE: &str = "NoSchedule";

/// Every (key, effect) this controller owns: it adds and removes exactly these, no others.
const MANAGED: [(&str, &str); 9] = [
    (UNREACHABLE, NO_EXECUTE),
    (NOT_READY, NO_EXECUTE),
    (UNREACHABLE, NO_SCHEDULE),
    (NOT_READY, NO_SCHEDULE),
    (MEMORY_PRESSURE, NO_SCHEDULE),
    (DISK_PRESSURE, NO_SCHEDULE),
    (PID_PRESSURE, NO_SCHEDULE),
    (NETWORK_UNAVAILABLE, NO_SCHEDULE),
    (UNSCHEDULABLE, NO_SCHEDULE),
];

/// The conditions the kubelet owns, which turn `Unknown` when it falls silent (upstream's list).
const KUBELET_CONDITIONS: [&str; 4] = ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

/// The latest sign of life of a node's kubelet: its Lease's `renewTime`, or a status heartbeat
/// (`Ready.lastHeartbeatTime`), or, for a node that never showed one, its creation.
pub fn last_heartbeat(node: &Node, lease: Option<&Lease>) -> Option<Timestamp> {
    let renewed = lease
        .and_then(|l| l.spec.as_ref())
        .and_then(|s| s.renew_time.as_ref())
        .map(|t| t.0);
    let posted = condition(node, "Ready")
        .and_then(|c| c.last_heartbeat_time.as_ref())
        .map(|t| t.0);
    let created = node.metadata.creation_timestamp.as_ref().map(|t| t.0);
    renewed.into_iter().chain(posted).chain(created).max()
}

/// When the node counts as silent: `grace` after its last heartbeat.
pub fn expiry(node: &Node, lease: Option<&Lease>, grace: std::time::Duration) -> Option<Timestamp> {
    let grace = SignedDuration::try_from(grace).ok()?;
    last_heartbeat(node, lease)?.checked_add(grace).ok()
}

/// The condition of `type_`, if the node has one.
pub fn condition<'a>(node: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// The conditions of a node whose kubelet is silent: each kubelet condition not already
/// `Unknown` becomes `Unknown` (reason `NodeStatusUnknown`), a missing one is added (reason
/// `NodeStatusNeverUpdated`), as upstream. `None` when nothing changes.
pub fn mark_unknown(
    conditions: &[NodeCondition],
    now: Timestamp,
    created: Option<Timestamp>,
) -> Option<Vec<NodeCondition>> {
    let mut out = conditions.to_vec();
    let mut changed = false;
    for type_ in KUBELET_CONDITIONS {
        match out.iter_mut().find(|c| c.type_ == type_) {
            Some(c) if c.status == "Unknown" => {}
            Some(c) => {
                c.status = "Unknown".into();
                c.reason = Some("NodeStatusUnknown".into());
                c.message = Some("Kubelet stopped posting node status.".into());
                c.last_transition_time = Some(Time(now));
                changed = true;
            }
            None => {
                out.push(NodeCondition {
                    type_: type_.into(),
                    status: "Unknown".into(),
                    reason: Some("NodeStatusNeverUpdated".into()),
                    message: Some("Kubelet never posted node status.".into()),
                    last_heartbeat_time: created.map(Time),
                    last_transition_time: Some(Time(now)),
                });
                changed = true;
            }
        }
    }
    changed.then_some(out)
}

/// The managed taints a node with these conditions and `spec.unschedulable` should carry:
/// `Ready` False/Unknown -> not-ready/unreachable (NoExecute and NoSchedule), a pressure
/// condition True -> its NoSchedule taint, cordoned -> unschedulable.
pub fn desired_taints(
    conditions: &[NodeCondition],
    unschedulable: bool,
) -> Vec<(&'static str, &'static str)> {
    let status = |t: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == t)
            .map(|c| c.status.as_str())
    };
    let mut out = Vec::new();
    match status("Ready") {
        Some("False") => out.extend([(NOT_READY, NO_EXECUTE), (NOT_READY, NO_SCHEDULE)]),
        Some("Unknown") => out.extend([(UNREACHABLE, NO_EXECUTE), (UNREACHABLE, NO_SCHEDULE)]),
        _ => {}
    }
    for (cond, key) in [
        ("MemoryPressure", MEMORY_PRESSURE),
        ("DiskPressure", DISK_PRESSURE),
        ("PIDPressure", PID_PRESSURE),
        ("NetworkUnavailable", NETWORK_UNAVAILABLE),
    ] {
        if status(cond) == Some("True") {
            out.push((key, NO_SCHEDULE));
        }
    }
    if unschedulable {
        out.push((UNSCHEDULABLE, NO_SCHEDULE));
    }
    out
}

/// The node's taints with the managed ones made equal to `desired`: other taints and managed
/// taints that stay are untouched (a NoExecute taint keeps its `timeAdded`, which eviction
/// deadlines count from); new NoExecute taints get `timeAdded = now`. `None` when nothing
/// changes.
pub fn reconcile_taints(
    current: &[Taint],
    desired: &[(&str, &str)],
    now: Timestamp,
) -> Option<Vec<Taint>> {
    let is = |t: &Taint, (k, e): (&str, &str)| t.key == k && t.effect == e;
    let mut out: Vec<Taint> = current
        .iter()
        .filter(|t| !MANAGED.iter().any(|m| is(t, *m)) || desired.iter().any(|d| is(t, *d)))
        .cloned()
        .collect();
    let mut changed = out.len() != current.len();
    for &(key, effect) in desired {
        if !out.iter().any(|t| is(t, (key, effect))) {
            out.push(Taint {
                key: key.into(),
                effect: effect.into(),
                value: None,
                time_added: (effect == NO_EXECUTE).then_some(Time(now)),
            });
            changed = true;
        }
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(type_: &str, status: &str) -> NodeCondition {
        NodeCondition {
            type_: type_.into(),
            status: status.into(),
            ..Default::default()
        }
    }

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    fn taint(key: &str, effect: &str, at: Option<i64>) -> Taint {
        Taint {
            key: key.into(),
            effect: effect.into(),
            value: None,
            time_added: at.map(|s| Time(ts(s))),
        }
    }

    #[test]
    fn the_latest_sign_of_life_counts() {
        let mut node = Node::default();
        node.metadata.creation_timestamp = Some(Time(ts(100)));
        assert_eq!(last_heartbeat(&node, None), Some(ts(100)));
        let mut ready = cond("Ready", "True");
        ready.last_heartbeat_time = Some(Time(ts(150)));
        node.status = Some(k8s_openapi::api::core::v1::NodeStatus {
            conditions: Some(vec![ready]),
            ..Default::default()
        });
        assert_eq!(last_heartbeat(&node, None), Some(ts(150)));
        let lease = Lease {
            spec: Some(k8s_openapi::api::coordination::v1::LeaseSpec {
                renew_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
                    ts(200),
                )),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(last_heartbeat(&node, Some(&lease)), Some(ts(200)));
        assert_eq!(
            expiry(&node, Some(&lease), std::time::Duration::from_secs(40)),
            Some(ts(240))
        );
    }

    #[test]
    fn a_silent_node_turns_unknown_once() {
        let before = vec![
            cond("Ready", "True"),
            cond("MemoryPressure", "False"),
            cond("NetworkUnavailable", "False"),
        ];
        let after = mark_unknown(&before, ts(500), Some(ts(1))).unwrap();
        let ready = after.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.status, "Unknown");
        assert_eq!(ready.reason.as_deref(), Some("NodeStatusUnknown"));
        assert_eq!(
            ready.message.as_deref(),
            Some("Kubelet stopped posting node status.")
        );
        assert_eq!(ready.last_transition_time, Some(Time(ts(500))));
        let disk = after.iter().find(|c| c.type_ == "DiskPressure").unwrap();
        assert_eq!(
            (disk.status.as_str(), disk.reason.as_deref()),
            ("Unknown", Some("NodeStatusNeverUpdated"))
        );
        assert_eq!(
            disk.message.as_deref(),
            Some("Kubelet never posted node status.")
        );
        // Not a kubelet condition: left alone.
        assert_eq!(
            after
                .iter()
                .find(|c| c.type_ == "NetworkUnavailable")
                .unwrap()
                .status,
            "False"
        );
        // Already unknown: nothing to write.
        assert_eq!(mark_unknown(&after, ts(600), Some(ts(1))), None);
    }

    #[test]
    fn conditions_call_for_taints() {
        type Case = (Vec<NodeCondition>, bool, Vec<(&'static str, &'static str)>);
        let table: Vec<Case> = vec![
            (vec![cond("Ready", "True")], false, vec![]),
            (
                vec![cond("Ready", "False")],
                false,
                vec![(NOT_READY, NO_EXECUTE), (NOT_READY, NO_SCHEDULE)],
            ),
            (
                vec![cond("Ready", "Unknown")],
                false,
                vec![(UNREACHABLE, NO_EXECUTE), (UNREACHABLE, NO_SCHEDULE)],
            ),
            (
                vec![
                    cond("Ready", "True"),
                    cond("MemoryPressure", "True"),
                    cond("DiskPressure", "False"),
                    cond("PIDPressure", "True"),
                ],
                false,
                vec![(MEMORY_PRESSURE, NO_SCHEDULE), (PID_PRESSURE, NO_SCHEDULE)],
            ),
            (
                vec![cond("Ready", "True"), cond("DiskPressure", "True")],
                true,
                vec![(DISK_PRESSURE, NO_SCHEDULE), (UNSCHEDULABLE, NO_SCHEDULE)],
            ),
            (
                vec![cond("Ready", "Unknown"), cond("MemoryPressure", "Unknown")],
                false,
                vec![(UNREACHABLE, NO_EXECUTE), (UNREACHABLE, NO_SCHEDULE)],
            ),
        ];
        for (conditions, cordoned, want) in table {
            assert_eq!(
                desired_taints(&conditions, cordoned),
                want,
                "{conditions:?} {cordoned}"
            );
        }
    }

    #[test]
    fn taints_are_reconciled_without_touching_others() {
        let now = ts(1000);
        let user = taint("example.com/gpu", NO_SCHEDULE, None);
        // Adding: NoExecute taints are stamped.
        let got = reconcile_taints(
            std::slice::from_ref(&user),
            &[(UNREACHABLE, NO_EXECUTE), (UNREACHABLE, NO_SCHEDULE)],
            now,
        )
        .unwrap();
        assert_eq!(
            got,
            vec![
                user.clone(),
                taint(UNREACHABLE, NO_EXECUTE, Some(1000)),
                taint(UNREACHABLE, NO_SCHEDULE, None)
            ]
        );
        // Unchanged: no write, and the old timeAdded is kept.
        let old = vec![taint(UNREACHABLE, NO_EXECUTE, Some(5)), user.clone()];
        assert_eq!(
            reconcile_taints(&old, &[(UNREACHABLE, NO_EXECUTE)], now),
            None
        );
        // Swapping unreachable for not-ready.
        let got = reconcile_taints(&old, &[(NOT_READY, NO_EXECUTE)], now).unwrap();
        assert_eq!(
            got,
            vec![user.clone(), taint(NOT_READY, NO_EXECUTE, Some(1000))]
        );
        // Back to healthy: only the user's taint stays.
        let got = reconcile_taints(&old, &[], now).unwrap();
        assert_eq!(got, vec![user]);
        // A managed key with an unmanaged effect is the user's.
        let custom = vec![taint(UNREACHABLE, "PreferNoSchedule", None)];
        assert_eq!(reconcile_taints(&custom, &[], now), None);
    }
}
