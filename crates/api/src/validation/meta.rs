//! `metadata` checks shared by every kind: names, namespace, labels, annotations, finalizers
//! (upstream's `ValidateObjectMeta`, in `k8s.io/apimachinery/pkg/api/validation/objectmeta.go`).

use super::{field, items, names, str_field};
use crate::field::{FieldError, Path};
use serde_json::Value;

/// How a kind's names are checked (`NameIsDNSSubdomain`, `NameIsDNSLabel`); the flag says
/// whether the name is a `generateName` prefix.
pub(super) type NameFn = fn(&str, bool) -> Vec<String>;

const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// Validates `obj.metadata`. `namespaced` says whether the kind lives in a namespace.
pub(super) fn validate_object_meta(
    obj: &Value,
    namespaced: bool,
    name_fn: NameFn,
) -> Vec<FieldError> {
    let path = Path::new("metadata");
    let meta = field(obj, "metadata").unwrap_or(&Value::Null);
    let mut errs = Vec::new();

    let generate_name = str_field(meta, "generateName").unwrap_or_default();
    if !generate_name.is_empty() {
        for msg in name_fn(generate_name, true) {
            errs.push(FieldError::invalid(
                path.child("generateName"),
                Value::from(generate_name),
                msg,
            ));
        }
    }
    // The server generates the name from generateName before storing, so only a request with
    // neither lacks a name here.
    match str_field(meta, "name").unwrap_or_default() {
        "" if generate_name.is_empty() => errs.push(FieldError::required(
            path.child("name"),
            "name or generateName is required",
        )),
        "" => {}
        name => {
            for msg in name_fn(name, false) {
                errs.push(FieldError::invalid(
                    path.child("name"),
                    Value::from(name),
                    msg,
                ));
            }
        }
    }

    let namespace = str_field(meta, "namespace").unwrap_or_default();
    if namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required(path.child("namespace"), ""));
        } else {
            for msg in names::dns1123_label(namespace) {
                errs.push(FieldError::invalid(
                    path.child("namespace"),
                    Value::from(namespace),
                    msg,
                ));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden(
            path.child("namespace"),
            "not allowed on this type",
        ));
    }

    errs.extend(validate_labels(
        field(meta, "labels"),
        &path.child("labels"),
    ));
    errs.extend(validate_annotations(
        field(meta, "annotations"),
        &path.child("annotations"),
    ));
    errs.extend(validate_finalizers(meta, &path.child("finalizers")));
    errs
}

/// Upstream's `ValidateObjectMeta` with `NameIsDNSSubdomain` for a namespaced kind whose own
/// validation rollwright checks no further than its metadata (ServiceAccount, Endpoints,
/// Ingress, ...: every `ValidateXxxName` of theirs is `NameIsDNSSubdomain`).
pub fn validate_namespaced(obj: &Value) -> Vec<FieldError> {
    validate_object_meta(obj, true, names::name_is_dns_subdomain)
}

/// [`validate_namespaced`] for a cluster-scoped kind (IngressClass, CSIDriver, webhook
/// configurations, ...).
pub fn validate_cluster_scoped(obj: &Value) -> Vec<FieldError> {
    validate_object_meta(obj, false, names::name_is_dns_subdomain)
}

/// What upstream's `rest.BeforeCreate` checks of every kind once the kind's own validation
/// passed: `ValidateObjectMetaAccessor` with `ValidatePathSegmentName`, so that no kind, whatever
/// its own name rule (a CertificateSigningRequest has none), stores a name that is not one
/// segment of its URL.
pub fn validate_common(obj: &Value, namespaced: bool) -> Vec<FieldError> {
    validate_object_meta(obj, namespaced, names::path_segment_name)
}

/// Upstream's `NameIsDNSSubdomain`, for kinds that check names with rules of their own (a
/// CustomResourceDefinition's name is also `<plural>.<group>`).
pub fn name_is_dns_subdomain(name: &str, prefix: bool) -> Vec<String> {
    names::name_is_dns_subdomain(name, prefix)
}

/// A label key (upstream's `ValidateLabelName`); errors are reported on `path` itself.
pub(super) fn validate_label_name(key: &str, path: &Path) -> Vec<FieldError> {
    names::qualified_name(key)
        .into_iter()
        .map(|msg| FieldError::invalid(path, Value::from(key), msg))
        .collect()
}

/// A label map (upstream's `ValidateLabels`): errors name the map, not the key, as upstream does.
pub(super) fn validate_labels(labels: Option<&Value>, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(labels) = labels.and_then(Value::as_object) else {
        return errs;
    };
    for (key, value) in labels {
        errs.extend(validate_label_name(key, path));
        match value.as_str() {
            Some(v) => {
                for msg in names::label_value(v) {
                    errs.push(FieldError::invalid(path, value.clone(), msg));
                }
            }
            None => errs.push(FieldError::invalid(path, value.clone(), "must be a string")),
        }
    }
    errs
}

