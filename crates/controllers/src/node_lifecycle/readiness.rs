//! Pods on a node that stopped being Ready are not Ready either, as upstream's
//! `MarkPodsNotReady`: a dead kubelet cannot report its pods' readiness, so Deployments,
//! DaemonSets and endpoints must stop counting them before the taint manager evicts them (or,
//! for pods that tolerate the taint, for as long as the node stays away). Which pods to mark, when,
//! and the status write that does it; pure, the controller does the writes.
//!
//! As upstream, a node's pods are marked when the controller itself sees its `Ready` condition
//! leave `True` (the transition, once, with a `NodeNotReady` event on the node), and a pod is
//! marked when it is first seen bound to a node whose `Ready` is not `True`. Nothing marks a pod
//! again because its status changed: the kubelet owns it, and re-asserts it when it comes back.

use super::{health, pods::PodInfo};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};

/// The reason of the events on the node and on each pod, as upstream.
pub const REASON: &str = "NodeNotReady";
/// The message of the Warning event on each pod, as upstream.
pub const POD_MESSAGE: &str = "Node is not ready";

/// The message of the Normal event on the node (upstream's `RecordNodeStatusChange`).
pub fn node_message(node: &str) -> String {
    format!("Node {node} status is now: {REASON}")
}

/// The status of the node's `Ready` condition, if it has one.
pub fn node_ready(node: &Node) -> Option<&str> {
    health::condition(node, "Ready").map(|c| c.status.as_str())
}

/// Whether `Ready` went from `True` to anything else between two observations: the moment
/// upstream marks every pod of the node. A node without a `Ready` condition afterwards has not
/// reported yet, which is not a transition.
pub fn went_not_ready(before: Option<&str>, after: Option<&str>) -> bool {
    before == Some("True") && after.is_some_and(|s| s != "True")
}

/// Whether a node with this `Ready` status makes a pod that lands on it NotReady (upstream's
/// `processPod`: a `Ready` condition that is not `True`; none at all means not judged yet).
pub fn node_is_not_ready(ready: Option<&str>) -> bool {
    ready.is_some_and(|s| s != "True")
}

/// Whether the pod's arrival on its node is news: first seen bound, or bound to another node
/// than before (upstream reacts to a pod's add and to a change of `spec.nodeName`).
pub fn landed(before: Option<&PodInfo>, now: &PodInfo) -> bool {
    before.is_none_or(|b| b.node != now.node)
}

/// Whether marking the pod changes anything: it is Ready, and still running (a pod that has
/// finished has nothing left to be ready for).
pub fn should_mark(pod: &PodInfo) -> bool {
    pod.ready && !pod.terminal
}

/// The strategic merge patch of the pod's status that turns `Ready` False, as of `now`: the
/// conditions merge on `type`, so every other condition, and `Ready`'s reason and message, stay
/// as the kubelet wrote them. With the pod's `resourceVersion`, a pod that changed since it was
/// observed is refused (409) rather than marked on stale knowledge; the retry looks again.
pub fn not_ready_patch(resource_version: Option<&str>, now: Timestamp) -> Value {
    let mut patch = json!({"status": {"conditions": [{
        "type": "Ready",
        "status": "False",
        "lastTransitionTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now),
    }]}});
    if let Some(rv) = resource_version {
        patch["metadata"] = json!({"resourceVersion": rv});
    }
    patch
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(node: &str, ready: bool, terminal: bool) -> PodInfo {
        PodInfo {
            uid: None,
            resource_version: None,
            node: node.into(),
            tolerations: vec![],
            deleting: false,
            ready,
            terminal,
        }
    }

    #[test]
    fn only_leaving_true_is_a_transition() {
        let table = [
            (Some("True"), Some("Unknown"), true),
            (Some("True"), Some("False"), true),
            (Some("True"), Some("True"), false),
            (Some("Unknown"), Some("Unknown"), false),
            (Some("False"), Some("Unknown"), false),
            (None, Some("Unknown"), false),
            (Some("True"), None, false),
            (Some("Unknown"), Some("True"), false),
        ];
        for (before, after, want) in table {
            assert_eq!(
                went_not_ready(before, after),
                want,
                "{before:?} -> {after:?}"
            );
        }
    }

    #[test]
    fn a_node_without_ready_true_makes_arrivals_not_ready() {
        let table = [
            (Some("True"), false),
            (Some("Unknown"), true),
            (Some("False"), true),
            (None, false),
        ];
        for (ready, want) in table {
            assert_eq!(node_is_not_ready(ready), want, "{ready:?}");
        }
    }

    #[test]
    fn a_pod_lands_when_first_bound_or_moved() {
        let here = info("n1", true, false);
        let table = [
            (None, true),
            (Some(info("n1", false, false)), false),
            (Some(info("n2", true, false)), true),
        ];
        for (before, want) in table {
            assert_eq!(landed(before.as_ref(), &here), want, "{before:?}");
        }
    }

    #[test]
    fn only_ready_running_pods_are_marked() {
        let table = [
            (true, false, true),
            (false, false, false),
            (true, true, false),
            (false, true, false),
        ];
        for (ready, terminal, want) in table {
            assert_eq!(
                should_mark(&info("n", ready, terminal)),
                want,
                "ready={ready} terminal={terminal}"
            );
        }
    }

    #[test]
    fn the_patch_touches_only_ready_and_is_conditional() {
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let patch = not_ready_patch(Some("42"), now);
        assert_eq!(
            patch,
            json!({
                "metadata": {"resourceVersion": "42"},
                "status": {"conditions": [{
                    "type": "Ready",
                    "status": "False",
                    "lastTransitionTime": "2023-11-14T22:13:20Z",
                }]},
            })
        );
        assert!(not_ready_patch(None, now).get("metadata").is_none());
    }

    #[test]
    fn messages_match_upstream() {
        assert_eq!(node_message("n1"), "Node n1 status is now: NodeNotReady");
        assert_eq!(POD_MESSAGE, "Node is not ready");
    }
}
