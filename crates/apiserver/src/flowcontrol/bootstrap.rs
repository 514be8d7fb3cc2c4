//! Upstream's default FlowSchemas and PriorityLevelConfigurations
//! (`apis/flowcontrol/bootstrap/default.go`), created when the server starts and kept as
//! upstream keeps them: the mandatory ones (`exempt`, `catch-all`) are put back to their
//! default spec on every start unless their `apf.kubernetes.io/autoupdate-spec` annotation says
//! `false`; the suggested ones only while it says `true` (an administrator who edits one and
//! sets it to `false` keeps the edit).

use serde_json::{Value, json};

/// The annotation that lets the server keep an object's spec at its default.
pub(crate) const AUTO_UPDATE: &str = "apf.kubernetes.io/autoupdate-spec";

/// The group/version the objects are stored in.
const API_VERSION: &str = "flowcontrol.apiserver.k8s.io/v1beta3";

/// Whether a default object is mandatory or suggested.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ensure {
    Mandatory,
    Suggested,
}

/// Every default object (levels first, as upstream ensures them) and whether it is mandatory.
pub(crate) fn objects() -> Vec<(Ensure, Value)> {
    use Ensure::*;
    vec![
        (Mandatory, exempt_level()),
        (
            Mandatory,
            limited("catch-all", 5, 0, None), // rejects past its limit
        ),
        (Suggested, limited("system", 30, 33, Some((64, 6)))),
        (Suggested, limited("node-high", 40, 25, Some((64, 6)))),
        (Suggested, limited("leader-election", 10, 0, Some((16, 4)))),
        (Suggested, limited("workload-high", 40, 50, Some((128, 6)))),
        (Suggested, limited("workload-low", 100, 90, Some((128, 6)))),
        (Suggested, limited("global-default", 20, 50, Some((128, 6)))),
        (
            Mandatory,
            flow_schema(
                "exempt",
                "exempt",
                1,
                None,
                groups(&["system:masters"]),
                vec![everything(true)],
                true,
            ),
        ),
        (
            Mandatory,
            flow_schema(
                "catch-all",
                "catch-all",
                10000,
                Some("ByUser"),
                groups(&["system:unauthenticated", "system:authenticated"]),
                vec![everything(true)],
                true,
            ),
        ),
        (
            Suggested,
            flow_schema(
                "system-nodes",
                "system",
                500,
                Some("ByUser"),
                groups(&["system:nodes"]),
                vec![everything(true)],
                true,
            ),
        ),
        (
            Suggested,
            flow_schema(
                "system-node-high",
                "node-high",
                400,
                Some("ByUser"),
                groups(&["system:nodes"]),
                vec![
                    resource_rule(&["*"], &[""], &["nodes", "nodes/status"], true),
                    resource_rule(&["*"], &["coordination.k8s.io"], &["leases"], false),
                ],
                false,
            ),
        ),
        (
            Suggested,
            json!({
                "apiVersion": API_VERSION, "kind": "FlowSchema",
                "metadata": {"name": "probes", "annotations": {AUTO_UPDATE: "true"}},
                "spec": {
                    "priorityLevelConfiguration": {"name": "exempt"},
                    "matchingPrecedence": 2,
                    "rules": [{
                        "subjects": groups(&["system:unauthenticated", "system:authenticated"]),
                        "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}],
                    }],
                },
            }),
        ),
        (
            Suggested,
            flow_schema(
                "system-leader-election",
                "leader-election",
                100,
                Some("ByUser"),
                [
                    users(&["system:kube-controller-manager", "system:kube-scheduler"]),
                    kube_system_service_accounts(&["*"]),
                ]
                .concat(),
                vec![resource_rule(
                    &["get", "create", "update"],
                    &["coordination.k8s.io"],
                    &["leases"],
                    false,
                )],
                false,
            ),
        ),
        (
            Suggested,
            flow_schema(
                "workload-leader-election",
                "leader-election",
                200,
                Some("ByUser"),
                kube_system_service_accounts(&["*"]),
                vec![
                    resource_rule(
                        &["get", "create", "update"],
                        &[""],
                        &["endpoints", "configmaps"],
                        false,
                    ),
                    resource_rule(
                        &["get", "create", "update"],
                        &["coordination.k8s.io"],
                        &["leases"],
                        false,
                    ),
                ],
                false,
            ),
        ),
        (
            Suggested,
            flow_schema(
                "endpoint-controller",
                "workload-high",
                150,
                Some("ByUser"),
                [
                    users(&["system:kube-controller-manager"]),
                    kube_system_service_accounts(&[
                        "endpoint-controller",
                        "endpointslicemirroring-controller",
                    ]),
                ]
                .concat(),
                vec![resource_rule(
                    &["get", "create", "update"],
                    &[""],
                    &["endpoints"],
                    false,
                )],
                false,
            ),
        ),
        (
            Suggested,
            flow_schema(
                "kube-controller-manager",
                "workload-high",
                800,
                Some("ByNamespace"),
                users(&["system:kube-controller-manager"]),
                vec![everything(true)],
                true,
            ),
        ),
        (
            Suggested,
            flow_schema(
                "kube-scheduler",
                "workload-high",
                800,
                Some("ByNamespace"),
                users(&["system:kube-scheduler"]),
                vec![everything(true)],
                true,
            ),
        ),
        (
            Suggested,
            flow_schema(
                "kube-system-service-accounts",
                "workload-high",
                900,
                Some("ByNamespace"),
                kube_system_service_accounts(&["*"]),
                vec![everything(true)],
                true,
            ),
        ),
        (
            Suggested,
            flow_schema(
                "service-accounts",
                "workload-low",
                9000,
                Some("ByUser"),
                groups(&["system:serviceaccounts"]),
                vec![everything(true)],
                true,
            ),
        ),
        (
            Suggested,
            flow_schema(
                "global-default",
                "global-default",
                9900,
                Some("ByUser"),
                groups(&["system:unauthenticated", "system:authenticated"]),
                vec![everything(true)],
                true,
            ),
        ),
    ]
}

