//! Namespaces: cluster-scoped, Active at creation, the `kubernetes` finalizer; deleting one is
//! handled by the REST layer (it empties the namespace first).

use api::field::FieldError;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Namespace;
use serde_json::{Value, json};

use crate::{
    registry::{Kind, Strategy, Subresource},
    table::{AGE, Column, Desc, NAME, Printer, Row, age_cell, col, name_cell, plain, s},
};

/// The namespaces kind.
pub(super) fn kind() -> Kind {
    let mut kind = Kind::of::<Namespace>()
        .short_names(&["ns"])
        .subresources(&[Subresource::Status, Subresource::Finalize])
        .strategy(NamespaceStrategy)
        .selectable_fields(&["status.phase"])
        .printer(Printer::Columns { columns, row });
    // Upstream serves no `deletecollection` on namespaces.
    kind.delete_collection = false;
    kind
}

/// Upstream's `pkg/registry/core/namespace/strategy.go`.
struct NamespaceStrategy;

impl Strategy for NamespaceStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"phase": "Active"});
    }

    fn defaults(&self, obj: &mut Value) {
        api::defaults::namespace(obj)
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        api::validation::core_kinds::validate_namespace(obj)
    }

    /// A write of the namespace keeps `spec.finalizers`: only `namespaces/finalize` changes them.
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        let kept = old.pointer("/spec/finalizers").cloned();
        match (kept, new.get_mut("spec").and_then(Value::as_object_mut)) {
            (Some(f), Some(spec)) => {
                spec.insert("finalizers".into(), f);
            }
            (Some(f), None) => new["spec"] = json!({"finalizers": f}),
            (None, Some(spec)) => {
                spec.remove("finalizers");
            }
            (None, None) => {}
        }
    }
}

fn columns() -> Vec<Column> {
    #[allow(unused_imports)]
    use Desc::{Field, Text};
    vec![
        NAME,
        col("Status", "string", 0, Text("The status of the namespace")),
        AGE,
    ]
}

fn row(ns: &Value, now: Timestamp) -> Row {
    plain(vec![
        name_cell(ns),
        json!(s(ns, &["status", "phase"])),
        age_cell(ns, now),
    ])
}
