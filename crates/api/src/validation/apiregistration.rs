//! apiregistration.k8s.io/v1 APIServices, as upstream's kube-aggregator validates them
//! (`pkg/apis/apiregistration/validation`): the name is `<version>.<group>`, priorities are in
//! range, a local APIService (no `service`) carries no TLS settings, a remote one names a whole
//! Service and a valid port, and a status write's conditions say True, False or Unknown.

use super::{field, items, meta, names, str_field};
use crate::field::{FieldError, Path};
use serde_json::Value;

/// The port an APIService's `service` defaults to (upstream's `SetDefaults_ServiceReference`).
pub const DEFAULT_SERVICE_PORT: i64 = 443;

/// Upstream's `SetDefaults_ServiceReference`: a service reference without a port means 443. An
/// empty `group` (the core group's APIService) is dropped, as Go's `omitempty` writes it.
pub fn default_api_service(obj: &mut Value) {
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut)
        && spec.get("group").and_then(Value::as_str) == Some("")
    {
        spec.remove("group");
    }
    if let Some(service) = obj
        .pointer_mut("/spec/service")
        .and_then(Value::as_object_mut)
        && service.get("port").is_none_or(Value::is_null)
    {
        service.insert("port".into(), Value::from(DEFAULT_SERVICE_PORT));
    }
}

/// Upstream's `ValidateAPIService`, for a create or an update.
pub fn validate_api_service(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, false, names::path_segment_name);
    let spec = field(obj, "spec").unwrap_or(&Value::Null);
    let path = Path::new("spec");
    let group = str_field(spec, "group").unwrap_or_default();
    let version = str_field(spec, "version").unwrap_or_default();
    let name = field(obj, "metadata")
        .and_then(|m| str_field(m, "name"))
        .unwrap_or_default();
    // Upstream's name check runs after the path-segment rules pass, in the same name function.
    let required = format!("{version}.{group}");
    if names::path_segment_name(name, false).is_empty() && !name.is_empty() && name != required {
        errs.push(FieldError::invalid(
            Path::new("metadata").child("name"),
            Value::from(name),
            format!("must be `spec.version+\".\"+spec.group`: {required:?}"),
        ));
    }
    if group.is_empty() && version != "v1" {
        errs.push(FieldError::required(
            path.child("group"),
            "only v1 may have an empty group and it better be legacy kube",
        ));
    }
    if !group.is_empty() {
        for msg in names::dns1123_subdomain(group) {
            errs.push(FieldError::invalid(
                path.child("group"),
                Value::from(group),
                msg,
            ));
        }
    }
    for msg in names::dns1035_label(version) {
        errs.push(FieldError::invalid(
            path.child("version"),
            Value::from(version),
            msg,
        ));
    }
    // Upstream's messages say "less than" the bound they accept.
    for (key, hi) in [("groupPriorityMinimum", 20_000), ("versionPriority", 1_000)] {
        let n = field(spec, key).and_then(Value::as_i64).unwrap_or(0);
        if n <= 0 || n > hi {
            errs.push(FieldError::invalid(
                path.child(key),
                Value::from(n),
                format!("must be positive and less than {hi}"),
            ));
        }
    }
    let insecure = field(spec, "insecureSkipTLSVerify").and_then(Value::as_bool) == Some(true);
    let ca_bundle = str_field(spec, "caBundle").unwrap_or_default();
    let Some(service) = field(spec, "service") else {
        if !ca_bundle.is_empty() {
            errs.push(FieldError::invalid(
                path.child("caBundle"),
                Value::from(format!("{} bytes", decoded_len(ca_bundle))),
                "local APIServices may not have a caBundle",
            ));
        }
        if insecure {
            errs.push(FieldError::invalid(
                path.child("insecureSkipTLSVerify"),
                Value::from(true),
                "local APIServices may not have insecureSkipTLSVerify",
            ));
        }
        return errs;
    };
    let sp = path.child("service");
    for key in ["namespace", "name"] {
        if str_field(service, key).is_none_or(str::is_empty) {
            errs.push(FieldError::required(sp.child(key), ""));
        }
    }
    let port = field(service, "port")
        .and_then(Value::as_i64)
        .unwrap_or(DEFAULT_SERVICE_PORT);
    if !(1..=65_535).contains(&port) {
        errs.push(FieldError::invalid(
            sp.child("port"),
            Value::from(port),
            format!(
                "port is not valid: {}",
                names::inclusive_range_error(1, 65_535)
            ),
        ));
    }
    if insecure && !ca_bundle.is_empty() {
        errs.push(FieldError::invalid(
            path.child("insecureSkipTLSVerify"),
            Value::from(true),
            "may not be true if caBundle is present",
        ));
    }
    errs
}