fn meta(name: &str) -> Value {
    json!({"name": name, "annotations": {AUTO_UPDATE: "true"}})
}

fn exempt_level() -> Value {
    json!({
        "apiVersion": API_VERSION, "kind": "PriorityLevelConfiguration",
        "metadata": meta("exempt"),
        "spec": {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}},
    })
}

/// A limited level; `queuing` is `(queues, handSize)` (queue length 50), `None` rejects.
fn limited(name: &str, shares: u32, lendable: u32, queuing: Option<(u32, u32)>) -> Value {
    let response = match queuing {
        Some((queues, hand)) => json!({"type": "Queue", "queuing": {
            "queues": queues, "handSize": hand, "queueLengthLimit": 50}}),
        None => json!({"type": "Reject"}),
    };
    json!({
        "apiVersion": API_VERSION, "kind": "PriorityLevelConfiguration",
        "metadata": meta(name),
        "spec": {"type": "Limited", "limited": {
            "nominalConcurrencyShares": shares, "lendablePercent": lendable,
            "limitResponse": response}},
    })
}

fn flow_schema(
    name: &str,
    level: &str,
    precedence: u32,
    distinguisher: Option<&str>,
    subjects: Vec<Value>,
    resource_rules: Vec<Value>,
    non_resource: bool,
) -> Value {
    let mut rule = json!({"subjects": subjects, "resourceRules": resource_rules});
    if non_resource {
        rule["nonResourceRules"] = json!([{"verbs": ["*"], "nonResourceURLs": ["*"]}]);
    }
    let mut spec = json!({
        "priorityLevelConfiguration": {"name": level},
        "matchingPrecedence": precedence,
        "rules": [rule],
    });
    if let Some(d) = distinguisher {
        spec["distinguisherMethod"] = json!({"type": d});
    }
    json!({"apiVersion": API_VERSION, "kind": "FlowSchema", "metadata": meta(name), "spec": spec})
}

