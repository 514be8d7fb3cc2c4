//! Services and the endpoints of services (upstream's `ValidateService`,
//! `ValidateServiceUpdate`, `ValidateEndpointSlice` for the rules a client can trip over).

use super::{field, items, meta, names, pod, str_field};
use crate::field::{FieldError, Path};
use serde_json::Value;
use std::collections::HashSet;

const TYPES: [&str; 4] = ["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"];
const PROTOCOLS: [&str; 3] = ["TCP", "UDP", "SCTP"];

/// A Service: a known type, ports that are named when there are several, in range, with known
/// protocols, and an external name for ExternalName services.
pub fn validate_service(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, true, names::name_is_dns_label);
    let spec = field(obj, "spec").unwrap_or(&Value::Null);
    let path = Path::new("spec");
    let ty = str_field(spec, "type").unwrap_or("ClusterIP");
    if !TYPES.contains(&ty) {
        errs.push(FieldError::not_supported(
            path.child("type"),
            Value::from(ty),
            &TYPES,
        ));
    }
    let headless = str_field(spec, "clusterIP") == Some("None");
    let ports = items(spec, "ports");
    if ports.is_empty() && !headless && ty != "ExternalName" {
        errs.push(FieldError::required(path.child("ports"), ""));
    }
    if ty == "ExternalName" {
        match str_field(spec, "externalName").unwrap_or_default() {
            "" => errs.push(FieldError::required(path.child("externalName"), "")),
            name => {
                for msg in names::dns1123_subdomain(name.trim_end_matches('.')) {
                    errs.push(FieldError::invalid(
                        path.child("externalName"),
                        Value::from(name),
                        msg,
                    ));
                }
            }
        }
    }
    let mut seen = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let p = path.child("ports").index(i);
        let name = str_field(port, "name").unwrap_or_default();
        if name.is_empty() {
            if ports.len() > 1 {
                errs.push(FieldError::required(p.child("name"), ""));
            }
        } else {
            for msg in names::dns1123_label(name) {
                errs.push(FieldError::invalid(p.child("name"), Value::from(name), msg));
            }
            if !seen.insert(name) {
                errs.push(FieldError::duplicate(p.child("name"), Value::from(name)));
            }
        }
        let number = field(port, "port").and_then(Value::as_i64).unwrap_or(0);
        if !(1..=65535).contains(&number) {
            errs.push(FieldError::invalid(
                p.child("port"),
                Value::from(number),
                names::inclusive_range_error(1, 65535),
            ));
        }
        if let Some(protocol) = str_field(port, "protocol") {
            errs.extend(pod::one_of(p.child("protocol"), protocol, &PROTOCOLS));
        }
        if let Some(node_port) = field(port, "nodePort").and_then(Value::as_i64)
            && node_port != 0
        {
            if !matches!(ty, "NodePort" | "LoadBalancer") {
                errs.push(FieldError::forbidden(
                    p.child("nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            } else if !(1..=65535).contains(&node_port) {
                errs.push(FieldError::invalid(
                    p.child("nodePort"),
                    Value::from(node_port),
                    names::inclusive_range_error(1, 65535),
                ));
            }
        }
        match field(port, "targetPort") {
            Some(Value::Number(n)) => {
                let n = n.as_i64().unwrap_or(0);
                if !(1..=65535).contains(&n) {
                    errs.push(FieldError::invalid(
                        p.child("targetPort"),
                        Value::from(n),
                        names::inclusive_range_error(1, 65535),
                    ));
                }
            }
            Some(Value::String(s)) if !s.is_empty() => {
                for msg in names::port_name(s) {
                    errs.push(FieldError::invalid(
                        p.child("targetPort"),
                        Value::from(s.as_str()),
                        msg,
                    ));
                }
            }
            _ => {}
        }
    }
    if let Some(policy) = str_field(spec, "sessionAffinity") {
        errs.extend(pod::one_of(
            path.child("sessionAffinity"),
            policy,
            &["ClientIP", "None"],
        ));
    }
    for key in ["externalTrafficPolicy", "internalTrafficPolicy"] {
        if let Some(policy) = str_field(spec, key) {
            errs.extend(pod::one_of(path.child(key), policy, &["Cluster", "Local"]));
        }
    }
    errs
}

/// A Service's cluster IP, once assigned, never changes (except to and from ExternalName, which
/// has none).
pub fn validate_service_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let ip = |o: &Value| {
        field(o, "spec")
            .and_then(|s| str_field(s, "clusterIP"))
            .unwrap_or_default()
            .to_string()
    };
    let ty = |o: &Value| {
        field(o, "spec")
            .and_then(|s| str_field(s, "type"))
            .unwrap_or("ClusterIP")
            .to_string()
    };
    let (new_ip, old_ip) = (ip(new), ip(old));
    if old_ip.is_empty() || ty(new) == "ExternalName" || ty(old) == "ExternalName" {
        return Vec::new();
    }
    if new_ip != old_ip {
        return vec![FieldError::invalid(
            "spec.clusterIPs[0]",
            Value::from(new_ip),
            "may not change once set",
        )];
    }
    Vec::new()
}

/// An EndpointSlice: a known address type, which never changes.
pub fn validate_endpoint_slice(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, true, names::name_is_dns_subdomain);
    match str_field(obj, "addressType") {
        None => errs.push(FieldError::required("addressType", "")),
        Some(t) => errs.extend(pod::one_of(
            Path::new("addressType"),
            t,
            &["IPv4", "IPv6", "FQDN"],
        )),
    }
    errs
}

/// An EndpointSlice's address type is fixed.
pub fn validate_endpoint_slice_update(new: &Value, old: &Value) -> Vec<FieldError> {
    if str_field(new, "addressType") == str_field(old, "addressType") {
        return Vec::new();
    }
    vec![FieldError::invalid(
        "addressType",
        field(new, "addressType").cloned().unwrap_or(Value::Null),
        "field is immutable",
    )]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::validation::messages as msgs;

    #[test]
    fn services() {
        let svc =
            |spec: Value| json!({"metadata": {"name": "web", "namespace": "d"}, "spec": spec});
        assert!(
            validate_service(&svc(json!({"ports": [{"port": 80, "protocol": "TCP"}]}))).is_empty()
        );
        assert!(validate_service(&svc(json!({"clusterIP": "None"}))).is_empty());
        let cases = [
            (json!({}), vec!["spec.ports: Required value"]),
            (
                json!({"type": "Cluster", "ports": [{"port": 0}, {"port": 80, "name": "x"}]}),
                vec![
                    "spec.type: Unsupported value: \"Cluster\": supported values: \"ClusterIP\", \"NodePort\", \"LoadBalancer\", \"ExternalName\"",
                    "spec.ports[0].name: Required value",
                    "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
                ],
            ),
            (
                json!({"type": "ExternalName"}),
                vec!["spec.externalName: Required value"],
            ),
            (
                json!({"ports": [{"port": 80, "nodePort": 30001}]}),
                vec![
                    "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'",
                ],
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(msgs(validate_service(&svc(spec.clone()))), want, "{spec}");
        }
        let old = svc(json!({"clusterIP": "10.96.0.10"}));
        let moved = svc(json!({"clusterIP": "10.96.0.11"}));
        assert_eq!(
            msgs(validate_service_update(&moved, &old)),
            vec!["spec.clusterIPs[0]: Invalid value: \"10.96.0.11\": may not change once set"]
        );
    }
}