/// Annotation keys and their total size (upstream's `ValidateAnnotations`).
pub(super) fn validate_annotations(annotations: Option<&Value>, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(annotations) = annotations.and_then(Value::as_object) else {
        return errs;
    };
    let mut total = 0usize;
    for (key, value) in annotations {
        for msg in names::qualified_name(&key.to_lowercase()) {
            errs.push(FieldError::invalid(path, Value::from(key.as_str()), msg));
        }
        total += key.len()
            + value
                .as_str()
                .map_or_else(|| value.to_string().len(), str::len);
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
    errs
}

fn validate_finalizers(meta: &Value, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let finalizers = items(meta, "finalizers");
    for finalizer in finalizers {
        let name = finalizer.as_str().unwrap_or_default();
        for msg in names::qualified_name(name) {
            errs.push(FieldError::invalid(path, finalizer.clone(), msg));
        }
    }
    let has = |name: &str| finalizers.iter().any(|f| f.as_str() == Some(name));
    if has("orphan") && has("foregroundDeletion") {
        errs.push(FieldError::invalid(
            path,
            Value::Array(finalizers.to_vec()),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
    errs
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(obj: Value, namespaced: bool, name_fn: NameFn) -> Vec<String> {
        validate_object_meta(&obj, namespaced, name_fn)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn every_kind_refuses_a_name_that_is_not_a_path_segment() {
        let got: Vec<String> = validate_common(&json!({"metadata": {"name": "evil/x"}}), false)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            got,
            vec![r#"metadata.name: Invalid value: "evil/x": may not contain '/'"#]
        );
        assert!(validate_common(&json!({"metadata": {"name": "Any:Thing"}}), false).is_empty());
    }

    #[test]
    fn dns_subdomain_kinds_refuse_a_slash_with_upstreams_message() {
        let got: Vec<String> =
            validate_namespaced(&json!({"metadata": {"name": "evil/x", "namespace": "default"}}))
                .iter()
                .map(ToString::to_string)
                .collect();
        assert_eq!(
            got,
            vec![
                r#"metadata.name: Invalid value: "evil/x": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#
            ]
        );
        assert_eq!(
            validate_cluster_scoped(&json!({"metadata": {"name": "x", "namespace": "a"}}))
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            vec!["metadata.namespace: Forbidden: not allowed on this type"]
        );
    }

    #[test]
    fn object_meta_rules() {
        let sub: NameFn = names::name_is_dns_subdomain;
        let label: NameFn = names::name_is_dns_label;
        let cases: Vec<(Value, bool, NameFn, Vec<&str>)> = vec![
            (
                json!({"metadata": {"name": "web.v1", "namespace": "default"}}),
                true,
                sub,
                vec![],
            ),
            (
                json!({"metadata": {"generateName": "web-", "namespace": "default"}}),
                true,
                sub,
                vec![],
            ),
            (
                json!({"metadata": {"namespace": "default"}}),
                true,
                sub,
                vec!["metadata.name: Required value: name or generateName is required"],
            ),
            (
                json!({"metadata": {"name": "web"}}),
                true,
                sub,
                vec!["metadata.namespace: Required value"],
            ),
            (
                json!({"metadata": {"name": "n1", "namespace": "x"}}),
                false,
                sub,
                vec!["metadata.namespace: Forbidden: not allowed on this type"],
            ),
            (
                json!({"metadata": {"name": "Web", "namespace": "default"}}),
                true,
                sub,
                vec![
                    "metadata.name: Invalid value: \"Web\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                ],
            ),
            (
                json!({"metadata": {"name": "a.b"}}),
                false,
                label,
                vec![
                    "metadata.name: Invalid value: \"a.b\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                ],
            ),
        ];
        for (obj, namespaced, name_fn, want) in cases {
            assert_eq!(run(obj.clone(), namespaced, name_fn), want, "{obj}");
        }
    }

    #[test]
    fn labels_annotations_finalizers() {
        let sub: NameFn = names::name_is_dns_subdomain;
        let errs = run(
            json!({"metadata": {"name": "x", "namespace": "d", "labels": {"app": "a b", "ok": "v"}}}),
            true,
            sub,
        );
        assert_eq!(errs.len(), 1);
        assert!(errs[0].starts_with(
            "metadata.labels: Invalid value: \"a b\": a valid label must be an empty string"
        ));

        let long = "x".repeat(64);
        let errs = run(
            json!({"metadata": {"name": "x", "namespace": "d", "labels": {"app": long}}}),
            true,
            sub,
        );
        assert_eq!(
            errs[0],
            format!(
                "metadata.labels: Invalid value: \"{}\": must be no more than 63 characters",
                "x".repeat(64)
            )
        );

        let errs = run(
            json!({"metadata": {"name": "x", "namespace": "d", "labels": {"bad key": "v"}}}),
            true,
            sub,
        );
        assert!(
            errs[0]
                .starts_with("metadata.labels: Invalid value: \"bad key\": name part must consist")
        );

        let big = "v".repeat(TOTAL_ANNOTATION_SIZE_LIMIT);
        let errs = run(
            json!({"metadata": {"name": "x", "namespace": "d", "annotations": {"a": big}}}),
            true,
            sub,
        );
        assert_eq!(
            errs,
            vec!["metadata.annotations: Too long: must have at most 262144 bytes"]
        );
        let ok = "v".repeat(1000);
        assert!(run(json!({"metadata": {"name": "x", "namespace": "d", "annotations": {"Example.com/A": ok}}}), true, sub).is_empty());

        let errs = run(
            json!({"metadata": {"name": "x", "namespace": "d", "finalizers": ["orphan", "foregroundDeletion"]}}),
            true,
            sub,
        );
        assert_eq!(errs.len(), 1);
        assert!(errs[0].ends_with("finalizer orphan and foregroundDeletion cannot be both set"));
    }
}