fn everything(cluster_scope: bool) -> Value {
    json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
        "clusterScope": cluster_scope, "namespaces": ["*"]})
}

fn resource_rule(verbs: &[&str], groups: &[&str], resources: &[&str], cluster: bool) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources,
        "clusterScope": cluster, "namespaces": ["*"]})
}

fn groups(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|n| json!({"kind": "Group", "group": {"name": n}}))
        .collect()
}

fn users(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|n| json!({"kind": "User", "user": {"name": n}}))
        .collect()
}

fn kube_system_service_accounts(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|n| {
            json!({"kind": "ServiceAccount",
                "serviceAccount": {"name": n, "namespace": "kube-system"}})
        })
        .collect()
}

/// What the server writes over `existing`, the stored object named as default `default`, if
/// anything (upstream's ensurer): a mandatory object's spec is always put back; a suggested
/// one's only while its annotation says `true` (or, without a readable annotation, while it was
/// never changed: generation 1). The annotation is set to what was decided.
pub(crate) fn revise(kind: Ensure, existing: &Value, default: &Value) -> Option<Value> {
    let annotation = existing
        .pointer(&format!(
            "/metadata/annotations/{}",
            AUTO_UPDATE.replace('/', "~1")
        ))
        .and_then(Value::as_str)
        .and_then(parse_bool);
    let auto_update = match kind {
        Ensure::Mandatory => true,
        Ensure::Suggested => annotation.unwrap_or_else(|| {
            existing
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                == Some(1)
        }),
    };
    let spec_changed = auto_update && existing.get("spec") != default.get("spec");
    let annotation_changed = annotation != Some(auto_update);
    if !spec_changed && !annotation_changed {
        return None;
    }
    let mut revised = existing.clone();
    if spec_changed {
        revised["spec"] = default.get("spec").cloned().unwrap_or(Value::Null);
    }
    if annotation_changed {
        crate::registry::conversion::put(
            &mut revised,
            "metadata.annotations",
            existing
                .pointer("/metadata/annotations")
                .cloned()
                .unwrap_or_else(|| json!({})),
        );
        revised["metadata"]["annotations"][AUTO_UPDATE] = json!(auto_update.to_string());
    }
    Some(revised)
}

/// Go's `strconv.ParseBool`.
fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mandatory_specs_are_put_back_and_suggested_ones_only_while_annotated_true() {
        let default = limited("global-default", 20, 50, Some((128, 6)));
        let mut edited = default.clone();
        edited["spec"]["limited"]["nominalConcurrencyShares"] = json!(1);
        edited["metadata"]["generation"] = json!(2);
        assert_eq!(
            revise(Ensure::Suggested, &edited, &default).map(|v| v["spec"].clone()),
            Some(default["spec"].clone())
        );
        assert_eq!(revise(Ensure::Suggested, &default, &default), None);
        edited["metadata"]["annotations"][AUTO_UPDATE] = json!("false");
        assert_eq!(revise(Ensure::Suggested, &edited, &default), None);
        let revised = revise(Ensure::Mandatory, &edited, &default);
        assert_eq!(
            revised
                .as_ref()
                .map(|v| v["metadata"]["annotations"][AUTO_UPDATE].clone()),
            Some(json!("true"))
        );
        // No annotation: generation 1 (never edited) is kept up to date, and annotated so.
        let mut fresh = edited.clone();
        fresh["metadata"]["annotations"] = json!({});
        fresh["metadata"]["generation"] = json!(1);
        let revised = revise(Ensure::Suggested, &fresh, &default);
        assert_eq!(
            revised.map(|v| v["metadata"]["annotations"][AUTO_UPDATE].clone()),
            Some(json!("true"))
        );
    }
}
