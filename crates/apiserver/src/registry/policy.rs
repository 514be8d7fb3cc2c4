//! policy/v1 PodDisruptionBudgets: stored and validated; the disruption controller computes
//! their status and `pods/eviction` (see `eviction`) consults and spends it.

use jiff::Timestamp;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::{Value, json};

use super::{Kind, Strategy, Subresource};
use crate::registry::Generation;
use crate::table::{
    AGE, Column, Desc, NAME, Printer, Row, age_cell, col, get, i, name_cell, plain,
};

/// The policy kinds.
pub(super) fn kinds() -> Vec<Kind> {
    vec![
        Kind::of::<PodDisruptionBudget>()
            .short_names(&["pdb"])
            .subresources(&[Subresource::Status])
            .strategy(BudgetStrategy)
            .printer(Printer::Columns { columns, row }),
    ]
}

/// Upstream's `pkg/registry/policy/poddisruptionbudget/strategy.go`.
struct BudgetStrategy;

impl Strategy for BudgetStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        // Go writes the status's non-pointer counters even when zero.
        obj["status"] = json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
            "expectedPods": 0});
    }

    fn validate(&self, obj: &Value) -> Vec<api::field::FieldError> {
        api::validation::policy::validate_pod_disruption_budget(obj)
    }

    fn generation(&self) -> Generation {
        Generation::Spec
    }
}

fn columns() -> Vec<Column> {
    use Desc::Field;
    const SPEC: &str = "io.k8s.api.policy.v1.PodDisruptionBudgetSpec";
    vec![
        NAME,
        col("Min Available", "string", 0, Field(SPEC, "minAvailable")),
        col(
            "Max Unavailable",
            "string",
            0,
            Field(SPEC, "maxUnavailable"),
        ),
        col(
            "Allowed Disruptions",
            "integer",
            0,
            Field(
                "io.k8s.api.policy.v1.PodDisruptionBudgetStatus",
                "disruptionsAllowed",
            ),
        ),
        AGE,
    ]
}

fn int_or_percent(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "N/A".into(),
    }
}

fn row(pdb: &Value, now: Timestamp) -> Row {
    plain(vec![
        name_cell(pdb),
        json!(int_or_percent(get(pdb, &["spec", "minAvailable"]))),
        json!(int_or_percent(get(pdb, &["spec", "maxUnavailable"]))),
        json!(i(pdb, &["status", "disruptionsAllowed"])),
        age_cell(pdb, now),
    ])
}
