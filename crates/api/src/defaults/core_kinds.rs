//! Defaults of the core/v1 kinds beyond pods and nodes: Secrets, Services and
//! ReplicationControllers (upstream's `SetDefaults_Secret`, `SetDefaults_Service`,
//! `SetDefaults_ReplicationController` and the v1 conversion of `stringData`).

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::{child, default_ptr, default_str, each, existing, on_root, template};

/// A Secret: `type` Opaque; `stringData` merged into `data` (base64) and dropped, as upstream's
/// v1 conversion does, so the stored object never carries it.
pub fn secret(obj: &mut Value) {
    on_root(obj, |root| {
        default_str(root, "type", "Opaque");
        let Some(Value::Object(strings)) = root.remove("stringData") else {
            return;
        };
        let Some(data) = child(root, "data") else {
            return;
        };
        for (k, v) in strings {
            let text = v.as_str().unwrap_or_default();
            let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
            data.insert(k, Value::String(encoded));
        }
    })
}

/// A Service: type, session affinity, port protocols and target ports, traffic policies, and
/// the IP families of a single-stack IPv4 cluster.
pub fn service(obj: &mut Value) {
    on_root(obj, |root| {
        let Some(spec) = child(root, "spec") else {
            return;
        };
        default_str(spec, "type", "ClusterIP");
        default_str(spec, "sessionAffinity", "None");
        if spec.get("sessionAffinity").and_then(Value::as_str) == Some("ClientIP") {
            default_ptr(
                spec,
                "sessionAffinityConfig",
                json!({"clientIP": {"timeoutSeconds": 10800}}),
            );
        }
        for port in each(spec, "ports") {
            default_str(port, "protocol", "TCP");
            let unset = port
                .get("targetPort")
                .is_none_or(|t| t.is_null() || t == &json!(0) || t == &json!(""));
            if unset && let Some(p) = port.get("port").cloned() {
                port.insert("targetPort".into(), p);
            }
        }
        let ty = spec
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if matches!(ty.as_str(), "NodePort" | "LoadBalancer") {
            default_str(spec, "externalTrafficPolicy", "Cluster");
        }
        if ty != "ExternalName" {
            default_ptr(spec, "internalTrafficPolicy", json!("Cluster"));
            default_ptr(spec, "ipFamilies", json!(["IPv4"]));
            default_ptr(spec, "ipFamilyPolicy", json!("SingleStack"));
        }
        if ty == "LoadBalancer" {
            default_ptr(spec, "allocateLoadBalancerNodePorts", json!(true));
        }
    })
}

/// A ReplicationController: one replica, and selector and labels from the template's labels.
pub fn replication_controller(obj: &mut Value) {
    on_root(obj, |root| {
        let template_labels = root
            .get("spec")
            .and_then(|s| s.get("template"))
            .and_then(|t| t.get("metadata"))
            .and_then(|m| m.get("labels"))
            .filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
            .cloned();
        if let Some(labels) = template_labels {
            if let Some(spec) = child(root, "spec") {
                let empty = spec
                    .get("selector")
                    .and_then(Value::as_object)
                    .is_none_or(Map::is_empty);
                if empty {
                    spec.insert("selector".into(), labels.clone());
                }
            }
            if let Some(meta) = child(root, "metadata") {
                let empty = meta
                    .get("labels")
                    .and_then(Value::as_object)
                    .is_none_or(Map::is_empty);
                if empty {
                    meta.insert("labels".into(), labels);
                }
            }
        }
        if let Some(spec) = existing(root, "spec") {
            default_ptr(spec, "replicas", json!(1));
            template(spec);
        }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn secrets_merge_string_data() {
        let mut s = json!({"data": {"a": "eA=="}, "stringData": {"b": "hello", "a": "y"}});
        secret(&mut s);
        assert_eq!(
            s,
            json!({"data": {"a": "eQ==", "b": "aGVsbG8="}, "type": "Opaque"})
        );
    }

    #[test]
    fn services_default_as_upstream() {
        let mut s = json!({"spec": {"type": "NodePort", "ports": [{"port": 80}, {"port": 53, "protocol": "UDP", "targetPort": "dns"}]}});
        service(&mut s);
        assert_eq!(
            s["spec"],
            json!({"type": "NodePort", "sessionAffinity": "None",
                "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80},
                          {"port": 53, "protocol": "UDP", "targetPort": "dns"}],
                "externalTrafficPolicy": "Cluster", "internalTrafficPolicy": "Cluster",
                "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack"})
        );
        let mut external =
            json!({"spec": {"type": "ExternalName", "externalName": "x.example.com"}});
        service(&mut external);
        assert!(external["spec"].get("ipFamilies").is_none());
    }

    #[test]
    fn replication_controllers_take_the_template_labels() {
        let mut rc = json!({"spec": {"template": {"metadata": {"labels": {"app": "x"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        replication_controller(&mut rc);
        assert_eq!(rc["spec"]["selector"], json!({"app": "x"}));
        assert_eq!(rc["metadata"]["labels"], json!({"app": "x"}));
        assert_eq!(rc["spec"]["replicas"], 1);
        assert_eq!(rc["spec"]["template"]["spec"]["restartPolicy"], "Always");
    }
}