/// Upstream's `ValidateAPIServiceStatus`: every condition's status is True, False or Unknown.
pub fn validate_api_service_status(obj: &Value) -> Vec<FieldError> {
    let status = field(obj, "status").unwrap_or(&Value::Null);
    let path = Path::new("status").child("conditions");
    items(status, "conditions")
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let st = c.get("status").cloned().unwrap_or(Value::from(""));
            (!matches!(st.as_str(), Some("True" | "False" | "Unknown"))).then(|| {
                FieldError::not_supported(
                    path.index(i).child("status"),
                    st,
                    &["True", "False", "Unknown"],
                )
            })
        })
        .collect()
}

/// The length of a base64 `[]byte` field once decoded, as upstream's message counts it.
fn decoded_len(b64: &str) -> usize {
    let padding = b64.bytes().rev().take_while(|&c| c == b'=').count();
    (b64.len() / 4 * 3).saturating_sub(padding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn remote() -> Value {
        json!({"metadata": {"name": "v1alpha1.wardle.example.com"},
            "spec": {"group": "wardle.example.com", "version": "v1alpha1",
                "groupPriorityMinimum": 2000, "versionPriority": 200,
                "service": {"namespace": "ns", "name": "api", "port": 443}}})
    }

    /// The errors as upstream's aggregate prints them: `field: message`.
    fn shown(errs: &[FieldError]) -> Vec<String> {
        errs.iter()
            .map(|e| format!("{}: {}", e.field, e.message()))
            .collect()
    }

    fn messages(obj: &Value) -> Vec<String> {
        shown(&validate_api_service(obj))
    }

    #[test]
    fn a_complete_remote_and_a_local_api_service_are_valid() {
        assert_eq!(messages(&remote()), Vec::<String>::new());
        let local = json!({"metadata": {"name": "v1."},
            "spec": {"group": "", "version": "v1", "groupPriorityMinimum": 18000,
                "versionPriority": 1}});
        assert_eq!(messages(&local), Vec::<String>::new());
    }

    #[test]
    fn errors_read_as_upstreams() {
        let mut bad = remote();
        bad["metadata"]["name"] = json!("wardle");
        bad["spec"]["versionPriority"] = json!(0);
        bad["spec"]["groupPriorityMinimum"] = json!(20001);
        bad["spec"]["service"] = json!({"namespace": "ns", "port": 70000});
        bad["spec"]["insecureSkipTLSVerify"] = json!(true);
        bad["spec"]["caBundle"] = json!("YWJj");
        assert_eq!(
            messages(&bad),
            [
                "metadata.name: Invalid value: \"wardle\": must be `spec.version+\".\"+spec.group`: \"v1alpha1.wardle.example.com\"",
                "spec.groupPriorityMinimum: Invalid value: 20001: must be positive and less than 20000",
                "spec.versionPriority: Invalid value: 0: must be positive and less than 1000",
                "spec.service.name: Required value",
                "spec.service.port: Invalid value: 70000: port is not valid: must be between 1 and 65535, inclusive",
                "spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present",
            ]
        );
    }

    #[test]
    fn local_api_services_carry_no_tls_settings_and_only_v1_has_no_group() {
        let local = json!({"metadata": {"name": "v2."},
            "spec": {"version": "v2", "groupPriorityMinimum": 1, "versionPriority": 1,
                "caBundle": "YWJjZA==", "insecureSkipTLSVerify": true}});
        assert_eq!(
            messages(&local),
            [
                "spec.group: Required value: only v1 may have an empty group and it better be legacy kube",
                "spec.caBundle: Invalid value: \"4 bytes\": local APIServices may not have a caBundle",
                "spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have insecureSkipTLSVerify",
            ]
        );
    }

    #[test]
    fn the_version_is_a_dns_1035_label() {
        let mut bad = remote();
        bad["metadata"]["name"] = json!("1v.wardle.example.com");
        bad["spec"]["version"] = json!("1v");
        assert_eq!(
            messages(&bad),
            [
                "spec.version: Invalid value: \"1v\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
    }

    #[test]
    fn the_port_defaults_to_443_and_conditions_are_true_false_or_unknown() {
        let mut obj = remote();
        obj["spec"]["service"]
            .as_object_mut()
            .unwrap()
            .remove("port");
        default_api_service(&mut obj);
        assert_eq!(obj["spec"]["service"]["port"], 443);
        let mut core = json!({"spec": {"group": "", "version": "v1"}});
        default_api_service(&mut core);
        assert_eq!(core["spec"], json!({"version": "v1"}));
        obj["status"] = json!({"conditions": [{"type": "Available", "status": "Maybe"}]});
        let errs = shown(&validate_api_service_status(&obj));
        assert_eq!(
            errs,
            [
                "status.conditions[0].status: Unsupported value: \"Maybe\": supported values: \"True\", \"False\", \"Unknown\""
            ]
        );
    }
}
