//! PodDisruptionBudgets end to end (issue 10): the disruption controller's status figures for
//! `minAvailable` and `maxUnavailable` as numbers and percentages, and `kubectl drain` blocked
//! by a budget through `pods/eviction` (429 with upstream's message) and then allowed once the
//! budget allows it. Every wait is a watch with a deadline.

use crate::{common, endpoints::components};

use common::{Cluster, DEADLINE};
use embedded::wait_until;
use k8s_openapi::api::{core::v1::Pod, policy::v1::PodDisruptionBudget};
use kube::{Api, api::EvictParams};
use serde_json::Value;

/// A Deployment of `replicas` pods labelled `app: name`.
fn deployment(name: &str, replicas: u32) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers: [{{name: c, image: "example/{name}:1"}}]
"#
    )
}

/// A budget over `app: app` with `rule` (`minAvailable: 2`, `maxUnavailable: "25%"`).
fn budget(name: &str, app: &str, rule: &str) -> String {
    format!(
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: {name}}}\nspec:\n  {rule}\n  selector: {{matchLabels: {{app: {app}}}}}\n"
    )
}

/// The figures of a budget's status: (expected, desired, current, allowed).
fn figures(p: &PodDisruptionBudget) -> (i32, i32, i32, i32) {
    let s = p.status.clone().unwrap_or_default();
    (
        s.expected_pods,
        s.desired_healthy,
        s.current_healthy,
        s.disruptions_allowed,
    )
}

/// Waits until budget `name` has caught up with its spec and shows `want`.
async fn wait_figures(c: &Cluster, name: &str, want: (i32, i32, i32, i32)) -> PodDisruptionBudget {
    let api: Api<PodDisruptionBudget> = Api::default_namespaced(c.client().await);
    wait_until(&api, &format!("{name} {want:?}"), DEADLINE, |p| {
        p.metadata.name.as_deref() == Some(name)
            && p.status.as_ref().and_then(|s| s.observed_generation) == p.metadata.generation
            && figures(p) == want
    })
    .await
    .unwrap_or_else(|e| panic!("{name} never showed {want:?}: {e}"))
}

