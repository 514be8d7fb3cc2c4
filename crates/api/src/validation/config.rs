//! ConfigMaps and Secrets (upstream's `ValidateConfigMap`, `ValidateSecret` and their updates):
//! key syntax, size, the keys each Secret type needs, and immutability.

use super::{field, meta, names, normalize, str_field};
use crate::field::{FieldError, Path};
use serde_json::{Map, Value};

/// The most a ConfigMap's or Secret's data may hold.
const MAX_SIZE: usize = 1024 * 1024;
const KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";

/// Upstream's `IsConfigMapKey`.
fn config_key(key: &str) -> Vec<String> {
    let mut msgs = Vec::new();
    if key.len() > 253 {
        msgs.push(names::max_len_error(253));
    }
    let ok = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if !ok {
        msgs.push(names::regex_error(
            KEY_MSG,
            KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    match key {
        "." => msgs.push("must not be '.'".into()),
        ".." => msgs.push("must not be '..'".into()),
        k if k.starts_with("..") => msgs.push("must not start with '..'".into()),
        _ => {}
    }
    msgs
}

fn keys(errs: &mut Vec<FieldError>, map: Option<&Map<String, Value>>, path: &Path) -> usize {
    let mut size = 0;
    for (k, v) in map.into_iter().flatten() {
        for msg in config_key(k) {
            errs.push(FieldError::invalid(
                path.key(k),
                Value::from(k.as_str()),
                msg,
            ));
        }
        size += v.as_str().map_or(0, str::len);
    }
    size
}

/// A ConfigMap: valid keys, none in both `data` and `binaryData`, at most 1 MiB.
pub fn validate_config_map(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, true, names::name_is_dns_subdomain);
    let data = field(obj, "data").and_then(Value::as_object);
    let binary = field(obj, "binaryData").and_then(Value::as_object);
    let mut size = keys(&mut errs, data, &Path::new("data"));
    size += keys(&mut errs, binary, &Path::new("binaryData"));
    for k in data.into_iter().flatten().map(|(k, _)| k) {
        if binary.is_some_and(|b| b.contains_key(k)) {
            errs.push(FieldError::invalid(
                Path::new("data").key(k),
                Value::from(k.as_str()),
                "duplicate of key present in binaryData",
            ));
        }
    }
    if size > MAX_SIZE {
        errs.push(FieldError::too_long("", MAX_SIZE));
    }
    errs
}

/// The keys each Secret type needs.
fn secret_type_rules(errs: &mut Vec<FieldError>, obj: &Value) {
    let data = field(obj, "data").and_then(Value::as_object);
    let has = |k: &str| data.is_some_and(|d| d.contains_key(k));
    let required: &[&str] = match str_field(obj, "type").unwrap_or("Opaque") {
        "kubernetes.io/dockercfg" => &[".dockercfg"],
        "kubernetes.io/dockerconfigjson" => &[".dockerconfigjson"],
        "kubernetes.io/tls" => &["tls.crt", "tls.key"],
        "kubernetes.io/ssh-auth" => &["ssh-privatekey"],
        _ => &[],
    };
    for k in required {
        if !has(k) {
            errs.push(FieldError::required(Path::new("data").key(k), ""));
        }
    }
    if str_field(obj, "type") == Some("kubernetes.io/service-account-token") {
        let named = field(obj, "metadata")
            .and_then(|m| field(m, "annotations"))
            .and_then(|a| str_field(a, "kubernetes.io/service-account.name"))
            .is_some_and(|n| !n.is_empty());
        if !named {
            errs.push(FieldError::required(
                Path::new("metadata")
                    .child("annotations")
                    .key("kubernetes.io/service-account.name"),
                "",
            ));
        }
    }
    if str_field(obj, "type") == Some("kubernetes.io/basic-auth")
        && !has("username")
        && !has("password")
    {
        errs.push(FieldError::required(
            "data[username]",
            "either username or password must be provided",
        ));
    }
}

/// A Secret: valid keys, the keys its type needs, at most 1 MiB.
pub fn validate_secret(obj: &Value) -> Vec<FieldError> {
    let mut errs = meta::validate_object_meta(obj, true, names::name_is_dns_subdomain);
    let size = keys(
        &mut errs,
        field(obj, "data").and_then(Value::as_object),
        &Path::new("data"),
    );
    if size > MAX_SIZE {
        errs.push(FieldError::too_long("data", MAX_SIZE));
    }
    secret_type_rules(&mut errs, obj);
    errs
}

/// What an update of an `immutable` ConfigMap or Secret may not change, and a Secret's type.
pub fn validate_immutable_data(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let same = |k: &str| {
        normalize(field(new, k).unwrap_or(&Value::Null))
            == normalize(field(old, k).unwrap_or(&Value::Null))
    };
    if field(old, "immutable").and_then(Value::as_bool) == Some(true) {
        if !same("immutable") {
            errs.push(FieldError::forbidden(
                "immutable",
                "field is immutable when `immutable` is set",
            ));
        }
        for k in ["data", "binaryData"] {
            if !same(k) {
                errs.push(FieldError::forbidden(
                    k,
                    "field is immutable when `immutable` is set",
                ));
            }
        }
    }
    if field(old, "type").is_some() && str_field(new, "type") != str_field(old, "type") {
        errs.push(FieldError::invalid(
            "type",
            field(new, "type").cloned().unwrap_or(Value::Null),
            "field is immutable",
        ));
    }
    errs
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::validation::messages as msgs;

    #[test]
    fn config_maps() {
        let ok =
            json!({"metadata": {"name": "c", "namespace": "d"}, "data": {"a.b": "x", "C_1": "y"}});
        assert!(validate_config_map(&ok).is_empty());
        let bad = json!({"metadata": {"name": "c", "namespace": "d"}, "data": {"a b": "x", "k": "y"},
            "binaryData": {"k": "eA=="}});
        assert_eq!(
            msgs(validate_config_map(&bad)),
            vec![
                "data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                "data[k]: Invalid value: \"k\": duplicate of key present in binaryData",
            ]
        );
        let frozen = json!({"metadata": {"name": "c"}, "data": {"a": "1"}, "immutable": true});
        let mut changed = frozen.clone();
        changed["data"]["a"] = json!("2");
        assert_eq!(
            msgs(validate_immutable_data(&changed, &frozen)),
            vec!["data: Forbidden: field is immutable when `immutable` is set"]
        );
    }

    #[test]
    fn secrets() {
        let tls = json!({"metadata": {"name": "s", "namespace": "d"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}});
        assert_eq!(
            msgs(validate_secret(&tls)),
            vec!["data[tls.key]: Required value"]
        );
        let opaque = json!({"metadata": {"name": "s", "namespace": "d"}, "type": "Opaque"});
        let mut retyped = opaque.clone();
        retyped["type"] = json!("kubernetes.io/tls");
        assert_eq!(
            msgs(validate_immutable_data(&retyped, &opaque)),
            vec!["type: Invalid value: \"kubernetes.io/tls\": field is immutable"]
        );
    }
}
