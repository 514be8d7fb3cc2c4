//! apiregistration.k8s.io/v1 APIServices, stored, validated and printed as upstream's
//! kube-aggregator does (`pkg/registry/apiservice`). What the server does with them (local
//! APIServices, availability, proxying) is [`crate::aggregator`].

use jiff::Timestamp;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use serde_json::{Value, json};

use super::{
    Kind, Subresource,
    strategy::{Reset, Strategy},
};
use crate::table::{AGE, Column, Desc, NAME, Printer, Row, age_cell, col, name_cell, plain};
use api::field::FieldError;

const API_SERVICE: &str = "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIService";

/// The apiregistration.k8s.io kinds.
pub(super) fn kinds() -> Vec<Kind> {
    vec![
        Kind::of::<APIService>()
            .subresources(&[Subresource::Status])
            .categories(&["api-extensions"])
            .strategy(ApiServiceStrategy)
            .printer(Printer::Columns { columns, row }),
    ]
}

/// Upstream's `pkg/registry/apiservice/strategy.go`.
struct ApiServiceStrategy;

impl Strategy for ApiServiceStrategy {
    fn defaults(&self, obj: &mut Value) {
        api::validation::apiregistration::default_api_service(obj);
    }

    /// A local APIService is available from its creation on (upstream's `PrepareForCreate`).
    fn prepare_for_create(&self, obj: &mut Value) {
        if obj.pointer("/spec/service").is_none_or(Value::is_null) {
            obj["status"] = json!({"conditions": [local_condition()]});
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        api::validation::apiregistration::validate_api_service(obj)
    }

    fn status_resets(&self) -> &'static [Reset] {
        // The status strategy keeps spec, labels, annotations, finalizers and owners.
        &[
            Reset::Spec,
            Reset::Labels,
            Reset::Annotations,
            Reset::OwnerReferences,
        ]
    }

    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        let finalizers = old.pointer("/metadata/finalizers").cloned();
        if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            match finalizers {
                Some(f) => meta.insert("finalizers".into(), f),
                None => meta.remove("finalizers"),
            };
        }
    }

    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        api::validation::apiregistration::validate_api_service_status(new)
    }
}

fn columns() -> Vec<Column> {
    vec![
        NAME,
        col("Service", "string", 0, Desc::Field(API_SERVICE, "spec")),
        col("Available", "string", 0, Desc::Field(API_SERVICE, "status")),
        AGE,
    ]
}

/// As upstream prints it: `ns/name` or `Local`, and the Available condition's status (with its
/// reason when not True).
fn row(obj: &Value, now: Timestamp) -> Row {
    let service = obj
        .pointer("/spec/service")
        .filter(|s| !s.is_null())
        .map_or_else(
            || "Local".to_string(),
            |s| {
                format!(
                    "{}/{}",
                    s["namespace"].as_str().unwrap_or(""),
                    s["name"].as_str().unwrap_or("")
                )
            },
        );
    let available = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Available"))
        .map_or_else(
            || "Unknown".to_string(),
            |c| match (c["status"].as_str(), c["reason"].as_str()) {
                (Some("True"), _) => "True".to_string(),
                (Some(st), Some(reason)) => format!("{st} ({reason})"),
                (Some(st), None) => st.to_string(),
                _ => "Unknown".to_string(),
            },
        );
    plain(vec![
        name_cell(obj),
        json!(service),
        json!(available),
        age_cell(obj, now),
    ])
}

/// The condition of a local APIService (upstream's `NewLocalAvailableAPIServiceCondition`).
pub(crate) fn local_condition() -> Value {
    json!({
        "type": "Available",
        "status": "True",
        "lastTransitionTime": crate::object::now_rfc3339(),
        "reason": "Local",
        "message": "Local APIServices are always available",
    })
}