fn condition(p: &PodDisruptionBudget) -> (String, String) {
    let c = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "DisruptionAllowed"))
        .expect("a DisruptionAllowed condition");
    (c.status.clone(), c.reason.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_status_counts_numbers_and_percentages() {
    let c = Cluster::start_with(components()).await;
    let manifest = [
        deployment("half", 4),
        budget("half", "half", "minAvailable: 50%"),
        deployment("quarter", 3),
        budget("quarter", "quarter", "maxUnavailable: 25%"),
        budget("strict", "quarter", "minAvailable: 4"),
        budget("nobody", "nothing", "maxUnavailable: 1"),
    ]
    .join("---\n");
    c.kubectl_stdin(&["apply", "-f", "-"], &manifest).await;
    for d in ["deployment/half", "deployment/quarter"] {
        c.kubectl(&["rollout", "status", d, "--timeout=50s"]).await;
    }
    // 50% of 4 (the Deployment's scale), rounded up: 2 must stay, 2 may go.
    let half = wait_figures(&c, "half", (4, 2, 4, 2)).await;
    assert_eq!(condition(&half), ("True".into(), "SufficientPods".into()));
    // 25% of 3 unavailable rounds up to 1: 2 must stay, 1 may go.
    let quarter = wait_figures(&c, "quarter", (3, 2, 3, 1)).await;
    assert_eq!(
        condition(&quarter),
        ("True".into(), "SufficientPods".into())
    );
    // An integer minAvailable counts the pods themselves; 4 of 3 allows nothing.
    let strict = wait_figures(&c, "strict", (3, 4, 3, 0)).await;
    assert_eq!(
        condition(&strict),
        ("False".into(), "InsufficientPods".into())
    );
    // A budget without pods allows nothing.
    let nobody = wait_figures(&c, "nobody", (0, 0, 0, 0)).await;
    assert_eq!(
        condition(&nobody),
        ("False".into(), "InsufficientPods".into())
    );

    // Scaling changes the expected count at once: 25% of 5 rounds up to 2.
    c.kubectl(&["scale", "deployment/quarter", "--replicas=5"])
        .await;
    c.kubectl(&["rollout", "status", "deployment/quarter", "--timeout=50s"])
        .await;
    wait_figures(&c, "quarter", (5, 3, 5, 2)).await;
    // A spec change is observed.
    c.kubectl(&[
        "patch",
        "pdb",
        "half",
        "--type=merge",
        "-p",
        r#"{"spec":{"minAvailable":"100%"}}"#,
    ])
    .await;
    let half = wait_figures(&c, "half", (4, 4, 4, 0)).await;
    assert_eq!(
        condition(&half),
        ("False".into(), "InsufficientPods".into())
    );
    let table = c.kubectl(&["get", "pdb", "quarter"]).await;
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row[..4], ["quarter", "N/A", "25%", "2"], "{table}");

    // Evictions: a pod under two budgets cannot be evicted (upstream's 500); one under a
    // budget that allows nothing gets 429 with upstream's message and cause.
    // An in-process client: the HTTPS one retries 429s with back-off for minutes, as kube's
    // default retry policy does (kubectl drain below shows the 429 over HTTPS).
    let pods: Api<Pod> = Api::default_namespaced(embedded::client_for(&c.cp().server));
    let quarter_pods = c
        .kubectl(&["get", "pods", "-l", "app=quarter", "-o", "name"])
        .await;
    let victim = quarter_pods
        .lines()
        .next()
        .unwrap()
        .trim_start_matches("pod/");
    let err = pods
        .evict(victim, &EvictParams::default())
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!(status.code, 500, "{status:?}");
    assert!(
        status
            .message
            .contains("This pod has more than one PodDisruptionBudget"),
        "{status:?}"
    );
    let half_pods = c
        .kubectl(&["get", "pods", "-l", "app=half", "-o", "name"])
        .await;
    let victim = half_pods.lines().next().unwrap().trim_start_matches("pod/");
    let err = pods
        .evict(victim, &EvictParams::default())
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!(
        (status.code, status.reason.as_str()),
        (429, "TooManyRequests")
    );
    assert_eq!(
        status.message,
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_is_blocked_by_a_budget_then_allowed() {
    let c = Cluster::start_with(components()).await;
    let manifest = [
        deployment("guarded", 3),
        budget("guarded", "guarded", "minAvailable: 3"),
    ]
    .join("---\n");
    c.kubectl_stdin(&["apply", "-f", "-"], &manifest).await;
    c.kubectl(&["rollout", "status", "deployment/guarded", "--timeout=50s"])
        .await;
    wait_figures(&c, "guarded", (3, 3, 3, 0)).await;
    let pods = c
        .kubectl_json(&["get", "pods", "-l", "app=guarded", "-o", "json"])
        .await;
    let node = pods["items"][0]["spec"]["nodeName"]
        .as_str()
        .unwrap()
        .to_string();
    let on_node: Vec<String> = pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["spec"]["nodeName"] == node.as_str())
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect();

    // Blocked: drain cordons the node, every eviction gets 429, drain gives up at its timeout.
    let out = c
        .kubectl_raw(
            &["drain", &node, "--ignore-daemonsets", "--timeout=6s"],
            None,
        )
        .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "drain went through: {stderr}");
    assert!(
        stderr.contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{stderr}"
    );
    let still = c
        .kubectl_json(&["get", "pods", "-l", "app=guarded", "-o", "json"])
        .await;
    for name in &on_node {
        let pod = still["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["metadata"]["name"] == name.as_str())
            .unwrap_or_else(|| panic!("{name} was evicted despite its budget"));
        assert!(pod["metadata"]["deletionTimestamp"].is_null(), "{pod}");
    }
    let cordoned = c.kubectl_json(&["get", "node", &node, "-o", "json"]).await;
    assert_eq!(cordoned["spec"]["unschedulable"], true);

    // Relaxed: one may go at a time; drain evicts the node's pods (each replacement lands on
    // another node and becomes ready before the next eviction is allowed).
    c.kubectl(&[
        "patch",
        "pdb",
        "guarded",
        "--type=merge",
        "-p",
        r#"{"spec":{"minAvailable":2}}"#,
    ])
    .await;
    wait_figures(&c, "guarded", (3, 2, 3, 1)).await;
    let out = c
        .kubectl(&["drain", &node, "--ignore-daemonsets", "--timeout=50s"])
        .await;
    for name in &on_node {
        assert!(out.contains(&format!("pod/{name} evicted")), "{out}");
    }
    assert!(out.contains(&format!("node/{node} drained")), "{out}");
    c.kubectl(&["rollout", "status", "deployment/guarded", "--timeout=50s"])
        .await;
    let after = c
        .kubectl_json(&["get", "pods", "-l", "app=guarded", "-o", "json"])
        .await;
    let nodes: Vec<&Value> = after["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["spec"]["nodeName"])
        .collect();
    assert!(nodes.iter().all(|n| *n != node.as_str()), "{nodes:?}");
    // Once the evicted pods are gone, the budget forgets them and is whole again.
    let back = wait_figures(&c, "guarded", (3, 2, 3, 1)).await;
    assert!(
        back.status
            .as_ref()
            .and_then(|s| s.disrupted_pods.as_ref())
            .is_none_or(|m| m.is_empty()),
        "{back:?}"
    );
    c.stop().await;
}
